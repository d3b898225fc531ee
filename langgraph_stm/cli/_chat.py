"""``langgraph-stm chat`` (being written)."""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add ``chat`` to the command line."""
