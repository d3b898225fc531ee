"""Linear storage of message lists: content-addressed bodies plus compact list records.

A channel value that is a list of LangChain messages is replaced, before the inner
saver sees it, by a small *reference* (a plain dict, so every serde round-trips it).
What the reference points at lives in our own tables:

- **bodies**: each message serialized once per thread and namespace, identified by a
  16-byte digest of its serialized form (so an edited message is a new body). A new
  body is first stored *loose* (a row of its own); once a thread and namespace have
  :data:`PACK_SIZE` loose bodies, the write that adds the last one moves them into
  one *pack* (:class:`PackRow`: their digests, end offsets and payloads, the payload
  itself a msgpack array, in list order). A read fetches every pack and loose body of
  the thread and namespace in one range query, about N / PACK_SIZE + PACK_SIZE rows
  for N messages. When a list is a run of whole segments (an append-only thread),
  :meth:`BodySet.assemble` hands each pack to ``loads_typed`` as stored: no body is
  touched in Python and no buffer is copied; other lists (trimmed, edited, forked)
  are cut out of the packs in runs;
- **lists**: one record per distinct list, keyed by the digest of its body digests.
  A record is either a *snapshot* (every body digest, in order) or a *delta* against
  a snapshot (ranges copied from the snapshot plus new digests). A delta always
  points at a snapshot, never at another delta, so a read needs at most two list
  records and one batch of bodies, however long the thread is. A snapshot of
  :data:`CHUNK_SIZE` messages or more shares structure with the others: its digests
  are cut into fixed-size *chunks* of :data:`CHUNK_SIZE` digests, each stored once per
  thread and namespace as a chunk row (``base`` empty, keyed by :func:`chunk_digest`),
  and the snapshot holds the digests of its full chunks followed by the digests of
  its partial tail (fewer than :data:`CHUNK_SIZE`). Whether a snapshot is chunked
  follows from its length alone. An append-only thread thus writes each chunk once,
  and a snapshot costs 16 bytes per chunk plus its tail: list records grow about
  linearly with the thread, not as its square. A read fetches every chunk row of the
  thread and namespace with the bodies, in the same statement.

Everything is content-addressed, so writes are idempotent: writing the same rows
twice, packing the same bodies twice (two writers at once), or leaving rows behind
after a failed checkpoint write, never changes what a read returns.
"""

from __future__ import annotations

import hashlib
import operator
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.serde.base import SerializerProtocol

__all__ = [
    "CHUNK_SIZE",
    "MARKER_KEY",
    "MARKER_VERSION",
    "PACK_SIZE",
    "BodyRow",
    "BodySet",
    "ListRow",
    "MessageCodec",
    "PackRow",
    "Unit",
    "chunk_digest",
    "chunk_refs",
    "decode_ops",
    "encode_ops",
    "is_chunk",
    "is_marker",
    "make_pack",
    "message_digest",
    "msgpack_array",
]

MARKER_KEY = "__langgraph_stm__"
"""Key of the reference dict that stands in for a stored message list."""
MARKER_VERSION = "messages/1"
"""Format of the reference dict and of the list records it points at."""

DIGEST_SIZE = 16
CHUNK_SIZE = 256
"""Digests per chunk of a snapshot (4 KB); shorter snapshots are stored flat."""
CHUNK_BASE = b""
"""``base`` of a chunk row (a snapshot has ``None``, a delta its snapshot's digest)."""
PACK_SIZE = 32
"""Loose bodies of a thread and namespace that a write moves into one pack."""
_RANGE = b"R"
_LITERAL = b"L"
_RANGE_STRUCT = struct.Struct(">II")
_DIGEST_STRUCT = struct.Struct(f"{DIGEST_SIZE}s")


@dataclass(frozen=True, slots=True)
class BodyRow:
    """One serialized message body, stored once per thread and namespace."""

    digest: bytes
    """16-byte blake2b digest of ``type`` and ``data``; the body's key."""
    message_id: str | None
    """The message id, kept for inspection and deletion by id."""
    type: str
    """Serde type tag returned by ``dumps_typed``."""
    data: bytes
    """Serde payload returned by ``dumps_typed``."""


@dataclass(frozen=True, slots=True)
class PackRow:
    """Several bodies of one thread and namespace stored as one row."""

    digest: bytes
    """Digest of ``digests`` (:func:`list_digest`); the pack's key."""
    digests: bytes
    """The bodies' digests, concatenated."""
    ends: bytes
    """End offset of each body in ``data`` (big-endian uint32 each)."""
    types: str
    """The serde type shared by every body, or one type per body joined by newlines."""
    data: bytes
    """The bodies' serde payloads, concatenated."""


