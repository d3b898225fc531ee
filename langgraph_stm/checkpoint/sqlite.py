"""SQLite stores for :class:`~langgraph_stm.checkpoint.STMSaver`.

Our tables live in the inner saver's database and are written on its connection,
under its lock. Message rows, list records and the projection of a checkpoint are
committed in one transaction just before the inner saver writes the checkpoint (never
left pending across the inner ``put``: a rollback of another write on the shared
connection would discard them). Rows are content-addressed, so a failed checkpoint
write only leaves unreferenced rows behind, and a projection that is not the thread's
latest checkpoint is rebuilt on its next read. A thread's checkpoints and our rows
are deleted in one transaction (then the inner ``delete_thread`` runs, finding none).

Message bodies are loose rows until :data:`~langgraph_stm.checkpoint._codec.PACK_SIZE`
of them accumulate, then packed into one row in that same transaction (see
``_codec``). A read is a single statement (one snapshot): the wanted list records and
their snapshots by primary key, every chunk row of the thread and namespace by a
partial index (about N / CHUNK_SIZE rows), and every body segment of the thread and
namespace by a range scan of the primary key, about N / PACK_SIZE rows for N messages.

Example:
    >>> from langgraph_stm.checkpoint import STMSaver
    >>> with STMSaver.from_sqlite(":memory:") as saver:
    ...     saver.setup()
    ...     tables = {r[0] for r in saver.inner.conn.execute(
    ...         "SELECT name FROM sqlite_master WHERE name LIKE 'stm_%'")}
    >>> sorted(tables)[:3]
    ['stm_message_bodies', 'stm_message_lists', 'stm_migrations']
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

try:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
except ImportError:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "STMSaver over SQLite needs langgraph-checkpoint-sqlite and aiosqlite: "
        "pip install 'langgraph-stm[sqlite]'"
    ) from None

from langgraph_stm.checkpoint._codec import BodyRow, BodySet, Expanded, ListRow
from langgraph_stm.checkpoint._projection import ProjectionRow
from langgraph_stm.checkpoint._store import (
    DELETE_ORPHAN_PROJECTIONS,
    SELECT_STALE,
    Plan,
    Store,
    ThreadQuery,
    WriteSQL,
    delete_plan,
    list_threads_sql,
    loaded_rows,
    projection_params,
    write_plan,
)

__all__ = ["MIGRATIONS", "AsyncSqliteStore", "SqliteStore"]

MIGRATIONS: list[str] = [
    "CREATE TABLE IF NOT EXISTS stm_migrations (v INTEGER PRIMARY KEY)",
    # A body row is one loose body (packed = 0; digests is its digest, ends is NULL) or a
    # pack of bodies (packed = 1; digest is the digest of digests, see _codec.PackRow).
    """CREATE TABLE IF NOT EXISTS stm_message_bodies (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        packed INTEGER NOT NULL,
        digest BLOB NOT NULL,
        digests BLOB NOT NULL,
        ends BLOB,
        types TEXT NOT NULL,
        body BLOB NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, packed, digest)
    )""",
    """CREATE TABLE IF NOT EXISTS stm_message_lists (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        digest BLOB NOT NULL,
        base BLOB,
        length INTEGER NOT NULL,
        ops BLOB NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, digest)
    )""",
    """CREATE TABLE IF NOT EXISTS stm_threads (
        thread_id TEXT PRIMARY KEY,
        checkpoint_id TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        message_count INTEGER,
        state TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS stm_threads_updated_at_idx ON stm_threads (updated_at)",
    # The chunk rows of snapshots (_codec.snapshot_rows), all read with every load.
    "CREATE INDEX IF NOT EXISTS stm_msg_chunks_idx "
    "ON stm_message_lists (thread_id, checkpoint_ns) WHERE base = x''",
]
"""Our schema, one statement per version; ``stm_migrations`` records what ran."""

