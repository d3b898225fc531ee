"""The thread document of ``export_thread`` / ``import_thread``: built, checked and
decoded by pure functions (:func:`build_document`, :func:`encode_values`,
:func:`validate_document`, :func:`decode_values`, :func:`import_checkpoint`), so the
format is tested without a database; the saver's methods are in :mod:`._export`.

The document (``schema`` ``"langgraph-stm.thread"``, ``version`` 1) is JSON data only
(objects, arrays, strings, finite numbers, booleans, null): ``json.dumps`` writes it and
``json.loads`` reads it back equal. Its keys:

- ``schema``, ``version``: what this is; :func:`validate_document` refuses any other
  schema and any version but 1.
- ``thread_id``: the exported thread; ``exported_at``: when (ISO 8601, UTC).
- ``checkpoint``: the latest root checkpoint (``checkpoint_ns == ""``) the values come
  from: ``id``, ``ts`` and ``metadata`` (its JSON-safe top-level entries only).
- ``checkpoints``: every checkpoint of the thread, every namespace (subgraphs too),
  root namespace first, oldest first: ``id``, ``ts``, ``parent_id``, ``ns``. Ids and
  timestamps only, no values.
- ``values``: the channel values of that latest root checkpoint, ``{channel: value}``.
  A list of LangChain messages is written with ``langchain_core.messages.messages_to_dict``
  (one ``{"type", "data"}`` item per message) and its channel is named in
  ``message_channels``; every other value is written as it is (goal, plan, constraints,
  artifacts, last_error, summary with its coverage, keys of your own), when it is JSON
  data that reads back equal.
- ``message_channels``: the channels of ``values`` that hold messages. Every other
  channel is read back as plain JSON, so a channel of your own whose list holds
  ``{"type": str, "data": {...}}`` items (what a message is written as) is skipped on
  export and refused on import, rather than stored as dicts where messages belong.
- ``skipped``: what is not in ``values``, or not as it was, one entry each:

  - a whole channel, ``{"channel", "type", "reason"}``: a value that is not JSON data (a
    ``datetime``, a ``set``, a tuple, a pydantic model, a ``NaN``), messages that do not
    read back as the same class and fields (a message class of your own), or a channel
    the checkpoint holds no value for (a ``DeltaChannel`` stores only its writes);
  - a part of one message, ``{"channel", "index", "message_id", "field", "type",
    "reason"}``: a message is kept, but a value in it that JSON cannot hold (a tuple
    ``artifact``, a ``datetime`` in ``additional_kwargs``) is left out, at the deepest
    place it occurs. ``field`` is its path in the message's ``model_dump()``
    (``"artifact"``, ``"additional_kwargs['when']"``, ``"content[1]['data']"``: indexes
    and keys of the original message), ``index`` the message's position in the channel,
    ``type`` the type of what was left out. A top-level field left out reads back as its
    default (``artifact=None``), which ``reason`` names; an entry or array item left out
    is just absent. Everything else of that message reads back the same (checked on
    export; if not, the whole channel is skipped instead).
- ``ttl``: the thread's time to live in seconds, ``expires_at`` when it expires (ISO
  8601), both ``null`` when the saver has no TTL for the thread.

Not exported, by design:

- **Pending work.** A thread paused at ``interrupt()`` exports the values of its latest
  checkpoint (as ``graph.get_state(config).values`` shows them), not its pending
  interrupts, tasks, or the writes of the paused step, nor LangGraph's own trigger
  channels (``__start__``, ``branch:to:<node>``). The imported thread is at rest:
  ``get_state(...).next`` and ``.interrupts`` are empty, the next ``invoke`` starts from
  ``START``. Resume the source thread before exporting if its pending step matters.
- **History.** Earlier checkpoints are listed (ids and timestamps) but their values are
  not exported: the import writes one checkpoint, no time travel to before it.
- **Subgraph state.** Only the root namespace's values; a subgraph's checkpoints are
  listed in ``checkpoints`` only.
- **The TTL of the target.** ``ttl`` and ``expires_at`` record the source; the imported
  thread gets the TTL rules of the saver it is imported into.
- **The store.** Tool outputs offloaded to the graph's store stay there; the artifacts
  referencing them are exported as records.

Import validates the document (schema, version, shape; every item of a message channel
must read back as a LangChain message; the structured fields as ``check_state_values``
checks them when the saver validates writes), refuses a target thread that already has
checkpoints as the saver reads it (an expired thread not swept yet has none: the
import's write deletes it first, as every ``put`` of the saver does), and writes one
checkpoint built from LangGraph's ``empty_checkpoint()`` with versions from the saver's
``get_next_version``, whose metadata is ``{"source": "update", "step": -1, "parents":
{}, "stm_imported_from": {...}}``. A graph compiled with the importing saver over the
same state schema then reads the same ``graph.get_state(config).values`` (messages of
the same class and the same ``model_dump()``), and ``get_thread_state`` the same
projection. Two concurrent imports into the same empty thread are not serialized: import
into a thread no one else writes.

"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, NotRequired, TypedDict, cast

from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    empty_checkpoint,
)

from langgraph_stm._errors import InvalidArgumentError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "SCHEMA",
    "VERSION",
    "CheckpointEntry",
    "LatestCheckpoint",
    "SkippedChannel",
    "ThreadDocument",
    "build_document",
    "decode_values",
    "document_error",
    "encode_values",
    "expiry_of",
    "import_checkpoint",
    "import_metadata",
    "is_json_data",
    "stored_ttl",
    "validate_document",
]

SCHEMA: Final = "langgraph-stm.thread"
"""The ``schema`` of every thread document."""
VERSION: Final = 1
"""The document version this module writes and reads."""


class LatestCheckpoint(TypedDict):
    """The checkpoint a document's values come from."""

    id: str
    ts: str
    metadata: dict[str, Any]
    """Its metadata's JSON-safe top-level entries."""