@dataclass(frozen=True, slots=True)
class ListRow:
    """One distinct message list: a snapshot, or a delta against a snapshot."""

    digest: bytes
    """Digest of the ordered body digests; the list's key."""
    base: bytes | None
    """Digest of the snapshot this delta applies to; ``None`` for a snapshot."""
    length: int
    """Number of messages in the list."""
    ops: bytes
    """A snapshot's body digests, concatenated; a delta's operations (:func:`encode_ops`)."""


def message_digest(type_: str, data: bytes) -> bytes:
    """Return the 16-byte digest that keys a serialized message body.

    Example:
        >>> len(message_digest("msgpack", b"abc"))
        16
    """
    return hashlib.blake2b(type_.encode() + b"\x00" + data, digest_size=DIGEST_SIZE).digest()


def list_digest(digests: Iterable[bytes]) -> bytes:
    """Return the digest of an ordered list of body digests."""
    return hashlib.blake2b(b"".join(digests), digest_size=DIGEST_SIZE).digest()


def chunk_digest(blob: bytes) -> bytes:
    """Return the key of a chunk row: a digest of its concatenated body digests, apart
    from :func:`list_digest` so a chunk never shares a key with a list record."""
    return hashlib.blake2b(blob, digest_size=DIGEST_SIZE, person=b"stm-chunk").digest()


def is_chunk(row: ListRow) -> bool:
    """Whether ``row`` is a chunk of snapshots rather than a list record."""
    return row.base == CHUNK_BASE


def snapshot_rows(digest: bytes, digests: Sequence[bytes]) -> tuple[ListRow, list[ListRow]]:
    """Return the snapshot record of ``digests`` and the chunk rows it refers to.

    Example:
        >>> snap, chunks = snapshot_rows(b"s" * 16, [bytes([i % 256]) * 16 for i in range(300)])
        >>> len(snap.ops) == 16 * (1 + 300 - CHUNK_SIZE), len(chunks), chunks[0].length
        (True, 1, 256)
    """
    full = len(digests) // CHUNK_SIZE * CHUNK_SIZE
    chunks: list[ListRow] = []
    for start in range(0, full, CHUNK_SIZE):
        blob = b"".join(digests[start : start + CHUNK_SIZE])
        chunks.append(ListRow(chunk_digest(blob), CHUNK_BASE, CHUNK_SIZE, blob))
    ops = b"".join(c.digest for c in chunks) + b"".join(digests[full:])
    return ListRow(digest, None, len(digests), ops), chunks


def chunk_refs(row: ListRow) -> list[bytes]:
    """The digests of the chunks the snapshot ``row`` refers to (none when flat)."""
    count = row.length // CHUNK_SIZE
    return split_digests(row.ops[: count * DIGEST_SIZE]) if count else []


def snapshot_entries(row: ListRow, rows: Mapping[bytes, ListRow]) -> list[bytes] | None:
    """Expand the snapshot ``row`` into its body digests, its chunks taken from
    ``rows``; ``None`` when a chunk is missing."""
    count = row.length // CHUNK_SIZE
    if not count:
        return split_digests(row.ops)
    parts: list[bytes] = []
    for ref in split_digests(row.ops[: count * DIGEST_SIZE]):
        chunk = rows.get(ref)
        if chunk is None or not is_chunk(chunk):
            return None
        parts.append(chunk.ops)
    parts.append(row.ops[count * DIGEST_SIZE :])
    return split_digests(b"".join(parts))


def encode_ops(ops: Sequence[tuple[int, int] | bytes]) -> bytes:
    """Encode list operations: ``(start, end)`` copies a snapshot range, bytes add a digest.

    Example:
        >>> decode_ops(encode_ops([(0, 3), b"x" * 16]), [b"a" * 16, b"b" * 16, b"c" * 16])[-1]
        b'xxxxxxxxxxxxxxxx'
    """
    out = bytearray()
    for op in ops:
        if isinstance(op, bytes):
            out += _LITERAL + op
        else:
            out += _RANGE + _RANGE_STRUCT.pack(op[0], op[1])
    return bytes(out)


def parse_ops(ops: bytes) -> list[tuple[int, int] | bytes]:
    """Parse encoded operations back into ``(start, end)`` ranges and digests.

    Example:
        >>> parse_ops(encode_ops([(0, 3), b"x" * 16]))[0]
        (0, 3)
    """
    result: list[tuple[int, int] | bytes] = []
    pos = 0
    while pos < len(ops):
        tag = ops[pos : pos + 1]
        pos += 1
        if tag == _LITERAL:
            result.append(ops[pos : pos + DIGEST_SIZE])
            pos += DIGEST_SIZE
        elif tag == _RANGE:
            start, end = _RANGE_STRUCT.unpack_from(ops, pos)
            result.append((start, end))
            pos += _RANGE_STRUCT.size
        else:
            raise ValueError(f"corrupted message list record: unknown op tag {tag!r}")
    return result


