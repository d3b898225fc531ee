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

Run :meth:`STMSaver.setup` (or ``await asetup()``) once, as with ``PostgresSaver``.
"""

from __future__ import annotations

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

from langgraph_stm.checkpoint._codec import BodyRow, Expanded, ListRow, expand_all
from langgraph_stm.checkpoint._projection import ProjectionRow
from langgraph_stm.checkpoint._store import Store, ThreadQuery

__all__ = ["MIGRATIONS", "AsyncPostgresStore", "PostgresStore"]

MIGRATIONS: list[str] = [
    "CREATE TABLE IF NOT EXISTS stm_migrations (v INTEGER PRIMARY KEY)",
    """CREATE TABLE IF NOT EXISTS stm_message_bodies (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        digest BYTEA NOT NULL,
        message_id TEXT,
        type TEXT NOT NULL,
        body BYTEA NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, digest)
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
]
"""Our schema, one statement per version; ``stm_migrations`` records what ran."""

_INSERT_BODY = (
    "INSERT INTO stm_message_bodies "
    "(thread_id, checkpoint_ns, digest, message_id, type, body) "
    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
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
_SELECT_STALE = """
    SELECT c.thread_id FROM (
        SELECT thread_id, MAX(checkpoint_id) AS latest FROM checkpoints
        WHERE checkpoint_ns = '' GROUP BY thread_id
    ) AS c LEFT JOIN stm_threads AS p ON p.thread_id = c.thread_id
    WHERE p.checkpoint_id IS NULL OR p.checkpoint_id <> c.latest
"""
_DELETE_ORPHAN_PROJECTIONS = """
    DELETE FROM stm_threads WHERE NOT EXISTS (
        SELECT 1 FROM checkpoints AS c
        WHERE c.thread_id = stm_threads.thread_id AND c.checkpoint_ns = ''
    )
"""
_DELETE_PROJECTION = "DELETE FROM stm_threads WHERE thread_id = %s"
_DELETE_THREADS = [
    "DELETE FROM stm_message_bodies WHERE thread_id = ANY(%s)",
    "DELETE FROM stm_message_lists WHERE thread_id = ANY(%s)",
    "DELETE FROM stm_threads WHERE thread_id = ANY(%s)",
]
_COPY_ROWS = [
    "INSERT INTO stm_message_bodies "
    "SELECT %s, checkpoint_ns, digest, message_id, type, body "
    "FROM stm_message_bodies WHERE thread_id = %s ON CONFLICT DO NOTHING",
    "INSERT INTO stm_message_lists "
    "SELECT %s, checkpoint_ns, digest, base, length, ops "
    "FROM stm_message_lists WHERE thread_id = %s ON CONFLICT DO NOTHING",
]
_SELECT_LISTS = (
    "SELECT digest, base, length, ops FROM stm_message_lists "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND digest = ANY(%s)"
)
_SELECT_THREAD_BODIES = (
    "SELECT digest, type, body FROM stm_message_bodies WHERE thread_id = %s AND checkpoint_ns = %s"
)
_SELECT_BODIES = (
    "SELECT digest, type, body FROM stm_message_bodies "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND digest = ANY(%s)"
)


def _list_query_sql(query: ThreadQuery) -> tuple[str, list[Any]]:
    sql = "SELECT thread_id, checkpoint_id, updated_at, message_count, state::text FROM stm_threads"
    where: list[str] = []
    params: list[Any] = []
    if query.updated_after is not None:
        where.append("updated_at > %s")
        params.append(query.updated_after)
    if query.updated_before is not None:
        where.append("updated_at < %s")
        params.append(query.updated_before)
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY updated_at DESC, thread_id DESC LIMIT %s OFFSET %s"
    params += [query.limit, query.offset]
    return sql, params


def _to_list_rows(fetched: Sequence[TupleRow]) -> dict[bytes, ListRow]:
    return {
        bytes(r[0]): ListRow(bytes(r[0]), None if r[1] is None else bytes(r[1]), r[2], bytes(r[3]))
        for r in fetched
    }


_FETCH_ALL_ABOVE = 64
"""Above this many bodies, one index range scan of the thread beats ``= ANY(array)``."""


def _bodies(fetched: Sequence[TupleRow], wanted: set[bytes]) -> dict[bytes, tuple[str, bytes]]:
    return {bytes(d): (t, bytes(b)) for d, t, b in fetched if bytes(d) in wanted}


def _to_projection(r: TupleRow) -> ProjectionRow:
    return ProjectionRow(r[0], r[1], r[2], r[3], r[4])


def _projection_params(p: ProjectionRow) -> tuple[Any, ...]:
    return (p.thread_id, p.checkpoint_id, p.updated_at, p.message_count, p.state)


def _body_params(thread_id: str, ns: str, bodies: Sequence[BodyRow]) -> list[tuple[Any, ...]]:
    return [(thread_id, ns, b.digest, b.message_id, b.type, b.data) for b in bodies]


def _list_params(thread_id: str, ns: str, lists: Sequence[ListRow]) -> list[tuple[Any, ...]]:
    return [(thread_id, ns, r.digest, r.base, r.length, r.ops) for r in lists]


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

    def setup(self) -> None:
        """Create or migrate our tables."""
        with self._cursor() as cur:
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
    ) -> Iterator[None]:
        if bodies or lists or projection is not None:
            with self._cursor() as cur:
                if bodies:
                    cur.executemany(_INSERT_BODY, _body_params(thread_id, checkpoint_ns, bodies))
                if lists:
                    cur.executemany(_INSERT_LIST, _list_params(thread_id, checkpoint_ns, lists))
                if projection is not None:
                    cur.execute(_UPSERT_PROJECTION, _projection_params(projection))
        yield

    @contextmanager
    def deleting(self, thread_ids: Sequence[str]) -> Iterator[None]:
        yield
        with self._cursor() as cur:
            for sql in _DELETE_THREADS:
                cur.execute(sql, (list(thread_ids),))

    def copy_rows(self, source_thread_id: str, target_thread_id: str) -> None:
        with self._cursor() as cur:
            for sql in _COPY_ROWS:
                cur.execute(sql, (target_thread_id, source_thread_id))

    def load(
        self, thread_id: str, checkpoint_ns: str, lists: Collection[bytes]
    ) -> tuple[Expanded, dict[bytes, tuple[str, bytes]]]:
        with self._cursor(transaction=False) as cur:
            rows = _to_list_rows(
                cur.execute(_SELECT_LISTS, (thread_id, checkpoint_ns, list(lists))).fetchall()
            )
            bases = [r.base for r in rows.values() if r.base and r.base not in rows]
            if bases:
                rows |= _to_list_rows(
                    cur.execute(_SELECT_LISTS, (thread_id, checkpoint_ns, bases)).fetchall()
                )
            expanded, wanted = expand_all(rows, lists)
            if len(wanted) > _FETCH_ALL_ABOVE:
                fetched = cur.execute(_SELECT_THREAD_BODIES, (thread_id, checkpoint_ns)).fetchall()
            else:
                fetched = cur.execute(
                    _SELECT_BODIES, (thread_id, checkpoint_ns, list(wanted))
                ).fetchall()
        return expanded, _bodies(fetched, wanted)

    def get_projection(self, thread_id: str) -> tuple[ProjectionRow | None, str | None]:
        with self._cursor(transaction=False) as cur:
            row = cur.execute(_SELECT_PROJECTION, (thread_id,)).fetchone()
            latest = cur.execute(_SELECT_LATEST, (thread_id,)).fetchone()
        return (None if row is None else _to_projection(row)), (latest[0] if latest else None)

    def stale_threads(self) -> list[str]:
        with self._cursor() as cur:
            stale = [r[0] for r in cur.execute(_SELECT_STALE).fetchall()]
            cur.execute(_DELETE_ORPHAN_PROJECTIONS)
        return stale

    def list_projections(self, query: ThreadQuery) -> list[ProjectionRow]:
        sql, params = _list_query_sql(query)
        with self._cursor(transaction=False) as cur:
            return [_to_projection(r) for r in cur.execute(sql, params).fetchall()]

    def save_projection(self, row: ProjectionRow, *, force: bool = False) -> None:
        with self._cursor() as cur:
            cur.execute(_FORCE_PROJECTION if force else _UPSERT_PROJECTION, _projection_params(row))

    def delete_projection(self, thread_id: str) -> None:
        with self._cursor() as cur:
            cur.execute(_DELETE_PROJECTION, (thread_id,))


