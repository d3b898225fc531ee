"""Units of a message history and the tool-pair validator every other module uses.

A **unit** is what trimming, summarizing and context assembly keep or drop whole:

- a lone message (Human, System, AI without tool calls, ...), or
- an ``AIMessage`` with ``tool_calls`` followed by the ``ToolMessage`` answering each
  call, in any order among themselves, with nothing else in between.

A unit whose calls are not all answered is **pending**: an approval ``interrupt()`` is
waiting for it. Only the last unit of a history may be pending; an unanswered call
followed by any later non-tool message is *dangling*, a defect that
:func:`repair_history` fixes with a synthetic error result.

This module is the single home of tool-pair logic: :func:`group_units` for code that
needs units (it raises on a defective history), :func:`validate_history` to list the
defects (it never raises), and :func:`repair_history` to fix them with reducer updates.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    >>> history = [
    ...     HumanMessage("weather in Paris and Rome?", id="h1"),
    ...     AIMessage("", id="a1", tool_calls=[
    ...         {"name": "weather", "args": {"city": "Paris"}, "id": "c1"},
    ...         {"name": "weather", "args": {"city": "Rome"}, "id": "c2"}]),
    ...     ToolMessage("sunny", tool_call_id="c1", id="t1"),
    ... ]
    >>> [(unit.ids, unit.pending) for unit in group_units(history)]
    [(('h1',), False), (('a1', 't1'), True)]
    >>> validate_history(history)
    []
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langgraph_stm._errors import InvalidArgumentError, InvalidMessageError, ToolPairError

__all__ = [
    "HistoryProblem",
    "HistoryProblemKind",
    "RepairCause",
    "RepairResult",
    "Unit",
    "group_units",
    "repair_history",
    "repair_updates",
    "synthetic_result_id",
    "validate_history",
]

HistoryProblemKind = Literal[
    "not_a_message",
    "missing_id",
    "duplicate_id",
    "missing_tool_call_id",
    "duplicate_tool_call_id",
    "orphan_tool_result",
    "misplaced_tool_result",
    "duplicate_tool_result",
    "dangling_tool_call",
]
"""What is wrong, one of:

- ``not_a_message``: the item is not a LangChain ``BaseMessage``;
- ``missing_id``: the message has no id (LangGraph's ``add_messages`` assigns ids; a
  history built outside the graph may lack them);
- ``duplicate_id``: two messages share an id;
- ``missing_tool_call_id``: an ``AIMessage`` tool call has no id, so no result can
  answer it;
- ``duplicate_tool_call_id``: a tool call id was already issued by an earlier call;
- ``orphan_tool_result``: a ``ToolMessage`` answers no earlier tool call;
- ``misplaced_tool_result``: a ``ToolMessage`` answers an earlier call, but another
  message stands between them;
- ``duplicate_tool_result``: a second ``ToolMessage`` for an already answered call;
- ``dangling_tool_call``: a call with no result, followed by later messages (a pending
  call is only allowed in the last unit).
"""

_MESSAGE_KINDS: frozenset[str] = frozenset({"not_a_message", "missing_id", "duplicate_id"})
_UNREPAIRABLE: frozenset[str] = _MESSAGE_KINDS | {"missing_tool_call_id", "duplicate_tool_call_id"}


@dataclass(frozen=True)
class HistoryProblem:
    """One integrity defect of a message history, as found by :func:`validate_history`."""

    kind: HistoryProblemKind
    """What is wrong (see :data:`HistoryProblemKind`)."""
    message_id: str | None
    """Id of the message at fault (``None`` when it has none or is not a message)."""
    tool_call_id: str | None
    """The tool call concerned, for tool-pair defects."""
    detail: str
    """A human-readable explanation naming the position in the history."""


@dataclass(frozen=True)
class Unit:
    """Messages that are kept or dropped together; see the module docstring.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> unit = Unit(messages=(HumanMessage("hi", id="h1"),), pending=False)
        >>> unit.ids, unit.head.type
        (('h1',), 'human')
    """

    messages: tuple[BaseMessage, ...]
    """The messages, chronological: a lone message, or an AIMessage and its results."""
    pending: bool
    """True when the AIMessage's tool calls are not all answered (approval waiting)."""

    @property
    def ids(self) -> tuple[str, ...]:
        """The message ids of the unit, in order."""
        return tuple(m.id for m in self.messages if m.id is not None)

    @property
    def head(self) -> BaseMessage:
        """The first message of the unit (the AIMessage for a tool-call unit)."""
        return self.messages[0]

    @property
    def unanswered(self) -> tuple[str, ...]:
        """Tool call ids of the head that have no result in the unit (empty if complete)."""
        head = self.messages[0]
        if not isinstance(head, AIMessage) or not head.tool_calls:
            return ()
        answered = {m.tool_call_id for m in self.messages[1:] if isinstance(m, ToolMessage)}
        return tuple(
            call["id"]
            for call in head.tool_calls
            if call["id"] is not None and call["id"] not in answered
        )


