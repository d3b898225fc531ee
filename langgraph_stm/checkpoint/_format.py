"""The storage format of STMSaver: pure functions and records, no I/O, no state.

Why it exists: a plain ``add_messages`` graph writes its whole message list into every
checkpoint, so a thread of N turns stores O(N²) bytes. LangGraph's ``DeltaChannel``
avoids that, but only for graphs whose schema declares it, and it replays history on
read. This format gives *unchanged* graphs linear storage: before the inner saver sees
a checkpoint, each channel value that is a list of LangChain messages is replaced by a
small *reference*; what it points at lives in our own tables:

- **bodies** (``stm_bodies``): each message serialized once per thread and namespace,
  keyed by a 16-byte digest of its serialized form (an edited message is a new body),
  zlib-compressed when that saves space (:func:`pack_body` / :func:`unpack_body`);
- **list records** (``stm_lists``): one per distinct list, keyed by the digest of its
  body digests: a *snapshot* (every digest, in order) or a *delta* against a snapshot
  (ranges of the snapshot plus new digests, :func:`encode_ops`). A delta always points
  at a snapshot, so a read needs at most two records. A snapshot of
  :data:`CHUNK_SIZE` messages or more refers to *chunks* of :data:`CHUNK_SIZE` digests
  stored once per thread (:func:`snapshot_rows`), so list records grow linearly too;
- **values** (``stm_values``): other large channel values (a running summary, a plan)
  stored once per distinct value, for inner savers that copy every channel into every
  checkpoint (SQLite);
- **refs** (``stm_refs``): per checkpoint, the lists and values it references
  (:func:`encode_refs`), which is what reclaiming unreferenced rows follows.

A read fetches only the records and bodies its references name. Everything is
content-addressed, so writing the same rows twice never changes what a read returns.

A user's top-level dict that happens to carry :data:`MARKER_KEY` is stored *escaped*
(:func:`escape`), so no user value is ever taken for a reference.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage

__all__ = [
    "CHUNK_SIZE",
    "DIGEST_SIZE",
    "MARKER_KEY",
    "BodyRow",
    "FormatError",
    "ListRow",
    "ValueRow",
    "chunk_refs",
    "column_text",
    "decode_ops",
    "decode_refs",
    "encode_ops",
    "encode_refs",
    "escape",
    "expand_list",
    "is_message_list",
    "list_digest",
    "list_ref",
    "message_digest",
    "msgpack_array",
    "pack_body",
    "parse_ops",
    "read_ref",
    "snapshot_rows",
    "split_digests",
    "unpack_body",
    "value_digest",
    "value_ref",
]

MARKER_KEY = "__langgraph_stm__"
"""Key of the dicts that stand in for stored values in a checkpoint."""
LIST_KIND = "messages/1"
"""A reference to a stored message list: ``{MARKER_KEY: LIST_KIND, "list": hex, "n": n}``."""
VALUE_KIND = "value/1"
"""A reference to a stored channel value: ``{MARKER_KEY: VALUE_KIND, "digest": hex}``."""
ESCAPED_KIND = "escaped/1"
"""A user's dict that carries :data:`MARKER_KEY`: ``{MARKER_KEY: ESCAPED_KIND, "value": v}``."""

DIGEST_SIZE = 16
CHUNK_SIZE = 256
"""Digests per chunk of a snapshot (4 KB); shorter snapshots are stored flat."""
CHUNK_BASE = b""
"""``base`` of a chunk row (a snapshot has ``None``, a delta its snapshot's digest)."""
COMPRESSED = "+zlib"
"""Suffix of a body's stored type when its payload is zlib-compressed."""
_COMPRESS_FROM = 256
_RANGE = b"R"
_LITERAL = b"L"
_RANGE_STRUCT = struct.Struct(">II")
_DIGEST_STRUCT = struct.Struct(f"{DIGEST_SIZE}s")
_REF_LIST = b"L"
_REF_VALUE = b"V"


class FormatError(ValueError):
    """A stored record does not parse; the saver reports it as a ``StorageError``."""


