"""A graph offloads a 50,000-token tool output: the checkpoint keeps a summary and a
reference, the graph's store keeps the text, and deleting the thread deletes both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_stm import STMSaver, STMState, TokenCounter, build_context
from langgraph_stm.tools import Offloader, offload_namespace, offload_uri

COUNTER = TokenCounter()
LOGS = "\n".join(
    f"{i:05d} GET /api/orders/{i * 7919 % 100000} 200 {i % 97}ms user=u{i % 113}"
    for i in range(2800)
)
LAST_LINE = LOGS.rsplit("\n", 1)[1]
OFFLOADER = Offloader(2000)  # no store: the graph's own, through get_store()


def tool_call() -> AIMessage:
    return AIMessage(
        "", id="a1", tool_calls=[{"name": "fetch_logs", "args": {"day": "today"}, "id": "c1"}]
    )


def tool_output() -> ToolMessage:
    return ToolMessage(LOGS, tool_call_id="c1", name="fetch_logs", id="t1")


def fetch_logs(state: STMState, config: RunnableConfig) -> dict[str, Any]:
    """The tool step: its 50,000-token output enters the state only as a summary."""
    done = OFFLOADER.offload(tool_output(), config=config)
    assert done is not None
    return {"messages": [tool_call(), done.message], "artifacts": [done.artifact]}


async def afetch_logs(state: STMState, config: RunnableConfig) -> dict[str, Any]:
    """Async twin of :func:`fetch_logs`."""
    done = await OFFLOADER.aoffload(tool_output(), config=config)
    assert done is not None
    return {"messages": [tool_call(), done.message], "artifacts": [done.artifact]}


def compile_graph(saver: STMSaver, store: BaseStore, node: Any = fetch_logs) -> Any:
    graph = StateGraph(STMState).add_node("fetch_logs", node).add_edge(START, "fetch_logs")
    return graph.compile(checkpointer=saver, store=store)


def config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def ask(graph: Any, thread_id: str) -> dict[str, Any]:
    graph.invoke({"messages": [HumanMessage("why is checkout slow?", id="h1")]}, config(thread_id))
    values: dict[str, Any] = graph.get_state(config(thread_id)).values
    return values


def test_the_output_is_big() -> None:
    """The scenario is what it claims: over 50,000 exact tokens."""
    assert COUNTER.count_message(tool_output()) > 50_000


class TestOffloadOnSQLite:
    """A StateGraph over STMState with InMemoryStore and STMSaver on a SQLite file."""

    @pytest.fixture
    def store(self) -> InMemoryStore:
        return InMemoryStore()

    @pytest.fixture
    def saver(self, sqlite_path: Path, store: InMemoryStore) -> Iterator[STMSaver]:
        with STMSaver.from_sqlite(sqlite_path, store=store) as saver:
            saver.setup()
            yield saver

    def test_checkpoint_holds_the_summary_and_reference_only(
        self, saver: STMSaver, store: InMemoryStore, sqlite_path: Path
    ) -> None:
        """The saved messages are a few hundred tokens; the file never sees the text."""
        state = ask(compile_graph(saver, store), "t1")
        assert COUNTER(state["messages"]) < 600
        result = state["messages"][-1]
        assert (result.id, result.tool_call_id) == ("t1", "c1")
        assert str(result.content).endswith(f"{offload_uri('t1', 't1')}]")
        stored = b"".join(p.read_bytes() for p in sqlite_path.parent.glob(sqlite_path.name + "*"))
        assert b"00000 GET /api/orders/0" in stored  # the summary (its first line) is there
        assert LAST_LINE.encode() not in stored

    def test_store_holds_the_full_text(self, saver: STMSaver, store: InMemoryStore) -> None:
        """The graph's store has the whole output under the thread's namespace."""
        ask(compile_graph(saver, store), "t1")
        item = store.get(offload_namespace("t1"), "t1")
        assert item is not None
        assert item.value["content"] == LOGS
        assert item.value["tokens"] == COUNTER.count_message(tool_output())

    def test_context_shows_the_artifact_summary(
        self, saver: STMSaver, store: InMemoryStore
    ) -> None:
        """build_context lists the artifact with its summary and reference, in budget."""
        state = ask(compile_graph(saver, store), "t1")
        context = build_context(state, max_tokens=3000)
        assert context.included_artifact_ids == ("stm-offload:t1",)
        assert COUNTER(context.messages) <= 3000
        text = "\n".join(str(m.content) for m in context.messages)
        assert "[stm-offload:t1] tool_output: 00000 GET /api/orders/0 200 0ms" in text
        assert f"<{offload_uri('t1', 't1')}>" in text
        assert LAST_LINE not in text

    def test_projection_lists_the_artifact(self, saver: STMSaver, store: InMemoryStore) -> None:
        """The saver's thread index knows the artifact without loading a checkpoint."""
        ask(compile_graph(saver, store), "t1")
        state = saver.get_thread_state("t1")
        assert state is not None
        assert [a["id"] for a in state.artifacts] == ["stm-offload:t1"]

    def test_rerun_writes_the_same_item_and_artifact(
        self, saver: STMSaver, store: InMemoryStore
    ) -> None:
        """A second run of the node on the thread keeps one item and one artifact."""
        graph = compile_graph(saver, store)
        ask(graph, "t1")
        state = ask(graph, "t1")
        assert len(state["artifacts"]) == 1
        assert len(store.search(offload_namespace("t1"))) == 1

    def test_delete_thread_removes_the_offloaded_items(
        self, saver: STMSaver, store: InMemoryStore
    ) -> None:
        """Deleting a thread deletes its offloaded outputs, and only its own."""
        graph = compile_graph(saver, store)
        ask(graph, "t1")
        ask(graph, "t2")
        saver.delete_thread("t1")
        assert store.search(offload_namespace("t1")) == []
        assert graph.get_state(config("t1")).values == {}
        assert store.get(offload_namespace("t2"), "t1") is not None
        assert saver.get_thread_state("t2") is not None


