"""SQLite: the dialect, ``MIGRATIONS`` and the two drivers (sqlite3 and aiosqlite).

Our tables live in the inner saver's database and are written on its connection.
A checkpoint write runs our statements in a ``BEGIN IMMEDIATE`` transaction that the
inner saver's own ``put`` then commits: our rows and the checkpoint become visible
together, in one commit, and the write lock taken up front means a write never meets
another process's commit halfway (which SQLite refuses with "database is locked").
In one process, a *gate* (one lock per connection) keeps one such transaction at a
time, so no other write of ours can commit or roll back half of it. Deletion, pruning
and reclaiming run in transactions of their own under the same gate, so they never
interleave with a write.

The same driver serves ``InMemorySaver`` (and savers we have no database access for)
over a private in-memory database: one per inner saver, so wrapping the same saver
twice reads the same threads.

Example:
    >>> from langgraph_stm.checkpoint import STMSaver
    >>> with STMSaver.from_sqlite(":memory:") as saver:
    ...     saver.setup()
    ...     tables = {r[0] for r in saver.inner.conn.execute(
    ...         "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'stm_%'")}
    >>> sorted(tables)  # doctest: +NORMALIZE_WHITESPACE
    ['stm_audit', 'stm_bodies', 'stm_claims', 'stm_lifecycle', 'stm_lists', 'stm_migrations',
     'stm_owners', 'stm_refs', 'stm_threads', 'stm_tombstones', 'stm_values']
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, cast

from langgraph_stm.checkpoint._inner import SQLITE_TABLES
from langgraph_stm.checkpoint._lifecycle import backfill_lifecycle
from langgraph_stm.checkpoint._tables import (
    Dialect,
    Migration,
    Plan,
    arun,
    convert_old_rows,
    migrate_plan,
    run,
    version_plan,
)

__all__ = ["DIALECT", "MIGRATIONS", "AsyncSqliteDriver", "SqliteDriver"]

DIALECT = Dialect(
    param="?",
    insert_ignore="INSERT OR IGNORE INTO {table} ({cols})",
    ignore_suffix="",
    state_param="?",
    state_column="state",
    inner_tables=SQLITE_TABLES,
    lock_thread=None,
    no_limit=-1,
)

_BODIES = """CREATE TABLE IF NOT EXISTS stm_bodies (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    digest BLOB NOT NULL,
    message_id TEXT,
    type TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, digest)
) WITHOUT ROWID"""
_LISTS = """CREATE TABLE IF NOT EXISTS stm_lists (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    digest BLOB NOT NULL,
    base BLOB,
    length INTEGER NOT NULL,
    ops BLOB NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, digest)
)"""
_VALUES = """CREATE TABLE IF NOT EXISTS stm_values (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    digest BLOB NOT NULL,
    type TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, digest)
)"""
_REFS = """CREATE TABLE IF NOT EXISTS stm_refs (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    refs BLOB NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
) WITHOUT ROWID"""

MIGRATIONS: list[Migration] = [
    # 0-5: the first layout (loose bodies and packs), kept as released.
    "CREATE TABLE IF NOT EXISTS stm_migrations (v INTEGER PRIMARY KEY)",
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
    "CREATE INDEX IF NOT EXISTS stm_msg_chunks_idx "
    "ON stm_message_lists (thread_id, checkpoint_ns) WHERE base = x''",
    # 6-12: one row per body (loads read only what they use), values, refs.
    _BODIES,
    _LISTS,
    _VALUES,
    _REFS,
    convert_old_rows("SELECT name FROM pragma_table_info('stm_message_bodies')"),
    "DROP TABLE IF EXISTS stm_message_bodies",
    "DROP TABLE IF EXISTS stm_message_lists",
    # 13-19: the thread lifecycle (TTL, tombstones; see _retention) and the audit trail.
    """CREATE TABLE IF NOT EXISTS stm_lifecycle (
        thread_id TEXT PRIMARY KEY,
        written_at REAL NOT NULL,
        ttl_seconds REAL
    )""",
    "CREATE INDEX IF NOT EXISTS stm_lifecycle_written_at_idx ON stm_lifecycle (written_at)",
    "CREATE INDEX IF NOT EXISTS stm_lifecycle_expires_idx "
    "ON stm_lifecycle ((written_at + ttl_seconds)) WHERE ttl_seconds IS NOT NULL",
    """CREATE TABLE IF NOT EXISTS stm_tombstones (
        thread_id TEXT PRIMARY KEY,
        deleted_at REAL NOT NULL,
        last_checkpoint_id TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS stm_tombstones_deleted_at_idx ON stm_tombstones (deleted_at)",
    """CREATE TABLE IF NOT EXISTS stm_audit (
        thread_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        recorded_at REAL NOT NULL,
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
    "checkpoint_id TEXT NOT NULL, token TEXT NOT NULL, expires_at REAL NOT NULL, "
    "ended_at TEXT)",
]
"""Our schema, append-only: ``stm_migrations`` records which steps ran."""

# One gate per connection (keyed by id; connections are not weak-referenceable, so the
# entry holds the connection itself, which keeps the id from being reused).
_GATES: dict[int, tuple[Any, Any]] = {}
_GATES_LOCK = threading.Lock()


def _gate(conn: Any, make: Any = threading.RLock) -> Any:
    with _GATES_LOCK:
        entry = _GATES.get(id(conn))
        if entry is None or entry[0] is not conn:
            entry = _GATES[id(conn)] = (conn, make())
        return entry[1]


def _agate(conn: Any) -> asyncio.Lock:
    return cast(asyncio.Lock, _gate(conn, asyncio.Lock))


def _drive(conn: Any, plan: Plan) -> Any:
    return run(plan, lambda sql, params: conn.execute(sql, params).fetchall(), conn.executemany)


class SqliteDriver:
    """Runs plans on a ``sqlite3`` connection, under ``lock`` (the inner saver's)."""

    dialect = DIALECT

    def __init__(
        self,
        conn: sqlite3.Connection,
        lock: Any,
        *,
        joins_inner: bool,
        before_setup: Any = None,
    ) -> None:
        self.before_setup = before_setup
        self.conn = conn
        self.lock = lock
        self.gate = _gate(conn)
        self.joins_inner = joins_inner
        """Whether a checkpoint write leaves its transaction for the inner ``put`` to
        commit (a SqliteSaver on the same connection)."""
        self.is_setup = False

    def setup(self) -> None:
        """Create or migrate our tables (idempotent; cheap once up to date)."""
        if self.is_setup:
            return
        if self.before_setup is not None:
            self.before_setup()
        with self.gate, self.lock:
            try:
                current = _drive(self.conn, version_plan(DIALECT))
            except sqlite3.OperationalError:
                current = None
            if current != len(MIGRATIONS) - 1:
                self._begin()
                try:
                    _drive(self.conn, migrate_plan(DIALECT, MIGRATIONS))
                    self.conn.commit()
                except BaseException:
                    self.conn.rollback()
                    raise
        self.is_setup = True

    def _begin(self) -> None:
        if self.conn.in_transaction:
            self.conn.commit()
        self.conn.execute("BEGIN IMMEDIATE")

    def read(self, plan: Plan) -> Any:
        """Run a plan that only reads."""
        self.setup()
        with self.lock:
            return _drive(self.conn, plan)

    def write(self, plan: Plan) -> Any:
        """Run a plan in a transaction of its own, all or nothing."""
        self.setup()
        with self.gate, self.lock:
            self._begin()
            try:
                result = _drive(self.conn, plan)
                self.conn.commit()
            except BaseException:
                self.conn.rollback()
                raise
            return result

    @contextmanager
    def writing(self, plan: Plan, thread_id: str = "") -> Iterator[None]:
        """Run ``plan`` in a transaction that the inner write (the ``with`` body) commits."""
        if not self.joins_inner:
            with self.gate:  # held until the inner write returned (see the module doc)
                self.write(plan)
                yield
            return
        self.setup()
        with self.gate:
            with self.lock:
                self._begin()
                try:
                    _drive(self.conn, plan)
                except BaseException:
                    self.conn.rollback()
                    raise
            try:
                yield
            except BaseException:
                with self.lock:
                    if self.conn.in_transaction:
                        self.conn.rollback()
                raise
            with self.lock:
                if self.conn.in_transaction:
                    self.conn.commit()


class AsyncSqliteDriver:
    """Runs plans on an ``aiosqlite`` connection (an ``AsyncSqliteSaver``'s)."""

    dialect = DIALECT

    def __init__(self, conn: Any, lock: asyncio.Lock, *, before_setup: Any = None) -> None:
        self.before_setup = before_setup
        self.conn = conn
        self.lock = lock
        self.is_setup = False

    @property
    def gate(self) -> asyncio.Lock:
        return _agate(self.conn)

    async def _query(self, sql: str, params: Any) -> list[Any]:
        async with self.conn.execute(sql, params) as cur:
            return list(await cur.fetchall())

    async def _drive(self, plan: Plan) -> Any:
        return await arun(plan, self._query, self.conn.executemany)

    async def _begin(self) -> None:
        if self.conn.in_transaction:
            await self.conn.commit()
        await self.conn.execute("BEGIN IMMEDIATE")

    async def setup(self) -> None:
        if self.is_setup:
            return
        if self.before_setup is not None:
            await self.before_setup()
        async with self.gate, self.lock:
            try:
                current = await self._drive(version_plan(DIALECT))
            except sqlite3.OperationalError:
                current = None
            if current != len(MIGRATIONS) - 1:
                await self._begin()
                try:
                    await self._drive(migrate_plan(DIALECT, MIGRATIONS))
                    await self.conn.commit()
                except BaseException:
                    await self.conn.rollback()
                    raise
        self.is_setup = True

    async def read(self, plan: Plan) -> Any:
        await self.setup()
        async with self.lock:
            return await self._drive(plan)

    async def write(self, plan: Plan) -> Any:
        await self.setup()
        async with self.gate, self.lock:
            await self._begin()
            try:
                result = await self._drive(plan)
                await self.conn.commit()
            except BaseException:
                await self.conn.rollback()
                raise
            return result

    @asynccontextmanager
    async def writing(self, plan: Plan, thread_id: str = "") -> AsyncIterator[None]:
        await self.setup()
        async with self.gate:
            async with self.lock:
                await self._begin()
                try:
                    await self._drive(plan)
                except BaseException:
                    await self.conn.rollback()
                    raise
            try:
                yield
            except BaseException:
                async with self.lock:
                    if self.conn.in_transaction:
                        await self.conn.rollback()
                raise
            async with self.lock:
                if self.conn.in_transaction:
                    await self.conn.commit()