class CheckpointEntry(TypedDict):
    """One checkpoint of the exported thread, any namespace."""

    id: str
    ts: str | None
    parent_id: str | None
    ns: str


class SkippedChannel(TypedDict):
    """A channel whose value is not in the document, or a part of one message that is
    not (``index``, ``message_id`` and ``field`` then say which), and why."""

    channel: str
    index: NotRequired[int]
    """The message's position in the channel (a message's part only)."""
    message_id: NotRequired[str | None]
    """The message's id (a message's part only)."""
    field: NotRequired[str]
    """The path of what was left out in the message's ``model_dump()``."""
    type: str
    reason: str


class ThreadDocument(TypedDict):
    """A thread as JSON data (see the module doc for every key)."""

    schema: str
    version: int
    thread_id: str
    exported_at: str
    checkpoint: LatestCheckpoint
    checkpoints: list[CheckpointEntry]
    values: dict[str, Any]
    message_channels: list[str]
    skipped: list[SkippedChannel]
    ttl: float | None
    expires_at: str | None


# -- JSON data ---------------------------------------------------------------------------
class _NotJSON(Exception):
    def __init__(self, culprit: object) -> None:
        self.culprit = culprit


def _json_copy(value: Any) -> Any:
    """A plain copy of ``value`` if it is JSON data that reads back equal, else _NotJSON."""
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotJSON(value)
        return float(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _NotJSON(key)
            out[str.__str__(key)] = _json_copy(item)
        return out
    if isinstance(value, list):
        return [_json_copy(item) for item in value]
    raise _NotJSON(value)


def _checked_copy(value: Any) -> tuple[Any, object]:
    """``(copy, None)`` for JSON data, ``(None, culprit)`` otherwise."""
    try:
        return _json_copy(value), None
    except _NotJSON as exc:
        return None, exc.culprit
    except RecursionError:
        return None, value


def is_json_data(value: Any) -> bool:
    """Whether ``json.loads(json.dumps(value)) == value`` holds for ``value``, exactly:
    only dicts with string keys, lists, strings, finite numbers, booleans and ``None``.

    Example:
        >>> is_json_data({"plan": [{"id": "s1", "status": "done"}], "n": 1.5})
        True
        >>> is_json_data((1, 2)), is_json_data({1: "a"}), is_json_data(float("nan"))
        (False, False, False)
    """
    return _checked_copy(value)[1] is None


def _type_name(value: object) -> str:
    cls = type(value)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def _is_trigger(channel: str) -> bool:
    """LangGraph's own channels (``__start__``, ``branch:to:<node>``, ...): pending work."""
    return channel.startswith(("__", "branch:"))


def _is_message_list(value: object) -> bool:
    return (
        isinstance(value, list) and bool(value) and all(isinstance(m, BaseMessage) for m in value)
    )


def _is_message_item(value: object) -> bool:
    """Whether ``value`` has the shape of a ``messages_to_dict`` item."""
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("type"), str)
        and isinstance(value.get("data"), Mapping)
    )


