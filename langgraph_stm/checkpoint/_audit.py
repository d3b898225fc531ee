"""The audit trail of :class:`STMSaver` (``audit=True``): one entry per graph run.

An entry answers what an operator asks when a resumed agent misbehaves: which
checkpoint the run read, which run it was, whose it was, when, and which sections of
the short-term state ``build_context`` put into the model input. It never holds text:
no message content and no goal, constraint, plan, error, summary or artifact text, only
ids, flags and counts (:class:`~langgraph_stm._audit_context.InjectedSections`).

**One entry per** ``(thread_id, run_id)``, written by the run's root-namespace writes:

- a checkpoint write (``put``: :meth:`AuditTrail.entry_plan`, in the same plan, so the
  same transaction rules, as the checkpoint's own rows of
  :func:`~langgraph_stm.checkpoint._tables.write_plan`): the run's first write inserts
  the entry, with ``resumed_from`` the checkpoint the write's config names as its parent,
  which is the checkpoint the run read (resumed from after an interrupt, or continued
  from with new input; ``NULL`` for a new thread) and ``recorded_at`` the time; every
  later one moves ``checkpoint_id`` to the checkpoint it wrote (the latest of the run)
  and rewrites ``entry`` when ``build_context`` recorded new calls;
- a task's writes (``put_writes``: :meth:`AuditTrail.writes_plan`, in a transaction of
  its own right after the inner write was accepted), only when there is something new:
  a task that ends in ``interrupt()`` or an exception saves writes but no checkpoint,
  so the calls it made are written there, and a resumed run's first write is its
  resume value, which inserts the entry (``resumed_from`` the checkpoint resumed,
  ``checkpoint_id`` ``NULL`` until the run writes a checkpoint).

On PostgreSQL, as for every row of ours, the entry commits just before the inner write.

**Which run.** The run id is the caller's when there is one
(:func:`~langgraph_stm._audit_context.explicit_run_id`: ``metadata["run_id"]``, which
LangGraph's server sets, or ``config["run_id"]``); otherwise one is minted (a UUID) for
the invocation. Writes and ``build_context`` calls of one invocation are matched through
the invocation's LangGraph ``RunControl`` (:mod:`langgraph_stm._audit_context`), so
``durability="exit"``, subgraphs and async runs are covered. ``update_state`` is no run:
it writes no entry. A run id seen again in another process (a re-entered server run)
continues its stored entry: the first write of that run in a process reads it.

**Owner**: ``config["configurable"]["owner"]``, else ``["tenant"]`` (:func:`owner_of`).

The table (created by the backends' migrations, deleted with its thread)::

    stm_audit (thread_id TEXT NOT NULL, run_id TEXT NOT NULL,
               recorded_at REAL NOT NULL  -- epoch seconds (DOUBLE PRECISION on PostgreSQL)
               checkpoint_id TEXT, resumed_from TEXT, owner TEXT,
               entry TEXT NOT NULL,       -- JSON, see below
               PRIMARY KEY (thread_id, run_id))

``entry`` is ``{"v": 1, "run_id_from": "metadata" | "configurable" | "config" |
"minted", "source": <metadata["source"] of the run's first checkpoint write>, "step":
<its step>,
"context_calls": <build_context calls recorded>, "contexts": [<InjectedSections>, ...]}``
with the newest :data:`~langgraph_stm._audit_context.MAX_CALLS` calls, oldest first.

Example (plans run against a bare SQLite database; a saver runs them in its writes):
    >>> import sqlite3
    >>> from langgraph_stm.checkpoint._sqlite import DIALECT
    >>> from langgraph_stm.checkpoint._tables import run
    >>> db = sqlite3.connect(":memory:")
    >>> _ = db.execute(
    ...     "CREATE TABLE stm_audit (thread_id TEXT NOT NULL, run_id TEXT NOT NULL, "
    ...     "recorded_at REAL NOT NULL, checkpoint_id TEXT, resumed_from TEXT, owner TEXT, "
    ...     "entry TEXT NOT NULL, PRIMARY KEY (thread_id, run_id))")
    >>> def drive(plan):
    ...     return run(plan, lambda sql, p: db.execute(sql, p).fetchall(), db.executemany)
    >>> trail = AuditTrail(DIALECT, log=InjectionLog(), listen=False)
    >>> config = {"run_id": "run-2", "configurable": {
    ...     "thread_id": "t1", "checkpoint_ns": "", "checkpoint_id": "cp-1", "owner": "ann"}}
    >>> for written in ("cp-2", "cp-3"):  # two checkpoint writes of one run
    ...     drive(trail.entry_plan(config, {"id": written}, {"source": "loop"}, now=0.0))
    >>> [entry] = drive(trail.read_plan("t1"))
    >>> entry.run_id, entry.resumed_from, entry.checkpoint_id, entry.owner, entry.sections
    ('run-2', 'cp-1', 'cp-3', 'ann', {})
"""

