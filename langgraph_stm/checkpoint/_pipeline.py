"""The storage pipeline of :class:`STMSaver`, without I/O: what a write stores and what a
read fetches and rebuilds. The saver runs the plans it returns on the backend's driver.

write: validate and id pending writes (:mod:`._writes`) | project the structured state
(:mod:`._threads`) -> encode (:mod:`._encoder`) -> encrypt (:mod:`._crypto`, when the
saver has a key) -> the write plan (:mod:`._tables`).
read: the inner saver's tuple -> the load plan of its references -> decrypt -> decode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointTuple,
    DeltaChannelHistory,
)

from langgraph_stm._errors import StorageError
from langgraph_stm.checkpoint._backend import Tables
from langgraph_stm.checkpoint._encoder import Encoder, WriteSet
from langgraph_stm.checkpoint._format import MARKER_KEY, FormatError
from langgraph_stm.checkpoint._inner import Inner
from langgraph_stm.checkpoint._tables import Plan, load_plan, write_plan
from langgraph_stm.checkpoint._threads import project

__all__ = ["Pipeline", "ids", "seed_tuple", "storage_error", "with_seeds"]


def ids(config: RunnableConfig) -> tuple[str, str, str | None]:
    """``(thread_id, checkpoint_ns, checkpoint_id or None)`` of a config."""
    c = config.get("configurable", {})
    parent = c.get("checkpoint_id")
    return (
        str(c.get("thread_id", "")),
        str(c.get("checkpoint_ns", "")),
        None if parent is None else str(parent),
    )


def storage_error(config: RunnableConfig, exc: BaseException) -> StorageError:
    """The :class:`StorageError` for a thread whose rows are missing or corrupt."""
    thread_id, ns, _ = ids(config)
    return StorageError(
        f"thread {thread_id!r} (namespace {ns!r}): STMSaver rows are missing or corrupt "
        f"({exc}); they were deleted or edited outside STMSaver. Delete the thread "
        "(saver.delete_thread) to start it again.",
        thread_id=thread_id,
        checkpoint_ns=ns,
    )


def _has_escapes(tup: CheckpointTuple) -> bool:
    values = tup.checkpoint.get("channel_values") or {}
    return any(isinstance(v, dict) and MARKER_KEY in v for v in values.values())


def seed_tuple(
    config: RunnableConfig, history: Mapping[str, DeltaChannelHistory]
) -> CheckpointTuple | None:
    """A tuple holding the ``DeltaChannel`` seeds that are our references, to decode."""
    seeds = {
        ch: entry["seed"]
        for ch, entry in history.items()
        if "seed" in entry and isinstance(entry["seed"], dict) and MARKER_KEY in entry["seed"]
    }
    if not seeds:
        return None
    checkpoint = cast(Checkpoint, {"channel_values": seeds})
    return CheckpointTuple(config=config, checkpoint=checkpoint, metadata={})


def with_seeds(
    history: Mapping[str, DeltaChannelHistory], tup: CheckpointTuple
) -> Mapping[str, DeltaChannelHistory]:
    """``history`` with the decoded seeds of :func:`seed_tuple`'s tuple."""
    result = dict(history)
    for ch, value in tup.checkpoint["channel_values"].items():
        result[ch] = cast(DeltaChannelHistory, {**history[ch], "seed": value})
    return result


class Pipeline:
    """Encoding and decoding for one saver: its inner saver, tables and encoder."""

    def __init__(self, inner: Inner, tables: Tables, encoder: Encoder, linear: bool) -> None:
        self.inner = inner
        self.tables = tables
        self.encoder = encoder
        self.linear = linear
        """Store message lists (and large values) by reference."""
        self.crypt: Any = None
        """The :class:`~._crypto.Crypt` of an encrypted saver (seals our rows, opens
        what reads fetch), or ``None``."""

    def prepare(
        self, config: RunnableConfig, checkpoint: Checkpoint, new_versions: ChannelVersions
    ) -> tuple[Checkpoint, WriteSet | None, Plan]:
        """The checkpoint to hand the inner saver, our rows of it, and the plan storing them."""
        thread_id, ns, parent = ids(config)
        values = checkpoint.get("channel_values", {})
        projection = None
        if ns == "" and "id" in checkpoint:
            projection = project(thread_id, checkpoint["id"], checkpoint.get("ts"), values)
        write = None
        if self.linear:
            channels = None if self.inner.full_values else list(new_versions)
            versions = None if self.inner.full_values else new_versions
            write = self.encoder.encode(
                thread_id, ns, checkpoint["id"], parent, values, channels, versions
            )
            checkpoint = cast(Checkpoint, {**checkpoint, "channel_values": write.values})
        cold_projection = None
        if projection is not None and self.inner.kind == "memory":
            # InMemorySaver stores only the new versions: after a deletion under us, the
            # other channels are gone from the thread.
            kept = {k: v for k, v in values.items() if k in new_versions}
            cold_projection = project(thread_id, checkpoint["id"], checkpoint.get("ts"), kept)
        crypt = self.crypt
        if crypt is not None and crypt.on:  # encrypt: after encoding, before the tables
            owner = crypt.owner_now()
            if write is not None:
                write = crypt.seal_write(thread_id, owner, write)
            if projection is not None:
                projection = crypt.seal_row(projection, owner)
            if cold_projection is not None:
                cold_projection = crypt.seal_row(cold_projection, owner)
        plan = write_plan(
            self.tables.dialect,
            thread_id,
            ns,
            checkpoint["id"],
            write,
            projection,
            cold_projection,
        )
        return checkpoint, write, plan

    # -- read path -----------------------------------------------------------------------
    def load_plan(self, tup: CheckpointTuple) -> Plan | None:
        """The plan that fetches the rows ``tup``'s references name (``None``: none)."""
        lists, values = self.encoder.references(tup.checkpoint.get("channel_values") or {})
        if not lists and not values:
            return None
        thread_id, ns, _ = ids(tup.config)
        return load_plan(
            self.tables.dialect,
            thread_id,
            ns,
            list(lists.values()),
            list(values.values()),
            self.encoder.missing_bodies,
        )

    def decoded(self, tup: CheckpointTuple, loaded: Any, *, remember: bool) -> CheckpointTuple:
        """``tup`` with its references replaced by what ``loaded`` (the rows
        :meth:`load_plan` fetched, or ``None``) holds."""
        thread_id, ns, _ = ids(tup.config)
        if self.crypt is not None:  # decrypt: after the table reads, before decoding
            tup = self.crypt.opened_tuple(tup)
            if loaded is not None:
                loaded = (loaded[0], self.crypt.open_loaded(thread_id, loaded[1]))
        if loaded is None and not _has_escapes(tup):
            return tup
        expanded, rows = loaded if loaded is not None else ({}, None)
        try:
            values = self.encoder.decode_values(
                thread_id,
                ns,
                tup.checkpoint.get("id"),
                tup.checkpoint.get("channel_values") or {},
                expanded,
                rows,
                remember=remember,
            )
        except (FormatError, KeyError) as exc:
            raise storage_error(tup.config, exc) from exc
        return tup._replace(
            checkpoint=cast(Checkpoint, {**tup.checkpoint, "channel_values": values})
        )