@dataclass(frozen=True, slots=True)
class BodyRow:
    """One serialized message body, stored once per thread and namespace."""

    digest: bytes
    """:func:`message_digest` of the serialized message; the body's key."""
    message_id: str | None
    """The message id as a text column holds it (:func:`column_text`), kept for
    inspection only: a read takes the id from the serialized body."""
    type: str
    """Serde type tag, with :data:`COMPRESSED` appended when ``data`` is compressed."""
    data: bytes
    """Serde payload, compressed or not (:func:`pack_body`)."""


@dataclass(frozen=True, slots=True)
class ListRow:
    """One distinct message list: a snapshot, a delta against a snapshot, or a chunk."""

    digest: bytes
    """:func:`list_digest` of the ordered body digests (a chunk: :func:`chunk_digest`)."""
    base: bytes | None
    """The snapshot a delta applies to; ``None`` for a snapshot, ``b""`` for a chunk."""
    length: int
    """Number of messages in the list."""
    ops: bytes
    """A snapshot's chunk digests then its tail digests; a delta's :func:`encode_ops`."""


@dataclass(frozen=True, slots=True)
class ValueRow:
    """One serialized channel value, stored once per thread and namespace."""

    digest: bytes
    type: str
    data: bytes


def column_text(text: str) -> str:
    """Return ``text`` as a text column of every backend stores it: NUL characters
    (which PostgreSQL refuses in text) and lone surrogates (which UTF-8 cannot encode)
    become U+FFFD.

    Example:
        >>> column_text("a\\x00b\\ud83d")
        'a\\ufffdb\\ufffd'
    """
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return text


def message_digest(type_: str, data: bytes) -> bytes:
    """Return the 16-byte digest that keys a serialized message body.

    Example:
        >>> len(message_digest("msgpack", b"abc"))
        16
    """
    return hashlib.blake2b(type_.encode() + b"\x00" + data, digest_size=DIGEST_SIZE).digest()


def value_digest(type_: str, data: bytes) -> bytes:
    """Return the key of a stored channel value (apart from message digests)."""
    return hashlib.blake2b(
        type_.encode() + b"\x00" + data, digest_size=DIGEST_SIZE, person=b"stm-value"
    ).digest()


def list_digest(digests: Iterable[bytes]) -> bytes:
    """Return the digest of an ordered list of body digests."""
    return hashlib.blake2b(b"".join(digests), digest_size=DIGEST_SIZE).digest()


def chunk_digest(blob: bytes) -> bytes:
    """Return the key of a chunk row, apart from :func:`list_digest`."""
    return hashlib.blake2b(blob, digest_size=DIGEST_SIZE, person=b"stm-chunk").digest()


def pack_body(type_: str, data: bytes) -> tuple[str, bytes]:
    """Return the stored form of a body: zlib-compressed when that saves a tenth.

    Example:
        >>> stored = pack_body("msgpack", b"ab" * 500)
        >>> stored[0], unpack_body(*stored) == ("msgpack", b"ab" * 500)
        ('msgpack+zlib', True)
    """
    if len(data) >= _COMPRESS_FROM:
        packed = zlib.compress(data, 6)
        if len(packed) * 10 < len(data) * 9:
            return type_ + COMPRESSED, packed
    return type_, data


def unpack_body(type_: str, data: bytes) -> tuple[str, bytes]:
    """Inverse of :func:`pack_body`; raises :class:`FormatError` on corrupt data."""
    if type_.endswith(COMPRESSED):
        try:
            return type_[: -len(COMPRESSED)], zlib.decompress(data)
        except zlib.error as exc:
            raise FormatError(f"corrupt compressed body: {exc}") from exc
    return type_, data


def msgpack_array(items: Sequence[bytes]) -> bytes:
    """Concatenate msgpack-encoded values into the msgpack encoding of their array, so
    that many stored bodies decode in one ``loads_typed`` call (fixarray, array 16 and
    array 32 headers of the msgpack spec).

    Example:
        >>> list(msgpack_array([bytes([1]), bytes([2])]))
        [146, 1, 2]
    """
    n = len(items)
    if n < 16:
        header = bytes([0x90 | n])
    elif n < 1 << 16:
        header = b"\xdc" + n.to_bytes(2, "big")
    else:
        header = b"\xdd" + n.to_bytes(4, "big")
    return header + b"".join(items)


