"""Tenant scoping of :class:`STMSaver` (``STMSaver(inner, tenant_key="tenant_id")``).

**Binding.** With ``tenant_key`` set, a thread is bound at its first root checkpoint
write to the owner in ``config["configurable"][tenant_key]``: ``stm_owners (thread_id,
owner)`` gets the row, inserted if absent in the plan of the checkpoint's own rows
(:meth:`Scope._around_write`), so in the same transaction rules (SQLite: the
transaction the inner ``put`` commits; PostgreSQL: our rows' transaction, under the
thread's advisory lock). The row is never changed afterwards and is deleted with the
thread (``stm_owners`` is one of ``OUR_TABLES``), so a fresh run on a deleted thread's
id binds it anew. A thread written without an owner gets no row and stays open only to
callers without one; a thread written before scoping was turned on is such a thread.

**Checking.** Every guarded call reads the thread's row once (one primary-key lookup;
nothing is cached across calls) and refuses with
:class:`~langgraph_stm.errors.ThreadScopeError` (the message names the thread, never
its owner) before anything is read, written or deleted, when the caller's owner is not
the bound one. A caller with an owner and a thread without a row: refused when the
thread has checkpoints (it was written without an owner), allowed when it has none (a
new thread: reads find nothing, the first root write binds it). The caller's owner
comes from ``config["configurable"][tenant_key]`` for the LangGraph methods
(``get_tuple``, ``list``, ``put``, ``put_writes``, ``get_delta_channel_history`` and
their async twins), and from the ``owner=`` argument for ours (``get_thread_state``,
``list_threads``, ``export_thread``, ``delete_thread``, ``sweep``).

**Listing.** ``list(None)`` (or a config without ``thread_id``) and ``list_threads``
return only the threads bound to the caller's owner (callers without one: the threads
without one); ``sweep(owner=...)`` deletes only that owner's expired threads, while
``sweep()`` stays the operator's sweep of every expired thread.

With ``tenant_key=None`` (the default) nothing changes and ``owner=`` must stay unset.

``set_ttl(..., owner=)`` is checked too (a shorter TTL deletes). Not scoped (operator
calls): ``prune``, ``vacuum``, ``refresh_threads``, ``audit_log``, ``copy_thread``;
``import_thread`` refuses any thread that has checkpoints.

This module holds the binding, the check and the LangGraph methods
(:class:`CheckpointScope`); the thread methods with ``owner=`` are in
:mod:`._scope_threads` (:class:`~._scope_threads.Scope`).

Example:
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> from langgraph.graph import START, StateGraph
    >>> from langgraph_stm import STMSaver, STMState
    >>> from langgraph_stm.errors import ThreadScopeError
    >>> saver = STMSaver(InMemorySaver(), tenant_key="tenant_id")
    >>> def answer(state: STMState) -> dict:
    ...     return {"messages": [("ai", "hi")]}
    >>> graph = StateGraph(STMState).add_node(answer).add_edge(START, "answer")
    >>> graph = graph.compile(checkpointer=saver)
    >>> _ = graph.invoke({"messages": [("user", "hello")]},
    ...                  {"configurable": {"thread_id": "t1", "tenant_id": "a"}})
    >>> len(saver.list_threads(owner="a")), len(saver.list_threads(owner="b"))
    (1, 0)
    >>> try:
    ...     graph.get_state({"configurable": {"thread_id": "t1", "tenant_id": "b"}})
    ... except ThreadScopeError as exc:
    ...     print(exc.thread_id, exc.owner)
    t1 b
"""

from __future__ import annotations

import builtins
import contextvars
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)

from langgraph_stm._errors import InvalidArgumentError, ThreadScopeError
from langgraph_stm.checkpoint._lifecycle import Lifecycle
from langgraph_stm.checkpoint._pipeline import ids
from langgraph_stm.checkpoint._saver import SaverCore, bridged
from langgraph_stm.checkpoint._tables import Dialect, Plan, Stmt, batches

__all__ = ["CheckpointScope", "checked", "owners_plan", "refused"]

_CHECKPOINTS = "checkpoints"
"""The inner saver's checkpoint table (pinned by ``tests/unit/test_saver_contract.py``)."""

_TRUSTED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "langgraph_stm_scope_checked", default=False
)
"""Set while a call that was already checked runs the saver's own methods (an export
reads ``get_tuple`` and ``get_thread_state``): they skip the check. Reset when the call
returns, so nothing is remembered across calls."""


@contextmanager
def checked() -> Iterator[None]:
    token = _TRUSTED.set(True)
    try:
        yield
    finally:
        _TRUSTED.reset(token)


def _owner_value(value: object, what: str) -> str | None:
    if value is None or (isinstance(value, str) and value):
        return value
    raise InvalidArgumentError(f"{what} must be a non-empty string or None, got {value!r}")


