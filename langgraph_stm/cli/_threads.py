"""``langgraph-stm threads`` (being written)."""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(commands: Any) -> None:
    """Add ``threads`` to the command line."""
