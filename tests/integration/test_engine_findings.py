"""Regression tests for the engine review findings, one class per finding.

Every test runs on each backend its finding applies to: InMemorySaver ("memory"),
SqliteSaver ("sqlite"), AsyncSqliteSaver ("async_sqlite"), PostgresSaver ("postgres")
and AsyncPostgresSaver ("async_postgres"). Async backends are driven through the async
API (``ainvoke``, ``aget_state``, ``aget_thread_state``...). Databases are real: files
in the test's tmp dir, and a fresh PostgreSQL database per test (another database that
a test asks for, e.g. for the plain saver it compares with, is a schema of that one).
Where a finding says the wrapper behaves as the plain inner saver does, the same graph
runs on the plain saver over its own database and the results are compared (messages
by class and ``model_dump()``).
"""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt
from typing_extensions import TypedDict

from langgraph_stm import STMSaver, STMState
from langgraph_stm.errors import (
    InvalidArgumentError,
    StateUpdateError,
    StorageError,
    ThreadDeletedError,
)

REPO = Path(__file__).resolve().parents[2]
SQL_BACKENDS = [
    "sqlite",
    "async_sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("async_postgres", marks=pytest.mark.postgres),
]
ALL_BACKENDS = ["memory", *SQL_BACKENDS]

LONE_SURROGATE = json.loads('"\\ud83d"')


