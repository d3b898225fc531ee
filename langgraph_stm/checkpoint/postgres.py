"""PostgreSQL stores for :class:`~langgraph_stm.checkpoint.STMSaver`.

Our tables live in the inner saver's database and are written through its connection
(or pool) under its lock. The inner saver's connection is in autocommit mode and may be
a pool, so we cannot join its transaction without its private internals; instead the
writes are ordered so that no reader ever sees a checkpoint whose data is missing:

1. message bodies, list records and the projection are committed first, in one
   transaction (bodies and lists are content-addressed, so a failed checkpoint write
   only leaves unreferenced rows behind);
2. the inner saver writes the checkpoint.

The projection is only trusted when its checkpoint id is the thread's latest one; if
the checkpoint write failed (or the process died before it), the next read finds the
projection pointing elsewhere and rebuilds it from the latest checkpoint.

Message bodies are loose rows until :data:`~langgraph_stm.checkpoint._codec.PACK_SIZE`
of them accumulate, then packed into one row by the write of step 1 (the pack is
inserted and the loose rows deleted in its transaction; two writers packing at once
at worst store a body twice, which reads ignore). A read is one statement, so one
round trip and one snapshot: the wanted list records and their snapshots by primary
key, and every chunk row (a partial index) and body segment of the thread and
namespace. Packs are TOASTed; their
column uses lz4 compression where the server supports it (decompressing pglz would
dominate the read).

Run :meth:`STMSaver.setup` (or ``await asetup()``) once, as with ``PostgresSaver``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

try:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection, AsyncCursor, Connection, Cursor
    from psycopg.rows import TupleRow, tuple_row
    from psycopg_pool import AsyncConnectionPool, ConnectionPool
except ImportError:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "STMSaver over PostgreSQL needs langgraph-checkpoint-postgres and psycopg: "
        "pip install 'langgraph-stm[postgres]'"
    ) from None

from langgraph_stm.checkpoint._codec import BodyRow, BodySet, Expanded, ListRow
from langgraph_stm.checkpoint._projection import ProjectionRow
from langgraph_stm.checkpoint._store import (
    DELETE_ORPHAN_PROJECTIONS,
    SELECT_STALE,
    Store,
    ThreadQuery,
    WriteSQL,
    list_threads_sql,
    loaded_rows,
    projection_params,
    write_plan,
)

__all__ = ["MIGRATIONS", "AsyncPostgresStore", "PostgresStore"]

MIGRATIONS: list[str] = [
    "CREATE TABLE IF NOT EXISTS stm_migrations (v INTEGER PRIMARY KEY)",
    # A body row is one loose body (packed = 0; digests is its digest, ends is NULL) or a
    # pack of bodies (packed = 1; digest is the digest of digests, see _codec.PackRow).
    """CREATE TABLE IF NOT EXISTS stm_message_bodies (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        packed INTEGER NOT NULL,
        digest BYTEA NOT NULL,
        digests BYTEA NOT NULL,
        ends BYTEA,
        types TEXT NOT NULL,
        body BYTEA NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, packed, digest)
    )""",
    """CREATE TABLE IF NOT EXISTS stm_message_lists (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        digest BYTEA NOT NULL,
        base BYTEA,
        length INTEGER NOT NULL,
        ops BYTEA NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, digest)
    )""",
    """CREATE TABLE IF NOT EXISTS stm_threads (
        thread_id TEXT PRIMARY KEY,
        checkpoint_id TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        message_count INTEGER,
        state JSONB NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS stm_threads_updated_at_idx ON stm_threads (updated_at)",
    # Packs are large and TOASTed: lz4 (where the server has it) decompresses several
    # times faster than the default pglz, which dominates reading a long thread.
    """DO $$ BEGIN
        EXECUTE 'ALTER TABLE stm_message_bodies ALTER COLUMN body SET COMPRESSION lz4';
    EXCEPTION WHEN OTHERS THEN NULL;
    END $$""",
    # The chunk rows of snapshots (_codec.snapshot_rows), all read with every load.
    "CREATE INDEX IF NOT EXISTS stm_msg_chunks_idx "
    "ON stm_message_lists (thread_id, checkpoint_ns) WHERE base = ''::bytea",
    # List records and chunks are a few KB of incompressible digests: kept in the row
    # (not TOASTed out of line, which costs a lookup per row on every read).
    "ALTER TABLE stm_message_lists ALTER COLUMN ops SET STORAGE MAIN",
]
"""Our schema, one statement per version; ``stm_migrations`` records what ran."""

