"""Turning channel values into stored rows and back, with caches keyed by value.

:class:`Encoder` replaces the message lists of a checkpoint by references
(:mod:`._format`) and returns the rows to store (:class:`WriteSet`); :meth:`Encoder.decode`
does the reverse. Two caches make this cheap without making it stateful:

- :class:`MessageCache` maps a message's *value* to its digest and a pristine decoded
  copy. A message is found by its ``id`` field and confirmed by comparing every field
  (``type(m)`` and ``m.__dict__``) with the pristine copy, so a message edited in
  place, returned by a node or not, is serialized again: it no longer equals what was
  stored. Reads hand out copies of the pristine objects, never the objects themselves.
  Values that compare equal under Python's ``==`` but serialize differently (an ``int``
  field turned into an equal ``float`` in place) are the one edit this cannot see.
- :class:`Heads` remembers, per thread, namespace and channel, the list of the last
  checkpoint written or read here. A write whose parent is that checkpoint stores only
  the bodies its parent's list does not hold and a delta record; any other write is
  *cold* (a full snapshot, every body, duplicates ignored by the database). The write
  transaction checks that the parent's records still exist (:attr:`WriteSet.requires`)
  and falls back to :attr:`WriteSet.cold` when another worker deleted them.

Both caches are bounded and only ever hold facts that stay true (content-addressed
rows), so they need no invalidation protocol.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_stm.checkpoint._format import (
    BodyRow,
    FormatError,
    ListRow,
    Op,
    ValueRow,
    column_text,
    diff_ops,
    encode_ops,
    encode_refs,
    escape,
    is_message_list,
    list_digest,
    list_ref,
    merge_ops,
    message_digest,
    msgpack_array,
    pack_body,
    parse_ops,
    read_ref,
    snapshot_rows,
    value_digest,
    value_ref,
)

__all__ = ["Encoder", "Heads", "Loaded", "MessageCache", "WriteSet", "version_owner"]

_VALUE_REF_FROM = 512
"""Serialized size from which a non-message channel value is stored by reference."""


def _copy(value: Any) -> Any:
    """Copy the containers of a JSON-like value (the leaves are immutable or shared)."""
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    return value


def clone(message: BaseMessage) -> BaseMessage:
    """A copy of ``message`` that shares no mutable container with it."""
    copied = message.model_copy()
    fields = copied.__dict__
    for key, value in fields.items():
        if type(value) in (dict, list):
            fields[key] = _copy(value)
    extra = copied.__pydantic_extra__
    if extra:
        object.__setattr__(copied, "__pydantic_extra__", _copy(extra))
    return copied


def _column_id(message: BaseMessage) -> str | None:
    """The id a body row keeps for inspection (a NUL or a lone surrogate in an id must
    not fail a write that the inner saver stores)."""
    return None if message.id is None else column_text(message.id)


def _same(a: BaseMessage, b: BaseMessage) -> bool:
    return (
        type(a) is type(b)
        and a.__dict__ == b.__dict__
        and a.__pydantic_extra__ == b.__pydantic_extra__
    )


@dataclass(frozen=True, slots=True)
class _Stored:
    """A body read from storage and not decoded for the cache yet."""

    message_id: str | None
    type: str
    data: bytes


class MessageCache:
    """Digest -> pristine message, and message id -> digests; bounded by entries.

    A body read from storage is kept serialized (:class:`_Stored`) until a write needs
    to compare a message with it, so a read decodes each body once.
    """

    def __init__(self, max_entries: int = 20_000, loads: Any = None) -> None:
        self.max_entries = max_entries
        self.loads = loads
        """``serde.loads_typed``, to decode stored entries when needed."""
        self._lock = threading.Lock()
        self._by_digest: OrderedDict[bytes, BaseMessage | _Stored] = OrderedDict()
        self._by_id: dict[str, list[bytes]] = {}

    def _pristine(self, digest: bytes) -> BaseMessage | None:
        entry = self._by_digest.get(digest)
        if isinstance(entry, _Stored):
            entry = self.loads((entry.type, entry.data))
            if not isinstance(entry, BaseMessage):
                self._by_digest.pop(digest, None)
                return None
            self._by_digest[digest] = entry
        return entry

    def find(self, message: BaseMessage) -> bytes | None:
        """The digest of a stored message equal to ``message``, if one is cached."""
        return self.find_all([message])[0]

    def find_all(self, messages: Sequence[BaseMessage]) -> list[bytes | None]:
        """:meth:`find` for every message, under one acquisition of the lock."""
        by_id = self._by_id
        found: list[bytes | None] = []
        with self._lock:
            for message in messages:
                hit = None
                for digest in by_id.get(message.id, ()) if message.id is not None else ():
                    known = self._pristine(digest)
                    if known is not None and _same(known, message):
                        hit = digest
                        break
                found.append(hit)
        return found

    def get(self, digest: bytes) -> BaseMessage | None:
        """A fresh copy of the cached message ``digest``, or ``None``."""
        with self._lock:
            entry = self._by_digest.get(digest)
            if entry is None:
                return None
            self._by_digest.move_to_end(digest)
        if isinstance(entry, _Stored):
            message = self.loads((entry.type, entry.data))
            return message if isinstance(message, BaseMessage) else None
        return clone(entry)

    def pristine(self, digest: bytes) -> BaseMessage | None:
        """The cached message itself (never hand it out)."""
        with self._lock:
            return self._pristine(digest)

    def __contains__(self, digest: object) -> bool:
        return digest in self._by_digest

    def add(self, digest: bytes, message: BaseMessage) -> None:
        """Cache ``message`` (taken over: the caller must not keep or hand it out)."""
        self._add(digest, message, message.id)

    def add_stored(self, digest: bytes, message_id: str | None, type_: str, data: bytes) -> None:
        """Cache a body as read from storage (decoded when a write needs it)."""
        self._add(digest, _Stored(message_id, type_, data), message_id)

    def _add(self, digest: bytes, entry: BaseMessage | _Stored, message_id: str | None) -> None:
        with self._lock:
            if digest in self._by_digest:
                return
            self._by_digest[digest] = entry
            if message_id is not None:
                ids = self._by_id.setdefault(message_id, [])
                ids.append(digest)
                del ids[:-4]
            while len(self._by_digest) > self.max_entries:
                old, evicted = self._by_digest.popitem(last=False)
                evicted_id = evicted.message_id if isinstance(evicted, _Stored) else evicted.id
                if evicted_id is not None:
                    ids = self._by_id.get(evicted_id, [])
                    if old in ids:
                        ids.remove(old)
                    if not ids:
                        self._by_id.pop(evicted_id, None)


@dataclass(slots=True)
class Head:
    """The message list of one checkpoint, as written or read here."""

    checkpoint_id: str
    list_digest: bytes
    digests: list[bytes]
    snapshot: bytes
    snapshot_entries: list[bytes]
    ops: list[Op]
    """The list as operations on the snapshot."""
    chunks: frozenset[bytes] | None = None
    """Chunk digests of the snapshot (computed when a write needs them)."""
    digest_set: set[bytes] | None = None
    """``set(digests)``, computed when a write needs it."""
    snapshot_index: dict[bytes, int] | None = None

    def stored(self) -> set[bytes]:
        if self.digest_set is None:
            self.digest_set = set(self.digests)
        return self.digest_set

    def chunk_set(self) -> frozenset[bytes]:
        if self.chunks is None:
            _, chunks = snapshot_rows(self.snapshot, self.snapshot_entries)
            self.chunks = frozenset(c.digest for c in chunks)
        return self.chunks

    def index(self) -> dict[bytes, int]:
        if self.snapshot_index is None:
            self.snapshot_index = {d: i for i, d in enumerate(self.snapshot_entries)}
        return self.snapshot_index


class Heads:
    """(thread, namespace, channel) -> the :class:`Head` of the last checkpoint seen."""

    def __init__(self, max_entries: int = 1024) -> None:
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._heads: OrderedDict[tuple[str, str, str], Head] = OrderedDict()

    def get(self, key: tuple[str, str, str], parent: str | None) -> Head | None:
        """The head of ``key`` if it describes the checkpoint ``parent``."""
        with self._lock:
            head = self._heads.get(key)
            if head is None or parent is None or head.checkpoint_id != parent:
                return None
            self._heads.move_to_end(key)
            return head

    def set(self, key: tuple[str, str, str], head: Head) -> None:
        with self._lock:
            self._heads[key] = head
            self._heads.move_to_end(key)
            while len(self._heads) > self.max_entries:
                self._heads.popitem(last=False)

    def following(
        self, thread_id: str, ns: str, parent: str | None, skip: Iterable[str]
    ) -> list[tuple[tuple[str, str, str], Head]]:
        """Heads of ``parent``'s channels other than ``skip``, re-keyed for the next
        checkpoint: a channel that a write leaves unchanged keeps its list."""
        skipped = set(skip)
        with self._lock:
            return [
                (key, head)
                for key, head in self._heads.items()
                if key[0] == thread_id
                and key[1] == ns
                and key[2] not in skipped
                and head.checkpoint_id == parent
            ]

    def forget(self, thread_ids: Iterable[str]) -> None:
        wanted = set(thread_ids)
        with self._lock:
            for key in [k for k in self._heads if k[0] in wanted]:
                del self._heads[key]


@dataclass(slots=True)
class WriteSet:
    """Everything a checkpoint write stores in our tables, and what it relies on."""

    values: dict[str, Any]
    """``channel_values`` with message lists (and large values) replaced by references."""
    bodies: list[BodyRow] = field(default_factory=list)
    lists: list[ListRow] = field(default_factory=list)
    value_rows: list[ValueRow] = field(default_factory=list)
    refs: list[tuple[str, bytes]] = field(default_factory=list)
    """``(owner, encode_refs(...))``: what the checkpoint (owner: its id) or each channel
    version it stores (owner: :func:`version_owner`) references."""
    requires: list[bytes] = field(default_factory=list)
    """List records that must still exist for these rows to be complete."""
    cold: Callable[[], tuple[list[BodyRow], list[ListRow]]] | None = None
    """The rows to store instead of the relative ones when ``requires`` is not met."""
    heads: list[tuple[tuple[str, str, str], Head]] = field(default_factory=list)
    """Heads to remember once the write succeeded."""


def version_owner(channel: str, version: Any) -> str:
    """The refs owner of one stored channel version (savers that store versions)."""
    return f"{version}\x1f{channel}"


@dataclass(slots=True)
class Loaded:
    """What a read fetched from our tables for one checkpoint."""

    lists: dict[bytes, ListRow]
    bodies: dict[bytes, tuple[str, bytes]]
    values: dict[bytes, tuple[str, bytes]]


class Encoder:
    """Encodes checkpoints into :class:`WriteSet` and decodes them back."""

    def __init__(
        self,
        serde: SerializerProtocol,
        *,
        delta_limit: int = 24,
        full_values: bool = False,
        messages: MessageCache | None = None,
    ) -> None:
        self.serde = serde
        self.delta_limit = delta_limit
        self.full_values = full_values
        """The inner saver stores every channel value in every checkpoint (SQLite):
        large values are then stored once, by reference."""
        self.messages = messages if messages is not None else MessageCache()
        if self.messages.loads is None:
            self.messages.loads = serde.loads_typed
        self.heads = Heads()

    # -- encode --------------------------------------------------------------------------
    def encode(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        channel_values: Mapping[str, Any],
        channels: Iterable[str] | None,
        versions: Mapping[str, Any] | None = None,
    ) -> WriteSet:
        """Encode the channels named by ``channels`` (all when ``None``).

        ``versions`` (savers that store each channel version once) makes each channel
        version own its references; otherwise the checkpoint owns them all.
        """
        values = dict(channel_values)
        result = WriteSet(values=values)
        names = list(values) if channels is None else [c for c in channels if c in values]
        list_refs: list[bytes] = []
        value_refs: list[bytes] = []
        colds: list[Callable[[], tuple[list[BodyRow], list[ListRow]]]] = []
        for channel in names:
            value = values[channel]
            if is_message_list(value):
                key = (thread_id, ns, channel)
                digest, cold = self._encode_list(key, checkpoint_id, parent_id, value, result)
                values[channel] = list_ref(digest, len(value))
                list_refs.append(digest)
                if versions is not None:
                    owner = version_owner(channel, versions.get(channel))
                    result.refs.append((owner, encode_refs([digest], [])))
                colds.append(cold)
                continue
            values[channel] = escape(value)  # a value row holds the value itself
            if self.full_values and isinstance(value, (dict, list, str)):
                type_, data = self.serde.dumps_typed(value)
                if len(data) >= _VALUE_REF_FROM:
                    vdigest = value_digest(type_, data)
                    result.value_rows.append(ValueRow(vdigest, type_, data))
                    values[channel] = value_ref(vdigest)
                    value_refs.append(vdigest)
        if versions is None:
            result.refs.append((checkpoint_id, encode_refs(list_refs, value_refs)))
        else:
            for key, head in self.heads.following(thread_id, ns, parent_id, names):
                result.heads.append((key, replace(head, checkpoint_id=checkpoint_id)))
        if result.requires:

            def cold_rows() -> tuple[list[BodyRow], list[ListRow]]:
                bodies: list[BodyRow] = []
                lists: list[ListRow] = []
                for make in colds:
                    b, rows = make()
                    bodies += b
                    lists += rows
                return bodies, lists

            result.cold = cold_rows
        return result

    def _digest(
        self,
        message: BaseMessage,
        found: bytes | None,
        new: dict[bytes, BodyRow],
        live: dict[bytes, BaseMessage],
    ) -> bytes:
        if found is not None:
            live[found] = message
            return found
        type_, data = self.serde.dumps_typed(message)
        digest = message_digest(type_, data)
        if digest not in new:
            stored_type, stored = pack_body(type_, data)
            new[digest] = BodyRow(digest, _column_id(message), stored_type, stored)
            self.messages.add(digest, clone(message))
        return digest

    def _body(
        self, digest: bytes, new: Mapping[bytes, BodyRow], live: Mapping[bytes, BaseMessage]
    ) -> BodyRow:
        row = new.get(digest)
        if row is not None:
            return row
        message = live[digest]  # equal to the cached message of this digest
        type_, data = self.serde.dumps_typed(message)
        stored_type, stored = pack_body(type_, data)
        return BodyRow(digest, _column_id(message), stored_type, stored)

    def _encode_list(
        self,
        key: tuple[str, str, str],
        checkpoint_id: str,
        parent_id: str | None,
        messages: list[BaseMessage],
        result: WriteSet,
    ) -> tuple[bytes, Callable[[], tuple[list[BodyRow], list[ListRow]]]]:
        new: dict[bytes, BodyRow] = {}
        live: dict[bytes, BaseMessage] = {}
        cached = self.messages.find_all(messages)
        digests = [self._digest(m, f, new, live) for m, f in zip(messages, cached, strict=True)]
        ldigest = list_digest(digests)
        head = self.heads.get(key, parent_id)

        def cold() -> tuple[list[BodyRow], list[ListRow]]:
            snapshot, chunks = snapshot_rows(ldigest, digests)
            bodies = [self._body(d, new, live) for d in dict.fromkeys(digests)]
            return bodies, [*chunks, snapshot]

        if head is None:
            bodies, rows = cold()
            result.bodies += bodies
            result.lists += rows
            ops: list[Op] = [(0, len(digests))]
            result.heads.append((key, Head(checkpoint_id, ldigest, digests, ldigest, digests, ops)))
            return ldigest, cold
        stored = head.stored()
        n = len(head.digests)
        append = len(digests) >= n and digests[:n] == head.digests
        fresh = [d for d in dict.fromkeys(digests[n:] if append else digests) if d not in stored]
        result.bodies += [self._body(d, new, live) for d in fresh]
        result.requires += [head.list_digest, head.snapshot]
        if ldigest == head.list_digest:
            new_head = head
        else:
            if append:
                delta = merge_ops(head.ops, list(digests[n:]))
            else:
                delta = diff_ops(digests, head.index())
            literals = sum(1 for op in delta if isinstance(op, bytes))
            # A list much shorter than its snapshot (trimmed, summarized) gets a snapshot
            # of its own, so the long one can be reclaimed once nothing else uses it.
            shrunk = 2 * len(digests) < len(head.snapshot_entries)
            if literals <= self.delta_limit and len(delta) - literals <= 8 and not shrunk:
                result.lists.append(
                    ListRow(ldigest, head.snapshot, len(digests), encode_ops(delta))
                )
                new_head = Head(
                    checkpoint_id,
                    ldigest,
                    digests,
                    head.snapshot,
                    head.snapshot_entries,
                    delta,
                    head.chunks,
                    None,
                    head.snapshot_index,
                )
                if append and head.digest_set is not None:
                    new_head.digest_set = head.digest_set | set(fresh)
            else:
                snapshot, chunks = snapshot_rows(ldigest, digests)
                known = head.chunk_set()
                result.lists += [c for c in chunks if c.digest not in known]
                result.lists.append(snapshot)
                new_head = Head(
                    checkpoint_id,
                    ldigest,
                    digests,
                    ldigest,
                    digests,
                    [(0, len(digests))],
                    frozenset(c.digest for c in chunks),
                )
        if new_head is head:
            new_head = replace(head, checkpoint_id=checkpoint_id)
        result.heads.append((key, new_head))
        return ldigest, cold

    def installed(self, write: WriteSet) -> None:
        """Remember the heads of a write that is now stored."""
        for key, head in write.heads:
            self.heads.set(key, head)

    # -- decode --------------------------------------------------------------------------
    def references(
        self, channel_values: Mapping[str, Any]
    ) -> tuple[dict[str, bytes], dict[str, bytes]]:
        """The list and value references among ``channel_values`` (by channel)."""
        lists: dict[str, bytes] = {}
        values: dict[str, bytes] = {}
        for channel, value in channel_values.items():
            ref = read_ref(value)
            if ref is None:
                continue
            if ref[0] == "list":
                lists[channel] = ref[1][0]
            elif ref[0] == "value":
                values[channel] = ref[1]
        return lists, values

    def decode_values(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str | None,
        channel_values: Mapping[str, Any],
        expanded: Mapping[bytes, tuple[list[bytes], bytes, list[bytes], bytes | None]],
        loaded: Loaded,
        *,
        remember: bool,
    ) -> dict[str, Any]:
        """Return ``channel_values`` with every reference replaced by its value."""
        values = dict(channel_values)
        for channel, value in channel_values.items():
            ref = read_ref(value)
            if ref is None:
                continue
            kind, payload = ref
            if kind == "escaped":
                values[channel] = payload
            elif kind == "value":
                stored = loaded.values.get(payload)
                if stored is None:
                    raise FormatError(f"missing value row {payload.hex()} of channel {channel!r}")
                values[channel] = self.serde.loads_typed(stored)
            else:
                digest = payload[0]
                entries, snapshot, snapshot_entries, ops = expanded[digest]
                values[channel] = self._messages(entries, loaded)
                if remember and checkpoint_id is not None:
                    parsed: list[Op] = [(0, len(entries))] if ops is None else parse_ops(ops)
                    head = Head(checkpoint_id, digest, entries, snapshot, snapshot_entries, parsed)
                    self.heads.set((thread_id, ns, channel), head)
        return values

    def _messages(self, entries: Sequence[bytes], loaded: Loaded) -> list[BaseMessage]:
        """The messages of ``entries``: cached ones copied, the others decoded from
        ``loaded`` in one ``loads_typed`` call when they are all msgpack."""
        result: list[Any] = [self.messages.get(d) for d in entries]
        todo = [i for i, m in enumerate(result) if m is None]
        if not todo:
            return result
        stored = []
        for i in todo:
            body = loaded.bodies.get(entries[i])
            if body is None:
                raise FormatError(f"missing message body {entries[i].hex()}")
            stored.append(body)
        if all(t == "msgpack" for t, _ in stored):
            decoded = self.serde.loads_typed(("msgpack", msgpack_array([d for _, d in stored])))
        else:
            decoded = [self.serde.loads_typed(body) for body in stored]
        if not isinstance(decoded, list) or len(decoded) != len(todo):
            raise FormatError("stored message bodies do not decode as messages")
        for i, message, (type_, data) in zip(todo, decoded, stored, strict=True):
            if not isinstance(message, BaseMessage):
                raise FormatError(f"body {entries[i].hex()} is not a message")
            result[i] = message
            self.messages.add_stored(entries[i], message.id, type_, data)
        return result

    def missing_bodies(self, digests: Sequence[bytes]) -> list[bytes]:
        """The digests among ``digests`` whose message is not cached."""
        return [d for d in dict.fromkeys(digests) if d not in self.messages]
