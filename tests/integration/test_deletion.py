"""Deletion that stays deleted (issue 11, item 2): complete, reported, and final.

``delete_thread`` removes every row of a thread, in every table (the inner saver's and
ours) and every namespace (subgraphs), plus its offloaded outputs in the store, and
reports what it removed; a late ``put`` / ``put_writes`` that carries the deleted
thread's checkpoint is refused with ``ThreadDeletedError`` and writes nothing, while a
fresh run on the same id starts a new thread.
"""

from __future__ import annotations

import pickle
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langgraph_stm import STMSaver, STMState
from langgraph_stm.checkpoint import DeletionReport
from langgraph_stm.checkpoint._inner import POSTGRES_TABLES, SQLITE_TABLES
from langgraph_stm.checkpoint._tables import OUR_TABLES
from langgraph_stm.errors import STMError, ThreadDeletedError
from langgraph_stm.tools import offload_namespace

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
ASYNC_BACKENDS = ["async_sqlite", pytest.param("async_postgres", marks=pytest.mark.postgres)]
NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
OFFLOADS = 3


def clock() -> datetime:
    return NOW


# -- a graph with a subgraph, so that rows with checkpoint_ns != "" exist ------------------
def child_step(state: STMState) -> dict[str, Any]:
    n = len(state["messages"])
    return {"goal": "from the child", "messages": [AIMessage(f"child {n}", id=f"c{n}")]}


def parent_step(state: STMState) -> dict[str, Any]:
    n = len(state["messages"])
    return {"messages": [AIMessage(f"parent {n}", id=f"p{n}")]}


def graph_of(saver: STMSaver) -> Any:
    child = StateGraph(STMState).add_node("work", child_step).add_edge(START, "work").compile()
    builder = StateGraph(STMState).add_node("child", child).add_node("after", parent_step)
    return builder.add_edge(START, "child").add_edge("child", "after").compile(saver)


def config(thread_id: str, **configurable: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, **configurable}}


def turn(graph: Any, thread_id: str, i: int = 0) -> None:
    message = HumanMessage(f"turn {i}", id=f"h{i}")
    graph.invoke({"messages": [message]}, config(thread_id))


def offload(store: BaseStore, thread_id: str) -> None:
    for i in range(OFFLOADS):
        store.put(offload_namespace(thread_id), f"m{i}", {"content": f"output {i}"})


def left_in_store(store: BaseStore, thread_id: str) -> int:
    return len(store.search(offload_namespace(thread_id), limit=100))


@contextmanager
def open_saver(backend: str, request: pytest.FixtureRequest, **options: Any) -> Iterator[STMSaver]:
    options.setdefault("clock", clock)
    if backend == "memory":
        yield STMSaver(InMemorySaver(), **options)
    elif backend == "sqlite":
        path = request.getfixturevalue("tmp_path") / "deletion.sqlite"
        with STMSaver.from_sqlite(path, **options) as saver:
            saver.setup()
            yield saver
    else:
        with STMSaver.from_postgres(request.getfixturevalue("postgres_uri"), **options) as saver:
            saver.setup()
            yield saver


def _sql(saver: STMSaver, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if saver._inner.kind == "memory":
        return [tuple(r) for r in saver._tables.sync.conn.execute(sql, params).fetchall()]
    conn: Any = saver.inner.conn  # type: ignore[attr-defined]
    if isinstance(conn, sqlite3.Connection):
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]
    rows = conn.execute(sql.replace("?", "%s"), params).fetchall()
    return [tuple(r.values()) for r in rows]


def thread_rows(saver: STMSaver, thread_id: str) -> dict[str, int]:
    """Rows of ``thread_id`` in every table a deletion clears: the inner saver's (for
    InMemorySaver, its checkpoints, pending writes and blobs) and ours."""
    found: dict[str, int] = {}
    if saver._inner.kind == "memory":
        inner: Any = saver.inner
        found["checkpoints"] = sum(len(c) for c in inner.storage.get(thread_id, {}).values())
        found["writes"] = sum(len(w) for k, w in inner.writes.items() if k[0] == thread_id)
        found["blobs"] = sum(1 for k in inner.blobs if k[0] == thread_id)
        tables: tuple[str, ...] = OUR_TABLES
    elif saver._inner.kind == "sqlite":
        tables = (*SQLITE_TABLES, *OUR_TABLES)
    else:
        tables = (*POSTGRES_TABLES, *OUR_TABLES)
    for table in tables:
        found[table] = _sql(
            saver, f"SELECT COUNT(*) FROM {table} WHERE thread_id = ?", (thread_id,)
        )[0][0]
    return found