SETUP_LOCK = 0x53544D5F53455450
"""Advisory lock key that serializes setups (ours and the inner saver's) across workers."""
MIGRATION_LOCK = SETUP_LOCK + 1
"""Advisory lock key taken in our migration transaction (a pool's setup lock is held on
another connection, so this one has a key of its own)."""
# Polled, not waited for: the inner saver's setup runs CREATE INDEX CONCURRENTLY,
# which waits for every open transaction, a blocked pg_advisory_lock call included.
_TRY_LOCK = "SELECT pg_try_advisory_lock(%s)"
_UNLOCK = "SELECT pg_advisory_unlock(%s)"
_XACT_LOCK = "SELECT pg_advisory_xact_lock(%s)"
_LOCK_POLL = 0.05


def _locked(row: TupleRow | None) -> bool:
    """Whether a ``pg_try_advisory_lock`` call returned true."""
    return row is not None and bool(row[0])


_INSERT_BODY = (
    "INSERT INTO stm_message_bodies "
    "(thread_id, checkpoint_ns, packed, digest, digests, ends, types, body) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
)
_SELECT_DIGESTS = (
    "SELECT digests FROM stm_message_bodies WHERE thread_id = %s AND checkpoint_ns = %s"
)
_SELECT_LOOSE_IF_FULL = """
    SELECT digest, types, body FROM stm_message_bodies
    WHERE thread_id = %s AND checkpoint_ns = %s AND packed = 0 AND (
        SELECT COUNT(*) FROM stm_message_bodies
        WHERE thread_id = %s AND checkpoint_ns = %s AND packed = 0
    ) >= %s
"""
_DELETE_LOOSE = (
    "DELETE FROM stm_message_bodies "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND packed = 0 AND digest = %s"
)
# A list is stored once; a snapshot replaces a delta of the same list (never the
# reverse), so a delta written later can always use it as its base.
_INSERT_LIST = """
    INSERT INTO stm_message_lists (thread_id, checkpoint_ns, digest, base, length, ops)
    VALUES (%s, %s, %s, %s, %s, %s)
    ON CONFLICT (thread_id, checkpoint_ns, digest) DO UPDATE SET base = NULL, ops = EXCLUDED.ops
    WHERE EXCLUDED.base IS NULL AND stm_message_lists.base IS NOT NULL
"""
_UPSERT_PROJECTION = """
    INSERT INTO stm_threads (thread_id, checkpoint_id, updated_at, message_count, state)
    VALUES (%s, %s, %s, %s, %s::jsonb)
    ON CONFLICT (thread_id) DO UPDATE SET
        checkpoint_id = EXCLUDED.checkpoint_id,
        updated_at = EXCLUDED.updated_at,
        message_count = EXCLUDED.message_count,
        state = EXCLUDED.state
    WHERE EXCLUDED.checkpoint_id >= stm_threads.checkpoint_id
"""
_FORCE_PROJECTION = _UPSERT_PROJECTION.split("    WHERE EXCLUDED")[0]
_SELECT_PROJECTION = (
    "SELECT thread_id, checkpoint_id, updated_at, message_count, state::text "
    "FROM stm_threads WHERE thread_id = %s"
)
_SELECT_LATEST = (
    "SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = ''"
)
_DELETE_PROJECTION = "DELETE FROM stm_threads WHERE thread_id = %s"
INNER_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
"""The PostgresSaver tables holding a thread's rows (what its ``delete_thread`` empties)."""
_DELETE_THREADS = [
    *(f"DELETE FROM {table} WHERE thread_id = ANY(%s)" for table in INNER_TABLES),
    "DELETE FROM stm_message_bodies WHERE thread_id = ANY(%s)",
    "DELETE FROM stm_message_lists WHERE thread_id = ANY(%s)",
    "DELETE FROM stm_threads WHERE thread_id = ANY(%s)",
]
_COPY_ROWS = [
    "INSERT INTO stm_message_bodies "
    "SELECT %s, checkpoint_ns, packed, digest, digests, ends, types, body "
    "FROM stm_message_bodies WHERE thread_id = %s ON CONFLICT DO NOTHING",
    "INSERT INTO stm_message_lists "
    "SELECT %s, checkpoint_ns, digest, base, length, ops "
    "FROM stm_message_lists WHERE thread_id = %s ON CONFLICT DO NOTHING",
]
_WRITE_SQL = WriteSQL(
    select_digests=_SELECT_DIGESTS,
    insert_body=_INSERT_BODY,
    select_loose_if_full=_SELECT_LOOSE_IF_FULL,
    delete_loose=_DELETE_LOOSE,
    insert_list=_INSERT_LIST,
    upsert_projection=_UPSERT_PROJECTION,
)
_LIST_BY_KEY = """
    SELECT 0, digest, base, length, ops, NULL::text FROM stm_message_lists
    WHERE thread_id = %(t)s AND checkpoint_ns = %(ns)s AND digest = %(k{i})s
    UNION ALL
    SELECT 0, digest, base, length, ops, NULL FROM stm_message_lists
    WHERE thread_id = %(t)s AND checkpoint_ns = %(ns)s AND digest = (
        SELECT base FROM stm_message_lists
        WHERE thread_id = %(t)s AND checkpoint_ns = %(ns)s AND digest = %(k{i})s
    )
    UNION ALL
"""
_ALL_BODIES = """
    SELECT 0, digest, base, length, ops, NULL FROM stm_message_lists
    WHERE thread_id = %(t)s AND checkpoint_ns = %(ns)s AND base = ''::bytea
    UNION ALL
    SELECT 1, digests, ends, NULL, body, types FROM stm_message_bodies
    WHERE thread_id = %(t)s AND checkpoint_ns = %(ns)s
"""


