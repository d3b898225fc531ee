"""The rules and statement plans of thread lifecycle, without I/O: TTLs and when a
thread expires, the guard of a write to a deleted or expired thread, and the plans that
touch, sweep, delete and purge (run by the mixins of :mod:`._retention`, which also
explains the design).

Example:
    >>> ttl_seconds(3600, "ttl")
    3600.0
"""

from __future__ import annotations

import math
from collections.abc import (
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from langchain_core.runnables import RunnableConfig

from langgraph_stm._errors import InvalidArgumentError, ThreadDeletedError
from langgraph_stm.checkpoint._inner import checkpoint_id_now
from langgraph_stm.checkpoint._tables import (
    OUR_TABLES,
    Dialect,
    Plan,
    Stmt,
    batches,
    lock_plan,
)

__all__ = [
    "MAX_TTL",
    "Lifecycle",
    "Lifetime",
    "Removal",
    "ThreadExpired",
    "backfill_lifecycle",
    "carried_ids",
    "deleted_error",
    "deletion_mark",
    "expired_plan",
    "guard_plan",
    "lifecycle_plan",
    "memory_undo_plan",
    "purge_plan",
    "remove_plan",
    "set_ttl_plan",
    "touch_plan",
    "ttl_seconds",
    "undo_writes_plan",
    "visibility_plan",
]

_ATTEMPTS = 3
"""Writes to an expired thread: delete it, then try again (a few times at most)."""
_CHECKPOINTS = "checkpoints"
"""The inner saver's checkpoint table (``thread_id``, ``checkpoint_ns``,
``checkpoint_id``; pinned by ``tests/unit/test_saver_contract.py``)."""


# -- the policy --------------------------------------------------------------------------
def ttl_seconds(value: object, what: str, *, zero: bool = False) -> float | None:
    """A TTL (``timedelta`` or seconds) as seconds; ``None`` stays ``None``.

    Example:
        >>> ttl_seconds(timedelta(minutes=2), "ttl"), ttl_seconds(30, "ttl")
        (120.0, 30.0)
        >>> ttl_seconds(-1, "ttl")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        langgraph_stm._errors.InvalidArgumentError: ttl must be a positive timedelta...
    """
    if value is None:
        return None
    seconds: float | None = None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    if seconds is None or not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero):
        kind = "a timedelta >= 0" if zero else "a positive timedelta"
        raise InvalidArgumentError(f"{what} must be {kind}, seconds or None, got {value!r}")
    if seconds > MAX_TTL:
        raise InvalidArgumentError(
            f"{what} must be at most 100 years ({MAX_TTL:.0f} s), got {value!r}; "
            "use None for a thread that never expires"
        )
    return seconds


MAX_TTL = 100 * 365.25 * 86400.0
"""The longest TTL (and grace period) accepted: an expiry date stays a valid datetime."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _epoch(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


@dataclass(frozen=True, slots=True)
class Lifetime:
    """What the lifecycle row of one thread says (:meth:`Lifecycle.lifetime`)."""

    ttl: timedelta | None
    """The thread's TTL in force (its own, else the saver's); ``None``: it never expires."""
    expires_at: datetime | None
    """When it expires (UTC), or ``None``."""
    expired: bool


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """The saver's TTL options, checked, and the expiry rule (see the module doc).

    Example:
        >>> life = Lifecycle.make(timedelta(seconds=10), None, timedelta(days=1))
        >>> life.expired(100.0, None, 111.0), life.expired(100.0, 60.0, 111.0)
        (True, False)
    """

    ttl: float | None
    """The saver's TTL in seconds (``None``: threads without their own TTL never expire)."""
    clock: Callable[[], datetime]
    grace: float
    """Seconds a tombstone is kept at least."""

    @classmethod
    def make(cls, ttl: object, clock: object, deleted_grace: object) -> Lifecycle:
        """Check ``STMSaver``'s ``ttl``, ``clock`` and ``deleted_grace`` options."""
        if clock is None:
            clock = _utc_now
        if not callable(clock):
            raise InvalidArgumentError(
                f"STMSaver(clock=...) takes a callable returning an aware datetime, got {clock!r}"
            )
        grace = ttl_seconds(deleted_grace, "STMSaver(deleted_grace=...)", zero=True)
        if grace is None:
            raise InvalidArgumentError("STMSaver(deleted_grace=...) must be a timedelta, not None")
        return cls(ttl_seconds(ttl, "STMSaver(ttl=...)"), cast(Any, clock), grace)

    def now(self) -> float:
        """The clock's time, as epoch seconds."""
        value = self.clock()
        if not isinstance(value, datetime) or value.utcoffset() is None:
            raise InvalidArgumentError(
                f"STMSaver(clock=...) must return an aware datetime (UTC), got {value!r}"
            )
        return value.timestamp()

    def config_ttl(self, config: RunnableConfig) -> float | None:
        """The thread TTL a write's config asks for (``configurable["ttl"]``)."""
        return ttl_seconds(
            config.get("configurable", {}).get("ttl"), 'config["configurable"]["ttl"]'
        )

    def expired(self, written_at: float, own: float | None, now: float) -> bool:
        """The expiry rule, exactly as :func:`expired_plan` writes it in SQL."""
        if own is not None:
            return written_at + own < now
        return self.ttl is not None and written_at < now - self.ttl

    def lifetime(self, row: tuple[float, float | None] | None, now: float) -> Lifetime:
        """TTL in force, expiry and whether it passed, of a ``(written_at, ttl_seconds)``
        row (``None``: no row, the thread never expires)."""
        if row is None:
            return Lifetime(None, None, False)
        written_at, own = row
        ttl = own if own is not None else self.ttl
        if ttl is None:
            return Lifetime(None, None, False)
        expires = _epoch(written_at + ttl)
        return Lifetime(timedelta(seconds=ttl), expires, self.expired(written_at, own, now))


