"""STMSaver on real backends: linear storage, the projection, deletion and failures.

Sync tests run over InMemorySaver, SqliteSaver and PostgresSaver; the async twins over
AsyncSqliteSaver and AsyncPostgresSaver. Databases are real (a file per test, a fresh
PostgreSQL database per test).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from langgraph_stm import STMState
from langgraph_stm.checkpoint import STMSaver
from langgraph_stm.checkpoint._format import read_ref

SYNC_BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
ASYNC_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@contextmanager
def open_sync(backend: str, request: pytest.FixtureRequest) -> Iterator[STMSaver]:
    if backend == "memory":
        yield STMSaver(InMemorySaver())
    elif backend == "sqlite":
        with STMSaver.from_sqlite(request.getfixturevalue("sqlite_path")) as saver:
            saver.setup()
            yield saver
    else:
        with STMSaver.from_postgres(request.getfixturevalue("postgres_uri")) as saver:
            saver.setup()
            yield saver


@asynccontextmanager
async def open_async(backend: str, request: pytest.FixtureRequest) -> AsyncIterator[STMSaver]:
    if backend == "sqlite":
        async with STMSaver.from_async_sqlite(request.getfixturevalue("sqlite_path")) as saver:
            await saver.asetup()
            yield saver
    else:
        uri = request.getfixturevalue("postgres_uri")
        async with STMSaver.from_async_postgres(uri) as saver:
            await saver.asetup()
            yield saver


def agent(saver: BaseCheckpointSaver[Any]) -> Any:
    def reply(state: STMState) -> dict[str, Any]:
        n = len(state["messages"])
        return {
            "messages": [AIMessage(id=f"ai-{n}", content=f"answer {n} " + "x" * 400)],
            "goal": f"goal after {n}",
            "plan": [{"id": "s1", "task": f"step {n}"}],
        }

    return StateGraph(STMState).add_node(reply).add_edge(START, "reply").compile(checkpointer=saver)


def turn(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(id=f"h-{i}", content=f"question {i} " + "y" * 400)]}


def config(thread_id: str = "t1") -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def our_conn(saver: STMSaver) -> Any:
    """The connection our tables live on: the inner saver's, or (in-memory savers) the
    private database STMSaver keeps for that inner saver."""
    if isinstance(saver.inner, InMemorySaver):
        return saver._tables.sync.conn
    return saver.inner.conn  # type: ignore[attr-defined]


def our_row_counts(saver: STMSaver) -> dict[str, int]:
    """Message bodies, list records and projections we store."""
    queries = {
        "bodies": "SELECT COUNT(*) AS n FROM stm_bodies",
        "lists": "SELECT COUNT(*) AS n FROM stm_lists",
        "threads": "SELECT COUNT(*) AS n FROM stm_threads",
    }
    conn = our_conn(saver)
    if isinstance(conn, sqlite3.Connection):
        return {k: conn.execute(q).fetchone()[0] for k, q in queries.items()}
    return {k: int(conn.execute(q).fetchone()["n"]) for k, q in queries.items()}


@pytest.mark.parametrize("backend", SYNC_BACKENDS)
class TestLinearStorage:
    """Message lists are stored once per thread and restored exactly."""

    def test_inner_saver_stores_references_not_messages(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """What the inner saver holds for ``messages`` is a small reference."""
        with open_sync(backend, request) as saver:
            graph = agent(saver)
            for i in range(3):
                graph.invoke(turn(i), config())
            raw = saver.inner.get_tuple(config())
            assert raw is not None
            ref = read_ref(raw.checkpoint["channel_values"]["messages"])
            assert ref is not None
            assert ref[0] == "list"
            restored = saver.get_tuple(config())
            assert restored is not None
            assert [m.id for m in restored.checkpoint["channel_values"]["messages"]] == [
                "h-0", "ai-1", "h-1", "ai-3", "h-2", "ai-5"
            ]  # fmt: skip

    def test_each_message_body_is_stored_once(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """Ten turns, three checkpoints each, twenty messages: twenty bodies."""
        with open_sync(backend, request) as saver:
            graph = agent(saver)
            for i in range(10):
                graph.invoke(turn(i), config())
            assert our_row_counts(saver)["bodies"] == 20

    def test_history_is_restored_for_every_checkpoint(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """get_state_history sees the message list each checkpoint had."""
        with open_sync(backend, request) as saver:
            graph = agent(saver)
            for i in range(4):
                graph.invoke(turn(i), config())
            lengths = [len(s.values.get("messages", [])) for s in graph.get_state_history(config())]
            assert lengths == [8, 7, 6, 6, 5, 4, 4, 3, 2, 2, 1, 0]

    def test_delete_thread_removes_every_row(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """Deletion is complete: checkpoints, bodies, lists and projection."""
        with open_sync(backend, request) as saver:
            graph = agent(saver)
            for i in range(3):
                graph.invoke(turn(i), config("gone"))
            graph.invoke(turn(0), config("kept"))
            saver.delete_thread("gone")
            assert saver.get_tuple(config("gone")) is None
            assert saver.get_thread_state("gone") is None
            assert list(our_row_counts(saver).values()) == [2, 2, 1]
            graph.invoke(turn(5), config("gone"))
            assert len(graph.get_state(config("gone")).values["messages"]) == 2

    def test_list_first_stored_as_delta_can_become_a_snapshot(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """With nothing cached (a new process), re-writing a stored list makes it a snapshot
        that the next delta can use as its base."""
        with open_sync(backend, request) as saver:
            graph = agent(saver)
            for i in range(2):
                graph.invoke(turn(i), config())
            latest = saver.get_tuple(config())
            assert latest is not None
            saver = STMSaver(saver.inner)  # a new wrapper: nothing cached
            messages = latest.checkpoint["channel_values"]["messages"]
            cfg = latest.config
            version = latest.checkpoint["channel_versions"]["messages"]
            for extra in ([], [AIMessage(id="extra", content="appended")]):
                checkpoint = {**latest.checkpoint, "id": str(uuid6()), "channel_values": {
                    "messages": [*messages, *extra]
                }}  # fmt: skip
                version = saver.get_next_version(version, None)
                checkpoint["channel_versions"] = {"messages": version}
                cfg = saver.put(cfg, checkpoint, latest.metadata, {"messages": version})  # type: ignore[arg-type]
            restored = saver.get_tuple(cfg)
            assert restored is not None
            ids = [m.id for m in restored.checkpoint["channel_values"]["messages"]]
            assert ids == ["h-0", "ai-1", "h-1", "ai-3", "extra"]


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
class TestBodies:
    """Each body is one row, stored once, so a load can read only the ones it uses."""

    def test_long_thread_stores_one_row_per_body(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """80 messages: 80 body rows, read back in order."""
        with open_sync(backend, request) as saver:
            graph = agent(saver)
            for i in range(40):
                graph.invoke(turn(i), config())
            assert our_row_counts(saver)["bodies"] == 80
            ids = [m.id for m in graph.get_state(config()).values["messages"]]
            assert ids == [x for i in range(40) for x in (f"h-{i}", f"ai-{2 * i + 1}")]

    def test_a_write_with_nothing_cached_stores_no_body_twice(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """A new process re-writing a stored list stores only the new message."""
        with open_sync(backend, request) as saver:
            graph = agent(saver)
            for i in range(20):
                graph.invoke(turn(i), config())
            latest = saver.get_tuple(config())
            assert latest is not None
            saver = STMSaver(saver.inner)  # a new wrapper: nothing cached
            messages = latest.checkpoint["channel_values"]["messages"]
            version = saver.get_next_version(
                latest.checkpoint["channel_versions"]["messages"], None
            )
            checkpoint: Any = {
                **latest.checkpoint,
                "id": str(uuid6()),
                "channel_values": {"messages": [*messages, AIMessage(id="x", content="new")]},
                "channel_versions": {"messages": version},
            }
            saver.put(latest.config, checkpoint, latest.metadata, {"messages": version})
            assert our_row_counts(saver)["bodies"] == 41


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_bytes_per_turn_stay_flat(backend: str, request: pytest.FixtureRequest) -> None:
    """The deterministic part of the storage target: turn 120 costs what turn 20 does.

    Counts the bytes of every stored value (checkpoints, writes, blobs and our rows), so
    the result does not depend on page allocation.
    """
    with open_sync(backend, request) as saver:
        graph = agent(saver)
        sizes = []
        for i in range(120):
            graph.invoke(turn(i), config())
            if i + 1 in (20, 40, 100, 120):
                sizes.append(stored_bytes(saver))
        early = (sizes[1] - sizes[0]) / 20
        late = (sizes[3] - sizes[2]) / 20
        assert late <= 1.25 * early, (early, late)


def stored_bytes(saver: STMSaver) -> int:
    """Bytes of every stored value of the thread, ours and the inner saver's."""
    conn: Any = saver.inner.conn  # type: ignore[attr-defined]
    if isinstance(conn, sqlite3.Connection):
        queries = [
            "SELECT SUM(LENGTH(checkpoint) + LENGTH(metadata)) FROM checkpoints",
            "SELECT SUM(LENGTH(value)) FROM writes",
            "SELECT SUM(LENGTH(data)) FROM stm_bodies",
            "SELECT SUM(LENGTH(ops)) FROM stm_lists",
            "SELECT SUM(LENGTH(data)) FROM stm_values",
            "SELECT SUM(LENGTH(refs)) FROM stm_refs",
            "SELECT SUM(LENGTH(state)) FROM stm_threads",
        ]
        return sum(conn.execute(q).fetchone()[0] or 0 for q in queries)
    queries = [
        "SELECT SUM(pg_column_size(checkpoint) + pg_column_size(metadata)) AS n FROM checkpoints",
        "SELECT SUM(LENGTH(blob)) AS n FROM checkpoint_blobs",
        "SELECT SUM(LENGTH(blob)) AS n FROM checkpoint_writes",
        "SELECT SUM(LENGTH(data)) AS n FROM stm_bodies",
        "SELECT SUM(LENGTH(ops)) AS n FROM stm_lists",
        "SELECT SUM(LENGTH(refs)) AS n FROM stm_refs",
        "SELECT SUM(pg_column_size(state)) AS n FROM stm_threads",
    ]
    return int(sum(conn.execute(q).fetchone()["n"] or 0 for q in queries))


