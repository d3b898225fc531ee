"""The per-thread projection of the structured state: :class:`ThreadState`.

The projection is computed from a root checkpoint's ``channel_values`` when the
checkpoint is written, stored as JSON in our own table (or in memory), and read back
without touching, let alone deserializing, any checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from langgraph_stm._state import Artifact, Constraint, ErrorRecord, PlanStep, Summary

__all__ = ["ProjectionRow", "ThreadState", "format_ts", "project"]

_FIELDS = ("goal", "plan", "constraints", "artifacts", "last_error", "summary")


@dataclass(frozen=True, slots=True)
class ThreadState:
    """The latest structured short-term state of one thread, as stored by :class:`STMSaver`.

    Example:
        >>> ThreadState(thread_id="t1", checkpoint_id="c1", updated_at=None).plan
        []
    """

    thread_id: str
    """The thread this state belongs to."""
    checkpoint_id: str
    """Id of the root checkpoint (``checkpoint_ns == ""``) the state was taken from."""
    updated_at: datetime | None
    """Timestamp of that checkpoint (UTC)."""
    goal: str | None = None
    """The task's goal, if the graph state has one."""
    plan: list[PlanStep] = field(default_factory=list)
    """The plan steps."""
    constraints: list[Constraint] = field(default_factory=list)
    """The constraints in force."""
    artifacts: list[Artifact] = field(default_factory=list)
    """Artifacts kept as summary plus reference."""
    last_error: ErrorRecord | None = None
    """The last error and its recovery, if any."""
    summary: Summary | None = None
    """The running summary, if any."""
    message_count: int | None = None
    """Number of messages in ``messages``; ``None`` when the checkpoint does not hold the
    list itself: a ``DeltaChannel`` stores only its writes (and an occasional snapshot),
    so counting would mean replaying the thread's history on every write."""


@dataclass(frozen=True, slots=True)
class ProjectionRow:
    """The stored form of a :class:`ThreadState`."""

    thread_id: str
    checkpoint_id: str
    updated_at: str
    message_count: int | None
    state: str

    def to_thread_state(self) -> ThreadState:
        """Decode the JSON columns into a :class:`ThreadState`."""
        data: dict[str, Any] = json.loads(self.state)
        return ThreadState(
            thread_id=self.thread_id,
            checkpoint_id=self.checkpoint_id,
            updated_at=parse_ts(self.updated_at),
            goal=data.get("goal"),
            plan=data.get("plan") or [],
            constraints=data.get("constraints") or [],
            artifacts=data.get("artifacts") or [],
            last_error=data.get("last_error"),
            summary=data.get("summary"),
            message_count=self.message_count,
        )


def format_ts(value: datetime) -> str:
    """Format a datetime as fixed-width UTC ISO 8601, so strings sort like instants.

    Example:
        >>> format_ts(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
        '2026-01-02T03:04:05.000000+00:00'
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def parse_ts(value: str | None) -> datetime | None:
    """Parse a stored timestamp back into an aware datetime."""
    if not value:
        return None
    return datetime.fromisoformat(value)


def _checkpoint_ts(ts: object) -> str:
    if isinstance(ts, str):
        try:
            return format_ts(datetime.fromisoformat(ts))
        except ValueError:
            pass
    return format_ts(datetime.now(UTC))


def _json_safe(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return None


def project(
    thread_id: str, checkpoint_id: str, ts: object, channel_values: dict[str, Any]
) -> ProjectionRow:
    """Compute the projection of a root checkpoint's (rehydrated) ``channel_values``.

    Fields the state does not have are left empty; values that are not JSON data
    (a user's custom type in a field of the same name) are stored as ``None``.

    Example:
        >>> row = project("t1", "c1", "2026-01-01T00:00:00+00:00", {"goal": "ship", "messages": []})
        >>> state = row.to_thread_state()
        >>> state.goal, state.message_count, state.updated_at.year
        ('ship', 0, 2026)
    """
    state = {name: _json_safe(channel_values.get(name)) for name in _FIELDS}
    messages = channel_values.get("messages")
    count = len(messages) if isinstance(messages, list) else None
    return ProjectionRow(
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        updated_at=_checkpoint_ts(ts),
        message_count=count,
        state=json.dumps(state, ensure_ascii=False, separators=(",", ":")),
    )
