"""What every ``langgraph-stm`` command shares: its streams and its one kind of error.

A command is a module with ``register(commands)``, which adds its parser and sets
``run=`` to a callable ``(args, io) -> exit code``. A command reports a problem the
user can fix by raising :class:`CLIError`; :func:`langgraph_stm.cli.main` prints it as
one line on stderr and returns its exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import TextIO

__all__ = ["IO", "CLIError", "positive_int"]


class CLIError(Exception):
    """A problem the user can fix (bad path, unknown thread): one line, exit ``code``."""

    def __init__(self, message: str, *, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class IO:
    """The streams a command reads and writes (tests pass ``io.StringIO`` objects)."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    inp: TextIO = field(default_factory=lambda: sys.stdin)


def positive_int(text: str) -> int:
    """An argparse ``type=``: a whole number >= 1, else a usage error naming the text."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value