@dataclass
class _Open:
    """The tool-call unit being collected during a scan."""

    messages: list[BaseMessage]
    expected: list[str]
    answered: set[str] = field(default_factory=set)


def _calls(message: BaseMessage) -> list[str | None]:
    if isinstance(message, AIMessage) and message.tool_calls:
        return [call["id"] for call in message.tool_calls]
    return []


_RESULT_DETAILS: dict[str, str] = {
    "duplicate_tool_result": "is a second result for an already answered call",
    "misplaced_tool_result": "is separated from its call by another message",
    "orphan_tool_result": "answers no earlier tool call",
}


class _Scanner:
    """Groups messages into units and collects defects, one message at a time.

    The scan can be resumed: :meth:`feed` more messages, :meth:`finish` to read the
    result without ending the scan. That is what makes re-validating a long history
    after one new message cost one message (see :func:`_scan`).
    """

    def __init__(self) -> None:
        self.count = 0
        self.units: list[Unit] = []
        self.problems: list[HistoryProblem] = []
        self.seen_ids: set[str] = set()
        self.issued: set[str] = set()
        self.answered: set[str] = set()
        self.current: _Open | None = None

    def _close(self) -> None:
        """Close the open tool-call unit because a later non-tool message follows it."""
        current = self.current
        if current is None:
            return
        missing = [c for c in current.expected if c not in current.answered]
        head = current.messages[0]
        for call_id in missing:
            self.problems.append(
                HistoryProblem(
                    "dangling_tool_call",
                    head.id,
                    call_id,
                    f"AIMessage id={head.id!r} has no result for tool call {call_id!r}, "
                    "and later messages follow it",
                )
            )
        self.units.append(Unit(tuple(current.messages), pending=bool(missing)))
        self.current = None

    def finish(self) -> tuple[list[Unit], list[HistoryProblem]]:
        """Return the units and problems of everything fed so far (the scan goes on)."""
        current = self.current
        if current is None:
            return list(self.units), list(self.problems)
        pending = any(c not in current.answered for c in current.expected)
        return [*self.units, Unit(tuple(current.messages), pending=pending)], list(self.problems)

    def feed(self, messages: Sequence[object]) -> None:
        """Scan ``messages``, which follow everything fed before."""
        problems = self.problems
        seen_ids = self.seen_ids
        for message in messages:
            index = self.count
            self.count += 1
            if not isinstance(message, BaseMessage):
                problems.append(
                    HistoryProblem(
                        "not_a_message",
                        None,
                        None,
                        f"messages[{index}] is a {type(message).__name__}, "
                        f"not a LangChain BaseMessage: {message!r:.80}",
                    )
                )
                continue
            message_id = message.id
            if not message_id:
                problems.append(
                    HistoryProblem(
                        "missing_id",
                        None,
                        None,
                        f"messages[{index}] ({message.type}) has no id; add it through "
                        "add_messages (which assigns ids) or give it one",
                    )
                )
            elif message_id in seen_ids:
                problems.append(
                    HistoryProblem(
                        "duplicate_id",
                        message_id,
                        None,
                        f"messages[{index}] reuses the id {message_id!r} of an earlier message",
                    )
                )
            else:
                seen_ids.add(message_id)

            if isinstance(message, ToolMessage):
                self._tool_result(message, index)
                continue
            if self.current is not None:
                self._close()
            call_ids = _calls(message)
            if not call_ids:
                self.units.append(Unit((message,), pending=False))
                continue
            self._open(message, call_ids, index)

    def _tool_result(self, message: ToolMessage, index: int) -> None:
        call_id = message.tool_call_id
        current = self.current
        kind: HistoryProblemKind
        if current is not None and call_id in current.expected:
            if call_id not in current.answered:
                current.answered.add(call_id)
                self.answered.add(call_id)
                current.messages.append(message)
                return
            kind = "duplicate_tool_result"
        elif call_id in self.answered:
            kind = "duplicate_tool_result"
        elif call_id in self.issued:
            kind = "misplaced_tool_result"
        else:
            kind = "orphan_tool_result"
        self.problems.append(
            HistoryProblem(
                kind,
                message.id,
                call_id,
                f"ToolMessage messages[{index}] id={message.id!r} "
                f"(tool_call_id={call_id!r}) {_RESULT_DETAILS[kind]}",
            )
        )

    def _open(self, message: BaseMessage, call_ids: list[str | None], index: int) -> None:
        expected: list[str] = []
        for call_id in call_ids:
            if call_id is None:
                self.problems.append(
                    HistoryProblem(
                        "missing_tool_call_id",
                        message.id,
                        None,
                        f"AIMessage messages[{index}] id={message.id!r} has a tool call "
                        "without an id; no result can answer it",
                    )
                )
            elif call_id in self.issued:
                self.problems.append(
                    HistoryProblem(
                        "duplicate_tool_call_id",
                        message.id,
                        call_id,
                        f"AIMessage messages[{index}] id={message.id!r} reuses tool call "
                        f"id {call_id!r} of an earlier call",
                    )
                )
            else:
                self.issued.add(call_id)
                expected.append(call_id)
        self.current = _Open([message], expected)


