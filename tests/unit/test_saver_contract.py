"""What STMSaver relies on, checked so that a dependency change fails loudly here.

STMSaver uses no private LangGraph names. It does rely on these public parts of the
inner savers, and on their table layout, to write our rows on the same connection and
to find a thread's latest checkpoint without deserializing it.
"""

from __future__ import annotations

import pickle
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

import langgraph_stm
from langgraph_stm.checkpoint import STMSaver


class TestImports:
    """Importing the package never imports a database driver."""

    def test_top_level_import_stays_light(self) -> None:
        """psycopg, aiosqlite and the sqlite/postgres savers are imported lazily."""
        code = (
            "import sys, langgraph_stm, langgraph_stm.checkpoint\n"
            "heavy = [m for m in sys.modules if m.split('.')[0] in ('psycopg', 'aiosqlite')\n"
            "         or m.startswith(('langgraph.checkpoint.sqlite',"
            " 'langgraph.checkpoint.postgres', 'langgraph_stm.checkpoint.sqlite',"
            " 'langgraph_stm.checkpoint._postgres'))]\n"
            "print(heavy)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        assert out.strip() == "[]"

    def test_saver_is_re_exported(self) -> None:
        """STMSaver and ThreadState are part of the top-level API."""
        assert langgraph_stm.STMSaver is STMSaver
        assert {"STMSaver", "ThreadState"} <= set(langgraph_stm.__all__)


class TestInnerSaverContract:
    """The public attributes and tables of the inner savers that our stores use."""

    def test_in_memory_saver_exposes_storage(self) -> None:
        """``storage[thread_id][checkpoint_ns]`` maps checkpoint ids (latest = max)."""
        saver = InMemorySaver()
        assert isinstance(saver.storage, dict)

    def test_sqlite_saver_connection_lock_and_table(self, sqlite_path: Path) -> None:
        """``conn``, ``lock``, ``setup()`` and ``checkpoints(thread_id, checkpoint_ns, ...)``."""
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(sqlite3.connect(sqlite_path, check_same_thread=False))
        saver.setup()
        assert isinstance(saver.conn, sqlite3.Connection)
        assert hasattr(saver.lock, "acquire")
        columns = {r[1] for r in saver.conn.execute("PRAGMA table_info(checkpoints)")}
        assert {"thread_id", "checkpoint_ns", "checkpoint_id"} <= columns
        saver.conn.close()

    async def test_async_sqlite_saver_connection_and_lock(self, sqlite_path: Path) -> None:
        """``conn`` (aiosqlite), an asyncio ``lock`` and an async ``setup()``."""
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(sqlite_path)) as saver:
            await saver.setup()
            assert hasattr(saver.conn, "execute")
            assert hasattr(saver.lock, "acquire")

    @pytest.mark.postgres
    def test_postgres_saver_connection_lock_and_table(self, postgres_uri: str) -> None:
        """``conn`` (connection or pool), ``lock`` and the ``checkpoints`` table."""
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(postgres_uri) as saver:
            saver.setup()
            assert hasattr(saver.lock, "acquire")
            rows = saver.conn.execute(  # type: ignore[union-attr]
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'checkpoints'"
            ).fetchall()
            assert {"thread_id", "checkpoint_ns", "checkpoint_id"} <= {
                r["column_name"] for r in rows
            }

    def test_sqlite_thread_tables_are_the_ones_we_delete_from(self, sqlite_path: Path) -> None:
        """``delete_thread`` deletes a thread's checkpoints with ours in one transaction,
        from the inner saver's tables that have a ``thread_id`` column: all of them."""
        from langgraph.checkpoint.sqlite import SqliteSaver

        from langgraph_stm.checkpoint._inner import SQLITE_TABLES as INNER_TABLES

        saver = SqliteSaver(sqlite3.connect(sqlite_path, check_same_thread=False))
        saver.setup()
        tables = [
            r[0] for r in saver.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        with_thread = {
            t
            for t in tables
            if any(c[1] == "thread_id" for c in saver.conn.execute(f"PRAGMA table_info({t})"))
        }
        assert with_thread == set(INNER_TABLES)
        saver.conn.close()

    @pytest.mark.postgres
    def test_postgres_thread_tables_are_the_ones_we_delete_from(self, postgres_uri: str) -> None:
        """Same for ``PostgresSaver``: every table with a ``thread_id`` column."""
        from langgraph.checkpoint.postgres import PostgresSaver

        from langgraph_stm.checkpoint._inner import POSTGRES_TABLES as INNER_TABLES

        with PostgresSaver.from_conn_string(postgres_uri) as saver:
            saver.setup()
            rows = saver.conn.execute(  # type: ignore[union-attr]
                "SELECT table_name FROM information_schema.columns "
                "WHERE column_name = 'thread_id' AND table_schema = current_schema()"
            ).fetchall()
            assert {r["table_name"] for r in rows} == set(INNER_TABLES)

    def test_optional_capabilities_are_detected_by_override(self) -> None:
        """The conformance suite detects capabilities by overridden methods; so do we:
        ``prune`` is ours everywhere, ``copy_thread`` only through ``STMSaver.wrap``."""
        plain = type(STMSaver(InMemorySaver()))
        assert plain is STMSaver
        assert plain.aprune is not BaseCheckpointSaver.aprune
        assert plain.acopy_thread is BaseCheckpointSaver.acopy_thread


class _CopyingSaver(InMemorySaver):
    """An inner saver with one optional capability (``copy_thread``)."""

    copied: list[tuple[str, str]]

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copied = [*getattr(self, "copied", []), (source_thread_id, target_thread_id)]


class _MySaver(STMSaver):
    """A user's subclass."""


class _MyCopyingSaver(STMSaver):
    """A user's subclass with its own copy_thread."""

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        raise RuntimeError("mine")


class TestCapabilities:
    """Optional capabilities follow the inner saver through ``STMSaver.wrap``."""

    def test_capability_class_pickles_by_name(self) -> None:
        """The class carrying ``copy_thread`` is one class per capability set, found by
        pickle by its qualified name; ``STMSaver(...)`` itself is always STMSaver."""
        saver = STMSaver.wrap(_CopyingSaver())
        assert isinstance(saver, STMSaver)
        assert pickle.loads(pickle.dumps(type(saver))) is type(saver)
        assert type(STMSaver.wrap(_CopyingSaver())) is type(saver)
        assert type(STMSaver(_CopyingSaver())) is STMSaver
        assert type(STMSaver.wrap(InMemorySaver())) is STMSaver

    def test_user_subclass_keeps_its_class_and_gains_the_capability(self) -> None:
        """A subclass instance is still the subclass and forwards ``copy_thread``."""
        inner = _CopyingSaver()
        saver = _MySaver.wrap(inner)
        assert isinstance(saver, _MySaver)
        saver.copy_thread("t1", "t2")
        assert inner.copied == [("t1", "t2")]
        assert pickle.loads(pickle.dumps(type(saver))) is type(saver)

    def test_user_override_wins(self) -> None:
        """A capability the user's subclass defines is not replaced by ours."""
        saver = _MyCopyingSaver.wrap(_CopyingSaver())
        with pytest.raises(RuntimeError, match="mine"):
            saver.copy_thread("t1", "t2")
