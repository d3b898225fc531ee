"""The ``Encryption`` mixin of :class:`STMSaver` (``encryption_key=...``) and
``reencrypt()``: where the saver seals and opens what it stores, with the keys, sealed
format and :class:`~._crypto.Crypt` of :mod:`._crypto` (see there and
``docs/encryption.md``).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)

from langgraph_stm._errors import EncryptionKeyError, InvalidArgumentError
from langgraph_stm.checkpoint._crypto import (
    PLAIN_METADATA,
    SUFFIX,
    TOKEN_PREFIX,
    Crypt,
    KeySource,
    Resolver,
    StmCipher,
    is_token,
    key_error,
    make_token,
    open_sealed,
    parse,
    resolver_of,
    scope,
    seal,
    token_bytes,
)
from langgraph_stm.checkpoint._inner import (
    METADATA_TABLE,
    SEALED_TABLES,
    family,
    memory_rewrite,
    stores_primitives_inline,
)
from langgraph_stm.checkpoint._saver import SaverCore, bridged
from langgraph_stm.checkpoint._tables import Dialect, Plan, Stmt

__all__ = ["Encryption", "ReencryptReport"]


def _plain_config(config: RunnableConfig) -> RunnableConfig:
    """The config handed to the inner saver: its ids only, so no ``metadata`` or
    ``configurable`` value is copied into the stored metadata in plaintext."""
    c = config.get("configurable", {})
    keep: dict[str, Any] = {
        k: c[k] for k in ("thread_id", "checkpoint_ns", "checkpoint_id") if k in c
    }
    return {"configurable": keep}


def _split_filter(
    filter: dict[str, Any] | None,
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    if not filter:
        return filter, {}
    plain = {k: v for k, v in filter.items() if k in PLAIN_METADATA}
    rest = {k: v for k, v in filter.items() if k not in PLAIN_METADATA}
    return plain or None, rest


def _matches(tup: CheckpointTuple, wanted: Mapping[str, Any]) -> bool:
    metadata: Mapping[str, Any] = tup.metadata or {}
    return all(k in metadata and metadata[k] == v for k, v in wanted.items())


class Encryption(SaverCore):
    """The ``encryption_key=`` option of :class:`STMSaver` (see the module doc); without
    it, a read of sealed data raises :class:`EncryptionKeyError`."""

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        /,
        *,
        encryption_key: KeySource | None = None,
        **options: Any,
    ) -> None:
        resolve = None if encryption_key is None else resolver_of(encryption_key)
        from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

        serde = inner.serde
        if isinstance(serde, EncryptedSerializer) and isinstance(serde.cipher, StmCipher):
            inner.serde = serde.serde  # wrapped by another STMSaver: this saver's key now
        elif isinstance(serde, EncryptedSerializer) and resolve is not None:
            raise InvalidArgumentError(
                "STMSaver(encryption_key=...): the inner saver's serde is encrypted "
                "already; pass an inner saver with a plain serde"
            )
        super().__init__(inner, **options)
        self._crypt = Crypt(resolve, self._encoder.serde)
        self._pipeline.crypt = self._crypt
        audit = getattr(self, "_audit", None)
        if audit is not None:
            audit.crypt = self._crypt
        if resolve is not None:
            inner.serde = EncryptedSerializer(StmCipher(resolve), inner.serde)

    @property
    def encrypted(self) -> bool:
        """Whether the saver seals what it writes."""
        return self._crypt.on

    def _owner(self, config: RunnableConfig | None) -> str | None:
        key = getattr(self, "tenant_key", None)
        if key is None or config is None:
            return None
        value = config.get("configurable", {}).get(key)
        return None if value is None else str(value)

    def _scope_of(self, config: RunnableConfig | None) -> Any:
        thread = None if config is None else config.get("configurable", {}).get("thread_id")
        return scope(None if thread is None else str(thread), self._owner(config))

    def _to_inner(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]:
        """Seal the metadata values (the config's copied in first, so none reaches the
        inner saver in plaintext) and box inline values (see :meth:`Crypt.boxed`)."""
        config, checkpoint, metadata, new_versions = super()._to_inner(
            config, checkpoint, metadata, new_versions
        )
        if not self._crypt.on:
            return config, checkpoint, metadata, new_versions
        merged = get_checkpoint_metadata(config, metadata)
        thread_id = str(config.get("configurable", {}).get("thread_id", ""))
        sealed = self._crypt.seal_metadata(thread_id, self._owner(config), merged)
        if stores_primitives_inline(self._inner):
            checkpoint, new_versions = Crypt.boxed(checkpoint, new_versions)
        return _plain_config(config), checkpoint, cast(CheckpointMetadata, sealed), new_versions

    # -- LangGraph's methods: the scope of each inner call --------------------------------
    @bridged("aput")
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store the checkpoint sealed (see the module doc)."""
        with self._scope_of(config):
            return super().put(config, checkpoint, metadata, new_versions)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async twin of :meth:`put`."""
        with self._scope_of(config):
            return await super().aput(config, checkpoint, metadata, new_versions)

    @bridged("aput_writes")
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes sealed."""
        with self._scope_of(config):
            super().put_writes(config, writes, task_id, task_path)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of :meth:`put_writes`."""
        with self._scope_of(config):
            await super().aput_writes(config, writes, task_id, task_path)

    @bridged("aget_tuple")
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Fetch a checkpoint tuple, opened."""
        with self._scope_of(config):
            found: CheckpointTuple | None = self._guarded(
                config, lambda: super(Encryption, self).get_tuple(config)
            )
            return found

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async twin of :meth:`get_tuple`."""
        with self._scope_of(config):
            try:
                return await super().aget_tuple(config)
            except (NotImplementedError, ValueError, TypeError) as exc:
                raise self._unkeyed(config, exc) from exc

    def _guarded(self, config: RunnableConfig | None, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except (NotImplementedError, ValueError, TypeError) as exc:
            raise self._unkeyed(config, exc) from exc

    def _unkeyed(self, config: RunnableConfig | None, exc: BaseException) -> BaseException:
        """The error of an inner read that met sealed blobs without a key (else ``exc``)."""
        if self._crypt.on or SUFFIX not in str(exc) or isinstance(exc, EncryptionKeyError):
            return exc
        thread = None if config is None else config.get("configurable", {}).get("thread_id")
        return key_error(
            "?" if thread is None else str(thread),
            "",
            "is encrypted, but this STMSaver has no encryption_key; pass the key",
        )

    @bridged("alist")
    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """List checkpoint tuples, opened; a filter on a sealed metadata key is applied
        after decryption."""
        plain, rest = _split_filter(filter) if self._crypt.on else (filter, {})
        with self._scope_of(config):
            page = self._guarded(
                config,
                lambda: list(
                    super(Encryption, self).list(
                        config, filter=plain, before=before, limit=None if rest else limit
                    )
                ),
            )
        shown = [t for t in page if _matches(t, rest)]
        yield from shown if limit is None or not rest else shown[:limit]

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async twin of :meth:`list`."""
        plain, rest = _split_filter(filter) if self._crypt.on else (filter, {})
        with self._scope_of(config):
            try:
                page = [
                    t
                    async for t in super().alist(
                        config, filter=plain, before=before, limit=None if rest else limit
                    )
                ]
            except (NotImplementedError, ValueError, TypeError) as exc:
                raise self._unkeyed(config, exc) from exc
        shown = [t for t in page if _matches(t, rest)]
        for tup in shown if limit is None or not rest else shown[:limit]:
            yield tup

    # -- rotation ------------------------------------------------------------------------
    @bridged("areencrypt")
    def reencrypt(self) -> ReencryptReport:
        """Rewrite every value sealed with a key other than its owner's primary key with
        the primary key (the inner saver's blobs, pending writes and metadata, our bodies,
        values, projection rows and audit entries), so the old keys can be dropped.

        Values stored before encryption was turned on are left as they are. Each table
        is rewritten in one transaction; a second run finds nothing to do.

        Example:
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph_stm import STMSaver
            >>> from langgraph_stm.encryption import generate_key
            >>> STMSaver(InMemorySaver(), encryption_key=generate_key()).reencrypt().total
            0
        """
        started = time.perf_counter()
        rotation = self._rotation()
        counts: dict[str, int] = {}
        if self._inner.kind == "memory":
            counts["inner"] = memory_rewrite(self._inner, rotation.typed_for_memory)
        for name, plan in rotation.plans():
            counts[name] = self._sync_driver().write(plan)
        return ReencryptReport(counts, time.perf_counter() - started)

    async def areencrypt(self) -> ReencryptReport:
        """Async twin of :meth:`reencrypt`."""
        started = time.perf_counter()
        rotation = self._rotation()
        counts: dict[str, int] = {}
        if self._inner.kind == "memory":
            counts["inner"] = memory_rewrite(self._inner, rotation.typed_for_memory)
        for name, plan in rotation.plans():
            counts[name] = await self._awrite(plan)
        return ReencryptReport(counts, time.perf_counter() - started)

    def _rotation(self) -> _Rotation:
        if not self._crypt.on:
            raise InvalidArgumentError(
                "reencrypt() needs STMSaver(encryption_key=Keyring(new, old=[...]))"
            )
        kind = family(self._inner)
        inner_tables = SEALED_TABLES.get(kind or "", ())
        metadata = METADATA_TABLE if kind in ("sqlite", "postgres") else None
        return _Rotation(self._crypt, self._tables.dialect, inner_tables, metadata)