from __future__ import annotations

import builtins
import json
import logging
import uuid
import weakref
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint, CheckpointMetadata

from langgraph_stm import _audit_context
from langgraph_stm._audit_context import (
    INJECTIONS,
    InjectionLog,
    RunKey,
    RunRecord,
    explicit_run_id,
    run_key,
)
from langgraph_stm._errors import InvalidArgumentError, StorageError
from langgraph_stm.checkpoint._pipeline import ids
from langgraph_stm.checkpoint._saver import SaverCore, bridged
from langgraph_stm.checkpoint._tables import Dialect, Plan, Stmt

__all__ = ["AUDIT_TABLE", "AuditEntry", "AuditLog", "AuditTrail", "chain", "owner_of", "read_plan"]

_log = logging.getLogger(__name__)

AUDIT_TABLE = "stm_audit"
"""The table of audit entries (``thread_id`` column: deleted with the thread)."""
ENTRY_VERSION = 1
"""Version of the ``entry`` JSON document."""
_COLUMNS = "thread_id, run_id, recorded_at, checkpoint_id, resumed_from, owner, entry"


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One run of a thread, as the audit trail recorded it."""

    thread_id: str
    run_id: str
    recorded_at: datetime
    """When the run's first write was recorded (UTC)."""
    resumed_from: str | None
    """The checkpoint the run read: resumed from, or continued from (``None``: the run
    started the thread)."""
    checkpoint_id: str | None
    """The latest checkpoint the run wrote (``None``: none yet, e.g. a resume that
    paused again)."""
    owner: str | None
    """``owner`` (or ``tenant``) of the run's config, if any."""
    sections: dict[str, Any]
    """What the run's latest ``build_context`` call injected
    (:class:`~langgraph_stm._audit_context.InjectedSections`); ``{}`` when none ran."""
    contexts: tuple[dict[str, Any], ...] = ()
    """Every recorded ``build_context`` call of the run, oldest first (the newest
    :data:`~langgraph_stm._audit_context.MAX_CALLS`)."""
    context_calls: int = 0
    """How many ``build_context`` calls the run made (``contexts`` may keep fewer)."""
    source: str | None = None
    """``metadata["source"]`` of the run's first checkpoint write: ``"input"`` (new
    input), ``"loop"`` (a resume, or any run with ``durability="exit"``), ..."""
    run_id_from: str | None = None
    """Where the run id came from: ``"metadata"``, ``"configurable"``, ``"config"``
    (the caller's) or ``"minted"`` (by the saver)."""


def owner_of(config: RunnableConfig) -> str | None:
    """``config["configurable"]["owner"]``, else ``["tenant"]``, as text, or ``None``.

    Example:
        >>> owner_of({"configurable": {"tenant": "acme"}})
        'acme'
    """
    configurable = config.get("configurable") or {}
    for key in ("owner", "tenant"):
        value = configurable.get(key)
        if value is not None and value != "":
            return str(value)
    return None


def chain(*plans: Plan | None) -> Plan:
    """One plan running ``plans`` in order (``None`` skipped); returns the first's result.

    Example:
        >>> from langgraph_stm.checkpoint._tables import run
        >>> def one(sql):
        ...     yield Stmt(sql)
        ...     return sql
        >>> run(chain(one("A"), None, one("B")), lambda sql, p: print(sql), None)
        A
        B
        'A'
    """
    first: Any = None
    for i, plan in enumerate(p for p in plans if p is not None):
        result = yield from plan
        if i == 0:
            first = result
    return first


def _epoch(now: float | datetime | None) -> float:
    if now is None:
        return datetime.now(UTC).timestamp()
    return now.timestamp() if isinstance(now, datetime) else float(now)


