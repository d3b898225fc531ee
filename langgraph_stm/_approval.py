"""A tools node that gates tool calls behind human approval: :class:`ApprovalToolNode`.

The node runs the unanswered tool calls of the last ``AIMessage`` of the state, as
LangGraph's prebuilt ``ToolNode`` does, except that calls to the tools named in
``interrupt_on`` wait for a reviewer's decision, asked with ``interrupt()``. The
decisions are those LangChain's ``HumanInTheLoopMiddleware`` users know:

- ``{"type": "approve"}``: run the call as the model wrote it;
- ``{"type": "edit", "edited_action": {"name": ..., "args": {...}}}``: run it with the
  reviewer's arguments; the AI message is replaced in place (same id, the edited args
  in ``tool_calls``), so the history shows the call that ran;
- ``{"type": "reject", "message": "..."}``: do not run it; its result is an error
  ``ToolMessage`` carrying the reviewer's message;
- ``{"type": "respond", "message": "..."}``: do not run it; the reviewer's text is its
  (successful) result.

**Exactly once.** LangGraph re-runs an interrupted node from the top when it resumes,
and a node's update lands only when the node returns. So this node never runs a tool
before every gated call of the turn has its decision, and runs the tools in the one
attempt that returns:

1. *plan*: the last unit's unanswered calls, in ``tool_calls`` order (a complete unit
   means there is nothing to do: the update is ``{}``);
2. *review*, in one of two modes:

   - ``"per_call"`` (the default): one LangGraph task (``langgraph.func.task``) per gated
     call, all started together, each calling ``interrupt()`` with an
     :class:`ApprovalRequest`. Each task has its own namespace, so the interrupts are
     pending at the same time with distinct ids, and
     ``Command(resume={interrupt_id: decision, ...})`` answers any subset of them. A
     task that got its answer returns it, and LangGraph saves a task's return value
     with the checkpoint: a re-run gets the saved decision without asking again, and an
     answer is never applied to another call;
   - ``"batched"``: one interrupt carrying every gated call (a
     :class:`BatchedApprovalRequest`, the ``HITLRequest`` shape), resumed with
     ``{"decisions": [...]}``, one decision per gated call, in order;

3. *execute*: only once every decision is in, the approved, edited and non-gated calls
   run, and the node returns the results in ``tool_calls`` order, right after their AI
   message.

A later turn is a new node task (a new step), so its interrupts are new: an earlier
answer is never re-used. An answer that does not fit the request (a decision the tool
does not allow, an edit that renames the tool, a ``respond`` without a message) is
refused by LangGraph before it is saved (``interrupt(response_schema=...)``), so
``invoke`` raises ``pydantic.ValidationError`` and the same interrupt can be answered
again. When one answer of a resume map is refused, the valid answers sent with it are
already saved (their calls may still be listed as pending, and answering them again
changes nothing); nothing has run, so answering the refused call goes on. Each saved
decision also shows in ``stream_mode="updates"`` as a ``stm_tool_review`` update.
One limit: with ``handle_tool_errors=False`` a tool that raises fails the node, and
LangGraph runs the whole node again on the next attempt, tools that had already run
included (the same as ``ToolNode``).

Tool results get deterministic ids, :func:`tool_result_id` of the AI message id and
the call id, so a re-run produces the same ids. With ``offload_over_tokens`` a result
over the limit is replaced by a short summary plus a reference
(:class:`~langgraph_stm._offload.Offloader`) and its artifact is added to the update.

Example:
    >>> from langchain_core.messages import AIMessage
    >>> from langchain_core.tools import tool
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> from langgraph.graph import START, StateGraph
    >>> from langgraph.types import Command
    >>> from langgraph_stm import STMState
    >>> @tool
    ... def refund(order: str) -> str:
    ...     '''Refund an order.'''
    ...     return f"refunded {order}"
    >>> graph = (StateGraph(STMState)
    ...     .add_node(ApprovalToolNode([refund], interrupt_on={"refund": True}))
    ...     .add_edge(START, "tools").compile(checkpointer=InMemorySaver()))
    >>> config = {"configurable": {"thread_id": "demo"}}
    >>> call = {"name": "refund", "args": {"order": "42"}, "id": "c1"}
    >>> out = graph.invoke({"messages": [AIMessage("", id="a1", tool_calls=[call])]}, config)
    >>> [(i.value["name"], i.value["args"]) for i in out["__interrupt__"]]
    [('refund', {'order': '42'})]
    >>> edit = {"type": "edit", "edited_action": {"name": "refund", "args": {"order": "43"}}}
    >>> out = graph.invoke(Command(resume=edit), config)
    >>> [(m.id, m.content) for m in out["messages"]]
    [('a1', ''), ('stm-tool:a1:c1', 'refunded 43')]
    >>> out["messages"][0].tool_calls[0]["args"]
    {'order': '43'}
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, TypeAlias, cast

from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import get_executor_for_config
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as as_tool
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.func import task
from langgraph.store.base import BaseStore
from langgraph.types import Command, Interrupt, interrupt
from pydantic import AfterValidator, WithJsonSchema
from typing_extensions import TypedDict

from langgraph_stm._errors import InvalidArgumentError
from langgraph_stm._node import StateNode
from langgraph_stm._offload import Offloaded, Offloader, StoreFunction
from langgraph_stm._policy import check_choice, messages_of, read_state
from langgraph_stm._state import Artifact
from langgraph_stm._tokens import TokenCounterLike
from langgraph_stm._units import group_units

__all__ = [
    "Action",
    "ActionRequest",
    "ApprovalRequest",
    "ApprovalToolNode",
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
    """The call to run; ``name`` must be the call's tool."""


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

    Answer it with one :data:`Decision`, keyed by the interrupt's id.
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


