"""Encryption at rest (``STMSaver(..., encryption_key=...)``): keys and sealing (the
saver's mixin and ``reencrypt()`` are in :mod:`._encryption`).

**Keys.** A key is 32 random bytes (AES-256-GCM), given as ``bytes`` or as the
URL-safe base64 text :func:`generate_key` returns. A :class:`Keyring` holds the
*primary* key, which seals every new write, and *old* keys, which still open what they
sealed. Every key has a *key id*: 8 hex digits of a MAC of a constant under the key,
so the id names the key without revealing anything about it. ``encryption_key`` may
also be a callable ``owner -> key or Keyring``: the owner is the call's tenant
(``config["configurable"][tenant_key]`` with tenant scoping on, else ``None``) at
write time, and is recorded (in plaintext, like ``stm_owners``) in what is sealed, so a
read finds the key of whoever wrote the data without looking anything up.

**Sealed bytes.** ``b"S1" | key id (4 bytes) | owner | thread id | nonce (12) |
ciphertext and tag``; the header (everything before the nonce) and the *purpose* (what
the bytes are: a checkpoint blob, a message body, a metadata value...) are the
associated data, so a sealed value opens only as what it was sealed as, and a reader
that knows which thread it reads refuses a value sealed for another thread. A value
stored in a JSON column is a string token ``"$stm1:<key id>:<base64 of the sealed
bytes>"``.

**Where.** The inner saver's checkpoint blobs and pending writes are sealed by its
``serde``, replaced by LangGraph's ``EncryptedSerializer`` over :class:`StmCipher`
(the type column becomes ``msgpack+stm1``); :class:`Crypt` seals our message bodies
and value rows (type suffix ``+stm1``), the projection's ``state`` column (one token),
audit entries, and the metadata values other than LangGraph's own keys
(:data:`PLAIN_METADATA`), which stay plaintext so ``list(filter=...)`` on them runs in
the database. A filter on any other key is applied after decryption.

A wrong, missing or dropped key raises :class:`~langgraph_stm.errors.EncryptionKeyError`
naming the thread and key id; data never decrypts to garbage (GCM authenticates it).

Example:
    >>> ring = Keyring(generate_key())
    >>> sealed = seal(ring, b"hello", thread_id="t1", owner=None, purpose=b"doc")
    >>> open_sealed(lambda owner: ring, sealed, purpose=b"doc", thread_id="t1")
    b'hello'
    >>> b"hello" in sealed
    False
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import hashlib
import json
import os
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, cast

from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_stm._errors import EncryptionKeyError, InvalidArgumentError
from langgraph_stm.checkpoint._encoder import Loaded, WriteSet
from langgraph_stm.checkpoint._format import (
    ESCAPED_KIND,
    MARKER_KEY,
    BodyRow,
    ValueRow,
    unpack_body,
)
from langgraph_stm.checkpoint._tables import ThreadRow

__all__ = [
    "CIPHER_NAME",
    "PLAIN_METADATA",
    "SUFFIX",
    "TOKEN_PREFIX",
    "Crypt",
    "KeySource",
    "Keyring",
    "Resolver",
    "StmCipher",
    "generate_key",
    "is_token",
    "key_error",
    "key_id",
    "make_token",
    "open_sealed",
    "parse",
    "resolver_of",
    "scope",
    "seal",
    "token_bytes",
]

CIPHER_NAME = "stm1"
"""The cipher name: ``EncryptedSerializer`` types end with ``+stm1``, and so do ours."""
SUFFIX = "+" + CIPHER_NAME
TOKEN_PREFIX = "$stm1:"
"""Start of a sealed value stored in a JSON column."""
_MAGIC = b"S1"
_NONCE = 12
_NO_OWNER = 0xFFFF
PLAIN_METADATA = frozenset(
    {"source", "step", "parents", "run_id", "counters_since_delta_snapshot", "writes"}
)
"""Metadata keys LangGraph itself writes and reads (its loop compares ``run_id``,
``step`` and ``parents`` drive history, ``source`` is what users filter on): stored in
plaintext. Every other metadata value is sealed."""


def _aesgcm() -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        raise ImportError(
            "STMSaver(encryption_key=...) needs the cryptography package: "
            "pip install 'langgraph-stm[encryption]'"
        ) from None
    return AESGCM


def generate_key() -> str:
    """Return a new random 32-byte key as URL-safe base64 text (store it in a secret store).

    Example:
        >>> len(base64.urlsafe_b64decode(generate_key()))
        32
    """
    return base64.urlsafe_b64encode(os.urandom(32)).decode("ascii")


def _key_bytes(key: object) -> bytes:
    if isinstance(key, bytes | bytearray):
        raw = bytes(key)
    elif isinstance(key, str):
        try:
            raw = base64.urlsafe_b64decode(key + "=" * (-len(key) % 4))
        except (binascii.Error, ValueError):
            raw = b""
    else:
        raise InvalidArgumentError(
            f"encryption key: expected bytes, a base64 str or a Keyring, got {type(key).__name__}"
        )
    if len(raw) != 32:
        raise InvalidArgumentError(
            "encryption key: a key is 32 bytes (or their URL-safe base64 text, as "
            "langgraph_stm.encryption.generate_key() returns); got "
            f"{len(raw)} bytes"
        )
    return raw


def _raw_id(key: bytes) -> bytes:
    return hashlib.blake2b(b"langgraph-stm key id", key=key, digest_size=4).digest()


def key_id(key: bytes | str) -> str:
    """The key id of ``key``: 8 hex digits that name it without revealing it.

    Example:
        >>> key_id(bytes(32))
        'b0bc1cc0'
    """
    return _raw_id(_key_bytes(key)).hex()


class Keyring:
    """A primary key that seals new writes, and old keys that still open old rows.

    Example:
        >>> old, new = generate_key(), generate_key()
        >>> ring = Keyring(new, old=[old])
        >>> ring.primary_id == key_id(new), ring.ids == (key_id(new), key_id(old))
        (True, True)
    """

    __slots__ = ("_aead", "_keys", "primary_id")

    def __init__(self, primary: bytes | str, *, old: Iterable[bytes | str] = ()) -> None:
        keys = [_key_bytes(primary), *(_key_bytes(k) for k in old)]
        self._keys: dict[bytes, bytes] = {}
        for key in keys:
            self._keys.setdefault(_raw_id(key), key)
        self.primary_id: str = _raw_id(keys[0]).hex()
        """Id of the key that seals new writes."""
        self._aead: dict[bytes, Any] = {}

    @property
    def ids(self) -> tuple[str, ...]:
        """Ids of every key, the primary first."""
        return tuple(k.hex() for k in self._keys)

    def key(self, raw_id: bytes) -> bytes | None:
        """The key whose id is ``raw_id`` (4 bytes), if held."""
        return self._keys.get(raw_id)

    def aead(self, raw_id: bytes) -> Any:
        """The AES-GCM object of the key ``raw_id`` (which the ring holds), made once."""
        made = self._aead.get(raw_id)
        if made is None:
            made = self._aead[raw_id] = _aesgcm()(self._keys[raw_id])
        return made

    def __repr__(self) -> str:
        return f"Keyring(ids={list(self.ids)!r})"


KeySource = bytes | str | Keyring | Callable[[str | None], bytes | str | Keyring]
"""What ``STMSaver(encryption_key=...)`` takes."""


def keyring_of(value: object) -> Keyring:
    """``value`` (a key or a Keyring) as a Keyring."""
    return value if isinstance(value, Keyring) else Keyring(cast(Any, value))


Resolver = Callable[[str | None], Keyring]


def resolver_of(source: KeySource) -> Resolver:
    """The owner -> Keyring function of an ``encryption_key=`` value."""
    _aesgcm()
    if isinstance(source, bytes | bytearray | str | Keyring):
        ring = keyring_of(source)
        return lambda owner: ring
    if not callable(source):
        raise InvalidArgumentError(
            "STMSaver(encryption_key=...) takes a key (32 bytes or base64 text), a Keyring, "
            f"or a callable owner -> key, got {type(source).__name__}"
        )
    made: dict[str | None, tuple[object, Keyring]] = {}

    def resolve(owner: str | None) -> Keyring:
        value = source(owner)
        known = made.get(owner)
        if known is not None and known[0] is value:
            return known[1]
        ring = keyring_of(value)
        if len(made) > 1024:
            made.clear()
        made[owner] = (value, ring)
        return ring

    return resolve


# -- sealing -------------------------------------------------------------------------------
def _text(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">H", _NO_OWNER)
    data = value.encode("utf-8", "surrogatepass")
    if len(data) >= _NO_OWNER:
        raise InvalidArgumentError(f"encryption: id too long to seal ({len(data)} bytes)")
    return struct.pack(">H", len(data)) + data


def seal(
    ring: Keyring, plaintext: bytes, *, thread_id: str, owner: str | None, purpose: bytes
) -> bytes:
    """Seal ``plaintext`` for ``thread_id`` with ``ring``'s primary key (AES-256-GCM)."""
    raw_id = bytes.fromhex(ring.primary_id)
    header = _MAGIC + raw_id + _text(owner) + _text(thread_id)
    nonce = os.urandom(_NONCE)
    sealed: bytes = ring.aead(raw_id).encrypt(nonce, plaintext, header + purpose)
    return header + nonce + sealed