def carried_ids(config: RunnableConfig) -> list[str]:
    """The checkpoint ids a write's config carries: its ``checkpoint_id`` and the
    parents' ids of ``checkpoint_map`` (a subgraph's first write carries only those)."""
    c = config.get("configurable", {})
    found = [str(c["checkpoint_id"])] if c.get("checkpoint_id") else []
    parents = c.get("checkpoint_map")
    if isinstance(parents, Mapping):
        found += [str(v) for v in parents.values() if v]
    return found


class ThreadExpired(Exception):
    """Internal: a write met an expired thread, which must be deleted first."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        super().__init__(thread_id)


def deleted_error(thread_id: str, checkpoint_id: str, deleted_at: float) -> ThreadDeletedError:
    at = _epoch(deleted_at)
    return ThreadDeletedError(
        f"thread {thread_id!r} was deleted at {at.isoformat()} (by delete_thread, or after "
        f"its TTL ran out without a write): this write carries its "
        f"checkpoint {checkpoint_id!r} and is refused, so the deleted thread is not "
        "recreated. Start a fresh run (a config without checkpoint_id) to begin a new "
        "thread with this id.",
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        deleted_at=at,
    )


# -- plans --------------------------------------------------------------------------------
def guard_plan(
    d: Dialect, life: Lifecycle, thread_id: str, carried: Sequence[str], now: float
) -> Plan:
    """Refuse a write to a deleted thread (:class:`ThreadDeletedError`) or to an expired
    one (:class:`ThreadExpired`, to delete it first); run first in the write's plan."""
    p = d.param
    sql = (
        "SELECT l.written_at, l.ttl_seconds, t.deleted_at, t.last_checkpoint_id "
        f"FROM (SELECT CAST({p} AS TEXT) AS thread_id) AS k "
        "LEFT JOIN stm_lifecycle AS l ON l.thread_id = k.thread_id "
        "LEFT JOIN stm_tombstones AS t ON t.thread_id = k.thread_id"
    )
    rows = (yield Stmt(sql, [thread_id])) or []
    written_at, own, deleted_at, last = rows[0] if rows else (None, None, None, None)
    if written_at is not None and life.expired(float(written_at), _num(own), now):
        raise ThreadExpired(thread_id)
    if last is not None and deleted_at is not None:
        old = [c for c in carried if c <= str(last)]
        if old:
            raise deleted_error(thread_id, old[0], float(deleted_at))
    return None


def touch_plan(d: Dialect, thread_id: str, now: float, ttl: float | None) -> Plan:
    """Record a root checkpoint write: ``written_at`` moves, ``ttl_seconds`` is set only
    when the row is new."""
    p = d.param
    sql = (
        "INSERT INTO stm_lifecycle (thread_id, written_at, ttl_seconds) "
        f"VALUES ({p}, {p}, {p}) ON CONFLICT (thread_id) DO UPDATE SET "
        "written_at = excluded.written_at"
    )
    yield Stmt(sql, [(thread_id, now, ttl)], many=True)
    return None


def shorten_plan(d: Dialect, thread_id: str, ttl: float) -> Plan:
    """Give a thread its own TTL of at most ``ttl`` (a longer own TTL, or none, becomes
    ``ttl``; a shorter one stays)."""
    p = d.param
    sql = (
        f"UPDATE stm_lifecycle SET ttl_seconds = {p} "
        f"WHERE thread_id = {p} AND (ttl_seconds IS NULL OR ttl_seconds > {p})"
    )
    yield Stmt(sql, [(ttl, thread_id, ttl)], many=True)
    return None