# -- the policy ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Gate:
    """The resolved review policy of one tool."""

    allowed: tuple[DecisionType, ...]
    description: str | Callable[[ToolCall], str] | None


def _as_tools(tools: Sequence[BaseTool | Callable[..., Any]]) -> dict[str, BaseTool]:
    given: object = tools
    if not isinstance(given, Sequence) or isinstance(given, str) or not given:
        raise InvalidArgumentError(
            f"tools must be a non-empty list of tools or functions, got {tools!r}"
        )
    by_name: dict[str, BaseTool] = {}
    for item in tools:
        if not isinstance(item, BaseTool) and not callable(item):
            raise InvalidArgumentError(f"tools: {item!r} is neither a BaseTool nor a function")
        converted = item if isinstance(item, BaseTool) else as_tool(item)
        if converted.name in by_name:
            raise InvalidArgumentError(f"tools: two tools are named {converted.name!r}")
        by_name[converted.name] = converted
    return by_name


def _gate(name: str, value: object) -> _Gate | None:
    if value is True:
        return _Gate(ALL_DECISIONS, None)
    if value is False:
        return None
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"interrupt_on[{name!r}] must be True, False or a dict with 'allowed_decisions', "
            f"got {value!r}"
        )
    allowed = value.get("allowed_decisions")
    if isinstance(allowed, str) or not isinstance(allowed, Sequence) or not allowed:
        raise InvalidArgumentError(
            f"interrupt_on[{name!r}]['allowed_decisions'] must be a non-empty list of "
            f"{list(ALL_DECISIONS)}, got {allowed!r}"
        )
    for decision in allowed:
        check_choice(f"interrupt_on[{name!r}]['allowed_decisions'] item", decision, ALL_DECISIONS)
    description = value.get("description")
    if description is not None and not isinstance(description, str) and not callable(description):
        raise InvalidArgumentError(
            f"interrupt_on[{name!r}]['description'] must be a str or a function of the "
            f"tool call, got {description!r}"
        )
    return _Gate(tuple(dict.fromkeys(allowed)), description)


def _resolve_policy(
    interrupt_on: Mapping[str, bool | InterruptOnConfig] | None, tools: Mapping[str, BaseTool]
) -> dict[str, _Gate]:
    """Return the gate of each gated tool; ``None`` gates every tool."""
    if interrupt_on is None:
        return {name: _Gate(ALL_DECISIONS, None) for name in tools}
    if not isinstance(interrupt_on, Mapping):
        raise InvalidArgumentError(
            f"interrupt_on must be a dict of tool name -> policy, got {interrupt_on!r}"
        )
    unknown = sorted(set(interrupt_on) - set(tools))
    if unknown:
        raise InvalidArgumentError(
            f"interrupt_on names {unknown}, which are not among the tools {sorted(tools)}; "
            "a misspelled name would leave its tool ungated"
        )
    gates = {name: _gate(name, value) for name, value in interrupt_on.items()}
    return {name: gate for name, gate in gates.items() if gate is not None}


