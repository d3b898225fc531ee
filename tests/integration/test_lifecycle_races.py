"""Review findings on thread lifecycle: deletion racing an in-flight write, TTL kept alive
by subgraph writes, bounds on TTLs, sweeps that keep a refreshed thread's store items,
``list`` limits that count what is shown."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.store.memory import InMemoryStore

from langgraph_stm import STMSaver, STMState
from langgraph_stm.errors import InvalidArgumentError, ThreadDeletedError
from langgraph_stm.tools import offload_namespace

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def answer(state: STMState) -> dict[str, Any]:
    return {"messages": [AIMessage(f"answer {len(state['messages'])}")]}


def graph_of(saver: Any) -> Any:
    return (
        StateGraph(STMState).add_node(answer).add_edge(START, "answer").compile(checkpointer=saver)
    )


def config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}}


@contextmanager
def postgres_saver(uri: str, pooled: bool) -> Iterator[STMSaver]:
    if not pooled:
        with STMSaver.from_postgres(uri) as saver:
            saver.setup()
            yield saver
        return
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(uri, max_size=4, kwargs=kwargs) as pool:
        saver = STMSaver(PostgresSaver(pool))
        saver.setup()
        yield saver


@pytest.mark.postgres
@pytest.mark.parametrize("pooled", [False, True], ids=["connection", "pool"])
def test_a_deletion_inside_a_writes_window_neither_deadlocks_nor_corrupts(
    postgres_uri: str, pooled: bool
) -> None:
    """delete_thread from another thread between our commit and the inner put: no
    deadlock (pool), the deleted thread stays deleted and readable as empty
    (connection: advisory locks are re-entrant in one session), a fresh run works."""
    with postgres_saver(postgres_uri, pooled) as saver:
        graph = graph_of(saver)
        original = saver.inner.put
        fired: list[Any] = []

        def put(*args: Any) -> Any:
            if not fired:
                fired.append(True)
                deleter = threading.Thread(target=lambda: fired.append(saver.delete_thread("w")))
                deleter.start()
                deleter.join(timeout=2)  # on a pool it waits for our thread lock: fine
            return original(*args)

        saver.inner.put = put  # type: ignore[method-assign]
        outcome: list[Any] = []

        def run() -> None:
            try:
                graph.invoke({"messages": [HumanMessage("hi")]}, config("w"), durability="sync")
                outcome.append(None)
            except ThreadDeletedError as exc:
                outcome.append(exc)

        runner = threading.Thread(target=run)
        runner.start()
        runner.join(timeout=30)
        assert not runner.is_alive(), "the write and the deletion deadlocked"
        saver.inner.put = original  # type: ignore[method-assign]
        for _ in range(50):  # the deleter (pool) finishes once the write released its lock
            if len(fired) == 2:
                break
            threading.Event().wait(0.1)
        assert len(fired) == 2
        assert graph.get_state(config("w")).values == {}  # no StorageError, nothing shown
        assert saver.get_thread_state("w") is None
        graph.invoke({"messages": [HumanMessage("again")]}, config("w"))
        assert len(graph.get_state(config("w")).values["messages"]) == 2


def test_a_long_subgraph_keeps_its_thread_alive(tmp_path: Path) -> None:
    """Writes of a subgraph's namespace are activity: a run longer than the TTL in a
    subgraph is not deleted under itself."""
    now = [NOW]

    def slow(state: STMState) -> dict[str, Any]:
        now[0] += timedelta(minutes=40)
        return {"messages": [AIMessage(f"step {len(state['messages'])}")]}

    inner = StateGraph(STMState).add_node("a", slow).add_node("b", slow).add_node("c", slow)
    sub = inner.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").compile()
    with STMSaver.from_sqlite(
        tmp_path / "t.sqlite", ttl=timedelta(hours=1), clock=lambda: now[0]
    ) as saver:
        saver.setup()
        outer = StateGraph(STMState).add_node("sub", sub).add_edge(START, "sub")
        graph = outer.compile(checkpointer=saver)
        out = graph.invoke({"messages": [HumanMessage("go")]}, config("long"), durability="sync")
        assert len(out["messages"]) == 4
        assert saver.sweep() == 0
        assert len(graph.get_state(config("long")).values["messages"]) == 4


@pytest.mark.parametrize("ttl", [timedelta.max, timedelta(days=365 * 101), 1e12])
def test_a_ttl_beyond_a_hundred_years_is_refused(ttl: Any) -> None:
    """An expiry must stay a datetime: one huge TTL never breaks list_threads."""
    with pytest.raises(InvalidArgumentError, match="100 years"):
        STMSaver(InMemorySaver(), ttl=ttl)
    saver = STMSaver(InMemorySaver())
    with pytest.raises(InvalidArgumentError, match="100 years"):
        saver.set_ttl("t", ttl)


@pytest.mark.parametrize("thread_id", [None, "", 123])
def test_set_ttl_refuses_a_bad_thread_id(thread_id: Any) -> None:
    """No lifecycle row for a thread id that is not a string."""
    with pytest.raises(InvalidArgumentError, match="thread_id"):
        STMSaver(InMemorySaver()).set_ttl(thread_id, timedelta(days=1))


def test_a_sweep_keeps_the_store_items_of_a_thread_it_does_not_delete() -> None:
    """Store items go only with threads the sweep really deleted (re-checked expired)."""
    now = [NOW]
    store = InMemoryStore()
    saver = STMSaver(InMemorySaver(), ttl=timedelta(hours=1), clock=lambda: now[0], store=store)
    graph = graph_of(saver)
    for thread in ("old", "fresh"):
        graph.invoke({"messages": [HumanMessage("hi")]}, config(thread))
        store.put(offload_namespace(thread), "k", {"content": "full text"})
    now[0] += timedelta(hours=2)
    saver.set_ttl("fresh", timedelta(days=1))  # refreshed: no longer expired
    assert saver.sweep() == 1
    assert store.get(offload_namespace("old"), "k") is None
    assert store.get(offload_namespace("fresh"), "k") is not None


def test_list_with_a_limit_counts_only_what_it_shows() -> None:
    """Expired threads' tuples do not take places of the limit."""
    now = [NOW]
    saver = STMSaver(InMemorySaver(), clock=lambda: now[0])
    graph = graph_of(saver)
    graph.invoke({"messages": [HumanMessage("hi")]}, config("short"))
    saver.set_ttl("short", timedelta(minutes=1))
    now[0] += timedelta(minutes=5)
    graph.invoke({"messages": [HumanMessage("hi")]}, config("live"))
    shown = list(saver.list(None, limit=3))
    assert len(shown) == 3
    assert {t.config["configurable"]["thread_id"] for t in shown} == {"live"}