def decode_ops(ops: bytes, base: Sequence[bytes]) -> list[bytes]:
    """Expand encoded operations against the snapshot ``base`` into body digests."""
    result: list[bytes] = []
    pos = 0
    view = memoryview(ops)
    while pos < len(ops):
        tag = ops[pos : pos + 1]
        pos += 1
        if tag == _LITERAL:
            result.append(bytes(view[pos : pos + DIGEST_SIZE]))
            pos += DIGEST_SIZE
        elif tag == _RANGE:
            start, end = _RANGE_STRUCT.unpack_from(ops, pos)
            pos += _RANGE_STRUCT.size
            result.extend(base[start:end])
        else:
            raise ValueError(f"corrupted message list record: unknown op tag {tag!r}")
    return result


def msgpack_array(items: Sequence[bytes]) -> bytes:
    """Concatenate msgpack-encoded values into the msgpack encoding of their array.

    Lets a list of separately stored bodies be decoded in one ``loads_typed`` call,
    as fast as the single blob a plain saver stores (msgpack spec: fixarray,
    array 16, array 32 headers).

    Example:
        >>> list(msgpack_array([bytes([1]), bytes([2])]))
        [146, 1, 2]
    """
    return msgpack_array_header(len(items)) + b"".join(items)


def msgpack_array_header(n: int) -> bytes:
    """The msgpack header of an array of ``n`` values (fixarray, array 16, array 32)."""
    if n < 16:
        return bytes([0x90 | n])
    if n < 1 << 16:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def is_marker(value: object) -> bool:
    """Whether ``value`` is the reference that stands in for a stored message list.

    Example:
        >>> is_marker({MARKER_KEY: MARKER_VERSION, "list": "00" * 16, "n": 0})
        True
        >>> is_marker({"list": "x"})
        False
    """
    return isinstance(value, dict) and value.get(MARKER_KEY) == MARKER_VERSION and "list" in value


def is_message_list(value: object) -> bool:
    """Whether ``value`` looks like a non-empty list of LangChain messages.

    Only the ends are checked here; :meth:`MessageCodec.encode` checks every element
    it has not seen before and leaves the value alone if one is not a message.
    """
    return (
        type(value) is list
        and len(value) > 0
        and isinstance(value[0], BaseMessage)
        and isinstance(value[-1], BaseMessage)
    )


@dataclass(slots=True)
class _Known:
    obj: BaseMessage
    digest: bytes


@dataclass(slots=True)
class _ChannelCache:
    """What this process knows about one (thread, namespace, channel)."""

    snapshot: bytes | None = None
    snapshot_entries: list[bytes] = field(default_factory=list)
    snapshot_index: dict[bytes, int] = field(default_factory=dict)
    chunks: frozenset[bytes] | None = frozenset()
    """Digests of the chunk rows known to be stored (see :func:`snapshot_rows`);
    ``None``: the chunks of ``snapshot_entries``, computed when a write needs them."""
    known: dict[int, _Known] = field(default_factory=dict)
    """Messages stored earlier that are *not* in ``last_objs`` (they left the list and
    may come back), by object id; dropped when it grows large. The messages of
    ``last_objs`` are known through ``last_objs`` itself, so an append costs no
    per-message bookkeeping."""
    last_objs: list[BaseMessage] = field(default_factory=list)
    last_digests: list[bytes] = field(default_factory=list)
    last_ops: Sequence[tuple[int, int] | bytes] = field(default_factory=list)
    last_ids: set[int] | None = None
    """``id()`` of every message of ``last_objs``, built when a write needs it."""
    hasher: Any = None
    """The :func:`list_digest` hash state after ``last_digests`` (an append then hashes
    only its new digests), built when a write needs it."""

    def digest_state(self) -> Any:
        """``hasher``, built first if needed."""
        if self.hasher is None:
            self.hasher = hashlib.blake2b(b"".join(self.last_digests), digest_size=DIGEST_SIZE)
        return self.hasher

    def last_id_set(self) -> set[int]:
        """``last_ids``, built first if needed."""
        if self.last_ids is None:
            self.last_ids = set(map(id, self.last_objs))
        return self.last_ids

    def known_with_last(self) -> dict[int, _Known]:
        """``known`` plus every message of ``last_objs`` (a new dict)."""
        pairs = zip(self.last_objs, self.last_digests, strict=True)
        return {**self.known, **{id(m): _Known(m, d) for m, d in pairs}}

    def chunk_set(self) -> frozenset[bytes]:
        """``chunks``, computed from ``snapshot_entries`` first if still implicit."""
        if self.chunks is None:
            entries = self.snapshot_entries
            whole = len(entries) // CHUNK_SIZE * CHUNK_SIZE
            self.chunks = frozenset(
                chunk_digest(b"".join(entries[i : i + CHUNK_SIZE]))
                for i in range(0, whole, CHUNK_SIZE)
            )
        return self.chunks


