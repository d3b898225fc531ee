"""The thread index of :class:`STMSaver`: ``get_thread_state``, ``list_threads``,
``refresh_threads`` and their async twins (the rows and rules live in :mod:`._threads`).

Reads only read: a projection row that is missing, behind its thread's latest root
checkpoint, or unreadable is computed from that checkpoint for the answer and left
as it is; :meth:`ThreadIndex.refresh_threads` rewrites such rows.

Each state carries its thread's lifetime (``ttl``, ``expires_at``) from the lifecycle
row (:mod:`._retention`); an expired thread that is not swept yet is left out, as if it
did not exist.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langchain_core.runnables import RunnableConfig

from langgraph_stm.checkpoint._lifecycle import Lifetime, lifecycle_plan
from langgraph_stm.checkpoint._maintenance import Maintenance
from langgraph_stm.checkpoint._saver import bridged
from langgraph_stm.checkpoint._tables import (
    Dialect,
    Plan,
    ThreadRow,
    delete_projections_plan,
    latest_roots_plan,
    projections_plan,
    upsert_projection,
)
from langgraph_stm.checkpoint._threads import (
    ThreadQuery,
    ThreadState,
    fresh_state,
    project,
    select_page,
    to_state,
)

__all__ = ["ThreadIndex"]


def _root(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def _rows_plan(d: Dialect, thread_ids: Sequence[str] | None, crypt: Any = None) -> Plan:
    """Projection rows and lifecycle rows of ``thread_ids`` (``None``: all); ``crypt``
    (an encrypted saver's :class:`~._crypto.Crypt`) opens sealed rows."""
    rows = yield from projections_plan(d, thread_ids, None)
    if crypt is not None:
        rows = [crypt.open_row(r) for r in rows]
    lives = yield from lifecycle_plan(d, thread_ids)
    return rows, lives


def _timed(state: ThreadState, lifetime: Lifetime) -> ThreadState:
    if lifetime.ttl is None:
        return state
    return dataclasses.replace(state, ttl=lifetime.ttl, expires_at=lifetime.expires_at)


Scan = tuple[builtins.list[ThreadRow], dict[str, str], dict[str, tuple[float, float | None]]]
"""Projection rows, latest root checkpoint ids, lifecycle rows."""


class ThreadIndex(Maintenance):
    """Structured-state queries over the projection rows."""

    # -- which rows are fresh ------------------------------------------------------------
    def _sorted_out(
        self, rows: builtins.list[ThreadRow], latest: dict[str, str]
    ) -> tuple[builtins.list[ThreadState], builtins.list[str], builtins.list[str]]:
        """Fresh states, stale thread ids (to compute), orphan row ids (no checkpoint)."""
        by_id = {r.thread_id: r for r in rows}
        fresh: builtins.list[ThreadState] = []
        stale: builtins.list[str] = []
        for thread_id, checkpoint_id in latest.items():
            state = fresh_state(by_id.get(thread_id), checkpoint_id)
            if state is None:
                stale.append(thread_id)
            else:
                fresh.append(state)
        return fresh, stale, [t for t in by_id if t not in latest]

    def _latest(self, rows: builtins.list[ThreadRow]) -> dict[str, str] | None:
        """Latest root checkpoint ids, when they can be had without I/O or SQL."""
        if self._inner.kind == "memory":
            return self._inner.memory_latest_roots()
        if self._inner.kind is None:
            latest = {}
            for r in rows:
                tup = self.inner.get_tuple(_root(r.thread_id))
                if tup is not None:
                    latest[r.thread_id] = str(tup.checkpoint["id"])
            return latest
        return None

    def _rows(self, thread_ids: Sequence[str] | None) -> Plan:
        return _rows_plan(self._tables.dialect, thread_ids, self._pipeline.crypt)

    def _sealed(self, row: ThreadRow) -> ThreadRow:
        """``row`` as stored: sealed when the saver encrypts (under the no-owner key)."""
        crypt = self._pipeline.crypt
        return row if crypt is None or not crypt.on else crypt.seal_row(row, None)

    def _state_of(self, thread_id: str, tup: Any) -> ThreadState | None:
        if tup is None:
            return None
        cp = tup.checkpoint
        return to_state(project(thread_id, cp["id"], cp.get("ts"), cp["channel_values"]))

    def _scan(self) -> Scan:
        driver = self._sync_driver()
        rows, lives = driver.read(self._rows(None))
        latest = self._latest(rows)
        if latest is None:
            latest = driver.read(latest_roots_plan(self._tables.latest_roots_sql()))
        return rows, latest, lives

    async def _ascan(self) -> Scan:
        rows, lives = await self._aread(self._rows(None))
        latest = self._latest(rows)
        if latest is None:
            latest = await self._aread(latest_roots_plan(self._tables.latest_roots_sql()))
        return rows, latest, lives

    def _live(
        self, scan: Scan
    ) -> tuple[builtins.list[ThreadRow], dict[str, str], dict[str, Lifetime]]:
        """The scan without expired threads, and the lifetime of each thread left."""
        rows, latest, lives = scan
        now = self._life.now()
        lifetimes = {t: self._life.lifetime(lives.get(t), now) for t in latest}
        latest = {t: c for t, c in latest.items() if not lifetimes[t].expired}
        return rows, latest, lifetimes

    # -- queries -------------------------------------------------------------------------
    @bridged("aget_thread_state")
    def get_thread_state(self, thread_id: str) -> ThreadState | None:
        """Return the latest structured state of ``thread_id``, or ``None`` if it has none
        (or it expired).

        Example:
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph_stm import STMSaver
            >>> STMSaver(InMemorySaver()).get_thread_state("unknown") is None
            True
        """
        t = str(thread_id)
        rows, lives = self._sync_driver().read(self._rows([t]))
        lifetime = self._life.lifetime(lives.get(t), self._life.now())
        tup = None if lifetime.expired else self.inner.get_tuple(_root(t))
        if tup is None or not self._visible([tup]):  # a deleted thread's leftover
            return None
        state = fresh_state(rows[0] if rows else None, str(tup.checkpoint["id"]))
        state = state or self._state_of(t, self._load(tup, remember=False))
        return None if state is None else _timed(state, lifetime)

    async def aget_thread_state(self, thread_id: str) -> ThreadState | None:
        """Async twin of :meth:`get_thread_state`."""
        t = str(thread_id)
        rows, lives = await self._aread(self._rows([t]))
        lifetime = self._life.lifetime(lives.get(t), self._life.now())
        tup = None if lifetime.expired else await self.inner.aget_tuple(_root(t))
        if tup is None or not await self._avisible([tup]):
            return None
        state = fresh_state(rows[0] if rows else None, str(tup.checkpoint["id"]))
        state = state or self._state_of(t, await self._aload(tup, remember=False))
        return None if state is None else _timed(state, lifetime)

    @bridged("alist_threads")
    def list_threads(
        self,
        *,
        updated_after: datetime | str | None = None,
        updated_before: datetime | str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> builtins.list[ThreadState]:
        """List the threads' structured states, most recently updated first (expired
        threads left out).

        Args:
            updated_after: Only threads whose latest checkpoint is newer than this.
            updated_before: Only threads whose latest checkpoint is older than this.
            limit: Page size; ``None`` for all.
            offset: How many threads to skip (for the next page).

        Example:
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph_stm import STMSaver
            >>> STMSaver(InMemorySaver()).list_threads(limit=10)
            []
        """
        query = ThreadQuery.make(updated_after, updated_before, limit, offset)
        rows, latest, lifetimes = self._live(self._scan())
        fresh, stale, _ = self._sorted_out(rows, latest)
        for t in stale:
            state = self._state_of(t, self.get_tuple(_root(t)))
            if state is not None:
                fresh.append(state)
        return select_page([_timed(s, lifetimes[s.thread_id]) for s in fresh], query)

    async def alist_threads(
        self,
        *,
        updated_after: datetime | str | None = None,
        updated_before: datetime | str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> builtins.list[ThreadState]:
        """Async twin of :meth:`list_threads`."""
        query = ThreadQuery.make(updated_after, updated_before, limit, offset)
        rows, latest, lifetimes = self._live(await self._ascan())
        fresh, stale, _ = self._sorted_out(rows, latest)
        for t in stale:
            state = self._state_of(t, await self.aget_tuple(_root(t)))
            if state is not None:
                fresh.append(state)
        return select_page([_timed(s, lifetimes[s.thread_id]) for s in fresh], query)

    @bridged("arefresh_threads")
    def refresh_threads(self) -> int:
        """Rewrite every projection row that is missing, stale or unreadable, and drop
        the rows of threads without checkpoints; return how many rows changed.

        Example:
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph_stm import STMSaver
            >>> STMSaver(InMemorySaver()).refresh_threads()
            0
        """
        rows, latest, _ = self._scan()
        _, stale, orphans = self._sorted_out(rows, latest)
        driver = self._sync_driver()
        for t in stale:
            tup = self.get_tuple(_root(t))
            if tup is not None:
                cp = tup.checkpoint
                row = self._sealed(project(t, cp["id"], cp.get("ts"), cp["channel_values"]))
                driver.write(upsert_projection(self._tables.dialect, row, force=True))
        driver.write(delete_projections_plan(self._tables.dialect, orphans))
        return len(stale) + len(orphans)

    async def arefresh_threads(self) -> int:
        """Async twin of :meth:`refresh_threads`."""
        rows, latest, _ = await self._ascan()
        _, stale, orphans = self._sorted_out(rows, latest)
        for t in stale:
            tup = await self.aget_tuple(_root(t))
            if tup is not None:
                cp = tup.checkpoint
                row = self._sealed(project(t, cp["id"], cp.get("ts"), cp["channel_values"]))
                await self._awrite(upsert_projection(self._tables.dialect, row, force=True))
        await self._awrite(delete_projections_plan(self._tables.dialect, orphans))
        return len(stale) + len(orphans)