@dataclass(frozen=True, slots=True)
class ReencryptReport:
    """What :meth:`STMSaver.reencrypt` rewrote.

    Example:
        >>> ReencryptReport({"stm_bodies": 3, "stm_threads": 1}, 0.01).total
        4
    """

    rewritten: dict[str, int]
    """Values rewritten, by table (``inner`` for an ``InMemorySaver``'s storage)."""
    seconds: float
    """Wall-clock time taken."""

    @property
    def total(self) -> int:
        """Values rewritten in all."""
        return sum(self.rewritten.values())


class _Rotation:
    """Plans rewriting sealed values of old keys with their owner's primary key."""

    def __init__(
        self,
        crypt: Crypt,
        d: Dialect,
        inner_tables: Sequence[tuple[str, tuple[str, ...], str, str]],
        metadata: tuple[str, tuple[str, ...], str] | None,
    ) -> None:
        self.crypt = crypt
        self.d = d
        self.inner_tables = inner_tables
        self.metadata = metadata
        assert crypt.resolve is not None
        self.resolve: Resolver = crypt.resolve

    def resealed(self, thread_id: str, sealed: bytes, purpose: bytes) -> bytes | None:
        """``sealed`` under its owner's primary key, or ``None`` when it is already."""
        raw_id, owner, _, _ = parse(bytes(sealed))
        ring = self.resolve(owner)
        if raw_id.hex() == ring.primary_id:
            return None
        plain = open_sealed(self.resolve, sealed, purpose=purpose, thread_id=thread_id)
        return seal(ring, plain, thread_id=thread_id, owner=owner, purpose=purpose)

    def resealed_token(self, thread_id: str, token: str, purpose: bytes) -> str | None:
        new = self.resealed(thread_id, token_bytes(token, thread_id), purpose)
        return None if new is None else make_token(new)

    def resealed_metadata(
        self, thread_id: str, metadata: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        out = dict(metadata)
        changed = False
        for key, value in metadata.items():
            if is_token(value):
                new = self.resealed_token(thread_id, value, b"meta:" + key.encode())
                if new is not None:
                    out[key], changed = new, True
        return out if changed else None

    def typed_for_memory(
        self, thread_id: str, typed: tuple[str, bytes], is_metadata: bool
    ) -> tuple[str, bytes] | None:
        type_, data = typed
        if not type_.endswith(SUFFIX):
            return None
        if is_metadata:  # sealed as a whole, holding sealed values
            plain_type = type_[: -len(SUFFIX)]
            plain = open_sealed(self.resolve, data, purpose=b"blob", thread_id=thread_id)
            metadata = self.crypt.serde.loads_typed((plain_type, plain))
            inner = self.resealed_metadata(thread_id, metadata) if metadata else None
            if inner is not None:
                _, owner, _, _ = parse(bytes(data))
                _, payload = self.crypt.serde.dumps_typed(inner)  # the plain serde
                ring = self.resolve(owner)
                sealed = seal(ring, payload, thread_id=thread_id, owner=owner, purpose=b"blob")
                return type_, sealed
        new = self.resealed(thread_id, data, b"blob")
        return None if new is None else (type_, new)

    def plans(self) -> Iterator[tuple[str, Plan]]:
        d = self.d
        for table, keys, type_col, data_col in self.inner_tables:
            yield table, self._typed_plan(table, keys, type_col, data_col, b"blob", False)
        if self.metadata is not None:
            yield self.metadata[0] + ".metadata", self._metadata_plan()
        body_keys = ("thread_id", "checkpoint_ns", "digest")
        yield "stm_bodies", self._typed_plan("stm_bodies", body_keys, "type", "data", b"body", True)
        yield (
            "stm_values",
            self._typed_plan("stm_values", body_keys, "type", "data", b"value", True),
        )
        yield (
            "stm_threads",
            self._token_plan(
                "stm_threads", ("thread_id",), d.state_column, "state", b"state", d.state_param
            ),
        )
        yield (
            "stm_audit",
            self._token_plan(
                "stm_audit", ("thread_id", "run_id"), "entry", "entry", b"audit", d.param
            ),
        )

    def _typed_plan(
        self,
        table: str,
        keys: tuple[str, ...],
        type_col: str,
        data_col: str,
        purpose: bytes,
        typed_purpose: bool,
    ) -> Plan:
        p = self.d.param
        cols = ", ".join(keys)
        rows = (
            yield Stmt(
                f"SELECT {cols}, {type_col}, {data_col} FROM {table} WHERE {type_col} LIKE {p}",
                ["%" + SUFFIX],
            )
        ) or []
        updates = []
        for row in rows:
            type_, data = str(row[-2]), row[-1]
            if data is None:
                continue
            extra = type_[: -len(SUFFIX)].encode() if typed_purpose else b""
            new = self.resealed(str(row[0]), bytes(data), purpose + extra)
            if new is not None:
                updates.append((new, *row[: len(keys)]))
        if updates:
            where = " AND ".join(f"{k} = {p}" for k in keys)
            sql = f"UPDATE {table} SET {data_col} = {p} WHERE {where}"
            yield Stmt(sql, updates, many=True)
        return len(updates)

    def _token_plan(
        self,
        table: str,
        keys: tuple[str, ...],
        select: str,
        column: str,
        purpose: bytes,
        marker: str,
    ) -> Plan:
        p = self.d.param
        cols = ", ".join(keys)
        rows = (yield Stmt(f"SELECT {cols}, {select} FROM {table}")) or []
        updates = []
        for row in rows:
            stored = str(row[-1])
            if not stored.startswith('"' + TOKEN_PREFIX):
                continue
            new = self.resealed_token(str(row[0]), json.loads(stored), purpose)
            if new is not None:
                updates.append((json.dumps(new), *row[: len(keys)]))
        if updates:
            where = " AND ".join(f"{k} = {p}" for k in keys)
            yield Stmt(f"UPDATE {table} SET {column} = {marker} WHERE {where}", updates, many=True)
        return len(updates)

    def _metadata_plan(self) -> Plan:
        assert self.metadata is not None
        table, keys, column = self.metadata
        p = self.d.param
        cols = ", ".join(keys)
        postgres = self.d.param == "%s"
        select = f"{column}::text" if postgres else column
        rows = (yield Stmt(f"SELECT {cols}, {select} FROM {table}")) or []
        updates = []
        for row in rows:
            raw = row[-1]
            if raw is None:
                continue
            text = bytes(raw).decode() if isinstance(raw, bytes | memoryview) else str(raw)
            if TOKEN_PREFIX not in text:
                continue
            new = self.resealed_metadata(str(row[0]), json.loads(text))
            if new is not None:
                dumped = json.dumps(new, ensure_ascii=False)
                value: Any = dumped if postgres else dumped.encode()
                updates.append((value, *row[: len(keys)]))
        if updates:
            marker = f"{p}::jsonb" if postgres else p
            where = " AND ".join(f"{k} = {p}" for k in keys)
            yield Stmt(f"UPDATE {table} SET {column} = {marker} WHERE {where}", updates, many=True)
        return len(updates)
