"""Tenant scoping (``Scope``, ``tenant_key=``) on InMemorySaver, SQLite and PostgreSQL.

Tenant A cannot read, list, resume, write, export or delete tenant B's thread, through
the graph API (``invoke``, ``get_state``, ``get_state_history``, ``update_state`` and the
async twins) and the saver API, and B's data never appears in A's results; a thread
written without an owner stays open only to callers without one; with ``tenant_key``
unset nothing changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_stm import STMSaver, STMState
from langgraph_stm.checkpoint._scope import owners_plan
from langgraph_stm.errors import InvalidArgumentError, ThreadScopeError

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
ASYNC_BACKENDS = [
    "memory",
    "async_sqlite",
    pytest.param("async_postgres", marks=pytest.mark.postgres),
]


_Saver = STMSaver  # tenant scoping is STMSaver's outermost mixin


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def reply(state: STMState) -> dict[str, Any]:
    n = len(state["messages"])
    return {"goal": f"goal {n}", "messages": [AIMessage(f"reply {n}", id=f"a{n}")]}


def approve(state: STMState) -> dict[str, Any]:
    answer = interrupt("approve?")
    n = len(state["messages"])
    return {"goal": f"approved {answer}", "messages": [AIMessage(f"done {n}", id=f"d{n}")]}


def chat(saver: Any, *, approval: bool = True) -> Any:
    graph = StateGraph(STMState).add_node(reply).add_edge(START, "reply")
    if approval:
        graph = graph.add_node(approve).add_edge("reply", "approve")
    return graph.compile(checkpointer=saver)


def cfg(thread_id: str | None = None, tenant: str | None = None, **extra: Any) -> Any:
    c: dict[str, Any] = dict(extra)
    if thread_id is not None:
        c["thread_id"] = thread_id
    if tenant is not None:
        c["tenant_id"] = tenant
    return {"configurable": c}


def start(thread_id: str, i: int = 0) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"secret of {thread_id} {i}", id=f"h-{thread_id}-{i}")]}


@contextmanager
def open_saver(backend: str, request: pytest.FixtureRequest, **options: Any) -> Iterator[Any]:
    options.setdefault("tenant_key", "tenant_id")
    if backend == "memory":
        yield _Saver(InMemorySaver(), **options)
    elif backend == "sqlite":
        path = request.getfixturevalue("tmp_path") / "scope.sqlite"
        with _Saver.from_sqlite(path, **options) as saver:
            saver.setup()
            yield saver
    else:
        uri = request.getfixturevalue("postgres_uri")
        with _Saver.from_postgres(uri, **options) as saver:
            saver.setup()
            yield saver


@asynccontextmanager
async def open_async(
    backend: str, request: pytest.FixtureRequest, **options: Any
) -> AsyncIterator[Any]:
    options.setdefault("tenant_key", "tenant_id")
    if backend == "memory":
        yield _Saver(InMemorySaver(), **options)
    elif backend == "async_sqlite":
        path = request.getfixturevalue("tmp_path") / "scope.sqlite"
        async with _Saver.from_async_sqlite(path, **options) as saver:
            await saver.asetup()
            yield saver
    else:
        uri = request.getfixturevalue("postgres_uri")
        async with _Saver.from_async_postgres(uri, **options) as saver:
            await saver.asetup()
            yield saver


def refused(exc: pytest.ExceptionInfo[ThreadScopeError], thread_id: str, owner: str | None) -> None:
    assert exc.value.thread_id == thread_id
    assert exc.value.owner == owner
    assert repr(thread_id) in str(exc.value)
    for other in ("'A'", "'B'"):  # the thread's own owner is never named
        if other != repr(owner):
            assert other not in str(exc.value)


def texts(values: Any) -> str:
    return repr(values)


# -- sync: graph API and saver API ------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tenant_cannot_touch_another_tenants_thread(
    backend: str, request: pytest.FixtureRequest
) -> None:
    with open_saver(backend, request) as saver:
        graph = chat(saver)
        graph.invoke(start("ta"), cfg("ta", "A"))  # paused at the approval
        graph.invoke(start("tb"), cfg("tb", "B"))
        before = graph.get_state(cfg("ta", "A"))
        assert before.next == ("approve",)
        assert "secret of ta" in texts(before.values)
        head = before.config["configurable"]["checkpoint_id"]

        # read: get_state, history, get_tuple, list, delta history, projection
        for caller in ("B", None):
            with pytest.raises(ThreadScopeError) as exc:
                graph.get_state(cfg("ta", caller))
            refused(exc, "ta", caller)
            with pytest.raises(ThreadScopeError):
                list(graph.get_state_history(cfg("ta", caller)))
            with pytest.raises(ThreadScopeError):
                saver.get_tuple(cfg("ta", caller))
            with pytest.raises(ThreadScopeError):
                list(saver.list(cfg("ta", caller)))
            with pytest.raises(ThreadScopeError):
                saver.get_delta_channel_history(config=cfg("ta", caller), channels=["messages"])
            with pytest.raises(ThreadScopeError):
                saver.get_thread_state("ta", owner=caller)
        # resume and write: refused, and nothing changes
        with pytest.raises(ThreadScopeError):
            graph.invoke(Command(resume="yes"), cfg("ta", "B"))
        with pytest.raises(ThreadScopeError):
            graph.invoke(start("ta", 1), cfg("ta", "B"))
        with pytest.raises(ThreadScopeError):
            graph.update_state(cfg("ta", "B"), {"goal": "hijacked"})
        with pytest.raises(ThreadScopeError):
            graph.update_state(cfg("ta"), {"goal": "hijacked"})
        at_head = cfg("ta", "B", checkpoint_ns="", checkpoint_id=head)
        with pytest.raises(ThreadScopeError):
            saver.put_writes(at_head, [("goal", "hijacked")], "task-1")
        with pytest.raises(ThreadScopeError):
            saver.put(at_head, empty_checkpoint(), {"source": "update", "step": 9}, {})
        # export and delete: refused, no document, nothing deleted
        with pytest.raises(ThreadScopeError):
            saver.export_thread("ta", owner="B")
        with pytest.raises(ThreadScopeError):
            saver.delete_thread("ta", owner="B")
        with pytest.raises(ThreadScopeError):
            saver.delete_thread("ta")
        after = graph.get_state(cfg("ta", "A"))
        assert after.config["configurable"]["checkpoint_id"] == head
        assert after.values == before.values
        assert saver.get_tuple(cfg("ta", "A")) is not None

        # listings: only the caller's threads
        assert [s.thread_id for s in saver.list_threads(owner="A")] == ["ta"]
        assert [s.thread_id for s in saver.list_threads(owner="B")] == ["tb"]
        assert saver.list_threads() == []
        assert saver.list_threads(owner="A", limit=1, offset=1) == []
        listed_a = list(saver.list(cfg(tenant="A")))
        assert listed_a
        assert {t.config["configurable"]["thread_id"] for t in listed_a} == {"ta"}
        assert "secret of tb" not in texts([t.checkpoint for t in listed_a])
        assert len(list(saver.list(cfg(tenant="A"), limit=1))) == 1
        assert {t.config["configurable"]["thread_id"] for t in saver.list(cfg(tenant="B"))} == {
            "tb"
        }
        assert list(saver.list(None)) == []

        # the owner: export, resume, delete
        doc = saver.export_thread("ta", owner="A")
        assert doc["thread_id"] == "ta"
        assert "secret of tb" not in texts(doc)
        state = saver.get_thread_state("ta", owner="A")
        assert state is not None
        assert state.thread_id == "ta"
        graph.invoke(Command(resume="yes"), cfg("ta", "A"))
        assert graph.get_state(cfg("ta", "A")).values["goal"] == "approved yes"
        graph.update_state(cfg("ta", "A"), {"goal": "edited"})
        assert graph.get_state(cfg("ta", "A")).values["goal"] == "edited"
        report = saver.delete_thread("ta", owner="A")
        assert report.rows["stm_owners"] == 1
        assert graph.get_state(cfg("ta", "A")).values == {}
        # B's thread is untouched; a fresh run on the deleted id binds it anew
        assert "secret of tb" in texts(graph.get_state(cfg("tb", "B")).values)
        graph.invoke(start("ta", 2), cfg("ta", "B"))
        assert {s.thread_id for s in saver.list_threads(owner="B")} == {"ta", "tb"}
        with pytest.raises(ThreadScopeError):
            graph.get_state(cfg("ta", "A"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tenant_cannot_change_another_tenants_ttl(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """set_ttl on another owner's thread (which could make it expire at once) is refused
    and changes nothing; the owner's own call works."""
    clock = Clock()
    with open_saver(backend, request, clock=clock) as saver:
        graph = chat(saver)
        graph.invoke(start("ta"), cfg("ta", "A"))
        with pytest.raises(ThreadScopeError) as exc:
            saver.set_ttl("ta", timedelta(seconds=1), owner="B")
        refused(exc, "ta", "B")
        with pytest.raises(ThreadScopeError):
            saver.set_ttl("ta", timedelta(seconds=1))
        clock.now += timedelta(minutes=5)
        assert saver.get_thread_state("ta", owner="A") is not None
        saver.set_ttl("ta", timedelta(seconds=1), owner="A")
        assert saver.get_thread_state("ta", owner="A") is None  # expired: it reads as absent


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_thread_written_without_an_owner_stays_open_only_without_one(
    backend: str, request: pytest.FixtureRequest
) -> None:
    with open_saver(backend, request) as saver:
        graph = chat(saver, approval=False)
        graph.invoke(start("open"), cfg("open"))
        assert "secret of open" in texts(graph.get_state(cfg("open")).values)
        with pytest.raises(ThreadScopeError) as exc:
            graph.get_state(cfg("open", "A"))
        refused(exc, "open", "A")
        with pytest.raises(ThreadScopeError):
            graph.invoke(start("open", 1), cfg("open", "A"))
        with pytest.raises(ThreadScopeError):
            saver.export_thread("open", owner="A")
        with pytest.raises(ThreadScopeError):
            saver.delete_thread("open", owner="A")
        assert [s.thread_id for s in saver.list_threads()] == ["open"]
        assert saver.list_threads(owner="A") == []
        graph.invoke(start("open", 1), cfg("open"))  # the unowned caller continues it
        assert len(graph.get_state(cfg("open")).values["messages"]) == 4
        assert saver._sync_driver().read(owners_plan(saver._tables.dialect, ["open"])) == {}
        # a new thread of A: reads find nothing, the first write binds it
        assert graph.get_state(cfg("new", "A")).values == {}
        assert saver.get_tuple(cfg("new", "A")) is None
        assert saver.get_thread_state("new", owner="A") is None
        graph.invoke(start("new"), cfg("new", "A"))
        owners = saver._sync_driver().read(owners_plan(saver._tables.dialect, ["new", "open"]))
        assert owners == {"new": "A"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_scoped_sweep_deletes_only_the_owners_expired_threads(
    backend: str, request: pytest.FixtureRequest
) -> None:
    clock = Clock()
    with open_saver(backend, request, ttl=timedelta(hours=1), clock=clock) as saver:
        graph = chat(saver, approval=False)
        graph.invoke(start("ta"), cfg("ta", "A"))
        graph.invoke(start("tb"), cfg("tb", "B"))
        clock.now += timedelta(hours=2)
        assert saver.sweep(owner="A") == 1
        assert saver.sweep(owner="A") == 0
        assert saver.sweep() == 1  # the operator's sweep: every expired thread


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_without_tenant_key_nothing_changes(backend: str, request: pytest.FixtureRequest) -> None:
    with open_saver(backend, request, tenant_key=None) as saver:
        graph = chat(saver, approval=False)
        graph.invoke(start("ta"), cfg("ta", "A"))
        assert "secret of ta" in texts(graph.get_state(cfg("ta", "B")).values)
        graph.invoke(start("ta", 1), cfg("ta", "B"))
        assert [s.thread_id for s in saver.list_threads()] == ["ta"]
        assert saver.export_thread("ta")["thread_id"] == "ta"
        assert saver._sync_driver().read(owners_plan(saver._tables.dialect, ["ta"])) == {}
        with pytest.raises(InvalidArgumentError):
            saver.list_threads(owner="A")
        saver.delete_thread("ta")
        assert graph.get_state(cfg("ta")).values == {}


def test_options_are_checked() -> None:
    with pytest.raises(InvalidArgumentError):
        _Saver(InMemorySaver(), tenant_key="")
    saver = _Saver(InMemorySaver(), tenant_key="tenant_id")
    with pytest.raises(InvalidArgumentError):
        saver.get_tuple(cfg("t", tenant=None, tenant_id=3))
    with pytest.raises(InvalidArgumentError):
        saver.get_thread_state("t", owner="")


# -- async -------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ASYNC_BACKENDS)
async def test_async_a_tenant_cannot_touch_another_tenants_thread(
    backend: str, request: pytest.FixtureRequest
) -> None:
    async with open_async(backend, request) as saver:
        graph = chat(saver)
        await graph.ainvoke(start("ta"), cfg("ta", "A"))
        await graph.ainvoke(start("tb"), cfg("tb", "B"))
        before = await graph.aget_state(cfg("ta", "A"))
        head = before.config["configurable"]["checkpoint_id"]
        for caller in ("B", None):
            with pytest.raises(ThreadScopeError) as exc:
                await graph.aget_state(cfg("ta", caller))
            refused(exc, "ta", caller)
            with pytest.raises(ThreadScopeError):
                [s async for s in graph.aget_state_history(cfg("ta", caller))]
            with pytest.raises(ThreadScopeError):
                await saver.aget_tuple(cfg("ta", caller))
            with pytest.raises(ThreadScopeError):
                [t async for t in saver.alist(cfg("ta", caller))]
            with pytest.raises(ThreadScopeError):
                await saver.aget_delta_channel_history(
                    config=cfg("ta", caller), channels=["messages"]
                )
            with pytest.raises(ThreadScopeError):
                await saver.aget_thread_state("ta", owner=caller)
        with pytest.raises(ThreadScopeError):
            await graph.ainvoke(Command(resume="yes"), cfg("ta", "B"))
        with pytest.raises(ThreadScopeError):
            await graph.aupdate_state(cfg("ta", "B"), {"goal": "hijacked"})
        at_head = cfg("ta", "B", checkpoint_ns="", checkpoint_id=head)
        with pytest.raises(ThreadScopeError):
            await saver.aput_writes(at_head, [("goal", "hijacked")], "task-1")
        with pytest.raises(ThreadScopeError):
            await saver.aput(at_head, empty_checkpoint(), {"source": "update", "step": 9}, {})
        with pytest.raises(ThreadScopeError):
            await saver.aexport_thread("ta", owner="B")
        with pytest.raises(ThreadScopeError):
            await saver.adelete_thread("ta", owner="B")
        if backend != "memory":  # a sync call over an async saver, from another thread
            with pytest.raises(ThreadScopeError):
                await asyncio.to_thread(saver.export_thread, "ta", owner="B")
            doc = await asyncio.to_thread(saver.export_thread, "ta", owner="A")
            assert doc["thread_id"] == "ta"
        after = await graph.aget_state(cfg("ta", "A"))
        assert after.config["configurable"]["checkpoint_id"] == head
        assert after.values == before.values

        assert [s.thread_id for s in await saver.alist_threads(owner="A")] == ["ta"]
        assert [s.thread_id for s in await saver.alist_threads(owner="B")] == ["tb"]
        assert await saver.alist_threads() == []
        listed = [t async for t in saver.alist(cfg(tenant="A"))]
        assert listed
        assert {t.config["configurable"]["thread_id"] for t in listed} == {"ta"}
        assert "secret of tb" not in texts([t.checkpoint for t in listed])

        doc = await saver.aexport_thread("ta", owner="A")
        assert doc["thread_id"] == "ta"
        await graph.ainvoke(Command(resume="yes"), cfg("ta", "A"))
        assert (await graph.aget_state(cfg("ta", "A"))).values["goal"] == "approved yes"
        await saver.adelete_thread("ta", owner="A")
        assert (await graph.aget_state(cfg("ta", "A"))).values == {}
        assert "secret of tb" in texts((await graph.aget_state(cfg("tb", "B"))).values)


@pytest.mark.parametrize("backend", ASYNC_BACKENDS)
async def test_async_scoped_sweep(backend: str, request: pytest.FixtureRequest) -> None:
    clock = Clock()
    async with open_async(backend, request, ttl=timedelta(hours=1), clock=clock) as saver:
        graph = chat(saver, approval=False)
        await graph.ainvoke(start("ta"), cfg("ta", "A"))
        await graph.ainvoke(start("tb"), cfg("tb", "B"))
        clock.now += timedelta(hours=2)
        assert await saver.asweep(owner="B") == 1
        assert await saver.asweep() == 1
