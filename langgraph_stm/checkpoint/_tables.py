"""Our tables as statement plans: what to run, in which order, with no I/O here.

A *plan* is a generator that yields :class:`Stmt` objects; the driver of a backend
(:mod:`._sqlite`, :mod:`._postgres`) runs each statement and sends back the rows of a
query (``None`` after an ``executemany``), and the plan's ``return`` value is the
result. Plans are written once, here, against a :class:`Dialect`: the backends only
provide SQL text and one sync and one async driver each.

The tables (created by each backend's ``MIGRATIONS``; see :mod:`._format` for what
their blobs hold):

- ``stm_bodies (thread_id, checkpoint_ns, digest, message_id, type, data)``
- ``stm_lists (thread_id, checkpoint_ns, digest, base, length, ops)``
- ``stm_values (thread_id, checkpoint_ns, digest, type, data)``
- ``stm_refs (thread_id, checkpoint_ns, checkpoint_id, refs)``
- ``stm_threads (thread_id, checkpoint_id, updated_at, message_count, state)``
- ``stm_lifecycle (thread_id, written_at, ttl_seconds)``, ``stm_tombstones (thread_id,
  deleted_at, last_checkpoint_id)``: the thread lifecycle, planned in :mod:`._retention`
- ``stm_audit (thread_id, run_id, recorded_at, checkpoint_id, resumed_from, owner,
  entry)``: the audit trail
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_stm.checkpoint._encoder import Loaded, WriteSet
from langgraph_stm.checkpoint._format import (
    CHUNK_SIZE,
    DIGEST_SIZE,
    FormatError,
    ListRow,
    chunk_refs,
    decode_refs,
    expand_list,
    pack_body,
    snapshot_rows,
    split_digests,
    unpack_body,
)

__all__ = ["Dialect", "Plan", "Stmt", "ThreadRow"]

LEGACY_OWNER = "*"
"""``stm_refs`` owner of rows converted from the first layout (never reclaimed)."""
OUR_TABLES = (
    "stm_bodies",
    "stm_lists",
    "stm_values",
    "stm_refs",
    "stm_threads",
    "stm_lifecycle",
    "stm_audit",
    "stm_owners",
    "stm_claims",
)
"""Every table of ours whose rows of a thread are deleted with it (``thread_id``
column). ``stm_tombstones`` is not one: a thread's tombstone outlives it."""


@dataclass(frozen=True, slots=True)
class Stmt:
    """One statement: ``params`` is a sequence of parameter rows when ``many``."""

    sql: str
    params: Any = ()
    many: bool = False


Plan = Generator[Stmt, "list[Any] | None", Any]


def run(plan: Plan, query: Any, execute_many: Any) -> Any:
    """Drive ``plan``: ``query(sql, params)`` returns a statement's rows (``None`` when
    it returns none), ``execute_many(sql, rows)`` runs a batch. Every sync driver runs
    its plans through this loop."""
    rows: list[Any] | None = None
    while True:
        try:
            stmt = plan.send(rows)
        except StopIteration as stop:
            return stop.value
        if stmt.many:
            execute_many(stmt.sql, stmt.params)
            rows = None
        else:
            rows = query(stmt.sql, stmt.params)


async def arun(plan: Plan, query: Any, execute_many: Any) -> Any:
    """Async twin of :func:`run`: ``query`` and ``execute_many`` are coroutines."""
    rows: list[Any] | None = None
    while True:
        try:
            stmt = plan.send(rows)
        except StopIteration as stop:
            return stop.value
        if stmt.many:
            await execute_many(stmt.sql, stmt.params)
            rows = None
        else:
            rows = await query(stmt.sql, stmt.params)


@dataclass(frozen=True, slots=True)
class ThreadRow:
    """A stored projection row (see :mod:`._threads`)."""

    thread_id: str
    checkpoint_id: str
    updated_at: str
    message_count: int | None
    state: str