# -- the plan -----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Turn:
    """The AI message whose calls the node answers, and its unanswered calls in order."""

    ai: AIMessage
    calls: tuple[ToolCall, ...]


def _pending_turn(messages: Sequence[BaseMessage]) -> _Turn | None:
    """The last unit's unanswered calls, or ``None`` when it has none.

    Only the tail is grouped (the last non-tool message and the results after it), so a
    long history costs nothing and a defect elsewhere is not this node's to refuse.
    """
    start = len(messages)
    while start > 0 and isinstance(messages[start - 1], ToolMessage):
        start -= 1
    if start == len(messages) and (not messages or not isinstance(messages[-1], AIMessage)):
        return None
    unit = group_units(messages[max(start - 1, 0) :])[-1]
    head = unit.head
    if not unit.pending or not isinstance(head, AIMessage):
        return None
    waiting = set(unit.unanswered)
    return _Turn(head, tuple(call for call in head.tool_calls if call["id"] in waiting))


def _describe(call: ToolCall, gate: _Gate) -> str:
    if callable(gate.description):
        return gate.description(call)
    if gate.description is not None:
        return gate.description
    arguments = json.dumps(call["args"], default=str, ensure_ascii=False)
    return f"The model wants to call {call['name']!r} with {arguments}. Run it?"


def _approval_request(ai: AIMessage, call: ToolCall, gate: _Gate) -> ApprovalRequest:
    return ApprovalRequest(
        type="tool_approval",
        tool_call_id=call["id"] or "",
        ai_message_id=ai.id or "",
        name=call["name"],
        args=call["args"],
        description=_describe(call, gate),
        allowed_decisions=list(gate.allowed),
    )


def _batched_request(ai: AIMessage, gated: Sequence[tuple[ToolCall, _Gate]]) -> Any:
    return BatchedApprovalRequest(
        action_requests=[
            ActionRequest(name=c["name"], args=c["args"], description=_describe(c, g))
            for c, g in gated
        ],
        review_configs=[
            ReviewConfig(action_name=c["name"], allowed_decisions=list(g.allowed)) for c, g in gated
        ],
        ai_message_id=ai.id or "",
        tool_call_ids=[c["id"] or "" for c, _ in gated],
    )


# -- checking an answer (inside interrupt(), before LangGraph saves it) -------------------
@dataclass(frozen=True)
class _Asked:
    """What an answer is checked against: the call and the decisions it allows."""

    call_id: str
    name: str
    allowed: tuple[DecisionType, ...]

    @classmethod
    def of(cls, call: ToolCall, gate: _Gate) -> _Asked:
        return cls(call["id"] or "", call["name"], gate.allowed)


def _check_decision(value: object, asked: _Asked) -> Decision:
    """Return ``value`` as a :data:`Decision` for the call, or raise InvalidArgumentError."""
    where = f"tool call {asked.call_id!r} ({asked.name})"
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"{where}: expected a decision dict such as {{'type': 'approve'}}, got {value!r}"
        )
    kind = value.get("type")
    if kind not in asked.allowed:
        raise InvalidArgumentError(
            f"{where}: the decision type {kind!r} is not allowed here; allowed: "
            f"{list(asked.allowed)}"
        )
    if kind == "edit":
        action = value.get("edited_action")
        args = action.get("args") if isinstance(action, Mapping) else None
        name = action.get("name", asked.name) if isinstance(action, Mapping) else None
        if not isinstance(args, Mapping) or name != asked.name:
            raise InvalidArgumentError(
                f"{where}: an edit needs 'edited_action': {{'name': {asked.name!r}, "
                f"'args': {{...}}}} (the tool cannot change), got {value!r}"
            )
        return EditDecision(type="edit", edited_action=Action(name=name, args=dict(args)))
    message = value.get("message")
    if (kind == "respond" or message is not None) and not isinstance(message, str):
        raise InvalidArgumentError(f"{where}: {kind!r} needs a string 'message', got {value!r}")
    if kind == "respond":
        return RespondDecision(type="respond", message=cast(str, message))
    if kind == "reject":
        return RejectDecision(type="reject", message=message) if message else {"type": "reject"}
    return ApproveDecision(type="approve")


