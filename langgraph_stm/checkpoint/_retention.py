"""Thread lifecycle: time to live, sweeping, and deletion that stays deleted.

**TTL.** Every root-namespace checkpoint write upserts the thread's ``stm_lifecycle``
row in the same plan (so the same transaction rules) as the checkpoint's own rows:
``written_at`` is the saver's clock at the write, ``ttl_seconds`` the thread's own TTL,
set when the row is inserted (from ``config["configurable"]["ttl"]``, a ``timedelta``
or seconds) or by :meth:`Retention.set_ttl`. A thread **expires** when
``written_at + (ttl_seconds or the saver's ttl) < now``; a thread without a row (one
that no root checkpoint was written for since this table exists) never does. Until it
is swept, an expired thread reads as if it did not exist (``get_tuple`` and ``list`` of
every namespace, the thread index), and the next write to it first deletes it
completely, as :meth:`Retention.sweep` would: a fresh run then starts clean, and a
write carrying one of its old checkpoints is refused like a write to a deleted thread.

**Sweep.** :meth:`Retention.sweep` deletes expired threads in batches of
``batch_size``: each batch is one transaction (the thread locks of its threads, a
re-check that they are still expired, the tombstones, the deletes), and no transaction
spans two batches, so a sweep over any number of threads holds no long lock. It then
purges the tombstones older than the grace period, in batches too.

**Tombstones.** Deleting a thread (``delete_thread``, ``prune(strategy="delete")``, a
sweep, a write to an expired thread) writes ``stm_tombstones (thread_id, deleted_at,
last_checkpoint_id)`` in the deleting transaction: the newest checkpoint id the thread
had in any namespace. Checkpoint ids are uuid6, time-ordered strings, so a write whose
config carries a checkpoint id (``checkpoint_id``, or a parent's in ``checkpoint_map``)
that is not newer than ``last_checkpoint_id`` belongs to the deleted thread: ``put`` and
``put_writes`` refuse it with :class:`~langgraph_stm.errors.ThreadDeletedError` and
write nothing. A fresh run carries no checkpoint id; its checkpoints get new, larger
ids, so its later writes pass. Tombstones are not deleted with their thread.

**Grace period** (``deleted_grace``, default one day). A sweep purges the tombstones
older than it; a tombstone is honoured until purged, so for at least the grace period.
A day outlasts any worker that can still hold an old config in practice (a run stuck
in a retry loop, a queued job, a paused approval retried by a client), while the table
stays bounded by one small row per thread deleted in the last day. After the purge, a
write with a config older than the deletion is no longer recognised and would be
stored; set ``deleted_grace`` longer than the longest time a worker may keep a config.

**Where the check runs.** ``put``: inside the write transaction, before our rows
(SQLite: the ``BEGIN IMMEDIATE`` transaction the inner ``put`` commits; PostgreSQL:
our rows' transaction, under the thread's advisory lock, which every deletion takes).
``put_writes``: the writes go to the inner saver first, then the tombstone is read and
refused writes are taken back (deleted from its writes table, or ``InMemorySaver``'s
``writes``). A deletion is one transaction: if it commits before that read, the read
sees the tombstone and the writes are taken back; if after the writes, it deletes them;
nothing is left either way. Checking first would delay the inner ``put_writes``, which
LangGraph runs in the background while the next step may already edit the same
message objects in place. Over a saver known only by its API (no access to its
writes) the check runs first, and a deletion committing in between lets the writes in.

**Limits.** Refusal compares checkpoint ids, which come from the writers' clocks: a
fresh run on a worker whose clock is behind the deleted thread's newest checkpoint (by
more than the time since the deletion) gets ids that look old, and is refused. On
PostgreSQL with a pool of fewer than two connections no thread lock is taken (see
:mod:`._postgres`): a deletion committing between a ``put``'s check and the inner
``put`` leaves that one checkpoint behind.

Example:
    >>> from datetime import UTC, datetime, timedelta
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> from langgraph.graph import START, StateGraph
    >>> from langgraph_stm import STMSaver, STMState
    >>> now = [datetime(2026, 1, 1, tzinfo=UTC)]
    >>> saver = STMSaver(InMemorySaver(), ttl=timedelta(hours=1), clock=lambda: now[0])
    >>> def answer(state: STMState) -> dict:
    ...     return {"messages": [("ai", "hi")]}
    >>> graph = StateGraph(STMState).add_node(answer).add_edge(START, "answer")
    >>> graph = graph.compile(checkpointer=saver)
    >>> config = {"configurable": {"thread_id": "t1"}}
    >>> _ = graph.invoke({"messages": [("user", "hello")]}, config)
    >>> saver.get_thread_state("t1").expires_at
    datetime.datetime(2026, 1, 1, 1, 0, tzinfo=datetime.timezone.utc)
    >>> now[0] += timedelta(hours=2)
    >>> saver.get_thread_state("t1") is None, graph.get_state(config).values
    (True, {})
    >>> saver.sweep()
    1
"""

