"""The process-level record of what :func:`~langgraph_stm.build_context` injected, per run.

The audit trail of :class:`~langgraph_stm.STMSaver` (``audit=True``, see
:mod:`langgraph_stm.checkpoint._audit`) names, per graph run, which sections of the
short-term state went into the model input. ``build_context`` runs inside the agent
node, in the process whose saver then writes the run's checkpoints, so it leaves its
facts here and the saver picks them up at the run's next write (the checkpoint, or the
task's writes when the task paused or failed).

**What is recorded** (:class:`InjectedSections`, one per ``build_context`` call inside a
graph run): whether the goal and the last error were in the state block, the ids and
statuses of the constraints and plan steps, the pending tool-call unit (AI message id
and unanswered call ids), the summary version (when the summary was included), the
artifact ids, how many conversation messages were included and omitted, the token
count, the budget, and the node and step. Never any text: no message content, no goal,
constraint, plan, error, summary or artifact text.

**Which run.** A call is keyed by ``(thread_id, run)``, where *run* is the LangGraph
invocation (``invoke``, ``stream``, their async twins). Inside a node, the only handle on
the invocation that the checkpointer also sees in ``put`` is the invocation's
``langgraph.runtime.RunControl`` (created once per ``invoke``/``stream``, inherited by
subgraphs); the run id of ``config["run_id"]`` is not visible in a subgraph's nodes, and
``config["metadata"]["run_id"]`` is only set by LangGraph's server, so neither can join
the two sides of a plain ``graph.invoke(input, config)``. The run id an entry reports is
chosen by the saver (:func:`explicit_run_id`, else a minted one; see
:mod:`langgraph_stm.checkpoint._audit`). Only when a runtime has no ``RunControl``
(older LangGraph) does an explicit run id serve as the key.

**Cost and bounds.** Nothing is recorded unless an audited saver exists in the process
(:func:`listen`): :func:`record_injection` then returns after one integer test. When
listening, the log keeps at most ``max_runs`` runs (least recently touched dropped first)
and the newest ``max_calls`` calls of each (with the total count), each id list capped at
``MAX_IDS`` items of ``MAX_ID_CHARS`` characters; it is thread-safe.
:func:`record_injection` never raises into ``build_context``.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> from langgraph_stm import build_context
    >>> state = {"messages": [HumanMessage("refund order 42", id="h1"),
    ...                       AIMessage("on it", id="a1")],
    ...          "goal": "refund order 42",
    ...          "plan": [{"id": "s1", "task": "look up the order", "status": "done"}]}
    >>> sections = describe_context(build_context(state, max_tokens=500), state)
    >>> sections["goal"], sections["plan"], sections["messages_included"]
    (True, [{'id': 's1', 'status': 'done'}], 2)
    >>> "refund" in str(sections)
    False
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

if TYPE_CHECKING:
    from langgraph_stm._context import ContextResult

__all__ = [
    "INJECTIONS",
    "MAX_CALLS",
    "MAX_IDS",
    "MAX_ID_CHARS",
    "MAX_RUNS",
    "InjectedSections",
    "InjectionLog",
    "PendingUnitRecord",
    "RunKey",
    "RunRecord",
    "StatusRecord",
    "describe_context",
    "explicit_run_id",
    "listen",
    "listening",
    "record_injection",
    "run_key",
    "unlisten",
]

_log = logging.getLogger(__name__)

MAX_RUNS = 1024
"""Runs the process-level log keeps (least recently touched dropped first)."""
MAX_CALLS = 32
"""``build_context`` calls kept per run (the newest; the total is counted)."""
MAX_IDS = 64
"""Items kept per id list of one call (the record then names the list in ``truncated``)."""
MAX_ID_CHARS = 128
"""Characters kept of one id."""
_RUNTIME_KEY = "__pregel_runtime"
"""``langgraph.runtime.CONFIG_KEY_RUNTIME``: where a run's config carries its Runtime."""


class StatusRecord(TypedDict):
    """A constraint or plan step that the state block listed: its id and status."""

    id: str
    status: str


class PendingUnitRecord(TypedDict):
    """The pending tool-call unit in the context: the AI message and its open calls."""

    ai_message_id: str | None
    tool_call_ids: list[str]
    """The calls of the AI message that have no result yet, in call order."""


