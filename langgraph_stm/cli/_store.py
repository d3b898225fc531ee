"""Which database a ``threads`` or ``gc`` command works on, and opening it safely.

Every such command takes ``--db PATH`` (a SQLite file) or ``--postgres URL``, plus
``--tenant OWNER`` (only that owner's threads, where the application scopes threads
with ``STMSaver(tenant_key=...)``) and ``--ttl DURATION`` (the ``ttl=`` the application
gives its saver: it is not stored in the database, and a thread without a TTL of its
own expires by it). Opening never creates anything: a SQLite path that does not exist
(SQLite would create an empty file) or that is not a SQLite file is refused, and a
PostgreSQL server that does not answer fails after ``--connect-timeout`` seconds. Every
database error becomes one :class:`~langgraph_stm.cli._common.CLIError` line.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_database_options(parser)
    >>> args = parser.parse_args(["--db", "/nonexistent/x.sqlite", "--ttl", "7d"])
    >>> args.ttl
    datetime.timedelta(days=7)
    >>> with open_saver(args):
    ...     pass
    Traceback (most recent call last):
    ...
    langgraph_stm.cli._common.CLIError: no SQLite database at /nonexistent/x.sqlite (check the --db path)
"""  # noqa: E501

from __future__ import annotations

import argparse
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig

from langgraph_stm.checkpoint import STMSaver
from langgraph_stm.cli._common import CLIError

__all__ = ["TENANT_KEY", "add_database_options", "open_saver", "parse_duration", "thread_config"]

TENANT_KEY = "tenant_id"
"""The ``configurable`` key the command's saver reads the owner from. Any name works:
the owner a thread is bound to is stored in the database, not the key's name."""

_SQLITE_HEADER = b"SQLite format 3\x00"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")


def parse_duration(text: str) -> timedelta:
    """Read ``"90s"``, ``"30m"``, ``"12h"``, ``"7d"`` or plain seconds as a ``timedelta``.

    Example:
        >>> parse_duration("12h"), parse_duration("90")
        (datetime.timedelta(seconds=43200), datetime.timedelta(seconds=90))
    """
    match = _DURATION.fullmatch(text.strip())
    if match is None or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: use a positive number of seconds or 90s, 30m, 12h, 7d"
        )
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2) or "s"])


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def add_database_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--db`` / ``--postgres`` (one required), ``--tenant``, ``--ttl`` and
    ``--connect-timeout`` to a command's parser."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", type=Path, metavar="PATH", help="SQLite file of the threads")
    where.add_argument("--postgres", metavar="URL", help="PostgreSQL connection URL")
    parser.add_argument(
        "--tenant",
        metavar="OWNER",
        help="only the threads of this owner (where the app uses STMSaver(tenant_key=...))",
    )
    parser.add_argument(
        "--ttl",
        type=parse_duration,
        metavar="DURATION",
        help="the app's saver ttl= (e.g. 7d, 12h): threads without their own TTL expire by it",
    )
    parser.add_argument(
        "--connect-timeout",
        type=_timeout,
        default=5.0,
        metavar="SECONDS",
        help="give up on a PostgreSQL server that does not answer (default 5)",
    )


def thread_config(thread_id: str, tenant: str | None) -> RunnableConfig:
    """The config that reads ``thread_id``'s root namespace as ``tenant``."""
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if tenant is not None:
        configurable[TENANT_KEY] = tenant
    return {"configurable": configurable}


def _options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if args.tenant is not None:
        if not args.tenant:
            raise CLIError("--tenant needs a non-empty owner", code=2)
        options["tenant_key"] = TENANT_KEY
    if args.ttl is not None:
        options["ttl"] = args.ttl
    return options


def _check_sqlite(path: Path) -> None:
    if not path.exists():
        raise CLIError(f"no SQLite database at {path} (check the --db path)", code=2)
    if not path.is_file():
        raise CLIError(f"{path} is not a file: --db takes a SQLite database file", code=2)
    try:
        with path.open("rb") as handle:
            header = handle.read(len(_SQLITE_HEADER))
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}", code=2) from None
    if header and header != _SQLITE_HEADER:
        raise CLIError(f"{path} is not a SQLite database", code=2)


def _redacted(url: str) -> str:
    """The URL without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0].strip() if text else type(exc).__name__
    return line.removeprefix("connection failed: ")


def _postgres_conninfo(url: str, timeout: float) -> str:
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        given = conninfo_to_dict(url)
        if "connect_timeout" in given:
            return make_conninfo(url)
        return make_conninfo(url, connect_timeout=max(1, round(timeout)))
    except ProgrammingError:
        raise CLIError(
            f"{_redacted(url)!r} is not a PostgreSQL URL "
            "(expected postgresql://user@host:port/dbname)",
            code=2,
        ) from None


@contextmanager
def open_saver(args: argparse.Namespace) -> Iterator[STMSaver]:
    """Open the database the command names, set up, as an :class:`STMSaver`.

    Raises :class:`CLIError` (exit code 2) when it cannot be opened, and turns a
    database error inside the ``with`` block into a one-line :class:`CLIError` (1).
    """
    options = _options(args)
    if args.postgres is None:
        path: Path = args.db
        _check_sqlite(path)
        where = str(path)
        try:
            with STMSaver.from_sqlite(path, **options) as saver:
                saver.setup()
                yield saver
        except sqlite3.Error as exc:
            raise CLIError(f"SQLite error on {where}: {_first_line(exc)}") from None
        return
    try:
        import psycopg
    except ImportError:
        raise CLIError(
            "--postgres needs psycopg: pip install 'langgraph-stm[postgres]'", code=2
        ) from None
    url = str(args.postgres)
    conninfo = _postgres_conninfo(url, args.connect_timeout)
    where = _redacted(url)
    opened = False
    try:
        with STMSaver.from_postgres(conninfo, **options) as saver:
            opened = True
            saver.setup()
            yield saver
    except psycopg.Error as exc:
        if not opened:
            message = f"cannot connect to PostgreSQL at {where}: {_first_line(exc)}"
            raise CLIError(message, code=2) from None
        raise CLIError(f"PostgreSQL error on {where}: {_first_line(exc)}") from None