def _holds_message_items(value: object) -> bool:
    return isinstance(value, list) and any(_is_message_item(item) for item in value)


def _decode_message(item: Mapping[str, Any]) -> BaseMessage:
    """One ``messages_to_dict`` item as a message; any failure of LangChain's constructors
    (``ValueError``, ``TypeError``, ``AttributeError``, ...) raises, as it is."""
    message = messages_from_dict([dict(item)])[0]
    if not isinstance(message, BaseMessage):  # pragma: no cover - LangChain's contract
        raise TypeError(f"messages_from_dict gave a {_type_name(message)}")
    return message


def _read_back(
    item: Mapping[str, Any], cls: type[BaseMessage], dropped: Iterable[str] = ()
) -> dict[str, Any] | None:
    """The ``model_dump()`` of ``item`` read back, if it is a ``cls`` (exactly) the same as
    ``item["data"]`` but for the top-level fields ``dropped`` (absent from the data);
    else ``None``."""
    try:
        message = _decode_message(item)
    except Exception:
        return None
    if type(message) is not cls:
        return None
    dump = message.model_dump()
    left_out = set(dropped)
    if {k: v for k, v in dump.items() if k not in left_out} != item["data"]:
        return None
    return dump


# (path in the message's model_dump, the value or key left out, where it was)
_Change = tuple[str, object, str]