@dataclass(slots=True)
class _Scope:
    """What this process knows about one (thread, namespace): its channels' caches and
    the id of the checkpoint they describe (the last one written or read here)."""

    head: str | None = None
    channels: dict[str, _ChannelCache] = field(default_factory=dict)
    written: dict[str, dict[int, object]] = field(default_factory=dict)
    """Message objects nodes wrote per channel since the last encode (``forget_messages``)."""
    writes_for: set[str] = field(default_factory=set)
    """Checkpoints on top of which tasks' writes were reported (``note_writes``)."""


@dataclass(slots=True)
class Encoded:
    """The result of encoding one checkpoint's message lists; applied after the put."""

    values: dict[str, Any]
    """``channel_values`` with message lists replaced by references."""
    bodies: list[BodyRow]
    """New bodies to store."""
    lists: list[ListRow]
    """New list records to store."""
    updates: list[tuple[tuple[str, str, str], _ChannelCache]]
    """Cache entries to install once the write succeeded."""
    order: list[bytes] = field(default_factory=list)
    """Body digests of the written lists, in list order (the order packs are made in)."""
    cold: bool = False
    """Some bodies were serialized without knowing what is stored (nothing cached for
    the channel): the store drops those it already has instead of storing them twice."""


class MessageCodec:
    """Turns message lists into references plus rows, and references back into lists.

    Keeps a bounded per-channel cache so that encoding a list whose messages were
    already seen costs a dictionary lookup per message, not a serialization. A message
    is recognized by object identity: LangGraph reducers replace a message to change
    it (``add_messages`` with the same id), so an object already stored is not
    serialized again. A node may also edit a message object in place and return it:
    every message object a node writes is reported with :meth:`forget_messages`
    (``STMSaver.put_writes`` does), so it is serialized again. A checkpoint that
    follows nodes whose writes were not reported since the last read
    (``durability="exit"``) is encoded cold: the whole list is serialized again, once
    per run, as a plain saver does on every checkpoint (bodies already stored are not
    written twice). A message mutated in place but *not* written by the node is not
    detected.

    The cache of a thread and namespace is tagged with the id of the checkpoint it
    describes (its *head*: the last checkpoint written or read through this codec).
    :meth:`encode` trusts it only for a write whose parent checkpoint is that head;
    any other write (the thread was written, or deleted and reused, by another
    process, or a fork) forgets it and is encoded *cold*: a full snapshot, every body
    serialized, bodies already stored dropped by the store.
    """

    def __init__(self, *, delta_limit: int = 24, cache_size: int = 512) -> None:
        self.delta_limit = delta_limit
        self.cache_size = cache_size
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, str], _Scope] = OrderedDict()

    # -- cache -------------------------------------------------------------------------
    def _get(self, key: tuple[str, str, str]) -> _ChannelCache | None:
        with self._lock:
            scope = self._cache.get(key[:2])
            if scope is None:
                return None
            self._cache.move_to_end(key[:2])
            return scope.channels.get(key[2])

    def check_head(
        self,
        thread_id: str,
        checkpoint_ns: str,
        parent: str | None,
        *,
        after_nodes: bool = False,
    ) -> None:
        """Forget the scope's cache unless it describes ``parent``, the checkpoint that
        the one about to be written follows (see the class doc).

        ``after_nodes``: the write follows nodes that ran since ``parent`` (any
        checkpoint but a run's input one); then the cache is kept only if writes of
        tasks run on top of ``parent`` were reported (:meth:`note_writes`). With
        ``durability="exit"`` LangGraph reports none, so a node's in-place edit could
        not be told apart otherwise.
        """
        with self._lock:
            scope = self._cache.get((thread_id, checkpoint_ns))
            if scope is not None and (
                scope.head != parent or (after_nodes and parent not in scope.writes_for)
            ):
                del self._cache[(thread_id, checkpoint_ns)]

    def note_read(self, thread_id: str, checkpoint_ns: str) -> None:
        """Forget which checkpoints had their tasks' writes reported: a read starts a run
        (or a resume, whose tasks re-run on a checkpoint whose writes an earlier,
        interrupted run may have reported) and only writes reported after it count."""
        with self._lock:
            scope = self._cache.get((thread_id, checkpoint_ns))
            if scope is not None:
                scope.writes_for.clear()

    def note_writes(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None) -> None:
        """Record that writes of tasks run on top of ``checkpoint_id`` were reported
        (LangGraph may report them while that checkpoint itself is still being written)."""
        if checkpoint_id is None:
            return
        with self._lock:
            scope = self._cache.get((thread_id, checkpoint_ns))
            if scope is not None:
                if len(scope.writes_for) >= 8:
                    scope.writes_for.clear()
                scope.writes_for.add(checkpoint_id)

    def install(
        self,
        updates: Iterable[tuple[tuple[str, str, str], _ChannelCache]],
        *,
        head: tuple[str, str, str | None] | None = None,
    ) -> None:
        """Remember channel caches after the rows they rely on were stored.

        ``head`` is ``(thread_id, checkpoint_ns, checkpoint_id)`` of the checkpoint just
        written or read; the scope's cache then describes it.
        """
        with self._lock:
            for key, entry in updates:
                if len(entry.known) > len(entry.last_objs) + 256:
                    entry.known = {}  # a cache of departed messages; never required
                scope = self._scope(key[:2])
                scope.channels[key[2]] = entry
            if head is not None:
                self._scope(head[:2]).head = head[2]
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def _scope(self, key: tuple[str, str]) -> _Scope:
        scope = self._cache.get(key)
        if scope is None:
            scope = self._cache[key] = _Scope()
        self._cache.move_to_end(key)
        return scope

    def forget_threads(self, thread_ids: Iterable[str] | None = None) -> None:
        """Drop cached knowledge of ``thread_ids`` (all threads when ``None``)."""
        with self._lock:
            if thread_ids is None:
                self._cache.clear()
                return
            wanted = set(thread_ids)
            for key in [k for k in self._cache if k[0] in wanted]:
                del self._cache[key]

    def forget_messages(
        self, thread_id: str, checkpoint_ns: str, channel: str, messages: Iterable[object]
    ) -> None:
        """Forget that ``messages`` (objects a node wrote to ``channel``) are stored.

        A node may edit a message object it received and return it under the same id;
        recognized by identity, it would keep its old body. Forgetting every message
        object written makes the next write serialize them again (an unchanged one gets
        its old digest back). Costs a dictionary insertion per written message here and,
        in the next write, a set of the cached list's object ids (built once per entry).
        """
        with self._lock:
            scope = self._cache.get((thread_id, checkpoint_ns))
            if scope is not None and channel in scope.channels:
                pending = scope.written.setdefault(channel, {})
                for msg in messages:
                    pending[id(msg)] = msg

    def _take_written(self, key: tuple[str, str, str]) -> dict[int, object]:
        """The message objects written to a channel since its last encode (then cleared).

        Applied when the next write is encoded, not to the cached entry: a checkpoint
        write still running in the background (durability ``"async"``) installs its
        entry later, and the objects must be forgotten from that one too.
        """
        with self._lock:
            scope = self._cache.get(key[:2])
            return {} if scope is None else scope.written.pop(key[2], {})

    # -- encode ------------------------------------------------------------------------
    def encode(
        self,
        serde: SerializerProtocol,
        thread_id: str,
        checkpoint_ns: str,
        channel_values: Mapping[str, Any],
        channels: Iterable[str] | None,
    ) -> Encoded:
        """Replace each message list among ``channels`` (all when ``None``) by a reference.

        A checkpoint write calls :meth:`check_head` first.
        """
        values = dict(channel_values)
        result = Encoded(values=values, bodies=[], lists=[], updates=[])
        names = list(values) if channels is None else [c for c in channels if c in values]
        for channel in names:
            value = values[channel]
            key = (thread_id, checkpoint_ns, channel)
            if not is_message_list(value):
                self._take_written(key)
                continue
            marker = self._encode_list(serde, key, value, result)
            if marker is not None:
                values[channel] = marker
        return result

    def _encode_list(
        self,
        serde: SerializerProtocol,
        key: tuple[str, str, str],
        messages: list[BaseMessage],
        result: Encoded,
    ) -> dict[str, Any] | None:
        cached = self._get(key)
        written = self._take_written(key)
        known = cached.known if cached is not None else {}
        last_objs = cached.last_objs if cached is not None else []
        last_digests = cached.last_digests if cached is not None else []
        stale: list[int] = []
        if written and cached is not None:
            # ``written`` and ``last_objs`` both hold their objects alive, so an id
            # found in both is the same object.
            in_last = cached.last_id_set()
            stale = [
                i
                for i, m in written.items()
                if i in in_last or ((k := known.get(i)) is not None and k.obj is m)
            ]
        if stale:
            # Stored messages that a node wrote again, maybe edited in place: serialize
            # them again. The last list may hold them, so diff against the snapshot.
            known = cached.known_with_last() if cached is not None else {}
            for i in stale:
                del known[i]
            last_objs, last_digests = [], []
        additions: dict[int, _Known] = {}
        prefix = 0
        if cached is not None and 0 < len(last_objs) <= len(messages):
            n = len(last_objs)
            if all(map(operator.is_, messages[:n], last_objs)):
                prefix = n
        if cached is not None and not prefix and last_objs:
            # Not an append: every message of the last list may be reused anywhere.
            known = cached.known_with_last()
        if cached is None:
            result.cold = True
        digests = list(last_digests) if cached is not None and prefix else []
        tail = messages[prefix:]
        if not all(isinstance(m, BaseMessage) for m in tail):
            return None
        bodies: list[BodyRow] = []
        for msg in tail:
            hit = known.get(id(msg)) or additions.get(id(msg))
            if hit is not None and hit.obj is msg:
                digests.append(hit.digest)
                continue
            type_, data = serde.dumps_typed(msg)
            digest = message_digest(type_, data)
            bodies.append(BodyRow(digest, msg.id, type_, data))
            additions[id(msg)] = _Known(msg, digest)
            digests.append(digest)
        result.bodies.extend(bodies)
        entry = _ChannelCache(known=known)
        if cached is not None and prefix:
            # An append: hash only the new digests, extend the id set by the new objects.
            entry.hasher = cached.digest_state().copy()
            entry.hasher.update(b"".join(digests[prefix:]))
            ldigest = entry.hasher.digest()
            if cached.last_ids is not None:
                entry.last_ids = cached.last_ids.union(map(id, tail))
        else:
            ldigest = list_digest(digests)
        entry.last_objs = list(messages)
        entry.last_digests = digests
        row: ListRow | None = None
        if cached is not None and cached.snapshot is not None:
            if prefix:
                # Appended messages are new digests: literals, no snapshot lookup needed.
                ops = _merge(cached.last_ops, digests[prefix:])
            else:
                if not cached.snapshot_index:
                    cached.snapshot_index = {d: i for i, d in enumerate(cached.snapshot_entries)}
                ops = _diff(digests, cached.snapshot_index)
            literals = sum(1 for op in ops if isinstance(op, bytes))
            if literals <= self.delta_limit and len(ops) - literals <= 8:
                row = ListRow(ldigest, cached.snapshot, len(digests), encode_ops(ops))
                entry.snapshot = cached.snapshot
                entry.snapshot_entries = cached.snapshot_entries
                entry.snapshot_index = cached.snapshot_index
                entry.last_ops = ops
        if cached is not None:
            entry.chunks = cached.chunk_set()
        if row is None:
            row, chunks = snapshot_rows(ldigest, digests)
            stored = entry.chunk_set()
            fresh = [c for c in chunks if c.digest not in stored]
            if fresh:
                result.lists.extend(fresh)
                entry.chunks = stored | {c.digest for c in fresh}
            entry.snapshot = ldigest
            entry.snapshot_entries = digests
            entry.snapshot_index = {d: i for i, d in enumerate(digests)}
            entry.last_ops = [(0, len(digests))] if digests else []
        result.lists.append(row)
        result.order.extend(digests)
        result.updates.append((key, entry))
        return {MARKER_KEY: MARKER_VERSION, "list": ldigest.hex(), "n": len(digests)}

    # -- decode ------------------------------------------------------------------------
    def remember(
        self,
        key: tuple[str, str, str],
        messages: Sequence[BaseMessage],
        digests: Sequence[bytes],
        snapshot: bytes,
        snapshot_entries: list[bytes],
        ops: bytes | None,
        checkpoint_id: str | None = None,
    ) -> None:
        """Cache what a read learned, so the next write of this channel is a cheap delta.

        ``ops`` is the stored delta of the list (``None`` when it is the snapshot) and
        ``checkpoint_id`` the checkpoint read. Only references are kept: lookup tables
        are built if and when a write needs them.
        """
        if len(messages) != len(digests):
            raise ValueError("remember: one digest per message expected")
        self.check_head(key[0], key[1], checkpoint_id)
        entry = _ChannelCache(
            snapshot=snapshot,
            snapshot_entries=snapshot_entries,
            chunks=None,
            last_objs=list(messages),
            last_digests=list(digests),
            last_ops=[(0, len(digests))] if ops is None else parse_ops(ops),
        )
        self.install([(key, entry)], head=(key[0], key[1], checkpoint_id))


