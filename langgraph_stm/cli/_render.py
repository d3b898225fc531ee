"""How ``threads`` and ``gc`` show their answers: rich tables for people, JSON for scripts.

The commands build plain JSON data (dicts, lists, strings, numbers, ``None``) and hand
it to :func:`show` with the name of its shape; this module is the only place that
formats anything. ``--json`` prints the data itself (what scripts parse, keys as
``docs/cli.md`` lists them); otherwise rich renders it, without colours or markup when
the output is not a terminal, and treating every stored value as plain text (a ``[b]``
in a goal stays ``[b]``).

Example:
    >>> import io
    >>> out = io.StringIO()
    >>> show(IO(out=out), "gc", {"dry_run": True, "expired": ["t1"], "swept": 1,
    ...                          "vacuumed_rows": 0}, as_json=False)
    >>> print(out.getvalue().strip())
    dry run: would sweep 1 expired thread (t1) and vacuum 0 unreferenced rows
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from io import StringIO
from typing import Any

from rich.console import Console
from rich.table import Table

from langgraph_stm.cli._common import IO

__all__ = ["as_json_text", "show"]

_WIDTH = 120
"""Columns when the output is not a terminal (a file, a pipe, a test's StringIO)."""
_NO_WRAP = frozenset({"updated", "expires", "messages", "plan done", "status", "tokens", "rows"})
"""Columns of short values, kept on one line while the long ones wrap."""


def show(io: IO, kind: str, data: Any, *, as_json: bool) -> None:
    """Print ``data`` of shape ``kind`` (``threads``, ``thread``, ``deleted``, ``gc``,
    ``export``) to ``io.out``: as JSON, or as tables."""
    if as_json or kind == "export":
        io.out.write(as_json_text(data))
        return
    terminal = io.out.isatty()
    buffer = StringIO()
    console = Console(
        file=io.out if terminal else buffer,
        width=None if terminal else _WIDTH,
        markup=False,
        emoji=False,
        highlight=False,
    )
    _HUMAN[kind](console, data)
    if not terminal:  # no padding at the ends of lines in files and pipes
        io.out.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))


def as_json_text(data: Any) -> str:
    """``data`` as the JSON text every command prints (indented, UTF-8, one final newline).

    Example:
        >>> as_json_text({"goal": "déménager"})
        '{\\n  "goal": "déménager"\\n}\\n'
    """
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _when(value: str | None) -> str | None:
    """An ISO 8601 instant as ``2026-12-01 13:59:31`` (UTC), for people."""
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return value


def _duration(seconds: float) -> str:
    """``2592000`` as ``30d``, ``5400`` as ``1h30m``."""
    rest = round(seconds)
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size or (unit == "s" and not parts):
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        short = column in _NO_WRAP
        table.add_column(column, overflow="fold", no_wrap=short, min_width=len(column))
    for row in rows:
        table.add_row(*(_text(cell) for cell in row))
    return table


def _threads(console: Console, rows: Sequence[Mapping[str, Any]]) -> None:
    if not rows:
        console.print("no threads")
        return
    console.print(
        _table(
            _plural(len(rows), "thread"),
            ["thread", "updated", "messages", "goal", "plan done", "last error", "expires"],
            [
                [
                    r["thread_id"],
                    _when(r["updated_at"]),
                    r["message_count"],
                    r["goal"],
                    f"{r['plan_done']}/{r['plan_steps']}",
                    r["last_error"],
                    _when(r["expires_at"]) or "never",
                ]
                for r in rows
            ],
        )
    )


def _ttl(data: Mapping[str, Any]) -> str:
    if data["ttl_seconds"] is None:
        return "none (never expires)"
    return f"{_duration(data['ttl_seconds'])}, expires {_when(data['expires_at'])} UTC"


def _thread(console: Console, d: Mapping[str, Any]) -> None:
    ctx = d["context"]
    summary = d["summary"]
    error = d["last_error"]
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column(overflow="fold")
    for key, value in (
        ("thread", d["thread_id"]),
        ("checkpoint", d["checkpoint_id"]),
        ("updated", f"{_when(d['updated_at'])} UTC"),
        ("goal", d["goal"]),
        ("messages", d["message_count"]),
        ("checkpoints", d["checkpoint_count"]),
        (
            "context",
            f"{ctx['tokens']} tokens exactly ({ctx['model']}, {ctx['encoding']}; budget "
            f"{ctx['max_tokens']}{', OVER BUDGET' if ctx['over_budget'] else ''}; "
            f"{ctx['messages']} messages in, {ctx['omitted_messages']} left out)",
        ),
        ("messages alone", f"{ctx['history_tokens']} tokens"),
        ("ttl", _ttl(d)),
        (
            "last error",
            None
            if error is None
            else f"{error.get('message')} (recovery: {_text(error.get('recovery'))}, "
            f"step: {_text(error.get('step_id'))})",
        ),
        (
            "summary",
            None
            if summary is None
            else f"v{summary.get('version')}, covers "
            f"{_coverage(summary.get('coverage') or {})}: {summary.get('text')}",
        ),
    ):
        facts.add_row(key, _text(value))
    console.print(facts)
    sections: list[tuple[str, list[str], list[list[Any]]]] = [
        (
            "plan",
            ["id", "task", "status"],
            [[s.get(k) for k in ("id", "task", "status")] for s in d["plan"]],
        ),
        (
            "constraints",
            ["id", "text", "status", "source message"],
            [
                [c.get(k) for k in ("id", "text", "status", "source_message_id")]
                for c in d["constraints"]
            ],
        ),
        (
            "artifacts",
            ["id", "kind", "summary", "uri", "tokens"],
            [
                [a.get(k) for k in ("id", "kind", "summary", "uri", "tokens")]
                for a in d["artifacts"]
            ],
        ),
        (
            "pending approvals",
            ["interrupt", "tool call", "tool", "args"],
            [
                [p["interrupt_id"], p["tool_call_id"], p["name"], p["args"]]
                for p in d["pending_approvals"]
            ],
        ),
    ]
    for title, columns, rows in sections:
        if rows:
            console.print(_table(title, columns, rows))
        else:
            console.print(f"{title}: none")


def _coverage(coverage: Mapping[str, Any]) -> str:
    n = coverage.get("message_count")
    span = f"{_text(coverage.get('first_message_id'))}..{_text(coverage.get('last_message_id'))}"
    return f"{_plural(int(n), 'message')} ({span})" if isinstance(n, int) else span


def _deleted(console: Console, d: Mapping[str, Any]) -> None:
    rows = {table: n for table, n in d["rows"].items() if n}
    console.print(
        f"deleted thread {d['thread_id']}: {_plural(sum(rows.values()), 'row')}, "
        f"{_plural(d['store_items'], 'store item')} in {d['seconds']:.3f} s"
    )
    if rows:
        console.print(_table("rows deleted", ["table", "rows"], sorted(rows.items())))


def _gc(console: Console, d: Mapping[str, Any]) -> None:
    expired = d["expired"]
    listed = f" ({', '.join(expired)})" if expired else ""
    if d["dry_run"]:
        console.print(
            f"dry run: would sweep {_plural(d['swept'], 'expired thread')}{listed} and "
            f"vacuum {d['vacuumed_rows']} unreferenced rows"
        )
    else:
        console.print(
            f"swept {_plural(d['swept'], 'expired thread')}{listed}, "
            f"vacuumed {d['vacuumed_rows']} unreferenced rows"
        )


_HUMAN: dict[str, Callable[[Console, Any], None]] = {
    "threads": _threads,
    "thread": _thread,
    "deleted": _deleted,
    "gc": _gc,
}