def _decision_json(asked: _Asked) -> dict[str, Any]:
    """The JSON schema of the answers accepted for the call (published to clients)."""
    kinds: dict[str, dict[str, Any]] = {
        "approve": {},
        "edit": {
            "edited_action": {
                "type": "object",
                "properties": {"name": {"const": asked.name}, "args": {"type": "object"}},
                "required": ["args"],
            }
        },
        "reject": {"message": {"type": "string"}},
        "respond": {"message": {"type": "string"}},
    }
    required = {"edit": ["edited_action"], "respond": ["message"]}
    return {
        "oneOf": [
            {
                "type": "object",
                "properties": {"type": {"const": kind}, **kinds[kind]},
                "required": ["type", *required.get(kind, [])],
            }
            for kind in asked.allowed
        ]
    }


def _decision_schema(asked: _Asked) -> Any:
    """The ``response_schema`` of a per-call interrupt."""

    def check(value: dict[str, Any]) -> Decision:
        return _check_decision(value, asked)

    return Annotated[dict[str, Any], AfterValidator(check), WithJsonSchema(_decision_json(asked))]


def _batch_schema(asked: Sequence[_Asked]) -> Any:
    """The ``response_schema`` of a batched interrupt: ``{"decisions": [...]}`` in order."""

    def check(value: dict[str, Any]) -> dict[str, list[Decision]]:
        decisions = value.get("decisions")
        if not isinstance(decisions, list) or len(decisions) != len(asked):
            raise InvalidArgumentError(
                f"expected {{'decisions': [...]}} with {len(asked)} decision(s), one per gated "
                f"call {[a.call_id for a in asked]}, got {value!r}"
            )
        return {"decisions": [_check_decision(d, a) for d, a in zip(decisions, asked, strict=True)]}

    items = [_decision_json(a) for a in asked]
    shown = {
        "type": "object",
        "properties": {
            "decisions": {
                "type": "array",
                "prefixItems": items,
                "minItems": len(items),
                "maxItems": len(items),
            }
        },
        "required": ["decisions"],
    }
    return Annotated[dict[str, Any], AfterValidator(check), WithJsonSchema(shown)]


def _ask(request: ApprovalRequest) -> Decision:
    """One gated call's review, as a task: its answer is saved apart from the others'.

    Its input is the (serializable) request alone; the answer's schema is rebuilt from it.
    """
    asked = _Asked(request["tool_call_id"], request["name"], tuple(request["allowed_decisions"]))
    decision: Decision = interrupt(request, response_schema=_decision_schema(asked))
    return decision


# (cast: mypy cannot pick task()'s overload for a function returning a union)
_review: Callable[[ApprovalRequest], Any] = cast(Any, task(name="stm_tool_review"))(_ask)


def _collect(outcomes: Sequence[object]) -> list[Decision]:
    """The decisions of the review tasks, or raise what they raised.

    Every task has run before this is called, so all their interrupts surface at once:
    they are combined into one ``GraphInterrupt``, as LangGraph's runner combines the
    interrupts of parallel tasks (``langgraph.pregel._runner._panic_or_proceed``).
    """
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    failure = next((e for e in errors if not isinstance(e, GraphInterrupt)), None)
    if failure is not None:
        raise failure
    if errors:
        interrupts: list[Interrupt] = [i for e in errors for i in e.args[0]]
        raise GraphInterrupt(tuple(interrupts))
    return cast(list[Decision], list(outcomes))


def _sync_outcomes(futures: Sequence[Any]) -> list[object]:
    outcomes: list[object] = []
    for future in futures:
        try:
            outcomes.append(future.result())
        except Exception as exc:  # every task is awaited before anything is raised
            outcomes.append(exc)
    return outcomes


# -- applying the decisions ---------------------------------------------------------------
@dataclass(frozen=True)
class _Step:
    """One call of the turn: run ``call`` (with the reviewer's args), or give ``answer``."""

    call: ToolCall
    answer: ToolMessage | None = None
    edited: bool = False


def _answer(ai: AIMessage, call: ToolCall, content: str, *, error: bool) -> ToolMessage:
    return ToolMessage(
        content=content,
        tool_call_id=call["id"] or "",
        name=call["name"],
        status="error" if error else "success",
        id=tool_result_id(ai.id or "", call["id"] or ""),
    )


