"""PostgreSQL: the dialect, ``MIGRATIONS`` and the two drivers (psycopg sync and async).

Our tables live in the inner saver's database and are written through its connection
or pool. The inner saver works in autocommit mode, so our rows of a checkpoint commit
in a transaction of their own just *before* the inner ``put``; a reader never sees a
checkpoint whose rows are missing. From before that transaction until the inner
``put`` returns, the writer holds a session advisory lock on the thread; deletion and
reclaiming take the same lock (transaction-scoped), so they never run between our
commit and the checkpoint, and a write that comes after a deletion finds the rows it
relied on gone and stores everything again. With a pool of fewer than two
connections the lock is skipped (the inner ``put`` needs the other connection).

Example:
    >>> DIALECT.param
    '%s'
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from typing import Any

from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langgraph_stm.checkpoint._inner import POSTGRES_TABLES
from langgraph_stm.checkpoint._lifecycle import backfill_lifecycle
from langgraph_stm.checkpoint._tables import (
    Dialect,
    Migration,
    Plan,
    arun,
    convert_old_rows,
    migrate_plan,
    run,
    thread_key,
)

__all__ = ["DIALECT", "MIGRATIONS", "AsyncPostgresDriver", "PostgresDriver"]

DIALECT = Dialect(
    param="%s",
    insert_ignore="INSERT INTO {table} ({cols})",
    ignore_suffix=" ON CONFLICT DO NOTHING",
    state_param="%s::jsonb",
    state_column="state::text",
    inner_tables=POSTGRES_TABLES,
    lock_thread="SELECT pg_advisory_xact_lock(%s, %s)",
    no_limit=None,
)

MIGRATIONS: list[Migration] = [
    # 0-7: the first layout (loose bodies and packs), kept as released.
    "CREATE TABLE IF NOT EXISTS stm_migrations (v INTEGER PRIMARY KEY)",
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
    """DO $$ BEGIN
        EXECUTE 'ALTER TABLE stm_message_bodies ALTER COLUMN body SET COMPRESSION lz4';
    EXCEPTION WHEN OTHERS THEN NULL;
    END $$""",
    "CREATE INDEX IF NOT EXISTS stm_msg_chunks_idx "
    "ON stm_message_lists (thread_id, checkpoint_ns) WHERE base = ''::bytea",
    "ALTER TABLE stm_message_lists ALTER COLUMN ops SET STORAGE MAIN",
    # 8-14: one row per body (loads read only what they use), values, refs.
    """CREATE TABLE IF NOT EXISTS stm_bodies (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        digest BYTEA NOT NULL,
        message_id TEXT,
        type TEXT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, digest)
    )""",
    """CREATE TABLE IF NOT EXISTS stm_lists (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        digest BYTEA NOT NULL,
        base BYTEA,
        length INTEGER NOT NULL,
        ops BYTEA NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, digest)
    )""",
    """CREATE TABLE IF NOT EXISTS stm_values (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        digest BYTEA NOT NULL,
        type TEXT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, digest)
    )""",
    """CREATE TABLE IF NOT EXISTS stm_refs (
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL DEFAULT '',
        checkpoint_id TEXT NOT NULL,
        refs BYTEA NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
    )""",
    convert_old_rows(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_name = 'stm_message_bodies' AND table_schema = current_schema()"
    ),
    "DROP TABLE IF EXISTS stm_message_bodies",
    "DROP TABLE IF EXISTS stm_message_lists",
    # 15-21: the thread lifecycle (TTL, tombstones; see _retention) and the audit trail.
    """CREATE TABLE IF NOT EXISTS stm_lifecycle (
        thread_id TEXT PRIMARY KEY,
        written_at DOUBLE PRECISION NOT NULL,
        ttl_seconds DOUBLE PRECISION
    )""",
    "CREATE INDEX IF NOT EXISTS stm_lifecycle_written_at_idx ON stm_lifecycle (written_at)",
    "CREATE INDEX IF NOT EXISTS stm_lifecycle_expires_idx "
    "ON stm_lifecycle ((written_at + ttl_seconds)) WHERE ttl_seconds IS NOT NULL",
    """CREATE TABLE IF NOT EXISTS stm_tombstones (
        thread_id TEXT PRIMARY KEY,
        deleted_at DOUBLE PRECISION NOT NULL,
        last_checkpoint_id TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS stm_tombstones_deleted_at_idx ON stm_tombstones (deleted_at)",
    """CREATE TABLE IF NOT EXISTS stm_audit (
        thread_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        recorded_at DOUBLE PRECISION NOT NULL,
        checkpoint_id TEXT,
        resumed_from TEXT,
        owner TEXT,
        entry TEXT NOT NULL,
        PRIMARY KEY (thread_id, run_id)
    )""",
    backfill_lifecycle,
    # tenant scoping (see _scope): the owner each thread is bound to.
    "CREATE TABLE IF NOT EXISTS stm_owners (thread_id TEXT PRIMARY KEY, owner TEXT NOT NULL)",
    # exclusive runs (see _conflicts): the run continuing each thread, until it lapses.
    "CREATE TABLE IF NOT EXISTS stm_claims (thread_id TEXT PRIMARY KEY, "
    "checkpoint_id TEXT NOT NULL, token TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL, "
    "ended_at TEXT)",
]
"""Our schema, append-only: ``stm_migrations`` records which steps ran."""