def _merge(
    head: Sequence[tuple[int, int] | bytes], tail: Sequence[tuple[int, int] | bytes]
) -> list[tuple[int, int] | bytes]:
    """Concatenate two op lists, joining a range that ends where the next one starts."""
    ops = list(head)
    if ops and tail:
        last, first = ops[-1], tail[0]
        if isinstance(last, tuple) and isinstance(first, tuple) and last[1] == first[0]:
            ops[-1] = (last[0], first[1])
            return ops + list(tail[1:])
    return ops + list(tail)


def _diff(digests: Sequence[bytes], index: Mapping[bytes, int]) -> list[tuple[int, int] | bytes]:
    ops: list[tuple[int, int] | bytes] = []
    run_start = -1
    run_end = -1
    for d in digests:
        pos = index.get(d)
        if pos is not None and pos == run_end:
            run_end += 1
            continue
        if run_start >= 0:
            ops.append((run_start, run_end))
            run_start = run_end = -1
        if pos is not None:
            run_start, run_end = pos, pos + 1
        else:
            ops.append(d)
    if run_start >= 0:
        ops.append((run_start, run_end))
    return ops


Expanded = dict[bytes, tuple[list[bytes], bytes, list[bytes], bytes | None]]
"""List digest -> (body digests, snapshot digest, snapshot body digests, delta ops)."""