def _rejection(call: ToolCall, reason: str | None) -> str:
    head = (
        f"The reviewer rejected the call to {call['name']!r} (id {call['id']!r}); it did not run."
    )
    if reason:
        return f"{head} Reviewer's message: {reason}"
    return f"{head} Do not call it again unless the user asks for it."


def _steps(
    turn: _Turn, decisions: Mapping[str, Decision], tools: Mapping[str, BaseTool]
) -> list[_Step]:
    steps: list[_Step] = []
    for call in turn.calls:
        decision = decisions.get(call["id"] or "")
        if call["name"] not in tools:
            known = ", ".join(sorted(tools))
            text = f"Error: {call['name']!r} is not a tool here; the tools are: {known}."
            steps.append(_Step(call, _answer(turn.ai, call, text, error=True)))
        elif decision is None or decision["type"] == "approve":
            steps.append(_Step(call))
        elif decision["type"] == "edit":
            args = dict(decision["edited_action"]["args"])
            steps.append(_Step(ToolCall(**{**call, "args": args}), edited=True))
        elif decision["type"] == "reject":
            text = _rejection(call, decision.get("message"))
            steps.append(_Step(call, _answer(turn.ai, call, text, error=True)))
        else:
            steps.append(_Step(call, _answer(turn.ai, call, decision["message"], error=False)))
    return steps


def _edited_message(ai: AIMessage, steps: Sequence[_Step]) -> AIMessage | None:
    """``ai`` with the reviewer's args in its calls (same id), or ``None`` without edits.

    The provider-format copies of the calls (OpenAI ``additional_kwargs["tool_calls"]``,
    Anthropic ``tool_use`` content blocks) are updated too, so no format shows the
    model's original arguments as the ones that ran.
    """
    edits = {step.call["id"]: step.call["args"] for step in steps if step.edited}
    if not edits:
        return None
    calls = [
        ToolCall(**{**c, "args": edits[c["id"]]}) if c["id"] in edits else c for c in ai.tool_calls
    ]
    update: dict[str, Any] = {"tool_calls": calls}
    raw = ai.additional_kwargs.get("tool_calls")
    if isinstance(raw, list):
        update["additional_kwargs"] = {
            **ai.additional_kwargs,
            "tool_calls": [_edit_raw_call(item, edits) for item in raw],
        }
    if isinstance(ai.content, list):
        update["content"] = [_edit_block(block, edits) for block in ai.content]
    return ai.model_copy(update=update)


def _edit_raw_call(item: object, edits: Mapping[str | None, dict[str, Any]]) -> object:
    if not isinstance(item, dict) or item.get("id") not in edits:
        return item
    function = item.get("function")
    if not isinstance(function, dict):
        return item
    arguments = json.dumps(edits[item["id"]], ensure_ascii=False)
    return {**item, "function": {**function, "arguments": arguments}}


def _edit_block(block: object, edits: Mapping[str | None, dict[str, Any]]) -> object:
    if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("id") in edits:
        return {**block, "input": edits[block["id"]]}
    return block


# -- running the tools --------------------------------------------------------------------
def _as_result(output: object, ai: AIMessage, call: ToolCall) -> ToolMessage:
    """The tool's output as the call's result, with the deterministic id."""
    if isinstance(output, Command):
        raise InvalidArgumentError(
            f"tool {call['name']!r} returned a Command; ApprovalToolNode takes results "
            "only (return a string, content blocks or a ToolMessage)"
        )
    if not isinstance(output, ToolMessage):
        content = output if isinstance(output, str | list) else json.dumps(output, default=str)
        output = ToolMessage(content=content, tool_call_id=call["id"] or "")
    return output.model_copy(
        update={
            "id": tool_result_id(ai.id or "", call["id"] or ""),
            "tool_call_id": call["id"] or "",
            "name": call["name"],
        }
    )


def _error_result(
    exc: Exception, handler: HandleToolErrors, ai: AIMessage, call: ToolCall
) -> ToolMessage:
    if handler is False or isinstance(exc, GraphBubbleUp):
        raise exc
    if isinstance(handler, str):
        content = handler
    elif callable(handler):
        content = handler(exc)
    else:
        content = f"Error: the tool {call['name']!r} raised {type(exc).__name__}: {exc}"
    return _answer(ai, call, content, error=True)


