"""Encryption at rest end to end (``STMSaver(..., encryption_key=...)``, docs/encryption.md).

A compiled StateGraph over STMState runs an agent whose tool call waits on an approval
``interrupt()``, then resumes. Three canaries are planted: a message text (the user's
message), a tool argument (the AI message's tool call), and a metadata value
(``config["metadata"]``), plus a structured field (``goal``). On every backend:

- none of them is anywhere in raw storage (SQLite: the file's bytes and its WAL, before
  and after ``PRAGMA wal_checkpoint(TRUNCATE)``; PostgreSQL: every column of every table
  cast to text, and every bytea value; InMemorySaver: every serialized value it holds),
  while the same run without a key leaves them findable (the scan sees them);
- a new saver with the right key restores ``get_state`` exactly, and the projection;
- ``list(filter={"source": "loop"})`` (a LangGraph key, plaintext) and a filter on the
  sealed metadata key both work;
- rotation: a new primary with the old key as ``old`` reads everything, ``reencrypt()``
  rewrites every old row, after which the old key can be dropped;
- a wrong key (or no key) raises ``EncryptionKeyError`` naming the thread.
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_stm import STMSaver, STMState
from langgraph_stm.encryption import Keyring, generate_key
from langgraph_stm.errors import EncryptionKeyError

MESSAGE = "canary-message-Q7wX2p"
TOOL_ARG = "canary-tool-argument-M4zK9r"
META = "canary-metadata-value-B8nV3s"
GOAL = "canary-goal-L5tH6y"
CANARIES = [MESSAGE.encode(), TOOL_ARG.encode(), META.encode(), GOAL.encode()]
THREAD = "t-enc"


# -- the graph -------------------------------------------------------------------------------
def build_graph(saver: Any) -> Any:
    """agent (tool call) -> approve [interrupt] -> tool -> agent -> END."""

    def agent(state: STMState) -> dict[str, Any]:
        if any(isinstance(m, ToolMessage) for m in state["messages"]):
            return {"messages": [AIMessage("booked", id="ai-final")]}
        call = {"name": "book", "args": {"where": TOOL_ARG, "seats": 2}, "id": "call-1"}
        return {
            "messages": [AIMessage("", id="ai-1", tool_calls=[call])],
            "goal": GOAL,
            "plan": [{"id": "s1", "task": f"book {TOOL_ARG}", "status": "in_progress"}],
        }

    def approve(state: STMState) -> dict[str, Any]:
        answer = interrupt({"approve": "book?"})
        return {"last_error": None} if answer == "yes" else {}

    def tool(state: STMState) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        where = last.tool_calls[0]["args"]["where"]
        return {"messages": [ToolMessage(f"booked at {where}", tool_call_id="call-1", id="tm-1")]}

    def route(state: STMState) -> str:
        last = state["messages"][-1]
        return "approve" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(STMState)
    graph.add_node("agent", agent)
    graph.add_node("approve", approve)
    graph.add_node("tool", tool)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["approve", END])
    graph.add_edge("approve", "tool")
    graph.add_edge("tool", "agent")
    return graph.compile(checkpointer=saver)


def run_config(thread: str = THREAD) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}, "metadata": {"customer": META}}


def read_config(thread: str = THREAD) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


def run_graph(saver: Any, thread: str = THREAD) -> Any:
    """Run to the approval interrupt, resume, finish; return the final state values."""
    graph = build_graph(saver)
    first = graph.invoke({"messages": [HumanMessage(MESSAGE, id="h-1")]}, run_config(thread))
    assert "__interrupt__" in first
    graph.invoke(Command(resume="yes"), run_config(thread))
    return graph.get_state(read_config(thread))


async def arun_graph(saver: Any, thread: str = THREAD) -> Any:
    graph = build_graph(saver)
    config = run_config(thread)
    first = await graph.ainvoke({"messages": [HumanMessage(MESSAGE, id="h-1")]}, config)
    assert "__interrupt__" in first
    await graph.ainvoke(Command(resume="yes"), config)
    return await graph.aget_state(read_config(thread))


def assert_finished(state: Any) -> None:
    messages = state.values["messages"]
    assert [m.id for m in messages] == ["h-1", "ai-1", "tm-1", "ai-final"]
    assert messages[0].content == MESSAGE
    assert messages[1].tool_calls[0]["args"] == {"where": TOOL_ARG, "seats": 2}
    assert state.values["goal"] == GOAL
    assert state.metadata["customer"] == META


def same_state(a: Any, b: Any) -> None:
    """Two ``get_state`` snapshots hold exactly the same thing."""
    assert a.values == b.values
    assert a.next == b.next
    assert a.config == b.config
    assert a.metadata == b.metadata
    assert a.parent_config == b.parent_config


def assert_absent(data: bytes, where: str) -> None:
    for canary in CANARIES:
        assert canary not in data, f"{canary!r} stored in plaintext {where}"


def assert_present(data: bytes) -> None:
    """Control: without a key the same scan finds every canary."""
    assert [c for c in CANARIES if c not in data] == []


def inflated(value: bytes) -> bytes:
    try:
        return value + zlib.decompress(value)
    except zlib.error:
        return value


def assert_filters_work(saver: STMSaver, thread: str = THREAD) -> None:
    loops = list(saver.list(read_config(thread), filter={"source": "loop"}))
    assert loops
    assert all(t.metadata["source"] == "loop" for t in loops)
    everything = list(saver.list(read_config(thread)))
    assert len(loops) == sum(1 for t in everything if t.metadata["source"] == "loop")
    mine = list(saver.list(read_config(thread), filter={"customer": META}, limit=2))
    assert len(mine) == 2
    assert all(t.metadata["customer"] == META for t in mine)
    assert list(saver.list(read_config(thread), filter={"customer": "someone else"})) == []


# -- InMemorySaver --------------------------------------------------------------------------
def memory_storage(inner: InMemorySaver) -> bytes:
    """Every serialized value an InMemorySaver holds, plus the private tables of ours."""
    data = repr(inner.storage).encode() + repr(inner.writes).encode() + repr(inner.blobs).encode()
    for by_ns in inner.storage.values():
        for by_id in by_ns.values():
            for checkpoint, metadata, _ in by_id.values():
                data += checkpoint[1] + metadata[1]
    for writes in inner.writes.values():
        for _, _, typed, *_ in writes.values():
            data += typed[1]
    for typed in inner.blobs.values():
        data += typed[1]
    return data


def our_memory_tables(saver: STMSaver) -> bytes:
    conn = saver._tables.sync.conn  # type: ignore[union-attr]
    data = b""
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
        for row in conn.execute(f'SELECT * FROM "{table}"').fetchall():
            for value in row:
                data += inflated(value) if isinstance(value, bytes) else str(value).encode()
    return data


class TestInMemory:
    """Encryption over InMemorySaver."""

    def test_canaries_absent_from_storage_and_state_restored(self) -> None:
        """Nothing planted is stored in plaintext; a new saver with the key reads it all."""
        key = generate_key()
        inner = InMemorySaver()
        saver = STMSaver(inner, encryption_key=key)
        state = run_graph(saver)
        assert_finished(state)
        assert_absent(memory_storage(inner), "in InMemorySaver")
        assert_absent(our_memory_tables(saver), "in our tables")
        reloaded = STMSaver(inner, encryption_key=key)
        same_state(build_graph(reloaded).get_state(read_config()), state)
        thread = reloaded.get_thread_state(THREAD)
        assert thread is not None
        assert thread.goal == GOAL
        assert thread.message_count == 4
        assert_filters_work(reloaded)

    def test_scan_finds_canaries_without_encryption(self) -> None:
        """Control: the same run without a key stores every canary findably."""
        inner = InMemorySaver()
        saver = STMSaver(inner)
        run_graph(saver)
        assert_present(memory_storage(inner) + our_memory_tables(saver))

    def test_rotation_then_old_key_dropped(self) -> None:
        """New primary + old key reads; reencrypt rewrites; then the old key can go."""
        old, new = generate_key(), generate_key()
        inner = InMemorySaver()
        state = run_graph(STMSaver(inner, encryption_key=old))
        rotating = STMSaver(inner, encryption_key=Keyring(new, old=[old]))
        same_state(build_graph(rotating).get_state(read_config()), state)
        report = rotating.reencrypt()
        assert report.total > 0
        assert rotating.reencrypt().total == 0
        only_new = STMSaver(inner, encryption_key=new)
        same_state(build_graph(only_new).get_state(read_config()), state)
        assert_filters_work(only_new)

    def test_wrong_key_raises_naming_the_thread(self) -> None:
        inner = InMemorySaver()
        run_graph(STMSaver(inner, encryption_key=generate_key()))
        wrong = STMSaver(inner, encryption_key=generate_key())
        with pytest.raises(EncryptionKeyError) as caught:
            wrong.get_tuple(read_config())
        assert caught.value.thread_id == THREAD
        assert THREAD in str(caught.value)


# -- SQLite file -------------------------------------------------------------------------------
@contextmanager
def sqlite_saver(path: Path, key: Any) -> Iterator[STMSaver]:
    with STMSaver.from_sqlite(path, encryption_key=key) as saver:
        assert isinstance(saver, STMSaver)
        saver.inner.conn.execute("PRAGMA journal_mode=WAL")  # type: ignore[attr-defined]
        saver.setup()
        yield saver


def sqlite_storage(path: Path) -> bytes:
    """Raw bytes of the database file and its WAL, plus every value of every table."""
    data = path.read_bytes()
    wal = Path(f"{path}-wal")
    if wal.exists():
        data += wal.read_bytes()
    with sqlite3.connect(path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, bytes):
                        data += inflated(value)
                    elif value is not None:
                        data += str(value).encode()
    return data


def wal_checkpoint(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


class TestSQLite:
    """Encryption over a SQLite file (WAL mode)."""

    def test_canaries_absent_from_file_and_wal_and_state_restored(self, sqlite_path: Path) -> None:
        key = generate_key()
        with sqlite_saver(sqlite_path, key) as saver:
            state = run_graph(saver)
            assert_finished(state)
            assert Path(f"{sqlite_path}-wal").exists()
            assert_absent(sqlite_storage(sqlite_path), "(before the WAL checkpoint)")
        wal_checkpoint(sqlite_path)
        assert_absent(sqlite_path.read_bytes(), "in the database file")
        assert_absent(sqlite_storage(sqlite_path), "in a table")
        with sqlite_saver(sqlite_path, key) as reloaded:
            same_state(build_graph(reloaded).get_state(read_config()), state)
            thread = reloaded.get_thread_state(THREAD)
            assert thread is not None
            assert thread.goal == GOAL
            assert [t.thread_id for t in reloaded.list_threads()] == [THREAD]
            assert_filters_work(reloaded)

    def test_scan_finds_canaries_without_encryption(self, sqlite_path: Path) -> None:
        with sqlite_saver(sqlite_path, None) as saver:
            run_graph(saver)
        wal_checkpoint(sqlite_path)
        assert_present(sqlite_storage(sqlite_path))

    def test_rotation_then_old_key_dropped(self, sqlite_path: Path) -> None:
        old, new = generate_key(), generate_key()
        with sqlite_saver(sqlite_path, old) as saver:
            state = run_graph(saver)
        with sqlite_saver(sqlite_path, Keyring(new, old=[old])) as rotating:
            same_state(build_graph(rotating).get_state(read_config()), state)
            report = rotating.reencrypt()
            assert report.rewritten["checkpoints"] > 0
            assert report.rewritten["writes"] > 0
            assert report.rewritten["checkpoints.metadata"] > 0
            assert report.rewritten["stm_bodies"] > 0
            assert report.rewritten["stm_threads"] == 1
            assert rotating.reencrypt().total == 0
        with sqlite_saver(sqlite_path, new) as only_new:
            same_state(build_graph(only_new).get_state(read_config()), state)
            assert only_new.get_thread_state(THREAD) is not None
            assert_filters_work(only_new)

    def test_old_key_dropped_before_reencrypt_raises(self, sqlite_path: Path) -> None:
        old, new = generate_key(), generate_key()
        with sqlite_saver(sqlite_path, old) as saver:
            run_graph(saver)
        with sqlite_saver(sqlite_path, new) as saver, pytest.raises(EncryptionKeyError) as caught:
            build_graph(saver).get_state(read_config())
        assert caught.value.thread_id == THREAD
        assert caught.value.key_id == Keyring(old).primary_id

    def test_wrong_or_missing_key_raises_naming_the_thread(self, sqlite_path: Path) -> None:
        with sqlite_saver(sqlite_path, generate_key()) as saver:
            run_graph(saver)
        for key in (generate_key(), None):
            with sqlite_saver(sqlite_path, key) as saver:
                with pytest.raises(EncryptionKeyError, match=THREAD):
                    saver.get_tuple(read_config())
                with pytest.raises(EncryptionKeyError, match=THREAD):
                    list(saver.list(read_config()))

    async def test_async_sqlite(self, sqlite_path: Path) -> None:
        """The async twins: run, scan, reload, rotate with areencrypt."""
        old, new = generate_key(), generate_key()
        async with STMSaver.from_async_sqlite(sqlite_path, encryption_key=old) as saver:
            await saver.asetup()
            state = await arun_graph(saver)
            assert_finished(state)
        wal_checkpoint(sqlite_path)
        assert_absent(sqlite_storage(sqlite_path), "(async saver)")
        ring = Keyring(new, old=[old])
        async with STMSaver.from_async_sqlite(sqlite_path, encryption_key=ring) as saver:
            same_state(await build_graph(saver).aget_state(read_config()), state)
            assert (await saver.areencrypt()).total > 0
            page = [t async for t in saver.alist(read_config(), filter={"customer": META})]
            assert page
            assert all(t.metadata["customer"] == META for t in page)
        async with STMSaver.from_async_sqlite(sqlite_path, encryption_key=new) as saver:
            same_state(await build_graph(saver).aget_state(read_config()), state)
            threads = await saver.alist_threads()
            assert [t.goal for t in threads] == [GOAL]
        async with STMSaver.from_async_sqlite(sqlite_path, encryption_key=old) as saver:
            with pytest.raises(EncryptionKeyError, match=THREAD):
                await saver.aget_tuple(read_config())


# -- PostgreSQL ----------------------------------------------------------------------------------
def postgres_storage(uri: str) -> bytes:
    """Every row of every table cast to text, and every bytea value (raw and inflated)."""
    import psycopg

    data: list[bytes] = []
    with psycopg.connect(uri) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
            )
        ]
        assert {"checkpoints", "checkpoint_blobs", "checkpoint_writes", "stm_bodies"} <= set(tables)
        for table in tables:
            for (text,) in conn.execute(f'SELECT t::text FROM "{table}" t'):
                data.append(text.encode())
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, bytes | memoryview):
                        data.append(inflated(bytes(value)))
                    elif value is not None:
                        data.append(str(value).encode())
    return b"\n".join(data)


@pytest.mark.postgres
class TestPostgres:
    """Encryption over PostgreSQL."""

    def test_canaries_absent_from_every_column_and_state_restored(self, postgres_uri: str) -> None:
        old, new = generate_key(), generate_key()
        with STMSaver.from_postgres(postgres_uri, encryption_key=old) as saver:
            saver.setup()
            state = run_graph(saver)
            assert_finished(state)
        assert_absent(postgres_storage(postgres_uri), "in PostgreSQL")
        with STMSaver.from_postgres(postgres_uri, encryption_key=old) as reloaded:
            same_state(build_graph(reloaded).get_state(read_config()), state)
            thread = reloaded.get_thread_state(THREAD)
            assert thread is not None
            assert thread.goal == GOAL
            assert_filters_work(reloaded)
        with STMSaver.from_postgres(postgres_uri, encryption_key=Keyring(new, old=[old])) as saver:
            report = saver.reencrypt()
            assert report.rewritten["checkpoint_blobs"] > 0
            assert report.rewritten["checkpoint_writes"] > 0
            assert report.rewritten["checkpoints.metadata"] > 0
            assert saver.reencrypt().total == 0
        with STMSaver.from_postgres(postgres_uri, encryption_key=new) as only_new:
            same_state(build_graph(only_new).get_state(read_config()), state)
            assert_filters_work(only_new)
        with STMSaver.from_postgres(postgres_uri, encryption_key=old) as wrong:
            with pytest.raises(EncryptionKeyError) as caught:
                wrong.get_tuple(read_config())
            assert caught.value.thread_id == THREAD

    def test_scan_finds_canaries_without_encryption(self, postgres_uri: str) -> None:
        with STMSaver.from_postgres(postgres_uri) as saver:
            saver.setup()
            run_graph(saver)
        assert_present(postgres_storage(postgres_uri))

    async def test_async_postgres(self, postgres_uri: str) -> None:
        old, new = generate_key(), generate_key()
        async with async_postgres(postgres_uri, old) as saver:
            state = await arun_graph(saver)
            assert_finished(state)
        assert_absent(postgres_storage(postgres_uri), "(async saver)")
        async with async_postgres(postgres_uri, Keyring(new, old=[old])) as saver:
            same_state(await build_graph(saver).aget_state(read_config()), state)
            assert (await saver.areencrypt()).total > 0
        async with async_postgres(postgres_uri, new) as saver:
            same_state(await build_graph(saver).aget_state(read_config()), state)
            loops = [t async for t in saver.alist(read_config(), filter={"source": "loop"})]
            assert loops
            assert all(t.metadata["source"] == "loop" for t in loops)
        async with async_postgres(postgres_uri, generate_key()) as saver:
            with pytest.raises(EncryptionKeyError, match=THREAD):
                await saver.aget_tuple(read_config())


@asynccontextmanager
async def async_postgres(uri: str, key: Any) -> AsyncIterator[STMSaver]:
    async with STMSaver.from_async_postgres(uri, encryption_key=key) as saver:
        assert isinstance(saver, STMSaver)
        await saver.asetup()
        yield saver


# -- keys per owner ----------------------------------------------------------------------------
def test_callable_key_per_tenant_with_scoping(sqlite_path: Path) -> None:
    """``encryption_key`` as a callable owner -> key: each tenant's threads are sealed
    with its own key, found again from the owner recorded with the data."""
    keys = {"acme": generate_key(), "globex": generate_key()}
    calls: list[str | None] = []

    def key_of(owner: str | None) -> str:
        calls.append(owner)
        return keys[str(owner)]

    with STMSaver.from_sqlite(sqlite_path, encryption_key=key_of, tenant_key="tenant") as saver:
        saver.setup()
        graph = build_graph(saver)
        for tenant in keys:
            config: RunnableConfig = {"configurable": {"thread_id": tenant, "tenant": tenant}}
            graph.invoke({"messages": [HumanMessage(MESSAGE, id="h-1")]}, config)
            graph.invoke(Command(resume="yes"), config)
        assert set(calls) == {"acme", "globex"}
        for tenant in keys:
            config = {"configurable": {"thread_id": tenant, "tenant": tenant}}
            assert graph.get_state(config).values["goal"] == GOAL
            [state] = saver.list_threads(owner=tenant)
            assert state.goal == GOAL
    keys["globex"] = generate_key()  # globex's key lost: acme still reads
    with STMSaver.from_sqlite(sqlite_path, encryption_key=key_of, tenant_key="tenant") as saver:
        graph = build_graph(saver)
        acme: RunnableConfig = {"configurable": {"thread_id": "acme", "tenant": "acme"}}
        assert graph.get_state(acme).values["goal"] == GOAL
        with pytest.raises(EncryptionKeyError, match="globex"):
            graph.get_state({"configurable": {"thread_id": "globex", "tenant": "globex"}})


def test_redaction_runs_before_encryption() -> None:
    """Redaction sees plaintext: what is decrypted holds the markers, not the secret."""
    secret = "sk-" + "proj-" + "Qw3rTy7uIo9pAs1dFg5hJk2lZx4cVb6nM8Qw3rTy7uIo"
    saver = STMSaver(InMemorySaver(), redact=True, encryption_key=generate_key())
    graph = build_graph(saver)
    config = run_config()
    graph.invoke({"messages": [HumanMessage(f"key {secret}", id="h-1")]}, config)
    stored = graph.get_state(read_config()).values["messages"][0].content
    assert stored == "key [REDACTED:api_key]"


# -- the official conformance suite on encrypted savers ---------------------------------------
async def conformance(name: str, make: Any) -> None:
    """Run the suite over savers made by ``make`` and require every capability it detects
    to pass (the inner saver's capabilities are checked in tests/conformance)."""
    from langgraph.checkpoint.conformance import checkpointer_test, validate

    async def factory() -> AsyncIterator[Any]:
        async with make() as saver:
            yield saver

    report = await validate(checkpointer_test(name=name)(factory))
    failures = {n: r.failures for n, r in report.results.items() if r.passed is False}
    assert not failures, failures
    assert all(r.passed for r in report.results.values() if r.detected)


class TestConformance:
    """An encrypted STMSaver passes the official langgraph-checkpoint-conformance suite."""

    async def test_in_memory(self) -> None:
        @asynccontextmanager
        async def make() -> AsyncIterator[Any]:
            yield STMSaver(InMemorySaver(), encryption_key=generate_key())

        await conformance("stm-encrypted-memory", make)

    async def test_async_sqlite(self, tmp_path: Path) -> None:
        counter = iter(range(100))

        @asynccontextmanager
        async def make() -> AsyncIterator[Any]:
            path = tmp_path / f"db{next(counter)}.sqlite"
            async with STMSaver.from_async_sqlite(path, encryption_key=generate_key()) as saver:
                await saver.asetup()
                yield saver

        await conformance("stm-encrypted-sqlite", make)

    @pytest.mark.postgres
    async def test_async_postgres(self, postgres_uri: str) -> None:
        @asynccontextmanager
        async def make() -> AsyncIterator[Any]:
            async with async_postgres(postgres_uri, generate_key()) as saver:
                yield saver

        await conformance("stm-encrypted-postgres", make)


def test_audit_entries_are_sealed_and_read_back(sqlite_path: Path) -> None:
    key = generate_key()
    with STMSaver.from_sqlite(sqlite_path, encryption_key=key, audit=True) as saver:
        saver.setup()
        run_graph(saver)
        entries = saver.audit_log(THREAD)
        assert entries
        assert all(e.thread_id == THREAD for e in entries)
    with sqlite3.connect(sqlite_path) as db:
        stored = [str(r[0]) for r in db.execute("SELECT entry FROM stm_audit")]
    assert stored
    assert all(s.startswith('"$stm1:') for s in stored)
    assert all("run_id_from" not in s for s in stored)
    with STMSaver.from_sqlite(sqlite_path, encryption_key=key, audit=True) as saver:
        assert [e.run_id for e in saver.audit_log(THREAD)] == [e.run_id for e in entries]


def test_export_is_plaintext_and_import_seals_again() -> None:
    """export_thread returns the decrypted document; import_thread into an encrypted
    saver stores it sealed."""
    source = STMSaver(InMemorySaver(), encryption_key=generate_key())
    run_graph(source)
    document = source.export_thread(THREAD)
    assert MESSAGE in repr(document)
    inner = InMemorySaver()
    target = STMSaver(inner, encryption_key=generate_key())
    target.import_thread(document)
    assert_absent(memory_storage(inner), "after import")
    values = build_graph(target).get_state(read_config()).values
    assert values["messages"][0].content == MESSAGE
    assert values["goal"] == GOAL
