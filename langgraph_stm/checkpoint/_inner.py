"""Every fact STMSaver relies on about LangGraph's own savers, in one place.

Each fact is pinned by a contract test (``tests/unit/test_saver_contract.py``), so a
LangGraph release that changes one fails there, loudly, instead of corrupting data:

- which saver is which (by class, through the MRO, so user subclasses count);
- their public attributes we use: ``conn`` and ``lock`` (all database savers),
  ``loop`` (the async savers' event loop), ``InMemorySaver.storage/writes/blobs``;
- their tables with a ``thread_id`` column, and the ``checkpoints`` columns
  ``thread_id, checkpoint_ns, checkpoint_id`` we read to find a thread's latest
  checkpoint without deserializing it;
- that SQLite savers store every channel value in every checkpoint, while the
  PostgreSQL and in-memory savers store each channel version once;
- how to prune an in-memory or SQLite saver, which have no ``prune`` of their own;
- and of LangGraph's loop: how a run's read differs from ``get_state``'s, which
  channels schedule a node, which pending writes end a run (exclusive runs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT, TASKS
from langgraph.constants import START

__all__ = [
    "RUNTIME_KEY",
    "RUN_ENDING_CHANNELS",
    "Inner",
    "checkpoint_id_now",
    "inspect_inner",
    "is_run_read",
    "latest_in_memory",
    "triggers_a_node",
]


def checkpoint_id_now() -> str:
    """An id made now the way LangGraph makes checkpoint ids (``uuid6``): ids of
    checkpoints created earlier compare lower as strings, later ones higher (pinned by
    ``tests/unit/test_saver_contract.py``)."""
    return str(uuid6())


SQLITE_TABLES = ("checkpoints", "writes")
"""SqliteSaver's tables with a ``thread_id`` column."""
POSTGRES_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
"""PostgresSaver's tables with a ``thread_id`` column."""

_KINDS = {
    ("langgraph.checkpoint.sqlite", "SqliteSaver"): "sqlite",
    ("langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver"): "async_sqlite",
    ("langgraph.checkpoint.postgres", "PostgresSaver"): "postgres",
    ("langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver"): "async_postgres",
    ("langgraph.checkpoint.memory", "InMemorySaver"): "memory",
}

LATEST_ROOT_SQL = (
    "SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = {p} AND checkpoint_ns = ''"
)
"""The id of a thread's latest root checkpoint (ids sort by time)."""
LATEST_ROOTS_SQL = (
    "SELECT thread_id, MAX(checkpoint_id) FROM checkpoints WHERE checkpoint_ns = '' "
    "GROUP BY thread_id"
)
"""Every thread with a root checkpoint, and the id of its latest one."""
LIVE_CHECKPOINTS_SQL = "SELECT checkpoint_ns, checkpoint_id FROM checkpoints WHERE thread_id = {p}"
"""Every checkpoint of a thread, every namespace."""
SQLITE_KEEP_LATEST = (
    "DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id <> ("
    "SELECT MAX(c.checkpoint_id) FROM checkpoints AS c "
    "WHERE c.thread_id = {table}.thread_id AND c.checkpoint_ns = {table}.checkpoint_ns)"
)
"""``prune(strategy="keep_latest")`` of SqliteSaver: one statement per table (writes of
checkpoints that are not the latest go too; run on ``writes`` first)."""