_INSERT_BODY = (
    "INSERT OR IGNORE INTO stm_message_bodies "
    "(thread_id, checkpoint_ns, packed, digest, digests, ends, types, body) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_SELECT_DIGESTS = "SELECT digests FROM stm_message_bodies WHERE thread_id = ? AND checkpoint_ns = ?"
# The loose bodies of a thread and namespace, once there are enough of them to pack.
_SELECT_LOOSE_IF_FULL = """
    SELECT digest, types, body FROM stm_message_bodies
    WHERE thread_id = ? AND checkpoint_ns = ? AND packed = 0 AND (
        SELECT COUNT(*) FROM stm_message_bodies
        WHERE thread_id = ? AND checkpoint_ns = ? AND packed = 0
    ) >= ?
"""
_DELETE_LOOSE = (
    "DELETE FROM stm_message_bodies "
    "WHERE thread_id = ? AND checkpoint_ns = ? AND packed = 0 AND digest = ?"
)
# A list is stored once; a snapshot replaces a delta of the same list (never the
# reverse), so a delta written later can always use it as its base.
_INSERT_LIST = """
    INSERT INTO stm_message_lists (thread_id, checkpoint_ns, digest, base, length, ops)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (thread_id, checkpoint_ns, digest) DO UPDATE SET base = NULL, ops = excluded.ops
    WHERE excluded.base IS NULL AND stm_message_lists.base IS NOT NULL
"""
_UPSERT_PROJECTION = """
    INSERT INTO stm_threads (thread_id, checkpoint_id, updated_at, message_count, state)
    VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (thread_id) DO UPDATE SET
        checkpoint_id = excluded.checkpoint_id,
        updated_at = excluded.updated_at,
        message_count = excluded.message_count,
        state = excluded.state
    WHERE excluded.checkpoint_id >= stm_threads.checkpoint_id
"""
_FORCE_PROJECTION = _UPSERT_PROJECTION.split("    WHERE excluded")[0]
_SELECT_PROJECTION = (
    "SELECT thread_id, checkpoint_id, updated_at, message_count, state "
    "FROM stm_threads WHERE thread_id = ?"
)
_SELECT_LATEST = (
    "SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''"
)
_DELETE_PROJECTION = "DELETE FROM stm_threads WHERE thread_id = ?"
_SELECT_VERSION = "SELECT MAX(v) FROM stm_migrations"
INNER_TABLES = ("checkpoints", "writes")
"""The SqliteSaver tables holding a thread's rows (what its ``delete_thread`` empties)."""
_DELETE_THREAD = [
    *(f"DELETE FROM {table} WHERE thread_id = ?" for table in INNER_TABLES),
    "DELETE FROM stm_message_bodies WHERE thread_id = ?",
    "DELETE FROM stm_message_lists WHERE thread_id = ?",
    "DELETE FROM stm_threads WHERE thread_id = ?",
]
"""A thread's checkpoints and our rows, deleted in one transaction (see ``deleting``)."""
_WRITE_SQL = WriteSQL(
    select_digests=_SELECT_DIGESTS,
    insert_body=_INSERT_BODY,
    select_loose_if_full=_SELECT_LOOSE_IF_FULL,
    delete_loose=_DELETE_LOOSE,
    insert_list=_INSERT_LIST,
    upsert_projection=_UPSERT_PROJECTION,
)
_COPY_ROWS = [
    "INSERT OR IGNORE INTO stm_message_bodies "
    "SELECT ?, checkpoint_ns, packed, digest, digests, ends, types, body "
    "FROM stm_message_bodies WHERE thread_id = ?",
    "INSERT OR IGNORE INTO stm_message_lists "
    "SELECT ?, checkpoint_ns, digest, base, length, ops "
    "FROM stm_message_lists WHERE thread_id = ?",
]


def _load_query(n: int) -> str:
    """One statement (one snapshot) for the list records ``IN (n digests)``, their
    snapshots, every chunk row and every body segment of the thread and namespace."""
    keys = ",".join("?" * n)
    return f"""
        SELECT 0, digest, base, length, ops, NULL FROM stm_message_lists
        WHERE thread_id = ? AND checkpoint_ns = ? AND digest IN ({keys})
        UNION ALL
        SELECT 0, b.digest, b.base, b.length, b.ops, NULL
        FROM stm_message_lists AS l JOIN stm_message_lists AS b
            ON b.thread_id = l.thread_id AND b.checkpoint_ns = l.checkpoint_ns
            AND b.digest = l.base
        WHERE l.thread_id = ? AND l.checkpoint_ns = ? AND l.digest IN ({keys})
        UNION ALL
        SELECT 0, digest, base, length, ops, NULL FROM stm_message_lists
        WHERE thread_id = ? AND checkpoint_ns = ? AND base = x''
        UNION ALL
        SELECT 1, digests, ends, NULL, body, types FROM stm_message_bodies
        WHERE thread_id = ? AND checkpoint_ns = ?
    """


def _load_params(thread_id: str, ns: str, keys: Sequence[bytes]) -> list[Any]:
    return [thread_id, ns, *keys, thread_id, ns, *keys, thread_id, ns, thread_id, ns]


def _list_query_sql(query: ThreadQuery) -> tuple[str, list[Any]]:
    return list_threads_sql(query, param="?", state="state", no_limit=-1)


def _to_projection(r: Any) -> ProjectionRow:
    return ProjectionRow(r[0], r[1], r[2], r[3], r[4])


_SETUP_ATTEMPTS = 100
_SETUP_RETRY = 0.05


def _locked(exc: sqlite3.OperationalError, attempt: int) -> bool:
    """Whether a failed inner setup met another worker's lock and may be retried.

    The inner saver's setup switches the journal to WAL, which fails at once (without
    waiting) with "database is locked" while another connection sets up the database.
    """
    return "locked" in str(exc) and attempt < _SETUP_ATTEMPTS - 1


class SqliteStore(Store):
    """Our tables on a ``SqliteSaver``'s connection (sync methods only)."""

    stores_full_values = True
    async_error = (
        "SqliteSaver is synchronous: use the sync methods, or wrap an AsyncSqliteSaver "
        "(STMSaver.from_async_sqlite)"
    )

    def __init__(self, inner: SqliteSaver) -> None:
        self.inner = inner
        self.is_setup = False

    def setup(self) -> None:
        """Create our tables (idempotent); runs on first use like ``SqliteSaver.setup``."""
        if self.is_setup:
            return
        self._setup_inner()
        with self.inner.lock:
            conn = self.inner.conn
            try:
                # A database already at our latest version needs no write lock.
                row = conn.execute(_SELECT_VERSION).fetchone()
            except sqlite3.OperationalError:
                row = None
            if row is not None and row[0] == len(MIGRATIONS) - 1:
                self.is_setup = True
                return
            if conn.in_transaction:
                conn.commit()
            # Write-locks the database first: workers migrating at once take turns.
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(MIGRATIONS[0])
                row = conn.execute("SELECT MAX(v) FROM stm_migrations").fetchone()
                version = -1 if row is None or row[0] is None else row[0]
                for v in range(version + 1, len(MIGRATIONS)):
                    conn.execute(MIGRATIONS[v])
                    conn.execute("INSERT INTO stm_migrations (v) VALUES (?)", (v,))
                conn.commit()
            except BaseException:
                conn.rollback()
                raise
        self.is_setup = True

    @contextmanager
    def setup_guard(self) -> Iterator[None]:
        """Set up the inner saver first, retried while another worker holds the database
        (see :func:`_locked`); our own migrations then run in ``BEGIN IMMEDIATE``."""
        self._setup_inner()
        yield

    def _setup_inner(self) -> None:
        for attempt in range(_SETUP_ATTEMPTS):
            try:
                with self.inner.lock:
                    self.inner.setup()
                return
            except sqlite3.OperationalError as exc:
                if not _locked(exc, attempt):
                    raise
            time.sleep(_SETUP_RETRY)

    def _run(self, plan: Plan) -> None:
        """Run a plan's statements and commit them, under the connection's lock.

        Committed at once, never left pending while the lock is released: another
        write's rollback (a failed or cancelled ``put``) on this shared connection
        would discard them. Our rows are content-addressed, so rows committed for a
        checkpoint the inner saver then fails to write are harmless leftovers (and a
        projection ahead of the latest checkpoint is rebuilt on its next read).
        """
        self.setup()
        conn = self.inner.conn
        with self.inner.lock:
            try:
                if not conn.in_transaction:
                    # Explicit, so the plan is one transaction on an autocommit
                    # connection (isolation_level=None) too.
                    conn.execute("BEGIN")
                result: list[Any] | None = None
                while True:
                    try:
                        sql, params, many = plan.send(result)
                    except StopIteration:
                        break
                    if many:
                        conn.executemany(sql, params)
                        result = None
                    else:
                        result = conn.execute(sql, params).fetchall()
                conn.commit()
            except BaseException:
                conn.rollback()
                raise

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
        plan = write_plan(
            _WRITE_SQL, thread_id, checkpoint_ns, bodies, lists, projection, order, cold
        )
        self._run(plan)
        yield

    @contextmanager
    def deleting(self, thread_ids: Sequence[str]) -> Iterator[None]:
        # The thread's checkpoints and our rows go in one transaction, all or nothing;
        # the inner saver's own delete then runs and finds nothing more to delete.
        self._run(delete_plan(_DELETE_THREAD, thread_ids))
        yield

    def copy_rows(self, source_thread_id: str, target_thread_id: str) -> None:
        self.setup()
        with self.inner.lock:
            for sql in _COPY_ROWS:
                self.inner.conn.execute(sql, (target_thread_id, source_thread_id))
            self.inner.conn.commit()

    def load(
        self, thread_id: str, checkpoint_ns: str, lists: Collection[bytes]
    ) -> tuple[Expanded, BodySet]:
        self.setup()
        keys = sorted(lists)
        with self.inner.lock:
            fetched = self.inner.conn.execute(
                _load_query(len(keys)), _load_params(thread_id, checkpoint_ns, keys)
            ).fetchall()
        return loaded_rows(fetched, lists)

    def get_projection(self, thread_id: str) -> tuple[ProjectionRow | None, str | None]:
        self.setup()
        with self.inner.lock:
            row = self.inner.conn.execute(_SELECT_PROJECTION, (thread_id,)).fetchone()
            latest = self.inner.conn.execute(_SELECT_LATEST, (thread_id,)).fetchone()
        return (None if row is None else _to_projection(row)), (latest[0] if latest else None)

    def stale_threads(self) -> list[str]:
        self.setup()
        with self.inner.lock:
            stale = [r[0] for r in self.inner.conn.execute(SELECT_STALE)]
            self.inner.conn.execute(DELETE_ORPHAN_PROJECTIONS)
            self.inner.conn.commit()
        return stale

    def list_projections(self, query: ThreadQuery) -> list[ProjectionRow]:
        self.setup()
        sql, params = _list_query_sql(query)
        with self.inner.lock:
            return [_to_projection(r) for r in self.inner.conn.execute(sql, params)]

    def save_projection(self, row: ProjectionRow, *, force: bool = False) -> None:
        self.setup()
        with self.inner.lock:
            sql = _FORCE_PROJECTION if force else _UPSERT_PROJECTION
            self.inner.conn.execute(sql, projection_params(row))
            self.inner.conn.commit()

    def delete_projection(self, thread_id: str) -> None:
        self.setup()
        with self.inner.lock:
            self.inner.conn.execute(_DELETE_PROJECTION, (thread_id,))
            self.inner.conn.commit()


class AsyncSqliteStore(Store):
    """Our tables on an ``AsyncSqliteSaver``'s aiosqlite connection (async methods only)."""

    stores_full_values = True
    has_sync = False
    sync_error = (
        "AsyncSqliteSaver is asynchronous: use the async methods (ainvoke, aget_tuple...), "
        "or wrap a SqliteSaver (STMSaver.from_sqlite)"
    )

    def __init__(self, inner: AsyncSqliteSaver) -> None:
        self.inner = inner
        self.is_setup = False

    async def asetup(self) -> None:
        """Create our tables (idempotent); runs on first use."""
        if self.is_setup:
            return
        await self._asetup_inner()
        async with self.inner.lock:
            conn = self.inner.conn
            try:
                async with conn.execute(_SELECT_VERSION) as cur:
                    current = await cur.fetchone()
            except sqlite3.OperationalError:
                current = None
            if current is not None and current[0] == len(MIGRATIONS) - 1:
                self.is_setup = True
                return
            if conn.in_transaction:
                await conn.commit()
            await conn.execute("BEGIN IMMEDIATE")
            try:
                await conn.execute(MIGRATIONS[0])
                async with conn.execute("SELECT MAX(v) FROM stm_migrations") as cur:
                    row = await cur.fetchone()
                version = -1 if row is None or row[0] is None else row[0]
                for v in range(version + 1, len(MIGRATIONS)):
                    await conn.execute(MIGRATIONS[v])
                    await conn.execute("INSERT INTO stm_migrations (v) VALUES (?)", (v,))
                await conn.commit()
            except BaseException:
                await conn.rollback()
                raise
        self.is_setup = True

    @asynccontextmanager
    async def asetup_guard(self) -> AsyncIterator[None]:
        """Async twin of :meth:`SqliteStore.setup_guard`."""
        await self._asetup_inner()
        yield

    async def _asetup_inner(self) -> None:
        for attempt in range(_SETUP_ATTEMPTS):
            try:
                await self.inner.setup()
                return
            except sqlite3.OperationalError as exc:
                if not _locked(exc, attempt):
                    raise
            await asyncio.sleep(_SETUP_RETRY)

    async def _run(self, plan: Plan) -> None:
        """Run a plan's statements and commit them at once (see ``SqliteStore._run``)."""
        await self.asetup()
        conn = self.inner.conn
        async with self.inner.lock:
            try:
                if not conn.in_transaction:
                    await conn.execute("BEGIN")
                result: list[Any] | None = None
                while True:
                    try:
                        sql, params, many = plan.send(result)
                    except StopIteration:
                        break
                    if many:
                        await conn.executemany(sql, params)
                        result = None
                    else:
                        async with conn.execute(sql, params) as cur:
                            result = list(await cur.fetchall())
                await conn.commit()
            except BaseException:
                await conn.rollback()
                raise

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
        plan = write_plan(
            _WRITE_SQL, thread_id, checkpoint_ns, bodies, lists, projection, order, cold
        )
        await self._run(plan)
        yield

    @asynccontextmanager
    async def adeleting(self, thread_ids: Sequence[str]) -> AsyncIterator[None]:
        # One transaction for the checkpoints and our rows (see ``SqliteStore.deleting``).
        await self._run(delete_plan(_DELETE_THREAD, thread_ids))
        yield

    async def acopy_rows(self, source_thread_id: str, target_thread_id: str) -> None:
        await self.asetup()
        async with self.inner.lock:
            for sql in _COPY_ROWS:
                await self.inner.conn.execute(sql, (target_thread_id, source_thread_id))
            await self.inner.conn.commit()

    async def aload(
        self, thread_id: str, checkpoint_ns: str, lists: Collection[bytes]
    ) -> tuple[Expanded, BodySet]:
        await self.asetup()
        keys = sorted(lists)
        params = _load_params(thread_id, checkpoint_ns, keys)
        async with self.inner.lock, self.inner.conn.execute(_load_query(len(keys)), params) as cur:
            fetched = await cur.fetchall()
        return loaded_rows(fetched, lists)

    async def aget_projection(self, thread_id: str) -> tuple[ProjectionRow | None, str | None]:
        await self.asetup()
        async with self.inner.lock:
            async with self.inner.conn.execute(_SELECT_PROJECTION, (thread_id,)) as cur:
                row = await cur.fetchone()
            async with self.inner.conn.execute(_SELECT_LATEST, (thread_id,)) as cur:
                latest = await cur.fetchone()
        return (None if row is None else _to_projection(row)), (latest[0] if latest else None)

    async def astale_threads(self) -> list[str]:
        await self.asetup()
        async with self.inner.lock:
            async with self.inner.conn.execute(SELECT_STALE) as cur:
                stale = [r[0] for r in await cur.fetchall()]
            await self.inner.conn.execute(DELETE_ORPHAN_PROJECTIONS)
            await self.inner.conn.commit()
        return stale

    async def alist_projections(self, query: ThreadQuery) -> list[ProjectionRow]:
        await self.asetup()
        sql, params = _list_query_sql(query)
        async with self.inner.lock, self.inner.conn.execute(sql, params) as cur:
            return [_to_projection(r) for r in await cur.fetchall()]

    async def asave_projection(self, row: ProjectionRow, *, force: bool = False) -> None:
        await self.asetup()
        async with self.inner.lock:
            sql = _FORCE_PROJECTION if force else _UPSERT_PROJECTION
            await self.inner.conn.execute(sql, projection_params(row))
            await self.inner.conn.commit()

    async def adelete_projection(self, thread_id: str) -> None:
        await self.asetup()
        async with self.inner.lock:
            await self.inner.conn.execute(_DELETE_PROJECTION, (thread_id,))
            await self.inner.conn.commit()