class AsyncPostgresStore(Store):
    """Our tables through an ``AsyncPostgresSaver``'s connection or pool (async only)."""

    stores_full_values = False
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

    async def asetup(self) -> None:
        """Create or migrate our tables."""
        async with self._cursor() as cur:
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
    ) -> AsyncIterator[None]:
        if bodies or lists or projection is not None:
            async with self._cursor() as cur:
                if bodies:
                    await cur.executemany(
                        _INSERT_BODY, _body_params(thread_id, checkpoint_ns, bodies)
                    )
                if lists:
                    await cur.executemany(
                        _INSERT_LIST, _list_params(thread_id, checkpoint_ns, lists)
                    )
                if projection is not None:
                    await cur.execute(_UPSERT_PROJECTION, _projection_params(projection))
        yield

    @asynccontextmanager
    async def adeleting(self, thread_ids: Sequence[str]) -> AsyncIterator[None]:
        yield
        async with self._cursor() as cur:
            for sql in _DELETE_THREADS:
                await cur.execute(sql, (list(thread_ids),))

    async def acopy_rows(self, source_thread_id: str, target_thread_id: str) -> None:
        async with self._cursor() as cur:
            for sql in _COPY_ROWS:
                await cur.execute(sql, (target_thread_id, source_thread_id))

    async def aload(
        self, thread_id: str, checkpoint_ns: str, lists: Collection[bytes]
    ) -> tuple[Expanded, dict[bytes, tuple[str, bytes]]]:
        async with self._cursor(transaction=False) as cur:
            await cur.execute(_SELECT_LISTS, (thread_id, checkpoint_ns, list(lists)))
            rows = _to_list_rows(await cur.fetchall())
            bases = [r.base for r in rows.values() if r.base and r.base not in rows]
            if bases:
                await cur.execute(_SELECT_LISTS, (thread_id, checkpoint_ns, bases))
                rows |= _to_list_rows(await cur.fetchall())
            expanded, wanted = expand_all(rows, lists)
            if len(wanted) > _FETCH_ALL_ABOVE:
                await cur.execute(_SELECT_THREAD_BODIES, (thread_id, checkpoint_ns))
            else:
                await cur.execute(_SELECT_BODIES, (thread_id, checkpoint_ns, list(wanted)))
            fetched = await cur.fetchall()
        return expanded, _bodies(fetched, wanted)

    async def aget_projection(self, thread_id: str) -> tuple[ProjectionRow | None, str | None]:
        async with self._cursor(transaction=False) as cur:
            row = await (await cur.execute(_SELECT_PROJECTION, (thread_id,))).fetchone()
            latest = await (await cur.execute(_SELECT_LATEST, (thread_id,))).fetchone()
        return (None if row is None else _to_projection(row)), (latest[0] if latest else None)

    async def astale_threads(self) -> list[str]:
        async with self._cursor() as cur:
            stale = [r[0] for r in await (await cur.execute(_SELECT_STALE)).fetchall()]
            await cur.execute(_DELETE_ORPHAN_PROJECTIONS)
        return stale

    async def alist_projections(self, query: ThreadQuery) -> list[ProjectionRow]:
        sql, params = _list_query_sql(query)
        async with self._cursor(transaction=False) as cur:
            return [_to_projection(r) for r in await (await cur.execute(sql, params)).fetchall()]

    async def asave_projection(self, row: ProjectionRow, *, force: bool = False) -> None:
        async with self._cursor() as cur:
            sql = _FORCE_PROJECTION if force else _UPSERT_PROJECTION
            await cur.execute(sql, _projection_params(row))

    async def adelete_projection(self, thread_id: str) -> None:
        async with self._cursor() as cur:
            await cur.execute(_DELETE_PROJECTION, (thread_id,))
