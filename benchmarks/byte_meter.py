"""Count the bytes of the rows a checkpoint saver reads, through its database connection.

What is measured: every row a statement returns through the connection (``fetchone``,
``fetchmany``, ``fetchall``, iterating the cursor, psycopg's ``stream``) is sized and added
up. A row's size is the sum of its values' (bytes and UTF-8 text by length, numbers 8,
decoded jsonb by its JSON text, ``None`` 0). :class:`ByteMeter` keeps the total, the bytes
of statements whose SQL names one of our tables (``stm_*``), those bytes per table named,
the rows and the heaviest statements, with :meth:`ByteMeter.reset` and
:meth:`ByteMeter.report`.

How: ``sqlite3.Connection`` methods cannot be patched, so a SQLite saver gets
:class:`CountingSqlite`, a stand-in forwarding every attribute to a real connection and
wrapping its cursors in :class:`CountingSqliteCursor`. psycopg connections take a
``cursor_factory``: :func:`counting_cursor_class` makes a ``psycopg.Cursor`` subclass that
meters the rows it hands out.

Why here: it is benchmark tooling (``bench_storage.py`` reports the *load bytes* of a
fresh saver with it); ``tests/integration/test_saver_reclaim.py`` loads this file by path
to check that a load of a trimmed thread reads about its live messages.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

OURS = "stm_"
"""Every table of ours starts with it: rows of statements naming one are "ours"."""
_TABLE = re.compile(r"\bstm_\w+")


@dataclass
class ByteMeter:
    """Bytes of the rows fetched through a connection: all, ours, and per table of ours."""

    total: int = 0
    """Bytes of every row fetched."""
    ours: int = 0
    """Bytes of the rows of statements naming a table of ours (``stm_*``)."""
    rows: int = 0
    """Rows fetched (all statements)."""
    tables: Counter[str] = field(default_factory=Counter)
    """Bytes of the rows of statements naming each table of ours (a join counts for each)."""
    statements: Counter[str] = field(default_factory=Counter)
    """Bytes per statement (whitespace collapsed, first 90 characters)."""

    def add(self, sql: str, rows: Iterable[Any]) -> None:
        size = 0
        for row in rows:
            self.rows += 1
            size += row_bytes(row)
        lowered = sql.lower()
        self.total += size
        if OURS in lowered:
            self.ours += size
        for table in set(_TABLE.findall(lowered)):
            self.tables[table] += size
        self.statements[" ".join(sql.split())[:90]] += size

    def reset(self) -> None:
        self.total = self.ours = self.rows = 0
        self.tables.clear()
        self.statements.clear()

    def report(self, top: int = 8) -> str:
        per_table = ", ".join(f"{t} {n}" for t, n in sorted(self.tables.items())) or "none"
        lines = [
            f"read {self.total} bytes in {self.rows} rows; ours ({OURS}*): {self.ours}; "
            f"per table named: {per_table}"
        ]
        lines += [f"  {n:>9}  {sql}" for sql, n in self.statements.most_common(top)]
        return "\n".join(lines)


def value_bytes(value: Any) -> int:
    """Size of one value of a row."""
    if value is None:
        return 0
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, memoryview):
        return value.nbytes
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bool | int | float):
        return 8
    if isinstance(value, dict | list):  # jsonb, decoded by psycopg
        return len(json.dumps(value, default=str))
    return len(str(value))


def row_bytes(row: Any) -> int:
    """Size of a row: the sum of its values' (tuple, ``sqlite3.Row`` or dict row)."""
    if isinstance(row, dict):
        return sum(map(value_bytes, row.values()))
    if isinstance(row, tuple | list | sqlite3.Row):
        return sum(map(value_bytes, row))
    return value_bytes(row)