def split_digests(blob: bytes) -> list[bytes]:
    """Split concatenated digests.

    Example:
        >>> split_digests(b"a" * 16 + b"b" * 16)[1]
        b'bbbbbbbbbbbbbbbb'
    """
    if len(blob) % DIGEST_SIZE:
        raise FormatError("corrupt digest list: length is not a multiple of 16")
    return [d for (d,) in _DIGEST_STRUCT.iter_unpack(blob)]


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


def snapshot_entries(row: ListRow, chunks: Mapping[bytes, ListRow]) -> list[bytes]:
    """Expand the snapshot ``row`` into its body digests, its chunks taken from ``chunks``."""
    count = row.length // CHUNK_SIZE
    parts: list[bytes] = []
    for ref in chunk_refs(row):
        chunk = chunks.get(ref)
        if chunk is None or chunk.base != CHUNK_BASE:
            raise FormatError(f"missing chunk {ref.hex()} of list {row.digest.hex()}")
        parts.append(chunk.ops)
    parts.append(row.ops[count * DIGEST_SIZE :])
    entries = split_digests(b"".join(parts))
    if len(entries) != row.length:
        raise FormatError(f"list {row.digest.hex()} has {len(entries)} of {row.length} digests")
    return entries


Op = tuple[int, int] | bytes
"""A delta operation: ``(start, end)`` copies a snapshot range, bytes add one digest."""