def subgraph_checkpoints(saver: STMSaver, thread_id: str) -> int:
    return sum(
        1 for t in saver.list(config(thread_id)) if t.config["configurable"]["checkpoint_ns"]
    )


def tombstone(saver: STMSaver, thread_id: str) -> tuple[Any, ...] | None:
    rows = _sql(
        saver,
        "SELECT deleted_at, last_checkpoint_id FROM stm_tombstones WHERE thread_id = ?",
        (thread_id,),
    )
    return rows[0] if rows else None


def newest_id(saver: STMSaver, thread_id: str) -> str:
    return max(str(t.checkpoint["id"]) for t in saver.list(config(thread_id)))


def old_tuples(saver: STMSaver, thread_id: str) -> tuple[CheckpointTuple, CheckpointTuple]:
    """The latest root checkpoint and one subgraph checkpoint of the thread."""
    tuples = list(saver.list(config(thread_id)))
    root = next(t for t in tuples if not t.config["configurable"]["checkpoint_ns"])
    child = next(t for t in tuples if t.config["configurable"]["checkpoint_ns"])
    return root, child


# -- complete, reported ---------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
class TestDeletion:
    def test_every_table_and_namespace_is_emptied_and_reported(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """The report counts, per table, the rows that were there; afterwards no table
        holds a row of the thread, subgraph namespaces included, and the store holds none
        of its offloaded outputs; another thread keeps everything."""
        store = InMemoryStore()
        with open_saver(backend, request, store=store) as saver:
            graph = graph_of(saver)
            for i in range(3):
                turn(graph, "gone", i)
            turn(graph, "kept")
            offload(store, "gone")
            offload(store, "kept")
            assert subgraph_checkpoints(saver, "gone") > 0
            refs = "SELECT COUNT(*) FROM stm_refs WHERE thread_id = ? AND checkpoint_ns <> ''"
            assert _sql(saver, refs, ("gone",))[0][0] > 0
            before, kept, last = (
                thread_rows(saver, "gone"),
                thread_rows(saver, "kept"),
                newest_id(saver, "gone"),
            )
            report = saver.delete_thread("gone")
            assert isinstance(report, DeletionReport)
            assert report.thread_id == "gone"
            assert report.rows == before
            assert report.rows["checkpoints"] > 0
            assert report.rows["stm_bodies"] > 0
            assert report.store_items == OFFLOADS
            assert report.seconds > 0
            assert set(thread_rows(saver, "gone").values()) == {0}
            assert left_in_store(store, "gone") == 0
            assert thread_rows(saver, "kept") == kept
            assert left_in_store(store, "kept") == OFFLOADS
            assert graph.get_state(config("gone")).values == {}
            assert saver.get_thread_state("gone") is None
            deleted_at, mark = tombstone(saver, "gone") or (None, None)
            # the mark is made at deletion: newer than every checkpoint id, even in flight
            assert deleted_at == NOW.timestamp()
            assert mark > last

    def test_a_late_write_with_the_old_config_is_refused_and_writes_nothing(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """put (root and subgraph namespace, with checkpoint_id or only checkpoint_map)
        and put_writes carrying the deleted thread's checkpoints raise ThreadDeletedError."""
        with open_saver(backend, request) as saver:
            graph = graph_of(saver)
            turn(graph, "t1")
            turn(graph, "t1", 1)
            root, child = old_tuples(saver, "t1")
            saver.delete_thread("t1")
            root_id = str(root.checkpoint["id"])
            with pytest.raises(ThreadDeletedError) as caught:
                saver.put(root.config, root.checkpoint, root.metadata, {"messages": "1"})
            assert (caught.value.thread_id, caught.value.checkpoint_id) == ("t1", root_id)
            assert caught.value.deleted_at == NOW
            with pytest.raises(ThreadDeletedError):
                saver.put_writes(root.config, [("goal", "late")], "task-1")
            with pytest.raises(ThreadDeletedError):
                saver.put(child.config, child.checkpoint, child.metadata, {})
            first_child = config(
                "t1",
                checkpoint_ns=child.config["configurable"]["checkpoint_ns"],
                checkpoint_map={"": root_id},
            )
            with pytest.raises(ThreadDeletedError):
                saver.put(first_child, child.checkpoint, child.metadata, {})
            with pytest.raises(ThreadDeletedError):
                saver.put_writes(child.config, [("messages", [])], "task-2")
            assert set(thread_rows(saver, "t1").values()) == {0}
            assert graph.get_state(config("t1")).values == {}

    def test_a_fresh_run_on_the_same_id_starts_a_new_thread(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """A run without checkpoint_id starts from scratch; its later writes (new, larger
        checkpoint ids) are accepted; the old config is still refused."""
        with open_saver(backend, request) as saver:
            graph = graph_of(saver)
            turn(graph, "t1")
            turn(graph, "t1", 1)
            root, _ = old_tuples(saver, "t1")
            saver.delete_thread("t1")
            turn(graph, "t1", 5)
            assert [m.id for m in graph.get_state(config("t1")).values["messages"]] == [
                "h5",
                "c1",
                "p2",
            ]
            turn(graph, "t1", 6)
            values = graph.get_state(config("t1")).values
            assert [m.id for m in values["messages"]] == ["h5", "c1", "p2", "h6", "c4", "p5"]
            state = saver.get_thread_state("t1")
            assert state is not None
            assert state.message_count == 6
            with pytest.raises(ThreadDeletedError):
                saver.put(root.config, root.checkpoint, root.metadata, {})
            assert len(graph.get_state(config("t1")).values["messages"]) == 6

    def test_a_run_whose_thread_is_deleted_under_it_stops(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """Another worker deletes the thread while a node runs: the run's next write is
        refused, nothing of the run is left, and the id starts a new thread afterwards."""
        holder: dict[str, STMSaver] = {}

        def deleting(state: STMState) -> dict[str, Any]:
            holder["saver"].delete_thread("t1")
            return {"messages": [AIMessage("too late", id="late")]}

        with open_saver(backend, request) as saver:
            holder["saver"] = saver
            builder = StateGraph(STMState).add_node(deleting).add_edge(START, "deleting")
            graph = builder.compile(saver)
            with pytest.raises(ThreadDeletedError):
                graph.invoke(
                    {"messages": [HumanMessage("go", id="h0")]}, config("t1"), durability="sync"
                )
            assert set(thread_rows(saver, "t1").values()) == {0}
            turn(graph_of(saver), "t1")
            assert len(graph.get_state(config("t1")).values["messages"]) == 3

    def test_prune_delete_leaves_tombstones_too(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        with open_saver(backend, request) as saver:
            graph = graph_of(saver)
            for thread_id in ("a", "b"):
                turn(graph, thread_id)
            olds = {t: old_tuples(saver, t)[0] for t in ("a", "b")}
            saver.prune(["a", "b"], strategy="delete")
            for old in olds.values():
                with pytest.raises(ThreadDeletedError):
                    saver.put(old.config, old.checkpoint, old.metadata, {})
            assert set(thread_rows(saver, "a").values()) == {0}

    def test_deleting_an_unknown_or_deleted_thread(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """Nothing to count for a thread that never was, but a tombstone all the same (a
        run whose first checkpoint was still in flight must not recreate it); a second
        deletion removes nothing and keeps the mark moving forward."""
        with open_saver(backend, request) as saver:
            report = saver.delete_thread("never")
            assert set(report.rows.values()) == {0}
            assert report.store_items == 0
            assert tombstone(saver, "never") is not None
            turn(graph_of(saver), "t1")
            last = newest_id(saver, "t1")
            saver.delete_thread("t1")
            first = tombstone(saver, "t1")
            again = saver.delete_thread("t1")
            assert set(again.rows.values()) == {0}
            second = tombstone(saver, "t1")
            assert first is not None
            assert second is not None
            assert second[0] == NOW.timestamp()
            assert second[1] >= first[1] > last


# -- async twins ------------------------------------------------------------------------
@asynccontextmanager
async def open_async(
    backend: str, request: pytest.FixtureRequest, **options: Any
) -> AsyncIterator[STMSaver]:
    options.setdefault("clock", clock)
    if backend == "async_sqlite":
        path = request.getfixturevalue("tmp_path") / "deletion.sqlite"
        async with STMSaver.from_async_sqlite(path, **options) as saver:
            await saver.asetup()
            yield saver
    else:
        uri = request.getfixturevalue("postgres_uri")
        async with STMSaver.from_async_postgres(uri, **options) as saver:
            await saver.asetup()
            yield saver


@pytest.mark.parametrize("backend", ASYNC_BACKENDS)
async def test_async_twins(backend: str, request: pytest.FixtureRequest) -> None:
    store = InMemoryStore()
    async with open_async(backend, request, store=store) as saver:
        graph = graph_of(saver)
        await graph.ainvoke({"messages": [HumanMessage("hi", id="h0")]}, config("t1"))
        offload(store, "t1")
        tuples = [t async for t in saver.alist(config("t1"))]
        root = next(t for t in tuples if not t.config["configurable"]["checkpoint_ns"])
        report = await saver.adelete_thread("t1")
        assert report.rows["checkpoints"] == len(tuples)
        assert report.store_items == OFFLOADS
        with pytest.raises(ThreadDeletedError):
            await saver.aput(root.config, root.checkpoint, root.metadata, {})
        with pytest.raises(ThreadDeletedError):
            await saver.aput_writes(root.config, [("goal", "late")], "task")
        assert [t async for t in saver.alist(config("t1"))] == []
        await graph.ainvoke({"messages": [HumanMessage("again", id="h9")]}, config("t1"))
        values = (await graph.aget_state(config("t1"))).values
        assert [m.id for m in values["messages"]] == ["h9", "c1", "p2"]


# -- the error -----------------------------------------------------------------------------
def test_thread_deleted_error_is_an_stm_error_that_pickles() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=3)
    error = ThreadDeletedError("gone", thread_id="t1", checkpoint_id="c1", deleted_at=at)
    assert isinstance(error, STMError)
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.thread_id, copy.checkpoint_id, copy.deleted_at) == (
        "gone",
        "t1",
        "c1",
        at,
    )


# -- a saver STMSaver knows only by its API ------------------------------------------------
class Opaque(BaseCheckpointSaver[Any]):
    """Forwards to an InMemorySaver without being one (STMSaver has no access to its data)."""

    def __init__(self) -> None:
        super().__init__()
        self.target = InMemorySaver()

    def get_tuple(self, config: Any) -> Any:
        return self.target.get_tuple(config)

    def list(self, config: Any, **kwargs: Any) -> Any:
        return self.target.list(config, **kwargs)

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return self.target.put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.target.put_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self.target.delete_thread(thread_id)

    def get_next_version(self, current: Any, channel: Any) -> Any:
        return self.target.get_next_version(current, channel)


def test_a_saver_known_only_by_its_api() -> None:
    """Deletion, its report, tombstones and TTL work over any saver."""
    now = [NOW]
    saver = STMSaver(Opaque(), ttl=timedelta(hours=1), clock=lambda: now[0])
    assert saver._inner.kind is None
    graph = graph_of(saver)
    turn(graph, "t1")
    turn(graph, "t2")
    root, _ = old_tuples(saver, "t1")
    count = len(list(saver.list(config("t1"))))
    report = saver.delete_thread("t1")
    assert report.rows["checkpoints"] == count
    assert report.rows["stm_threads"] == 1
    with pytest.raises(ThreadDeletedError):
        saver.put(root.config, root.checkpoint, root.metadata, {})
    assert list(saver.list(config("t1"))) == []
    now[0] += timedelta(hours=2)
    assert saver.get_thread_state("t2") is None
    assert saver.sweep() == 1
    assert list(saver.list(config("t2"))) == []
    turn(graph, "t1", 3)
    assert [m.id for m in graph.get_state(config("t1")).values["messages"]] == ["h3", "c1", "p2"]