class CountingSqliteCursor:
    """A ``sqlite3.Cursor`` stand-in that meters every row it returns."""

    def __init__(self, cursor: sqlite3.Cursor, meter: ByteMeter) -> None:
        self._cursor, self._meter, self._sql = cursor, meter, ""

    def execute(self, sql: str, parameters: Any = (), /) -> CountingSqliteCursor:
        self._sql = sql
        self._cursor.execute(sql, parameters)
        return self

    def executemany(self, sql: str, seq: Iterable[Any], /) -> CountingSqliteCursor:
        self._sql = sql
        self._cursor.executemany(sql, seq)
        return self

    def executescript(self, script: str, /) -> CountingSqliteCursor:
        self._sql = script
        self._cursor.executescript(script)
        return self

    def fetchone(self) -> Any:
        row = self._cursor.fetchone()
        if row is not None:
            self._meter.add(self._sql, [row])
        return row

    def fetchmany(self, size: int | None = None) -> list[Any]:
        rows = self._cursor.fetchmany() if size is None else self._cursor.fetchmany(size)
        self._meter.add(self._sql, rows)
        return rows

    def fetchall(self) -> list[Any]:
        rows = self._cursor.fetchall()
        self._meter.add(self._sql, rows)
        return rows

    def __iter__(self) -> CountingSqliteCursor:
        return self

    def __next__(self) -> Any:
        row = next(self._cursor)
        self._meter.add(self._sql, [row])
        return row

    def close(self) -> None:
        self._cursor.close()

    def __getattr__(self, name: str) -> Any:  # rowcount, lastrowid, description...
        return getattr(self._cursor, name)


class CountingSqlite:
    """A ``sqlite3.Connection`` stand-in (its methods cannot be patched): everything is
    forwarded to the real connection; cursors (from ``cursor()``, ``execute()``,
    ``executemany()``, ``executescript()``) meter their rows."""

    def __init__(self, conn: sqlite3.Connection, meter: ByteMeter) -> None:
        object.__setattr__(self, "_conn", conn)
        object.__setattr__(self, "_meter", meter)

    def cursor(self, *args: Any) -> CountingSqliteCursor:
        return CountingSqliteCursor(self._conn.cursor(*args), self._meter)

    def execute(self, sql: str, parameters: Any = (), /) -> CountingSqliteCursor:
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, seq: Iterable[Any], /) -> CountingSqliteCursor:
        return self.cursor().executemany(sql, seq)

    def executescript(self, script: str, /) -> CountingSqliteCursor:
        return self.cursor().executescript(script)

    def __enter__(self) -> CountingSqlite:
        self._conn.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._conn.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:  # commit, rollback, in_transaction, close...
        return getattr(self._conn, name)

    def __setattr__(self, name: str, value: Any) -> None:  # row_factory, isolation_level
        setattr(self._conn, name, value)


def counting_cursor_class(meter: ByteMeter) -> type[Any]:
    """A ``psycopg.Cursor`` subclass for ``cursor_factory``, metering the rows of
    fetchone/many/all, of iterating the cursor and of ``stream``."""
    import psycopg
    from psycopg import sql as pgsql

    class CountingCursor(psycopg.Cursor[Any]):
        _meter_sql = ""

        def _remember(self, query: Any) -> None:
            if isinstance(query, pgsql.Composable):
                query = query.as_string(self.connection)
            elif isinstance(query, bytes):
                query = query.decode()
            self._meter_sql = str(query)

        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            self._remember(query)
            return super().execute(query, params, **kwargs)

        def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
            self._remember(query)
            super().executemany(query, params_seq, **kwargs)

        def stream(self, query: Any, params: Any = None, **kwargs: Any) -> Iterator[Any]:
            self._remember(query)
            for row in super().stream(query, params, **kwargs):
                meter.add(self._meter_sql, [row])
                yield row

        def fetchone(self) -> Any:
            row = super().fetchone()
            if row is not None:
                meter.add(self._meter_sql, [row])
            return row

        def fetchmany(self, size: int = 0) -> list[Any]:
            rows = super().fetchmany(size)
            meter.add(self._meter_sql, rows)
            return rows

        def fetchall(self) -> list[Any]:
            rows = super().fetchall()
            meter.add(self._meter_sql, rows)
            return rows

        # Iteration: psycopg >= 3.3 returns the cursor from ``__iter__`` and hands rows
        # out through ``__next__`` (metered there; wrapping ``__iter__`` in a generator
        # would recurse); older versions make ``__iter__`` a generator of its own, which
        # is wrapped instead.
        def __iter__(self) -> Iterator[Any]:
            rows = super().__iter__()
            return self if rows is self else self._metered(rows)

        def _metered(self, rows: Iterator[Any]) -> Iterator[Any]:
            for row in rows:
                meter.add(self._meter_sql, [row])
                yield row

        def __next__(self) -> Any:
            row = super().__next__()
            meter.add(self._meter_sql, [row])
            return row

    return CountingCursor