def split_digests(blob: bytes) -> list[bytes]:
    """Split a snapshot's concatenated digests.

    Example:
        >>> split_digests(b"a" * 16 + b"b" * 16)[1]
        b'bbbbbbbbbbbbbbbb'
    """
    return [d for (d,) in _DIGEST_STRUCT.iter_unpack(blob)]


def expand_all(
    rows: Mapping[bytes, ListRow], wanted: Iterable[bytes], *, collect: bool = True
) -> tuple[Expanded, set[bytes]]:
    """Expand the lists ``wanted`` found in ``rows``; also return every body digest they
    use (unless ``collect`` is false: a store that reads every body does not need them).

    Lists whose record or snapshot is missing are left out; the caller reports them.
    """
    expanded: Expanded = {}
    snapshots: dict[bytes, list[bytes]] = {}
    bodies: set[bytes] = set()
    for digest in wanted:
        row = rows.get(digest)
        if row is None:
            continue
        snapshot = digest if row.base is None else row.base
        base = rows.get(snapshot)
        if base is None or base.base is not None:
            continue
        if snapshot not in snapshots:
            found = snapshot_entries(base, rows)
            if found is None:
                continue
            snapshots[snapshot] = found
        base_entries = snapshots[snapshot]
        entries = base_entries if row.base is None else decode_ops(row.ops, base_entries)
        expanded[digest] = (entries, snapshot, base_entries, None if row.base is None else row.ops)
        if collect:
            bodies.update(entries)
    return expanded, bodies


