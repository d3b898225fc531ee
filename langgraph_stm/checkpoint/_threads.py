"""The thread index: :class:`ThreadState`, the projection rows and their queries.

The projection of a root checkpoint (goal, plan, constraints, artifacts, last error,
summary, message count) is computed when the checkpoint is written and stored as
JSON in ``stm_threads``, so threads can be listed and inspected without loading a
checkpoint. It is trusted only while its checkpoint id is the thread's latest root
checkpoint: a row that is missing, behind, or unreadable is computed from the
checkpoint on the fly by the reads (which never write); ``refresh_threads`` rewrites
such rows.

The stored JSON is valid for every backend: NUL characters and lone surrogates in
strings become U+FFFD and non-finite floats become ``null`` (the checkpoint itself
keeps the exact values).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph_stm._errors import InvalidArgumentError
from langgraph_stm._state import STM_FIELDS, Artifact, Constraint, ErrorRecord, PlanStep, Summary
from langgraph_stm.checkpoint._format import FormatError, column_text
from langgraph_stm.checkpoint._tables import ThreadRow

__all__ = ["ThreadQuery", "ThreadState", "format_ts", "project", "select_page", "to_state"]

_FIELDS = STM_FIELDS


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
    expires_at: datetime | None = None
    """When the thread expires (UTC): its last root checkpoint write plus :attr:`ttl`;
    ``None`` when it never does."""
    ttl: timedelta | None = None
    """The TTL in force for the thread: its own (``config["configurable"]["ttl"]`` at
    its first write, or ``STMSaver.set_ttl``), else the saver's ``ttl``; ``None`` when
    neither is set (or no root checkpoint was written since the lifecycle table exists)."""


@dataclass(frozen=True, slots=True)
class ThreadQuery:
    """Filters and paging of :meth:`STMSaver.list_threads`, validated."""

    updated_after: str | None = None
    updated_before: str | None = None
    limit: int | None = None
    offset: int = 0

    @classmethod
    def make(
        cls,
        updated_after: datetime | str | None,
        updated_before: datetime | str | None,
        limit: int | None,
        offset: int,
    ) -> ThreadQuery:
        """Validate the arguments of ``list_threads``.

        Example:
            >>> ThreadQuery.make(None, None, 10, 0).limit
            10
            >>> ThreadQuery.make(None, None, -1, 0)  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            langgraph_stm._errors.InvalidArgumentError: list_threads: limit must be ...
        """
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise InvalidArgumentError(f"list_threads: limit must be None or >= 0, got {limit!r}")
        if not isinstance(offset, int) or offset < 0:
            raise InvalidArgumentError(f"list_threads: offset must be >= 0, got {offset!r}")
        return cls(
            _ts("updated_after", updated_after),
            _ts("updated_before", updated_before),
            limit,
            offset,
        )


def _ts(name: str, value: datetime | str | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidArgumentError(
                f"list_threads: {name} must be a datetime or an ISO 8601 string, got {value!r}"
            ) from None
    if not isinstance(value, datetime):
        raise InvalidArgumentError(f"list_threads: {name} must be a datetime, got {value!r}")
    return format_ts(value)


def format_ts(value: datetime) -> str:
    """Format a datetime as fixed-width UTC ISO 8601, so strings sort like instants.

    Example:
        >>> format_ts(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
        '2026-01-02T03:04:05.000000+00:00'
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def _checkpoint_ts(ts: object) -> str:
    if isinstance(ts, str):
        try:
            return format_ts(datetime.fromisoformat(ts))
        except ValueError:
            pass
    return format_ts(datetime.now(UTC))


def sanitize(value: Any) -> Any:
    """Turn ``value`` into JSON data every backend stores (see the module doc).

    Values that are not JSON data (a user's own type in a field of the same name)
    become ``None``.

    Example:
        >>> sanitize({"a\\x00": [float("nan"), "x\\ud83d"]})
        {'a\\ufffd': [None, 'x\\ufffd']}
    """
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return column_text(value)
    if isinstance(value, Mapping):
        return {column_text(str(k)): sanitize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [sanitize(v) for v in value]
    return None


def project(thread_id: str, checkpoint_id: str, ts: object, values: Mapping[str, Any]) -> ThreadRow:
    """Compute the projection row of a root checkpoint's (decoded) ``channel_values``.

    Example:
        >>> row = project("t1", "c1", "2026-01-01T00:00:00+00:00", {"goal": "ship", "messages": []})
        >>> state = to_state(row)
        >>> state.goal, state.message_count, state.updated_at.year
        ('ship', 0, 2026)
    """
    state = {name: sanitize(values.get(name)) for name in _FIELDS}
    messages = values.get("messages")
    return ThreadRow(
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        updated_at=_checkpoint_ts(ts),
        message_count=len(messages) if isinstance(messages, list) else None,
        state=json.dumps(state, ensure_ascii=False, separators=(",", ":"), allow_nan=False),
    )


def to_state(row: ThreadRow) -> ThreadState:
    """Decode a stored row; :class:`FormatError` when it is not a valid projection."""
    try:
        data = json.loads(row.state)
        updated = datetime.fromisoformat(row.updated_at)
    except (TypeError, ValueError) as exc:
        raise FormatError(f"unreadable projection of thread {row.thread_id!r}") from exc
    if not isinstance(data, dict):
        raise FormatError(f"projection of thread {row.thread_id!r} is not an object")
    lists = {k: data.get(k) or [] for k in ("plan", "constraints", "artifacts")}
    if (
        any(not isinstance(v, list) for v in lists.values())
        or not all(isinstance(data.get(k), dict | None) for k in ("last_error", "summary"))
        or not isinstance(data.get("goal"), str | None)
    ):
        raise FormatError(f"projection of thread {row.thread_id!r} has malformed fields")
    return ThreadState(
        thread_id=row.thread_id,
        checkpoint_id=row.checkpoint_id,
        updated_at=updated,
        goal=data.get("goal"),
        plan=lists["plan"],
        constraints=lists["constraints"],
        artifacts=lists["artifacts"],
        last_error=data.get("last_error"),
        summary=data.get("summary"),
        message_count=row.message_count,
    )


def fresh_state(row: ThreadRow | None, latest: str | None) -> ThreadState | None:
    """The state of ``row`` if it is the projection of checkpoint ``latest``, else ``None``."""
    if row is None or latest is None or row.checkpoint_id != latest:
        return None
    try:
        return to_state(row)
    except FormatError:
        return None


def select_page(states: Iterable[ThreadState], query: ThreadQuery) -> list[ThreadState]:
    """Filter, order (newest first) and page thread states."""
    after, before = query.updated_after, query.updated_before
    selected = [
        s
        for s in states
        if (after is None or (s.updated_at is not None and format_ts(s.updated_at) > after))
        and (before is None or (s.updated_at is not None and format_ts(s.updated_at) < before))
    ]
    selected.sort(
        key=lambda s: (format_ts(s.updated_at) if s.updated_at else "", s.thread_id), reverse=True
    )
    end = None if query.limit is None else query.offset + query.limit
    return selected[query.offset : end]
