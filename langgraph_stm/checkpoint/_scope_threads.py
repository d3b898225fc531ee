"""Tenant scoping of :class:`STMSaver`'s thread methods: ``get_thread_state``,
``list_threads``, ``delete_thread``, ``set_ttl``, ``export_thread``,
``expired_threads`` and ``sweep`` (and async twins) take ``owner=`` and refuse
another owner's thread; listings and sweeps keep to the owner's threads. The binding
and the check are in :mod:`._scope` (see there).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, cast

from langgraph_stm.checkpoint._document import ThreadDocument
from langgraph_stm.checkpoint._lifecycle import Lifecycle
from langgraph_stm.checkpoint._retention import _ALL, DeletionReport, _batch_size
from langgraph_stm.checkpoint._saver import bridged
from langgraph_stm.checkpoint._scope import CheckpointScope, checked, owners_plan
from langgraph_stm.checkpoint._tables import Dialect, Plan, Stmt
from langgraph_stm.checkpoint._threads import ThreadQuery, ThreadState

__all__ = ["Scope", "owner_expired_plan"]


def owner_expired_plan(d: Dialect, life: Lifecycle, now: float, limit: int, owner: str) -> Plan:
    """At most ``limit`` ids of expired threads bound to ``owner``, oldest expiry first
    (``_lifecycle.expired_plan`` restricted to one owner)."""
    p = d.param
    join = "JOIN stm_owners AS o ON o.thread_id = l.thread_id AND o.owner = "
    found: list[str] = []
    if life.ttl is not None:
        rows = yield Stmt(
            f"SELECT l.thread_id FROM stm_lifecycle AS l {join}{p} WHERE l.ttl_seconds IS NULL "
            f"AND l.written_at < {p} ORDER BY l.written_at LIMIT {p}",
            [owner, now - life.ttl, limit],
        )
        found += [str(r[0]) for r in rows or []]
    rows = yield Stmt(
        f"SELECT l.thread_id FROM stm_lifecycle AS l {join}{p} WHERE l.ttl_seconds IS NOT NULL "
        f"AND l.written_at + l.ttl_seconds < {p} ORDER BY l.written_at + l.ttl_seconds LIMIT {p}",
        [owner, now, limit],
    )
    found += [str(r[0]) for r in rows or []]
    return found[:limit]


class Scope(CheckpointScope):
    """Tenant scoping for :class:`STMSaver` (see :mod:`._scope`): the outermost mixin."""

    @bridged("aget_thread_state")
    def get_thread_state(self, thread_id: str, *, owner: str | None = None) -> ThreadState | None:
        """The latest structured state of ``thread_id`` (see ``ThreadIndex``), a thread of
        ``owner``'s; :class:`ThreadScopeError` for another owner's."""
        caller = self._owner_arg(owner)
        sup: Any = super()
        if not self._scoped():
            return cast("ThreadState | None", sup.get_thread_state(thread_id))
        self._check(str(thread_id), caller)
        with checked():
            return cast("ThreadState | None", sup.get_thread_state(thread_id))

    async def aget_thread_state(
        self, thread_id: str, *, owner: str | None = None
    ) -> ThreadState | None:
        """Async twin of :meth:`get_thread_state`."""
        caller = self._owner_arg(owner)
        sup: Any = super()
        if not self._scoped():
            return cast("ThreadState | None", await sup.aget_thread_state(thread_id))
        await self._acheck(str(thread_id), caller)
        with checked():
            return cast("ThreadState | None", await sup.aget_thread_state(thread_id))

    def _page(
        self,
        states: builtins.list[ThreadState],
        owners: Mapping[str, str],
        owner: str | None,
        query: ThreadQuery,
    ) -> builtins.list[ThreadState]:
        kept = [s for s in states if owners.get(s.thread_id) == owner]
        end = None if query.limit is None else query.offset + query.limit
        return kept[query.offset : end]

    @bridged("alist_threads")
    def list_threads(
        self,
        *,
        updated_after: datetime | str | None = None,
        updated_before: datetime | str | None = None,
        limit: int | None = None,
        offset: int = 0,
        owner: str | None = None,
    ) -> builtins.list[ThreadState]:
        """List the structured states of ``owner``'s threads (see ``ThreadIndex``); with
        scoping on and no ``owner``, of the threads written without one."""
        caller = self._owner_arg(owner)
        sup: Any = super()
        if not self._scoped():
            return cast(
                "builtins.list[ThreadState]",
                sup.list_threads(
                    updated_after=updated_after,
                    updated_before=updated_before,
                    limit=limit,
                    offset=offset,
                ),
            )
        query = ThreadQuery.make(updated_after, updated_before, limit, offset)
        with checked():
            states: builtins.list[ThreadState] = sup.list_threads(
                updated_after=updated_after, updated_before=updated_before
            )
        d = self._tables.dialect
        owners = self._sync_driver().read(owners_plan(d, [s.thread_id for s in states]))
        return self._page(states, owners, caller, query)

    async def alist_threads(
        self,
        *,
        updated_after: datetime | str | None = None,
        updated_before: datetime | str | None = None,
        limit: int | None = None,
        offset: int = 0,
        owner: str | None = None,
    ) -> builtins.list[ThreadState]:
        """Async twin of :meth:`list_threads`."""
        caller = self._owner_arg(owner)
        sup: Any = super()
        if not self._scoped():
            return cast(
                "builtins.list[ThreadState]",
                await sup.alist_threads(
                    updated_after=updated_after,
                    updated_before=updated_before,
                    limit=limit,
                    offset=offset,
                ),
            )
        query = ThreadQuery.make(updated_after, updated_before, limit, offset)
        with checked():
            states: builtins.list[ThreadState] = await sup.alist_threads(
                updated_after=updated_after, updated_before=updated_before
            )
        d = self._tables.dialect
        owners = await self._aread(owners_plan(d, [s.thread_id for s in states]))
        return self._page(states, owners, caller, query)

    @bridged("adelete_thread")
    def delete_thread(  # type: ignore[override]
        self, thread_id: str, *, owner: str | None = None
    ) -> DeletionReport:
        """Delete ``owner``'s thread completely (see ``Maintenance.delete_thread``);
        :class:`ThreadScopeError`, and nothing deleted, for another owner's."""
        caller = self._owner_arg(owner)
        sup: Any = super()
        if self._scoped():
            self._check(str(thread_id), caller)
        with checked():
            return cast(DeletionReport, sup.delete_thread(thread_id))

    async def adelete_thread(  # type: ignore[override]
        self, thread_id: str, *, owner: str | None = None
    ) -> DeletionReport:
        """Async twin of :meth:`delete_thread`."""
        caller = self._owner_arg(owner)
        sup: Any = super()
        if self._scoped():
            await self._acheck(str(thread_id), caller)
        with checked():
            return cast(DeletionReport, await sup.adelete_thread(thread_id))

    def set_ttl(
        self, thread_id: str, ttl: timedelta | float | None, *, owner: str | None = None
    ) -> None:
        """Give ``owner``'s thread its own TTL (see ``Retention.set_ttl``):
        :class:`ThreadScopeError`, and nothing changed, for another owner's (a shorter
        TTL would delete it)."""
        caller = self._owner_arg(owner)
        if self._scoped():
            self._check(str(thread_id), caller)
        super().set_ttl(thread_id, ttl)  # type: ignore[misc]

    async def aset_ttl(
        self, thread_id: str, ttl: timedelta | float | None, *, owner: str | None = None
    ) -> None:
        """Async twin of :meth:`set_ttl`."""
        caller = self._owner_arg(owner)
        if self._scoped():
            await self._acheck(str(thread_id), caller)
        await super().aset_ttl(thread_id, ttl)  # type: ignore[misc]

    @bridged("aexport_thread")
    def export_thread(self, thread_id: str, *, owner: str | None = None) -> ThreadDocument:
        """Export ``owner``'s thread (see ``ThreadExport.export_thread``);
        :class:`ThreadScopeError`, and no document, for another owner's."""
        caller = self._owner_arg(owner)
        sup: Any = super()
        if self._scoped():
            self._check(str(thread_id), caller)
        with checked():
            return cast(ThreadDocument, sup.export_thread(thread_id))

    async def aexport_thread(self, thread_id: str, *, owner: str | None = None) -> ThreadDocument:
        """Async twin of :meth:`export_thread`."""
        caller = self._owner_arg(owner)
        sup: Any = super()
        if self._scoped():
            await self._acheck(str(thread_id), caller)
        with checked():
            return cast(ThreadDocument, await sup.aexport_thread(thread_id))

    @bridged("aexpired_threads")
    def expired_threads(self, *, owner: str | None = None) -> builtins.list[str]:
        """Ids of the expired threads :meth:`sweep` would delete now (see
        ``Retention.expired_threads``): with ``owner``, only those bound to it; reads only."""
        caller = self._owner_arg(owner)
        sup: Any = super()
        if caller is None:
            return cast("builtins.list[str]", sup.expired_threads())
        plan = owner_expired_plan(self._tables.dialect, self._life, self._life.now(), _ALL, caller)
        return cast("builtins.list[str]", self._sync_driver().read(plan))

    async def aexpired_threads(self, *, owner: str | None = None) -> builtins.list[str]:
        """Async twin of :meth:`expired_threads`."""
        caller = self._owner_arg(owner)
        sup: Any = super()
        if caller is None:
            return cast("builtins.list[str]", await sup.aexpired_threads())
        plan = owner_expired_plan(self._tables.dialect, self._life, self._life.now(), _ALL, caller)
        return cast("builtins.list[str]", await self._aread(plan))

    @bridged("asweep")
    def sweep(self, *, batch_size: int = 500, owner: str | None = None) -> int:
        """Delete expired threads (see ``Retention.sweep``): with ``owner``, only the
        expired threads bound to it (no tombstone purge); without, every expired thread."""
        caller = self._owner_arg(owner)
        sup: Any = super()
        if caller is None:
            return cast(int, sup.sweep(batch_size=batch_size))
        size, life = _batch_size(batch_size), self._life
        now, total, driver = life.now(), 0, self._sync_driver()
        d = self._tables.dialect
        while candidates := driver.read(owner_expired_plan(d, life, now, size, caller)):
            removed = sup._remove(candidates, expired=True, now=now)
            total += len(removed.ids)
            if not removed.ids or len(candidates) < size:
                break
        return total

    async def asweep(self, *, batch_size: int = 500, owner: str | None = None) -> int:
        """Async twin of :meth:`sweep`."""
        caller = self._owner_arg(owner)
        sup: Any = super()
        if caller is None:
            return cast(int, await sup.asweep(batch_size=batch_size))
        size, life = _batch_size(batch_size), self._life
        now, total = life.now(), 0
        d = self._tables.dialect
        while candidates := await self._aread(owner_expired_plan(d, life, now, size, caller)):
            removed = await sup._aremove(candidates, expired=True, now=now)
            total += len(removed.ids)
            if not removed.ids or len(candidates) < size:
                break
        return total