@dataclass(frozen=True, slots=True)
class Dialect:
    """The SQL of one backend for the plans below."""

    param: str
    """The parameter marker (``?`` or ``%s``)."""
    insert_ignore: str
    """``INSERT`` prefix that ignores duplicates, with ``{cols}`` and ``{table}``."""
    ignore_suffix: str
    """Suffix of an ignoring insert (``ON CONFLICT DO NOTHING`` or empty)."""
    state_param: str
    """Placeholder of the projection's state column (a cast to jsonb on PostgreSQL)."""
    state_column: str
    """How the projection's state column is selected as text."""
    inner_tables: tuple[str, ...]
    """The inner saver's tables with a ``thread_id`` column (deleted with the thread)."""
    lock_thread: str | None
    """Statement taking a transaction-scoped lock on one thread (key params), if any."""
    no_limit: Any
    """The LIMIT value meaning "all"."""
    max_params: int = 900
    """Most parameters in one ``IN`` list."""

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column IN (...)`` for ``values`` (at most :attr:`max_params`)."""
        return f"{column} IN ({', '.join([self.param] * len(values))})", list(values)

    def ignoring(self, table: str, cols: str, n: int) -> str:
        marks = ", ".join([self.param] * n)
        insert = self.insert_ignore.format(table=table, cols=cols)
        return f"{insert} VALUES ({marks}){self.ignore_suffix}"


def batches(values: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``values`` in slices of at most ``size``."""
    return [values[i : i + size] for i in range(0, len(values), size)]


def _select_in(
    d: Dialect, select: str, thread_id: str, ns: str, column: str, values: Sequence[Any]
) -> Plan:
    """Rows of ``select ... WHERE thread_id, checkpoint_ns AND column IN values``."""
    rows: list[Any] = []
    p = d.param
    for batch in batches(list(values), d.max_params):
        cond, params = d.in_list(column, batch)
        sql = f"{select} WHERE thread_id = {p} AND checkpoint_ns = {p} AND {cond}"
        rows += (yield Stmt(sql, [thread_id, ns, *params])) or []
    return rows


# -- writes ------------------------------------------------------------------------------
def write_plan(
    d: Dialect,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
    write: WriteSet | None,
    projection: ThreadRow | None,
    cold_projection: ThreadRow | None = None,
) -> Plan:
    """Our rows of one checkpoint: bodies, list records, values, refs, projection.

    When the rows the write relies on are gone (another worker deleted the thread),
    the write stores every row instead, and ``cold_projection`` (if given) replaces
    ``projection``: it describes only what the inner saver will then hold.
    """
    p = d.param
    rows: list[tuple[Any, ...]]
    if write is not None:
        bodies, lists = write.bodies, write.lists
        if write.requires and write.cold is not None:
            wanted = sorted(set(write.requires))
            found = yield from _select_in(
                d, "SELECT digest FROM stm_lists", thread_id, ns, "digest", wanted
            )
            if len(found) < len(wanted):  # another worker deleted what the delta relies on
                bodies, lists = write.cold()
                projection = cold_projection or projection
        if bodies:
            sql = d.ignoring(
                "stm_bodies", "thread_id, checkpoint_ns, digest, message_id, type, data", 6
            )
            rows = [(thread_id, ns, b.digest, b.message_id, b.type, b.data) for b in bodies]
            yield Stmt(sql, rows, many=True)
        if lists:
            sql = (
                "INSERT INTO stm_lists (thread_id, checkpoint_ns, digest, base, length, ops) "
                f"VALUES ({p}, {p}, {p}, {p}, {p}, {p}) "
                "ON CONFLICT (thread_id, checkpoint_ns, digest) DO UPDATE SET "
                "base = NULL, ops = excluded.ops "
                "WHERE excluded.base IS NULL AND stm_lists.base IS NOT NULL"
            )
            rows = [(thread_id, ns, r.digest, r.base, r.length, r.ops) for r in lists]
            yield Stmt(sql, rows, many=True)
        if write.value_rows:
            sql = d.ignoring("stm_values", "thread_id, checkpoint_ns, digest, type, data", 5)
            rows = [(thread_id, ns, v.digest, v.type, v.data) for v in write.value_rows]
            yield Stmt(sql, rows, many=True)
        if write.refs:
            sql = d.ignoring("stm_refs", "thread_id, checkpoint_ns, checkpoint_id, refs", 4)
            rows = [(thread_id, ns, owner, refs) for owner, refs in write.refs]
            yield Stmt(sql, rows, many=True)
    if projection is not None:
        yield from upsert_projection(d, projection, force=False)
    return None