@dataclass(frozen=True, slots=True)
class Inner:
    """What STMSaver knows about the saver it wraps."""

    saver: BaseCheckpointSaver[Any]
    kind: str | None
    """``sqlite``, ``async_sqlite``, ``postgres``, ``async_postgres``, ``memory`` or
    ``None`` (a saver we have no database access for)."""

    @property
    def full_values(self) -> bool:
        """Whether every checkpoint carries every channel value (not just new versions)."""
        return self.kind in ("sqlite", "async_sqlite") or self.kind is None

    @property
    def is_async(self) -> bool:
        return self.kind in ("async_sqlite", "async_postgres")

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The async saver's event loop, which serves its sync methods."""
        loop = getattr(self.saver, "loop", None)
        return loop if self.is_async and isinstance(loop, asyncio.AbstractEventLoop) else None

    @property
    def has_prune(self) -> bool:
        """Whether the inner saver prunes by itself (PostgresSaver does)."""
        return _overrides(type(self.saver), "prune")

    # -- InMemorySaver ----------------------------------------------------------------
    def memory_latest_roots(self) -> dict[str, str]:
        """Thread id -> latest root checkpoint id, read from ``InMemorySaver.storage``."""
        storage: dict[str, Any] = getattr(self.saver, "storage", {})
        result: dict[str, str] = {}
        for thread_id, by_ns in list(storage.items()):
            root = by_ns.get("") if isinstance(by_ns, dict) else None
            if root:
                result[str(thread_id)] = max(root)
        return result

    def memory_live(self, thread_id: str) -> set[tuple[str, str]]:
        """``(checkpoint_ns, version owner)`` of every channel version an InMemorySaver
        still stores for a thread (``blobs`` is keyed by thread, ns, channel, version)."""
        from langgraph_stm.checkpoint._encoder import version_owner

        blobs: dict[Any, Any] = getattr(self.saver, "blobs", {})
        return {
            (str(k[1]), version_owner(str(k[2]), k[3])) for k in list(blobs) if k[0] == thread_id
        }

    def memory_keep_latest(self, thread_ids: Sequence[str]) -> None:
        """``prune(strategy="keep_latest")`` of an InMemorySaver: keep each namespace's
        latest checkpoint, its pending writes and the blobs its channel versions name."""
        saver: Any = self.saver
        for thread_id in thread_ids:
            by_ns = saver.storage.get(thread_id)
            if not by_ns:
                continue
            keep: dict[str, str] = {}
            for ns, cps in by_ns.items():
                if cps:
                    latest = max(cps)
                    keep[ns] = latest
                    for cid in [c for c in cps if c != latest]:
                        del cps[cid]
            versions: set[tuple[str, str, str, Any]] = set()
            for ns, cid in keep.items():
                checkpoint = saver.serde.loads_typed(by_ns[ns][cid][0])
                for channel, version in checkpoint.get("channel_versions", {}).items():
                    versions.add((thread_id, ns, channel, version))
            for key in [k for k in saver.writes if k[0] == thread_id]:
                if keep.get(key[1]) != key[2]:
                    del saver.writes[key]
            for key in [k for k in saver.blobs if k[0] == thread_id]:
                if key not in versions:
                    del saver.blobs[key]


def _overrides(kind: type, name: str) -> bool:
    return getattr(kind, name, None) is not getattr(BaseCheckpointSaver, name, None)


def inspect_inner(saver: BaseCheckpointSaver[Any]) -> Inner:
    """Classify ``saver``.

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> inspect_inner(InMemorySaver()).kind
        'memory'
    """
    for klass in type(saver).__mro__:
        kind = _KINDS.get((klass.__module__, klass.__name__))
        if kind is not None:
            return Inner(saver, kind)
    return Inner(saver, None)


# -- facts about LangGraph's loop (pinned by tests/unit/test_saver_contract.py) ----------
RUNTIME_KEY = "__pregel_runtime"
"""``langgraph.runtime.CONFIG_KEY_RUNTIME`` (not re-exported for type checkers): where
a run's config carries its ``Runtime``."""
RUN_ENDING_CHANNELS = frozenset({ERROR, INTERRUPT})
"""Pending-write channels after which a run stops: a task raised, or interrupted."""
_TRIGGER_PREFIXES = ("branch:to:", "join:", TASKS, START)
"""Channels whose update schedules a node: ``StateGraph`` edges (``branch:to:<node>``,
``join:<a>+<b>:<node>``), ``Send`` packets, a run's input."""


def is_run_read(config: RunnableConfig) -> bool:
    """Whether a ``get_tuple`` is the read a run starts from its thread's latest
    checkpoint: LangGraph's loop reads with its ``Runtime`` in the config
    (``get_state``/``get_state_history`` do not) and no ``checkpoint_id`` key (a run
    addressed at a checkpoint reads it, then the latest with ``checkpoint_id=None`` to
    see whether the thread moved past it)."""
    configurable = config.get("configurable", {})
    return RUNTIME_KEY in configurable and "checkpoint_id" not in configurable