def _clean(value: Any, path: str, changes: list[_Change]) -> Any:
    """A JSON copy of the dict or list ``value`` without what JSON cannot hold: each
    value inside that is not JSON data (or a key that is not a string) is left out at
    the deepest place it occurs and recorded in ``changes``. Raises ``_NotJSON`` when
    ``value`` itself is not JSON data (a tuple, a ``datetime``)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            where = f"{path}[{key!r}]"
            if not isinstance(key, str):
                changes.append((where, key, "key"))
                continue
            try:
                out[str.__str__(key)] = _clean(item, where, changes)
            except _NotJSON:
                changes.append((where, item, "entry"))
        return out
    if isinstance(value, list):
        items: list[Any] = []
        for i, item in enumerate(value):
            try:
                items.append(_clean(item, f"{path}[{i}]", changes))
            except _NotJSON:
                changes.append((f"{path}[{i}]", item, "item"))
        return items
    return _json_copy(value)


def _clean_data(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[_Change]]:
    """A message's ``model_dump()`` without what JSON cannot hold (see :func:`_clean`);
    a top-level field that is not JSON data (or nested too deep) is left out whole."""
    out: dict[str, Any] = {}
    changes: list[_Change] = []
    for field, value in data.items():
        mark = len(changes)
        try:
            out[str(field)] = _clean(value, str(field), changes)
        except _NotJSON:
            changes.append((str(field), value, "field"))
        except RecursionError:
            del changes[mark:]
            changes.append((str(field), value, "deep"))
    return out, changes


_NOT_SAME = "holds messages that do not read back the same from messages_to_dict"


def _change_reason(value: object, kind: str, dump: Mapping[str, Any], path: str) -> str:
    what = f"a {_type_name(value)} is not JSON data"
    if kind == "key":
        return f"a key of type {_type_name(value)} is not a string: the entry is left out"
    if kind == "entry":
        return f"{what}: the entry is left out"
    if kind == "item":
        return f"{what}: the item is left out of the array"
    if kind == "deep":
        what = f"a {_type_name(value)} nested too deep is not JSON data"
    return f"{what}: the field is left out and reads back as {dump.get(path)!r}"


def _encode_messages(
    channel: str, messages: list[BaseMessage]
) -> tuple[list[dict[str, Any]], list[SkippedChannel]] | str:
    """``(items, notes)`` for a channel of messages, each message written with
    ``messages_to_dict`` and what JSON cannot hold left out of it (one note each); or
    the reason the whole channel is skipped."""
    items: list[dict[str, Any]] = []
    notes: list[SkippedChannel] = []
    for index, message in enumerate(messages):
        try:
            raw = messages_to_dict([message])[0]
        except Exception as exc:
            return f"holds a message messages_to_dict cannot write ({_type_name(exc)})"
        item, culprit = _checked_copy(raw)
        if culprit is None:
            if _read_back(item, type(message)) is None:
                return _NOT_SAME
            items.append(item)
            continue
        data, changes = _clean_data(raw["data"])
        item = {"type": str(raw["type"]), "data": data}
        dropped = [path for path, _, kind in changes if kind in ("field", "deep")]
        dump = _read_back(item, type(message), dropped)
        if dump is None:
            return (
                "holds messages that messages_to_dict does not write as JSON data "
                f"(a {_type_name(culprit)}) and that do not read back without it"
            )
        items.append(item)
        message_id = None if message.id is None else str(message.id)
        for path, value, kind in changes:
            notes.append(
                {
                    "channel": channel,
                    "index": index,
                    "message_id": message_id,
                    "field": path,
                    "type": _type_name(value),
                    "reason": _change_reason(value, kind, dump, path),
                }
            )
    return items, notes


# -- export ------------------------------------------------------------------------------
_DELTA_REASON = (
    "a DeltaChannel: its value is rebuilt from the thread's writes by the graph's "
    "reducer, which export does not have"
)
_LOOKS_LIKE_MESSAGES = (
    "holds items shaped like messages_to_dict's ({'type': str, 'data': {...}}) but no "
    "messages: import would take them for messages"
)
_NO_VALUE_REASON = (
    "the checkpoint holds no value for it (a DeltaChannel, rebuilt from the thread's "
    "writes by the graph's reducer, or an ephemeral channel)"
)


def encode_values(
    channel_values: Mapping[str, Any], channel_versions: Iterable[str] = ()
) -> tuple[dict[str, Any], list[str], list[SkippedChannel]]:
    """Split a checkpoint's channel values into ``(values, message_channels, skipped)``.

    ``channel_versions`` (the checkpoint's versioned channel names) lets a channel that
    has a version but no stored value (a ``DeltaChannel``) be reported as skipped.

    Example:
        >>> from datetime import date
        >>> from langchain_core.messages import HumanMessage
        >>> values, message_channels, skipped = encode_values({
        ...     "messages": [HumanMessage("hi", id="h1")], "goal": "ship",
        ...     "due": date(2026, 1, 1), "branch:to:agent": None})
        >>> sorted(values), message_channels, values["messages"][0]["type"]
        (['goal', 'messages'], ['messages'], 'human')
        >>> skipped
        [{'channel': 'due', 'type': 'datetime.date', 'reason': 'holds a datetime.date, which is not JSON data'}]
    """  # noqa: E501
    values: dict[str, Any] = {}
    message_channels: list[str] = []
    skipped: list[SkippedChannel] = []
    for channel in sorted(channel_values):
        if _is_trigger(channel):
            continue
        value = channel_values[channel]
        if _is_message_list(value):
            encoded = _encode_messages(channel, value)
            if isinstance(encoded, str):
                skipped.append({"channel": channel, "type": "list", "reason": encoded})
            else:
                values[channel], notes = encoded
                message_channels.append(channel)
                skipped.extend(notes)
            continue
        copied, culprit = _checked_copy(value)
        if culprit is None and _holds_message_items(copied):
            skipped.append({"channel": channel, "type": "list", "reason": _LOOKS_LIKE_MESSAGES})
            continue
        if culprit is None:
            values[channel] = copied
            continue
        reason = f"holds a {_type_name(culprit)}, which is not JSON data"
        if type(value).__name__ == "_DeltaSnapshot":
            reason = _DELTA_REASON
        skipped.append({"channel": channel, "type": _type_name(value), "reason": reason})
    for channel in sorted(set(channel_versions) - set(channel_values)):
        if not _is_trigger(channel):
            skipped.append(
                {
                    "channel": channel,
                    "type": "none",
                    "reason": _NO_VALUE_REASON,
                }
            )
    return values, message_channels, skipped


def _entry(tup: CheckpointTuple) -> CheckpointEntry:
    conf = tup.config["configurable"]
    parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    ts = tup.checkpoint.get("ts")
    return {
        "id": str(tup.checkpoint["id"]),
        "ts": ts if isinstance(ts, str) else None,
        "parent_id": None if parent is None else str(parent),
        "ns": str(conf.get("checkpoint_ns", "")),
    }


def _json_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        copied, culprit = _checked_copy(value)
        if isinstance(key, str) and culprit is None:
            out[key] = copied
    return out


def _iso(value: datetime) -> str:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat()


def build_document(
    thread_id: str,
    latest: CheckpointTuple,
    checkpoints: Iterable[CheckpointTuple],
    *,
    exported_at: datetime,
    ttl: float | None = None,
    expires_at: datetime | None = None,
) -> ThreadDocument:
    """Build the document of a thread from its latest root checkpoint (decoded values)
    and all its checkpoints (any namespace; only ids and timestamps are read).

    Example:
        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> cp = empty_checkpoint()
        >>> cp["channel_values"] = {"goal": "ship"}
        >>> tup = CheckpointTuple({"configurable": {"thread_id": "t1", "checkpoint_ns": "",
        ...     "checkpoint_id": cp["id"]}}, cp, {"source": "loop", "step": 1, "parents": {}})
        >>> doc = build_document("t1", tup, [tup], exported_at=datetime(2026, 1, 1, tzinfo=UTC))
        >>> doc["schema"], doc["version"], doc["values"], doc["checkpoint"]["metadata"]["step"]
        ('langgraph-stm.thread', 1, {'goal': 'ship'}, 1)
        >>> doc["exported_at"], doc["ttl"], doc["expires_at"], len(doc["checkpoints"])
        ('2026-01-01T00:00:00+00:00', None, None, 1)
    """
    checkpoint = latest.checkpoint
    values, message_channels, skipped = encode_values(
        checkpoint["channel_values"], checkpoint.get("channel_versions", {})
    )
    entries = sorted((_entry(t) for t in checkpoints), key=lambda e: (e["ns"], e["id"]))
    ts = checkpoint.get("ts")
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "thread_id": str(thread_id),
        "exported_at": _iso(exported_at),
        "checkpoint": {
            "id": str(checkpoint["id"]),
            "ts": ts if isinstance(ts, str) else "",
            "metadata": _json_metadata(latest.metadata or {}),
        },
        "checkpoints": entries,
        "values": values,
        "message_channels": message_channels,
        "skipped": skipped,
        "ttl": None if ttl is None else float(ttl),
        "expires_at": None if expires_at is None else _iso(expires_at),
    }


def stored_ttl(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise TypeError(
        f"the thread's ttl is a {type(value).__name__}; expected a timedelta, seconds or None"
    )


def expiry_of(state: object, ttl: float | None, ts: object) -> datetime | None:
    found = getattr(state, "expires_at", None)
    if isinstance(found, datetime):
        return found
    if isinstance(found, str):
        try:
            return datetime.fromisoformat(found)
        except ValueError:
            pass
    if ttl is None or not isinstance(ts, str):
        return None
    try:
        last = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return last + timedelta(seconds=ttl)


# -- import ------------------------------------------------------------------------------
_KEYS: Final = (
    "schema",
    "version",
    "thread_id",
    "exported_at",
    "checkpoint",
    "checkpoints",
    "values",
    "message_channels",
    "skipped",
    "ttl",
    "expires_at",
)


def document_error(where: str, problem: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"import_thread: invalid thread document: {where} {problem}")


def _text(doc: Mapping[str, Any], key: str, where: str, *, nullable: bool = False) -> str | None:
    value = doc.get(key)
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise document_error(f"{where}[{key!r}]", f"must be a string, got {_type_name(value)}")
    return value


def _iso_text(doc: Mapping[str, Any], key: str, *, nullable: bool = False) -> str | None:
    value = _text(doc, key, "document", nullable=nullable)
    if value is not None:
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise document_error(
                f"document[{key!r}]", f"is not an ISO 8601 time: {value!r}"
            ) from None
    return value


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise document_error(where, f"must be an object, got {_type_name(value)}")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise document_error(where, f"must be an array, got {_type_name(value)}")
    return value


def _json(value: object, where: str) -> Any:
    copied, culprit = _checked_copy(value)
    if culprit is not None:
        raise document_error(where, f"holds a {_type_name(culprit)}, which is not JSON data")
    return copied


def _skipped_entry(item: Mapping[str, Any], where: str) -> SkippedChannel:
    """A copy of one ``skipped`` entry, a channel's or a message part's."""
    entry: dict[str, Any] = {"channel": _text(item, "channel", where)}
    if "index" in item:
        index = item["index"]
        if type(index) is not int or index < 0:
            raise document_error(f"{where}['index']", f"must be an integer >= 0, got {index!r}")
        entry["index"] = index
    if "message_id" in item:
        entry["message_id"] = _text(item, "message_id", where, nullable=True)
    if "field" in item:
        entry["field"] = _text(item, "field", where)
    entry["type"] = _text(item, "type", where)
    entry["reason"] = _text(item, "reason", where, nullable=True) or ""
    return cast(SkippedChannel, entry)


def validate_document(document: object) -> ThreadDocument:
    """Check a thread document's schema, version and shape; return a plain copy of it.

    Raises :class:`~langgraph_stm.errors.InvalidArgumentError` naming what is wrong.
    Keys the version does not define are ignored.

    Example:
        >>> validate_document({"schema": "langgraph-stm.thread", "version": 2})
        Traceback (most recent call last):
        ...
        langgraph_stm._errors.InvalidArgumentError: import_thread: invalid thread document: version 2 is not supported (this langgraph-stm reads version 1)
    """  # noqa: E501
    doc = _mapping(document, "the document")
    if doc.get("schema") != SCHEMA:
        raise document_error("document['schema']", f"must be {SCHEMA!r}, got {doc.get('schema')!r}")
    version = doc.get("version")
    if type(version) is not int:
        raise document_error(
            "document['version']", f"must be an integer, got {_type_name(version)}"
        )
    if version != VERSION:
        raise document_error(
            f"version {version}", f"is not supported (this langgraph-stm reads version {VERSION})"
        )
    missing = [k for k in _KEYS if k not in doc]
    if missing:
        raise document_error("the document", f"lacks {', '.join(map(repr, missing))}")
    thread_id = _text(doc, "thread_id", "document")
    if not thread_id:
        raise document_error("document['thread_id']", "must not be empty")
    exported_at = _iso_text(doc, "exported_at")

    cp = _mapping(doc["checkpoint"], "document['checkpoint']")
    latest: LatestCheckpoint = {
        "id": cast(str, _text(cp, "id", "document['checkpoint']")),
        "ts": cast(str, _text(cp, "ts", "document['checkpoint']")),
        "metadata": dict(
            _json(
                _mapping(cp.get("metadata"), "document['checkpoint']['metadata']"),
                "document['checkpoint']['metadata']",
            )
        ),
    }
    entries: list[CheckpointEntry] = []
    for i, raw in enumerate(_list(doc["checkpoints"], "document['checkpoints']")):
        where = f"document['checkpoints'][{i}]"
        item = _mapping(raw, where)
        entries.append(
            {
                "id": cast(str, _text(item, "id", where)),
                "ts": _text(item, "ts", where, nullable=True),
                "parent_id": _text(item, "parent_id", where, nullable=True),
                "ns": cast(str, _text(item, "ns", where)),
            }
        )

    values: dict[str, Any] = {}
    for channel, value in _mapping(doc["values"], "document['values']").items():
        if not isinstance(channel, str) or not channel or _is_trigger(channel):
            raise document_error(
                "document['values']", f"has a channel LangGraph owns or no name: {channel!r}"
            )
        values[channel] = _json(value, f"document['values'][{channel!r}]")

    message_channels: list[str] = []
    for i, channel in enumerate(_list(doc["message_channels"], "document['message_channels']")):
        if not isinstance(channel, str) or channel not in values:
            raise document_error(
                f"document['message_channels'][{i}]", f"names no channel of values: {channel!r}"
            )
        if channel in message_channels:
            raise document_error(f"document['message_channels'][{i}]", f"repeats {channel!r}")
        for j, message in enumerate(_list(values[channel], f"document['values'][{channel!r}]")):
            where = f"document['values'][{channel!r}][{j}]"
            if not _is_message_item(_mapping(message, where)):
                raise document_error(
                    where, "must be a messages_to_dict item: {'type': str, 'data': {...}}"
                )
        message_channels.append(channel)
    for channel, value in values.items():
        if channel not in message_channels and _holds_message_items(value):
            raise document_error(
                f"document['values'][{channel!r}]",
                "holds messages_to_dict items ({'type': str, 'data': {...}}) but is not in "
                "document['message_channels']: list it there to import them as messages",
            )

    skipped = [
        _skipped_entry(_mapping(raw, f"document['skipped'][{i}]"), f"document['skipped'][{i}]")
        for i, raw in enumerate(_list(doc["skipped"], "document['skipped']"))
    ]

    ttl = doc["ttl"]
    if ttl is not None and (
        isinstance(ttl, bool)
        or not isinstance(ttl, int | float)
        or not math.isfinite(ttl)
        or ttl < 0
    ):
        raise document_error("document['ttl']", f"must be null or seconds >= 0, got {ttl!r}")
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "thread_id": thread_id,
        "exported_at": cast(str, exported_at),
        "checkpoint": latest,
        "checkpoints": entries,
        "values": values,
        "message_channels": message_channels,
        "skipped": skipped,
        "ttl": None if ttl is None else float(ttl),
        "expires_at": _iso_text(doc, "expires_at", nullable=True),
    }


def decode_values(document: ThreadDocument) -> dict[str, Any]:
    """The channel values of a validated document, messages as LangChain messages.

    Example:
        >>> from langchain_core.messages import HumanMessage, messages_to_dict
        >>> doc = {"values": {"goal": "ship", "messages": messages_to_dict([HumanMessage("hi", id="h")])},
        ...        "message_channels": ["messages"]}
        >>> decode_values(doc)
        {'goal': 'ship', 'messages': [HumanMessage(content='hi', additional_kwargs={}, response_metadata={}, id='h')]}
    """  # noqa: E501
    values = dict(document["values"])
    for channel in document["message_channels"]:
        messages: list[BaseMessage] = []
        for i, item in enumerate(values[channel]):
            try:
                messages.append(_decode_message(item))
            except Exception as exc:  # LangChain's constructors raise many kinds
                raise document_error(
                    f"document['values'][{channel!r}][{i}]",
                    f"is not a message LangChain reads ({type(exc).__name__}: {exc})",
                ) from exc
        values[channel] = messages
    return values


def import_metadata(document: ThreadDocument) -> CheckpointMetadata:
    """The metadata of the one checkpoint an import writes.

    Example:
        >>> meta = import_metadata({"thread_id": "t1", "exported_at": "2026-01-01T00:00:00+00:00",
        ...     "checkpoint": {"id": "c9", "ts": "2026-01-01T00:00:00+00:00", "metadata": {}}})
        >>> meta["source"], meta["step"], meta["stm_imported_from"]["checkpoint_id"]
        ('update', -1, 'c9')
    """
    metadata: dict[str, Any] = {
        "source": "update",
        "step": -1,
        "parents": {},
        "stm_imported_from": {
            "thread_id": document["thread_id"],
            "checkpoint_id": document["checkpoint"]["id"],
            "checkpoint_ts": document["checkpoint"]["ts"],
            "exported_at": document["exported_at"],
            "schema": SCHEMA,
            "version": VERSION,
        },
    }
    return cast(CheckpointMetadata, metadata)


def import_checkpoint(
    values: Mapping[str, Any], next_version: Callable[[Any, None], Any]
) -> tuple[Checkpoint, ChannelVersions]:
    """A new checkpoint (``empty_checkpoint()``) holding ``values``, one new version per
    channel from ``next_version(None, None)``; returns it and its new versions.

    Example:
        >>> checkpoint, versions = import_checkpoint({"goal": "ship"}, lambda current, _: 1)
        >>> checkpoint["channel_values"], checkpoint["channel_versions"], versions
        ({'goal': 'ship'}, {'goal': 1}, {'goal': 1})
    """
    checkpoint = empty_checkpoint()
    versions: ChannelVersions = {channel: next_version(None, None) for channel in values}
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = dict(versions)
    return checkpoint, versions


# -- the mixin ---------------------------------------------------------------------------