@dataclass
class _Checkpoint:
    """A scanner and the exact prefix (objects and ids) it has scanned."""

    refs: list[object]
    ids: list[object]
    pairs: list[object]
    """:func:`_pair_keys` of ``refs`` when scanned: a tool call edited in place since
    then (new ids, a call added or removed, a result's ``tool_call_id``) is seen."""
    scanner: _Scanner


# The scan cache (see _scan). Entries are owned by whoever holds them: a scan takes an
# entry out under the lock, works on it alone, and puts a new entry back, so two
# threads never feed the same scanner.
_cache: list[_Checkpoint] = []  # least recently used first
_cache_lock = threading.Lock()
_MIN_CACHED = 256
"""Histories shorter than this are always scanned from scratch (it costs microseconds)."""
_MAX_ENTRIES = 4
"""At most this many histories are cached (a few concurrent graph runs each keep hits)."""
_MAX_CACHED_MESSAGES = 50_000
"""At most this many messages are referenced by the cache in total; older entries go."""


def _id_of(item: object) -> object:
    return item.id if isinstance(item, BaseMessage) else None


_get_id = operator.attrgetter("id")


def _ids(items: list[object]) -> list[object]:
    try:
        return list(map(_get_id, items))  # C speed for the usual all-messages case
    except AttributeError:
        return list(map(_id_of, items))


def _pair_keys(items: list[object]) -> list[object]:
    """What the tool-pair scan of each item depends on besides its id: an AI message's
    tool call ids, a ToolMessage's ``tool_call_id`` (one fast pass, no call per item)."""
    keys: list[object] = []
    append = keys.append
    for item in items:
        if type(item) is HumanMessage:
            append(None)
        elif isinstance(item, AIMessage):
            calls = item.tool_calls
            append(tuple([call.get("id") for call in calls]) if calls else ())
        elif isinstance(item, ToolMessage):
            append(item.tool_call_id)
        else:
            append(None)
    return keys


def _take(items: list[object], ids: list[object]) -> tuple[_Checkpoint | None, list[object]]:
    """Remove and return the cached scan of a prefix of ``items``, if there is one,
    with the :func:`_pair_keys` of that prefix."""
    size = len(items)
    with _cache_lock:
        for position in range(len(_cache) - 1, -1, -1):
            refs = _cache[position].refs
            n = len(refs)
            # Cheap filter under the lock; the full check below runs outside it.
            if n <= size and refs[0] is items[0] and refs[n - 1] is items[n - 1]:
                checkpoint = _cache.pop(position)
                break
        else:
            return None, []
    n = len(checkpoint.refs)
    if all(map(operator.is_, checkpoint.refs, items[:n])) and checkpoint.ids == ids[:n]:
        pairs = _pair_keys(items[:n])
        if checkpoint.pairs == pairs:
            return checkpoint, pairs
    return None, []  # not a prefix after all: dropped, the new scan replaces it


