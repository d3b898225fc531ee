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
- how to prune an in-memory or SQLite saver, which have no ``prune`` of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6

__all__ = ["Inner", "checkpoint_id_now", "inspect_inner"]


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