def refused(thread_id: str, owner: str | None, tenant_key: str) -> ThreadScopeError:
    """The error of a call outside its owner's scope (never names the thread's owner)."""
    who = f"owner {owner!r}" if owner is not None else "a caller without an owner"
    return ThreadScopeError(
        f"thread {thread_id!r} is outside the scope of {who} "
        f"(config['configurable'][{tenant_key!r}] or owner=): it was first written under "
        "another owner, or without one. Nothing was read, written or deleted.",
        thread_id=thread_id,
        owner=owner,
    )


def _across(config: RunnableConfig | None) -> RunnableConfig | None:
    """The config of a listing across threads for the inner saver: ``None`` when it
    names nothing but the owner (``InMemorySaver.list`` wants a ``thread_id`` otherwise)."""
    c = (config or {}).get("configurable") or {}
    return config if "checkpoint_ns" in c else None


# -- plans --------------------------------------------------------------------------------
def lookup_plan(d: Dialect, thread_id: str, exists_table: str | None) -> Plan:
    """``(bound owner or None, whether ``exists_table`` has rows of the thread)`` in one
    statement (without ``exists_table``: the owner only, and ``False``)."""
    p = d.param
    if exists_table is None:
        rows = (
            yield Stmt(f"SELECT owner FROM stm_owners WHERE thread_id = {p}", [thread_id])
        ) or []
        return (str(rows[0][0]) if rows else None), False
    sql = (
        "SELECT o.owner, CASE WHEN EXISTS (SELECT 1 FROM "
        f"{exists_table} AS c WHERE c.thread_id = k.thread_id) THEN 1 ELSE 0 END "
        f"FROM (SELECT CAST({p} AS TEXT) AS thread_id) AS k "
        "LEFT JOIN stm_owners AS o ON o.thread_id = k.thread_id"
    )
    rows = (yield Stmt(sql, [thread_id])) or []
    owner, exists = rows[0] if rows else (None, 0)
    return (None if owner is None else str(owner)), bool(exists)


def bind_plan(d: Dialect, thread_id: str, owner: str) -> Plan:
    """Bind a thread to ``owner`` unless it is bound already; return its owner then."""
    p = d.param
    yield Stmt(d.ignoring("stm_owners", "thread_id, owner", 2), [(thread_id, owner)], many=True)
    rows = (yield Stmt(f"SELECT owner FROM stm_owners WHERE thread_id = {p}", [thread_id])) or []
    return str(rows[0][0]) if rows else None


def owners_plan(d: Dialect, thread_ids: Iterable[str]) -> Plan:
    """``{thread_id: owner}`` of the bound ones among ``thread_ids``."""
    found: dict[str, str] = {}
    for batch in batches(sorted(set(thread_ids)), d.max_params):
        cond, params = d.in_list("thread_id", batch)
        rows = (yield Stmt(f"SELECT thread_id, owner FROM stm_owners WHERE {cond}", params)) or []
        found.update((str(t), str(o)) for t, o in rows)
    return found