def _put(checkpoint: _Checkpoint) -> None:
    """Store ``checkpoint`` as the most recently used entry, within the bounds."""
    if len(checkpoint.refs) > _MAX_CACHED_MESSAGES:
        return
    with _cache_lock:
        _cache.append(checkpoint)
        total = sum(len(entry.refs) for entry in _cache)
        while len(_cache) > _MAX_ENTRIES or total > _MAX_CACHED_MESSAGES:
            total -= len(_cache.pop(0).refs)


def _clear_scan_cache() -> None:
    """Forget every cached scan (for tests, or to release the referenced messages)."""
    with _cache_lock:
        _cache.clear()


def _scan(messages: Sequence[object]) -> tuple[list[Unit], list[HistoryProblem]]:
    """Group ``messages`` into units and collect every defect.

    **The scan cache.** An agent loop re-trims (or re-validates) its thread before
    every model call, and the thread is usually the previous list plus a few new
    messages. For histories of at least :data:`_MIN_CACHED` items the scanner state is
    kept after the scan, and a later history that starts with the *very same message
    objects* (checked by identity, and by id, since ``add_messages`` assigns ids in
    place) resumes it, so only the new messages are scanned. Anything else is scanned
    from scratch; the result is always what a fresh scan returns.

    When it helps: inside one graph run (LangGraph keeps the message objects in memory
    between supersteps, so trim before each model call hits) and in any loop that
    appends to a list it holds (the benchmark's steady state). When it does not: the
    first scan of each run with a checkpointer (the state is deserialized into fresh
    objects, so that scan is a full pass, a few milliseconds per 1,000 messages),
    histories shorter than :data:`_MIN_CACHED`, and histories edited anywhere but at
    the end. A hit still reads every id (to compare it), about a tenth of a full scan.

    Bounds and safety: at most :data:`_MAX_ENTRIES` histories and
    :data:`_MAX_CACHED_MESSAGES` messages are referenced (least recently used first
    out), so finished runs pin a bounded amount of memory until they are evicted. A
    scan takes its entry out of the cache under a lock and returns a new one after,
    so concurrent scans never share a scanner, and a thread only ever resumes a scan
    of a prefix of its own list. A hit also compares what the scan read of each
    message (its tool call ids, a result's ``tool_call_id``), so a ``tool_calls`` list
    edited in place on an already-scanned object is scanned again from scratch.
    """
    items = list(messages)
    if len(items) < _MIN_CACHED:
        scanner = _Scanner()
        scanner.feed(items)
        return scanner.finish()
    ids = _ids(items)
    checkpoint, pairs = _take(items, ids)
    scanner = checkpoint.scanner if checkpoint is not None else _Scanner()
    pairs.extend(_pair_keys(items[scanner.count :]))
    scanner.feed(items[scanner.count :])
    result = scanner.finish()
    _put(_Checkpoint(items, ids, pairs, scanner))
    return result


def _raise_for(problems: list[HistoryProblem], action: str) -> None:
    message_level = [p for p in problems if p.kind in _MESSAGE_KINDS]
    if message_level:
        raise InvalidMessageError(
            f"cannot {action}: " + "; ".join(p.detail for p in message_level[:5])
        )
    ids = tuple(dict.fromkeys(p.message_id for p in problems if p.message_id is not None))
    more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
    raise ToolPairError(
        f"cannot {action}: the history breaks tool-call integrity: "
        + "; ".join(p.detail for p in problems[:5])
        + more
        + ". Fix it with repair_history(), or pass on_invalid='repair' (accepted by "
        "trim_history, summarize_history, build_context and their nodes).",
        message_ids=ids,
    )


def group_units(messages: Sequence[BaseMessage]) -> list[Unit]:
    """Split a history into its units, in order.

    Raises :class:`InvalidMessageError` for an item that is not a message, a message
    without an id or a reused id, and :class:`ToolPairError` (its ``message_ids``
    naming the messages at fault) for any tool-pair defect listed by
    :func:`validate_history`.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> units = group_units([
        ...     HumanMessage("hi", id="h1"),
        ...     AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
        ...     ToolMessage("ok", tool_call_id="c1", id="t1"),
        ...     AIMessage("done", id="a2"),
        ... ])
        >>> [unit.ids for unit in units]
        [('h1',), ('a1', 't1'), ('a2',)]
        >>> group_units([ToolMessage("ok", tool_call_id="zz", id="t9")])
        Traceback (most recent call last):
        ...
        langgraph_stm._errors.ToolPairError: cannot group messages into units: ...
    """
    units, problems = _scan(messages)
    if problems:
        _raise_for(problems, "group messages into units")
    return units