def upsert_projection(d: Dialect, row: ThreadRow, *, force: bool) -> Plan:
    """Store a projection row; unless ``force``, never over a newer checkpoint's."""
    p = d.param
    sql = (
        "INSERT INTO stm_threads (thread_id, checkpoint_id, updated_at, message_count, state) "
        f"VALUES ({p}, {p}, {p}, {p}, {d.state_param}) ON CONFLICT (thread_id) DO UPDATE SET "
        "checkpoint_id = excluded.checkpoint_id, updated_at = excluded.updated_at, "
        "message_count = excluded.message_count, state = excluded.state"
    )
    if not force:
        sql += " WHERE excluded.checkpoint_id >= stm_threads.checkpoint_id"
    params = (row.thread_id, row.checkpoint_id, row.updated_at, row.message_count, row.state)
    yield Stmt(sql, [params], many=True)
    return None


# -- reads -------------------------------------------------------------------------------
def load_plan(
    d: Dialect,
    thread_id: str,
    ns: str,
    lists: Sequence[bytes],
    values: Sequence[bytes],
    missing_bodies: Any,
) -> Plan:
    """Fetch the list records of ``lists`` (with snapshots and chunks), the bodies they
    use that ``missing_bodies(digests)`` reports as not cached, and the values.

    Returns ``(expanded lists, Loaded)``; raises :class:`FormatError` when a row is
    missing or corrupt.
    """
    rows: dict[bytes, ListRow] = {}
    select = "SELECT digest, base, length, ops FROM stm_lists"
    wanted = sorted(set(lists))
    for r in (yield from _select_in(d, select, thread_id, ns, "digest", wanted)):
        rows[bytes(r[0])] = ListRow(bytes(r[0]), _blob(r[1]), int(r[2]), bytes(r[3]))
    bases = sorted({r.base for r in rows.values() if r.base} - set(rows))
    for r in (yield from _select_in(d, select, thread_id, ns, "digest", bases)):
        rows[bytes(r[0])] = ListRow(bytes(r[0]), _blob(r[1]), int(r[2]), bytes(r[3]))
    chunks = sorted({c for r in rows.values() if r.base is None for c in chunk_refs(r)} - set(rows))
    for r in (yield from _select_in(d, select, thread_id, ns, "digest", chunks)):
        rows[bytes(r[0])] = ListRow(bytes(r[0]), _blob(r[1]), int(r[2]), bytes(r[3]))
    expanded = {digest: expand_list(digest, rows) for digest in wanted}
    used = [e for entries, *_ in expanded.values() for e in entries]
    fetch = missing_bodies(used)
    bodies: dict[bytes, tuple[str, bytes]] = {}
    select = "SELECT digest, type, data FROM stm_bodies"
    for r in (yield from _select_in(d, select, thread_id, ns, "digest", fetch)):
        bodies[bytes(r[0])] = unpack_body(str(r[1]), bytes(r[2]))
    stored: dict[bytes, tuple[str, bytes]] = {}
    select = "SELECT digest, type, data FROM stm_values"
    for r in (yield from _select_in(d, select, thread_id, ns, "digest", sorted(set(values)))):
        stored[bytes(r[0])] = (str(r[1]), bytes(r[2]))
    return expanded, Loaded(rows, bodies, stored)