SETUP_LOCK = 0x53544D5F53455450
"""Advisory lock key that serializes setups (ours and the inner saver's) across workers."""
MIGRATION_LOCK = SETUP_LOCK + 1
_LOCK_POLL = 0.05
_SESSION_LOCK = "SELECT pg_advisory_lock(%s, %s)"
_SESSION_UNLOCK = "SELECT pg_advisory_unlock(%s, %s)"


def _drive(cur: Any, plan: Plan) -> Any:
    def query(sql: str, params: Any) -> list[Any] | None:
        cur.execute(sql, params)
        return cur.fetchall() if cur.description else None

    return run(plan, query, cur.executemany)


async def _adrive(cur: Any, plan: Plan) -> Any:
    async def query(sql: str, params: Any) -> list[Any] | None:
        await cur.execute(sql, params)
        return await cur.fetchall() if cur.description else None

    return await arun(plan, query, cur.executemany)


def _setup_plan() -> Plan:
    from langgraph_stm.checkpoint._tables import Stmt

    yield Stmt("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
    return (yield from migrate_plan(DIALECT, MIGRATIONS))


class PostgresDriver:
    """Runs plans through a ``PostgresSaver``'s connection or pool."""

    dialect = DIALECT

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        target = self.inner.conn
        if isinstance(target, ConnectionPool):
            with target.connection() as conn:
                yield conn
        else:
            yield target

    def setup(self) -> None:
        self.write(_setup_plan())

    @contextmanager
    def setup_guard(self) -> Iterator[None]:
        """Hold a session advisory lock while the inner saver's setup and ours run, so
        workers setting up a fresh database at once do not collide."""
        target = self.inner.conn
        if isinstance(target, ConnectionPool) and target.max_size < 2:
            yield
            return
        with self._conn() as conn, conn.cursor(row_factory=tuple_row) as cur:
            while not cur.execute("SELECT pg_try_advisory_lock(%s)", (SETUP_LOCK,)).fetchone()[0]:
                time.sleep(_LOCK_POLL)
            try:
                yield
            finally:
                cur.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))

    def _lock(self) -> Any:
        """The inner saver's lock, which guards its one shared connection; a pool hands
        each caller its own connection, and holding the lock there while waiting for a
        writer's thread lock would deadlock with that writer's inner ``put``."""
        return nullcontext() if isinstance(self.inner.conn, ConnectionPool) else self.inner.lock

    def read(self, plan: Plan) -> Any:
        with (
            self._lock(),
            self._conn() as conn,
            conn.cursor(binary=True, row_factory=tuple_row) as cur,
        ):
            return _drive(cur, plan)

    def write(self, plan: Plan) -> Any:
        with (
            self._lock(),
            self._conn() as conn,
            conn.transaction(),
            conn.cursor(binary=True, row_factory=tuple_row) as cur,
        ):
            return _drive(cur, plan)

    @contextmanager
    def writing(self, plan: Plan, thread_id: str) -> Iterator[None]:
        """Commit ``plan``, then run the inner write (the ``with`` body), holding the
        thread's advisory lock from before the plan until the inner write returned."""
        target = self.inner.conn
        key = thread_key(thread_id)
        if isinstance(target, ConnectionPool):
            if target.max_size < 2:
                self.write(plan)
                yield
                return
            conn = target.getconn()
            try:
                with conn.cursor(binary=True, row_factory=tuple_row) as cur:
                    cur.execute(_SESSION_LOCK, key)
                    try:
                        with conn.transaction():
                            _drive(cur, plan)
                        yield
                    finally:
                        cur.execute(_SESSION_UNLOCK, key)
            finally:
                target.putconn(conn)
            return
        with self.inner.lock, target.cursor(binary=True, row_factory=tuple_row) as cur:
            cur.execute(_SESSION_LOCK, key)
            try:
                with target.transaction():
                    _drive(cur, plan)
            except BaseException:
                cur.execute(_SESSION_UNLOCK, key)
                raise
        try:
            yield
        finally:
            with self.inner.lock, target.cursor(row_factory=tuple_row) as cur:
                cur.execute(_SESSION_UNLOCK, key)


