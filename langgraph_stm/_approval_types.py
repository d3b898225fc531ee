"""The shapes :class:`~langgraph_stm._approval.ApprovalToolNode` speaks: its options, the
requests a reviewer sees and the decisions the reviewer answers with.

They are plain ``TypedDict`` types, so an interrupt's value and a resume value are
ordinary JSON-able dicts; the decision shapes are those of LangChain's
``HumanInTheLoopMiddleware``. The node checks answers itself (see
:mod:`langgraph_stm._approval_review`); nothing here validates.

Example:
    >>> tool_result_id("a1", "c1")
    'stm-tool:a1:c1'
    >>> sorted(EditDecision.__required_keys__)
    ['edited_action', 'type']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NotRequired, TypeAlias

from langchain_core.messages import ToolCall
from typing_extensions import TypedDict

__all__ = [
    "ALL_DECISIONS",
    "Action",
    "ActionRequest",
    "ApprovalRequest",
    "ApproveDecision",
    "BatchedApprovalRequest",
    "Decision",
    "DecisionType",
    "EditDecision",
    "HandleToolErrors",
    "InterruptMode",
    "InterruptOnConfig",
    "RejectDecision",
    "RespondDecision",
    "ReviewConfig",
    "tool_result_id",
]

DecisionType = Literal["approve", "edit", "reject", "respond"]
"""What a reviewer may decide about a gated tool call."""
InterruptMode = Literal["per_call", "batched"]
"""One interrupt per gated call (``"per_call"``) or one for the whole turn."""
HandleToolErrors: TypeAlias = bool | str | Callable[[Exception], str]
"""``True``: a tool that raises gets an error result with the exception text;
``False``: the exception propagates; a ``str``: that text; a callable: its answer."""

ALL_DECISIONS: tuple[DecisionType, ...] = ("approve", "edit", "reject", "respond")
"""Every decision type, in the order requests list them."""


class Action(TypedDict):
    """A tool call as a reviewer sees or edits it."""

    name: str
    """The tool name (an edit cannot change it)."""
    args: dict[str, Any]
    """The arguments the tool runs with."""


class ApproveDecision(TypedDict):
    """Run the call as the model wrote it."""

    type: Literal["approve"]
    """Always ``"approve"``."""


class EditDecision(TypedDict):
    """Run the call with the reviewer's arguments."""

    type: Literal["edit"]
    """Always ``"edit"``."""
    edited_action: Action
    """The call to run; ``name`` must be the call's tool, ``args`` must fit its schema."""


class RejectDecision(TypedDict):
    """Do not run the call; the model gets an error result."""

    type: Literal["reject"]
    """Always ``"reject"``."""
    message: NotRequired[str]
    """The reviewer's reason, shown to the model in the error result."""


class RespondDecision(TypedDict):
    """Do not run the call; the reviewer's text is its result."""

    type: Literal["respond"]
    """Always ``"respond"``."""
    message: str
    """The result the model gets, written by the reviewer."""


Decision: TypeAlias = ApproveDecision | EditDecision | RejectDecision | RespondDecision
"""A reviewer's answer about one gated tool call."""


class InterruptOnConfig(TypedDict):
    """The review policy of one tool (a value of ``interrupt_on``)."""

    allowed_decisions: list[DecisionType]
    """The decisions the reviewer may give; not empty."""
    description: NotRequired[str | Callable[[ToolCall], str]]
    """Text shown to the reviewer, or a function of the tool call returning it."""


class ApprovalRequest(TypedDict):
    """The value of a ``"per_call"`` interrupt: one gated tool call.

    Answer it with one :data:`Decision`, keyed by the interrupt's id. The interrupt's
    ``response_schema`` is the JSON schema of the accepted answers, the tool's argument
    schema included (for edits).
    """

    type: Literal["tool_approval"]
    """Always ``"tool_approval"``, so clients know how to read the interrupt."""
    tool_call_id: str
    """The id of the model's tool call."""
    ai_message_id: str
    """The id of the AIMessage that issued the call."""
    name: str
    """The tool name."""
    args: dict[str, Any]
    """The arguments the model wrote."""
    description: str
    """Text shown to the reviewer."""
    allowed_decisions: list[DecisionType]
    """The decisions accepted for this call."""


class ActionRequest(TypedDict):
    """One gated call of a :class:`BatchedApprovalRequest`."""

    name: str
    """The tool name."""
    args: dict[str, Any]
    """The arguments the model wrote."""
    description: str
    """Text shown to the reviewer."""


class ReviewConfig(TypedDict):
    """The decisions allowed for the call at the same position of a batched request."""

    action_name: str
    """The tool name."""
    allowed_decisions: list[DecisionType]
    """The decisions accepted for this call."""


class BatchedApprovalRequest(TypedDict):
    """The value of a ``"batched"`` interrupt (LangChain's ``HITLRequest`` shape).

    Answer it with ``{"decisions": [...]}``: one :data:`Decision` per action, in order.
    The interrupt's ``response_schema`` shows, per position, the decisions accepted and
    the tool's argument schema (for edits).
    """

    action_requests: list[ActionRequest]
    """The gated calls, in ``tool_calls`` order."""
    review_configs: list[ReviewConfig]
    """The decisions allowed for each call, at the same positions."""
    ai_message_id: str
    """The id of the AIMessage that issued the calls."""
    tool_call_ids: list[str]
    """The ids of the gated calls, at the same positions."""


def tool_result_id(ai_message_id: str, tool_call_id: str) -> str:
    """Return the deterministic id of the result :class:`ApprovalToolNode` gives a call.

    Example:
        >>> tool_result_id("a1", "c1")
        'stm-tool:a1:c1'
    """
    return f"stm-tool:{ai_message_id}:{tool_call_id}"
