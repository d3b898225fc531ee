"""STMSaver(store=...) deletes a thread's offloaded tool outputs with the thread, on
every backend, sync and async, and only that thread's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_stm import STMSaver, STMState
from langgraph_stm.errors import InvalidArgumentError
from langgraph_stm.tools import offload_namespace

THREADS = ("t1", "t2", "t10")
OFFLOADS = 230  # more than one search page


def answer(state: STMState) -> dict[str, Any]:
    return {"messages": [AIMessage("done", id="a1")]}


def compile_graph(saver: STMSaver) -> Any:
    return StateGraph(STMState).add_node(answer).add_edge(START, "answer").compile(saver)


def config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def offloads(thread_id: str) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    """The items an Offloader would have written in ``thread_id``."""
    count = OFFLOADS if thread_id == "t1" else 2
    return [
        (offload_namespace(thread_id), f"m{i}", {"content": f"output {i}", "tokens": 3})
        for i in range(count)
    ]


def fill(graph: Any, store: BaseStore) -> None:
    for thread_id in THREADS:
        graph.invoke({"messages": [HumanMessage("go", id="h1")]}, config(thread_id))
        for namespace, key, value in offloads(thread_id):
            store.put(namespace, key, value)
    store.put(("notes", "t1"), "keep", {"text": "long-term memory, not an offload"})


async def afill(graph: Any, store: BaseStore) -> None:
    for thread_id in THREADS:
        await graph.ainvoke({"messages": [HumanMessage("go", id="h1")]}, config(thread_id))
        for namespace, key, value in offloads(thread_id):
            await store.aput(namespace, key, value)
    await store.aput(("notes", "t1"), "keep", {"text": "long-term memory, not an offload"})


def left(store: BaseStore, thread_id: str) -> int:
    return len(store.search(offload_namespace(thread_id), limit=1000))


def assert_only_t1_is_gone(store: BaseStore, graph: Any) -> None:
    assert left(store, "t1") == 0
    assert graph.get_state(config("t1")).values == {}
    assert (left(store, "t2"), left(store, "t10")) == (2, 2)
    assert graph.get_state(config("t2")).values["messages"]
    assert store.get(("notes", "t1"), "keep") is not None


class FailingStore(InMemoryStore):
    """A store that is down: every search raises."""

    def search(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("store unavailable")


class TestSyncBackends:
    """``delete_thread`` and ``prune(strategy="delete")`` on the sync savers."""

    @pytest.fixture(params=["memory", "sqlite"])
    def saver_and_store(
        self, request: pytest.FixtureRequest, sqlite_path: Path
    ) -> Iterator[tuple[STMSaver, InMemoryStore]]:
        store = InMemoryStore()
        if request.param == "memory":
            yield STMSaver(InMemorySaver(), store=store), store
            return
        with STMSaver.from_sqlite(sqlite_path, store=store) as saver:
            saver.setup()
            yield saver, store

    def test_delete_thread_deletes_its_offloads(
        self, saver_and_store: tuple[STMSaver, InMemoryStore]
    ) -> None:
        """Every page of t1's items goes; t2, t10 and other namespaces stay."""
        saver, store = saver_and_store
        graph = compile_graph(saver)
        fill(graph, store)
        saver.delete_thread("t1")
        assert_only_t1_is_gone(store, graph)

    def test_prune_delete_deletes_offloads(
        self, saver_and_store: tuple[STMSaver, InMemoryStore]
    ) -> None:
        """``prune(strategy="delete")`` deletes threads as ``delete_thread`` does."""
        saver, store = saver_and_store
        graph = compile_graph(saver)
        fill(graph, store)
        saver.prune(["t1", "t2"], strategy="delete")
        assert (left(store, "t1"), left(store, "t2"), left(store, "t10")) == (0, 0, 2)

    def test_prune_keep_latest_keeps_offloads(
        self, saver_and_store: tuple[STMSaver, InMemoryStore]
    ) -> None:
        """Pruning old checkpoints keeps the thread, so its offloads stay."""
        saver, store = saver_and_store
        graph = compile_graph(saver)
        fill(graph, store)
        saver.prune(["t1"])
        assert left(store, "t1") == OFFLOADS