def _tool_input(call: ToolCall) -> dict[str, Any]:
    return {**call, "type": "tool_call"}


def _require_run(node: str, gated: Sequence[tuple[ToolCall, _Gate]]) -> None:
    try:
        get_config()
    except RuntimeError:
        ids = [call["id"] for call, _ in gated]
        raise InvalidArgumentError(
            f"{node}: the tool calls {ids} need a reviewer's decision, which is asked with "
            "interrupt(): run the node in a graph compiled with a checkpointer"
        ) from None


# -- the node -----------------------------------------------------------------------------
class ApprovalToolNode(StateNode):
    """Run the last AI message's tool calls; gated ones only after a reviewer decides.

    Args:
        tools: the tools, as ``BaseTool`` objects or plain functions (converted with
            ``langchain_core.tools.tool``); names must be unique.
        interrupt_on: tool name -> ``True`` (every decision allowed), ``False`` (not
            gated) or an :class:`InterruptOnConfig`. Tools it does not name run without
            review; ``None`` gates every tool. A name that is not a tool is refused.
        interrupt_mode: ``"per_call"`` (one interrupt per gated call, answered by id)
            or ``"batched"`` (one interrupt per turn); see the module docstring.
        name: the node name.
        messages_key: the state key holding the messages.
        handle_tool_errors: see :data:`HandleToolErrors`.
        offload_over_tokens: a result over this many tokens is offloaded (see
            :class:`~langgraph_stm._offload.Offloader`); ``None`` never offloads.
        token_counter, store: passed to the offloader (only with ``offload_over_tokens``).

    The update is ``{messages_key: [edited AI message?, result, ...]}`` plus
    ``"artifacts"`` when a result was offloaded; ``{}`` when the last unit has no
    unanswered call. A call to an unknown tool gets an error result, never an
    exception. Tools read their arguments only: ``InjectedState`` and ``ToolRuntime``
    parameters are not filled in (``InjectedToolCallId`` is).
    """

    def __init__(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        interrupt_on: Mapping[str, bool | InterruptOnConfig] | None = None,
        interrupt_mode: InterruptMode = "per_call",
        name: str = "tools",
        messages_key: str = "messages",
        handle_tool_errors: HandleToolErrors = True,
        offload_over_tokens: int | None = None,
        token_counter: TokenCounterLike | None = None,
        store: BaseStore | StoreFunction | None = None,
    ) -> None:
        super().__init__(name=name)
        self.node_name = name
        self.tools_by_name = _as_tools(tools)
        self.gates = _resolve_policy(interrupt_on, self.tools_by_name)
        check_choice("interrupt_mode", interrupt_mode, InterruptMode)
        self.interrupt_mode: InterruptMode = interrupt_mode
        if not isinstance(messages_key, str) or not messages_key:
            raise InvalidArgumentError(
                f"messages_key must be a non-empty str, got {messages_key!r}"
            )
        self.messages_key = messages_key
        if not isinstance(handle_tool_errors, bool | str) and not callable(handle_tool_errors):
            raise InvalidArgumentError(
                "handle_tool_errors must be True, False, a str or a function of the "
                f"exception, got {handle_tool_errors!r}"
            )
        self.handle_tool_errors = handle_tool_errors
        if offload_over_tokens is None and (token_counter is not None or store is not None):
            raise InvalidArgumentError(
                "token_counter and store are used to offload large results: pass "
                "offload_over_tokens= too"
            )
        self.offloader = (
            None
            if offload_over_tokens is None
            else Offloader(offload_over_tokens, token_counter=token_counter, store=store)
        )

    def __repr__(self) -> str:
        return (
            f"ApprovalToolNode(tools={sorted(self.tools_by_name)}, gated={sorted(self.gates)}, "
            f"interrupt_mode={self.interrupt_mode!r}, name={self.name!r})"
        )

    # -- the three phases, shared by run and arun --
    def _turn(self, state: Any) -> _Turn | None:
        values = read_state(state, self.node_name, (self.messages_key,))
        return _pending_turn(messages_of(values, self.messages_key, self.node_name))

    def _gated(self, turn: _Turn) -> list[tuple[ToolCall, _Gate]]:
        gated = [(c, self.gates.get(c["name"])) for c in turn.calls]
        return [(c, g) for c, g in gated if g is not None and c["name"] in self.tools_by_name]

    def _ask_batch(self, turn: _Turn, gated: Sequence[tuple[ToolCall, _Gate]]) -> list[Decision]:
        answer: dict[str, list[Decision]] = interrupt(
            _batched_request(turn.ai, gated),
            response_schema=_batch_schema([_Asked.of(c, g) for c, g in gated]),
        )
        return answer["decisions"]

    def _update(
        self, turn: _Turn, steps: Sequence[_Step], results: list[ToolMessage], offloaded: list[Any]
    ) -> dict[str, Any]:
        messages: list[BaseMessage] = list(results)
        artifacts: list[Artifact] = []
        for position, done in enumerate(offloaded):
            if isinstance(done, Offloaded):
                messages[position] = done.message
                artifacts.append(done.artifact)
        edited = _edited_message(turn.ai, steps)
        update: dict[str, Any] = {self.messages_key: [edited, *messages] if edited else messages}
        if artifacts:
            update["artifacts"] = artifacts
        return update

    def _run_step(self, turn: _Turn, step: _Step, config: RunnableConfig | None) -> ToolMessage:
        if step.answer is not None:
            return step.answer
        try:
            output = self.tools_by_name[step.call["name"]].invoke(_tool_input(step.call), config)
            return _as_result(output, turn.ai, step.call)
        except Exception as exc:
            return _error_result(exc, self.handle_tool_errors, turn.ai, step.call)

    async def _arun_step(
        self, turn: _Turn, step: _Step, config: RunnableConfig | None
    ) -> ToolMessage:
        if step.answer is not None:
            return step.answer
        tool = self.tools_by_name[step.call["name"]]
        try:
            output = await tool.ainvoke(_tool_input(step.call), config)
            return _as_result(output, turn.ai, step.call)
        except Exception as exc:
            return _error_result(exc, self.handle_tool_errors, turn.ai, step.call)

    # -- sync --
    def run(self, state: Any, config: RunnableConfig | None) -> dict[str, Any]:
        """Return the results of the last AI message's calls, asking for reviews first."""
        turn = self._turn(state)
        if turn is None:
            return {}
        decisions: dict[str, Decision] = {}
        if gated := self._gated(turn):
            _require_run(self.node_name, gated)
            if self.interrupt_mode == "batched":
                answers = self._ask_batch(turn, gated)
            else:
                futures = [_review(_approval_request(turn.ai, c, g)) for c, g in gated]
                answers = _collect(_sync_outcomes(futures))
            decisions = {c["id"] or "": d for (c, _), d in zip(gated, answers, strict=True)}
        steps = _steps(turn, decisions, self.tools_by_name)
        if sum(step.answer is None for step in steps) > 1:
            with get_executor_for_config(config) as executor:
                results = list(executor.map(lambda s: self._run_step(turn, s, config), steps))
        else:
            results = [self._run_step(turn, step, config) for step in steps]
        offloader = self.offloader
        offloaded = (
            [] if offloader is None else [offloader.offload(m, config=config) for m in results]
        )
        return self._update(turn, steps, results, offloaded)

    # -- async --
    async def arun(self, state: Any, config: RunnableConfig | None) -> dict[str, Any]:
        """Async twin of :meth:`run`: async tools are awaited, calls run concurrently."""
        turn = self._turn(state)
        if turn is None:
            return {}
        decisions: dict[str, Decision] = {}
        if gated := self._gated(turn):
            _require_run(self.node_name, gated)
            if self.interrupt_mode == "batched":
                answers = self._ask_batch(turn, gated)
            else:
                futures = [_review(_approval_request(turn.ai, c, g)) for c, g in gated]
                answers = _collect(await asyncio.gather(*futures, return_exceptions=True))
            decisions = {c["id"] or "": d for (c, _), d in zip(gated, answers, strict=True)}
        steps = _steps(turn, decisions, self.tools_by_name)
        results = list(await asyncio.gather(*(self._arun_step(turn, s, config) for s in steps)))
        offloader = self.offloader
        offloaded = (
            []
            if offloader is None
            else [await offloader.aoffload(m, config=config) for m in results]
        )
        return self._update(turn, steps, results, offloaded)