def _read_text(data: bytes, at: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">H", data, at)
    at += 2
    if n == _NO_OWNER:
        return None, at
    if at + n > len(data):
        raise ValueError("truncated")
    return data[at : at + n].decode("utf-8", "surrogatepass"), at + n


def parse(sealed: bytes) -> tuple[bytes, str | None, str, int]:
    """``(raw key id, owner, thread id, end of header)`` of sealed bytes
    (``ValueError`` when they are not sealed bytes)."""
    if sealed[:2] != _MAGIC or len(sealed) < 10:
        raise ValueError("not sealed by langgraph-stm")
    raw_id = sealed[2:6]
    owner, at = _read_text(sealed, 6)
    thread, at = _read_text(sealed, at)
    if thread is None or at + _NONCE + 16 > len(sealed):
        raise ValueError("truncated")
    return raw_id, owner, thread, at


def open_sealed(
    resolve: Resolver | None, sealed: bytes, *, purpose: bytes, thread_id: str | None
) -> bytes:
    """Open bytes :func:`seal` made; ``thread_id`` (when known) must be the one sealed.

    Raises :class:`EncryptionKeyError` for a missing or wrong key, a value of another
    thread, or bytes that were altered.
    """
    try:
        raw_id, owner, sealed_for, at = parse(bytes(sealed))
    except (ValueError, struct.error, UnicodeDecodeError):
        raise key_error(thread_id or "?", "", "is not readable sealed data (altered?)") from None
    thread = thread_id if thread_id is not None else sealed_for
    kid = raw_id.hex()
    if thread_id is not None and sealed_for != thread_id:
        raise key_error(thread, kid, f"was sealed for thread {sealed_for!r}, not this one")
    if resolve is None:
        raise key_error(
            thread, kid, "is encrypted, but this STMSaver has no encryption_key; pass the key"
        )
    try:
        ring = resolve(owner)
    except EncryptionKeyError:
        raise
    except Exception as exc:  # the user's key callable failed
        raise key_error(thread, kid, f"needs the key of its owner, which failed: {exc!r}") from exc
    if ring.key(raw_id) is None:
        raise key_error(
            thread,
            kid,
            "is sealed with a key this saver's keyring does not hold: pass that key "
            "(Keyring(primary, old=[...])) and run reencrypt() before dropping it",
        )
    from cryptography.exceptions import InvalidTag

    header = bytes(sealed[:at])
    nonce = bytes(sealed[at : at + _NONCE])
    try:
        plain: bytes = ring.aead(raw_id).decrypt(
            nonce, bytes(sealed[at + _NONCE :]), header + purpose
        )
        return plain
    except InvalidTag:
        raise key_error(
            thread, kid, "does not authenticate under the key of that id (altered or moved)"
        ) from None


