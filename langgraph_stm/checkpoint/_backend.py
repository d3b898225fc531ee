"""Choosing the tables and drivers for an inner saver (one set per inner saver)."""

from __future__ import annotations

import sqlite3
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from langgraph_stm.checkpoint._inner import (
    LATEST_ROOT_SQL,
    LATEST_ROOTS_SQL,
    LIVE_CHECKPOINTS_SQL,
    Inner,
)
from langgraph_stm.checkpoint._tables import Dialect

__all__ = ["Tables", "tables_for"]

_SETUP_ATTEMPTS = 100
_SETUP_RETRY = 0.05


@dataclass(frozen=True, slots=True)
class Tables:
    """Where our rows of one inner saver live, and how to run plans there."""

    dialect: Dialect
    sync: Any
    """The sync driver (``None`` over an async-only saver)."""
    aio: Any
    """The async driver (``None`` over a sync-only saver; the in-memory tables use
    ``sync`` for both)."""
    in_database: bool
    """Our tables share the inner saver's database (its tables can be joined)."""

    def latest_root_sql(self) -> str:
        return LATEST_ROOT_SQL.format(p=self.dialect.param)

    def latest_roots_sql(self) -> str:
        return LATEST_ROOTS_SQL

    def live_sql(self, thread_id: str) -> tuple[str, list[Any]]:
        return LIVE_CHECKPOINTS_SQL.format(p=self.dialect.param), [thread_id]


_PRIVATE: weakref.WeakKeyDictionary[Any, Tables] = weakref.WeakKeyDictionary()
_PRIVATE_LOCK = threading.Lock()


def _private(inner: Inner) -> Tables:
    """The in-memory tables of an inner saver we cannot share a database with."""
    from langgraph_stm.checkpoint import _sqlite

    with _PRIVATE_LOCK:
        tables = _PRIVATE.get(inner.saver)
        if tables is None:
            conn = sqlite3.connect(":memory:", check_same_thread=False)
            driver = _sqlite.SqliteDriver(conn, threading.RLock(), joins_inner=False)
            tables = Tables(_sqlite.DIALECT, driver, None, in_database=False)
            _PRIVATE[inner.saver] = tables
        return tables


def _locked(exc: sqlite3.OperationalError, attempt: int) -> bool:
    # The inner setup switches the journal to WAL, which fails at once with "database
    # is locked" while another connection sets up the database.
    return "locked" in str(exc) and attempt < _SETUP_ATTEMPTS - 1


def tables_for(inner: Inner) -> Tables:
    """The tables and drivers for ``inner`` (importing the backend's driver only then)."""
    saver: Any = inner.saver
    if inner.kind == "sqlite":
        from langgraph_stm.checkpoint import _sqlite

        def setup_inner() -> None:
            for attempt in range(_SETUP_ATTEMPTS):
                try:
                    with saver.lock:
                        saver.setup()
                    return
                except sqlite3.OperationalError as exc:
                    if not _locked(exc, attempt):
                        raise
                time.sleep(_SETUP_RETRY)

        driver = _sqlite.SqliteDriver(
            saver.conn, saver.lock, joins_inner=True, before_setup=setup_inner
        )
        return Tables(_sqlite.DIALECT, driver, None, in_database=True)
    if inner.kind == "async_sqlite":
        import asyncio

        from langgraph_stm.checkpoint import _sqlite

        async def asetup_inner() -> None:
            for attempt in range(_SETUP_ATTEMPTS):
                try:
                    await saver.setup()
                    return
                except sqlite3.OperationalError as exc:
                    if not _locked(exc, attempt):
                        raise
                await asyncio.sleep(_SETUP_RETRY)

        adriver = _sqlite.AsyncSqliteDriver(saver.conn, saver.lock, before_setup=asetup_inner)
        return Tables(_sqlite.DIALECT, None, adriver, in_database=True)
    if inner.kind == "postgres":
        from langgraph_stm.checkpoint import _postgres

        return Tables(_postgres.DIALECT, _postgres.PostgresDriver(saver), None, in_database=True)
    if inner.kind == "async_postgres":
        from langgraph_stm.checkpoint import _postgres

        return Tables(
            _postgres.DIALECT, None, _postgres.AsyncPostgresDriver(saver), in_database=True
        )
    return _private(inner)