class InjectedSections(TypedDict):
    """Which sections one ``build_context`` call put in the model input (ids, flags and
    counts only: never any text)."""

    node: str | None
    """The LangGraph node that called ``build_context``."""
    step: int | None
    """The LangGraph step of that node."""
    system_message: bool
    """The context starts with a ``SystemMessage``."""
    goal: bool
    constraints: list[StatusRecord]
    plan: list[StatusRecord]
    last_error: bool
    summary_version: int | None
    """The running summary's version, when the summary was in the context."""
    artifact_ids: list[str]
    pending_unit: PendingUnitRecord | None
    messages_included: int
    """Conversation messages of the state in the context (system message and state
    block not counted)."""
    messages_omitted: int
    """Conversation messages of the state left out (they stay in the state)."""
    tokens: int
    max_tokens: int
    over_budget: bool
    truncated: NotRequired[list[str]]
    """Names of the id lists cut at :data:`MAX_IDS` items (absent when none was)."""


RunKey = tuple[str, object]
"""``(thread_id, run token)``: the token is the invocation's ``RunControl`` object, or
``("run_id", <id>)`` when the runtime has none."""


# -- listening -----------------------------------------------------------------------------
_listeners = 0
_listeners_lock = threading.Lock()


def listen() -> None:
    """Start recording (one call per audited saver; see :func:`unlisten`)."""
    global _listeners
    with _listeners_lock:
        _listeners += 1


def unlisten() -> None:
    """Undo one :func:`listen`; with none left, :func:`record_injection` records nothing."""
    global _listeners
    with _listeners_lock:
        _listeners = max(_listeners - 1, 0)


def listening() -> bool:
    """Whether an audited saver exists in the process."""
    return _listeners > 0


# -- which run -----------------------------------------------------------------------------
def _text(value: object) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    text = str(value)
    return text if text else None


def explicit_run_id(
    config: RunnableConfig, metadata: Mapping[str, Any] | None = None
) -> tuple[str, str] | None:
    """The run id a caller gave the run, and where it was found, or ``None``.

    In the order LangGraph's savers store it as checkpoint metadata: ``metadata["run_id"]``
    (the ``put`` argument), ``config["metadata"]["run_id"]`` (set by LangGraph's server),
    ``config["configurable"]["run_id"]``; then ``config["run_id"]`` (the LangChain run id
    of ``graph.invoke(..., {"run_id": ...})``).

    Example:
        >>> explicit_run_id({"metadata": {"run_id": "r-7"}, "configurable": {}})
        ('r-7', 'metadata')
        >>> explicit_run_id({"configurable": {"thread_id": "t"}}) is None
        True
    """
    for where, source in (
        ("metadata", metadata),
        ("metadata", config.get("metadata")),
        ("configurable", config.get("configurable")),
    ):
        if isinstance(source, Mapping):
            found = _text(source.get("run_id"))
            if found is not None:
                return found, where
    found = _text(config.get("run_id"))
    return None if found is None else (found, "config")


def run_key(config: RunnableConfig, metadata: Mapping[str, Any] | None = None) -> RunKey | None:
    """The key of the run ``config`` belongs to (a node's config or a ``put``'s), or
    ``None`` outside a run of a graph with a thread (``update_state`` is no run).

    Example:
        >>> from langgraph.runtime import Runtime, RunControl
        >>> control = RunControl()
        >>> key = run_key({"configurable": {"thread_id": "t",
        ...                                 "__pregel_runtime": Runtime(control=control)}})
        >>> key == ("t", control)
        True
        >>> run_key({"configurable": {"thread_id": "t"}}) is None
        True
    """
    configurable = config.get("configurable") or {}
    thread_id = _text(configurable.get("thread_id"))
    if thread_id is None:
        return None
    runtime = configurable.get(_RUNTIME_KEY)
    control = getattr(runtime, "control", None)
    if control is not None:
        return thread_id, control
    explicit = explicit_run_id(config, metadata)
    if explicit is None and runtime is not None:
        info = getattr(runtime, "execution_info", None)
        found = _text(getattr(info, "run_id", None))
        explicit = None if found is None else (found, "config")
    return None if explicit is None else (thread_id, ("run_id", explicit[0]))


# -- what a context injected ---------------------------------------------------------------
def _id(value: object) -> str:
    return str(value)[:MAX_ID_CHARS]


def _capped(name: str, items: list[Any], truncated: list[str]) -> list[Any]:
    if len(items) > MAX_IDS:
        truncated.append(name)
        return items[:MAX_IDS]
    return items