from __future__ import annotations

import builtins
from collections.abc import (
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.store.base import BaseStore

from langgraph_stm._errors import InvalidArgumentError, StorageError, ThreadDeletedError
from langgraph_stm._offload import adelete_offloaded, delete_offloaded
from langgraph_stm.checkpoint._lifecycle import (
    _ATTEMPTS,
    Lifecycle,
    Removal,
    ThreadExpired,
    _thread_id,
    carried_ids,
    expired_plan,
    guard_plan,
    lifecycle_plan,
    memory_undo_plan,
    purge_plan,
    remove_plan,
    set_ttl_plan,
    shorten_plan,
    touch_plan,
    ttl_seconds,
    undo_writes_plan,
    visibility_plan,
)
from langgraph_stm.checkpoint._pipeline import ids
from langgraph_stm.checkpoint._redact import redactions_in
from langgraph_stm.checkpoint._saver import SaverCore, bridged
from langgraph_stm.checkpoint._tables import (
    Plan,
)

__all__ = ["Deletion", "DeletionReport", "Expiry", "Retention"]

_ALL = 2**62
"""A ``LIMIT`` that takes every row (both dialects; ``expired_plan`` slices with it)."""


# -- the inner saver's rows, where they are not in our database ----------------------------
def memory_rows(saver: Any, thread_id: str) -> dict[str, int]:
    """Rows an ``InMemorySaver`` holds for a thread: ``checkpoints`` (every namespace),
    ``writes`` (pending writes) and ``blobs`` (channel versions)."""
    storage = getattr(saver, "storage", {}).get(thread_id) or {}
    writes = getattr(saver, "writes", {})
    return {
        "checkpoints": sum(len(cps) for cps in list(storage.values())),
        "writes": sum(len(w) for k, w in list(writes.items()) if k[0] == thread_id),
        "blobs": sum(1 for k in list(getattr(saver, "blobs", {})) if k[0] == thread_id),
    }


def memory_last_id(saver: Any, thread_id: str) -> str | None:
    """The newest checkpoint id an ``InMemorySaver`` holds for a thread, any namespace."""
    storage = getattr(saver, "storage", {}).get(thread_id) or {}
    ids = [max(cps) for cps in list(storage.values()) if cps]
    return max(ids) if ids else None


def _thread_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _newest(tuples: Iterable[CheckpointTuple]) -> tuple[str | None, int]:
    """The newest checkpoint id among ``tuples`` (every namespace) and how many."""
    found = [str(t.checkpoint["id"]) for t in tuples]
    return (max(found) if found else None), len(found)


def _listed(
    listed: Mapping[str, tuple[str | None, int]], count: bool
) -> tuple[dict[str, str | None], dict[str, int]]:
    last = {t: newest for t, (newest, _) in listed.items()}
    return last, {"checkpoints": sum(n for _, n in listed.values())} if count else {}


def _in_memory(
    saver: Any, ids: Sequence[str], count: bool
) -> tuple[dict[str, str | None], dict[str, int]]:
    """Newest checkpoint ids and (when counted) rows of an ``InMemorySaver``'s threads."""
    rows: dict[str, int] = {}
    if count:
        for t in ids:
            for table, n in memory_rows(saver, t).items():
                rows[table] = rows.get(table, 0) + n
    return {t: memory_last_id(saver, t) for t in ids}, rows


@dataclass(frozen=True, slots=True)
class DeletionReport:
    """What :meth:`STMSaver.delete_thread` removed.

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from langgraph_stm import STMSaver
        >>> report = STMSaver(InMemorySaver()).delete_thread("unknown")
        >>> report.thread_id, report.rows["checkpoints"], report.store_items
        ('unknown', 0, 0)
    """

    thread_id: str
    """The thread deleted."""
    rows: dict[str, int]
    """Rows deleted per table, counted in the deleting transaction: the inner saver's
    tables and ours (``stm_*``), zeros included. For an ``InMemorySaver``, its
    ``checkpoints``, ``writes`` and ``blobs``; for a saver without database access, the
    ``checkpoints`` its ``list`` returned."""
    store_items: int
    """Offloaded tool outputs deleted from the saver's ``store``."""
    seconds: float
    """How long the deletion took, store included."""


class Deletion(SaverCore):
    """Complete deletion of threads, with their tombstones (the base of every removal)."""

    store: BaseStore | None = None
    """The graph's LangGraph store, whose offloaded tool outputs are deleted with a thread."""

    _life: Lifecycle

    def _remove(
        self,
        thread_ids: Sequence[str],
        *,
        expired: bool = False,
        count: bool = False,
        now: float | None = None,
    ) -> Removed:
        """Delete threads completely: their offloaded outputs, then one transaction (see
        :func:`remove_plan`) and, where the inner saver's rows are not in our database,
        its ``delete_thread``; then what the encoder remembers of them.

        Over an inner saver we cannot reach by SQL, its newest checkpoint ids and rows
        are read, our plan runs and its ``delete_thread`` runs under the private tables'
        gate, which every write of ours holds across the inner write: no write of this
        process falls between them.
        """
        ids = [str(t) for t in thread_ids]
        items = 0
        # An explicit deletion removes the store items first (a store failure leaves the
        # thread to delete again); an expiry only once the thread is really gone (it may
        # have been written, or its TTL lengthened, since it was picked).
        if self.store is not None and not expired:
            items = sum(delete_offloaded(self.store, t) for t in ids)
        if self._tables.in_database:
            removal: Removal = self._sync_driver().write(
                self._remove_plan(ids, expired, count, now, None)
            )
            inner_rows: dict[str, int] = {}
        else:
            driver = self._tables.sync
            with driver.gate:
                if self._inner.kind == "memory":
                    last, inner_rows = _in_memory(self.inner, ids, count)
                else:  # a saver we only know by its API
                    listed = {t: _newest(self.inner.list(_thread_config(t))) for t in ids}
                    last, inner_rows = _listed(listed, count)
                removal = driver.write(self._remove_plan(ids, expired, count, now, last))
                for t in removal.ids:
                    self.inner.delete_thread(t)
        if self.store is not None and expired:
            items = sum(delete_offloaded(self.store, t) for t in removal.ids)
        self._encoder.heads.forget(removal.ids)
        return Removed(removal.ids, {**inner_rows, **removal.rows}, items)

    async def _aremove(
        self,
        thread_ids: Sequence[str],
        *,
        expired: bool = False,
        count: bool = False,
        now: float | None = None,
    ) -> Removed:
        """Async twin of :meth:`_remove`."""
        ids = [str(t) for t in thread_ids]
        items = 0
        if self.store is not None and not expired:
            for t in ids:
                items += await adelete_offloaded(self.store, t)
        if self._tables.in_database:
            removal: Removal = await self._awrite(self._remove_plan(ids, expired, count, now, None))
            inner_rows: dict[str, int] = {}
        else:
            driver = self._tables.sync
            with driver.gate:
                if self._inner.kind == "memory":
                    last, inner_rows = _in_memory(self.inner, ids, count)
                else:
                    listed = {
                        t: _newest([x async for x in self.inner.alist(_thread_config(t))])
                        for t in ids
                    }
                    last, inner_rows = _listed(listed, count)
                removal = driver.write(self._remove_plan(ids, expired, count, now, last))
                for t in removal.ids:
                    await self.inner.adelete_thread(t)
        if self.store is not None and expired:
            for t in removal.ids:
                items += await adelete_offloaded(self.store, t)
        self._encoder.heads.forget(removal.ids)
        return Removed(removal.ids, {**inner_rows, **removal.rows}, items)

    def _remove_plan(
        self,
        ids: Sequence[str],
        expired: bool,
        count: bool,
        now: float | None,
        last: Mapping[str, str | None] | None,
    ) -> Plan:
        return remove_plan(
            self._tables.dialect,
            ids,
            now=self._life.now() if now is None else now,
            inner=self._tables.in_database,
            last_ids=last,
            count=count,
            expired=self._life if expired else None,
        )


class Expiry(Deletion):
    """TTL and tombstones on the checkpoint path (see the module doc): the write guard,
    the lifecycle row, expired threads hidden from every read."""

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        /,
        *,
        ttl: timedelta | float | None = None,
        clock: Callable[[], datetime] | None = None,
        deleted_grace: timedelta | float = timedelta(days=1),
        secret_ttl: timedelta | float | None = None,
        **options: Any,
    ) -> None:
        self._life = Lifecycle.make(ttl, clock, deleted_grace)
        self._secret_ttl = ttl_seconds(secret_ttl, "STMSaver(secret_ttl=...)")
        if self._secret_ttl is not None and self._life.ttl is not None:
            self._secret_ttl = min(self._secret_ttl, self._life.ttl)
        super().__init__(inner, **options)

    @property
    def ttl(self) -> timedelta | None:
        """The saver's TTL: threads without their own expire this long after their last
        root checkpoint write (``None``: they never expire)."""
        return None if self._life.ttl is None else timedelta(seconds=self._life.ttl)

    # -- hooks of the write path -----------------------------------------------------------
    def _around_write(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        plan: Plan,
    ) -> Plan:
        thread_id, ns, _ = ids(config)
        life, d = self._life, self._tables.dialect
        own = life.config_ttl(config) if ns == "" else None
        now = life.now()
        yield from guard_plan(d, life, thread_id, carried_ids(config), now)
        result = yield from plan
        # Every namespace's write is activity (a long subgraph keeps its thread alive);
        # only a root write may set the thread's own TTL.
        yield from touch_plan(d, thread_id, now, own)
        if ns == "" and self._secret_ttl is not None and redactions_in(metadata):
            yield from shorten_plan(d, thread_id, self._secret_ttl)  # a secret was seen
        return result

    @bridged("aput")
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store the checkpoint (see :meth:`SaverCore.put`); refuse a write to a deleted
        thread, delete an expired one first."""
        for _ in range(_ATTEMPTS):
            try:
                return super().put(config, checkpoint, metadata, new_versions)
            except ThreadExpired as exc:
                self._remove([exc.thread_id], expired=True)
        raise _still_expired(config)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async twin of :meth:`put`."""
        for _ in range(_ATTEMPTS):
            try:
                return await super().aput(config, checkpoint, metadata, new_versions)
            except ThreadExpired as exc:
                await self._aremove([exc.thread_id], expired=True)
        raise _still_expired(config)

    @bridged("aput_writes")
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store pending writes (see :meth:`SaverCore.put_writes`), refused like :meth:`put`:
        written, then checked, and taken back if refused (see the module doc)."""
        undo = self._undo_plan(config)
        for _ in range(_ATTEMPTS):
            try:
                if undo is None:  # nothing to take back with: check first
                    self._sync_driver().read(self._writes_guard(config))
                super().put_writes(config, writes, task_id, task_path)
                if undo is not None:
                    self._sync_driver().read(self._writes_guard(config))
                return
            except ThreadExpired as exc:
                self._remove([exc.thread_id], expired=True)
            except ThreadDeletedError:
                if undo is not None:
                    self._sync_driver().write(undo)
                raise
        raise _still_expired(config)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of :meth:`put_writes`."""
        undo = self._undo_plan(config)
        for _ in range(_ATTEMPTS):
            try:
                if undo is None:
                    await self._aread(self._writes_guard(config))
                await super().aput_writes(config, writes, task_id, task_path)
                if undo is not None:
                    await self._aread(self._writes_guard(config))
                return
            except ThreadExpired as exc:
                await self._aremove([exc.thread_id], expired=True)
            except ThreadDeletedError:
                if undo is not None:
                    await self._awrite(undo)
                raise
        raise _still_expired(config)

    def _writes_guard(self, config: RunnableConfig) -> Plan:
        thread_id = ids(config)[0]
        return guard_plan(
            self._tables.dialect, self._life, thread_id, carried_ids(config), self._life.now()
        )

    def _undo_plan(self, config: RunnableConfig) -> Plan | None:
        """The plan taking back the pending writes of ``config``'s checkpoint (``None``
        for a saver whose writes we cannot reach)."""
        thread_id, ns, checkpoint_id = ids(config)
        if self._tables.in_database:
            return undo_writes_plan(self._tables.dialect, thread_id, ns, checkpoint_id)
        if self._inner.kind == "memory":
            return memory_undo_plan(self.inner, thread_id, ns, checkpoint_id)
        return None

    # -- reads: an expired thread does not exist ---------------------------------------------
    def _expired(self, thread_ids: Iterable[str]) -> set[str]:
        rows = self._sync_driver().read(lifecycle_plan(self._tables.dialect, thread_ids))
        return self._expired_of(rows)

    async def _aexpired(self, thread_ids: Iterable[str]) -> set[str]:
        return self._expired_of(await self._aread(lifecycle_plan(self._tables.dialect, thread_ids)))

    def _expired_of(self, rows: dict[str, tuple[float, float | None]]) -> set[str]:
        now = self._life.now() if rows else 0.0
        return {t for t, (written, own) in rows.items() if self._life.expired(written, own, now)}

    def _hidden_of(
        self,
        tuples: Sequence[CheckpointTuple],
        rows: tuple[dict[str, tuple[float, float | None]], dict[str, str]],
    ) -> set[int]:
        """Positions of ``tuples`` a read must not show: an expired thread's, and a
        deleted thread's leftovers (checkpoints not newer than its tombstone's mark)."""
        life, marks = rows
        expired = self._expired_of(life)
        hidden = set()
        for i, tup in enumerate(tuples):
            thread = ids(tup.config)[0]
            mark = marks.get(thread)
            if thread in expired or (mark is not None and str(tup.checkpoint["id"]) <= mark):
                hidden.add(i)
        return hidden

    def _visible(self, tuples: Sequence[CheckpointTuple]) -> builtins.list[CheckpointTuple]:
        if not tuples:
            return []
        threads = {ids(t.config)[0] for t in tuples}
        rows = self._sync_driver().read(visibility_plan(self._tables.dialect, threads))
        hidden = self._hidden_of(tuples, rows)
        return [t for i, t in enumerate(tuples) if i not in hidden]

    async def _avisible(self, tuples: Sequence[CheckpointTuple]) -> builtins.list[CheckpointTuple]:
        if not tuples:
            return []
        threads = {ids(t.config)[0] for t in tuples}
        rows = await self._aread(visibility_plan(self._tables.dialect, threads))
        hidden = self._hidden_of(tuples, rows)
        return [t for i, t in enumerate(tuples) if i not in hidden]

    @bridged("aget_tuple")
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Fetch a checkpoint tuple (see :meth:`SaverCore.get_tuple`); ``None`` for an
        expired thread, or a deleted thread's leftover."""
        tup = self.inner.get_tuple(config)
        if tup is None or not self._visible([tup]):
            return None
        return self._load(tup, remember=True)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async twin of :meth:`get_tuple`."""
        tup = await self.inner.aget_tuple(config)
        if tup is None or not await self._avisible([tup]):
            return None
        return await self._aload(tup, remember=True)

    @bridged("alist")
    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """List checkpoint tuples (see :meth:`SaverCore.list`), without expired threads'
        or deleted threads' leftovers; ``limit`` counts the tuples shown."""
        # The inner saver may hold its lock while it yields: read its page first.
        page = builtins.list(self.inner.list(config, filter=filter, before=before, limit=limit))
        shown = self._visible(page)
        if limit is not None and len(shown) < len(page):  # hidden ones took places
            page = builtins.list(self.inner.list(config, filter=filter, before=before))
            shown = self._visible(page)[:limit]
        for tup in shown:
            yield self._load(tup, remember=False)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async twin of :meth:`list`."""
        inner = self.inner
        page = [t async for t in inner.alist(config, filter=filter, before=before, limit=limit)]
        shown = await self._avisible(page)
        if limit is not None and len(shown) < len(page):
            page = [t async for t in inner.alist(config, filter=filter, before=before)]
            shown = (await self._avisible(page))[:limit]
        for tup in shown:
            yield await self._aload(tup, remember=False)

    @bridged("aget_delta_channel_history")
    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """See :meth:`SaverCore.get_delta_channel_history`; empty for an expired thread."""
        if channels and self._expired([ids(config)[0]]):
            return {ch: {"writes": []} for ch in channels}
        return super().get_delta_channel_history(config=config, channels=channels)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async twin of :meth:`get_delta_channel_history`."""
        if channels and await self._aexpired([ids(config)[0]]):
            return {ch: {"writes": []} for ch in channels}
        return await super().aget_delta_channel_history(config=config, channels=channels)

    # -- TTL and sweep ---------------------------------------------------------------------