def validate_history(messages: Sequence[object]) -> list[HistoryProblem]:
    """Return every integrity defect of ``messages``, in order; ``[]`` when it is valid.

    Never raises: non-message items are reported as problems too. A pending last unit
    (tool calls awaiting approval) is valid.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> problems = validate_history([
        ...     AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
        ...     HumanMessage("never mind", id="h1"),
        ...     ToolMessage("ok", tool_call_id="c9", id="t1"),
        ... ])
        >>> [(p.kind, p.message_id, p.tool_call_id) for p in problems]
        [('dangling_tool_call', 'a1', 'c1'), ('orphan_tool_result', 't1', 'c9')]
    """
    try:
        sequence = list(messages)
    except TypeError:
        return [
            HistoryProblem(
                "not_a_message",
                None,
                None,
                f"expected a sequence of messages, got {type(messages).__name__}",
            )
        ]
    return _scan(sequence)[1]


def synthetic_result_id(ai_message_id: str, tool_call_id: str) -> str:
    """Return the deterministic id of a result this package creates for a tool call.

    Example:
        >>> synthetic_result_id("a1", "c1")
        'stm-repair:a1:c1'
    """
    return f"stm-repair:{ai_message_id}:{tool_call_id}"


RepairCause = Literal["superseded", "not_approved", "rejected", "result_discarded"]
"""Why a tool call has no result, as the synthetic result tells the model:

- ``"superseded"`` (the default: all a history shows): a new message arrived while
  the call waited for approval or for its result; it may have started;
- ``"not_approved"``: it waited for approval when a new message arrived; it never ran;
- ``"rejected"``: a reviewer rejected it; it never ran;
- ``"result_discarded"``: it ran, but LangGraph discarded its result when a new
  message arrived (a sibling task was paused at ``interrupt()``); its effects happened.
"""

_CAUSE_TEXT: dict[str, str] = {
    "superseded": (
        "was cancelled: a new message arrived while it was waiting (for approval or for "
        "its result), so no result was recorded. It may have started; check its effects "
        "before calling it again."
    ),
    "not_approved": (
        "was cancelled before it was approved: a new message arrived while it waited for "
        "approval. It did not run."
    ),
    "rejected": "was rejected by the reviewer. It did not run.",
    "result_discarded": (
        "ran, but its result was discarded when a new message arrived. Its effects have "
        "happened; do not call it again to repeat them."
    ),
}


def _synthetic_result(head: AIMessage, call_id: str, cause: str) -> ToolMessage:
    name = next((c["name"] for c in head.tool_calls if c["id"] == call_id), "tool")
    return ToolMessage(
        content=f"Error: the tool call {name!r} (id {call_id!r}) {_CAUSE_TEXT[cause]}",
        tool_call_id=call_id,
        name=name,
        status="error",
        id=synthetic_result_id(head.id or "", call_id),
        response_metadata={"stm_repair": cause},
    )


@dataclass(frozen=True)
class RepairResult:
    """What :func:`repair_history` found and how it fixes it."""

    messages: list[BaseMessage]
    """The repaired history: the input objects, same ids and order, plus synthetic
    results (the input itself when it was valid)."""
    problems: tuple[HistoryProblem, ...]
    """The defects found (:func:`validate_history`), empty when the input was valid."""
    updates: tuple[BaseMessage, ...]
    """The ``add_messages`` items that turn the input into :attr:`messages`."""

    @property
    def repaired(self) -> bool:
        """True when the history had to change."""
        return bool(self.updates)

    def update(self, *, messages_key: str = "messages") -> dict[str, Any]:
        """Return the graph state update (``{}`` when the history was valid)."""
        return {messages_key: list(self.updates)} if self.updates else {}