def _load_query(keys: Sequence[bytes]) -> tuple[str, dict[str, Any]]:
    """One statement (one round trip, one snapshot): the list records of ``keys`` and
    their snapshots (one unique-key lookup each), and every chunk row and body segment
    of the thread and namespace."""
    sql = "".join(_LIST_BY_KEY.format(i=i) for i in range(len(keys))) + _ALL_BODIES
    return sql, {f"k{i}": k for i, k in enumerate(keys)}


def _list_query_sql(query: ThreadQuery) -> tuple[str, list[Any]]:
    return list_threads_sql(query, param="%s", state="state::text", no_limit=None)


def _to_projection(r: TupleRow) -> ProjectionRow:
    return ProjectionRow(r[0], r[1], r[2], r[3], r[4])


class PostgresStore(Store):
    """Our tables through a ``PostgresSaver``'s connection or pool (sync methods only)."""

    stores_full_values = False
    async_error = (
        "PostgresSaver is synchronous: use the sync methods, or wrap an AsyncPostgresSaver "
        "(STMSaver.from_async_postgres)"
    )

    def __init__(self, inner: PostgresSaver) -> None:
        self.inner = inner

    @contextmanager
    def _cursor(self, *, transaction: bool = True) -> Iterator[Cursor[TupleRow]]:
        with self.inner.lock:
            target = self.inner.conn
            if isinstance(target, ConnectionPool):
                with target.connection() as conn:
                    yield from self._on(conn, transaction)
            else:
                yield from self._on(target, transaction)

    @staticmethod
    def _on(conn: Connection[Any], transaction: bool) -> Iterator[Cursor[TupleRow]]:
        if transaction:
            with conn.transaction(), conn.cursor(binary=True, row_factory=tuple_row) as cur:
                yield cur
        else:
            with conn.cursor(binary=True, row_factory=tuple_row) as cur:
                yield cur

    @contextmanager
    def setup_guard(self) -> Iterator[None]:
        """Hold a session advisory lock while the inner saver's and our setup run, so
        that workers setting up a fresh database at once do not collide (two concurrent
        ``CREATE TABLE IF NOT EXISTS`` fail with a unique violation on ``pg_type``).

        With a pool the lock is held on a connection of its own, so only when the pool
        can lend another one to the setup (``max_size >= 2``).
        """
        target = self.inner.conn
        if isinstance(target, ConnectionPool):
            if target.max_size < 2:
                yield
                return
            with target.connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
                while not _locked(cur.execute(_TRY_LOCK, (SETUP_LOCK,)).fetchone()):
                    time.sleep(_LOCK_POLL)
                try:
                    yield
                finally:
                    cur.execute(_UNLOCK, (SETUP_LOCK,))
            return
        while True:
            with self._cursor(transaction=False) as cur:
                if _locked(cur.execute(_TRY_LOCK, (SETUP_LOCK,)).fetchone()):
                    break
            time.sleep(_LOCK_POLL)
        try:
            yield
        finally:
            with self._cursor(transaction=False) as cur:
                cur.execute(_UNLOCK, (SETUP_LOCK,))

    def setup(self) -> None:
        """Create or migrate our tables."""
        with self._cursor() as cur:
            cur.execute(_XACT_LOCK, (MIGRATION_LOCK,))
            cur.execute(MIGRATIONS[0])
            row = cur.execute("SELECT MAX(v) FROM stm_migrations").fetchone()
            version = -1 if row is None or row[0] is None else row[0]
            for v in range(version + 1, len(MIGRATIONS)):
                cur.execute(MIGRATIONS[v])
                cur.execute("INSERT INTO stm_migrations (v) VALUES (%s)", (v,))

    @contextmanager
    def writing(
        self,
        thread_id: str,
        checkpoint_ns: str,
        bodies: Sequence[BodyRow],
        lists: Sequence[ListRow],
        projection: ProjectionRow | None,
        *,
        order: Sequence[bytes] = (),
        cold: bool = False,
    ) -> Iterator[None]:
        if bodies or lists or projection is not None:
            ns = checkpoint_ns
            plan = write_plan(_WRITE_SQL, thread_id, ns, bodies, lists, projection, order, cold)
            with self._cursor() as cur:
                result: list[Any] | None = None
                while True:
                    try:
                        sql, params, many = plan.send(result)
                    except StopIteration:
                        break
                    if many:
                        cur.executemany(sql, params)
                        result = None
                    else:
                        cur.execute(sql, params)
                        result = cur.fetchall() if cur.description else None
        yield

    @contextmanager
    def deleting(self, thread_ids: Sequence[str]) -> Iterator[None]:
        # The thread's checkpoints and our rows go in one transaction, all or nothing;
        # the inner saver's own delete then runs and finds nothing more to delete.
        with self._cursor() as cur:
            for sql in _DELETE_THREADS:
                cur.execute(sql, (list(thread_ids),))
        yield

    def copy_rows(self, source_thread_id: str, target_thread_id: str) -> None:
        with self._cursor() as cur:
            for sql in _COPY_ROWS:
                cur.execute(sql, (target_thread_id, source_thread_id))

    def load(
        self, thread_id: str, checkpoint_ns: str, lists: Collection[bytes]
    ) -> tuple[Expanded, BodySet]:
        sql, params = _load_query(sorted(lists))
        params |= {"t": thread_id, "ns": checkpoint_ns}
        with self._cursor(transaction=False) as cur:
            fetched = cur.execute(sql, params).fetchall()
        return loaded_rows(fetched, lists)

    def get_projection(self, thread_id: str) -> tuple[ProjectionRow | None, str | None]:
        with self._cursor(transaction=False) as cur:
            row = cur.execute(_SELECT_PROJECTION, (thread_id,)).fetchone()
            latest = cur.execute(_SELECT_LATEST, (thread_id,)).fetchone()
        return (None if row is None else _to_projection(row)), (latest[0] if latest else None)

    def stale_threads(self) -> list[str]:
        with self._cursor() as cur:
            stale = [r[0] for r in cur.execute(SELECT_STALE).fetchall()]
            cur.execute(DELETE_ORPHAN_PROJECTIONS)
        return stale

    def list_projections(self, query: ThreadQuery) -> list[ProjectionRow]:
        sql, params = _list_query_sql(query)
        with self._cursor(transaction=False) as cur:
            return [_to_projection(r) for r in cur.execute(sql, params).fetchall()]

    def save_projection(self, row: ProjectionRow, *, force: bool = False) -> None:
        with self._cursor() as cur:
            cur.execute(_FORCE_PROJECTION if force else _UPSERT_PROJECTION, projection_params(row))

    def delete_projection(self, thread_id: str) -> None:
        with self._cursor() as cur:
            cur.execute(_DELETE_PROJECTION, (thread_id,))