@pytest.mark.postgres
class TestOffloadOnPostgres:
    """The same graph on PostgresSaver with a PostgresStore in the same database."""

    def test_offload_and_delete(self, postgres_uri: str) -> None:
        """The checkpoint stays small, the store has the text, delete removes it."""
        from langgraph.store.postgres import PostgresStore

        with (
            PostgresStore.from_conn_string(postgres_uri) as store,
            STMSaver.from_postgres(postgres_uri, store=store) as saver,
        ):
            store.setup()
            saver.setup()
            graph = compile_graph(saver, store)
            state = ask(graph, "t1")
            ask(graph, "t2")
            assert COUNTER(state["messages"]) < 600
            item = store.get(offload_namespace("t1"), "t1")
            assert item is not None
            assert item.value["content"] == LOGS
            saver.delete_thread("t1")
            assert store.search(offload_namespace("t1")) == []
            assert store.get(offload_namespace("t2"), "t1") is not None
            assert graph.get_state(config("t1")).values == {}


class TestOffloadAsync:
    """An async node offloads with aoffload; adelete_thread deletes with the thread."""

    async def test_async_graph_on_async_sqlite(self, sqlite_path: Path) -> None:
        """aoffload through the graph's store, then adelete_thread removes the items."""
        store = InMemoryStore()
        async with STMSaver.from_async_sqlite(sqlite_path, store=store) as saver:
            await saver.asetup()
            graph = compile_graph(saver, store, afetch_logs)
            await graph.ainvoke({"messages": [HumanMessage("why?", id="h1")]}, config("t1"))
            state = (await graph.aget_state(config("t1"))).values
            assert COUNTER(state["messages"]) < 600
            assert (await store.aget(offload_namespace("t1"), "t1")) is not None
            await saver.adelete_thread("t1")
            assert await store.asearch(offload_namespace("t1")) == []
            assert (await graph.aget_state(config("t1"))).values == {}
