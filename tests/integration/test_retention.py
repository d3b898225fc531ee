"""Thread TTL and sweep (issue 11, item 1), on every backend, with a fake clock.

A thread expires ``ttl`` after its last root checkpoint write (its own TTL, from the
first write's ``config["configurable"]["ttl"]`` or ``set_ttl``, wins over the saver's);
until swept it reads as if it did not exist; ``sweep`` deletes expired threads
completely, in batches of one transaction each, which the 10,000-thread tests check by
tracing the statements and transactions that go through the database connection.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from langgraph_stm import STMSaver, STMState
from langgraph_stm.checkpoint._inner import POSTGRES_TABLES, SQLITE_TABLES
from langgraph_stm.checkpoint._tables import OUR_TABLES
from langgraph_stm.errors import InvalidArgumentError, ThreadDeletedError

BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
ASYNC_BACKENDS = ["async_sqlite", pytest.param("async_postgres", marks=pytest.mark.postgres)]
START_TIME = datetime(2026, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


class Clock:
    """A fake clock: ``STMSaver(clock=clock)``; ``advance`` moves it."""

    def __init__(self) -> None:
        self.now = START_TIME

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def reply(state: STMState) -> dict[str, Any]:
    n = len(state["messages"])
    return {"goal": f"goal {n}", "messages": [AIMessage(f"reply {n}", id=f"a{n}")]}


def chat(saver: STMSaver) -> Any:
    return StateGraph(STMState).add_node(reply).add_edge(START, "reply").compile(saver)


def config(thread_id: str, **configurable: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, **configurable}}


def turn(graph: Any, thread_id: str, i: int = 0, **configurable: Any) -> Any:
    message = HumanMessage(f"turn {i}", id=f"h{thread_id}-{i}")
    return graph.invoke({"messages": [message]}, config(thread_id, **configurable))


@contextmanager
def open_saver(backend: str, request: pytest.FixtureRequest, **options: Any) -> Iterator[STMSaver]:
    if backend == "memory":
        yield STMSaver(InMemorySaver(), **options)
    elif backend == "sqlite":
        path = request.getfixturevalue("tmp_path") / "retention.sqlite"
        with STMSaver.from_sqlite(path, **options) as saver:
            saver.setup()
            yield saver
    else:
        with STMSaver.from_postgres(request.getfixturevalue("postgres_uri"), **options) as saver:
            saver.setup()
            yield saver


def thread_rows(saver: STMSaver, thread_id: str) -> dict[str, int]:
    """Rows of ``thread_id`` in every table a thread deletion clears (the inner saver's,
    every namespace, and ours)."""
    kind = saver._inner.kind
    if kind == "memory":
        inner: Any = saver.inner
        found = {
            "checkpoints": sum(len(c) for c in inner.storage.get(thread_id, {}).values()),
            "writes": sum(1 for k in inner.writes if k[0] == thread_id),
            "blobs": sum(1 for k in inner.blobs if k[0] == thread_id),
        }
        conn = saver._tables.sync.conn
        for table in OUR_TABLES:
            sql = f"SELECT COUNT(*) FROM {table} WHERE thread_id = ?"
            found[table] = conn.execute(sql, (thread_id,)).fetchone()[0]
        return found
    conn = saver.inner.conn  # type: ignore[attr-defined]
    if isinstance(conn, sqlite3.Connection):
        tables = (*SQLITE_TABLES, *OUR_TABLES)
        sql = "SELECT COUNT(*) FROM {} WHERE thread_id = ?"
        return {t: conn.execute(sql.format(t), (thread_id,)).fetchone()[0] for t in tables}
    sql = "SELECT COUNT(*) AS n FROM {} WHERE thread_id = %s"
    tables = (*POSTGRES_TABLES, *OUR_TABLES)
    return {t: int(conn.execute(sql.format(t), (thread_id,)).fetchone()["n"]) for t in tables}


def tombstones(saver: STMSaver) -> int:
    if saver._inner.kind == "memory":
        return int(
            saver._tables.sync.conn.execute("SELECT COUNT(*) FROM stm_tombstones").fetchone()[0]
        )
    conn: Any = saver.inner.conn  # type: ignore[attr-defined]
    if isinstance(conn, sqlite3.Connection):
        return int(conn.execute("SELECT COUNT(*) FROM stm_tombstones").fetchone()[0])
    return int(conn.execute("SELECT COUNT(*) AS n FROM stm_tombstones").fetchone()["n"])


def visible(saver: STMSaver, graph: Any, thread_id: str) -> dict[str, bool]:
    """Whether each read shows the thread."""
    listed = {s.thread_id for s in saver.list_threads()}
    return {
        "get_state": bool(graph.get_state(config(thread_id)).values),
        "get_tuple": saver.get_tuple(config(thread_id)) is not None,
        "list": bool(list(saver.list(config(thread_id)))),
        "list_all": any(
            t.config["configurable"]["thread_id"] == thread_id for t in saver.list(None)
        ),
        "get_thread_state": saver.get_thread_state(thread_id) is not None,
        "list_threads": thread_id in listed,
    }


SHOWN = dict.fromkeys(
    ("get_state", "get_tuple", "list", "list_all", "get_thread_state", "list_threads"), True
)
HIDDEN = dict.fromkeys(SHOWN, False)


# -- TTL, visibility, sweep -------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
class TestTTL:
    def test_past_ttl_is_swept_and_the_others_are_untouched(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """Threads written more than ``ttl`` ago are deleted completely; a thread
        written within ``ttl`` keeps every row."""
        clock = Clock()
        with open_saver(backend, request, ttl=HOUR, clock=clock) as saver:
            graph = chat(saver)
            for thread_id in ("old1", "old2"):
                turn(graph, thread_id, 0)
                turn(graph, thread_id, 1)
            clock.advance(minutes=50)
            turn(graph, "recent")
            kept = thread_rows(saver, "recent")
            state = graph.get_state(config("recent")).values
            clock.advance(minutes=20)
            assert saver.sweep() == 2
            for thread_id in ("old1", "old2"):
                assert set(thread_rows(saver, thread_id).values()) == {0}
            assert thread_rows(saver, "recent") == kept
            assert graph.get_state(config("recent")).values == state
            assert saver.sweep() == 0

    def test_an_expired_thread_is_invisible_before_the_sweep(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """get_state, get_tuple, list (one thread or all), get_thread_state and
        list_threads all behave as if the expired thread did not exist; its rows are
        still there until the sweep."""
        clock = Clock()
        with open_saver(backend, request, ttl=HOUR, clock=clock) as saver:
            graph = chat(saver)
            turn(graph, "t1")
            turn(graph, "t2")
            clock.advance(minutes=30)
            turn(graph, "t2", 1)
            assert visible(saver, graph, "t1") == SHOWN
            clock.advance(minutes=31)
            assert visible(saver, graph, "t1") == HIDDEN
            assert visible(saver, graph, "t2") == SHOWN
            assert thread_rows(saver, "t1")["checkpoints"] > 0
            assert saver.sweep() == 1
            assert visible(saver, graph, "t1") == HIDDEN

    def test_the_thread_ttl_wins_over_the_saver_ttl_both_ways(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """A longer TTL keeps a thread the saver's would expire, a shorter one expires
        it first; from the first write's config (timedelta or seconds) or ``set_ttl``;
        a later write's config does not change it; ``set_ttl(None)`` goes back."""
        clock = Clock()
        with open_saver(backend, request, ttl=HOUR, clock=clock) as saver:
            graph = chat(saver)
            turn(graph, "default")
            turn(graph, "long", ttl=timedelta(days=1))
            turn(graph, "short", ttl=600)
            turn(graph, "set")
            saver.set_ttl("set", timedelta(hours=3))
            turn(graph, "reset", ttl=timedelta(days=1))
            saver.set_ttl("reset", None)
            turn(graph, "long", 1, ttl=1)  # not the first write: no change
            assert saver.get_thread_state("short").ttl == timedelta(minutes=10)  # type: ignore[union-attr]
            clock.advance(minutes=11)
            assert saver.sweep() == 1
            assert saver.get_thread_state("short") is None
            clock.advance(minutes=50)
            assert {s.thread_id for s in saver.list_threads()} == {"long", "set"}
            assert saver.sweep() == 2
            clock.advance(hours=3)
            assert saver.sweep() == 1
            assert [s.thread_id for s in saver.list_threads()] == ["long"]
            clock.advance(hours=20)
            assert saver.sweep() == 1
            assert saver.list_threads() == []

    def test_without_a_saver_ttl_only_threads_with_their_own_expire(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        clock = Clock()
        with open_saver(backend, request, clock=clock) as saver:
            graph = chat(saver)
            turn(graph, "forever")
            turn(graph, "brief", ttl=timedelta(minutes=5))
            state = saver.get_thread_state("forever")
            assert state is not None
            assert (state.ttl, state.expires_at) == (None, None)
            clock.advance(days=365)
            assert saver.sweep() == 1
            assert [s.thread_id for s in saver.list_threads()] == ["forever"]

    def test_thread_state_shows_ttl_and_expires_at(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """``expires_at`` is the last root write plus the TTL in force; it moves with
        every write."""
        clock = Clock()
        with open_saver(backend, request, ttl=HOUR, clock=clock) as saver:
            graph = chat(saver)
            turn(graph, "t1")
            state = saver.get_thread_state("t1")
            assert state is not None
            assert (state.ttl, state.expires_at) == (HOUR, START_TIME + HOUR)
            clock.advance(minutes=45)
            turn(graph, "t1", 1)
            [listed] = saver.list_threads()
            assert listed.expires_at == START_TIME + timedelta(minutes=105)
            clock.advance(minutes=59)
            assert saver.sweep() == 0
            assert saver.get_thread_state("t1") is not None

    def test_a_fresh_run_on_an_expired_thread_starts_clean(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """Before the sweep, a new run on the id first deletes the expired thread: no old
        checkpoint, message or row survives, and the old config is refused."""
        clock = Clock()
        with open_saver(backend, request, ttl=HOUR, clock=clock) as saver:
            graph = chat(saver)
            for i in range(3):
                turn(graph, "t1", i)
            old = saver.get_tuple(config("t1"))
            assert old is not None
            clock.advance(hours=2)
            turn(graph, "t1", 9)
            messages = graph.get_state(config("t1")).values["messages"]
            assert [m.id for m in messages] == ["ht1-9", "a1"]
            assert all(t.checkpoint["id"] > old.checkpoint["id"] for t in saver.list(config("t1")))
            assert tombstones(saver) == 1
            with pytest.raises(ThreadDeletedError):
                saver.put(old.config, old.checkpoint, old.metadata, {})
            assert saver.sweep() == 0

    def test_a_late_write_to_an_expired_thread_is_refused(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """put_writes with a config of the expired thread: deleted first, then refused."""
        clock = Clock()
        with open_saver(backend, request, ttl=HOUR, clock=clock) as saver:
            turn(chat(saver), "t1")
            old = saver.get_tuple(config("t1"))
            assert old is not None
            clock.advance(hours=2)
            with pytest.raises(ThreadDeletedError) as caught:
                saver.put_writes(old.config, [("messages", [])], "task-1")
            assert caught.value.thread_id == "t1"
            assert caught.value.deleted_at == clock.now
            assert set(thread_rows(saver, "t1").values()) == {0}

    def test_the_sweep_purges_tombstones_older_than_the_grace_period(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        clock = Clock()
        with open_saver(backend, request, clock=clock, deleted_grace=timedelta(hours=6)) as saver:
            graph = chat(saver)
            turn(graph, "a")
            turn(graph, "b")
            saver.delete_thread("a")
            clock.advance(hours=5)
            saver.delete_thread("b")
            saver.sweep()
            assert tombstones(saver) == 2
            clock.advance(hours=2)
            assert saver.sweep() == 0
            assert tombstones(saver) == 1

    def test_small_batches_sweep_everything(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        clock = Clock()
        with open_saver(backend, request, ttl=HOUR, clock=clock) as saver:
            graph = chat(saver)
            for i in range(7):
                turn(graph, f"t{i}")
            clock.advance(hours=2)
            assert saver.sweep(batch_size=3) == 7
            assert saver.list_threads() == []


class TestOptions:
    def test_bad_options_are_refused(self) -> None:
        for options in (
            {"ttl": timedelta(0)},
            {"ttl": -5},
            {"ttl": "1h"},
            {"ttl": True},
            {"clock": "now"},
            {"deleted_grace": None},
            {"deleted_grace": timedelta(seconds=-1)},
        ):
            with pytest.raises(InvalidArgumentError):
                STMSaver(InMemorySaver(), **options)
        saver = STMSaver(InMemorySaver(), ttl=90)
        assert saver.ttl == timedelta(seconds=90)
        assert STMSaver(InMemorySaver()).ttl is None
        for batch_size in (0, -1, 1.5, True):
            with pytest.raises(InvalidArgumentError):
                saver.sweep(batch_size=batch_size)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            saver.set_ttl("t1", timedelta(minutes=-1))

    def test_a_naive_clock_is_refused_when_used(self) -> None:
        saver = STMSaver(InMemorySaver(), clock=lambda: datetime(2026, 1, 1))
        with pytest.raises(InvalidArgumentError, match="aware"):
            turn(chat(saver), "t1")

    def test_a_bad_ttl_in_the_config_writes_nothing(self) -> None:
        saver = STMSaver(InMemorySaver())
        with pytest.raises(InvalidArgumentError, match="ttl"):
            turn(chat(saver), "t1", ttl="forever")
        assert saver.get_tuple(config("t1")) is None

    def test_the_constructors_forward_the_options(self, tmp_path: Path) -> None:
        clock = Clock()
        with STMSaver.from_sqlite(tmp_path / "x.sqlite", ttl=HOUR, clock=clock) as saver:
            saver.setup()
            turn(chat(saver), "t1")
            clock.advance(hours=2)
            assert saver.get_thread_state("t1") is None


# -- async twins ------------------------------------------------------------------------
@asynccontextmanager
async def open_async(
    backend: str, request: pytest.FixtureRequest, **options: Any
) -> AsyncIterator[STMSaver]:
    if backend == "async_sqlite":
        path = request.getfixturevalue("tmp_path") / "retention.sqlite"
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
    """aset_ttl, asweep, the async reads and a fresh arun on an expired thread."""
    clock = Clock()
    async with open_async(backend, request, ttl=HOUR, clock=clock) as saver:
        graph = chat(saver)
        for thread_id in ("a", "b", "c"):
            await graph.ainvoke({"messages": [HumanMessage("hi", id="h")]}, config(thread_id))
        await saver.aset_ttl("b", timedelta(days=1))
        clock.advance(hours=2)
        assert await saver.aget_tuple(config("a")) is None
        assert [t async for t in saver.alist(config("a"))] == []
        assert await saver.aget_thread_state("a") is None
        assert {s.thread_id for s in await saver.alist_threads()} == {"b"}
        assert (await graph.aget_state(config("a"))).values == {}
        await graph.ainvoke({"messages": [HumanMessage("again", id="h2")]}, config("c"))
        assert [m.id for m in (await graph.aget_state(config("c"))).values["messages"]] == [
            "h2",
            "a1",
        ]
        assert await saver.asweep() == 1
        assert {s.thread_id for s in await saver.alist_threads()} == {"b", "c"}


# -- 10,000 threads, swept in bounded batches -------------------------------------------
THREADS = 10_000
BATCH = 500


@dataclass
class Trace:
    """Statements and transactions seen on a connection."""

    transactions: list[list[tuple[str, int]]] = field(default_factory=list)
    outside: list[tuple[str, int]] = field(default_factory=list)
    current: list[tuple[str, int]] | None = None

    def statement(self, sql: str, params: Any) -> None:
        entry = (" ".join(str(sql).split()), len(params) if params is not None else 0)
        (self.outside if self.current is None else self.current).append(entry)

    def begin(self) -> None:
        self.current = []

    def end(self) -> None:
        if self.current is not None:
            self.transactions.append(self.current)
        self.current = None

    def deleting(self) -> list[list[tuple[str, int]]]:
        """The transactions that deleted threads."""
        return [t for t in self.transactions if any("DELETE FROM checkpoints" in s for s, _ in t)]


class TracedSqlite:
    """A ``sqlite3.Connection`` stand-in that records every statement run through it,
    and its transactions (``BEGIN`` up to ``commit``/``rollback``)."""

    def __init__(self, conn: sqlite3.Connection, trace: Trace) -> None:
        object.__setattr__(self, "_conn", conn)
        object.__setattr__(self, "_trace", trace)

    def execute(self, sql: str, params: Any = (), /) -> sqlite3.Cursor:
        if sql.strip().upper().startswith("BEGIN"):
            self._trace.begin()
        else:
            self._trace.statement(sql, params)
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Any, /) -> sqlite3.Cursor:
        rows = list(rows)
        self._trace.statement(sql, [p for r in rows for p in r])
        return self._conn.executemany(sql, rows)

    def commit(self) -> None:
        self._conn.commit()
        self._trace.end()

    def rollback(self) -> None:
        self._conn.rollback()
        self._trace.end()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._conn, name, value)


def seed(saver: STMSaver, n: int) -> None:
    """``n`` threads of one root checkpoint each, written through ``saver.put``."""
    metadata: Any = {"source": "input", "step": -1, "parents": {}}
    for i in range(n):
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6())
        saver.put(config(f"t{i}", checkpoint_ns=""), checkpoint, metadata, {})


def check_batches(trace: Trace) -> None:
    """Every deleting transaction deletes at most BATCH threads (as counted in its
    ``DELETE FROM stm_lifecycle``) and runs a bounded number of statements."""
    deleting = trace.deleting()
    assert len(deleting) == math.ceil(THREADS / BATCH)
    for statements in deleting:
        threads = sum(n for s, n in statements if s.startswith("DELETE FROM stm_lifecycle"))
        assert 0 < threads <= BATCH
        locks = sum(1 for s, _ in statements if "pg_advisory_xact_lock" in s)
        assert locks <= BATCH
        assert len(statements) - locks <= 30, statements
    assert (
        sum(n for t in deleting for s, n in t if s.startswith("DELETE FROM stm_lifecycle"))
        == THREADS
    )


def test_sweep_of_10000_threads_on_sqlite_runs_in_batches(tmp_path: Path) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = tmp_path / "many.sqlite"
    clock = Clock()
    with STMSaver.from_sqlite(path, clock=clock, ttl=HOUR) as saver:
        saver.setup()
        seed(saver, THREADS)
    clock.advance(hours=2)
    trace = Trace()
    conn = TracedSqlite(sqlite3.connect(path, check_same_thread=False), trace)
    saver = STMSaver(SqliteSaver(conn), ttl=HOUR, clock=clock)  # type: ignore[arg-type]
    saver.setup()
    trace.transactions.clear()
    assert saver.sweep(batch_size=BATCH) == THREADS
    check_batches(trace)
    left = conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0]
    assert left == 0
    assert conn.execute("SELECT COUNT(*) FROM stm_tombstones").fetchone()[0] == THREADS
    conn.close()


@pytest.mark.postgres
def test_sweep_of_10000_threads_on_postgres_runs_in_batches(postgres_uri: str) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    trace = Trace()

    class TracedCursor(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            trace.statement(str(query), params)
            return super().execute(query, params, **kwargs)

        def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
            rows = list(params_seq)
            trace.statement(str(query), [p for r in rows for p in r])
            super().executemany(query, rows, **kwargs)

    class TracedConnection(psycopg.Connection[Any]):
        @contextmanager
        def transaction(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
            trace.begin()
            try:
                with super().transaction(*args, **kwargs) as tx:
                    yield tx
            finally:
                trace.end()

    clock = Clock()
    with STMSaver.from_postgres(postgres_uri, clock=clock, ttl=HOUR) as saver:
        saver.setup()
        seed(saver, THREADS)
    clock.advance(hours=2)
    with TracedConnection.connect(
        postgres_uri,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        cursor_factory=TracedCursor,
    ) as conn:
        saver = STMSaver(PostgresSaver(conn), ttl=HOUR, clock=clock)
        saver.setup()
        trace.transactions.clear()
        assert saver.sweep(batch_size=BATCH) == THREADS
        check_batches(trace)
        assert conn.execute("SELECT COUNT(*) AS n FROM checkpoints").fetchone()["n"] == 0  # type: ignore[index]
        assert conn.execute("SELECT COUNT(*) AS n FROM stm_tombstones").fetchone()["n"] == THREADS  # type: ignore[index]


SECRET = "sk-proj-" + "Zq9" * 16  # an OpenAI-style key the built-in detectors find


@pytest.mark.parametrize("backend", BACKENDS)
class TestSecretTTL:
    """``secret_ttl=``: a thread in which redaction found a secret expires sooner."""

    def test_a_thread_holding_a_secret_expires_after_secret_ttl(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """ttl one day, secret_ttl one hour: the thread with a pasted key is gone after
        an hour, the thread without one is still there."""
        clock = Clock()
        options = {"ttl": timedelta(days=1), "secret_ttl": HOUR, "clock": clock}
        with open_saver(backend, request, redact=True, **options) as saver:
            graph = chat(saver)
            turn(graph, "clean")
            leaked = HumanMessage(f"my key is {SECRET}", id="h-leak")
            graph.invoke({"messages": [leaked]}, config("leaky"))
            assert saver.redaction_count("leaky") == 1
            clock.advance(minutes=59)
            assert visible(saver, graph, "leaky") == SHOWN
            clock.advance(minutes=2)
            assert visible(saver, graph, "leaky") == HIDDEN
            assert visible(saver, graph, "clean") == SHOWN
            assert saver.sweep() == 1
            assert thread_rows(saver, "leaky")["stm_lifecycle"] == 0

    def test_a_shorter_own_ttl_is_kept(self, backend: str, request: pytest.FixtureRequest) -> None:
        """A thread whose own TTL (10 minutes) is shorter than secret_ttl keeps it."""
        clock = Clock()
        with open_saver(backend, request, redact=True, secret_ttl=HOUR, clock=clock) as saver:
            graph = chat(saver)
            leaked = HumanMessage(f"token {SECRET}", id="h-leak")
            graph.invoke({"messages": [leaked]}, config("short", ttl=timedelta(minutes=10)))
            clock.advance(minutes=11)
            assert visible(saver, graph, "short") == HIDDEN


def test_secret_ttl_needs_redaction() -> None:
    """Without redact= there is no secret to notice: the option is refused, as is a
    TTL that is not positive."""
    with pytest.raises(InvalidArgumentError, match="secret_ttl"):
        STMSaver(InMemorySaver(), secret_ttl=HOUR)
    with pytest.raises(InvalidArgumentError, match="secret_ttl"):
        STMSaver(InMemorySaver(), redact=True, secret_ttl=-1)