def key_error(thread_id: str, kid: str, what: str) -> EncryptionKeyError:
    named = f" (key id {kid!r})" if kid else ""
    return EncryptionKeyError(
        f"thread {thread_id!r}: stored data{named} {what}. Nothing was decrypted.",
        thread_id=thread_id,
        key_id=kid or None,
    )


def is_token(value: object) -> bool:
    """Whether ``value`` is a sealed JSON token."""
    return isinstance(value, str) and value.startswith(TOKEN_PREFIX)


def token_key_id(token: str) -> str:
    """The key id a token names."""
    return token[len(TOKEN_PREFIX) : len(TOKEN_PREFIX) + 8]


def make_token(sealed: bytes) -> str:
    """The JSON string form of sealed bytes."""
    kid = sealed[2:6].hex()
    return f"{TOKEN_PREFIX}{kid}:{base64.urlsafe_b64encode(sealed).decode('ascii')}"


def token_bytes(token: str, thread_id: str | None) -> bytes:
    """The sealed bytes of a token."""
    try:
        return base64.urlsafe_b64decode(token[len(TOKEN_PREFIX) + 9 :])
    except (binascii.Error, ValueError):
        raise key_error(thread_id or "?", token_key_id(token), "is not a readable token") from None


# -- the context of an inner call (the serde cipher has no other way to know it) -----------
_SCOPE: contextvars.ContextVar[tuple[str, str | None] | None] = contextvars.ContextVar(
    "langgraph_stm_crypto_scope", default=None
)