class AsyncPostgresStore(Store):
    """Our tables through an ``AsyncPostgresSaver``'s connection or pool (async only)."""

    stores_full_values = False
    has_sync = False
    sync_error = (
        "AsyncPostgresSaver is asynchronous: use the async methods (ainvoke, aget_tuple...), "
        "or wrap a PostgresSaver (STMSaver.from_postgres)"
    )

    def __init__(self, inner: AsyncPostgresSaver) -> None:
        self.inner = inner

    @asynccontextmanager
    async def _cursor(self, *, transaction: bool = True) -> AsyncIterator[AsyncCursor[TupleRow]]:
        async with self.inner.lock:
            target = self.inner.conn
            if isinstance(target, AsyncConnectionPool):
                async with target.connection() as conn, self._on(conn, transaction) as cur:
                    yield cur
            else:
                async with self._on(target, transaction) as cur:
                    yield cur

    @staticmethod
    @asynccontextmanager
    async def _on(
        conn: AsyncConnection[Any], transaction: bool
    ) -> AsyncIterator[AsyncCursor[TupleRow]]:
        if transaction:
            async with conn.transaction(), conn.cursor(binary=True, row_factory=tuple_row) as cur:
                yield cur
        else:
            async with conn.cursor(binary=True, row_factory=tuple_row) as cur:
                yield cur

    @asynccontextmanager
    async def asetup_guard(self) -> AsyncIterator[None]:
        """Async twin of :meth:`PostgresStore.setup_guard`."""
        target = self.inner.conn
        if isinstance(target, AsyncConnectionPool):
            if target.max_size < 2:
                yield
                return
            async with (
                target.connection() as conn,
                conn.cursor(row_factory=tuple_row) as pool_cur,
            ):
                while not _locked(
                    await (await pool_cur.execute(_TRY_LOCK, (SETUP_LOCK,))).fetchone()
                ):
                    await asyncio.sleep(_LOCK_POLL)
                try:
                    yield
                finally:
                    await pool_cur.execute(_UNLOCK, (SETUP_LOCK,))
            return
        while True:
            async with self._cursor(transaction=False) as cur:
                if _locked(await (await cur.execute(_TRY_LOCK, (SETUP_LOCK,))).fetchone()):
                    break
            await asyncio.sleep(_LOCK_POLL)
        try:
            yield
        finally:
            async with self._cursor(transaction=False) as cur:
                await cur.execute(_UNLOCK, (SETUP_LOCK,))

    async def asetup(self) -> None:
        """Create or migrate our tables."""
        async with self._cursor() as cur:
            await cur.execute(_XACT_LOCK, (MIGRATION_LOCK,))
            await cur.execute(MIGRATIONS[0])
            row = await (await cur.execute("SELECT MAX(v) FROM stm_migrations")).fetchone()
            version = -1 if row is None or row[0] is None else row[0]
            for v in range(version + 1, len(MIGRATIONS)):
                await cur.execute(MIGRATIONS[v])
                await cur.execute("INSERT INTO stm_migrations (v) VALUES (%s)", (v,))

    @asynccontextmanager
    async def awriting(
        self,
        thread_id: str,
        checkpoint_ns: str,
        bodies: Sequence[BodyRow],
        lists: Sequence[ListRow],
        projection: ProjectionRow | None,
        *,
        order: Sequence[bytes] = (),
        cold: bool = False,
    ) -> AsyncIterator[None]:
        if bodies or lists or projection is not None:
            ns = checkpoint_ns
            plan = write_plan(_WRITE_SQL, thread_id, ns, bodies, lists, projection, order, cold)
            async with self._cursor() as cur:
                result: list[Any] | None = None
                while True:
                    try:
                        sql, params, many = plan.send(result)
                    except StopIteration:
                        break
                    if many:
                        await cur.executemany(sql, params)
                        result = None
                    else:
                        await cur.execute(sql, params)
                        result = await cur.fetchall() if cur.description else None
        yield

    @asynccontextmanager
    async def adeleting(self, thread_ids: Sequence[str]) -> AsyncIterator[None]:
        # One transaction for the checkpoints and our rows (see ``PostgresStore.deleting``).
        async with self._cursor() as cur:
            for sql in _DELETE_THREADS:
                await cur.execute(sql, (list(thread_ids),))
        yield

    async def acopy_rows(self, source_thread_id: str, target_thread_id: str) -> None:
        async with self._cursor() as cur:
            for sql in _COPY_ROWS:
                await cur.execute(sql, (target_thread_id, source_thread_id))

    async def aload(
        self, thread_id: str, checkpoint_ns: str, lists: Collection[bytes]
    ) -> tuple[Expanded, BodySet]:
        sql, params = _load_query(sorted(lists))
        params |= {"t": thread_id, "ns": checkpoint_ns}
        async with self._cursor(transaction=False) as cur:
            await cur.execute(sql, params)
            fetched = await cur.fetchall()
        return loaded_rows(fetched, lists)

    async def aget_projection(self, thread_id: str) -> tuple[ProjectionRow | None, str | None]:
        async with self._cursor(transaction=False) as cur:
            row = await (await cur.execute(_SELECT_PROJECTION, (thread_id,))).fetchone()
            latest = await (await cur.execute(_SELECT_LATEST, (thread_id,))).fetchone()
        return (None if row is None else _to_projection(row)), (latest[0] if latest else None)

    async def astale_threads(self) -> list[str]:
        async with self._cursor() as cur:
            stale = [r[0] for r in await (await cur.execute(SELECT_STALE)).fetchall()]
            await cur.execute(DELETE_ORPHAN_PROJECTIONS)
        return stale

    async def alist_projections(self, query: ThreadQuery) -> list[ProjectionRow]:
        sql, params = _list_query_sql(query)
        async with self._cursor(transaction=False) as cur:
            return [_to_projection(r) for r in await (await cur.execute(sql, params)).fetchall()]

    async def asave_projection(self, row: ProjectionRow, *, force: bool = False) -> None:
        async with self._cursor() as cur:
            sql = _FORCE_PROJECTION if force else _UPSERT_PROJECTION
            await cur.execute(sql, projection_params(row))

    async def adelete_projection(self, thread_id: str) -> None:
        async with self._cursor() as cur:
            await cur.execute(_DELETE_PROJECTION, (thread_id,))