def repair_history(
    messages: Sequence[BaseMessage],
    *,
    cause: RepairCause = "superseded",
    causes: Mapping[str, RepairCause] | None = None,
) -> RepairResult:
    """Fix the tool-pair defects of a history, deterministically, with reducer updates.

    - orphan and duplicate ``ToolMessage`` results are removed with
      ``RemoveMessage(id=...)`` (the first result of a call is kept);
    - a misplaced result is moved right after its call's unit;
    - a dangling call gets a synthetic error ``ToolMessage`` right after its unit, with
      the id :func:`synthetic_result_id` derives from the call and a text that says
      why it has no result: ``cause`` (default ``"superseded"``, all a history shows)
      for every such call, or ``causes`` mapping one tool call id to its own
      :data:`RepairCause` (a graph whose tools run in an ``ApprovalToolNode`` knows a
      call cut off by a new message never ran: ``cause="not_approved"``).

    ``add_messages`` appends new messages and cannot insert or move one, so when a
    result has to go mid-history the update is ``RemoveMessage(id=REMOVE_ALL_MESSAGES)``
    followed by the whole repaired history: every kept message keeps its id, content
    and order. When only removals are needed, only ``RemoveMessage`` items are
    returned. A pending last unit is left as it is. Repairing the result again changes
    nothing.

    Raises :class:`InvalidMessageError` (non-messages, missing or reused message ids)
    or :class:`ToolPairError` (a tool call without an id or a reused call id): those
    cannot be fixed without guessing.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> history = [
        ...     HumanMessage("hi", id="h1"),
        ...     ToolMessage("stray", tool_call_id="c9", id="t9"),
        ...     AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
        ...     HumanMessage("skip that", id="h2"),
        ... ]
        >>> result = repair_history(history)
        >>> [m.id for m in result.messages], [p.kind for p in result.problems]
        (['h1', 'a1', 'stm-repair:a1:c1', 'h2'], ['orphan_tool_result', 'dangling_tool_call'])
        >>> print(result.messages[2].content[:60])
        Error: the tool call 'f' (id 'c1') was cancelled: a new mess
        >>> repair_history(result.messages).update()
        {}
    """
    source = _message_list(messages)
    problems = tuple(validate_history(source))
    updates = repair_updates(source, cause=cause, causes=causes, problems=problems)
    if not updates:
        return RepairResult(source, problems, ())
    if updates[0].id == REMOVE_ALL_MESSAGES:
        return RepairResult(list(updates[1:]), problems, tuple(updates))
    removed = {u.id for u in updates}
    return RepairResult([m for m in source if m.id not in removed], problems, tuple(updates))


def _message_list(messages: object) -> list[BaseMessage]:
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InvalidMessageError(
            f"messages must be a list of LangChain messages, got {type(messages).__name__}"
        )
    return list(messages)


def repair_updates(
    messages: Sequence[BaseMessage],
    *,
    cause: RepairCause = "superseded",
    causes: Mapping[str, RepairCause] | None = None,
    problems: Sequence[HistoryProblem] | None = None,
) -> list[BaseMessage]:
    """The ``add_messages`` updates of :func:`repair_history` (``[]`` when valid)."""
    if problems is None:
        problems = validate_history(messages)
    if not problems:
        return []
    unrepairable = [p for p in problems if p.kind in _UNREPAIRABLE]
    if unrepairable:
        _raise_for(unrepairable, "repair the history")
    causes = causes or {}
    for key, value in {"cause": cause, **{f"causes[{k!r}]": v for k, v in causes.items()}}.items():
        if value not in _CAUSE_TEXT:
            raise InvalidArgumentError(f"{key} must be one of {sorted(_CAUSE_TEXT)}, got {value!r}")

    # Entries in order: (head, attached results). A result attaches to the first call
    # that issued its id, if that call is not answered yet; anything else is removed.
    entries: list[tuple[BaseMessage, list[ToolMessage]]] = []
    owner: dict[str, int] = {}
    answered: set[str] = set()
    removed: list[str] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            index = owner.get(message.tool_call_id)
            if index is None or message.tool_call_id in answered:
                removed.append(message.id or "")
            else:
                answered.add(message.tool_call_id)
                entries[index][1].append(message)
            continue
        for call_id in _calls(message):
            owner[call_id or ""] = len(entries)
        entries.append((message, []))

    repaired: list[BaseMessage] = []
    for position, (head, results) in enumerate(entries):
        repaired.append(head)
        repaired.extend(results)
        is_last = position == len(entries) - 1
        if isinstance(head, AIMessage) and not is_last:
            repaired.extend(
                _synthetic_result(head, call_id, causes.get(call_id, cause))
                for call_id in _calls(head)
                if call_id is not None and call_id not in answered
            )

    removed_set = set(removed)
    survivors = [m for m in messages if m.id not in removed_set]
    if len(survivors) == len(repaired) and all(
        a is b for a, b in zip(survivors, repaired, strict=True)
    ):
        return [RemoveMessage(id=message_id) for message_id in removed]
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *repaired]