def undo_writes_plan(d: Dialect, thread_id: str, ns: str, checkpoint_id: str | None) -> Plan:
    """Take back the pending writes of a checkpoint of a deleted thread (they were
    written before the check that refused them)."""
    table = next(t for t in d.inner_tables if t.endswith("writes"))
    p = d.param
    sql = (
        f"DELETE FROM {table} WHERE thread_id = {p} AND checkpoint_ns = {p} AND checkpoint_id = {p}"
    )
    yield Stmt(sql, [(thread_id, ns, checkpoint_id)], many=True)
    return None


def memory_undo_plan(saver: Any, thread_id: str, ns: str, checkpoint_id: str | None) -> Plan:
    """:func:`undo_writes_plan` for an ``InMemorySaver`` (``writes`` is keyed by thread,
    namespace and checkpoint id); runs no statement."""
    yield from ()  # a plan that runs no statement
    getattr(saver, "writes", {}).pop((thread_id, ns, checkpoint_id), None)
    return None


def set_ttl_plan(d: Dialect, thread_id: str, now: float, ttl: float | None) -> Plan:
    """Set a thread's own TTL (a thread without a row gets one, written ``now``)."""
    p = d.param
    sql = (
        "INSERT INTO stm_lifecycle (thread_id, written_at, ttl_seconds) "
        f"VALUES ({p}, {p}, {p}) ON CONFLICT (thread_id) DO UPDATE SET "
        "ttl_seconds = excluded.ttl_seconds"
    )
    yield Stmt(sql, [(thread_id, now, ttl)], many=True)
    return None


def lifecycle_plan(d: Dialect, thread_ids: Iterable[str] | None) -> Plan:
    """``{thread_id: (written_at, ttl_seconds)}`` of ``thread_ids`` (``None``: all)."""
    select = "SELECT thread_id, written_at, ttl_seconds FROM stm_lifecycle"
    if thread_ids is None:
        rows = (yield Stmt(select)) or []
    else:
        rows = yield from _select_in(d, select, sorted(set(thread_ids)))
    return {str(r[0]): (float(r[1]), _num(r[2])) for r in rows}


def expired_plan(d: Dialect, life: Lifecycle, now: float, limit: int) -> Plan:
    """At most ``limit`` ids of expired threads, those that expired first first."""
    p = d.param
    found: list[str] = []
    if life.ttl is not None:  # index on written_at
        rows = yield Stmt(
            "SELECT thread_id FROM stm_lifecycle WHERE ttl_seconds IS NULL "
            f"AND written_at < {p} ORDER BY written_at LIMIT {p}",
            [now - life.ttl, limit],
        )
        found += [str(r[0]) for r in rows or []]
    rows = yield Stmt(  # index on written_at + ttl_seconds
        "SELECT thread_id FROM stm_lifecycle WHERE ttl_seconds IS NOT NULL "
        f"AND written_at + ttl_seconds < {p} ORDER BY written_at + ttl_seconds LIMIT {p}",
        [now, limit],
    )
    found += [str(r[0]) for r in rows or []]
    return found[:limit]


@dataclass(frozen=True, slots=True)
class Removal:
    """What :func:`remove_plan` deleted: the threads, and rows per table if counted."""

    ids: list[str]
    rows: dict[str, int] = field(default_factory=dict)


def remove_plan(
    d: Dialect,
    thread_ids: Sequence[str],
    *,
    now: float,
    inner: bool,
    last_ids: Mapping[str, str | None] | None = None,
    count: bool = False,
    expired: Lifecycle | None = None,
) -> Plan:
    """Delete threads completely in one transaction: their locks, (with ``expired``)
    a re-check that they are still expired, (with ``count``) their rows per table, their
    tombstones, then every row of theirs in the inner saver's tables (when ``inner``)
    and ours. ``last_ids`` gives the newest checkpoint ids when the inner saver's tables
    are elsewhere. Returns a :class:`Removal`."""
    ids = sorted(set(thread_ids))
    yield from lock_plan(d, ids)
    if expired is not None:
        rows: dict[str, tuple[float, float | None]] = yield from lifecycle_plan(d, ids)
        ids = [t for t in ids if t in rows and expired.expired(rows[t][0], rows[t][1], now)]
    if not ids:
        return Removal([])
    if inner:
        select = f"SELECT thread_id, MAX(checkpoint_id) FROM {_CHECKPOINTS}"
        found = yield from _select_in(d, select, ids, group=True)
        last = {str(r[0]): None if r[1] is None else str(r[1]) for r in found}
    else:
        last = dict(last_ids or {})
    tables = (*(d.inner_tables if inner else ()), *OUR_TABLES)
    counts: dict[str, int] = {}
    if count:
        for table in tables:
            found = yield from _select_in(d, f"SELECT COUNT(*) FROM {table}", ids)
            counts[table] = sum(int(r[0]) for r in found)
    p = d.param
    # An explicit deletion marks the thread with an id of the same kind as LangGraph's
    # checkpoint ids, made now: every checkpoint written before the deletion, one still
    # in flight included (its rows were committed before it), is older; every checkpoint
    # of a fresh run is newer. An expired thread has no write in flight (it was idle for
    # its TTL), and a fresh run that met it has already made its first id: its newest
    # checkpoint id is the mark.
    mark = deletion_mark() if expired is None else None
    tombs = [
        (t, now, max(x for x in (last.get(t), mark) if x is not None))
        for t in ids
        if last.get(t) is not None or mark is not None
    ]
    if tombs:
        sql = (
            "INSERT INTO stm_tombstones (thread_id, deleted_at, last_checkpoint_id) "
            f"VALUES ({p}, {p}, {p}) ON CONFLICT (thread_id) DO UPDATE SET "
            "deleted_at = excluded.deleted_at, last_checkpoint_id = CASE "
            "WHEN stm_tombstones.last_checkpoint_id IS NULL "
            "OR excluded.last_checkpoint_id > stm_tombstones.last_checkpoint_id "
            "THEN excluded.last_checkpoint_id ELSE stm_tombstones.last_checkpoint_id END"
        )
        yield Stmt(sql, tombs, many=True)
    for table in tables:
        for batch in batches(ids, d.max_params):
            cond, params = d.in_list("thread_id", batch)
            yield Stmt(f"DELETE FROM {table} WHERE {cond}", params)
    return Removal(ids, counts)


