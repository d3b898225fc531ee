"""The structured thread state: :class:`STMState`, its record types and reducers.

Each structured field has its own reducer, so nodes send *updates*, not rebuilt
values:

- ``plan``, ``constraints`` and ``artifacts`` are lists of records merged **by id**:
  an update item with a known id changes only the keys it carries (a status update
  needs no resend of the list), an unknown id appends a new record, and
  ``remove_record(id)`` deletes one (``remove_record(REMOVE_ALL)`` empties the list).
- ``goal`` is replaced by the latest write.
- ``last_error`` is replaced by the latest write; writing ``None`` clears it.
- ``summary`` never goes backwards: a write whose ``version`` is not greater than the
  current one is ignored, which makes summarization idempotent when LangGraph re-runs
  a node on resume.

Records are plain ``TypedDict`` values so that they serialize through LangGraph's
checkpoint serde unchanged.

Example:
    >>> from langgraph_stm.state import merge_plan
    >>> plan = merge_plan([], [{"id": "s1", "task": "read the spec"}])
    >>> merge_plan(plan, {"id": "s1", "status": "done"})
    [{'id': 's1', 'task': 'read the spec', 'status': 'done'}]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import (
    Annotated,
    Any,
    Generic,
    Literal,
    NotRequired,
    Required,
    TypeVar,
    cast,
    get_args,
    get_type_hints,
)

from langchain_core.messages import AnyMessage
from langgraph.channels.base import BaseChannel
from langgraph.errors import EmptyChannelError
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from langgraph_stm._errors import StateUpdateError

__all__ = [
    "REDUCED_FIELDS",
    "REMOVE_ALL",
    "STM_FIELDS",
    "SUMMARY_CONTENT_FIELDS",
    "Artifact",
    "ArtifactUpdate",
    "Constraint",
    "ConstraintStatus",
    "ConstraintUpdate",
    "ErrorRecord",
    "PlanStatus",
    "PlanStep",
    "PlanStepUpdate",
    "STMState",
    "Summary",
    "SummaryCoverage",
    "check_state_values",
    "merge_artifacts",
    "merge_constraints",
    "merge_plan",
    "remove_record",
    "set_last_error",
    "update_summary",
]

PlanStatus = Literal["pending", "in_progress", "done", "blocked"]
ConstraintStatus = Literal["confirmed", "pending"]

REMOVE_ALL = "__remove_all__"
"""Pass to :func:`remove_record` to empty a whole list field."""

_REMOVE_KEY = "__remove__"


class PlanStep(TypedDict):
    """One step of the task plan."""

    id: str
    """Stable identifier; updates and removals address the step by it."""
    task: str
    """What the step does, in one line."""
    status: PlanStatus
    """``pending``, ``in_progress``, ``done`` or ``blocked``."""


class Constraint(TypedDict):
    """A rule the agent must respect for the rest of the task."""

    id: str
    """Stable identifier; updates and removals address the constraint by it."""
    text: str
    """The constraint, verbatim (it is never paraphrased by summaries)."""
    source_message_id: str | None
    """Id of the message the constraint came from, if any."""
    status: ConstraintStatus
    """``confirmed`` (binding) or ``pending`` (proposed, awaiting confirmation)."""


class Artifact(TypedDict):
    """A large output kept out of the context as a summary plus a reference."""

    id: str
    """Stable identifier."""
    kind: str
    """Free-form kind: ``file``, ``tool_output``, ``table``..."""
    summary: str
    """Short description that the context builder shows instead of the full output."""
    uri: str | None
    """Where the full content lives, if it is stored anywhere."""
    source_message_id: str | None
    """Id of the message (usually a ToolMessage) that produced it."""
    tokens: int
    """Size of the full content in tokens, for budgeting decisions."""


class ErrorRecord(TypedDict):
    """The last error the agent hit, with how it intends to recover."""

    message: str
    """What went wrong."""
    recovery: str | None
    """The recovery being attempted, if decided."""
    step_id: str | None
    """The plan step that failed, if any."""
    at: str | None
    """When it happened, ISO 8601."""


class PlanStepUpdate(TypedDict, total=False):
    """A partial ``plan`` update: the ``id`` plus the keys that change (``task`` too
    for a new step)."""

    id: Required[str]
    task: str
    status: PlanStatus


class ConstraintUpdate(TypedDict, total=False):
    """A partial ``constraints`` update: the ``id`` plus the keys that change (``text``
    too for a new constraint)."""

    id: Required[str]
    text: str
    source_message_id: str | None
    status: ConstraintStatus


class ArtifactUpdate(TypedDict, total=False):
    """A partial ``artifacts`` update: the ``id`` plus the keys that change (``kind``
    and ``summary`` too for a new artifact)."""

    id: Required[str]
    kind: str
    summary: str
    uri: str | None
    source_message_id: str | None
    tokens: int


class SummaryCoverage(TypedDict):
    """A bounded record of which messages a summary covers (not an ever-growing set)."""

    first_message_id: str
    """Id of the oldest message folded into the summary."""
    last_message_id: str
    """Id of the newest message folded into the summary."""
    message_count: int
    """How many messages the summary covers in total."""


class Summary(TypedDict):
    """The running summary of the messages moved out of ``messages``."""

    text: Required[str]
    """The summary text, bounded in tokens by the summarizer."""
    version: Required[int]
    """Starts at 1 and grows by one per summarization; never goes backwards."""
    coverage: NotRequired[SummaryCoverage | None]
    """Which messages the summary covers."""
    goal: NotRequired[str | None]
    """The goal as understood from the covered messages."""
    constraints: NotRequired[list[str]]
    """Confirmed constraints found in the covered messages, verbatim."""
    completed_steps: NotRequired[list[str]]
    """Work finished in the covered messages."""
    open_questions: NotRequired[list[str]]
    """Questions raised and not yet answered."""
    errors: NotRequired[list[str]]
    """Errors met in the covered messages, each with its recovery."""


_R = TypeVar("_R", PlanStep, Constraint, Artifact)

_PLAN_STATUSES: frozenset[str] = frozenset(get_args(PlanStatus))
_CONSTRAINT_STATUSES: frozenset[str] = frozenset(get_args(ConstraintStatus))


def remove_record(record_id: str) -> dict[str, Any]:
    """Return an update item that removes the record ``record_id`` from a list field.

    Works for ``plan``, ``constraints`` and ``artifacts``; pass :data:`REMOVE_ALL`
    to empty the field.

    Example:
        >>> from langgraph_stm.state import merge_constraints, remove_record
        >>> current = merge_constraints([], [{"id": "c1", "text": "no prod writes"}])
        >>> merge_constraints(current, remove_record("c1"))
        []
    """
    return {"id": record_id, _REMOVE_KEY: True}


def _items(field: str, update: object) -> list[Mapping[str, Any]]:
    if update is None:
        return []
    if isinstance(update, Mapping):
        return [update]
    if isinstance(update, list | tuple):
        for item in update:
            if not isinstance(item, Mapping):
                raise StateUpdateError(
                    field, f"expected a dict per record, got {type(item).__name__}"
                )
        return list(update)
    raise StateUpdateError(
        field, f"expected a record dict or a list of them, got {type(update).__name__}"
    )


def _record_id(field: str, item: Mapping[str, Any]) -> str:
    record_id = item.get("id")
    if not isinstance(record_id, str) or not record_id:
        raise StateUpdateError(field, f"every record needs a non-empty string 'id', got {item!r}")
    return record_id


def _merge_by_id(
    field: str,
    current: list[_R] | None,
    update: object,
    complete: Callable[[Mapping[str, Any]], dict[str, Any]],
    check: Callable[[str, Mapping[str, Any]], None],
) -> list[_R]:
    merged: dict[str, dict[str, Any]] = {rec["id"]: dict(rec) for rec in current or []}
    for item in _items(field, update):
        record_id = _record_id(field, item)
        if item.get(_REMOVE_KEY):
            if record_id == REMOVE_ALL:
                merged.clear()
            else:
                merged.pop(record_id, None)
            continue
        check(record_id, item)
        if record_id in merged:
            merged[record_id].update(item)
        else:
            merged[record_id] = complete(item)
    return cast(list[_R], list(merged.values()))


def _require(field: str, record_id: str, item: Mapping[str, Any], key: str) -> None:
    if not isinstance(item.get(key), str):
        raise StateUpdateError(field, f"a new record needs a string {key!r}", record_id=record_id)


def _check_choice(
    field: str, record_id: str, item: Mapping[str, Any], key: str, allowed: frozenset[str]
) -> None:
    if key in item and item[key] not in allowed:
        raise StateUpdateError(
            field,
            f"unknown {key} {item[key]!r}; expected one of {sorted(allowed)}",
            record_id=record_id,
        )


def _check_strings(
    field: str, record_id: str, item: Mapping[str, Any], keys: tuple[str, ...]
) -> None:
    for key in keys:
        if key in item and not isinstance(item[key], str):
            raise StateUpdateError(
                field, f"{key!r} must be a string, got {item[key]!r}", record_id=record_id
            )


def _check_plan_step(record_id: str, item: Mapping[str, Any]) -> None:
    _check_choice("plan", record_id, item, "status", _PLAN_STATUSES)
    _check_strings("plan", record_id, item, ("task",))


def _check_constraint(record_id: str, item: Mapping[str, Any]) -> None:
    _check_choice("constraints", record_id, item, "status", _CONSTRAINT_STATUSES)
    _check_strings("constraints", record_id, item, ("text",))


def _check_artifact(record_id: str, item: Mapping[str, Any]) -> None:
    _check_strings("artifacts", record_id, item, ("kind", "summary"))
    tokens = item.get("tokens", 0)
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        raise StateUpdateError(
            "artifacts", f"'tokens' must be a non-negative int, got {tokens!r}", record_id=record_id
        )


def merge_plan(current: list[PlanStep] | None, update: object) -> list[PlanStep]:
    """Reducer for ``plan``: merge steps by id; new steps need ``task``.

    A new step without ``status`` starts ``pending``.

    Example:
        >>> merge_plan(None, {"id": "s1", "task": "draft"})
        [{'id': 's1', 'task': 'draft', 'status': 'pending'}]
    """

    def complete(item: Mapping[str, Any]) -> dict[str, Any]:
        _require("plan", item["id"], item, "task")
        return {"id": item["id"], "task": item["task"], "status": "pending", **item}

    return _merge_by_id("plan", current, update, complete, _check_plan_step)


def merge_constraints(current: list[Constraint] | None, update: object) -> list[Constraint]:
    """Reducer for ``constraints``: merge by id; new constraints need ``text``.

    A new constraint without ``status`` is ``confirmed``.

    Example:
        >>> merge_constraints(None, {"id": "c1", "text": "never email external domains"})
        [{'id': 'c1', 'text': 'never email external domains', 'source_message_id': None, 'status': 'confirmed'}]
    """  # noqa: E501

    def complete(item: Mapping[str, Any]) -> dict[str, Any]:
        _require("constraints", item["id"], item, "text")
        base = {"id": item["id"], "text": item["text"], "source_message_id": None}
        return {**base, "status": "confirmed", **item}

    return _merge_by_id("constraints", current, update, complete, _check_constraint)


def merge_artifacts(current: list[Artifact] | None, update: object) -> list[Artifact]:
    """Reducer for ``artifacts``: merge by id; new artifacts need ``kind`` and ``summary``.

    Example:
        >>> art = merge_artifacts(None, {"id": "a1", "kind": "file", "summary": "CSV, 10k rows"})
        >>> art[0]["uri"], art[0]["tokens"]
        (None, 0)
    """

    def complete(item: Mapping[str, Any]) -> dict[str, Any]:
        _require("artifacts", item["id"], item, "kind")
        _require("artifacts", item["id"], item, "summary")
        base: dict[str, Any] = {"id": item["id"], "kind": item["kind"]}
        base |= {"summary": item["summary"], "uri": None, "source_message_id": None}
        return {**base, "tokens": 0, **item}

    return _merge_by_id("artifacts", current, update, complete, _check_artifact)


def set_last_error(current: ErrorRecord | None, update: object) -> ErrorRecord | None:
    """Reducer for ``last_error``: the latest write wins; ``None`` clears it.

    Example:
        >>> err = set_last_error(None, {"message": "HTTP 503 from billing API"})
        >>> err["recovery"] is None, set_last_error(err, None)
        (True, None)
    """
    if update is None:
        return None
    if not isinstance(update, Mapping) or not isinstance(update.get("message"), str):
        raise StateUpdateError(
            "last_error", f"expected None or a dict with a string 'message', got {update!r}"
        )
    record = {"message": update["message"], "recovery": None, "step_id": None, "at": None}
    return cast(ErrorRecord, record | dict(update))


def update_summary(current: Summary | None, update: object) -> Summary | None:
    """Reducer for ``summary``: keep the write with the highest version.

    A write whose version is not greater than the current one is a no-op, so a node
    that LangGraph re-runs on resume cannot move the summary backwards or apply it twice.
    ``None`` is a no-op too.

    Example:
        >>> s1 = update_summary(None, {"text": "user wants a refund", "version": 1})
        >>> update_summary(s1, {"text": "stale", "version": 1})["text"]
        'user wants a refund'
    """
    if update is None:
        return current
    if not isinstance(update, Mapping):
        raise StateUpdateError("summary", f"expected a Summary dict, got {type(update).__name__}")
    version = update.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise StateUpdateError("summary", f"'version' must be an int >= 1, got {version!r}")
    if not isinstance(update.get("text"), str):
        raise StateUpdateError("summary", "'text' must be a string")
    if current is not None and version <= current["version"]:
        return current
    return cast(Summary, dict(update))


_RECORD_CHECKS: dict[str, Callable[[str, Mapping[str, Any]], None]] = {
    "plan": _check_plan_step,
    "constraints": _check_constraint,
    "artifacts": _check_artifact,
}


def validate_update(field: str, update: object) -> None:
    """Raise :class:`StateUpdateError` if ``update`` can never be valid for ``field``.

    The checks need no current value (ids present, statuses known, types right), so a
    checkpointer can run them on a node's writes *before* persisting them: LangGraph
    keeps a failed step's writes as pending writes, and a write that makes the reducer
    raise would otherwise make the thread fail again on every read. Fields other than
    the structured ones are not checked.

    Example:
        >>> validate_update("plan", {"id": "s1", "status": "done"})
        >>> validate_update("plan", {"status": "done"})
        Traceback (most recent call last):
        ...
        langgraph_stm._errors.StateUpdateError: invalid update for plan: every record needs a non-empty string 'id', got {'status': 'done'}
    """  # noqa: E501
    check = _RECORD_CHECKS.get(field)
    if check is not None:
        for item in _items(field, update):
            record_id = _record_id(field, item)
            if not item.get(_REMOVE_KEY):
                check(record_id, item)
    elif field == "last_error":
        set_last_error(None, update)
    elif field == "summary":
        update_summary(None, update)


_V = TypeVar("_V")


class _ReducedValue(BaseChannel[_V, Any, _V], Generic[_V]):
    """A channel that passes *every* write through its reducer, the first one included.

    LangGraph's default reducer channel stores the first write to an empty channel
    as is when the field type (``ErrorRecord | None``) cannot be instantiated, which
    would skip validation and defaults. This channel starts from ``None`` instead.
    """

    __slots__ = ("_has_value", "reducer", "value")

    def __init__(self, reducer: Callable[[Any, Any], _V], typ: Any = object) -> None:
        super().__init__(typ)
        self.reducer = reducer
        self.value: _V | None = None
        self._has_value = False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ReducedValue) and other.reducer is self.reducer

    def __hash__(self) -> int:
        return hash(self.reducer)

    @property
    def ValueType(self) -> Any:
        return self.typ

    @property
    def UpdateType(self) -> Any:
        return self.typ

    def from_checkpoint(self, checkpoint: Any) -> _ReducedValue[_V]:
        channel = _ReducedValue(self.reducer, self.typ)
        channel.key = self.key
        # An empty channel is checkpointed as LangGraph's "missing" sentinel: anything
        # that is not a stored record (a dict) or a cleared value (None) means empty.
        if checkpoint is None or isinstance(checkpoint, Mapping):
            channel.value = cast(_V, checkpoint)
            channel._has_value = True
        return channel

    def get(self) -> _V:
        if not self._has_value:
            raise EmptyChannelError()
        return cast(_V, self.value)

    def is_available(self) -> bool:
        return self._has_value

    def update(self, values: Sequence[Any]) -> bool:
        if not values:
            return False
        value = self.value
        for update in values:
            value = self.reducer(value, update)
        self.value, self._has_value = value, True
        return True


class STMState(TypedDict, total=False):
    """Graph state with messages and the structured short-term memory of a thread.

    Use it as the state schema of a ``StateGraph``, or subclass it to add keys.

    Example:
        >>> from langgraph.graph import StateGraph, START
        >>> def plan_node(state: STMState) -> dict:
        ...     return {"goal": "ship v2", "plan": [{"id": "s1", "task": "migrate"}]}
        >>> graph = StateGraph(STMState).add_node(plan_node).add_edge(START, "plan_node")
        >>> graph.compile().invoke({"messages": []})["plan"][0]["status"]
        'pending'
    """

    messages: Required[Annotated[list[AnyMessage], add_messages]]
    """The conversation, with stable ids (``add_messages`` semantics)."""
    goal: str | None
    """What the task is for; replaced by the latest write."""
    plan: Annotated[list[PlanStep], merge_plan]
    """Steps of the task, merged by id."""
    constraints: Annotated[list[Constraint], merge_constraints]
    """Rules the agent must respect, merged by id, removable by id."""
    artifacts: Annotated[list[Artifact], merge_artifacts]
    """Large outputs kept as summary + reference, merged by id."""
    last_error: Annotated[ErrorRecord | None, _ReducedValue(set_last_error)]
    """The last error and its recovery; write ``None`` to clear."""
    summary: Annotated[Summary | None, _ReducedValue(update_summary)]
    """Running summary of the messages moved out of ``messages``; never goes backwards."""


STM_FIELDS: tuple[str, ...] = tuple(name for name in STMState.__annotations__ if name != "messages")
"""The structured fields of :class:`STMState`, in declaration order (``messages`` aside)."""
SUMMARY_CONTENT_FIELDS: tuple[str, ...] = tuple(
    name for name in Summary.__annotations__ if name not in ("version", "coverage")
)
"""What a summarizer writes into a :class:`Summary` (its text and structured lists)."""


def _field_reducers() -> dict[str, Callable[[Any, Any], Any]]:
    """The reducer of every structured field, read from :class:`STMState`'s annotations."""
    hints = get_type_hints(STMState, include_extras=True)
    reducers: dict[str, Callable[[Any, Any], Any]] = {}
    for name in STM_FIELDS:
        for meta in getattr(hints[name], "__metadata__", ()):
            reducer = meta.reducer if isinstance(meta, _ReducedValue) else meta
            if callable(reducer):
                reducers[name] = reducer
                break
    return reducers