class AsyncPostgresDriver:
    """Runs plans through an ``AsyncPostgresSaver``'s connection or pool."""

    dialect = DIALECT

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[Any]:
        target = self.inner.conn
        if isinstance(target, AsyncConnectionPool):
            async with target.connection() as conn:
                yield conn
        else:
            yield target

    async def setup(self) -> None:
        await self.write(_setup_plan())

    @asynccontextmanager
    async def setup_guard(self) -> AsyncIterator[None]:
        target = self.inner.conn
        if isinstance(target, AsyncConnectionPool) and target.max_size < 2:
            yield
            return
        async with self._conn() as conn, conn.cursor(row_factory=tuple_row) as cur:
            while True:
                await cur.execute("SELECT pg_try_advisory_lock(%s)", (SETUP_LOCK,))
                row = await cur.fetchone()
                if row and row[0]:
                    break
                await asyncio.sleep(_LOCK_POLL)
            try:
                yield
            finally:
                await cur.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))

    def _lock(self) -> Any:
        """See :meth:`PostgresDriver._lock`."""
        if isinstance(self.inner.conn, AsyncConnectionPool):
            return contextlib.AsyncExitStack()
        return self.inner.lock

    async def read(self, plan: Plan) -> Any:
        async with (
            self._lock(),
            self._conn() as conn,
            conn.cursor(binary=True, row_factory=tuple_row) as cur,
        ):
            return await _adrive(cur, plan)

    async def write(self, plan: Plan) -> Any:
        async with (
            self._lock(),
            self._conn() as conn,
            conn.transaction(),
            conn.cursor(binary=True, row_factory=tuple_row) as cur,
        ):
            return await _adrive(cur, plan)

    @asynccontextmanager
    async def writing(self, plan: Plan, thread_id: str) -> AsyncIterator[None]:
        """Async twin of :meth:`PostgresDriver.writing`."""
        target = self.inner.conn
        key = thread_key(thread_id)
        if isinstance(target, AsyncConnectionPool):
            if target.max_size < 2:
                await self.write(plan)
                yield
                return
            conn = await target.getconn()
            try:
                async with conn.cursor(binary=True, row_factory=tuple_row) as cur:
                    await cur.execute(_SESSION_LOCK, key)
                    try:
                        async with conn.transaction():
                            await _adrive(cur, plan)
                        yield
                    finally:
                        await cur.execute(_SESSION_UNLOCK, key)
            finally:
                await target.putconn(conn)
            return
        async with self.inner.lock, target.cursor(binary=True, row_factory=tuple_row) as cur:
            await cur.execute(_SESSION_LOCK, key)
            try:
                async with target.transaction():
                    await _adrive(cur, plan)
            except BaseException:
                await cur.execute(_SESSION_UNLOCK, key)
                raise
        try:
            yield
        finally:
            async with self.inner.lock, target.cursor(row_factory=tuple_row) as cur:
                await cur.execute(_SESSION_UNLOCK, key)