def _statuses(records: object, default: str, allowed: tuple[str, ...] | None) -> list[StatusRecord]:
    out: list[StatusRecord] = []
    for record in records if isinstance(records, list) else []:
        if not isinstance(record, Mapping) or "id" not in record:
            continue
        status = str(record.get("status") or default)
        if allowed is None or status in allowed:
            out.append({"id": _id(record["id"]), "status": status})
    return out


def _pending_unit(messages: list[BaseMessage]) -> PendingUnitRecord | None:
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(str(message.tool_call_id))
        elif isinstance(message, AIMessage) and message.tool_calls:
            open_calls = [
                _id(c["id"]) for c in message.tool_calls if str(c.get("id")) not in answered
            ]
            if not open_calls:
                return None
            ai_id = None if message.id is None else _id(message.id)
            return {"ai_message_id": ai_id, "tool_call_ids": open_calls}
        else:
            return None
    return None


def _artifact_ids(result: ContextResult, state: Mapping[str, Any]) -> list[str]:
    """The artifacts in the context, in the state's order (the block's)."""
    included = {str(i) for i in result.included_artifact_ids}
    artifacts = state.get("artifacts")
    ordered = [
        str(a["id"])
        for a in (artifacts if isinstance(artifacts, list) else [])
        if isinstance(a, Mapping) and str(a.get("id")) in included
    ]
    ordered += sorted(included - set(ordered))
    return [_id(i) for i in dict.fromkeys(ordered)]


def describe_context(
    result: ContextResult,
    state: Mapping[str, Any] | None,
    config: RunnableConfig | None = None,
) -> InjectedSections:
    """What ``result`` (of ``build_context(state, ...)``) injected: ids, flags and counts.

    ``state`` is the state the context was built from (goal, constraints, plan and last
    error are rendered from it whenever the context has a state block); ``config``, a
    node's config, names the node and step. See the module docstring for an example.
    """
    from langgraph_stm._context import CONTEXT_BLOCK_ID

    state = state if isinstance(state, Mapping) else {}
    messages = list(result.messages)
    has_block = any(m.id == CONTEXT_BLOCK_ID for m in messages)
    system = bool(messages) and isinstance(messages[0], SystemMessage)
    conversation = messages[1:] if system else messages
    included = sum(1 for m in conversation if m.id != CONTEXT_BLOCK_ID)
    truncated: list[str] = []
    summary = state.get("summary")
    version = summary.get("version") if isinstance(summary, Mapping) else None
    metadata = (config or {}).get("metadata") or {}
    step = metadata.get("langgraph_step")
    node = metadata.get("langgraph_node")
    sections: InjectedSections = {
        "node": None if node is None else _id(node),
        "step": step if isinstance(step, int) and not isinstance(step, bool) else None,
        "system_message": system,
        "goal": has_block and bool(state.get("goal")),
        "constraints": _capped(
            "constraints",
            _statuses(state.get("constraints"), "confirmed", ("confirmed", "pending"))
            if has_block
            else [],
            truncated,
        ),
        "plan": _capped(
            "plan", _statuses(state.get("plan"), "pending", None) if has_block else [], truncated
        ),
        "last_error": has_block and bool(state.get("last_error")),
        "summary_version": (
            int(version)
            if result.included_summary
            and isinstance(version, int)
            and not isinstance(version, bool)
            else None
        ),
        "artifact_ids": _capped("artifact_ids", _artifact_ids(result, state), truncated),
        "pending_unit": _pending_unit(messages),
        "messages_included": included,
        "messages_omitted": len(result.omitted_message_ids),
        "tokens": int(result.tokens),
        "max_tokens": int(result.max_tokens),
        "over_budget": bool(result.over_budget),
    }
    unit = sections["pending_unit"]
    if unit is not None and len(unit["tool_call_ids"]) > MAX_IDS:
        unit["tool_call_ids"] = unit["tool_call_ids"][:MAX_IDS]
        truncated.append("pending_unit")
    if truncated:
        sections["truncated"] = truncated
    return sections