_REDUCERS = _field_reducers()
REDUCED_FIELDS: frozenset[str] = frozenset(_REDUCERS)
"""The structured fields whose reducer checks every write (``goal`` is a plain value)."""


def check_state_values(state: Mapping[str, Any]) -> None:
    """Raise :class:`StateUpdateError` if a structured field of ``state`` is malformed.

    For states built by hand (a graph's state went through the reducers already): the
    list fields must be lists of complete records, ``goal`` a string or ``None``, and
    ``last_error`` / ``summary`` what their reducers accept.

    Example:
        >>> check_state_values({"plan": [{"id": "s1", "task": "ship", "status": "done"}]})
        >>> check_state_values({"plan": "do it"})
        Traceback (most recent call last):
        ...
        langgraph_stm._errors.StateUpdateError: invalid update for plan: the state holds a str, not a list of records
    """  # noqa: E501
    goal = state.get("goal")
    if goal is not None and not isinstance(goal, str):
        raise StateUpdateError("goal", f"expected a string or None, got {type(goal).__name__}")
    for field, reducer in _REDUCERS.items():
        value = state.get(field)
        if value is None:
            continue
        if field in _RECORD_CHECKS and not isinstance(value, list | tuple):
            raise StateUpdateError(
                field, f"the state holds a {type(value).__name__}, not a list of records"
            )
        reducer(None, value)
        for item in value if field in _RECORD_CHECKS else ():
            if item.get(_REMOVE_KEY):  # the reducer accepted it: a mapping with an id
                raise StateUpdateError(
                    field,
                    "the state holds a removal item (remove_record), not a record: "
                    "removals are updates, applied by the field's reducer",
                    record_id=item["id"],
                )