@pytest.mark.parametrize("backend", SYNC_BACKENDS)
class TestProjection:
    """get_thread_state / list_threads read the projection and repair it when needed."""

    def test_projection_matches_state_after_every_turn(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """Goal, plan, message count and checkpoint id follow the latest checkpoint."""
        with open_sync(backend, request) as saver:
            graph = agent(saver)
            for i in range(3):
                graph.invoke(turn(i), config())
                snap = graph.get_state(config())
                state = saver.get_thread_state("t1")
                assert state is not None
                assert state.goal == snap.values["goal"]
                assert state.plan == snap.values["plan"]
                assert state.message_count == len(snap.values["messages"])
                assert state.checkpoint_id == snap.config["configurable"]["checkpoint_id"]

    def test_deleted_projection_is_rebuilt_on_read(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """A missing projection row is computed from the latest checkpoint by reads (which
        never write) and rewritten by ``refresh_threads``."""
        with open_sync(backend, request) as saver:
            graph = agent(saver)
            graph.invoke(turn(0), config())
            before = saver.get_thread_state("t1")
            conn = our_conn(saver)
            conn.execute("DELETE FROM stm_threads WHERE thread_id = 't1'")
            if isinstance(conn, sqlite3.Connection):
                conn.commit()
            assert saver.get_thread_state("t1") == before
            assert saver.list_threads() == [before]
            assert our_row_counts(saver)["threads"] == 0
            assert saver.refresh_threads() == 1
            assert our_row_counts(saver)["threads"] == 1
            assert saver.get_thread_state("t1") == before

    def test_stale_projection_is_rebuilt_on_read(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """A checkpoint written without the wrapper (a crash between writes) is noticed."""
        with open_sync(backend, request) as saver:
            graph = agent(saver)
            graph.invoke(turn(0), config())
            agent(saver.inner).update_state(config(), {"goal": "written behind our back"})
            state = saver.get_thread_state("t1")
            assert state is not None
            assert state.goal == "written behind our back"
            assert state.message_count == 2
            [listed] = saver.list_threads()
            assert listed == state

    def test_list_threads_filters_and_pages(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """Newest first; filter by update time; limit and offset page through."""
        with open_sync(backend, request) as saver:
            graph = agent(saver)
            for name in ("a", "b", "c"):
                graph.invoke(turn(0), config(name))
            threads = saver.list_threads()
            assert [t.thread_id for t in threads] == ["c", "b", "a"]
            middle = threads[1].updated_at
            assert [t.thread_id for t in saver.list_threads(updated_after=middle)] == ["c"]
            assert [t.thread_id for t in saver.list_threads(updated_before=middle)] == ["a"]
            pages = [saver.list_threads(limit=2, offset=o) for o in (0, 2)]
            assert [[t.thread_id for t in p] for p in pages] == [["c", "b"], ["a"]]

    def test_threads_without_checkpoints_have_no_state(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """Unknown threads read as None and are not listed."""
        with open_sync(backend, request) as saver:
            assert saver.get_thread_state("nobody") is None
            assert saver.list_threads() == []


@pytest.mark.parametrize("backend", ASYNC_BACKENDS)
class TestAsyncTwins:
    """The async methods forward to the async inner savers and read the same projection."""

    async def test_async_graph_projection_and_deletion(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """ainvoke, aget_thread_state, alist_threads and adelete_thread work together."""
        async with open_async(backend, request) as saver:
            graph = agent(saver)
            for i in range(3):
                await graph.ainvoke(turn(i), config())
            state = await saver.aget_thread_state("t1")
            assert state is not None
            assert state.message_count == 6
            assert [t.thread_id for t in await saver.alist_threads()] == ["t1"]
            history = [s async for s in graph.aget_state_history(config())]
            assert len(history) == 9
            await saver.adelete_thread("t1")
            assert await saver.aget_thread_state("t1") is None
            assert await saver.aget_tuple(config()) is None

    async def test_sync_methods_of_an_async_saver_work_like_the_inner_savers(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """Like AsyncSqliteSaver/AsyncPostgresSaver themselves: sync calls work from another
        thread (through the saver's event loop) and raise InvalidStateError on the loop's
        thread, whether or not the thread has stored messages."""
        async with open_async(backend, request) as saver:
            graph = agent(saver)
            await graph.ainvoke(turn(0), config())

            def sync_side() -> tuple[Any, ...]:
                graph.invoke(turn(1), config())
                state = saver.get_thread_state("t1")
                listed = list(saver.list(config(), limit=2))
                return (
                    graph.get_state(config()).values["messages"],
                    state,
                    listed,
                    saver.list_threads(),
                )

            messages, state, listed, threads = await asyncio.to_thread(sync_side)
            assert [m.id for m in messages] == ["h-0", "ai-1", "h-1", "ai-3"]
            assert state is not None
            assert state.message_count == 4
            assert [len(t.checkpoint["channel_values"]["messages"]) for t in listed] == [4, 3]
            assert [t.thread_id for t in threads] == ["t1"]
            assert (await graph.aget_state(config())).values["messages"] == messages
            with pytest.raises(asyncio.InvalidStateError, match="different thread"):
                saver.get_thread_state("t1")
            with pytest.raises(asyncio.InvalidStateError, match="different thread"):
                saver.get_tuple(config())


class TestFailures:
    """Errors from the inner saver propagate unchanged and leave nothing half-written."""

    def test_sqlite_error_rolls_back_our_rows(self, sqlite_path: Path) -> None:
        """If the inner put raises, our staged rows and projection are rolled back."""
        from langgraph.checkpoint.sqlite import SqliteSaver

        class Failing(SqliteSaver):
            fail = False

            def put(self, *args: Any, **kwargs: Any) -> RunnableConfig:
                if self.fail:
                    raise sqlite3.OperationalError("disk I/O error")
                return super().put(*args, **kwargs)

        conn = sqlite3.connect(sqlite_path, check_same_thread=False)
        inner = Failing(conn)
        saver = STMSaver(inner)
        saver.setup()
        graph = agent(saver)
        graph.invoke(turn(0), config())
        before = our_row_counts(saver), saver.get_thread_state("t1")
        inner.fail = True
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            graph.invoke(turn(1), config())
        assert (our_row_counts(saver), saver.get_thread_state("t1")) == before
        inner.fail = False
        graph.invoke(turn(2), config())
        ids = [m.id for m in graph.get_state(config()).values["messages"]]
        assert ids == ["h-0", "ai-1", "h-2", "ai-3"]
        conn.close()

    def test_memory_error_keeps_projection_and_cache(self) -> None:
        """A failing put keeps the projection and does not teach the cache anything."""

        class Failing(InMemorySaver):
            fail = False

            def put(self, *args: Any, **kwargs: Any) -> RunnableConfig:
                if self.fail:
                    raise KeyError("boom")
                return super().put(*args, **kwargs)

        inner = Failing()
        saver = STMSaver(inner)
        graph = agent(saver)
        graph.invoke(turn(0), config())
        before = saver.get_thread_state("t1")
        inner.fail = True
        with pytest.raises(KeyError, match="boom"):
            graph.invoke(turn(1), config())
        assert saver.get_thread_state("t1") == before
        inner.fail = False
        graph.invoke(turn(2), config())
        assert len(graph.get_state(config()).values["messages"]) == 4


@pytest.mark.postgres
def test_postgres_prune_delete_removes_our_rows(postgres_uri: str) -> None:
    """prune(strategy="delete") is forwarded and deletes our rows of those threads."""
    with STMSaver.from_postgres(postgres_uri) as saver:
        saver.setup()
        graph = agent(saver)
        graph.invoke(turn(0), config("a"))
        graph.invoke(turn(0), config("b"))
        saver.prune(["a"], strategy="delete")  # type: ignore[attr-defined]
        assert saver.get_thread_state("a") is None
        assert our_row_counts(saver) == {"bodies": 2, "lists": 2, "threads": 1}
        saver.prune(["b"])  # type: ignore[attr-defined]
        assert len(graph.get_state(config("b")).values["messages"]) == 2


@pytest.mark.postgres
def test_postgres_error_propagates_and_projection_recovers(postgres_uri: str) -> None:
    """A failing checkpoint write raises the driver's error; reads still see the old state."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    class Failing(PostgresSaver):
        fail = False

        def put(self, *args: Any, **kwargs: Any) -> RunnableConfig:
            if self.fail:
                raise psycopg.errors.DiskFull("could not extend file")
            return super().put(*args, **kwargs)

    with psycopg.Connection.connect(postgres_uri, autocommit=True, row_factory=dict_row) as conn:
        inner = Failing(conn)
        saver = STMSaver(inner)
        saver.setup()
        graph = agent(saver)
        graph.invoke(turn(0), config())
        before = saver.get_thread_state("t1")
        inner.fail = True
        with pytest.raises(psycopg.errors.DiskFull):
            graph.invoke(turn(1), config())
        assert saver.get_thread_state("t1") == before
        assert saver.list_threads() == [before]
        inner.fail = False
        graph.invoke(turn(2), config())
        assert len(graph.get_state(config()).values["messages"]) == 4


def test_copy_thread_is_exposed_when_the_inner_saver_has_it() -> None:
    """copy_thread copies our rows too, so the copy outlives its source."""

    class Copying(InMemorySaver):
        def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
            for ns, checkpoints in self.storage[source_thread_id].items():
                self.storage[target_thread_id][ns] = dict(checkpoints)
            for (t, ns, ch, v), blob in list(self.blobs.items()):
                if t == source_thread_id:
                    self.blobs[(target_thread_id, ns, ch, v)] = blob
            for (t, ns, cid), writes in list(self.writes.items()):
                if t == source_thread_id:
                    self.writes[(target_thread_id, ns, cid)] = dict(writes)

    saver = STMSaver.wrap(Copying())
    graph = agent(saver)
    for i in range(2):
        graph.invoke(turn(i), config("source"))
    saver.copy_thread("source", "copy")  # type: ignore[attr-defined]
    saver.delete_thread("source")
    assert [m.id for m in graph.get_state(config("copy")).values["messages"]] == [
        "h-0", "ai-1", "h-1", "ai-3"
    ]  # fmt: skip
    state = saver.get_thread_state("copy")
    assert state is not None
    assert state.message_count == 4


def thread_rows(saver: STMSaver, thread_id: str) -> dict[str, int]:
    """Rows of ``thread_id`` in every table of the database that has a thread_id column."""
    conn: Any = saver.inner.conn  # type: ignore[attr-defined]
    if isinstance(conn, sqlite3.Connection):
        tables = [
            t
            for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if t != "stm_tombstones"  # outlives the thread by design (issue 11)
            and any(c[1] == "thread_id" for c in conn.execute(f"PRAGMA table_info({t})"))
        ]
        count = "SELECT COUNT(*) FROM {} WHERE thread_id = ?"
        return {t: conn.execute(count.format(t), (thread_id,)).fetchone()[0] for t in tables}
    tables = [
        r["table_name"]
        for r in conn.execute(
            "SELECT table_name FROM information_schema.columns "
            "WHERE column_name = 'thread_id' AND table_schema = current_schema()"
        ).fetchall()
        if r["table_name"] != "stm_tombstones"
    ]
    count = "SELECT COUNT(*) AS n FROM {} WHERE thread_id = %s"
    return {t: int(conn.execute(count.format(t), (thread_id,)).fetchone()["n"]) for t in tables}


_SQLITE_TRIGGER = (
    "CREATE TRIGGER stm_test_refuse BEFORE DELETE ON stm_threads "
    "BEGIN SELECT RAISE(ABORT, 'refused by test'); END"
)
_PG_TRIGGER = [
    "CREATE FUNCTION stm_test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE EXCEPTION 'refused by test'; END $$",
    "CREATE TRIGGER stm_test_refuse BEFORE DELETE ON stm_threads "
    "FOR EACH ROW EXECUTE FUNCTION stm_test_refuse()",
]


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
class TestDeletion:
    """delete_thread is complete and all-or-nothing across the inner saver's tables and ours."""

    def test_no_row_of_the_thread_is_left_in_any_table(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """Every table with a thread_id column (theirs and ours) is empty for the thread."""
        with open_sync(backend, request) as saver:
            graph = agent(saver)
            for i in range(40):
                graph.invoke(turn(i), config("gone"))
            graph.update_state(config("gone"), {"goal": "a goal long enough " * 40})
            graph.invoke(turn(0), config("kept"))
            before = thread_rows(saver, "gone")
            if backend == "postgres":  # PostgresSaver stores each version once: no values
                before.pop("stm_values")
            before.pop("stm_audit")  # rows only with audit=True (tests/integration/test_audit.py)
            before.pop("stm_owners")  # rows only with tenant_key (tests/integration/test_scope.py)
            before.pop("stm_claims")  # rows only with exclusive_runs (test_conflicts.py)
            assert all(n > 0 for n in before.values()), before
            kept = thread_rows(saver, "kept")
            saver.delete_thread("gone")
            assert set(thread_rows(saver, "gone").values()) == {0}
            assert thread_rows(saver, "kept") == kept

    def test_a_failure_inside_the_deletion_deletes_nothing(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """The database refuses one of our deletes (a trigger): the error propagates in
        its own type and the thread, checkpoints and our rows alike, is still whole."""
        with open_sync(backend, request) as saver:
            graph = agent(saver)
            for i in range(3):
                graph.invoke(turn(i), config())
            rows = thread_rows(saver, "t1")
            state = graph.get_state(config()).values
            conn: Any = saver.inner.conn  # type: ignore[attr-defined]
            if backend == "sqlite":
                conn.execute(_SQLITE_TRIGGER)
                conn.commit()
                expected: type[Exception] = sqlite3.IntegrityError
            else:
                import psycopg

                for sql in _PG_TRIGGER:
                    conn.execute(sql)
                expected = psycopg.errors.RaiseException
            with pytest.raises(expected, match="refused by test"):
                saver.delete_thread("t1")
            assert thread_rows(saver, "t1") == rows
            assert graph.get_state(config()).values == state
            conn.execute(
                "DROP TRIGGER stm_test_refuse" + (" ON stm_threads" * (backend != "sqlite"))
            )
            if backend == "sqlite":
                conn.commit()
            saver.delete_thread("t1")
            assert set(thread_rows(saver, "t1").values()) == {0}


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_an_older_schema_is_migrated_by_setup(backend: str, request: pytest.FixtureRequest) -> None:
    """A database whose stm_migrations stops short of the latest version is brought up to
    it (the migrations from the one dropping the first layout's list table on are undone
    first)."""
    if backend == "sqlite":
        from langgraph_stm.checkpoint._sqlite import MIGRATIONS
    else:
        from langgraph_stm.checkpoint._postgres import MIGRATIONS
    latest = len(MIGRATIONS) - 1
    with open_sync(backend, request) as saver:
        graph = agent(saver)
        graph.invoke(turn(0), config())
        conn: Any = saver.inner.conn  # type: ignore[attr-defined]
        dropped = MIGRATIONS.index("DROP TABLE IF EXISTS stm_message_lists")
        conn.execute(f"DELETE FROM stm_migrations WHERE v >= {dropped}")
        conn.execute(str(MIGRATIONS[2]))  # the first layout's stm_message_lists
        if backend == "sqlite":
            conn.commit()
    with open_sync(backend, request) as saver:
        conn = saver.inner.conn  # type: ignore[attr-defined]
        if backend == "sqlite":
            version = conn.execute("SELECT MAX(v) FROM stm_migrations").fetchone()[0]
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        else:
            version = conn.execute("SELECT MAX(v) AS v FROM stm_migrations").fetchone()["v"]
            names = {
                r["tablename"] for r in conn.execute("SELECT tablename FROM pg_tables").fetchall()
            }
        assert "stm_message_lists" not in names
        assert version == latest
        assert len(agent(saver).get_state(config()).values["messages"]) == 2


def test_deletion_is_one_transaction_on_an_autocommit_connection(sqlite_path: Path) -> None:
    """With ``isolation_level=None`` too, a refused delete deletes nothing."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(sqlite_path, check_same_thread=False, isolation_level=None)
    saver = STMSaver(SqliteSaver(conn))
    saver.setup()
    graph = agent(saver)
    graph.invoke(turn(0), config())
    rows = thread_rows(saver, "t1")
    conn.execute(_SQLITE_TRIGGER)
    with pytest.raises(sqlite3.IntegrityError, match="refused by test"):
        saver.delete_thread("t1")
    assert thread_rows(saver, "t1") == rows
    conn.close()
