"""A tools node that gates tool calls behind human approval: :class:`ApprovalToolNode`.

The node runs the unanswered tool calls of the last ``AIMessage`` of the state, as
LangGraph's prebuilt ``ToolNode`` does, except that calls to the tools named in
``interrupt_on`` wait for a reviewer's decision, asked with ``interrupt()``. The
decisions are those LangChain's ``HumanInTheLoopMiddleware`` users know:

- ``{"type": "approve"}``: run the call as the model wrote it;
- ``{"type": "edit", "edited_action": {"name": ..., "args": {...}}}``: run it with the
  reviewer's arguments, which must fit the tool's argument schema; the AI message is
  replaced in place (same id, the edited args in ``tool_calls`` and in the provider
  copies of the call), so the history shows the call that ran;
- ``{"type": "reject", "message": "..."}``: do not run it; its result is an error
  ``ToolMessage`` carrying the reviewer's message;
- ``{"type": "respond", "message": "..."}``: do not run it; the reviewer's text is its
  (successful) result.

**Exactly once.** LangGraph re-runs an interrupted node from the top when it resumes,
and a node's update lands only when the node returns. So the node never runs a tool
before every gated call of the turn has its decision, and every step whose work must
not be repeated is a LangGraph task (``langgraph.func.task``): LangGraph saves a task's
return value with the checkpoint, and a re-run of the node gets it back instead of
running the task again.

1. *plan*: the last unit's unanswered calls, in ``tool_calls`` order (a complete unit
   means there is nothing to do: the update is ``{}``);
2. *review*, in one of two modes:

   - ``"per_call"`` (the default): one task (``stm_tool_review``) per gated call, all
     started together, each calling ``interrupt()`` with an :class:`ApprovalRequest`.
     Each task has its own namespace, so the interrupts are pending at the same time
     with distinct ids, and ``Command(resume={interrupt_id: decision, ...})`` answers
     any subset of them. A task that got its answer returns it: a re-run gets the saved
     decision without asking again, and an answer is never applied to another call;
   - ``"batched"``: one interrupt carrying every gated call (a
     :class:`BatchedApprovalRequest`, the ``HITLRequest`` shape), resumed with
     ``{"decisions": [...]}``, one decision per gated call, in order;

3. *execute*: only once every decision is in, each approved, edited or non-gated call
   runs as its own task (``stm_tool_call``); they start in ``tool_calls`` order and run
   concurrently, and the node returns the results in ``tool_calls`` order, right after
   their AI message. A tool may call ``interrupt()`` itself (a confirmation, a
   question): the calls that finished keep their saved results and never run again,
   every interrupt of the turn is raised at once (one task each, so distinct ids, none
   lost), and each resume value reaches the tool whose interrupt it names; when the
   node runs again only the interrupted tools go on.

A later turn is a new node task (a new step), so its interrupts are new: an earlier
answer is never re-used. An answer that does not fit the request (a decision the tool
does not allow, an edit that renames the tool or whose args do not fit the tool's
schema, a ``respond`` without a message) is refused by LangGraph before it is saved
(``interrupt(response_schema=...)``; the published schema includes the tool's argument
schema), so ``invoke`` raises ``pydantic.ValidationError`` and the same interrupt can
be answered again. When one answer of a resume map is refused, the valid answers sent
with it are already saved (their calls may still be listed as pending, and answering
them again changes nothing); nothing has run, so answering the refused call goes on.
Each saved decision also shows in ``stream_mode="updates"`` as a ``stm_tool_review``
update, each result as a ``stm_tool_call`` update. With ``handle_tool_errors=False`` a
tool that raises fails the node; the calls that finished keep their saved results, and
the next attempt runs the failed call only.

**Answering a tool's own interrupt.** Answer it by id, or with a plain value when it is
the only interrupt pending. LangGraph keeps a plain resume value among the step's
writes after an interrupt took it and gives it to the next interrupt of the step that
has no answer yet (LangGraph issue 8837; a node that calls ``interrupt()`` twice gets
the same). So a tool that asks after its review was answered with a plain value could
get the review's answer. In a run resumed with an id map the node drops that stale
value before the tools start; it cannot tell a re-run with ``invoke(None)`` from a
resume, so do not re-run a turn with ``None`` while one of its tools is asking: resume
it with the answer.

**Where it runs.** Reviews need ``interrupt()``, so gated calls need a graph run with a
checkpointer: outside a graph (``node(state)``, or inside a plain Runnable) and in a
graph compiled without a checkpointer (where an interrupt could never be resumed) they
raise :class:`~langgraph_stm._errors.InvalidArgumentError`. Calls that are not gated
run there too, directly (nothing to save them with). Use ``invoke`` from sync code and
``ainvoke`` from async code (``add_node`` does the right thing); the sync entry point
inside an ``async def`` node cannot wait for its tasks and raises.

**Subgraphs.** In a graph used as a subgraph (a node of another graph), LangGraph lists
each interrupt raised from a task twice in ``__interrupt__`` (its own behaviour for
task interrupts seen through a parent): dedupe by ``Interrupt.id``, e.g.
``{i.id: i for i in out["__interrupt__"]}``, and resume by id as usual.

**Tools.** Tools get their arguments, the call id (``InjectedToolCallId``) and the run's
config (a ``RunnableConfig`` parameter): a tool with other injected parameters
(``InjectedState``, ``InjectedStore``, ``ToolRuntime``...) or declared to return a
``Command`` is refused when the node is built (see :mod:`langgraph_stm._approval_tools`).
A tool that returns a ``Command`` anyway gets an error result saying it was not applied
(it ran; failing would run it again).

Tool results get deterministic ids, :func:`tool_result_id` of the AI message id and
the call id, so a re-run produces the same ids. With ``offload_over_tokens`` a result
over the limit is replaced by a short summary plus a reference
(:class:`~langgraph_stm._offload.Offloader`) and its artifact is added to the update
under ``artifacts_key``. The state must have that key (a list with a reducer, as
``STMState``'s ``artifacts``): on a state without it (``MessagesState``) the node
raises ``InvalidArgumentError`` on its first run rather than drop the records;
``artifacts_key=None`` offloads without recording artifacts.

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
import threading
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import get_executor_for_config
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.func import task
from langgraph.store.base import BaseStore
from langgraph.types import interrupt

from langgraph_stm._approval_review import (
    ArgsSchema,
    Asked,
    Gate,
    approval_request,
    batch_schema,
    batched_request,
    collect,
    decision_schema,
    resolve_policy,
)
from langgraph_stm._approval_tools import (
    answer,
    args_schema,
    as_result,
    as_tools,
    error_result,
    tool_input,
)
from langgraph_stm._approval_types import (
    Action,
    ActionRequest,
    ApprovalRequest,
    ApproveDecision,
    BatchedApprovalRequest,
    Decision,
    DecisionType,
    EditDecision,
    HandleToolErrors,
    InterruptMode,
    InterruptOnConfig,
    RejectDecision,
    RespondDecision,
    ReviewConfig,
    tool_result_id,
)
from langgraph_stm._errors import InvalidArgumentError
from langgraph_stm._node import GraphRun, StateNode, graph_run
from langgraph_stm._offload import Offloaded, Offloader, StoreFunction
from langgraph_stm._policy import check_choice, check_key, messages_of, read_state
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


# -- the plan -----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Turn:
    """The AI message whose calls the node answers, and its unanswered calls in order."""

    ai: AIMessage
    calls: tuple[ToolCall, ...]

    @property
    def ai_id(self) -> str:
        return self.ai.id or ""


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


# -- applying the decisions ---------------------------------------------------------------
@dataclass(frozen=True)
class _Step:
    """One call of the turn: run ``call`` (with the reviewer's args), or give ``answer``."""

    call: ToolCall
    answer: ToolMessage | None = None
    edited: bool = False


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
            steps.append(_Step(call, answer(turn.ai_id, call, text, error=True)))
        elif decision is None or decision["type"] == "approve":
            steps.append(_Step(call))
        elif decision["type"] == "edit":
            args = dict(decision["edited_action"]["args"])
            steps.append(_Step(ToolCall(**{**call, "args": args}), edited=True))
        elif decision["type"] == "reject":
            text = _rejection(call, decision.get("message"))
            steps.append(_Step(call, answer(turn.ai_id, call, text, error=True)))
        else:
            steps.append(_Step(call, answer(turn.ai_id, call, decision["message"], error=False)))
    return steps


def _edited_message(ai: AIMessage, steps: Sequence[_Step]) -> AIMessage | None:
    """``ai`` with the reviewer's args in its calls (same id), or ``None`` without edits.

    The provider-format copies of the calls are updated too, so no format shows the
    model's original arguments as the ones that ran: OpenAI ``additional_kwargs
    ["tool_calls"]``, and the content blocks carrying the call id: LangChain v1
    ``tool_call``, Anthropic ``tool_use``, OpenAI Responses ``function_call``.
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
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind == "tool_use" and block.get("id") in edits:  # Anthropic
        return {**block, "input": edits[block["id"]]}
    if kind == "tool_call" and block.get("id") in edits:  # LangChain v1 standard block
        return {**block, "args": edits[block["id"]]}
    if kind == "function_call" and block.get("call_id") in edits:  # OpenAI Responses
        arguments = json.dumps(edits[block["call_id"]], ensure_ascii=False)
        return {**block, "arguments": arguments}
    return block


# -- where the node runs ------------------------------------------------------------------
def _check_reviewable(node: str, run: GraphRun | None, gated: Sequence[ToolCall]) -> None:
    """Raise unless the run can ask for reviews: a graph run with a checkpointer."""
    ids = [call["id"] for call in gated]
    if run is None:
        raise InvalidArgumentError(
            f"{node}: the tool calls {ids} need a reviewer's decision, which is asked with "
            "interrupt(): run the node in a graph compiled with a checkpointer"
        )
    if get_config().get("configurable", {}).get(CONFIG_KEY_CHECKPOINTER) is None:
        raise InvalidArgumentError(
            f"{node}: the tool calls {ids} need a reviewer's decision, asked with "
            "interrupt(), but the graph was compiled without a checkpointer, so the "
            "interrupt could never be resumed: compile(checkpointer=...) it"
        )


# LangGraph keeps a plain (not keyed by id) resume value among the step's pending writes
# after an interrupt consumed it, and gives it to the next interrupt of the step that has
# no answer (langgraph issue #8837). The review consumes such a value; a tool that
# interrupts later in the same step would get it in a later run. A run resumed with a
# map was given no plain value, so any there is stale: it is consumed before the tools
# run. LangGraph has no public API for this; the two configurable keys are
# langgraph._internal._constants.CONFIG_KEY_RESUME_MAP and CONFIG_KEY_SCRATCHPAD
# (a test fails loudly if they change).
RESUME_MAP_KEY = "__pregel_resume_map"
SCRATCHPAD_KEY = "__pregel_scratchpad"


def _drop_stale_resume() -> None:
    configurable = get_config().get("configurable", {})
    if RESUME_MAP_KEY not in configurable:
        return
    consume = getattr(configurable.get(SCRATCHPAD_KEY), "get_null_resume", None)
    if callable(consume):
        consume(True)


# Set by the node around each tool task it starts in a sync run; LangGraph copies the
# context into the task's thread, so the task can say it started (see _start_in_order).
_STARTED: ContextVar[threading.Event | None] = ContextVar("stm_tool_started", default=None)


def _start_in_order(start: Callable[[], Any]) -> Any:
    """Call ``start`` (which starts a task) and wait until the task began or is done.

    The tasks of a turn run concurrently, but each begins only once the previous one
    has, so the tools start in ``tool_calls`` order (LangGraph alone starts them in no
    particular order). A saved result is a future that is already done.
    """
    started = threading.Event()
    token = _STARTED.set(started)
    try:
        future = start()
    finally:
        _STARTED.reset(token)
    future.add_done_callback(lambda _: started.set())
    started.wait()
    return future


def _sync_outcomes(futures: Sequence[Any]) -> list[object]:
    outcomes: list[object] = []
    for future in futures:
        try:
            outcomes.append(future.result())
        except Exception as exc:  # every task is awaited before anything is raised
            outcomes.append(exc)
    return outcomes


# -- the node -----------------------------------------------------------------------------
class ApprovalToolNode(StateNode):
    """Run the last AI message's tool calls; gated ones only after a reviewer decides.

    Args:
        tools: the tools, as ``BaseTool`` objects or plain functions (converted with
            ``langchain_core.tools.tool``); names must be unique. A tool with injected
            parameters other than ``InjectedToolCallId`` (``InjectedState``,
            ``InjectedStore``, ``ToolRuntime``...) or declared to return a ``Command``
            is refused (the node fills neither, nor applies commands).
        interrupt_on: tool name -> ``True`` (every decision allowed), ``False`` (not
            gated) or an :class:`InterruptOnConfig`. Tools it does not name run without
            review; ``None`` gates every tool. A name that is not a tool is refused.
        interrupt_mode: ``"per_call"`` (one interrupt per gated call, answered by id)
            or ``"batched"`` (one interrupt per turn); see the module docstring.
        name: the node name.
        messages_key: the state key holding the messages (read and updated).
        artifacts_key: the state key the artifact records of offloaded results are
            added to; ``None`` records none. Only used with ``offload_over_tokens``.
        handle_tool_errors: see :data:`HandleToolErrors`.
        offload_over_tokens: a result over this many tokens is offloaded (see
            :class:`~langgraph_stm._offload.Offloader`); ``None`` never offloads.
        token_counter: passed to the offloader (only with ``offload_over_tokens``).
        store: passed to the offloader (only with ``offload_over_tokens``).

    The update is ``{messages_key: [edited AI message?, result, ...]}`` plus
    ``{artifacts_key: [...]}`` when a result was offloaded; ``{}`` when the last unit
    has no unanswered call. A call to an unknown tool gets an error result, never an
    exception.
    """

    def __init__(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        interrupt_on: Mapping[str, bool | InterruptOnConfig] | None = None,
        interrupt_mode: InterruptMode = "per_call",
        name: str = "tools",
        messages_key: str = "messages",
        artifacts_key: str | None = "artifacts",
        handle_tool_errors: HandleToolErrors = True,
        offload_over_tokens: int | None = None,
        token_counter: TokenCounterLike | None = None,
        store: BaseStore | StoreFunction | None = None,
    ) -> None:
        super().__init__(name=name)
        self.tools_by_name = as_tools(tools)
        self._gates = resolve_policy(interrupt_on, self.tools_by_name)
        self._schemas: dict[str, ArgsSchema] = {
            tool_name: args_schema(tool) for tool_name, tool in self.tools_by_name.items()
        }
        check_choice("interrupt_mode", interrupt_mode, InterruptMode)
        self.interrupt_mode: InterruptMode = interrupt_mode
        self.messages_key = check_key("messages_key", messages_key)
        self.artifacts_key = (
            None if artifacts_key is None else check_key("artifacts_key", artifacts_key)
        )
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
        # The tasks (see the module docstring). Their names, not the functions, identify
        # a saved result (with the call's position in the node), so the sync and async
        # runs of one thread share them. (cast: mypy cannot pick task()'s overload.)
        as_task = cast(Any, task)
        self._review_task: Callable[[ApprovalRequest], Any] = as_task(name="stm_tool_review")(
            self._review
        )
        self._tool_task: Callable[[str, ToolCall], Any] = as_task(name="stm_tool_call")(
            self._call_tool
        )
        self._atool_task: Callable[[str, ToolCall], Any] = as_task(name="stm_tool_call")(
            self._acall_tool
        )

    def __repr__(self) -> str:
        return (
            f"ApprovalToolNode(tools={sorted(self.tools_by_name)}, gated={sorted(self._gates)}, "
            f"interrupt_mode={self.interrupt_mode!r}, name={self.name!r})"
        )

    @property
    def _where(self) -> str:
        """How errors name the node."""
        return f"ApprovalToolNode {self.name!r}"

    # -- the phases, shared by run and arun --
    def _turn(self, state: Any) -> _Turn | None:
        keys = (self.messages_key, *((self.artifacts_key,) if self.artifacts_key else ()))
        values = read_state(state, self._where, keys)
        turn = _pending_turn(messages_of(values, self.messages_key, self._where))
        keyed = self.offloader is not None and self.artifacts_key
        if turn is not None and keyed and self.artifacts_key not in values:
            raise InvalidArgumentError(
                f"{self._where}: offload_over_tokens records each offloaded result under "
                f"{self.artifacts_key!r}, which the state does not have (keys: "
                f"{sorted(map(str, values))}): use a state with that list (STMState has "
                "'artifacts'), pass artifacts_key= to name another, or "
                "artifacts_key=None to keep no records"
            )
        return turn

    def _gated(self, turn: _Turn) -> list[tuple[ToolCall, Gate]]:
        gated = [(c, self._gates.get(c["name"])) for c in turn.calls]
        return [(c, g) for c, g in gated if g is not None and c["name"] in self.tools_by_name]

    def _asked(self, call: ToolCall, gate: Gate) -> Asked:
        return Asked.of(call, gate, self._schemas.get(call["name"]))

    def _review(self, request: ApprovalRequest) -> Decision:
        """One gated call's review, run as a task: its answer is saved apart from the others'.

        Its input is the (serializable) request alone; the answer's schema is rebuilt from
        it and the tool's argument schema.
        """
        asked = Asked(
            request["tool_call_id"],
            request["name"],
            tuple(request["allowed_decisions"]),
            self._schemas.get(request["name"]),
        )
        decision: Decision = interrupt(request, response_schema=decision_schema(asked))
        return decision

    def _ask_batch(self, turn: _Turn, gated: Sequence[tuple[ToolCall, Gate]]) -> list[Decision]:
        reply: dict[str, list[Decision]] = interrupt(
            batched_request(turn.ai, gated),
            response_schema=batch_schema([self._asked(c, g) for c, g in gated]),
        )
        return reply["decisions"]

    def _requests(self, turn: _Turn, gated: Sequence[tuple[ToolCall, Gate]]) -> list[Any]:
        return [approval_request(turn.ai, c, g) for c, g in gated]

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
        if artifacts and self.artifacts_key:
            update[self.artifacts_key] = artifacts
        return update

    def _merge(self, steps: Sequence[_Step], ran: Sequence[object]) -> list[ToolMessage]:
        """The result of every step, in order: its answer, or the next result in ``ran``."""
        outputs = iter(cast(list[ToolMessage], collect(ran)))
        return [step.answer if step.answer is not None else next(outputs) for step in steps]

    # -- one call --
    def _run_call(self, ai_id: str, call: ToolCall, config: RunnableConfig | None) -> Any:
        """Run one call and return its result (or raise, per ``handle_tool_errors``)."""
        try:
            output = self.tools_by_name[call["name"]].invoke(tool_input(call), config)
            return as_result(output, ai_id, call)
        except Exception as exc:
            return error_result(exc, self.handle_tool_errors, ai_id, call)

    async def _arun_call(self, ai_id: str, call: ToolCall, config: RunnableConfig | None) -> Any:
        """Async twin of :meth:`_run_call`."""
        try:
            output = await self.tools_by_name[call["name"]].ainvoke(tool_input(call), config)
            return as_result(output, ai_id, call)
        except Exception as exc:
            return error_result(exc, self.handle_tool_errors, ai_id, call)

    def _call_tool(self, ai_id: str, call: ToolCall) -> Any:
        """One call as a task: its result is saved with the checkpoint. The tool runs
        under the task's own config, so an ``interrupt()`` in it belongs to the task."""
        started = _STARTED.get()
        if started is not None:
            started.set()
        return self._run_call(ai_id, call, None)

    async def _acall_tool(self, ai_id: str, call: ToolCall) -> Any:
        """Async twin of :meth:`_call_tool`."""
        return await self._arun_call(ai_id, call, None)

    # -- sync --
    def run(self, state: Any, config: RunnableConfig | None) -> dict[str, Any]:
        """Return the results of the last AI message's calls, asking for reviews first."""
        turn = self._turn(state)
        if turn is None:
            return {}
        run = graph_run()
        if run == "async-loop":
            raise InvalidArgumentError(
                f"{self._where}: called synchronously inside an async node, where its tasks "
                "cannot be waited for: use `await node.ainvoke(state, config)` there"
            )
        decisions: dict[str, Decision] = {}
        if gated := self._gated(turn):
            _check_reviewable(self._where, run, [c for c, _ in gated])
            if self.interrupt_mode == "batched":
                answers = self._ask_batch(turn, gated)
            else:
                futures = [self._review_task(r) for r in self._requests(turn, gated)]
                answers = cast(list[Decision], collect(_sync_outcomes(futures)))
            decisions = {c["id"] or "": d for (c, _), d in zip(gated, answers, strict=True)}
        steps = _steps(turn, decisions, self.tools_by_name)
        calls = [step.call for step in steps if step.answer is None]
        ran: list[object]
        if run is not None:
            _drop_stale_resume()
            futures = [
                _start_in_order(partial(self._tool_task, turn.ai_id, call)) for call in calls
            ]
            ran = _sync_outcomes(futures)
        elif len(calls) > 1:
            with get_executor_for_config(config) as executor:
                ran = list(executor.map(lambda c: self._run_call(turn.ai_id, c, config), calls))
        else:
            ran = [self._run_call(turn.ai_id, call, config) for call in calls]
        results = self._merge(steps, ran)
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
        run = graph_run()
        if run not in (None, "async-loop"):
            raise InvalidArgumentError(
                f"{self._where}: awaited outside the event loop of its graph run, where its "
                "tasks cannot be awaited: call `node.invoke(state, config)` there"
            )
        decisions: dict[str, Decision] = {}
        if gated := self._gated(turn):
            _check_reviewable(self._where, run, [c for c, _ in gated])
            if self.interrupt_mode == "batched":
                answers = self._ask_batch(turn, gated)
            else:
                futures = [self._review_task(r) for r in self._requests(turn, gated)]
                outcomes = await asyncio.gather(*futures, return_exceptions=True)
                answers = cast(list[Decision], collect(outcomes))
            decisions = {c["id"] or "": d for (c, _), d in zip(gated, answers, strict=True)}
        steps = _steps(turn, decisions, self.tools_by_name)
        calls = [step.call for step in steps if step.answer is None]
        if run is not None:
            _drop_stale_resume()
            pending = [self._atool_task(turn.ai_id, call) for call in calls]
        else:
            pending = [self._arun_call(turn.ai_id, call, config) for call in calls]
        ran = list(await asyncio.gather(*pending, return_exceptions=True))
        results = self._merge(steps, ran)
        offloader = self.offloader
        offloaded = (
            []
            if offloader is None
            else [await offloader.aoffload(m, config=config) for m in results]
        )
        return self._update(turn, steps, results, offloaded)