@contextmanager
def scope(thread_id: str | None, owner: str | None) -> Iterator[None]:
    """Seal and open the inner saver's blobs for ``thread_id`` (of ``owner``) meanwhile."""
    token = _SCOPE.set(None if thread_id is None else (thread_id, owner))
    try:
        yield
    finally:
        _SCOPE.reset(token)


class StmCipher:
    """The ``CipherProtocol`` of LangGraph's ``EncryptedSerializer`` installed on the
    inner saver: seals for the thread of the call in progress (:func:`scope`)."""

    def __init__(self, resolve: Resolver) -> None:
        self.resolve = resolve

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        current = _SCOPE.get()
        if current is None:
            raise EncryptionKeyError(
                "STMSaver: the inner saver wrote outside a checkpoint write of ours; "
                "write through the STMSaver, not its inner saver."
            )
        thread_id, owner = current
        ring = self.resolve(owner)
        return CIPHER_NAME, seal(ring, plaintext, thread_id=thread_id, owner=owner, purpose=b"blob")

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        current = _SCOPE.get()
        if ciphername != CIPHER_NAME:
            raise key_error(current[0] if current else "?", "", f"uses cipher {ciphername!r}")
        return open_sealed(
            self.resolve,
            ciphertext,
            purpose=b"blob",
            thread_id=None if current is None else current[0],
        )