# -- backends ------------------------------------------------------------------------------
class Backend:
    """One kind of saver: its databases, ready savers over them, and its (a)sync API."""

    def __init__(self, name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.name = name
        self.is_async = name.startswith("async")
        self.is_postgres = name.endswith("postgres")
        self.is_sql = name != "memory"
        self._tmp_path = tmp_path
        self._request = request
        self._locations: dict[str, Any] = {}

    def location(self, db: str = "main") -> Any:
        """Database ``db`` of the test: an InMemorySaver, a SQLite path or a PostgreSQL URI."""
        if db not in self._locations:
            if self.name == "memory":
                self._locations[db] = InMemorySaver()
            elif not self.is_postgres:
                self._locations[db] = str(self._tmp_path / f"{db}.sqlite")
            else:
                self._locations[db] = self._new_postgres_database(db)
        return self._locations[db]

    def _new_postgres_database(self, db: str) -> str:
        """The test's database for "main"; any other is a schema of it (quicker than a
        database), reached through the connection's search_path."""
        import psycopg

        main: str = self._request.getfixturevalue("postgres_uri")
        if db == "main":
            return main
        with psycopg.connect(main, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{db}"')
        return f"{main}?options=-csearch_path%3D{db}"

    @asynccontextmanager
    async def saver(self, db: str = "main", *, plain: bool = False) -> AsyncIterator[Any]:
        """A set-up saver over ``db`` with its own connection: STMSaver, or the plain saver."""
        location = self.location(db)
        if self.name == "memory":
            yield location if plain else STMSaver(location)
        elif self.name == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            opened = SqliteSaver.from_conn_string if plain else STMSaver.from_sqlite
            with opened(location) as saver:
                saver.setup()
                yield saver
        elif self.name == "async_sqlite":
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            aopened = AsyncSqliteSaver.from_conn_string if plain else STMSaver.from_async_sqlite
            async with aopened(location) as saver:
                await (saver.setup() if plain else saver.asetup())
                yield saver
        elif self.name == "postgres":
            from langgraph.checkpoint.postgres import PostgresSaver

            opened = PostgresSaver.from_conn_string if plain else STMSaver.from_postgres
            with opened(location) as saver:
                saver.setup()
                yield saver
        else:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

            aopened = AsyncPostgresSaver.from_conn_string if plain else STMSaver.from_async_postgres
            async with aopened(location) as saver:
                await (saver.setup() if plain else saver.asetup())
                yield saver

    @asynccontextmanager
    async def reopened(
        self, current: Any, db: str = "main", *, plain: bool = False
    ) -> AsyncIterator[Any]:
        """Another saver over ``db`` with nothing cached (memory has no connection: ``current``)."""
        if self.name == "memory":
            yield current
        else:
            async with self.saver(db, plain=plain) as saver:
                yield saver

    async def call(self, obj: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        """``obj.name(...)``, or ``await obj.aname(...)`` on an async backend; iterators listed."""
        if not self.is_async:
            result = getattr(obj, name)(*args, **kwargs)
            return list(result) if isinstance(result, Iterator) else result
        result = getattr(obj, "a" + name)(*args, **kwargs)
        if isinstance(result, AsyncIterator):
            return [item async for item in result]
        return await result

    def start(self, obj: Any, name: str, *args: Any, **kwargs: Any) -> asyncio.Future[Any]:
        """Like :meth:`call`, but running in the background (sync calls in a thread)."""
        if self.is_async:
            return asyncio.ensure_future(self.call(obj, name, *args, **kwargs))
        return asyncio.ensure_future(asyncio.to_thread(getattr(obj, name), *args, **kwargs))

    def sql(self, query: str, params: tuple[Any, ...] = (), db: str = "main") -> list[Any]:
        """Run ``query`` (``?`` placeholders) on ``db`` over a connection of its own."""
        location = self.location(db)
        if self.is_postgres:
            import psycopg

            with psycopg.connect(location, autocommit=True) as conn:
                cur = conn.execute(query.replace("?", "%s"), params or None)  # type: ignore[arg-type]
                return cur.fetchall() if cur.description else []
        conn = sqlite3.connect(location)
        try:
            rows = conn.execute(query, params).fetchall()
            conn.commit()
            return rows
        finally:
            conn.close()

    def our_rows(self, thread_id: str) -> int:
        """Rows of ``thread_id`` in every ``stm_%`` table that has a thread_id column."""
        if self.is_postgres:
            tables = [
                t
                for (t,) in self.sql(
                    "SELECT table_name FROM information_schema.columns WHERE column_name = "
                    "'thread_id' AND table_schema = current_schema() AND table_name LIKE 'stm_%'"
                )
                if t != "stm_tombstones"  # outlives the thread by design (issue 11)
            ]
        else:
            tables = [
                t
                for (t,) in self.sql("SELECT name FROM sqlite_master WHERE type = 'table'")
                if t.startswith("stm_")
                and t != "stm_tombstones"  # outlives the thread by design (issue 11)
                and any(c[1] == "thread_id" for c in self.sql(f"PRAGMA table_info({t})"))
            ]
        assert tables
        count = "SELECT COUNT(*) FROM {} WHERE thread_id = ?"
        return sum(self.sql(count.format(t), (thread_id,))[0][0] for t in tables)


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return Backend(request.param, tmp_path, request)


# -- graphs and comparisons ----------------------------------------------------------------
def config(thread_id: str = "t") -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def turn(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"question {i}", id=f"h{i}")]}


def chat_graph(saver: Any, update: dict[str, Any] | None = None) -> Any:
    """One node answering each turn (explicit ids), writing ``update`` alongside."""

    def reply(state: STMState) -> dict[str, Any]:
        n = len(state["messages"])
        return {
            "messages": [AIMessage(f"reply {n}", id=f"a{n}")],
            "goal": f"goal {n}",
            **(update or {}),
        }

    return StateGraph(STMState).add_node(reply).add_edge(START, "reply").compile(checkpointer=saver)


def data(value: Any) -> Any:
    """Comparable form of state values: a message as its class and ``model_dump()``, NaN as
    a marker (``math.isnan``), so that ``==`` compares exactly."""
    if isinstance(value, BaseMessage):
        return (type(value).__module__, type(value).__qualname__, data(value.model_dump()))
    if isinstance(value, dict):
        return {k: data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [data(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return "<NaN>"
    return value


def projected(value: Any) -> Any:
    """What the projection shows for a value: NUL and lone surrogates as U+FFFD,
    non-finite floats as None."""
    if isinstance(value, str):
        return "".join("\ufffd" if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: projected(v) for k, v in value.items()}
    if isinstance(value, list):
        return [projected(v) for v in value]
    return value


async def error_of(awaitable: Awaitable[Any]) -> type[BaseException] | None:
    """The type of the exception ``awaitable`` raises, or None."""
    try:
        await awaitable
    except Exception as exc:
        return type(exc)
    return None


async def values_of(b: Backend, saver: Any, thread_id: str = "t") -> dict[str, Any]:
    return dict((await b.call(chat_graph(saver), "get_state", config(thread_id))).values)


# -- findings 1 and 2: NUL, lone surrogates, NaN/Infinity in structured fields -------------
async def check_like_plain(b: Backend, update: dict[str, Any]) -> dict[str, Any] | None:
    """Run a turn writing ``update`` on the plain saver and on the wrapper: both raise the
    same error, or both succeed and store the same values, and then the projection shows
    the value sanitized. Returns the wrapper's stored values (None if both raised)."""
    [field] = update
    async with b.saver("plain", plain=True) as plain:
        plain_error = await error_of(b.call(chat_graph(plain, update), "invoke", turn(0), config()))
        plain_values = await values_of(b, plain)
    async with b.saver() as saver:
        error = await error_of(b.call(chat_graph(saver, update), "invoke", turn(0), config()))
        values = await values_of(b, saver)
        assert (error, data(values)) == (plain_error, data(plain_values))
        if error is not None:
            return None
        history = await b.call(chat_graph(saver), "get_state_history", config())
        assert len(history) == 3
        state = await b.call(saver, "get_thread_state", "t")
        assert state is not None
        assert getattr(state, field) in (projected(update[field]), projected(values[field]))
        assert json.dumps(getattr(state, field), allow_nan=False)
        [listed] = await b.call(saver, "list_threads")
        assert listed == state
        async with b.reopened(saver) as fresh:
            assert data(await values_of(b, fresh)) == data(plain_values)
    return values


NUL_UPDATES = {
    "plan_task": {"plan": [{"id": "s1", "task": "PK\x00", "status": "pending"}]},
    "summary_text": {"summary": {"text": "before\x00after", "version": 1}},
    "goal": {"goal": "ship\x00it"},
}


@pytest.mark.parametrize("backend", ALL_BACKENDS, indirect=True)
class TestNulInStructuredFields:
    """Finding 1: a NUL in a structured field made every PostgreSQL checkpoint write fail."""

    @pytest.mark.parametrize("update", NUL_UPDATES.values(), ids=NUL_UPDATES.keys())
    async def test_nul_is_stored_like_the_plain_saver_stores_it(
        self, backend: Backend, update: dict[str, Any]
    ) -> None:
        """The turn succeeds (or fails) as on the plain saver, reads return the exact value
        and the projection shows the NUL as U+FFFD."""
        values = await check_like_plain(backend, update)
        if values is not None:
            [(field, written)] = update.items()
            assert values[field] == written

    async def test_thread_written_with_nul_before_wrapping_is_listed(
        self, backend: Backend
    ) -> None:
        """A NUL stored by the plain saver before it was wrapped breaks no list_threads()."""
        async with backend.saver(plain=True) as plain:
            await backend.call(
                chat_graph(plain, NUL_UPDATES["plan_task"]), "invoke", turn(0), config("nul")
            )
            await backend.call(chat_graph(plain), "invoke", turn(0), config("clean"))
        async with backend.saver() as saver:
            threads = {t.thread_id: t for t in await backend.call(saver, "list_threads")}
            assert sorted(threads) == ["clean", "nul"]
            assert [(t.goal, t.message_count) for t in threads.values()] == [("goal 1", 2)] * 2
            assert threads["nul"].plan == [{"id": "s1", "task": "PK\ufffd", "status": "pending"}]
            assert await backend.call(saver, "get_thread_state", "nul") == threads["nul"]


ODD_UPDATES = {
    "surrogate_in_plan_task": (
        {"plan": [{"id": "s1", "task": LONE_SURROGATE, "status": "pending"}]},
        False,  # the checkpoint serde (msgpack) turns a lone surrogate into "?"
    ),
    "surrogate_in_goal": ({"goal": LONE_SURROGATE}, False),
    "nan_in_plan_step": (
        {"plan": [{"id": "s1", "task": "t", "status": "pending", "score": float("nan")}]},
        True,
    ),
    "inf_in_plan_step": (
        {"plan": [{"id": "s1", "task": "t", "status": "pending", "score": float("inf")}]},
        True,
    ),
}


@pytest.mark.parametrize("backend", ALL_BACKENDS, indirect=True)
class TestSurrogatesAndNonFiniteFloats:
    """Finding 2: lone surrogates and NaN/Infinity in structured fields break no write."""

    @pytest.mark.parametrize(
        ("update", "round_trips"), ODD_UPDATES.values(), ids=ODD_UPDATES.keys()
    )
    async def test_value_is_stored_like_the_plain_saver_stores_it(
        self, backend: Backend, update: dict[str, Any], round_trips: bool
    ) -> None:
        """The turn succeeds (or fails) as on the plain saver and reads return what it returns;
        the projection has no lone surrogate and no non-finite float."""
        values = await check_like_plain(backend, update)
        if values is not None and round_trips:
            [(field, written)] = update.items()
            assert data(values[field]) == data(written)


# -- finding 3: in-place edits no node returns ----------------------------------------------
def editing_graph(saver: Any) -> Any:
    """``answer`` adds an AIMessage; ``edit`` changes its content in place and returns {}."""

    def answer(state: STMState) -> dict[str, Any]:
        return {"messages": [AIMessage("answer", id="a1")]}

    def edit(state: STMState) -> dict[str, Any]:
        state["messages"][-1].content = "edited"
        return {}

    builder = StateGraph(STMState).add_node(answer).add_node(edit)
    builder.add_edge(START, "answer").add_edge("answer", "edit")
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("backend", ALL_BACKENDS, indirect=True)
class TestInPlaceEditNoNodeReturns:
    """Finding 3: an edit no node returns is stored exactly as the plain saver stores it."""

    async def test_edit_reads_as_on_the_plain_saver(self, backend: Backend) -> None:
        """get_state and the history show the content the plain saver shows."""
        # Observed with the plain savers: SqliteSaver and AsyncSqliteSaver store the whole
        # checkpoint, so they show "edited"; InMemorySaver, PostgresSaver and
        # AsyncPostgresSaver store a channel only when its version changes: "answer".
        seen = []
        for plain in (True, False):
            db = "plain" if plain else "main"
            async with backend.saver(db, plain=plain) as saver:
                graph = editing_graph(saver)
                await backend.call(graph, "invoke", turn(0), config(), durability="sync")
                snap = await backend.call(graph, "get_state", config())
                history = await backend.call(graph, "get_state_history", config())
                async with backend.reopened(saver, db, plain=plain) as fresh:
                    again = await backend.call(editing_graph(fresh), "get_state", config())
            seen.append(
                (
                    data(snap.values["messages"]),
                    data(again.values["messages"]),
                    [data(s.values.get("messages")) for s in history],
                )
            )
        assert seen[1] == seen[0]


# -- finding 4: delete_thread from another worker during a run -----------------------------
class Gate:
    """Blocks the ``wait`` node of a run until the test opens it."""

    def __init__(self) -> None:
        self.armed = False
        self.reached = threading.Event()
        self.opened = threading.Event()

    def pass_through(self) -> None:
        if self.armed:
            self.reached.set()
            assert self.opened.wait(10)


def gated_graph(saver: Any, gate: Gate) -> Any:
    """``first`` sets the goal and answers; ``wait`` blocks at the gate, then answers."""

    def first(state: STMState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"goal": f"goal {n}", "messages": [AIMessage(f"first {n}", id=f"f{n}")]}

    def wait(state: STMState) -> dict[str, Any]:
        gate.pass_through()  # a sync node: in an async run it waits in the executor
        n = len(state["messages"])
        return {"messages": [AIMessage(f"after {n}", id=f"w{n}")]}

    builder = StateGraph(STMState).add_node(first).add_node(wait)
    builder.add_edge(START, "first").add_edge("first", "wait")
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("backend", ALL_BACKENDS, indirect=True)
class TestDeleteDuringRun:
    """Finding 4: delete_thread by another worker while a run writes the thread."""

    async def test_thread_stays_readable_and_reusable(self, backend: Backend) -> None:
        """The run's late write is refused (issue 11: deletion stays deleted; the plain saver
        silently recreates half a thread); reads do not raise and agree; the id is reusable."""
        outcomes = []
        for plain in (True, False):
            db = "plain" if plain else "main"
            # b is another worker: its own connection (memory: another wrapper, or the
            # same InMemorySaver when plain)
            async with backend.saver(db, plain=plain) as a, backend.saver(db, plain=plain) as b:
                gate = Gate()
                graph = gated_graph(a, gate)
                await backend.call(graph, "invoke", turn(0), config(), durability="sync")
                gate.armed = True
                run = backend.start(graph, "invoke", turn(1), config(), durability="sync")
                assert await asyncio.to_thread(gate.reached.wait, 10)
                await backend.call(b, "delete_thread", "t")  # a checkpoint of the run exists
                gate.opened.set()
                run_error = await error_of(run)
                gate.armed = False
                read_error = await error_of(backend.call(graph, "get_state", config()))
                outcomes.append((run_error, read_error))
                if plain:
                    continue
                assert read_error is None
                for saver in (a, b):
                    tup = await backend.call(saver, "get_tuple", config())
                    state = await backend.call(saver, "get_thread_state", "t")
                    assert (state is None) == (tup is None)
                    if tup is not None:
                        values = tup.checkpoint["channel_values"]
                        assert state.goal == values.get("goal")
                        assert state.message_count == len(values.get("messages", []))
                await backend.call(graph, "invoke", turn(2), config(), durability="sync")
                for saver in (a, b):
                    messages = (await values_of(backend, saver))["messages"]
                    assert [m.id for m in messages[-3:]] == [
                        "h2",
                        f"f{len(messages) - 2}",
                        f"w{len(messages) - 1}",
                    ]
        assert outcomes == [(None, None), (ThreadDeletedError, None)]


# -- finding 5: several processes on one SQLite file -----------------------------------------
WORKER = """
import json, sys
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph_stm import STMSaver, STMState

def reply(state):
    return {"goal": "g", "messages": [AIMessage("hello back")]}

path, worker = sys.argv[1], sys.argv[2]
failures = []
with STMSaver.from_sqlite(path) as saver:
    graph = StateGraph(STMState).add_node(reply).add_edge(START, "reply")
    graph = graph.compile(checkpointer=saver)
    print("ready", flush=True)
    sys.stdin.readline()  # the barrier: the parent releases all workers at once
    for i in range(10):
        try:
            config = {"configurable": {"thread_id": f"{worker}-{i}"}}
            graph.invoke({"messages": [HumanMessage("hello")]}, config)
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
print(json.dumps(failures), flush=True)
"""


class TestSqliteFromSeveralProcesses:
    """Finding 5: processes writing first turns to one SQLite file at once all succeed."""

    def test_three_processes_run_first_turns_without_failures(self, sqlite_path: Path) -> None:
        """3 processes x 10 new threads, released together: no turn fails ("database is locked")."""
        with STMSaver.from_sqlite(sqlite_path) as saver:
            saver.setup()
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", WORKER, str(sqlite_path), f"w{i}"],
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(3)
        ]
        try:
            for worker in workers:
                assert worker.stdout is not None
                assert worker.stdout.readline().strip() == "ready"
            for worker in workers:
                assert worker.stdin is not None
                worker.stdin.write("go\n")
                worker.stdin.flush()
            outputs = [worker.communicate(timeout=60)[0] for worker in workers]
        finally:
            for worker in workers:
                worker.kill()
                worker.wait()
        failures = [f for out in outputs for f in json.loads(out.strip().splitlines()[-1])]
        assert failures == []
        with STMSaver.from_sqlite(sqlite_path) as saver:
            threads = saver.list_threads()
            assert len(threads) == 30
            assert {t.message_count for t in threads} == {2}


# -- finding 6: user dicts that look like our references -----------------------------------
class DataState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    data: dict[str, Any]


LOOKALIKES = {
    "full_reference": {"__langgraph_stm__": "messages/1", "list": "00" * 16, "n": 0},
    "key_only": {"__langgraph_stm__": "anything"},
}


@pytest.mark.parametrize("backend", ALL_BACKENDS, indirect=True)
class TestReferenceLookalikes:
    """Finding 6: a top-level dict with our reference key round-trips unchanged."""

    @pytest.mark.parametrize("value", LOOKALIKES.values(), ids=LOOKALIKES.keys())
    async def test_dict_channel_round_trips(self, backend: Backend, value: dict[str, Any]) -> None:
        """get_state returns the user's dict exactly and every history entry reads."""

        def node(state: DataState) -> dict[str, Any]:
            return {"data": dict(value), "messages": [AIMessage("ok", id="a1")]}

        async with backend.saver() as saver:
            graph = StateGraph(DataState).add_node(node).add_edge(START, "node")
            app = graph.compile(checkpointer=saver)
            await backend.call(app, "invoke", turn(0), config())
            assert (await backend.call(app, "get_state", config())).values["data"] == value
            history = await backend.call(app, "get_state_history", config())
            assert [s.values.get("data") for s in history] == [value, None, None]
            assert [len(s.values.get("messages", [])) for s in history] == [2, 1, 0]


# -- finding 7: garbage projection rows ------------------------------------------------------
GARBAGE = {
    "sqlite": [
        "state = 'not json'",
        "state = '\"a string\"'",
        "state = '{\"plan\": 5}'",
        "checkpoint_id = 'garbage'",
    ],
    "postgres": [
        "state = '\"a string\"'::jsonb",
        "state = '{\"plan\": 5}'::jsonb",
        "checkpoint_id = 'garbage'",
    ],
}
GARBAGE_CASES = [
    pytest.param(name, corruption, marks=[pytest.mark.postgres] * name.endswith("postgres"))
    for name in ("sqlite", "async_sqlite", "postgres", "async_postgres")
    for corruption in GARBAGE["postgres" if name.endswith("postgres") else "sqlite"]
]


class TestGarbageProjectionRows:
    """Finding 7: a garbage stm_threads row is computed on the fly, never written by reads."""

    @pytest.mark.parametrize(("backend", "corruption"), GARBAGE_CASES, indirect=["backend"])
    async def test_reads_ignore_the_row_and_refresh_rewrites_it(
        self, backend: Backend, corruption: str
    ) -> None:
        """Reads are right and leave the row as it is; refresh_threads rewrites it."""
        state_text = "state::text" if backend.is_postgres else "state"
        row_query = f"SELECT checkpoint_id, {state_text} FROM stm_threads WHERE thread_id = ?"
        async with backend.saver() as saver:
            graph = chat_graph(saver, {"plan": [{"id": "s1", "task": "check"}]})
            for thread_id, turns in (("bad", 2), ("good", 1)):
                for i in range(turns):
                    await backend.call(graph, "invoke", turn(i), config(thread_id))
            expected = {
                t: await backend.call(saver, "get_thread_state", t) for t in ("bad", "good")
            }
            backend.sql(f"UPDATE stm_threads SET {corruption} WHERE thread_id = ?", ("bad",))
            corrupt = backend.sql(row_query, ("bad",))

            def key(state: Any) -> Any:
                return (
                    state.thread_id,
                    state.checkpoint_id,
                    state.goal,
                    state.plan,
                    state.message_count,
                )

            listed = await backend.call(saver, "list_threads")
            assert sorted(map(key, listed)) == sorted(map(key, expected.values()))
            assert [(t.goal, t.message_count) for t in sorted(listed, key=key)] == [
                ("goal 3", 4), ("goal 1", 2)
            ]  # fmt: skip
            assert key(await backend.call(saver, "get_thread_state", "bad")) == key(expected["bad"])
            assert backend.sql(row_query, ("bad",)) == corrupt  # reads never write
            await backend.call(saver, "refresh_threads")
            [(checkpoint_id, state)] = backend.sql(row_query, ("bad",))
            assert checkpoint_id == expected["bad"].checkpoint_id
            stored = json.loads(state)
            assert stored["goal"] == "goal 3"
            assert stored["plan"] == [{"id": "s1", "task": "check", "status": "pending"}]


# -- finding 8: corrupt message rows raise StorageError --------------------------------------
CORRUPTIONS = {
    "bodies_deleted": ("stm_bodies", "DELETE FROM stm_bodies WHERE thread_id = ?", ("t",)),
    "body_data_garbled": ("stm_bodies", "UPDATE stm_bodies SET data = {x00}", ()),
    "list_ops_garbled": ("stm_lists", "UPDATE stm_lists SET ops = {xff}", ()),
    "lists_deleted": ("stm_lists", "DELETE FROM stm_lists", ()),
}


@pytest.mark.parametrize("backend", SQL_BACKENDS, indirect=True)
class TestCorruptMessageRows:
    """Finding 8: missing or corrupt message rows raise StorageError naming the thread."""

    @pytest.mark.parametrize(
        ("table", "statement", "params"), CORRUPTIONS.values(), ids=CORRUPTIONS.keys()
    )
    async def test_get_tuple_raises_storage_error(
        self, backend: Backend, table: str, statement: str, params: tuple[Any, ...]
    ) -> None:
        """get_tuple raises StorageError (not struct.error, ValueError, LookupError...)."""
        async with backend.saver() as saver:
            graph = chat_graph(saver)
            for i in range(3):
                await backend.call(graph, "invoke", turn(i), config())
        count = f"SELECT COUNT(*) FROM {table} WHERE thread_id = ?"
        assert backend.sql(count, ("t",))[0][0] > 0  # the thread has rows to corrupt
        if backend.is_postgres:
            literals = {"x00": "'\\x00'::bytea", "xff": "'\\xff'::bytea"}
        else:
            literals = {"x00": "x'00'", "xff": "x'ff'"}
        backend.sql(statement.format(**literals), params)
        async with backend.saver() as fresh:  # nothing cached
            with pytest.raises(StorageError) as caught:
                await backend.call(fresh, "get_tuple", config())
            assert caught.value.thread_id == "t"


# -- finding 9: list_threads arguments -----------------------------------------------------
BAD_ARGUMENTS = [{"offset": -1}, {"limit": -1}, {"updated_after": "last tuesday"}]


@pytest.mark.parametrize("backend", ALL_BACKENDS, indirect=True)
class TestListThreadsArguments:
    """Finding 9: list_threads validates its arguments and pages right on every backend."""

    async def test_bad_arguments_raise_invalid_argument_error(self, backend: Backend) -> None:
        """offset < 0, limit < 0 and an unparsable time raise InvalidArgumentError."""
        async with backend.saver() as saver:
            for thread_id in ("a", "b", "c"):
                await backend.call(chat_graph(saver), "invoke", turn(0), config(thread_id))
            for kwargs in BAD_ARGUMENTS:
                with pytest.raises(InvalidArgumentError):
                    await backend.call(saver, "list_threads", **kwargs)

    async def test_limit_zero_and_paging(self, backend: Backend) -> None:
        """limit=0 returns no thread; limit=2, offset=1 returns the 2nd and 3rd newest."""
        async with backend.saver() as saver:
            for thread_id in ("a", "b", "c"):
                await backend.call(chat_graph(saver), "invoke", turn(0), config(thread_id))
            assert await backend.call(saver, "list_threads", limit=0) == []
            page = await backend.call(saver, "list_threads", limit=2, offset=1)
            assert [t.thread_id for t in page] == ["b", "a"]


# -- finding 10: validate_writes on by default ----------------------------------------------
@pytest.mark.parametrize("backend", ALL_BACKENDS, indirect=True)
class TestValidateWritesByDefault:
    """Finding 10: a malformed STMState update raises and stores nothing of its step."""

    async def test_malformed_update_raises_and_the_thread_stays_readable(
        self, backend: Backend
    ) -> None:
        """invoke raises StateUpdateError; get_state shows the state before the step; a fixed
        node continues the thread."""
        broken = {"on": False}

        def node(state: STMState) -> dict[str, Any]:
            if broken["on"]:
                return {"plan": "a string"}
            n = len(state["messages"])
            return {
                "plan": [{"id": "s1", "task": "t"}],
                "messages": [AIMessage(f"r{n}", id=f"a{n}")],
            }

        async with backend.saver() as saver:
            graph = StateGraph(STMState).add_node(node).add_edge(START, "node")
            app = graph.compile(checkpointer=saver)
            await backend.call(app, "invoke", turn(0), config())
            before = (await backend.call(app, "get_state", config())).values
            broken["on"] = True
            with pytest.raises(StateUpdateError):
                await backend.call(app, "invoke", turn(1), config())
            after = (await backend.call(app, "get_state", config())).values
            # the input checkpoint of the failed run was written before the failing step
            assert data(after) == data(
                {**before, "messages": [*before["messages"], *turn(1)["messages"]]}
            )
            broken["on"] = False
            await backend.call(app, "invoke", turn(2), config())
            messages = (await backend.call(app, "get_state", config())).values["messages"]
            assert [m.id for m in messages] == ["h0", "a1", "h1", "h2", "a4"]


# -- finding 11: wrapping the same inner saver again ------------------------------------------
class TestWrappingAgain:
    """Finding 11: a second STMSaver over the same inner saver reads the same threads."""

    @pytest.mark.parametrize("backend", ALL_BACKENDS, indirect=True)
    async def test_new_wrapper_of_the_same_inner_saver(self, backend: Backend) -> None:
        """A graph on STMSaver(inner) reads and continues what another STMSaver(inner) wrote."""
        async with backend.saver() as first:
            await self._check(backend, first, STMSaver(first.inner))

    @pytest.mark.parametrize("backend", SQL_BACKENDS, indirect=True)
    async def test_new_inner_saver_over_the_same_connection(self, backend: Backend) -> None:
        """A new inner saver over the same connection (SqliteSaver(conn) twice) reads the same."""
        async with backend.saver() as first:
            await self._check(backend, first, STMSaver(type(first.inner)(first.inner.conn)))

    @staticmethod
    async def _check(backend: Backend, first: STMSaver, second: STMSaver) -> None:
        graph = chat_graph(first)
        for i in range(2):
            await backend.call(graph, "invoke", turn(i), config())
        written = await values_of(backend, first)
        assert data(await values_of(backend, second)) == data(written)
        await backend.call(chat_graph(second), "invoke", turn(2), config())
        for saver in (second, first):
            assert [m.id for m in (await values_of(backend, saver))["messages"]] == [
                "h0", "a1", "h1", "a3", "h2", "a5"
            ]  # fmt: skip


# -- finding 12: stable ids for messages written by put_writes ------------------------------
def fan_out_graph(saver: Any) -> Any:
    """A router sends to ``ask`` (sleeps, then interrupts) and ``tool`` (answers, no id)."""

    def router(state: STMState) -> dict[str, Any]:
        return {}

    def ask(state: STMState) -> dict[str, Any]:
        time.sleep(0.2)  # ``tool`` has finished and its writes are stored by now
        interrupt("approve?")
        return {}

    def tool(state: STMState) -> dict[str, Any]:
        return {"messages": [ToolMessage("ok", tool_call_id="c1")]}

    def fan_out(state: STMState) -> list[Send]:
        return [Send("ask", state), Send("tool", state)]

    builder = StateGraph(STMState).add_node(router).add_node(ask).add_node(tool)
    builder.add_edge(START, "router").add_conditional_edges("router", fan_out, ["ask", "tool"])
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("backend", ALL_BACKENDS, indirect=True)
class TestStableIdsOfPendingWrites:
    """Finding 12: a message a paused step's sibling task wrote without id keeps one id."""

    async def test_id_is_the_same_on_every_read_and_after_the_resume(
        self, backend: Backend
    ) -> None:
        """Reads (this and a new saver) show one id; the resumed run keeps it; it can be removed."""
        # With the plain savers (all five, checked) every read shows a new uuid: the
        # ToolMessage is stored without id in the pending writes and add_messages gives
        # it a fresh one each time get_state applies them; the resumed run stores yet
        # another. (update_state with RemoveMessage while paused fails on every saver,
        # even for a message with an explicit id: update_state does not apply the pending
        # writes of the paused step, so the removal is checked after the resume.)
        async with backend.saver() as saver:
            graph = fan_out_graph(saver)
            await backend.call(graph, "invoke", turn(0), config())
            snaps = [await backend.call(graph, "get_state", config()) for _ in range(2)]
            assert snaps[0].next == ("ask",)
            assert [type(s.values["messages"][-1]) for s in snaps] == [ToolMessage] * 2
            ids = [s.values["messages"][-1].id for s in snaps]
            assert ids[0] is not None
            assert ids[1] == ids[0]
            async with backend.saver() as other:  # a new saver instance over the same database
                snap = await backend.call(fan_out_graph(other), "get_state", config())
                assert snap.values["messages"][-1].id == ids[0]
            out = await backend.call(graph, "invoke", Command(resume=True), config())
            assert [m.id for m in out["messages"]] == ["h0", ids[0]]
            await backend.call(
                graph, "update_state", config(), {"messages": [RemoveMessage(id=ids[0])]}
            )
            messages = (await backend.call(graph, "get_state", config())).values["messages"]
            assert [m.id for m in messages] == ["h0"]


# -- finding 13: one STMSaver class; prune on every backend --------------------------------
@pytest.mark.parametrize("backend", ALL_BACKENDS, indirect=True)
class TestOneClassAndPrune:
    """Finding 13: STMSaver is one class over every saver, and prune works on each."""

    async def test_type_is_stm_saver(self, backend: Backend) -> None:
        """type(STMSaver(inner)) is STMSaver, from the constructor and from_* alike."""
        async with backend.saver() as saver:
            assert type(saver) is STMSaver
            assert type(STMSaver(saver.inner)) is STMSaver

    async def test_prune_keep_latest(self, backend: Backend) -> None:
        """One checkpoint is left, the state keeps all messages, and the thread goes on."""
        async with backend.saver() as saver:
            graph = chat_graph(saver)
            for i in range(3):
                await backend.call(graph, "invoke", turn(i), config())
            await backend.call(graph, "invoke", turn(0), config("other"))
            before = await values_of(backend, saver)
            await backend.call(saver, "prune", ["t"], strategy="keep_latest")
            assert len(await backend.call(saver, "list", config())) == 1
            assert data(await values_of(backend, saver)) == data(before)
            await backend.call(graph, "invoke", turn(3), config())
            assert len((await values_of(backend, saver))["messages"]) == 8
            assert len((await values_of(backend, saver, "other"))["messages"]) == 2

    async def test_prune_delete(self, backend: Backend) -> None:
        """The thread is gone, checkpoints and our rows alike; other threads stay."""
        async with backend.saver() as saver:
            graph = chat_graph(saver)
            for i in range(3):
                await backend.call(graph, "invoke", turn(i), config())
            await backend.call(graph, "invoke", turn(0), config("other"))
            await backend.call(saver, "prune", ["t"], strategy="delete")
            assert await backend.call(saver, "get_tuple", config()) is None
            assert await backend.call(saver, "get_thread_state", "t") is None
            if backend.is_sql:
                assert backend.our_rows("t") == 0
                assert backend.our_rows("other") > 0
            assert len((await values_of(backend, saver, "other"))["messages"]) == 2
