"""Running structured summaries: :func:`summarize_history`, its async twin, :class:`SummarizeNode`.

When the messages of a thread exceed ``trigger_tokens``, the oldest whole units are
folded into the running :class:`Summary` until what remains fits ``keep_tokens``.
Units come from :func:`group_units`, so parallel tool calls and their results go
together. What is folded is always a contiguous prefix of the history (after the
leading ``SystemMessage``, which stays first): eviction stops at the first protected
unit, a pending unit (tool calls waiting for an approval ``interrupt()``), the unit
of the latest ``HumanMessage``, or the newest unit that is not a ``SystemMessage``
(which only matters in a history without a ``HumanMessage``). So every message after
the summary's ``coverage["last_message_id"]`` is still live, and the summary never tells
the model about answers to a question it has not seen yet. When stopping there is not enough
to fit ``keep_tokens``, the result says so (``fits=False``); nothing else is cut.

Only a ``SystemMessage`` that is first in the input is the leading one. A
``SystemMessage`` further down (a note) is an ordinary unit: it is folded into the
summary as data, and eviction never stops right before one, so a note never becomes
the first message of what is kept (where it would pass for the system prompt).

The update is incremental: the summarizer sees the previous summary plus the newly
evicted units only. The goal, plan and constraints of the state are given to it as
context and stay in their own fields. The node creates no message: it returns
``RemoveMessage(id=...)`` for the evicted messages and the new ``Summary``, which the
context builder renders (never as a ``SystemMessage`` in the middle of the history).

Re-runs are safe. Everything is derived from the input state: the same state gives
the same evicted ids and a summary with the same ``version``, which the ``summary``
reducer ignores once one is applied. Inside a graph run the summarizer is not called
again either: its call is a LangGraph task named ``stm_summarizer`` (from
``summarize_history``/``node(state)``) or ``stm_summarizer_async`` (from the async
twins), whose answer is saved with the run's checkpoint writes. A node that LangGraph
re-runs after an ``interrupt()`` resume gets that answer back, also in a rebuilt graph,
with a new model object, or in a new process after a restart. The task shows up under
its name in ``stream_mode="updates"``. Which task is used follows the code path that
runs: a sync node uses the sync task, also when ``graph.invoke`` is called on a thread
with a running event loop (Jupyter, an ``async def`` handler) and in a sync node of an
``ainvoke`` run; an async node uses the async twin.

That task is the only mechanism, for every summarizer (the offline default too: its
answer is a small checkpoint write). Outside graph runs nothing is memoized: calling
:func:`summarize_history` again on the same input calls the summarizer again (a
deliberate retry), with the same evicted ids and version. An in-process memo would
hide such retries, keep model objects alive, and still miss after a graph rebuild or
a restart, which is exactly where the checkpointed task already works. One case is not durable:
the *sync* function called inside an ``async def`` node cannot wait for a task
without blocking the event loop that runs it, so it calls the summarizer directly;
use :func:`asummarize_history` (or ``await node.ainvoke(state)``) in async nodes.

On the state the node produced, nothing is over the trigger and it returns no update.

A summarizer that raises leaves the state untouched: the caller gets
:class:`SummarizationError` (chained to the cause) and no update.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    >>> history = [SystemMessage("You are a billing agent.", id="s")] + [
    ...     HumanMessage(f"question {i}", id=f"h{i}") if i % 2 == 0 else
    ...     AIMessage(f"answer {i}", id=f"a{i}") for i in range(6)]
    >>> result = summarize_history(history, trigger_tokens=5, keep_tokens=3, token_counter=len)
    >>> [m.id for m in result.messages]
    ['s', 'h4', 'a5']
    >>> result.summarized_ids
    ('h0', 'a1', 'h2', 'a3')
    >>> result.summary["version"], result.summary["coverage"]
    (1, {'first_message_id': 'h0', 'last_message_id': 'a3', 'message_count': 4})
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.func import task
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langgraph_stm._errors import InvalidArgumentError, SummarizationError
from langgraph_stm._model_summarizer import ChatModelSummarizer
from langgraph_stm._node import StateNode, graph_run
from langgraph_stm._policy import (
    Meter,
    OnInvalid,
    check_counter,
    check_history_options,
    check_key,
    check_positive,
    drop_promoted_notes,
    messages_of,
    prepare,
    protected,
    read_state,
)
from langgraph_stm._state import Constraint, PlanStep, Summary, SummaryCoverage, check_state_values
from langgraph_stm._summarizers import (
    DEFAULT_MAX_SUMMARY_TOKENS,
    ExtractiveSummarizer,
    Summarizer,
    SummaryDraft,
    SummaryRequest,
    clip_text,
    default_text_counter,
)
from langgraph_stm._tokens import TokenCounter, TokenCounterLike
from langgraph_stm._units import RepairCause, group_units

__all__ = [
    "SummarizeNode",
    "SummarizeResult",
    "asummarize_history",
    "summarize_history",
]

SummarizerLike = Summarizer | BaseChatModel


@dataclass(frozen=True)
class SummarizeResult:
    """What :func:`summarize_history` did, and the update that applies it to the state.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> result = summarize_history(
        ...     [HumanMessage("hi", id="h1")], trigger_tokens=10, keep_tokens=5, token_counter=len)
        >>> result.summarized, result.update()
        (False, {})
    """

    messages: list[BaseMessage]
    """The messages that stay, same objects, same order (plus synthetic repair results
    when ``on_invalid="repair"`` had to add some)."""
    summary: Summary | None
    """The running summary after this call: the new one, or the one passed in unchanged."""
    summarized_ids: tuple[str, ...] = ()
    """Ids of the messages folded into the summary, oldest first (removed from state)."""
    tokens_before: int = 0
    """Tokens of the input messages, as counted by the token counter."""
    tokens_after: int = 0
    """Tokens of :attr:`messages`."""
    fits: bool = True
    """``False`` when the messages were over the trigger and what is left after folding
    every unit before the first protected one (pending unit, latest human message,
    newest non-system unit) still exceeds ``keep_tokens``."""
    previous: Summary | None = field(default=None, repr=False)
    """The running summary passed in."""
    repair: tuple[BaseMessage, ...] = ()
    """The :func:`~langgraph_stm.repair_history` updates applied first (empty if none)."""

    @property
    def summarized(self) -> bool:
        """True when messages were folded into a new summary version."""
        return bool(self.summarized_ids)

    def update(
        self, *, messages_key: str = "messages", summary_key: str = "summary"
    ) -> dict[str, Any]:
        """Return the graph state update: removals by id plus the new summary, or ``{}``.

        With a repair that had to insert a synthetic result, the messages update is a
        full rewrite (``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` then :attr:`messages`).
        """
        out: dict[str, Any] = {}
        if self.repair and self.repair[0].id == REMOVE_ALL_MESSAGES:
            out[messages_key] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *self.messages]
        else:
            removed = [u.id for u in self.repair if u.id is not None] + list(self.summarized_ids)
            if removed:
                out[messages_key] = [RemoveMessage(id=message_id) for message_id in removed]
        if self.summarized:
            out[summary_key] = self.summary
        return out


# --- planning (pure, deterministic) -------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    messages: list[BaseMessage]
    kept: list[BaseMessage]
    evicted: tuple[BaseMessage, ...]
    tokens_before: int
    tokens_after: int
    fits: bool
    repair: tuple[BaseMessage, ...] = ()


def _check_options(
    trigger_tokens: object,
    keep_tokens: object,
    max_summary_tokens: object,
    on_invalid: object,
    repair_cause: object,
) -> None:
    trigger = check_positive("trigger_tokens", trigger_tokens)
    keep = check_positive("keep_tokens", keep_tokens)
    check_positive("max_summary_tokens", max_summary_tokens)
    if keep > trigger:
        raise InvalidArgumentError(f"keep_tokens must be <= trigger_tokens ({trigger}), got {keep}")
    check_history_options(on_invalid, repair_cause)


def _check_inputs(
    messages: object,
    running_summary: object,
    state: object,
    token_counter: object,
) -> None:
    if running_summary is not None:
        version = running_summary.get("version") if isinstance(running_summary, Mapping) else None
        if not isinstance(version, int) or isinstance(version, bool):
            raise InvalidArgumentError(
                "running_summary must be None or the state's Summary dict (text, version), "
                f"got {type(running_summary).__name__}"
                + (f" with version={version!r}" if isinstance(running_summary, Mapping) else "")
            )
    if state is not None:
        if not isinstance(state, Mapping):
            raise InvalidArgumentError(
                f"state must be a mapping (the graph state), got {type(state).__name__}"
            )
        check_state_values(state)
    check_counter(token_counter)


def _plan(
    messages: Sequence[BaseMessage],
    trigger_tokens: int,
    keep_tokens: int,
    counter: TokenCounterLike,
    on_invalid: OnInvalid,
    cause: RepairCause = "superseded",
) -> _Plan:
    history, repair = prepare(messages, on_invalid, cause)
    units = group_units(history)
    meter = Meter(counter)
    before = meter.total(history)
    if before <= trigger_tokens:
        return _Plan(history, history, (), before, before, True, tuple(repair))
    facts = protected(units)
    start = 1 if facts.leading else 0
    stop = facts.first_protected
    stop = len(units) if stop is None else stop
    head = [m for unit in units[:start] for m in unit.messages]

    def kept_after(k: int) -> list[BaseMessage]:
        return head + [m for unit in units[start + k :] for m in unit.messages]

    # Smallest k (units folded, oldest first, k <= stop - start) so the rest fits
    # keep_tokens; the count of the rest only shrinks as k grows: binary search.
    low, high = 1, stop - start
    if high == 0 or meter.total(kept_after(high)) > keep_tokens:
        low = high
    while low < high:
        middle = (low + high) // 2
        if meter.total(kept_after(middle)) <= keep_tokens:
            high = middle
        else:
            low = middle + 1
    if low:
        # Never leave a mid-history SystemMessage as the first unit kept after the cut.
        order = drop_promoted_notes(
            [*range(start), *range(start + low, len(units))], units, facts.leading
        )
        low = (order[start] if len(order) > start else len(units)) - start
    kept = kept_after(low)
    evicted = tuple(m for unit in units[start : start + low] for m in unit.messages)
    after = meter.total(kept) if evicted else before
    return _Plan(history, kept, evicted, before, after, after <= keep_tokens, tuple(repair))


# --- summarizer call -----------------------------------------------------------------------


def _resolve(summarizer: SummarizerLike | None) -> Summarizer:
    if summarizer is None:
        return _DEFAULT_SUMMARIZER
    if isinstance(summarizer, BaseChatModel):
        return ChatModelSummarizer(summarizer)
    if not isinstance(summarizer, Summarizer):
        raise InvalidArgumentError(
            "summarizer must be a Summarizer (summarize/asummarize methods) or a "
            f"BaseChatModel, got {type(summarizer).__name__}"
        )
    return summarizer


_DEFAULT_SUMMARIZER = ExtractiveSummarizer()


def _text_counter(token_counter: object) -> Callable[[str], int]:
    if isinstance(token_counter, TokenCounter):
        return token_counter.count_text
    return default_text_counter()


def _request(
    plan: _Plan,
    running_summary: Summary | None,
    state: Mapping[str, Any] | None,
    max_summary_tokens: int,
    token_counter: object,
) -> SummaryRequest:
    state = state or {}
    return SummaryRequest(
        messages=plan.evicted,
        previous=running_summary,
        goal=state.get("goal"),
        plan=tuple(cast("list[PlanStep]", state.get("plan") or [])),
        constraints=tuple(cast("list[Constraint]", state.get("constraints") or [])),
        max_summary_tokens=max_summary_tokens,
        count_text=_text_counter(token_counter),
    )


def _failure(summarizer: object, request: SummaryRequest, exc: Exception) -> SummarizationError:
    ids = [m.id for m in request.messages]
    return SummarizationError(
        f"summarizer {type(summarizer).__name__} failed ({type(exc).__name__}) while "
        f"folding {len(ids)} messages ({ids[0]!r} .. {ids[-1]!r}) into the summary; "
        "messages and summary were left unchanged"
    )


def _summary(request: SummaryRequest, draft: object) -> Summary:
    if not isinstance(draft, SummaryDraft) or not isinstance(draft.text, str):
        raise SummarizationError(
            f"the summarizer returned {type(draft).__name__}, not a SummaryDraft with text; "
            "messages and summary were left unchanged"
        )
    text = clip_text(draft.text.strip(), request.max_summary_tokens, request.count_text)
    if not text:
        raise SummarizationError(
            "the summarizer returned an empty text; messages and summary were left unchanged"
        )
    previous = request.previous
    ids = [m.id or "" for m in request.messages]
    old: SummaryCoverage | None = previous.get("coverage") if previous else None
    coverage: SummaryCoverage = {
        "first_message_id": old["first_message_id"] if old else ids[0],
        "last_message_id": ids[-1],
        "message_count": (old["message_count"] if old else 0) + len(ids),
    }
    return {
        "text": text,
        "version": (previous["version"] if previous else 0) + 1,
        "coverage": coverage,
        "goal": draft.goal,
        "constraints": list(draft.constraints),
        "completed_steps": list(draft.completed_steps),
        "open_questions": list(draft.open_questions),
        "errors": list(draft.errors),
    }


def _result(plan: _Plan, previous: Summary | None, summary: Summary | None) -> SummarizeResult:
    return SummarizeResult(
        repair=plan.repair,
        messages=plan.kept,
        summary=summary,
        summarized_ids=tuple(m.id or "" for m in plan.evicted),
        tokens_before=plan.tokens_before,
        tokens_after=plan.tokens_after,
        fits=plan.fits,
        previous=previous,
    )


# --- durable summarizer calls inside a graph run ---------------------------------------------

_graph_run = graph_run  # the one decision lives in langgraph_stm._node


def _draft_from(value: Mapping[str, Any]) -> SummaryDraft:
    return SummaryDraft(
        text=value["text"],
        goal=value.get("goal"),
        constraints=tuple(value.get("constraints") or ()),
        completed_steps=tuple(value.get("completed_steps") or ()),
        open_questions=tuple(value.get("open_questions") or ()),
        errors=tuple(value.get("errors") or ()),
    )


def _draft_dict(draft: SummaryDraft) -> dict[str, Any]:
    if not isinstance(draft, SummaryDraft):
        raise SummarizationError(
            f"the summarizer returned {type(draft).__name__}, not a SummaryDraft with text; "
            "messages and summary were left unchanged"
        )
    return {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in dataclasses.asdict(draft).items()
    }


@task
def stm_summarizer(summarizer: Summarizer, request: SummaryRequest) -> dict[str, Any]:
    """The summarizer call as a LangGraph task: its answer is checkpointed with the run,
    so a node re-run after an ``interrupt()`` resume (even in a new process) replays it."""
    return _draft_dict(summarizer.summarize(request))


@task
async def stm_summarizer_async(summarizer: Summarizer, request: SummaryRequest) -> dict[str, Any]:
    """Async twin of :func:`stm_summarizer`."""
    return _draft_dict(await summarizer.asummarize(request))


def _call_summarizer(resolved: Summarizer, request: SummaryRequest) -> SummaryDraft:
    durable = _graph_run() in ("sync", "async-thread")
    try:
        if durable:
            draft = _draft_from(stm_summarizer(resolved, request).result())
        else:
            draft = resolved.summarize(request)
    except SummarizationError:
        raise
    except Exception as exc:
        raise _failure(resolved, request, exc) from exc
    return draft


async def _acall_summarizer(resolved: Summarizer, request: SummaryRequest) -> SummaryDraft:
    durable = _graph_run() == "async-loop"
    try:
        if durable:
            draft = _draft_from(await stm_summarizer_async(resolved, request))
        else:
            draft = await resolved.asummarize(request)
    except SummarizationError:
        raise
    except Exception as exc:
        raise _failure(resolved, request, exc) from exc
    return draft


# --- the public function pair ------------------------------------------------------------------


def summarize_history(
    messages: Sequence[BaseMessage],
    *,
    running_summary: Summary | None = None,
    summarizer: SummarizerLike | None = None,
    trigger_tokens: int,
    keep_tokens: int,
    token_counter: TokenCounterLike | None = None,
    state: Mapping[str, Any] | None = None,
    max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
    on_invalid: OnInvalid = "raise",
    repair_cause: RepairCause = "superseded",
) -> SummarizeResult:
    """Fold the oldest whole units into the running summary when over ``trigger_tokens``.

    Args:
        messages: the history, with ids, satisfying tool-pair integrity (else
            :class:`ToolPairError` / :class:`InvalidMessageError`, see ``group_units``).
        running_summary: the current ``state["summary"]``.
        summarizer: a :class:`Summarizer` or a chat model; default
            :class:`ExtractiveSummarizer` (offline, deterministic).
        trigger_tokens: summarize only when the messages count more than this.
        keep_tokens: evict oldest units until the rest counts at most this
            (``<= trigger_tokens``). What must stay may exceed it: ``fits`` says so.
        token_counter: counts a list of messages; default :class:`TokenCounter`.
        state: the graph state; its goal, plan and constraints are context for the
            summarizer (they are never moved into the summary text only).
        max_summary_tokens: bound of the summary text.
        on_invalid: ``"raise"`` (:class:`ToolPairError` for a broken history) or
            ``"repair"`` (fix it first with :func:`~langgraph_stm.repair_history`;
            the result's :meth:`~SummarizeResult.update` carries the repair).
        repair_cause: what a repaired call's synthetic result says happened to it
            (see :data:`~langgraph_stm.typing.RepairCause`).

    Raises :class:`SummarizationError` (chained) if the summarizer raises or answers
    invalidly; nothing is modified. Example (a counter of one token per message):

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> history = [
        ...     HumanMessage("Find flights to Rome. Never book before 9am.", id="h1"),
        ...     AIMessage("", id="a1", tool_calls=[
        ...         {"name": "flights", "args": {"to": "FCO"}, "id": "c1"}]),
        ...     ToolMessage("AZ204 at 10:05, 120 EUR", tool_call_id="c1", id="t1"),
        ...     AIMessage("I will book AZ204.", id="a2"),
        ...     HumanMessage("ok", id="h2"),
        ... ]
        >>> result = summarize_history(history, trigger_tokens=4, keep_tokens=2,
        ...                            token_counter=len)
        >>> result.summarized_ids, [m.id for m in result.messages]
        (('h1', 'a1', 't1'), ['a2', 'h2'])
        >>> print(result.summary["text"])
        Summary of the earlier conversation:
        - [constraint] Never book before 9am.
        - [request] Find flights to Rome.
        - [tool] flights(to="FCO") -> AZ204 at 10:05, 120 EUR
    """
    _check_options(trigger_tokens, keep_tokens, max_summary_tokens, on_invalid, repair_cause)
    _check_inputs(messages, running_summary, state, token_counter)
    resolved = _resolve(summarizer)
    counter = check_counter(token_counter)
    plan = _plan(messages, trigger_tokens, keep_tokens, counter, on_invalid, repair_cause)
    if not plan.evicted:
        return _result(plan, running_summary, running_summary)
    request = _request(plan, running_summary, state, max_summary_tokens, counter)
    draft = _call_summarizer(resolved, request)
    return _result(plan, running_summary, _summary(request, draft))


async def asummarize_history(
    messages: Sequence[BaseMessage],
    *,
    running_summary: Summary | None = None,
    summarizer: SummarizerLike | None = None,
    trigger_tokens: int,
    keep_tokens: int,
    token_counter: TokenCounterLike | None = None,
    state: Mapping[str, Any] | None = None,
    max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
    on_invalid: OnInvalid = "raise",
    repair_cause: RepairCause = "superseded",
) -> SummarizeResult:
    """Async twin of :func:`summarize_history`: the summarizer's ``asummarize`` is awaited.

    Example:
        >>> import asyncio
        >>> from langchain_core.messages import HumanMessage
        >>> history = [HumanMessage(f"step {i}", id=f"h{i}") for i in range(4)]
        >>> result = asyncio.run(asummarize_history(
        ...     history, trigger_tokens=3, keep_tokens=1, token_counter=len))
        >>> result.summarized_ids
        ('h0', 'h1', 'h2')
    """
    _check_options(trigger_tokens, keep_tokens, max_summary_tokens, on_invalid, repair_cause)
    _check_inputs(messages, running_summary, state, token_counter)
    resolved = _resolve(summarizer)
    counter = check_counter(token_counter)
    plan = _plan(messages, trigger_tokens, keep_tokens, counter, on_invalid, repair_cause)
    if not plan.evicted:
        return _result(plan, running_summary, running_summary)
    request = _request(plan, running_summary, state, max_summary_tokens, counter)
    draft = await _acall_summarizer(resolved, request)
    return _result(plan, running_summary, _summary(request, draft))


# --- the node ----------------------------------------------------------------------------------


class SummarizeNode(StateNode):
    """A graph node that folds old messages into ``state["summary"]`` (sync and async).

    Returns ``{"messages": [RemoveMessage(id=...), ...], "summary": Summary}`` when the
    messages exceed ``trigger_tokens``, else ``{}``. ``summarizer`` is a
    :class:`~langgraph_stm.summarizers.Summarizer` or a chat model (wrapped in
    :class:`~langgraph_stm.summarizers.ChatModelSummarizer`); by default the offline
    :class:`~langgraph_stm.summarizers.ExtractiveSummarizer`. Options are those of
    :func:`summarize_history`, checked when the node is built. The state may be any
    mapping (a ``TypedDict`` state), a pydantic model or a dataclass.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langgraph.graph import START, StateGraph
        >>> from langgraph_stm import STMState
        >>> node = SummarizeNode(trigger_tokens=4, keep_tokens=2, token_counter=len)
        >>> graph = StateGraph(STMState).add_node(node).add_edge(START, "summarize").compile()
        >>> history = [HumanMessage(f"h{i}", id=f"h{i}") if i % 2 == 0 else
        ...            AIMessage(f"a{i}", id=f"a{i}") for i in range(6)]
        >>> out = graph.invoke({"messages": history, "goal": "demo"})
        >>> [m.id for m in out["messages"]], out["summary"]["version"], out["goal"]
        (['h4', 'a5'], 1, 'demo')
    """

    def __init__(
        self,
        *,
        trigger_tokens: int,
        keep_tokens: int,
        summarizer: SummarizerLike | None = None,
        token_counter: TokenCounterLike | None = None,
        max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
        on_invalid: OnInvalid = "raise",
        repair_cause: RepairCause = "superseded",
        messages_key: str = "messages",
        summary_key: str = "summary",
        name: str = "summarize",
    ) -> None:
        super().__init__(name=name)
        _check_options(trigger_tokens, keep_tokens, max_summary_tokens, on_invalid, repair_cause)
        self.summarizer: Summarizer = _resolve(summarizer)
        self.trigger_tokens = trigger_tokens
        self.keep_tokens = keep_tokens
        self.token_counter: TokenCounterLike = check_counter(token_counter)
        self.max_summary_tokens = max_summary_tokens
        self.on_invalid: OnInvalid = on_invalid
        self.repair_cause: RepairCause = repair_cause
        self.messages_key = check_key("messages_key", messages_key)
        self.summary_key = check_key("summary_key", summary_key)

    def __repr__(self) -> str:
        return (
            f"SummarizeNode(trigger_tokens={self.trigger_tokens}, "
            f"keep_tokens={self.keep_tokens}, summarizer={self.summarizer!r})"
        )

    def _read(self, state: object) -> tuple[list[BaseMessage], dict[str, Any]]:
        """Return the messages and the summarize_history arguments for ``state``."""
        where = f"SummarizeNode {self.name!r}"
        values = read_state(state, where, (self.messages_key, self.summary_key))
        return messages_of(values, self.messages_key, where), {
            "running_summary": values.get(self.summary_key),
            "summarizer": self.summarizer,
            "trigger_tokens": self.trigger_tokens,
            "keep_tokens": self.keep_tokens,
            "token_counter": self.token_counter,
            "state": values,
            "max_summary_tokens": self.max_summary_tokens,
            "on_invalid": self.on_invalid,
            "repair_cause": self.repair_cause,
        }

    def result(self, state: object) -> SummarizeResult:
        """Return the :class:`SummarizeResult` for ``state``."""
        messages, kwargs = self._read(state)
        return summarize_history(messages, **kwargs)

    async def aresult(self, state: object) -> SummarizeResult:
        """Async twin of :meth:`result`."""
        messages, kwargs = self._read(state)
        return await asummarize_history(messages, **kwargs)

    def run(self, state: Any, config: RunnableConfig | None) -> dict[str, Any]:
        """Return the state update for ``state`` (see the class docstring)."""
        return self.result(state).update(
            messages_key=self.messages_key, summary_key=self.summary_key
        )

    async def arun(self, state: Any, config: RunnableConfig | None) -> dict[str, Any]:
        """Async twin of :meth:`run`: the summarizer's ``asummarize`` is awaited."""
        result = await self.aresult(state)
        return result.update(messages_key=self.messages_key, summary_key=self.summary_key)