# -- what Crypt seals in our rows ----------------------------------------------------------
class Crypt:
    """Seals and opens our rows and metadata values (``None`` resolver: no key, so
    sealed data met on reads raises :class:`EncryptionKeyError`)."""

    def __init__(self, resolve: Resolver | None, serde: SerializerProtocol) -> None:
        self.resolve = resolve
        self.serde = serde
        """The plaintext serde (metadata values are sealed in its typed form)."""

    @property
    def on(self) -> bool:
        return self.resolve is not None

    @staticmethod
    def owner_now() -> str | None:
        """The owner of the checkpoint write in progress (:func:`scope`)."""
        current = _SCOPE.get()
        return None if current is None else current[1]

    def opened_tuple(self, tup: CheckpointTuple) -> CheckpointTuple:
        """``tup`` with its metadata values opened."""
        metadata = tup.metadata
        if not metadata or not any(is_token(v) for v in metadata.values()):
            return tup
        thread = tup.config.get("configurable", {}).get("thread_id")
        opened = self.open_metadata(None if thread is None else str(thread), metadata)
        return tup._replace(metadata=cast(CheckpointMetadata, opened))

    def _seal(self, thread_id: str, owner: str | None, data: bytes, purpose: bytes) -> bytes:
        assert self.resolve is not None
        ring = self.resolve(owner)
        return seal(ring, data, thread_id=thread_id, owner=owner, purpose=purpose)

    def _open(self, thread_id: str | None, data: bytes, purpose: bytes) -> bytes:
        return open_sealed(self.resolve, data, purpose=purpose, thread_id=thread_id)

    # -- bodies and values (bytes columns, type suffix) ----------------------------------
    def seal_typed(
        self, thread_id: str, owner: str | None, type_: str, data: bytes, purpose: bytes
    ) -> tuple[str, bytes]:
        return type_ + SUFFIX, self._seal(thread_id, owner, data, purpose + type_.encode())

    def open_typed(
        self, thread_id: str, type_: str, data: bytes, purpose: bytes
    ) -> tuple[str, bytes]:
        if not type_.endswith(SUFFIX):
            return type_, data
        plain = type_[: -len(SUFFIX)]
        return plain, self._open(thread_id, data, purpose + plain.encode())

    def seal_write(self, thread_id: str, owner: str | None, write: WriteSet) -> WriteSet:
        """``write`` with its bodies and value rows sealed (content digests unchanged)."""

        def bodies(rows: Sequence[BodyRow]) -> list[BodyRow]:
            out = []
            for b in rows:
                type_, data = self.seal_typed(thread_id, owner, b.type, b.data, b"body")
                out.append(BodyRow(b.digest, b.message_id, type_, data))
            return out

        values = []
        for v in write.value_rows:
            type_, data = self.seal_typed(thread_id, owner, v.type, v.data, b"value")
            values.append(ValueRow(v.digest, type_, data))
        cold = write.cold
        sealed_cold = None
        if cold is not None:

            def sealed_cold_rows() -> Any:
                b, lists = cold()
                return bodies(b), lists

            sealed_cold = sealed_cold_rows
        return replace(write, bodies=bodies(write.bodies), value_rows=values, cold=sealed_cold)

    def open_loaded(self, thread_id: str, loaded: Loaded) -> Loaded:
        """``loaded`` with its bodies and values opened (as is when none is sealed)."""
        if not any(t.endswith(SUFFIX) for t, _ in loaded.bodies.values()) and not any(
            t.endswith(SUFFIX) for t, _ in loaded.values.values()
        ):
            return loaded
        bodies = {}
        for digest, (type_, data) in loaded.bodies.items():
            if type_.endswith(SUFFIX):
                bodies[digest] = unpack_body(*self.open_typed(thread_id, type_, data, b"body"))
            else:
                bodies[digest] = (type_, data)
        values = {
            d: self.open_typed(thread_id, t, data, b"value")
            for d, (t, data) in loaded.values.items()
        }
        return Loaded(loaded.lists, bodies, values)

    # -- JSON columns (tokens) -----------------------------------------------------------
    def seal_json(self, thread_id: str, owner: str | None, value: Any, purpose: bytes) -> str:
        type_, data = self.serde.dumps_typed(value)
        payload = type_.encode() + b"\x00" + data
        return make_token(self._seal(thread_id, owner, payload, purpose))

    def open_json(self, thread_id: str | None, token: str, purpose: bytes) -> Any:
        payload = self._open(thread_id, token_bytes(token, thread_id), purpose)
        type_, _, data = payload.partition(b"\x00")
        return self.serde.loads_typed((type_.decode(), data))

    def seal_metadata(
        self, thread_id: str, owner: str | None, metadata: Mapping[str, Any]
    ) -> dict[str, Any]:
        """``metadata`` with every value but LangGraph's own keys sealed."""
        return {
            k: v
            if k in PLAIN_METADATA
            else self.seal_json(thread_id, owner, v, b"meta:" + k.encode())
            for k, v in metadata.items()
        }

    def open_metadata(self, thread_id: str | None, metadata: Mapping[str, Any]) -> dict[str, Any]:
        return {
            k: self.open_json(thread_id, v, b"meta:" + k.encode()) if is_token(v) else v
            for k, v in metadata.items()
        }

    def seal_row(self, row: ThreadRow, owner: str | None) -> ThreadRow:
        """A projection row with its ``state`` sealed (one JSON string token)."""
        token = self.seal_json(row.thread_id, owner, row.state, b"state")
        return replace(row, state=json.dumps(token))

    def open_row(self, row: ThreadRow) -> ThreadRow:
        """A stored projection row with its ``state`` opened (rows of no key pass)."""
        if not row.state.startswith('"' + TOKEN_PREFIX):
            return row
        state = self.open_json(row.thread_id, json.loads(row.state), b"state")
        return replace(row, state=str(state))

    def seal_entry(self, thread_id: str, owner: str | None, document: str) -> str:
        """An audit entry document sealed (a JSON string token)."""
        return json.dumps(self.seal_json(thread_id, owner, document, b"audit"))

    def open_entry(self, thread_id: str, stored: str) -> str:
        if not stored.startswith('"' + TOKEN_PREFIX):
            return stored
        return str(self.open_json(thread_id, json.loads(stored), b"audit"))

    # -- channel values a saver stores inline ------------------------------------------
    @staticmethod
    def boxed(
        checkpoint: Checkpoint, new_versions: ChannelVersions
    ) -> tuple[Checkpoint, ChannelVersions]:
        """The checkpoint with its primitive channel values boxed (escaped), so a saver
        that stores primitives inline in plaintext (PostgreSQL's checkpoint JSON) stores
        them as (sealed) blobs; reads unbox them as any escaped value. Every boxed
        channel is in the versions written (an idempotent insert when its blob exists),
        so a value stored inline before encryption was turned on is not lost."""
        values = dict(checkpoint.get("channel_values", {}))
        versions = dict(new_versions)
        stored = checkpoint.get("channel_versions", {})
        for channel, value in values.items():
            if isinstance(value, str | int | float) and channel in stored:
                values[channel] = {MARKER_KEY: ESCAPED_KIND, "value": value}
                versions.setdefault(channel, stored[channel])
        return cast(Checkpoint, {**checkpoint, "channel_values": values}), versions


# -- the mixin -------------------------------------------------------------------------------