_END = struct.Struct(">I")

Unit = tuple[str, bytes, int]
"""What :meth:`BodySet.assemble` returns, decoded one ``loads_typed`` call each:
``(type, payload, n)`` is a msgpack array of ``n`` bodies, or one body when ``n < 0``."""


def make_pack(bodies: Sequence[tuple[bytes, str, bytes]], order: Sequence[bytes]) -> PackRow:
    """Pack loose ``(digest, type, payload)`` bodies into one row.

    Bodies are laid out in the order their digests have in ``order`` (the list being
    written), the others after them by digest, so that an append-only thread's list is
    a run of whole packs. When every body is msgpack, ``data`` is itself a msgpack array
    (:func:`msgpack_array`), so a read decodes a whole pack in place, without copying.

    Example:
        >>> a, b = (b"a" * 16, "msgpack", b"\\x01"), (b"b" * 16, "msgpack", b"\\x02")
        >>> pack = make_pack([b, a], [b"a" * 16, b"b" * 16])
        >>> pack.data, pack.types, split_digests(pack.digests)[0]
        (b'\\x92\\x01\\x02', 'msgpack', b'aaaaaaaaaaaaaaaa')
    """
    rank = {d: i for i, d in enumerate(order)}
    last = len(rank)
    ordered = sorted(bodies, key=lambda b: (rank.get(b[0], last), b[0]))
    header = msgpack_array_header(len(ordered))
    ends = bytearray()
    end = len(header)
    for _, _, data in ordered:
        end += len(data)
        ends += _END.pack(end)
    types = {t for _, t, _ in ordered}
    digests = b"".join(d for d, _, _ in ordered)
    return PackRow(
        digest=hashlib.blake2b(digests, digest_size=DIGEST_SIZE).digest(),
        digests=digests,
        ends=bytes(ends),
        types=types.pop() if len(types) == 1 else "\n".join(t for _, t, _ in ordered),
        data=header + b"".join(data for _, _, data in ordered),
    )