class Retention(Expiry):
    """The TTL methods of :class:`STMSaver` (see the module doc): ``set_ttl``,
    ``expired_threads`` and ``sweep``, with their async twins."""

    @bridged("aset_ttl")
    def set_ttl(self, thread_id: str, ttl: timedelta | float | None) -> None:
        """Give ``thread_id`` its own TTL (``None``: the saver's again), counted from its
        last root checkpoint write; a thread not written yet keeps it from its first
        write, counted from now. Lengthening the TTL of an expired thread that is not
        swept yet makes it visible again.

        Example:
            >>> from datetime import timedelta
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph_stm import STMSaver
            >>> STMSaver(InMemorySaver()).set_ttl("t1", timedelta(days=7))
        """
        own = ttl_seconds(ttl, "set_ttl: ttl")
        plan = set_ttl_plan(self._tables.dialect, _thread_id(thread_id), self._life.now(), own)
        self._sync_driver().write(plan)

    async def aset_ttl(self, thread_id: str, ttl: timedelta | float | None) -> None:
        """Async twin of :meth:`set_ttl`."""
        own = ttl_seconds(ttl, "set_ttl: ttl")
        await self._awrite(
            set_ttl_plan(self._tables.dialect, _thread_id(thread_id), self._life.now(), own)
        )

    @bridged("aexpired_threads")
    def expired_threads(self) -> builtins.list[str]:
        """Return the ids of the threads that are expired and not swept yet (what
        :meth:`sweep` would delete now), those that expired first first; reads only.

        Example:
            >>> from datetime import timedelta
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph_stm import STMSaver
            >>> STMSaver(InMemorySaver(), ttl=timedelta(days=1)).expired_threads()
            []
        """
        plan = expired_plan(self._tables.dialect, self._life, self._life.now(), _ALL)
        return builtins.list(self._sync_driver().read(plan))

    async def aexpired_threads(self) -> builtins.list[str]:
        """Async twin of :meth:`expired_threads`."""
        plan = expired_plan(self._tables.dialect, self._life, self._life.now(), _ALL)
        return builtins.list(await self._aread(plan))

    @bridged("asweep")
    def sweep(self, *, batch_size: int = 500) -> int:
        """Delete every expired thread completely; return how many were deleted.

        Each batch of at most ``batch_size`` threads is one transaction (as
        :meth:`delete_thread`'s); then tombstones older than ``deleted_grace`` are
        purged, in batches too. See the module doc.

        Example:
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph_stm import STMSaver
            >>> STMSaver(InMemorySaver()).sweep(batch_size=100)
            0
        """
        size, now, total = _batch_size(batch_size), self._life.now(), 0
        d, driver = self._tables.dialect, self._sync_driver()
        while candidates := driver.read(expired_plan(d, self._life, now, size)):
            removed = self._remove(candidates, expired=True, now=now)
            total += len(removed.ids)
            if not removed.ids or len(candidates) < size:
                break
        while driver.write(purge_plan(d, now - self._life.grace, size)) == size:
            pass
        return total

    async def asweep(self, *, batch_size: int = 500) -> int:
        """Async twin of :meth:`sweep`."""
        size, now, total = _batch_size(batch_size), self._life.now(), 0
        d = self._tables.dialect
        while candidates := await self._aread(expired_plan(d, self._life, now, size)):
            removed = await self._aremove(candidates, expired=True, now=now)
            total += len(removed.ids)
            if not removed.ids or len(candidates) < size:
                break
        while await self._awrite(purge_plan(d, now - self._life.grace, size)) == size:
            pass
        return total


@dataclass(frozen=True, slots=True)
class Removed:
    """What :meth:`Retention._remove` deleted: threads, rows per table, store items."""

    ids: builtins.list[str]
    rows: dict[str, int]
    store_items: int


def _thread_of(config: RunnableConfig | None) -> str | None:
    thread = (config or {}).get("configurable", {}).get("thread_id")
    return None if thread is None else str(thread)


def _batch_size(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgumentError(f"sweep: batch_size must be an int >= 1, got {value!r}")
    return value


def _still_expired(config: RunnableConfig) -> StorageError:
    thread_id, ns, _ = ids(config)
    return StorageError(
        f"thread {thread_id!r} stays expired after being deleted: is the saver's clock "
        "going backwards?",
        thread_id=thread_id,
        checkpoint_ns=ns,
    )