class CheckpointScope(SaverCore):
    """Tenant scoping of LangGraph's checkpoint methods (see the module doc); the thread
    methods are in :class:`~._scope_threads.Scope`, the outermost mixin."""

    tenant_key: str | None = None
    """The ``configurable`` key naming a call's owner; ``None``: scoping is off."""
    _life: Lifecycle

    def __init__(
        self, inner: BaseCheckpointSaver[Any], /, *, tenant_key: str | None = None, **options: Any
    ) -> None:
        if tenant_key is not None and (not isinstance(tenant_key, str) or not tenant_key):
            raise InvalidArgumentError(
                f"STMSaver(tenant_key=...) must be a non-empty string or None, got {tenant_key!r}"
            )
        super().__init__(inner, **options)
        self.tenant_key = tenant_key

    # -- the owner of a call, and the check ---------------------------------------------
    def _scoped(self) -> bool:
        return self.tenant_key is not None and not _TRUSTED.get()

    def _caller(self, config: RunnableConfig | None) -> str | None:
        key = cast(str, self.tenant_key)
        value = ((config or {}).get("configurable") or {}).get(key)
        return _owner_value(value, f"config['configurable'][{key!r}]")

    def _owner_arg(self, owner: object) -> str | None:
        value = _owner_value(owner, "owner")
        if value is not None and self.tenant_key is None:
            raise InvalidArgumentError(
                "owner= needs tenant scoping: STMSaver(..., tenant_key='tenant_id')"
            )
        return value

    def _exists_table(self) -> str | None:
        """Where a thread's checkpoints show (``None``: ask the ``InMemorySaver``)."""
        if self._tables.in_database:
            return _CHECKPOINTS
        return None if self._inner.kind == "memory" else "stm_lifecycle"

    def _has_checkpoints(self, thread_id: str) -> bool:
        storage: Mapping[str, Any] = getattr(self.inner, "storage", {})
        by_ns = storage.get(thread_id) if thread_id in storage else None
        return isinstance(by_ns, Mapping) and any(by_ns.values())

    def _check_plan(self, thread_id: str, owner: str | None) -> Plan:
        """Refuse unless ``owner`` may use ``thread_id``; return whether it is bound."""
        d, table = self._tables.dialect, self._exists_table()
        ask = owner is not None and table is not None
        bound, exists = yield from lookup_plan(d, thread_id, table if ask else None)
        if bound != owner:
            if bound is None and owner is not None and table is None:
                exists = self._has_checkpoints(thread_id)
            if bound is not None or exists:
                raise refused(thread_id, owner, cast(str, self.tenant_key))
        return bound is not None

    def _check(self, thread_id: str, owner: str | None) -> None:
        self._sync_driver().read(self._check_plan(thread_id, owner))

    async def _acheck(self, thread_id: str, owner: str | None) -> None:
        await self._aread(self._check_plan(thread_id, owner))

    def _write_plan(self, config: RunnableConfig, owner: str | None, plan: Plan) -> Plan:
        thread_id, ns, _ = ids(config)
        bound = yield from self._check_plan(thread_id, owner)
        if not bound and owner is not None and ns == "":  # the first root write binds
            got = yield from bind_plan(self._tables.dialect, thread_id, owner)
            if got != owner:  # another writer bound it first
                raise refused(thread_id, owner, cast(str, self.tenant_key))
        return (yield from plan)

    # -- the write path -------------------------------------------------------------------
    def _around_write(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        plan: Plan,
    ) -> Plan:
        plan = super()._around_write(config, checkpoint, metadata, plan)
        if not self._scoped():
            return plan
        return self._write_plan(config, self._caller(config), plan)

    @bridged("aput_writes")
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store pending writes (see :meth:`SaverCore.put_writes`) of a thread in scope."""
        if self._scoped():
            self._check(ids(config)[0], self._caller(config))
        super().put_writes(config, writes, task_id, task_path)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of :meth:`put_writes`."""
        if self._scoped():
            await self._acheck(ids(config)[0], self._caller(config))
        await super().aput_writes(config, writes, task_id, task_path)

    # -- LangGraph's reads ----------------------------------------------------------------
    @bridged("aget_tuple")
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Fetch a checkpoint tuple (see :meth:`SaverCore.get_tuple`) of a thread in scope."""
        if self._scoped():
            self._check(ids(config)[0], self._caller(config))
        return super().get_tuple(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async twin of :meth:`get_tuple`."""
        if self._scoped():
            await self._acheck(ids(config)[0], self._caller(config))
        return await super().aget_tuple(config)

    def _thread_of(self, config: RunnableConfig | None) -> str | None:
        thread = ((config or {}).get("configurable") or {}).get("thread_id")
        return None if thread is None else str(thread)

    def _in_scope(
        self,
        tuples: builtins.list[CheckpointTuple],
        owners: Mapping[str, str],
        owner: str | None,
        limit: int | None,
    ) -> builtins.list[CheckpointTuple]:
        shown = [t for t in tuples if owners.get(ids(t.config)[0]) == owner]
        return shown if limit is None else shown[:limit]

    @bridged("alist")
    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """List checkpoint tuples (see :meth:`SaverCore.list`): of one thread in scope,
        or, without ``thread_id``, of the caller's owner's threads only."""
        if not self._scoped():
            yield from super().list(config, filter=filter, before=before, limit=limit)
            return
        owner, thread = self._caller(config), self._thread_of(config)
        if thread is not None:
            self._check(thread, owner)
            yield from super().list(config, filter=filter, before=before, limit=limit)
            return
        page = builtins.list(super().list(_across(config), filter=filter, before=before))
        d = self._tables.dialect
        owners = self._sync_driver().read(owners_plan(d, {ids(t.config)[0] for t in page}))
        yield from self._in_scope(page, owners, owner, limit)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async twin of :meth:`list`."""
        if not self._scoped():
            async for tup in super().alist(config, filter=filter, before=before, limit=limit):
                yield tup
            return
        owner, thread = self._caller(config), self._thread_of(config)
        if thread is not None:
            await self._acheck(thread, owner)
            async for tup in super().alist(config, filter=filter, before=before, limit=limit):
                yield tup
            return
        page = [t async for t in super().alist(_across(config), filter=filter, before=before)]
        d = self._tables.dialect
        owners = await self._aread(owners_plan(d, {ids(t.config)[0] for t in page}))
        for tup in self._in_scope(page, owners, owner, limit):
            yield tup

    @bridged("aget_delta_channel_history")
    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """See :meth:`SaverCore.get_delta_channel_history`; of a thread in scope."""
        if self._scoped():
            self._check(ids(config)[0], self._caller(config))
        return super().get_delta_channel_history(config=config, channels=channels)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async twin of :meth:`get_delta_channel_history`."""
        if self._scoped():
            await self._acheck(ids(config)[0], self._caller(config))
        return await super().aget_delta_channel_history(config=config, channels=channels)

    # -- our methods, with owner= ---------------------------------------------------------
