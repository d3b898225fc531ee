"""The ``langgraph-stm`` command (also ``python -m langgraph_stm``).

``demo`` runs the offline demo agent, ``chat`` an interactive session on one SQLite
file, ``threads`` and ``gc`` look after the threads of a database. Each command lives
in its own module; this one only dispatches and turns errors into one line on stderr.

Example:
    >>> import io
    >>> err = io.StringIO()
    >>> main(["threads", "show", "t1", "--db", "/nonexistent/dir/x.sqlite"], err=err)
    2
    >>> err.getvalue().count("\\n")
    1
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

from langgraph_stm._errors import STMError
from langgraph_stm.cli import _chat, _demo, _gc, _threads
from langgraph_stm.cli._common import IO, CLIError

__all__ = ["main"]

_COMMANDS = (_demo, _chat, _threads, _gc)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="langgraph-stm", description="Short-term memory for LangGraph agents."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _COMMANDS:
        module.register(commands)
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    inp: TextIO | None = None,
) -> int:
    """Run the command line with ``argv``; return the exit code (2 for usage errors)."""
    io = IO(out or sys.stdout, err or sys.stderr, inp or sys.stdin)
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        code: int = args.run(args, io)
    except CLIError as exc:
        print(f"langgraph-stm: {exc}", file=io.err)
        return exc.code
    except STMError as exc:
        print(f"langgraph-stm: {type(exc).__name__}: {exc}".splitlines()[0], file=io.err)
        return 1
    except KeyboardInterrupt:
        print("langgraph-stm: interrupted", file=io.err)
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