# -- the log -------------------------------------------------------------------------------
@dataclass
class RunRecord:
    """One run's calls, and what the saver wrote of them (guarded by the log's lock)."""

    contexts: deque[InjectedSections]
    total: int = 0
    """``build_context`` calls recorded (the deque keeps the newest)."""
    version: int = 0
    """Bumped by every change of ``contexts``."""
    written: int = 0
    """The ``version`` last handed to a statement."""
    run_id: str | None = None
    """The run id the saver chose at the run's first checkpoint write."""
    run_id_from: str | None = None
    """Where it came from: ``metadata``, ``configurable``, ``config`` or ``minted``."""
    source: str | None = None
    """``metadata["source"]`` of the run's first checkpoint write (``input``, ``loop``...)."""
    step: int | None = None
    """``metadata["step"]`` of that write."""
    put_seen: bool = False
    """A checkpoint write of the run was seen (``source`` and ``step`` are its)."""
    inserted: bool = False
    """The run's entry was written once by this process."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Fields of an entry written by another process, kept as they were."""


class InjectionLog:
    """A bounded, thread-safe map of :data:`RunKey` to :class:`RunRecord`.

    Example:
        >>> log = InjectionLog(max_runs=2, max_calls=1)
        >>> for run in ("r1", "r2", "r3"):
        ...     log.record(("t", run), {"goal": True})  # type: ignore[typeddict-item]
        >>> log.keys()
        [('t', 'r2'), ('t', 'r3')]
        >>> log.record(("t", "r3"), {"goal": False})  # type: ignore[typeddict-item]
        >>> record = log.snapshot(("t", "r3"))
        >>> record.total, list(record.contexts)
        (2, [{'goal': False}])
    """

    def __init__(self, *, max_runs: int = MAX_RUNS, max_calls: int = MAX_CALLS) -> None:
        self.max_runs = max_runs
        self.max_calls = max_calls
        self.lock = threading.Lock()
        """Guards every record; hold it to read or change one (:meth:`locked`)."""
        self._runs: OrderedDict[RunKey, RunRecord] = OrderedDict()

    def _touch(self, key: RunKey) -> RunRecord:
        record = self._runs.get(key)
        if record is None:
            record = self._runs[key] = RunRecord(deque(maxlen=self.max_calls))
            while len(self._runs) > self.max_runs:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(key)
        return record

    def record(self, key: RunKey, sections: InjectedSections) -> None:
        """Add one call's sections to the run ``key``."""
        with self.lock:
            record = self._touch(key)
            record.contexts.append(sections)
            record.total += 1
            record.version += 1

    def find(self, key: RunKey) -> RunRecord | None:
        """The record of ``key`` or ``None``; call with :attr:`lock` held."""
        return self._runs.get(key)

    def locked(self, key: RunKey) -> RunRecord:
        """The record of ``key`` (created if missing); call with :attr:`lock` held."""
        return self._touch(key)

    def snapshot(self, key: RunKey) -> RunRecord:
        """A copy of the record of ``key`` (created if missing)."""
        with self.lock:
            r = self._touch(key)
            return RunRecord(
                deque(r.contexts, maxlen=self.max_calls),
                r.total,
                r.version,
                r.written,
                r.run_id,
                r.run_id_from,
                r.source,
                r.step,
                r.put_seen,
                r.inserted,
                dict(r.extra),
            )

    def keys(self) -> list[RunKey]:
        """The keys held, least recently touched first."""
        with self.lock:
            return list(self._runs)

    def clear(self) -> None:
        with self.lock:
            self._runs.clear()


INJECTIONS = InjectionLog()
"""The process-level log that ``build_context`` writes and audited savers read."""


def _current_config() -> RunnableConfig | None:
    from langgraph.config import get_config

    try:
        return get_config()
    except RuntimeError:  # not inside a runnable context
        return None


def record_injection(
    config: RunnableConfig | None,
    result: ContextResult,
    state: Mapping[str, Any] | None = None,
    *,
    log: InjectionLog | None = None,
) -> None:
    """Record what ``result`` injected, for the run ``config`` (default: the running
    node's config) belongs to. Does nothing outside a graph run or when no audited saver
    listens; never raises.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> from langgraph_stm import build_context
        >>> log = InjectionLog()
        >>> result = build_context({"messages": [HumanMessage("hi", id="h1")]}, max_tokens=50)
        >>> record_injection(None, result, log=log)  # not in a graph run: nothing
        >>> log.keys()
        []
    """
    if not _listeners and log is None:
        return
    try:
        cfg = config if config is not None else _current_config()
        if cfg is None:
            return
        key = run_key(cfg)
        if key is None:
            return
        (log or INJECTIONS).record(key, describe_context(result, state, cfg))
    except Exception:  # the audit trail never breaks a model call
        _log.debug("langgraph_stm: could not record a context for the audit trail", exc_info=True)