def _blob(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


# -- locks and reclaim (deletion: :mod:`._retention`) ---------------------------------------
def lock_plan(d: Dialect, thread_ids: Sequence[str]) -> Plan:
    """Take the backend's thread locks (in a fixed order, so lockers never deadlock)."""
    if d.lock_thread is not None:
        for t in sorted(set(thread_ids)):
            yield Stmt(d.lock_thread, thread_key(t))
    return None


def thread_key(thread_id: str) -> tuple[int, int]:
    """The two 32-bit keys of a thread's advisory lock (our class id, a thread hash)."""
    h = int.from_bytes(hashlib.blake2b(thread_id.encode(), digest_size=4).digest(), "big")
    return 0x53544D, h - (1 << 31)


def vacuum_plan(
    d: Dialect,
    thread_id: str,
    live_sql: tuple[str, list[Any]] | None,
    live: set[tuple[str, str]] | None,
    *,
    dry_run: bool = False,
) -> Plan:
    """Remove our rows of ``thread_id`` that no remaining checkpoint references.

    ``live_sql`` selects ``(checkpoint_ns, checkpoint_id)`` of the thread's checkpoints
    from the inner saver's tables; ``live`` gives them directly (in-memory savers).
    Returns the number of rows removed; with ``dry_run``, only reads (no lock, no
    delete) and returns how many rows it would remove.
    """
    if not dry_run:
        yield from lock_plan(d, [thread_id])
    p = d.param
    if live is None:
        assert live_sql is not None
        live = {(str(r[0]), str(r[1])) for r in (yield Stmt(*live_sql)) or []}
    refs = (
        yield Stmt(
            f"SELECT checkpoint_ns, checkpoint_id, refs FROM stm_refs WHERE thread_id = {p}",
            [thread_id],
        )
    ) or []
    # A checkpoint id newer than every live checkpoint of its namespace belongs to a
    # write in flight (its rows can be committed before its checkpoint, e.g. by another
    # commit on a shared connection): such refs are kept, as if live. Checkpoint ids
    # grow with time, so this is a generation mark that needs no clock.
    newest: dict[str, str] = {}
    for ns, owner in live:
        if "\x1f" not in owner and owner > newest.get(ns, ""):
            newest[ns] = owner
    live = set(live) | {
        (str(r[0]), str(r[1]))
        for r in refs
        if "\x1f" not in str(r[1]) and str(r[1]) > newest.get(str(r[0]), "")
    }
    removed = 0
    dead = [
        (thread_id, str(r[0]), str(r[1]))
        for r in refs
        if (str(r[0]), str(r[1])) not in live and str(r[1]) != LEGACY_OWNER
    ]
    if dead and not dry_run:
        yield Stmt(
            f"DELETE FROM stm_refs WHERE thread_id = {p} AND checkpoint_ns = {p} "
            f"AND checkpoint_id = {p}",
            dead,
            many=True,
        )
    removed += len(dead)
    # Rows converted from the first layout carry no refs: a "*" owner keeps them all.
    legacy = {str(r[0]) for r in refs if str(r[1]) == LEGACY_OWNER}
    want_lists: dict[str, set[bytes]] = {}
    want_values: dict[str, set[bytes]] = {}
    for r in refs:
        if (str(r[0]), str(r[1])) in live:
            lists, values = decode_refs(bytes(r[2]))
            want_lists.setdefault(str(r[0]), set()).update(lists)
            want_values.setdefault(str(r[0]), set()).update(values)
    rows = (
        yield Stmt(
            f"SELECT checkpoint_ns, digest, base, length, ops FROM stm_lists WHERE thread_id = {p}",
            [thread_id],
        )
    ) or []
    by_ns: dict[str, dict[bytes, ListRow]] = {}
    for r in rows:
        by_ns.setdefault(str(r[0]), {})[bytes(r[1])] = ListRow(
            bytes(r[1]), _blob(r[2]), int(r[3]), bytes(r[4])
        )
    live_lists: set[tuple[str, bytes]] = set()
    live_bodies: set[tuple[str, bytes]] = set()
    for ns, digests in want_lists.items():
        records = by_ns.get(ns, {})
        for digest in digests:
            row = records.get(digest)
            if row is None:
                continue
            live_lists.add((ns, digest))
            snapshot = records.get(row.base) if row.base else row
            if snapshot is None:
                continue
            live_lists.add((ns, snapshot.digest))
            live_lists.update((ns, c) for c in chunk_refs(snapshot))
            try:
                entries, *_ = expand_list(digest, records)
            except FormatError:
                continue
            live_bodies.update((ns, e) for e in entries)
    dead_lists = [
        (thread_id, ns, digest)
        for ns, records in by_ns.items()
        if ns not in legacy
        for digest in records
        if (ns, digest) not in live_lists
    ]
    removed += yield from _delete_keys(d, "stm_lists", dead_lists, dry_run)
    for table, keep in (("stm_bodies", live_bodies), ("stm_values", None)):
        stored = (
            yield Stmt(
                f"SELECT checkpoint_ns, digest FROM {table} WHERE thread_id = {p}", [thread_id]
            )
        ) or []
        if keep is None:
            keep = {(ns, v) for ns, values in want_values.items() for v in values}
        dead_rows = [
            (thread_id, str(r[0]), bytes(r[1]))
            for r in stored
            if str(r[0]) not in legacy and (str(r[0]), bytes(r[1])) not in keep
        ]
        removed += yield from _delete_keys(d, table, dead_rows, dry_run)
    return removed


def _delete_keys(
    d: Dialect, table: str, keys: list[tuple[str, str, bytes]], dry_run: bool = False
) -> Plan:
    if keys and not dry_run:
        p = d.param
        yield Stmt(
            f"DELETE FROM {table} WHERE thread_id = {p} AND checkpoint_ns = {p} AND digest = {p}",
            sorted(keys),
            many=True,
        )
    return len(keys)


def threads_with_rows_plan(d: Dialect) -> Plan:
    """Every thread id that has rows in our message tables."""
    rows = (
        yield Stmt(
            "SELECT thread_id FROM stm_refs UNION SELECT thread_id FROM stm_lists "
            "UNION SELECT thread_id FROM stm_values"
        )
    ) or []
    return [str(r[0]) for r in rows]


# -- projection reads ----------------------------------------------------------------------
def projection_plan(d: Dialect, thread_id: str) -> Plan:
    """The stored projection row of ``thread_id`` (or ``None``)."""
    p = d.param
    rows = (
        yield Stmt(
            "SELECT thread_id, checkpoint_id, updated_at, message_count, "
            f"{d.state_column} FROM stm_threads WHERE thread_id = {p}",
            [thread_id],
        )
    ) or []
    return _thread_row(rows[0]) if rows else None


def projections_plan(d: Dialect, thread_ids: Sequence[str] | None, order_limit: int | None) -> Plan:
    """Projection rows (all, or of ``thread_ids``), newest first, at most ``order_limit``."""
    sql = (
        "SELECT thread_id, checkpoint_id, updated_at, message_count, "
        f"{d.state_column} FROM stm_threads"
    )
    params: list[Any] = []
    if thread_ids is not None:
        if not thread_ids:
            return []
        cond, params = d.in_list("thread_id", list(thread_ids))
        sql += f" WHERE {cond}"
    sql += f" ORDER BY updated_at DESC, thread_id DESC LIMIT {d.param}"
    params.append(d.no_limit if order_limit is None else order_limit)
    return [_thread_row(r) for r in (yield Stmt(sql, params)) or []]


def _thread_row(r: Any) -> ThreadRow:
    count = r[3]
    return ThreadRow(
        str(r[0]), str(r[1]), str(r[2]), None if count is None else int(count), str(r[4])
    )


# -- schema --------------------------------------------------------------------------------
Migration = str | Any
"""A migration step: one SQL statement, or a function ``(Dialect) -> Plan``."""


def version_plan(d: Dialect) -> Plan:
    """The last migration applied (-1 for none); raises the driver's error if the
    ``stm_migrations`` table does not exist yet."""
    rows = (yield Stmt("SELECT MAX(v) FROM stm_migrations")) or []
    return -1 if not rows or rows[0][0] is None else int(rows[0][0])


def migrate_plan(d: Dialect, migrations: Sequence[Migration]) -> Plan:
    """Apply the migrations not applied yet, recording each (run in one transaction).

    ``migrations[0]`` creates ``stm_migrations``. Migrations are append-only: a step
    once released is never edited, so every database replays the same history.
    """
    first = migrations[0]
    yield Stmt(first)
    current = yield from version_plan(d)
    for v in range(current + 1, len(migrations)):
        step = migrations[v]
        if isinstance(step, str):
            yield Stmt(step)
        else:
            yield from step(d)
        yield Stmt(f"INSERT INTO stm_migrations (v) VALUES ({d.param})", [(v,)], many=True)
    return len(migrations) - 1


def _convert_list(row: Any) -> list[tuple[Any, ...]]:
    """One list row of the first layouts as rows of today's: snapshots of
    ``CHUNK_SIZE`` messages or more written before chunking existed are stored flat
    (every digest) and become a chunked snapshot plus its chunks."""
    thread_id, ns, digest, base, length, ops = row
    ops = bytes(ops)
    if base is None and length >= CHUNK_SIZE and len(ops) == DIGEST_SIZE * length:
        snapshot, chunks = snapshot_rows(bytes(digest), split_digests(ops))
        return [(thread_id, ns, r.digest, r.base, r.length, r.ops) for r in (*chunks, snapshot)]
    return [(thread_id, ns, bytes(digest), _blob(base), int(length), ops)]


def convert_old_rows(columns_sql: str) -> Any:
    """Migration step: copy message rows of the first table layouts (``stm_message_bodies``
    with loose bodies or packs, ``stm_message_lists``) into ``stm_bodies`` / ``stm_lists``.

    ``columns_sql`` lists the column names of ``stm_message_bodies`` (empty when the
    table does not exist) in the backend's dialect.
    """

    def step(d: Dialect) -> Plan:
        columns = {str(r[0]) for r in (yield Stmt(columns_sql)) or []}
        if not columns:
            return None
        body_cols = "thread_id, checkpoint_ns, digest, message_id, type, data"
        insert = d.ignoring("stm_bodies", body_cols, 6)
        if "packed" in columns:
            rows = (
                yield Stmt(
                    "SELECT thread_id, checkpoint_ns, packed, digests, ends, types, body "
                    "FROM stm_message_bodies"
                )
            ) or []
            out = []
            for thread_id, ns, packed, digests, ends, types, body in rows:
                digests, body = bytes(digests), bytes(body)
                if not packed:
                    out.append((thread_id, ns, digests, None, *pack_body(str(types), body)))
                    continue
                keys = split_digests(digests)
                kinds = str(types).split("\n") if "\n" in str(types) else [str(types)] * len(keys)
                ends_blob = bytes(ends)
                n = len(keys)
                start = 1 if n < 16 else 3 if n < 1 << 16 else 5
                for i, key in enumerate(keys):
                    end = int.from_bytes(ends_blob[4 * i : 4 * i + 4], "big")
                    out.append((thread_id, ns, key, None, *pack_body(kinds[i], body[start:end])))
                    start = end
        else:
            rows = (
                yield Stmt(
                    "SELECT thread_id, checkpoint_ns, digest, message_id, type, body "
                    "FROM stm_message_bodies"
                )
            ) or []
            out = [
                (t, ns, bytes(dg), mid, *pack_body(str(ty), bytes(b)))
                for t, ns, dg, mid, ty, b in rows
            ]
        if out:
            yield Stmt(insert, out, many=True)
        lists = (
            yield Stmt(
                "SELECT thread_id, checkpoint_ns, digest, base, length, ops FROM stm_message_lists"
            )
        ) or []
        if lists:
            sql = d.ignoring("stm_lists", "thread_id, checkpoint_ns, digest, base, length, ops", 6)
            yield Stmt(sql, [r for row in lists for r in _convert_list(row)], many=True)
            scopes = sorted({(str(r[0]), str(r[1])) for r in lists})
            sql = d.ignoring("stm_refs", "thread_id, checkpoint_ns, checkpoint_id, refs", 4)
            yield Stmt(sql, [(t, ns, LEGACY_OWNER, b"") for t, ns in scopes], many=True)
        return None

    return step


def latest_roots_plan(sql: str) -> Plan:
    """Thread id -> latest root checkpoint id, from the inner saver's tables."""
    rows = (yield Stmt(sql)) or []
    return {str(r[0]): str(r[1]) for r in rows if r[1] is not None}


def delete_projections_plan(d: Dialect, thread_ids: Sequence[str]) -> Plan:
    """Delete the projection rows of threads that have no checkpoint any more."""
    if thread_ids:
        sql = f"DELETE FROM stm_threads WHERE thread_id = {d.param}"
        yield Stmt(sql, [(t,) for t in thread_ids], many=True)
    return None


def copy_plan(d: Dialect, source: str, target: str) -> Plan:
    """Copy our message rows of ``source`` to ``target`` (``copy_thread``)."""
    p = d.param
    for table, cols in (
        ("stm_bodies", "checkpoint_ns, digest, message_id, type, data"),
        ("stm_lists", "checkpoint_ns, digest, base, length, ops"),
        ("stm_values", "checkpoint_ns, digest, type, data"),
        ("stm_refs", "checkpoint_ns, checkpoint_id, refs"),
    ):
        sql = (
            f"{d.insert_ignore.format(table=table, cols='thread_id, ' + cols)} "
            f"SELECT {p}, {cols} FROM {table} WHERE thread_id = {p}{d.ignore_suffix}"
        )
        yield Stmt(sql, [(target, source)], many=True)
    return None