def _thread_id(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"thread_id must be a non-empty string, got {value!r}")
    return value


def deletion_mark() -> str:
    """A checkpoint-id-shaped mark of this moment (``uuid6``, as LangGraph's ids are):
    ids of checkpoints written before it compare lower, as strings."""
    return checkpoint_id_now()


def visibility_plan(d: Dialect, thread_ids: Iterable[str]) -> Plan:
    """``(lifecycle rows, tombstone marks)`` of ``thread_ids``: what a read needs to
    hide an expired thread, and a deleted thread's leftovers (a checkpoint whose write
    was in flight when the thread was deleted)."""
    life: dict[str, tuple[float, float | None]] = {}
    marks: dict[str, str] = {}
    # One statement per batch: the lifecycle rows, then the tombstones (kind 1).
    for batch in batches(sorted(set(thread_ids)), d.max_params // 2):
        cond, params = d.in_list("thread_id", batch)
        sql = (
            "SELECT 0, thread_id, written_at, ttl_seconds, NULL FROM stm_lifecycle "
            f"WHERE {cond} UNION ALL SELECT 1, thread_id, NULL, NULL, last_checkpoint_id "
            f"FROM stm_tombstones WHERE {cond}"
        )
        for kind, thread, written, ttl, mark in (yield Stmt(sql, params + params)) or []:
            if int(kind) == 0:
                life[str(thread)] = (float(written), _num(ttl))
            elif mark is not None:
                marks[str(thread)] = str(mark)
    return life, marks


def purge_plan(d: Dialect, before: float, limit: int) -> Plan:
    """Delete at most ``limit`` tombstones older than ``before``; return how many."""
    p = d.param
    rows = (
        yield Stmt(
            f"SELECT thread_id FROM stm_tombstones WHERE deleted_at < {p} "
            f"ORDER BY deleted_at LIMIT {p}",
            [before, limit],
        )
    ) or []
    ids = [str(r[0]) for r in rows]
    for batch in batches(ids, d.max_params - 1):
        cond, params = d.in_list("thread_id", batch)
        yield Stmt(
            f"DELETE FROM stm_tombstones WHERE {cond} AND deleted_at < {p}", [*params, before]
        )
    return len(ids)


def backfill_lifecycle(d: Dialect) -> Plan:
    """Migration step: a lifecycle row for every projected thread, written at its latest
    checkpoint's time, so threads older than the table expire too."""
    rows = (yield Stmt("SELECT thread_id, updated_at FROM stm_threads")) or []
    out = []
    for thread_id, updated_at in rows:
        try:
            written = datetime.fromisoformat(str(updated_at))
        except ValueError:
            continue
        if written.tzinfo is None:
            written = written.replace(tzinfo=UTC)
        out.append((str(thread_id), written.timestamp(), None))
    if out:
        yield Stmt(d.ignoring("stm_lifecycle", "thread_id, written_at, ttl_seconds", 3), out, True)
    return None


def _select_in(d: Dialect, select: str, ids: Sequence[str], *, group: bool = False) -> Plan:
    rows: list[Any] = []
    for batch in batches(list(ids), d.max_params):
        cond, params = d.in_list("thread_id", batch)
        sql = f"{select} WHERE {cond}" + (" GROUP BY thread_id" if group else "")
        rows += (yield Stmt(sql, params)) or []
    return rows


def _num(value: Any) -> float | None:
    return None if value is None else float(value)