class BodySet:
    """The bodies a read fetched: packs and loose bodies (one segment each).

    Example:
        >>> bodies = BodySet()
        >>> a, b = (b"a" * 16, "msgpack", b"\\x01"), (b"b" * 16, "msgpack", b"\\x02")
        >>> pack = make_pack([a, b], [])
        >>> bodies.add(pack.digests, pack.ends, pack.types, pack.data)
        >>> bodies.add(b"c" * 16, None, "msgpack", b"\\x03")
        >>> bodies.assemble([b"a" * 16, b"b" * 16, b"c" * 16])
        [('msgpack', b'\\x92\\x01\\x02', 2), ('msgpack', b'\\x03', -1)]
        >>> bodies.assemble([b"c" * 16, b"b" * 16])
        [('msgpack', b'\\x03', -1), ('msgpack', b'\\x91\\x02', 1)]
    """

    __slots__ = ("_index", "_starts", "segments")

    def __init__(self) -> None:
        self.segments: list[tuple[bytes, bytes | None, str, bytes]] = []
        self._index: dict[bytes, tuple[int, int]] | None = None
        self._starts: dict[bytes, tuple[bytes, Unit]] | None = None

    def add(self, digests: bytes, ends: bytes | None, types: str, data: bytes) -> None:
        """Add one stored segment: a pack (with ``ends``) or one loose body (``ends=None``)."""
        self.segments.append((digests, ends, types, data))
        self._index = self._starts = None

    def __len__(self) -> int:
        return sum(len(s[0]) for s in self.segments) // DIGEST_SIZE

    def assemble(self, entries: Sequence[bytes]) -> list[Unit]:
        """Return the bodies of ``entries``, in order, as few units to decode as possible.

        When the list is a run of whole segments (an append-only thread) each pack is
        one unit, used as stored; otherwise runs of consecutive bodies are cut out of
        their packs. Raises ``KeyError`` when a body is missing.
        """
        if not entries:
            return []
        blob = b"".join(entries)
        units = self._whole_segments(blob)
        return units if units is not None else self._runs(entries, blob)

    def _whole_segments(self, blob: bytes) -> list[Unit] | None:
        """Walk the list segment by segment; ``None`` as soon as it is not one."""
        if self._starts is None:
            # The segment each body digest starts, the longest one when several do.
            self._starts = {}
            for digests, ends, types, data in self.segments:
                if ends is None:
                    unit: Unit = (types, data, -1)
                elif types == "msgpack":
                    unit = (types, data, len(digests) // DIGEST_SIZE)
                else:
                    continue
                first = digests[:DIGEST_SIZE]
                known = self._starts.get(first)
                if known is None or len(known[0]) < len(digests):
                    self._starts[first] = (digests, unit)
        starts = self._starts
        units: list[Unit] = []
        at = 0
        while at < len(blob):
            found = starts.get(blob[at : at + DIGEST_SIZE])
            if found is None or not blob.startswith(found[0], at):
                return None
            units.append(found[1])
            at += len(found[0])
        return units

    def _runs(self, entries: Sequence[bytes], blob: bytes) -> list[Unit]:
        if self._index is None:
            self._index = {}
            for s, (digests, _, _, _) in enumerate(self.segments):
                for j in range(0, len(digests), DIGEST_SIZE):
                    self._index.setdefault(digests[j : j + DIGEST_SIZE], (s, j // DIGEST_SIZE))
        index = self._index
        units: list[Unit] = []
        i = 0
        while i < len(entries):
            s, j = index[entries[i]]
            digests, ends, types, data = self.segments[s]
            if ends is None:
                units.append((types, data, -1))
                i += 1
                continue
            # The longest run of entries[i:] that is stored consecutively from body j.
            count = len(digests) // DIGEST_SIZE
            run = 1
            while (
                j + run < count
                and i + run < len(entries)
                and digests[(j + run) * DIGEST_SIZE : (j + run + 1) * DIGEST_SIZE]
                == blob[(i + run) * DIGEST_SIZE : (i + run + 1) * DIGEST_SIZE]
            ):
                run += 1
            kinds = types.split("\n") if "\n" in types else None
            begin = (
                len(msgpack_array_header(count)) if j == 0 else _END.unpack_from(ends, 4 * j - 4)[0]
            )
            if kinds is None and types == "msgpack":
                if j == 0 and run == count:
                    units.append((types, data, count))
                else:
                    end = _END.unpack_from(ends, 4 * (j + run) - 4)[0]
                    units.append((types, msgpack_array_header(run) + data[begin:end], run))
            else:
                for k in range(j, j + run):
                    end = _END.unpack_from(ends, 4 * k)[0]
                    units.append((kinds[k] if kinds else types, data[begin:end], -1))
                    begin = end
            i += run
        return units