def latest_in_memory(saver: Any, thread_id: str) -> str | None:
    """The id of a thread's latest root checkpoint in a saver we share no database
    with (``InMemorySaver``: its ``storage``; any other: its own ``get_tuple``)."""
    storage = getattr(saver, "storage", None)
    if isinstance(storage, dict):
        root = storage.get(thread_id, {}).get("", {})
        return max(root) if root else None
    tup = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    return None if tup is None else str(tup.config["configurable"]["checkpoint_id"])


def triggers_a_node(checkpoint: Checkpoint) -> bool:
    """Whether the run that wrote ``checkpoint`` goes on: a channel the step updated
    schedules a node. A checkpoint that does not say (no ``updated_channels``) counts as
    going on."""
    updated = checkpoint.get("updated_channels")
    if updated is None:
        return True
    return any(channel.startswith(_TRIGGER_PREFIXES) for channel in updated)


def stores_primitives_inline(inner: Inner) -> bool:
    """Whether the inner saver stores ``str``/``int``/``float``/``bool`` channel values
    inline in its checkpoint row instead of through its ``serde`` (PostgreSQL's
    ``checkpoints.checkpoint`` JSONB), so encryption must box them first."""
    return inner.kind in ("postgres", "async_postgres")


SEALED_TABLES: dict[str, tuple[tuple[str, tuple[str, ...], str, str], ...]] = {
    "sqlite": (
        ("checkpoints", ("thread_id", "checkpoint_ns", "checkpoint_id"), "type", "checkpoint"),
        (
            "writes",
            ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
            "type",
            "value",
        ),
    ),
    "postgres": (
        ("checkpoint_blobs", ("thread_id", "checkpoint_ns", "channel", "version"), "type", "blob"),
        (
            "checkpoint_writes",
            ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
            "type",
            "blob",
        ),
    ),
}
"""Per database saver family: ``(table, key columns, type column, data column)`` of
every inner table whose values go through the saver's ``serde`` (``thread_id`` first
among the keys), so encryption can rewrite them (``STMSaver.reencrypt``)."""
METADATA_TABLE = ("checkpoints", ("thread_id", "checkpoint_ns", "checkpoint_id"), "metadata")
"""The inner table and column holding checkpoint metadata as JSON (SQLite: UTF-8 bytes;
PostgreSQL: JSONB), not through the serde."""


def family(inner: Inner) -> str | None:
    """``sqlite``, ``postgres`` or ``memory`` (sync and async alike), or ``None``."""
    if inner.kind is None:
        return None
    return inner.kind.removeprefix("async_")


def memory_rewrite(
    inner: Inner, rewrite: Callable[[str, tuple[str, bytes], bool], tuple[str, bytes] | None]
) -> int:
    """Pass every serialized value an ``InMemorySaver`` holds to ``rewrite(thread_id,
    typed, is_metadata)`` and store what it returns instead (``None``: keep); return how
    many were replaced. Checkpoints, metadata, pending writes and channel blobs."""
    saver: Any = inner.saver
    changed = 0
    for thread_id, by_ns in list(saver.storage.items()):
        for by_id in list(by_ns.values()):
            for checkpoint_id, (checkpoint, metadata, parent) in list(by_id.items()):
                new_checkpoint = rewrite(thread_id, checkpoint, False)
                new_metadata = rewrite(thread_id, metadata, True)
                if new_checkpoint is not None or new_metadata is not None:
                    by_id[checkpoint_id] = (
                        new_checkpoint or checkpoint,
                        new_metadata or metadata,
                        parent,
                    )
                    changed += (new_checkpoint is not None) + (new_metadata is not None)
    for key, writes in list(saver.writes.items()):
        for idx, (task_id, channel, typed, *rest) in list(writes.items()):
            new = rewrite(key[0], typed, False)
            if new is not None:
                writes[idx] = (task_id, channel, new, *rest)
                changed += 1
    for key, typed in list(saver.blobs.items()):
        new = rewrite(key[0], typed, False)
        if new is not None:
            saver.blobs[key] = new
            changed += 1
    return changed