class TestWhereTheStoreComesFrom:
    """How the saver is told of the store, and what happens without one."""

    def test_saver_without_store_leaves_the_store_alone(self) -> None:
        """No ``store=``: deleting a thread touches checkpoints only."""
        store = InMemoryStore()
        saver = STMSaver(InMemorySaver())
        graph = compile_graph(saver)
        fill(graph, store)
        saver.delete_thread("t1")
        assert left(store, "t1") == OFFLOADS
        assert saver.store is None

    def test_wrap_and_constructors_pass_the_store_through(self, sqlite_path: Path) -> None:
        """``wrap`` and ``from_sqlite`` take ``store=`` like the constructor."""
        store = InMemoryStore()
        assert STMSaver.wrap(InMemorySaver(), store=store).store is store
        with STMSaver.from_sqlite(sqlite_path, store=store, validate_writes=False) as saver:
            assert (saver.store, saver.validate_writes) == (store, False)

    def test_store_must_be_a_langgraph_store(self) -> None:
        """A path or a callable is refused with a hint."""
        with pytest.raises(InvalidArgumentError, match="BaseStore"):
            STMSaver(InMemorySaver(), store="sqlite:///store.db")  # type: ignore[arg-type]

    def test_store_failure_leaves_the_thread_to_delete_again(self) -> None:
        """The store goes first: if it fails, the checkpoints are still there."""
        saver = STMSaver(InMemorySaver(), store=FailingStore())
        graph = compile_graph(saver)
        graph.invoke({"messages": [HumanMessage("go", id="h1")]}, config("t1"))
        with pytest.raises(ConnectionError):
            saver.delete_thread("t1")
        assert saver.get_tuple(config("t1")) is not None


class TestAsync:
    """``adelete_thread`` uses ``asearch``/``adelete``; ``aprune`` too."""

    async def test_adelete_thread_on_async_sqlite(self, sqlite_path: Path) -> None:
        """The async twin deletes every page of the thread's offloads."""
        store = InMemoryStore()
        async with STMSaver.from_async_sqlite(sqlite_path, store=store) as saver:
            await saver.asetup()
            graph = compile_graph(saver)
            await afill(graph, store)
            await saver.adelete_thread("t1")
            assert await store.asearch(offload_namespace("t1")) == []
            assert (await graph.aget_state(config("t1"))).values == {}
            assert left(store, "t2") == 2

    async def test_aprune_delete_on_memory(self) -> None:
        """``aprune(strategy="delete")`` deletes the offloads with the threads."""
        store = InMemoryStore()
        saver = STMSaver(InMemorySaver(), store=store)
        graph = compile_graph(saver)
        await afill(graph, store)
        await saver.aprune(["t1"], strategy="delete")
        assert (left(store, "t1"), left(store, "t2")) == (0, 2)


@contextmanager
def postgres(uri: str) -> Iterator[tuple[STMSaver, BaseStore]]:
    from langgraph.store.postgres import PostgresStore

    with (
        PostgresStore.from_conn_string(uri) as store,
        STMSaver.from_postgres(uri, store=store) as saver,
    ):
        store.setup()
        saver.setup()
        yield saver, store


@asynccontextmanager
async def async_postgres(uri: str) -> AsyncIterator[tuple[STMSaver, BaseStore]]:
    from langgraph.store.postgres import AsyncPostgresStore

    async with (
        AsyncPostgresStore.from_conn_string(uri) as store,
        STMSaver.from_async_postgres(uri, store=store) as saver,
    ):
        await store.setup()
        await saver.asetup()
        yield saver, store


@pytest.mark.postgres
class TestPostgres:
    """PostgresSaver with PostgresStore, AsyncPostgresSaver with AsyncPostgresStore."""

    def test_delete_thread(self, postgres_uri: str) -> None:
        """Sync: every page of t1's offloads in PostgresStore goes with the thread."""
        with postgres(postgres_uri) as (saver, store):
            graph = compile_graph(saver)
            fill(graph, store)
            saver.delete_thread("t1")
            assert_only_t1_is_gone(store, graph)

    def test_in_memory_store_with_the_postgres_saver(self, postgres_uri: str) -> None:
        """The store and the saver need not share a backend."""
        store = InMemoryStore()
        with STMSaver.from_postgres(postgres_uri, store=store) as saver:
            saver.setup()
            graph = compile_graph(saver)
            fill(graph, store)
            saver.delete_thread("t1")
            assert_only_t1_is_gone(store, graph)

    async def test_adelete_thread(self, postgres_uri: str) -> None:
        """Async: adelete_thread deletes through AsyncPostgresStore."""
        async with async_postgres(postgres_uri) as (saver, store):
            graph = compile_graph(saver)
            await afill(graph, store)
            await saver.adelete_thread("t1")
            assert await store.asearch(offload_namespace("t1"), limit=1000) == []
            assert (await graph.aget_state(config("t1"))).values == {}
            items = await store.asearch(offload_namespace("t2"), limit=1000)
            assert len(items) == 2

    async def test_sync_delete_from_a_worker_thread(self, postgres_uri: str) -> None:
        """Over the async saver, sync delete_thread (another thread) runs the async twin."""
        async with async_postgres(postgres_uri) as (saver, store):
            graph = compile_graph(saver)
            await afill(graph, store)
            await asyncio.to_thread(saver.delete_thread, "t1")
            assert await store.asearch(offload_namespace("t1")) == []
            assert (await graph.aget_state(config("t1"))).values == {}