def encode_ops(ops: Sequence[Op]) -> bytes:
    """Encode delta operations.

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


def parse_ops(ops: bytes) -> list[Op]:
    """Parse encoded operations back into ranges and digests.

    Example:
        >>> parse_ops(encode_ops([(0, 3), b"x" * 16]))[0]
        (0, 3)
    """
    result: list[Op] = []
    pos = 0
    try:
        while pos < len(ops):
            tag = ops[pos : pos + 1]
            pos += 1
            if tag == _LITERAL and pos + DIGEST_SIZE <= len(ops):
                result.append(ops[pos : pos + DIGEST_SIZE])
                pos += DIGEST_SIZE
            elif tag == _RANGE:
                result.append(_RANGE_STRUCT.unpack_from(ops, pos))
                pos += _RANGE_STRUCT.size
            else:
                raise FormatError(f"corrupt list record: bad op at byte {pos - 1}")
    except struct.error as exc:
        raise FormatError(f"corrupt list record: {exc}") from exc
    return result


def decode_ops(ops: bytes, base: Sequence[bytes]) -> list[bytes]:
    """Expand encoded operations against the snapshot ``base`` into body digests."""
    result: list[bytes] = []
    for op in parse_ops(ops):
        if isinstance(op, bytes):
            result.append(op)
        else:
            start, end = op
            if not 0 <= start <= end <= len(base):
                raise FormatError(f"corrupt list record: range {start}:{end} of {len(base)}")
            result.extend(base[start:end])
    return result


def merge_ops(head: Sequence[Op], tail: Sequence[Op]) -> list[Op]:
    """Concatenate two op lists, joining a range that ends where the next one starts."""
    ops = list(head)
    if ops and tail:
        last, first = ops[-1], tail[0]
        if isinstance(last, tuple) and isinstance(first, tuple) and last[1] == first[0]:
            ops[-1] = (last[0], first[1])
            return ops + list(tail[1:])
    return ops + list(tail)


def diff_ops(digests: Sequence[bytes], index: Mapping[bytes, int]) -> list[Op]:
    """Express ``digests`` as runs of a snapshot (``index``: digest -> position) and literals.

    Example:
        >>> a, b, x = b"a" * 16, b"b" * 16, b"x" * 16
        >>> diff_ops([a, b, x], {a: 0, b: 1})
        [(0, 2), b'xxxxxxxxxxxxxxxx']
    """
    ops: list[Op] = []
    run_start = run_end = -1
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


def expand_list(
    digest: bytes, rows: Mapping[bytes, ListRow]
) -> tuple[list[bytes], bytes, list[bytes], bytes | None]:
    """Expand the list ``digest`` found in ``rows`` (with its snapshot and chunks).

    Returns ``(body digests, snapshot digest, snapshot digests, delta ops or None)``;
    raises :class:`FormatError` when a record is missing or corrupt.
    """
    row = rows.get(digest)
    if row is None:
        raise FormatError(f"missing list record {digest.hex()}")
    if row.base == CHUNK_BASE:
        raise FormatError(f"list {digest.hex()} is a chunk, not a list")
    snapshot = digest if row.base is None else row.base
    base = rows.get(snapshot)
    if base is None or base.base is not None:
        raise FormatError(f"missing snapshot {snapshot.hex()} of list {digest.hex()}")
    base_entries = snapshot_entries(base, rows)
    if row.base is None:
        return base_entries, snapshot, base_entries, None
    entries = decode_ops(row.ops, base_entries)
    if len(entries) != row.length:
        raise FormatError(f"list {digest.hex()} has {len(entries)} of {row.length} digests")
    return entries, snapshot, base_entries, row.ops


def is_message_list(value: object) -> bool:
    """Whether ``value`` is a non-empty list of LangChain messages.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> is_message_list([HumanMessage("hi")]), is_message_list([]), is_message_list(["hi"])
        (True, False, False)
    """
    return type(value) is list and len(value) > 0 and all(isinstance(m, BaseMessage) for m in value)


def list_ref(digest: bytes, length: int) -> dict[str, Any]:
    """The reference that stands in a checkpoint for a stored message list."""
    return {MARKER_KEY: LIST_KIND, "list": digest.hex(), "n": length}


def value_ref(digest: bytes) -> dict[str, Any]:
    """The reference that stands in a checkpoint for a stored channel value."""
    return {MARKER_KEY: VALUE_KIND, "digest": digest.hex()}


def escape(value: Any) -> Any:
    """Escape a top-level channel value that could be taken for a reference.

    Example:
        >>> read_ref(escape({MARKER_KEY: "mine"}))
        ('escaped', {'__langgraph_stm__': 'mine'})
        >>> escape("plain")
        'plain'
    """
    if isinstance(value, dict) and MARKER_KEY in value:
        return {MARKER_KEY: ESCAPED_KIND, "value": value}
    return value


def read_ref(value: Any) -> tuple[str, Any] | None:
    """Classify a stored top-level channel value.

    Returns ``None`` for a plain value, ``("list", (digest, n))``, ``("value", digest)``
    or ``("escaped", original)``. A dict with :data:`MARKER_KEY` that is none of these
    (written before escaping existed) is returned as a plain value.
    """
    if not isinstance(value, dict) or MARKER_KEY not in value:
        return None
    kind = value[MARKER_KEY]
    try:
        if kind == LIST_KIND:
            return "list", (bytes.fromhex(value["list"]), int(value.get("n", -1)))
        if kind == VALUE_KIND:
            return "value", bytes.fromhex(value["digest"])
    except (KeyError, TypeError, ValueError) as exc:
        raise FormatError(f"corrupt reference {value!r}") from exc
    if kind == ESCAPED_KIND and "value" in value:
        return "escaped", value["value"]
    return None


def encode_refs(lists: Iterable[bytes], values: Iterable[bytes]) -> bytes:
    """Encode what one checkpoint references.

    Example:
        >>> decode_refs(encode_refs([b"l" * 16], [b"v" * 16]))[1]
        [b'vvvvvvvvvvvvvvvv']
    """
    return b"".join(_REF_LIST + d for d in lists) + b"".join(_REF_VALUE + d for d in values)


def decode_refs(blob: bytes) -> tuple[list[bytes], list[bytes]]:
    """Inverse of :func:`encode_refs`: ``(list digests, value digests)``."""
    step = DIGEST_SIZE + 1
    if len(blob) % step:
        raise FormatError("corrupt refs record")
    lists: list[bytes] = []
    values: list[bytes] = []
    for i in range(0, len(blob), step):
        tag, digest = blob[i : i + 1], blob[i + 1 : i + step]
        (lists if tag == _REF_LIST else values).append(digest)
    return lists, values