def _document(record: RunRecord) -> str:
    doc = {
        **record.extra,
        "v": ENTRY_VERSION,
        "run_id_from": record.run_id_from,
        "source": record.source,
        "step": record.step,
        "context_calls": record.total,
        "contexts": list(record.contexts),
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class AuditTrail:
    """Writes and reads audit entries as statement plans, for one saver's dialect.

    Creating one makes ``build_context`` record its calls in the process
    (:func:`~langgraph_stm._audit_context.listen`), until it is garbage collected;
    ``listen=False`` does not (for tests and tools that only read).
    """

    def __init__(
        self, dialect: Dialect, *, log: InjectionLog | None = None, listen: bool = True
    ) -> None:
        self.dialect = dialect
        self.log = INJECTIONS if log is None else log
        self.crypt: Any = None
        """The saver's :class:`~._crypto.Crypt` (encryption at rest seals ``entry``)."""
        if listen:
            _audit_context.listen()
            weakref.finalize(self, _audit_context.unlisten)

    def entry_plan(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        *,
        owner: str | None = None,
        now: float | datetime | None = None,
    ) -> Plan | None:
        """The statements recording ``put(config, checkpoint, metadata, ...)`` in its run's
        entry, to run with the checkpoint's own rows; ``None`` when the write is not a
        root-namespace write of a graph run.

        ``owner`` defaults to :func:`owner_of` ``(config)``; ``now`` (epoch seconds or
        a datetime; default: the current time) is stored by the run's first write.
        """
        thread_id, ns, parent = ids(config)
        checkpoint_id = checkpoint.get("id")
        if ns != "" or not thread_id or checkpoint_id is None:
            return None
        key = run_key(config, metadata)
        if key is None:
            return None
        run_id, read_stored = self._claim(key, config, metadata)
        owner = owner_of(config) if owner is None else owner
        return self._upsert(
            key, thread_id, run_id, str(checkpoint_id), parent, owner, _epoch(now), read_stored
        )

    def writes_plan(
        self,
        config: RunnableConfig,
        *,
        owner: str | None = None,
        now: float | datetime | None = None,
    ) -> Plan | None:
        """The statements recording, at ``put_writes(config, ...)`` of a root task, the
        calls that task made, or ``None`` (the common case: nothing new to record).

        A task that ends in ``interrupt()`` or an exception saves its writes but no
        checkpoint, so its ``build_context`` calls are written here; and a resumed run
        whose first write is the resume value gets its entry here (``checkpoint_id``
        stays ``NULL`` until the run writes a checkpoint). :class:`AuditLog` runs it in a
        transaction once the writes were stored and not refused.
        """
        thread_id, ns, parent = ids(config)
        if ns != "" or not thread_id:
            return None
        key = run_key(config)
        if key is None:
            return None
        with self.log.lock:
            record = self.log.find(key)
            if record is not None and record.inserted and record.version == record.written:
                return None
        run_id, read_stored = self._claim(key, config, None)
        owner = owner_of(config) if owner is None else owner
        return self._upsert(key, thread_id, run_id, None, parent, owner, _epoch(now), read_stored)

    def chained(
        self,
        plan: Plan,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        *,
        owner: str | None = None,
        now: float | datetime | None = None,
    ) -> Plan:
        """``plan`` (a checkpoint's write plan), then :meth:`entry_plan` of the same write."""
        return chain(plan, self.entry_plan(config, checkpoint, metadata, owner=owner, now=now))

    def _claim(
        self, key: RunKey, config: RunnableConfig, metadata: CheckpointMetadata | None
    ) -> tuple[str, bool]:
        """The run id of ``key`` (chosen at the run's first write), and whether the
        stored entry of a run id seen before must be read first."""
        with self.log.lock:
            record = self.log.locked(key)
            first = record.run_id is None
            if first:
                explicit = explicit_run_id(config, metadata)
                if explicit is None:
                    record.run_id, record.run_id_from = str(uuid.uuid4()), "minted"
                else:
                    record.run_id, record.run_id_from = explicit
            if metadata is not None and not record.put_seen:
                record.put_seen = True
                source = metadata.get("source")
                record.source = None if source is None else str(source)
                record.step = _int(metadata.get("step"))
                if record.inserted:  # the entry exists without them: rewrite it
                    record.version += 1
            return str(record.run_id), first and record.run_id_from != "minted"

    def _upsert(
        self,
        key: RunKey,
        thread_id: str,
        run_id: str,
        checkpoint_id: str | None,
        parent: str | None,
        owner: str | None,
        now: float,
        read_stored: bool,
    ) -> Plan:
        p = self.dialect.param
        t = AUDIT_TABLE
        if read_stored:  # a run id seen before: continue its stored entry
            sql = f"SELECT entry FROM {t} WHERE thread_id = {p} AND run_id = {p}"
            rows = (yield Stmt(sql, [thread_id, run_id])) or []
            if rows:
                self._merge(key, _opened(self.crypt, thread_id, rows[0][0]))
        with self.log.lock:
            record = self.log.locked(key)
            document = _document(record)
            version = record.version
            rewrite = version != record.written
        if self.crypt is not None and self.crypt.on:
            document = self.crypt.seal_entry(thread_id, self.crypt.owner_now(), document)
        # Writes of one run may reach us out of order (background writes): the entry
        # keeps the newest checkpoint written and the oldest parent seen, ``NULL`` (a new
        # thread) being the oldest; a parent the run wrote itself is never the oldest.
        sets = [
            f"resumed_from = CASE WHEN {t}.resumed_from IS NULL OR excluded.resumed_from "
            f"IS NULL THEN NULL WHEN excluded.resumed_from < {t}.resumed_from THEN "
            f"excluded.resumed_from ELSE {t}.resumed_from END"
        ]
        if checkpoint_id is not None:
            sets.append(
                f"checkpoint_id = CASE WHEN {t}.checkpoint_id IS NULL OR "
                f"excluded.checkpoint_id >= {t}.checkpoint_id THEN excluded.checkpoint_id "
                f"ELSE {t}.checkpoint_id END"
            )
        if rewrite:
            sets.append("entry = excluded.entry")
        conflict = f"DO UPDATE SET {', '.join(sets)}"
        sql = (
            f"INSERT INTO {t} ({_COLUMNS}) VALUES ({', '.join([p] * 7)}) "
            f"ON CONFLICT (thread_id, run_id) {conflict}"
        )
        row = (thread_id, run_id, now, checkpoint_id, parent, owner, document)
        yield Stmt(sql, [row], many=True)
        with self.log.lock:
            record = self.log.locked(key)
            record.written = max(record.written, version)
            record.inserted = True
        return None

    def _merge(self, key: RunKey, stored: object) -> None:
        """Put the calls of a stored entry before the ones recorded here."""
        try:
            doc = json.loads(str(stored))
            contexts = list(doc.get("contexts") or [])
            total = int(doc.get("context_calls", len(contexts)))
        except (ValueError, TypeError, AttributeError):
            _log.warning("langgraph_stm: unreadable audit entry replaced (%r)", key[0])
            with self.log.lock:
                self.log.locked(key).version += 1
            return
        with self.log.lock:
            record = self.log.locked(key)
            mine = list(record.contexts)
            record.contexts = deque([*contexts, *mine], maxlen=record.contexts.maxlen)
            record.total += total
            record.source = doc.get("source") or record.source
            record.step = _int(doc.get("step")) if doc.get("source") else record.step
            known = {"v", "run_id_from", "source", "step", "context_calls", "contexts"}
            record.extra = {k: v for k, v in doc.items() if k not in known}
            if mine:
                record.version += 1

    def read_plan(self, thread_id: str) -> Plan:
        """The entries of ``thread_id`` (see :func:`read_plan`)."""
        return read_plan(self.dialect, thread_id, self.crypt)


def _opened(crypt: Any, thread_id: str, entry: object) -> object:
    """A stored ``entry`` opened by the saver's ``crypt`` (sealed ones), else as is."""
    return entry if crypt is None else crypt.open_entry(thread_id, str(entry))


def read_plan(d: Dialect, thread_id: str, crypt: Any = None) -> Plan:
    """The audit entries of ``thread_id``, oldest first, as :class:`AuditEntry` objects;
    raises :class:`~langgraph_stm.errors.StorageError` for an unreadable entry (and
    :class:`~langgraph_stm.errors.EncryptionKeyError` for one ``crypt`` cannot open)."""
    rows = (
        yield Stmt(
            f"SELECT {_COLUMNS} FROM {AUDIT_TABLE} WHERE thread_id = {d.param} "
            # Ties (a coarse or frozen clock): a resumed run's checkpoints are newer.
            "ORDER BY recorded_at, COALESCE(checkpoint_id, resumed_from, ''), run_id",
            [thread_id],
        )
    ) or []
    return [_entry((*r[:6], _opened(crypt, str(r[0]), r[6]))) for r in rows]


def _entry(row: Any) -> AuditEntry:
    thread_id, run_id, recorded_at, checkpoint_id, resumed_from, owner, entry = row
    try:
        doc = json.loads(str(entry))
        contexts = tuple(dict(c) for c in doc.get("contexts") or [])
        calls = int(doc.get("context_calls", len(contexts)))
    except (ValueError, TypeError, AttributeError) as exc:
        raise StorageError(
            f"thread {thread_id!r}: the audit entry of run {run_id!r} is unreadable ({exc}); "
            "it was edited outside STMSaver",
            thread_id=str(thread_id),
        ) from exc
    return AuditEntry(
        thread_id=str(thread_id),
        run_id=str(run_id),
        recorded_at=datetime.fromtimestamp(float(recorded_at), UTC),
        resumed_from=None if resumed_from is None else str(resumed_from),
        checkpoint_id=None if checkpoint_id is None else str(checkpoint_id),
        owner=None if owner is None else str(owner),
        sections=dict(contexts[-1]) if contexts else {},
        contexts=contexts,
        context_calls=calls,
        source=doc.get("source"),
        run_id_from=doc.get("run_id_from"),
    )


class AuditLog(SaverCore):
    """The audit trail of :class:`STMSaver` (``audit=True``): entries written with each
    checkpoint write of a run (and with a task's pending writes when it recorded new
    ``build_context`` calls), read with ``audit_log`` / ``aaudit_log``."""

    _audit: AuditTrail | None = None

    def __init__(self, inner: BaseCheckpointSaver[Any], /, *, audit: bool = False, **options: Any):
        super().__init__(inner, **options)
        if not isinstance(audit, bool):
            raise InvalidArgumentError(f"audit must be True or False, got {audit!r}")
        self._audit = AuditTrail(self._tables.dialect) if audit else None

    def _around_write(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        plan: Plan,
    ) -> Plan:
        plan = super()._around_write(config, checkpoint, metadata, plan)
        if self._audit is None:
            return plan
        return self._audit.chained(plan, config, checkpoint, metadata, now=self._audit_now())

    def _audit_now(self) -> float | None:
        life = getattr(self, "_life", None)
        return None if life is None else float(life.now())

    @bridged("aput_writes")
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store pending writes (see :meth:`SaverCore.put_writes`), then, when the task
        recorded new ``build_context`` calls, its run's audit entry."""
        super().put_writes(config, writes, task_id, task_path)
        if self._audit is not None:
            plan = self._audit.writes_plan(config, now=self._audit_now())
            if plan is not None:
                self._sync_driver().write(plan)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of :meth:`put_writes`."""
        await super().aput_writes(config, writes, task_id, task_path)
        if self._audit is not None:
            plan = self._audit.writes_plan(config, now=self._audit_now())
            if plan is not None:
                await self._awrite(plan)

    @bridged("aaudit_log")
    def audit_log(self, thread_id: str) -> builtins.list[AuditEntry]:
        """The audit entries of ``thread_id``, one per run, oldest first.

        Example:
            >>> from langgraph_stm import STMSaver
            >>> with STMSaver.from_sqlite(":memory:", audit=True) as saver:
            ...     saver.setup()
            ...     saver.audit_log("t1")
            []
        """
        result: builtins.list[AuditEntry] = self._sync_driver().read(
            read_plan(self._tables.dialect, str(thread_id), getattr(self, "_crypt", None))
        )
        return result

    async def aaudit_log(self, thread_id: str) -> builtins.list[AuditEntry]:
        """Async twin of :meth:`audit_log`."""
        result: builtins.list[AuditEntry] = await self._aread(
            read_plan(self._tables.dialect, str(thread_id), getattr(self, "_crypt", None))
        )
        return result
