"""Deleting, pruning and reclaiming: the part of :class:`STMSaver` that removes rows.

Every removal takes the thread lock of its backend (see :mod:`._sqlite` and
:mod:`._postgres`), so it never runs between a writer's rows and its checkpoint: a row
that a write is about to reference is never collected, without any grace period.

Deleting a thread also deletes the tool outputs offloaded under its namespace in the
saver's ``store`` (:mod:`langgraph_stm._offload`), first: if the store fails, the
thread is still there to delete again. Then one transaction counts and deletes its
rows in every table (the inner saver's, when they share our database, and ours, every
namespace) and writes its tombstone (:mod:`._retention`), and :meth:`delete_thread`
reports what it removed in a :class:`~langgraph_stm.checkpoint.DeletionReport`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from langgraph_stm._errors import InvalidArgumentError
from langgraph_stm.checkpoint._inner import SQLITE_KEEP_LATEST, SQLITE_TABLES
from langgraph_stm.checkpoint._retention import DeletionReport, Retention
from langgraph_stm.checkpoint._saver import SaverCore, bridged
from langgraph_stm.checkpoint._tables import (
    Plan,
    Stmt,
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


class Maintenance(Retention):
    """``delete_thread``, ``prune`` and ``vacuum`` with their async twins."""

    def _vacuum_plans(self, thread_ids: Sequence[str], dry_run: bool = False) -> list[Plan]:
        plans: list[Plan] = []
        d = self._tables.dialect
        for thread_id in thread_ids:
            if self._tables.in_database:
                live_sql = self._live_sql(thread_id)
                plans.append(vacuum_plan(d, thread_id, live_sql, None, dry_run=dry_run))
            else:
                live = self._inner.memory_live(thread_id)
                plans.append(vacuum_plan(d, thread_id, None, live, dry_run=dry_run))
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
    def delete_thread(self, thread_id: str) -> DeletionReport:  # type: ignore[override]
        """Delete the thread completely, all or nothing, and report what was removed.

        With a ``store``, the tool outputs offloaded in the thread go first. Then one
        transaction counts and deletes the thread's rows in every table, every
        namespace, and writes its tombstone: a later write carrying one of its
        checkpoints raises :class:`~langgraph_stm.errors.ThreadDeletedError`, while a
        fresh run (no ``checkpoint_id``) on the same id starts a new thread.

        Example:
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph_stm import STMSaver
            >>> report = STMSaver(InMemorySaver()).delete_thread("t1")
            >>> report.thread_id, sum(report.rows.values()), report.store_items
            ('t1', 0, 0)
        """
        start = time.perf_counter()
        removed = self._remove([str(thread_id)], count=True)
        return DeletionReport(
            str(thread_id), removed.rows, removed.store_items, time.perf_counter() - start
        )

    async def adelete_thread(self, thread_id: str) -> DeletionReport:  # type: ignore[override]
        """Async twin of :meth:`delete_thread`."""
        start = time.perf_counter()
        removed = await self._aremove([str(thread_id)], count=True)
        return DeletionReport(
            str(thread_id), removed.rows, removed.store_items, time.perf_counter() - start
        )

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
            self._remove(ids)
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
            await self._aremove(ids)
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
    def vacuum(self, thread_ids: Sequence[str] | None = None, *, dry_run: bool = False) -> int:
        """Remove our rows that no remaining checkpoint references; return how many.

        Safe while other workers write the same threads (see the module doc). With
        ``dry_run=True`` nothing is removed: it only reads, and returns how many rows it
        would remove.

        Example:
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph_stm import STMSaver
            >>> STMSaver(InMemorySaver()).vacuum(), STMSaver(InMemorySaver()).vacuum(dry_run=True)
            (0, 0)
        """
        driver = self._sync_driver()
        ids = (
            driver.read(threads_with_rows_plan(self._tables.dialect))
            if thread_ids is None
            else [str(t) for t in thread_ids]
        )
        run = driver.read if dry_run else driver.write
        return sum(run(plan) for plan in self._vacuum_plans(ids, dry_run))

    async def avacuum(
        self, thread_ids: Sequence[str] | None = None, *, dry_run: bool = False
    ) -> int:
        """Async twin of :meth:`vacuum`."""
        if thread_ids is None:
            ids = await self._aread(threads_with_rows_plan(self._tables.dialect))
        else:
            ids = [str(t) for t in thread_ids]
        run = self._aread if dry_run else self._awrite
        total = 0
        for plan in self._vacuum_plans(ids, dry_run):
            total += await run(plan)
        return total


def _with_locks(saver: SaverCore, ids: Sequence[str], plan: Plan) -> Plan:
    yield from lock_plan(saver._tables.dialect, ids)
    return (yield from plan)
