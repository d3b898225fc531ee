"""Running structured summaries: :func:`summarize_history`, its async twin, :class:`SummarizeNode`.

When the messages of a thread exceed ``trigger_tokens``, the oldest whole units are
folded into the running :class:`Summary` until what remains fits ``keep_tokens``.
Never summarized: a leading ``SystemMessage``, a pending unit (tool calls waiting for
an approval ``interrupt()``), and the unit of the latest ``HumanMessage``; they stay in
place and the units around them are chosen oldest first (so a kept latest user turn
can be older than the summary's ``covered_until_message_id``). Units come from
:func:`group_units`, so parallel tool calls and their results go together.

The update is incremental: the summarizer sees the previous summary plus the newly
evicted units only. The goal, plan and constraints of the state are given to it as
context and stay in their own fields. The node creates no message: it returns
``RemoveMessage(id=...)`` for the evicted messages and the new ``Summary``, which the
context builder renders (never as a ``SystemMessage`` in the middle of the history).

Re-runs are safe. Everything is derived from the input state: the same state gives
the same evicted ids and a summary with the same ``version``, which the ``summary``
reducer ignores once one is applied. The summarizer is not called again either: a node
that LangGraph re-runs after an ``interrupt()`` resume (its earlier return value was
never applied) gets the earlier answer back.

- Inside a graph run, a model-backed summarizer call is a LangGraph task named
  ``stm_summarizer`` (``stm_summarizer_async`` from the async functions): its answer
  is saved with the run's checkpoint writes and replayed on the re-run, even by a new
  process after a restart. It appears under that name in ``stream_mode="updates"``.
  A summarizer whose ``deterministic`` attribute is true (the offline default) is
  simply called again: same input, same answer.
- Outside a graph run (and from the sync function called on an event-loop thread),
  answers are memoized in a small in-process LRU keyed by the summarizer object and
  its exact input.

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

import asyncio
import dataclasses
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.config import get_config
from langgraph.func import task

from langgraph_stm._errors import InvalidArgumentError, SummarizationError
from langgraph_stm._state import Constraint, PlanStep, Summary, SummaryCoverage
from langgraph_stm._summarizers import (
    DEFAULT_MAX_SUMMARY_TOKENS,
    ChatModelSummarizer,
    ExtractiveSummarizer,
    Summarizer,
    SummaryDraft,
    SummaryRequest,
    clip_text,
    default_text_counter,
)
from langgraph_stm._tokens import TokenCounter, TokenCounterLike, default_token_counter
from langgraph_stm._units import Unit, group_units

__all__ = [
    "SummarizeNode",
    "SummarizeResult",
    "asummarize_history",
    "summarize_history",
]

SummarizerLike = Summarizer | BaseChatModel


@dataclass(frozen=True)
class SummarizeResult:
    """What :func:`summarize_history` did.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> result = summarize_history(
        ...     [HumanMessage("hi", id="h1")], trigger_tokens=10, keep_tokens=5, token_counter=len)
        >>> result.summarized, result.state_update()
        (False, {})
    """

    messages: list[BaseMessage]
    """The messages that stay, same objects, same order."""
    summary: Summary | None
    """The running summary after this call: the new one, or the one passed in unchanged."""
    summarized_ids: tuple[str, ...] = ()
    """Ids of the messages folded into the summary, oldest first (removed from state)."""
    tokens_before: int = 0
    """Tokens of the input messages, as counted by the token counter."""
    tokens_after: int = 0
    """Tokens of :attr:`messages`."""
    fits: bool = True
    """``False`` when the messages were over the trigger and what must stay (system
    prompt, pending unit, latest human message) still exceeds ``keep_tokens``."""
    previous: Summary | None = field(default=None, repr=False)
    """The running summary passed in."""

    @property
    def summarized(self) -> bool:
        """True when messages were folded into a new summary version."""
        return bool(self.summarized_ids)

    def state_update(
        self, *, messages_key: str = "messages", summary_key: str = "summary"
    ) -> dict[str, Any]:
        """Return the graph state update: removals by id plus the new summary, or ``{}``."""
        if not self.summarized:
            return {}
        return {
            messages_key: [RemoveMessage(id=message_id) for message_id in self.summarized_ids],
            summary_key: self.summary,
        }


# --- planning (pure, deterministic) -------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    messages: list[BaseMessage]
    kept: list[BaseMessage]
    evicted: tuple[BaseMessage, ...]
    tokens_before: int
    tokens_after: int
    fits: bool


def _check_budgets(trigger_tokens: int, keep_tokens: int, max_summary_tokens: int) -> None:
    if trigger_tokens <= 0:
        raise InvalidArgumentError(f"trigger_tokens must be > 0, got {trigger_tokens}")
    if not 0 < keep_tokens <= trigger_tokens:
        raise InvalidArgumentError(
            f"keep_tokens must be > 0 and <= trigger_tokens ({trigger_tokens}), got {keep_tokens}"
        )
    if max_summary_tokens <= 0:
        raise InvalidArgumentError(f"max_summary_tokens must be > 0, got {max_summary_tokens}")


def _protected(units: Sequence[Unit]) -> set[int]:
    keep: set[int] = set()
    if units and isinstance(units[0].head, SystemMessage):
        keep.add(0)
    keep.update(i for i, unit in enumerate(units) if unit.pending)
    humans = [i for i, unit in enumerate(units) if isinstance(unit.head, HumanMessage)]
    if humans:
        keep.add(humans[-1])
    return keep


def _plan(
    messages: Sequence[BaseMessage],
    trigger_tokens: int,
    keep_tokens: int,
    counter: TokenCounterLike,
) -> _Plan:
    history = list(messages)
    units = group_units(history)
    before = counter(history)
    if before <= trigger_tokens:
        return _Plan(history, history, (), before, before, True)
    protected = _protected(units)
    candidates = [i for i in range(len(units)) if i not in protected]

    def kept_after(k: int) -> list[BaseMessage]:
        evicted = set(candidates[:k])
        return [m for i, u in enumerate(units) if i not in evicted for m in u.messages]

    # Smallest number of oldest candidate units to evict so the rest fits keep_tokens
    # (the count of the rest only shrinks as k grows, so a binary search finds it).
    low, high = 1, len(candidates)
    if not candidates or counter(kept_after(high)) > keep_tokens:
        low = high
    while low < high:
        middle = (low + high) // 2
        if counter(kept_after(middle)) <= keep_tokens:
            high = middle
        else:
            low = middle + 1
    kept = kept_after(low)
    evicted = tuple(m for i in candidates[:low] for m in units[i].messages)
    after = counter(kept)
    return _Plan(history, kept, evicted, before, after, after <= keep_tokens)


# --- summarizer call, memoized --------------------------------------------------------------


class _DraftCache:
    """A small LRU of summarizer answers keyed by (summarizer, fingerprint of its input)."""

    def __init__(self, max_size: int = 256) -> None:
        self._entries: OrderedDict[tuple[int, str], tuple[object, SummaryDraft]] = OrderedDict()
        self._max_size = max_size
        self._lock = threading.Lock()

    def get(self, owner: object, key: str) -> SummaryDraft | None:
        with self._lock:
            entry = self._entries.get((id(owner), key))
            if entry is None or entry[0] is not owner:
                return None
            self._entries.move_to_end((id(owner), key))
            return entry[1]

    def put(self, owner: object, key: str, draft: SummaryDraft) -> None:
        with self._lock:
            self._entries[(id(owner), key)] = (owner, draft)
            self._entries.move_to_end((id(owner), key))
            while len(self._entries) > self._max_size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_DRAFTS = _DraftCache()


def _message_key(message: BaseMessage) -> list[Any]:
    calls = (
        [[c["name"], c["args"], c["id"]] for c in message.tool_calls]
        if isinstance(message, AIMessage)
        else []
    )
    extra = [message.tool_call_id, message.status] if isinstance(message, ToolMessage) else []
    return [message.type, message.id, message.name, message.content, calls, extra]


def _fingerprint(request: SummaryRequest) -> str:
    payload = [
        [_message_key(m) for m in request.messages],
        request.previous,
        request.goal,
        list(request.plan),
        list(request.constraints),
        request.max_summary_tokens,
    ]
    raw = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


def _resolve(summarizer: SummarizerLike | None) -> Summarizer:
    if summarizer is None:
        return _DEFAULT_SUMMARIZER
    if isinstance(summarizer, BaseChatModel):
        return ChatModelSummarizer(summarizer)
    if not isinstance(summarizer, Summarizer):
        raise TypeError(
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
        "covered_until_message_id": ids[-1],
        "goal": draft.goal,
        "constraints": list(draft.constraints),
        "completed_steps": list(draft.completed_steps),
        "open_questions": list(draft.open_questions),
        "errors": list(draft.errors),
    }


def _result(plan: _Plan, previous: Summary | None, summary: Summary | None) -> SummarizeResult:
    return SummarizeResult(
        messages=plan.kept,
        summary=summary,
        summarized_ids=tuple(m.id or "" for m in plan.evicted),
        tokens_before=plan.tokens_before,
        tokens_after=plan.tokens_after,
        fits=plan.fits,
        previous=previous,
    )


# --- durable summarizer calls inside a graph run ---------------------------------------------

# LangGraph has no public "is this code running inside a graph run?" predicate. A task
# (langgraph.func.task) needs the run's call hook, which LangGraph keeps under this
# configurable key (langgraph._internal._constants.CONFIG_KEY_CALL); a unit test fails
# loudly if LangGraph renames it. Without it we fall back to the in-process memo only.
_PREGEL_CALL_KEY = "__pregel_call"


def _in_graph_run() -> bool:
    try:
        config = get_config()
    except RuntimeError:
        return False
    return _PREGEL_CALL_KEY in config.get("configurable", {})


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


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


def _call_summarizer(summarizer: SummarizerLike | None, request: SummaryRequest) -> SummaryDraft:
    owner = summarizer if summarizer is not None else _DEFAULT_SUMMARIZER
    durable = _in_graph_run() and not _loop_running()
    key = _fingerprint(request)
    draft = None if durable else _DRAFTS.get(owner, key)
    if draft is not None:
        return draft
    resolved = _resolve(summarizer)
    durable = durable and not getattr(resolved, "deterministic", False)
    try:
        if durable:
            draft = _draft_from(stm_summarizer(resolved, request).result())
        else:
            draft = resolved.summarize(request)
    except SummarizationError:
        raise
    except Exception as exc:
        raise _failure(resolved, request, exc) from exc
    _summary(request, draft)  # validate before memoizing
    _DRAFTS.put(owner, key, draft)
    return draft


async def _acall_summarizer(
    summarizer: SummarizerLike | None, request: SummaryRequest
) -> SummaryDraft:
    owner = summarizer if summarizer is not None else _DEFAULT_SUMMARIZER
    durable = _in_graph_run()
    key = _fingerprint(request)
    draft = None if durable else _DRAFTS.get(owner, key)
    if draft is not None:
        return draft
    resolved = _resolve(summarizer)
    durable = durable and not getattr(resolved, "deterministic", False)
    try:
        if durable:
            draft = _draft_from(await stm_summarizer_async(resolved, request))
        else:
            draft = await resolved.asummarize(request)
    except SummarizationError:
        raise
    except Exception as exc:
        raise _failure(resolved, request, exc) from exc
    _summary(request, draft)  # validate before memoizing
    _DRAFTS.put(owner, key, draft)
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
    _check_budgets(trigger_tokens, keep_tokens, max_summary_tokens)
    counter = token_counter or _default_counter()
    plan = _plan(messages, trigger_tokens, keep_tokens, counter)
    if not plan.evicted:
        return _result(plan, running_summary, running_summary)
    request = _request(plan, running_summary, state, max_summary_tokens, counter)
    draft = _call_summarizer(summarizer, request)
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
    _check_budgets(trigger_tokens, keep_tokens, max_summary_tokens)
    counter = token_counter or _default_counter()
    plan = _plan(messages, trigger_tokens, keep_tokens, counter)
    if not plan.evicted:
        return _result(plan, running_summary, running_summary)
    request = _request(plan, running_summary, state, max_summary_tokens, counter)
    draft = await _acall_summarizer(summarizer, request)
    return _result(plan, running_summary, _summary(request, draft))


def _default_counter() -> TokenCounter:
    return default_token_counter()


# --- the node ----------------------------------------------------------------------------------


class SummarizeNode(Runnable[Mapping[str, Any], dict[str, Any]]):
    """A graph node that folds old messages into ``state["summary"]`` (sync and async).

    Returns ``{"messages": [RemoveMessage(id=...), ...], "summary": Summary}`` when the
    messages exceed ``trigger_tokens``, else ``{}``. Pass a chat ``model`` (wrapped in
    :class:`ChatModelSummarizer`) or any ``summarizer``; with neither, the offline
    :class:`ExtractiveSummarizer` is used. Add it with ``graph.add_node(node)`` (its
    name is ``name``); ``invoke``/``ainvoke`` and a plain call ``node(state)`` work.

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
        model: BaseChatModel | None = None,
        *,
        trigger_tokens: int,
        keep_tokens: int,
        token_counter: TokenCounterLike | None = None,
        summarizer: Summarizer | None = None,
        max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
        messages_key: str = "messages",
        summary_key: str = "summary",
        name: str = "summarize",
    ) -> None:
        if model is not None and summarizer is not None:
            raise InvalidArgumentError("pass either model= or summarizer=, not both")
        _check_budgets(trigger_tokens, keep_tokens, max_summary_tokens)
        self.summarizer: Summarizer = (
            ChatModelSummarizer(model) if model is not None else summarizer or _DEFAULT_SUMMARIZER
        )
        self.trigger_tokens = trigger_tokens
        self.keep_tokens = keep_tokens
        self.token_counter: TokenCounterLike = token_counter or _default_counter()
        self.max_summary_tokens = max_summary_tokens
        self.messages_key = messages_key
        self.summary_key = summary_key
        self.name = name

    def __repr__(self) -> str:
        return (
            f"SummarizeNode(trigger_tokens={self.trigger_tokens}, "
            f"keep_tokens={self.keep_tokens}, summarizer={self.summarizer!r})"
        )

    def _kwargs(self, state: Mapping[str, Any]) -> dict[str, Any]:
        if self.messages_key not in state:
            raise KeyError(f"SummarizeNode: the state has no {self.messages_key!r} key")
        return {
            "running_summary": state.get(self.summary_key),
            "summarizer": self.summarizer,
            "trigger_tokens": self.trigger_tokens,
            "keep_tokens": self.keep_tokens,
            "token_counter": self.token_counter,
            "state": state,
            "max_summary_tokens": self.max_summary_tokens,
        }

    def __call__(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Return the state update for ``state`` (see the class docstring)."""
        result = summarize_history(state[self.messages_key], **self._kwargs(state))
        return result.state_update(messages_key=self.messages_key, summary_key=self.summary_key)

    async def acall(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """Async twin of ``node(state)``."""
        result = await asummarize_history(state[self.messages_key], **self._kwargs(state))
        return result.state_update(messages_key=self.messages_key, summary_key=self.summary_key)

    def invoke(
        self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Runnable entry point used by LangGraph's ``invoke``/``stream``."""
        return self(input)

    async def ainvoke(
        self, input: Mapping[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Runnable entry point used by LangGraph's ``ainvoke``/``astream``."""
        return await self.acall(input)
