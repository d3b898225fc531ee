"""Pending writes on their way to the inner saver: validated, and given stable ids.

LangGraph stores a task's writes (``put_writes``) before it applies them. A malformed
update of an ``STMState`` field stored there would make every later read of the
thread raise in the reducer, so it is refused first (``validate_writes``). A message
written without an id would get a new random id from ``add_messages`` on every read
of the paused thread, so it gets a deterministic one here, derived from where it was
written.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from langgraph_stm._state import REDUCED_FIELDS, validate_update

__all__ = ["checked_writes", "stable_message_id"]


def stable_message_id(config: RunnableConfig, task_id: str, index: int, position: int) -> str:
    """The id given to a message written without one: the same for the same write.

    Example:
        >>> config = {"configurable": {"thread_id": "t", "checkpoint_id": "c"}}
        >>> stable_message_id(config, "task", 0, 0) == stable_message_id(config, "task", 0, 0)
        True
    """
    c = config.get("configurable", {})
    parts = [c.get("thread_id"), c.get("checkpoint_ns", ""), c.get("checkpoint_id"), task_id]
    key = "\x1f".join(str(p) for p in [*parts, index, position])
    return str(uuid.UUID(bytes=hashlib.blake2b(key.encode(), digest_size=16).digest()))


def _with_ids(config: RunnableConfig, task_id: str, index: int, value: Any) -> Any:
    if isinstance(value, BaseMessage):
        if value.id is None:
            return value.model_copy(update={"id": stable_message_id(config, task_id, index, 0)})
        return value
    if isinstance(value, list) and any(isinstance(m, BaseMessage) and m.id is None for m in value):
        return [
            m.model_copy(update={"id": stable_message_id(config, task_id, index, i)})
            if isinstance(m, BaseMessage) and m.id is None
            else m
            for i, m in enumerate(value)
        ]
    return value


def checked_writes(
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    *,
    validate: bool,
) -> list[tuple[str, Any]]:
    """``writes`` with id-less messages given a stable id (copies; the objects written
    are not changed), after checking the structured fields when ``validate``.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> [(_, m)] = checked_writes({}, [("messages", ToolMessage("ok", tool_call_id="c"))],
        ...                           "task", validate=True)
        >>> m.id is not None
        True
    """
    result: list[tuple[str, Any]] = []
    for index, (channel, value) in enumerate(writes):
        if validate and channel in REDUCED_FIELDS:
            validate_update(channel, value)
        result.append((channel, _with_ids(config, task_id, index, value)))
    return result
