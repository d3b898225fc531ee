"""Deleting, pruning and reclaiming: the part of :class:`STMSaver` that removes rows.

Every removal takes the thread lock of its backend (see :mod:`._sqlite` and
:mod:`._postgres`), so it never runs between a writer's rows and its checkpoint: a row
that a write is about to reference is never collected, without any grace period.

Deleting a thread also deletes the tool outputs offloaded under its namespace in the
saver's ``store`` (:mod:`langgraph_stm._offload`), first: if the store fails, the
thread is still there to delete again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.store.base import BaseStore

from langgraph_stm._errors import InvalidArgumentError
from langgraph_stm._offload import adelete_offloaded, delete_offloaded
from langgraph_stm.checkpoint._inner import SQLITE_KEEP_LATEST, SQLITE_TABLES
from langgraph_stm.checkpoint._saver import SaverCore, bridged
from langgraph_stm.checkpoint._tables import (
    Plan,
    Stmt,
    delete_plan,
    lock_plan,
    threads_with_rows_plan,
    vacuum_plan,
)

__all__ = ["Maintenance"]

PRUNE_STRATEGIES = ("keep_latest", "delete")


def _thread_ids(thread_ids: Sequence[str], strategy: str) -> list[str]:
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
    if strategy not in PRUNE_STRATEGIES:
        raise InvalidArgumentError(
            f"prune: unknown strategy {strategy!r}; use 'keep_latest' or 'delete'"
        )
    return [str(t) for t in thread_ids]


def _sqlite_keep_latest(thread_ids: Sequence[str]) -> Plan:
    for table in reversed(SQLITE_TABLES):  # writes first, then checkpoints
        sql = SQLITE_KEEP_LATEST.format(table=table)
        yield Stmt(sql, [(t,) for t in thread_ids], many=True)
    return None


class Maintenance(SaverCore):
    """``delete_thread``, ``prune`` and ``vacuum`` with their async twins."""

    store: BaseStore | None = None
    """The graph's LangGraph store, whose offloaded tool outputs are deleted with a thread."""

    def _vacuum_plans(self, thread_ids: Sequence[str]) -> list[Plan]:
        plans: list[Plan] = []
        for thread_id in thread_ids:
            if self._tables.in_database:
                plans.append(
                    vacuum_plan(self._tables.dialect, thread_id, self._live_sql(thread_id), None)
                )
            else:
                plans.append(
                    vacuum_plan(
                        self._tables.dialect, thread_id, None, self._inner.memory_live(thread_id)
                    )
                )
        return plans

    def _live_sql(self, thread_id: str) -> tuple[str, list[Any]]:
        if self._inner.kind in ("postgres", "async_postgres"):
            # Each stored channel version owns its references (see Encoder.encode).
            sql = (
                "SELECT c.checkpoint_ns, v.value || chr(31) || v.key FROM checkpoints AS c, "
                "jsonb_each_text(c.checkpoint -> 'channel_versions') AS v "
                "WHERE c.thread_id = %s"
            )
            return sql, [thread_id]
        return self._tables.live_sql(thread_id)

    # -- delete --------------------------------------------------------------------------
    @bridged("adelete_thread")
    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints and every row of ours, all or nothing.

        With a ``store``, the tool outputs offloaded in the thread go first.
        """
        self._delete([str(thread_id)])

    def _delete(self, ids: list[str]) -> None:
        if self.store is not None:
            for t in ids:
                delete_offloaded(self.store, t)
        inner = self._tables.in_database
        self._sync_driver().write(delete_plan(self._tables.dialect, ids, inner=inner))
        for t in ids:
            self.inner.delete_thread(t)
        self._encoder.heads.forget(ids)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async twin of :meth:`delete_thread`."""
        await self._adelete([str(thread_id)])

    async def _adelete(self, ids: list[str]) -> None:
        if self.store is not None:
            for t in ids:
                await adelete_offloaded(self.store, t)
        inner = self._tables.in_database
        await self._awrite(delete_plan(self._tables.dialect, ids, inner=inner))
        for t in ids:
            await self.inner.adelete_thread(t)
        self._encoder.heads.forget(ids)

    # -- prune ---------------------------------------------------------------------------
    @bridged("aprune")
    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune checkpoints of ``thread_ids`` on every backend, then reclaim our rows.

        ``"keep_latest"`` keeps each namespace's latest checkpoint with its pending
        writes; ``"delete"`` deletes the threads (as :meth:`delete_thread`).

        Example:
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph_stm import STMSaver
            >>> STMSaver(InMemorySaver()).prune([])
        """
        ids = _thread_ids(thread_ids, strategy)
        if not ids:
            return
        if strategy == "delete":
            self._delete(ids)
            return
        kind = self._inner.kind
        if kind == "sqlite":
            self._sync_driver().write(_with_locks(self, ids, _sqlite_keep_latest(ids)))
        elif kind == "memory":
            self._inner.memory_keep_latest(ids)
        else:
            self.inner.prune(ids, strategy=strategy)
        self.vacuum(ids)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async twin of :meth:`prune`."""
        ids = _thread_ids(thread_ids, strategy)
        if not ids:
            return
        if strategy == "delete":
            await self._adelete(ids)
            return
        kind = self._inner.kind
        if kind == "async_sqlite":
            await self._awrite(_with_locks(self, ids, _sqlite_keep_latest(ids)))
        elif kind == "memory":
            self._inner.memory_keep_latest(ids)
        else:
            await self.inner.aprune(ids, strategy=strategy)
        await self.avacuum(ids)

    # -- vacuum --------------------------------------------------------------------------
    @bridged("avacuum")
    def vacuum(self, thread_ids: Sequence[str] | None = None) -> int:
        """Remove our rows that no remaining checkpoint references; return how many.

        Safe while other workers write the same threads (see the module doc).

        Example:
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph_stm import STMSaver
            >>> STMSaver(InMemorySaver()).vacuum()
            0
        """
        driver = self._sync_driver()
        ids = (
            driver.read(threads_with_rows_plan(self._tables.dialect))
            if thread_ids is None
            else [str(t) for t in thread_ids]
        )
        return sum(driver.write(plan) for plan in self._vacuum_plans(ids))

    async def avacuum(self, thread_ids: Sequence[str] | None = None) -> int:
        """Async twin of :meth:`vacuum`."""
        if thread_ids is None:
            ids = await self._aread(threads_with_rows_plan(self._tables.dialect))
        else:
            ids = [str(t) for t in thread_ids]
        total = 0
        for plan in self._vacuum_plans(ids):
            total += await self._awrite(plan)
        return total


def _with_locks(saver: SaverCore, ids: Sequence[str], plan: Plan) -> Plan:
    yield from lock_plan(saver._tables.dialect, ids)
    return (yield from plan)
