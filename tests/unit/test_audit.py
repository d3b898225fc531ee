"""The audit trail's parts without a saver: what a context injected
(``_audit_context``), the process-level log, and the entry plans (``checkpoint._audit``)
run against a bare SQLite database."""

from __future__ import annotations

import gc
import json
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.runtime import RunControl, Runtime

import langgraph_stm._context as context_module
from langgraph_stm import STMSaver, STMState, build_context
from langgraph_stm import _audit_context as ac
from langgraph_stm._audit_context import (
    MAX_IDS,
    InjectionLog,
    describe_context,
    explicit_run_id,
    record_injection,
    run_key,
)
from langgraph_stm.checkpoint._audit import AuditEntry, AuditTrail, chain, owner_of, read_plan
from langgraph_stm.checkpoint._sqlite import DIALECT
from langgraph_stm.checkpoint._tables import Plan, Stmt, run
from langgraph_stm.errors import StorageError

MARK = "ZEBRA"
SCHEMA = (
    "CREATE TABLE stm_audit (thread_id TEXT NOT NULL, run_id TEXT NOT NULL, "
    "recorded_at REAL NOT NULL, checkpoint_id TEXT, resumed_from TEXT, owner TEXT, "
    "entry TEXT NOT NULL, PRIMARY KEY (thread_id, run_id))"
)


def full_state() -> dict[str, Any]:
    return {
        "messages": [
            SystemMessage(f"{MARK} system", id="sys"),
            HumanMessage(f"{MARK} first question", id="h1"),
            AIMessage(f"{MARK} first answer", id="a1"),
            SystemMessage(f"{MARK} a note", id="note"),
            HumanMessage(f"{MARK} refund order 42", id="h2"),
        ],
        "goal": f"{MARK} refund order 42",
        "constraints": [
            {"id": "c1", "text": f"{MARK} at most 100 EUR", "status": "confirmed"},
            {"id": "c2", "text": f"{MARK} ask first", "status": "pending"},
        ],
        "plan": [
            {"id": "s1", "task": f"{MARK} look up", "status": "done"},
            {"id": "s2", "task": f"{MARK} refund", "status": "in_progress"},
        ],
        "last_error": {
            "message": f"{MARK} HTTP 503",
            "recovery": None,
            "step_id": "s2",
            "at": None,
        },
        "summary": {"text": f"{MARK} earlier talk", "version": 3},
        "artifacts": [
            {"id": "art-1", "kind": "file", "summary": f"{MARK} invoice", "uri": "s3://x"},
            {"id": "art-2", "kind": "table", "summary": f"{MARK} orders", "uri": None},
        ],
    }


def paused_state() -> dict[str, Any]:
    call = {"name": "refund", "args": {"order": f"{MARK}-42"}, "id": "call-1"}
    other = {"name": "notify", "args": {"text": MARK}, "id": "call-2"}
    return {
        "messages": [
            HumanMessage(f"{MARK} refund", id="h1"),
            AIMessage(f"{MARK} on it", id="ai-1", tool_calls=[call, other]),
            ToolMessage(f"{MARK} notified", tool_call_id="call-2", id="tm-2"),
        ],
        "goal": f"{MARK} goal",
    }


def run_config(
    thread: str = "t1",
    *,
    control: RunControl | None = None,
    parent: str | None = "cp-0",
    ns: str = "",
    **extra: Any,
) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if parent is not None:
        configurable["checkpoint_id"] = parent
    configurable["__pregel_runtime"] = Runtime(control=control or RunControl())
    return {"configurable": configurable, **extra}  # type: ignore[typeddict-item]


def checkpoint(checkpoint_id: str) -> Checkpoint:
    return {"id": checkpoint_id}  # type: ignore[typeddict-item]


def metadata(source: str = "loop", step: int = 0) -> CheckpointMetadata:
    return {"source": source, "step": step}  # type: ignore[typeddict-item]


class Database:
    """A bare SQLite database with ``stm_audit`` that runs plans and logs statements."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute(SCHEMA)
        self.sql: list[str] = []

    def __call__(self, plan: Plan | None) -> Any:
        assert plan is not None

        def query(sql: str, params: Any) -> list[Any]:
            self.sql.append(sql)
            return self.conn.execute(sql, params).fetchall()

        def many(sql: str, rows: Any) -> None:
            self.sql.append(sql)
            self.conn.executemany(sql, rows)

        return run(plan, query, many)

    def entries(self, thread: str = "t1") -> list[AuditEntry]:
        result: list[AuditEntry] = self(read_plan(DIALECT, thread))
        return result

    def rows(self) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.conn.execute("SELECT * FROM stm_audit")]


@pytest.fixture
def db() -> Database:
    return Database()


@pytest.fixture
def log() -> InjectionLog:
    return InjectionLog()


@pytest.fixture
def trail(log: InjectionLog) -> AuditTrail:
    return AuditTrail(DIALECT, log=log, listen=False)


@pytest.fixture
def listening() -> Iterator[None]:
    """An audited saver exists in the process for the test (the global log is emptied)."""
    ac.INJECTIONS.clear()
    ac.listen()
    try:
        yield
    finally:
        ac.unlisten()
        ac.INJECTIONS.clear()


def sections(**fields: Any) -> ac.InjectedSections:
    return fields  # type: ignore[return-value]


# -- what a context injected ---------------------------------------------------------------
class TestDescribeContext:
    def test_every_section_by_id_flag_and_count(self) -> None:
        state = full_state()
        result = build_context(state, max_tokens=4000, system_prompt="Be careful.")
        got = describe_context(result, state)
        assert got == {
            "node": None,
            "step": None,
            "system_message": True,
            "goal": True,
            "constraints": [{"id": "c1", "status": "confirmed"}, {"id": "c2", "status": "pending"}],
            "plan": [{"id": "s1", "status": "done"}, {"id": "s2", "status": "in_progress"}],
            "last_error": True,
            "summary_version": 3,
            "artifact_ids": ["art-1", "art-2"],
            "pending_unit": None,
            "messages_included": 4,  # h1, a1, the note (as a HumanMessage), h2
            "messages_omitted": 0,
            "tokens": result.tokens,
            "max_tokens": 4000,
            "over_budget": False,
        }

    def test_no_text_of_any_message_or_field(self) -> None:
        for state in (full_state(), paused_state()):
            result = build_context(state, max_tokens=4000)
            assert MARK in "".join(str(m.content) for m in result.messages)
            assert MARK not in json.dumps(describe_context(result, state))

    def test_the_pending_unit_names_its_open_calls(self) -> None:
        state = paused_state()
        got = describe_context(build_context(state, max_tokens=4000), state)
        assert got["pending_unit"] == {"ai_message_id": "ai-1", "tool_call_ids": ["call-1"]}
        assert got["messages_included"] == 3

    def test_an_answered_unit_is_not_pending(self) -> None:
        state = paused_state()
        state["messages"].append(ToolMessage("done", tool_call_id="call-1", id="tm-1"))
        assert (
            describe_context(build_context(state, max_tokens=4000), state)["pending_unit"] is None
        )

    def test_what_the_budget_left_out(self) -> None:
        state = full_state()
        mandatory = build_context(state, max_tokens=1, on_overflow="keep_mandatory").tokens
        result = build_context(state, max_tokens=mandatory + 3)
        got = describe_context(result, state)
        assert got["summary_version"] is None
        assert got["artifact_ids"] == []
        assert got["messages_omitted"] == len(result.omitted_message_ids) > 0
        assert got["messages_included"] + got["messages_omitted"] == 4

    def test_over_budget(self) -> None:
        state = full_state()
        result = build_context(state, max_tokens=1, on_overflow="keep_mandatory")
        got = describe_context(result, state)
        assert got["over_budget"]
        assert got["goal"]
        assert (got["summary_version"], got["artifact_ids"]) == (None, [])

    def test_no_state_block_no_sections(self) -> None:
        state = {"messages": [HumanMessage("hi", id="h1")], "plan": [], "goal": ""}
        got = describe_context(build_context(state, max_tokens=100), state)
        assert (got["goal"], got["constraints"], got["plan"], got["last_error"]) == (
            False,
            [],
            [],
            False,
        )
        assert not got["system_message"]
        assert got["messages_included"] == 1

    def test_long_lists_are_capped(self) -> None:
        state = {
            "messages": [HumanMessage("hi", id="h1")],
            "plan": [{"id": f"s{i}", "task": "x", "status": "pending"} for i in range(MAX_IDS + 5)],
        }
        got = describe_context(build_context(state, max_tokens=100_000), state)
        assert len(got["plan"]) == MAX_IDS
        assert got.get("truncated") == ["plan"]

    def test_the_node_and_step_come_from_the_config(self) -> None:
        state = {"messages": [HumanMessage("hi", id="h1")]}
        config: RunnableConfig = {"metadata": {"langgraph_node": "agent", "langgraph_step": 4}}
        got = describe_context(build_context(state, max_tokens=100), state, config)
        assert (got["node"], got["step"]) == ("agent", 4)


# -- which run -----------------------------------------------------------------------------
class TestRunIds:
    def test_explicit_run_id_in_the_order_the_savers_store_it(self) -> None:
        config: Any = {
            "run_id": "lc",
            "metadata": {"run_id": "meta"},
            "configurable": {"run_id": "conf"},
        }
        assert explicit_run_id(config, {"run_id": "arg"}) == ("arg", "metadata")
        assert explicit_run_id(config) == ("meta", "metadata")
        del config["metadata"]
        assert explicit_run_id(config) == ("conf", "configurable")
        del config["configurable"]
        assert explicit_run_id(config) == ("lc", "config")
        empty: Any = {"run_id": "", "metadata": {"run_id": True}}
        assert explicit_run_id(empty) is None

    def test_a_run_is_its_invocations_run_control(self) -> None:
        control = RunControl()
        assert run_key(run_config(control=control)) == ("t1", control)
        assert run_key(run_config(control=control)) != run_key(run_config())

    def test_without_a_run_control_an_explicit_run_id_keys_the_run(self) -> None:
        bare: Any = {"configurable": {"thread_id": "t1", "__pregel_runtime": Runtime()}}
        assert run_key(bare) is None
        with_id: Any = {**bare, "run_id": "r1"}
        assert run_key(with_id) == ("t1", ("run_id", "r1"))
        info = Runtime().override(execution_info=_info("r2"))
        in_node: Any = {"configurable": {"thread_id": "t1", "__pregel_runtime": info}}
        assert run_key(in_node) == ("t1", ("run_id", "r2"))

    def test_no_thread_no_run(self) -> None:
        assert run_key(run_config(thread="")) is None
        assert run_key({}) is None


def _info(run_id: str) -> Any:
    from langgraph.runtime import ExecutionInfo

    return ExecutionInfo(checkpoint_id="c", checkpoint_ns="", task_id="x", run_id=run_id)


# -- the log -------------------------------------------------------------------------------
class TestInjectionLog:
    def test_bounded_in_runs_and_calls(self) -> None:
        log = InjectionLog(max_runs=3, max_calls=2)
        for i in range(5):
            log.record(("t", i), sections(n=i))
        assert log.keys() == [("t", 2), ("t", 3), ("t", 4)]
        log.record(("t", 2), sections(n=20))  # touched: now the newest
        log.record(("t", 5), sections(n=5))
        assert log.keys() == [("t", 4), ("t", 2), ("t", 5)]
        for n in range(3):
            log.record(("t", 5), sections(n=n))
        record = log.snapshot(("t", 5))
        assert record.total == 4
        assert [dict(c) for c in record.contexts] == [{"n": 1}, {"n": 2}]

    def test_thread_safe(self) -> None:
        log = InjectionLog(max_runs=8, max_calls=10)
        barrier = threading.Barrier(8)

        def work(worker: int) -> None:
            barrier.wait()
            for i in range(500):
                log.record(("t", i % 4), sections(worker=worker, i=i))

        threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        records = [log.snapshot(("t", k)) for k in range(4)]
        assert [r.total for r in records] == [1000] * 4
        assert all(r.version == 1000 and len(r.contexts) == 10 for r in records)


# -- recording from build_context ----------------------------------------------------------
class TestRecordInjection:
    def test_nothing_is_looked_up_when_no_saver_audits(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(ac, "_listeners", 0)
        looked_up: list[bool] = []
        monkeypatch.setattr(ac, "_current_config", lambda: looked_up.append(True))
        result = build_context({"messages": [HumanMessage("hi", id="h1")]}, max_tokens=50)
        record_injection(None, result, {})
        assert looked_up == []

    @pytest.mark.usefixtures("listening")
    def test_outside_a_graph_run_nothing_is_recorded(self) -> None:
        build_context({"messages": [HumanMessage("hi", id="h1")]}, max_tokens=50)
        assert ac.INJECTIONS.keys() == []

    @pytest.mark.usefixtures("listening")
    def test_never_raises(self, monkeypatch: pytest.MonkeyPatch) -> None:
        record_injection(run_config(), object(), {})  # type: ignore[arg-type]

        def broken(*args: Any) -> None:
            raise RuntimeError("log is down")

        monkeypatch.setattr(ac.INJECTIONS, "record", broken)
        result = build_context({"messages": [HumanMessage("hi", id="h1")]}, max_tokens=50)
        record_injection(run_config(), result, {})
        assert ac.INJECTIONS.keys() == []

    def test_build_context_records_each_call_once(self, monkeypatch: pytest.MonkeyPatch) -> None:
        calls: list[tuple[Any, Any, Any]] = []
        monkeypatch.setattr(context_module, "record_injection", lambda *a: calls.append(a))
        state = full_state()
        first = build_context(state, max_tokens=4000)
        second = build_context(state, max_tokens=1, on_overflow="keep_mandatory")
        assert [(c[0], c[1]) for c in calls] == [(None, first), (None, second)]
        assert all(c[2]["goal"] == state["goal"] for c in calls)

    @pytest.mark.usefixtures("listening")
    def test_inside_a_graph_run_the_node_records_for_its_run(self) -> None:
        def agent(state: STMState) -> dict[str, Any]:
            build_context(state, max_tokens=500)
            return {"messages": [AIMessage("ok", id=f"a{len(state['messages'])}")]}

        graph = StateGraph(STMState).add_node("agent", agent).add_edge(START, "agent")
        app = graph.compile(checkpointer=STMSaver(InMemorySaver()))
        config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
        app.invoke({"messages": [HumanMessage(f"{MARK} hi", id="h1")], "goal": MARK}, config)
        app.invoke({"messages": [HumanMessage("again", id="h2")]}, config)
        keys = ac.INJECTIONS.keys()
        assert [k[0] for k in keys] == ["t1", "t1"]
        assert all(isinstance(k[1], RunControl) for k in keys)
        assert keys[0][1] is not keys[1][1]
        first = ac.INJECTIONS.snapshot(keys[0])
        assert first.total == 1
        [got] = first.contexts
        assert (got["node"], got["goal"], got["messages_included"]) == ("agent", True, 1)


# -- entry plans ---------------------------------------------------------------------------
class TestEntryPlan:
    def test_not_a_root_write_of_a_run(self, trail: AuditTrail) -> None:
        cp, md = checkpoint("cp-1"), metadata()
        assert trail.entry_plan(run_config(ns="sub:1"), cp, md) is None
        assert trail.entry_plan(run_config(thread=""), cp, md) is None
        assert trail.entry_plan({"configurable": {"thread_id": "t1"}}, cp, md) is None
        assert trail.entry_plan(run_config(), {}, md) is None  # type: ignore[typeddict-item]
        assert trail.writes_plan(run_config(ns="sub:1")) is None

    def test_first_write_inserts_later_writes_move_the_checkpoint(
        self, trail: AuditTrail, db: Database
    ) -> None:
        control = RunControl()
        first = run_config(control=control, parent=None)
        db(trail.entry_plan(first, checkpoint("cp-1"), metadata("input", -1), now=100.0))
        second = run_config(control=control, parent="cp-1")
        db(trail.entry_plan(second, checkpoint("cp-2"), metadata("loop", 0), now=200.0))
        [entry] = db.entries()
        assert (entry.resumed_from, entry.checkpoint_id) == (None, "cp-2")
        assert entry.recorded_at == datetime.fromtimestamp(100.0, UTC)
        assert (entry.source, entry.run_id_from, entry.sections, entry.context_calls) == (
            "input",
            "minted",
            {},
            0,
        )

    def test_the_entry_is_rewritten_only_when_calls_were_recorded(
        self, trail: AuditTrail, log: InjectionLog, db: Database
    ) -> None:
        control = RunControl()
        config = run_config(control=control)
        db(trail.entry_plan(config, checkpoint("cp-1"), metadata()))
        log.record(("t1", control), sections(node="agent"))
        db.sql.clear()
        db(trail.entry_plan(config, checkpoint("cp-2"), metadata()))
        db(trail.entry_plan(config, checkpoint("cp-3"), metadata()))
        assert ["entry = excluded.entry" in sql for sql in db.sql] == [True, False]
        [entry] = db.entries()
        assert entry.sections == {"node": "agent"}
        assert entry.checkpoint_id == "cp-3"

    def test_a_minted_run_id_reads_nothing_a_callers_is_read_once(
        self, trail: AuditTrail, db: Database
    ) -> None:
        control = RunControl()
        for parent, cp in (("cp-0", "cp-1"), ("cp-1", "cp-2")):
            db(trail.entry_plan(run_config(control=control, parent=parent), checkpoint(cp), {}))
        assert not any(sql.startswith("SELECT") for sql in db.sql)
        db.sql.clear()
        control = RunControl()
        for parent, cp in (("cp-2", "cp-3"), ("cp-3", "cp-4")):
            config = run_config(control=control, parent=parent, run_id="r-2")
            db(trail.entry_plan(config, checkpoint(cp), {}))
        assert [sql.split()[0] for sql in db.sql] == ["SELECT", "INSERT", "INSERT"]
        assert [(e.run_id, e.resumed_from) for e in db.entries()][-1] == ("r-2", "cp-2")

    def test_a_run_id_seen_again_continues_its_entry(self, db: Database) -> None:
        """Two processes (two logs) writing one run id: one entry with both calls."""
        for process, node in enumerate(("agent", "tools")):
            log = InjectionLog()
            trail = AuditTrail(DIALECT, log=log, listen=False)
            control = RunControl()
            config = run_config(control=control, parent=f"cp-{process}", metadata={"run_id": "r"})
            log.record(("t1", control), sections(node=node))
            db(trail.entry_plan(config, checkpoint(f"cp-{process + 1}"), metadata(str(process))))
        [entry] = db.entries()
        assert [c["node"] for c in entry.contexts] == ["agent", "tools"]
        assert (entry.context_calls, entry.source, entry.resumed_from) == (2, "0", "cp-0")
        assert entry.checkpoint_id == "cp-2"

    def test_an_unreadable_stored_entry_is_replaced_not_raised(
        self, trail: AuditTrail, log: InjectionLog, db: Database
    ) -> None:
        db.conn.execute(
            "INSERT INTO stm_audit VALUES ('t1', 'r', 1.0, 'cp-1', NULL, NULL, 'not json')"
        )
        control = RunControl()
        log.record(("t1", control), sections(node="agent"))
        config = run_config(control=control, run_id="r")
        db(trail.entry_plan(config, checkpoint("cp-2"), metadata()))
        [entry] = db.entries()
        assert entry.sections == {"node": "agent"}

    def test_an_unreadable_entry_fails_the_read(self, db: Database) -> None:
        db.conn.execute("INSERT INTO stm_audit VALUES ('t1', 'r', 1.0, NULL, NULL, NULL, '[1')")
        with pytest.raises(StorageError) as caught:
            db.entries()
        assert caught.value.thread_id == "t1"

    def test_the_checkpoint_never_steps_back(self, trail: AuditTrail, db: Database) -> None:
        control = RunControl()
        db(trail.entry_plan(run_config(control=control), checkpoint("cp-5"), metadata()))
        db(trail.entry_plan(run_config(control=control), checkpoint("cp-4"), metadata()))
        assert db.entries()[0].checkpoint_id == "cp-5"

    def test_owner_time_and_chain(self, trail: AuditTrail, db: Database) -> None:
        when = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
        tenant = run_config("t1")
        tenant["configurable"]["tenant"] = "acme"
        db(trail.entry_plan(tenant, checkpoint("cp-1"), metadata(), now=when))
        db(trail.entry_plan(run_config("t2"), checkpoint("cp-1"), metadata(), owner="ops"))
        db(trail.entry_plan(run_config("t3"), checkpoint("cp-1"), metadata()))
        owners = [db.entries(t)[0].owner for t in ("t1", "t2", "t3")]
        assert owners == ["acme", "ops", None]
        assert db.entries("t1")[0].recorded_at == when
        assert owner_of({"configurable": {"owner": "ann", "tenant": "acme"}}) == "ann"

        def one(value: str) -> Plan:
            yield Stmt("SELECT 1")
            return value

        assert db(chain(one("a"), None, one("b"))) == "a"


class TestWritesPlan:
    def test_nothing_new_nothing_written(
        self, trail: AuditTrail, log: InjectionLog, db: Database
    ) -> None:
        control = RunControl()
        config = run_config(control=control)
        db(trail.entry_plan(config, checkpoint("cp-1"), metadata("input", -1)))
        assert trail.writes_plan(config) is None
        log.record(("t1", control), sections(node="approve"))
        db(trail.writes_plan(config))  # the task that made the call paused: no checkpoint
        assert trail.writes_plan(config) is None
        [entry] = db.entries()
        assert (entry.checkpoint_id, entry.sections) == ("cp-1", {"node": "approve"})

    def test_a_resume_whose_first_write_is_its_resume_value(
        self, trail: AuditTrail, log: InjectionLog, db: Database
    ) -> None:
        control = RunControl()
        config = run_config(control=control, parent="cp-paused")
        db(trail.writes_plan(config, now=5.0))
        [entry] = db.entries()
        assert (entry.resumed_from, entry.checkpoint_id, entry.source) == ("cp-paused", None, None)
        log.record(("t1", control), sections(node="approve"))
        db(trail.entry_plan(config, checkpoint("cp-next"), metadata("loop", 3), now=6.0))
        [entry] = db.entries()
        assert (entry.resumed_from, entry.checkpoint_id, entry.source) == (
            "cp-paused",
            "cp-next",
            "loop",
        )
        assert entry.recorded_at == datetime.fromtimestamp(5.0, UTC)
        assert entry.sections == {"node": "approve"}

    def test_only_text_free_columns(
        self, trail: AuditTrail, log: InjectionLog, db: Database
    ) -> None:
        control = RunControl()
        state = full_state()
        config = run_config(control=control)
        log.record(("t1", control), describe_context(build_context(state, max_tokens=4000), state))
        db(trail.entry_plan(config, checkpoint("cp-1"), metadata()))
        assert MARK not in repr(db.rows())


class TestListening:
    def test_an_audit_trail_listens_while_it_lives(self) -> None:
        gc.collect()  # trails of earlier tests
        before = ac._listeners
        trail = AuditTrail(DIALECT)
        assert ac._listeners == before + 1
        assert ac.listening()
        del trail
        gc.collect()
        assert ac._listeners == before

    def test_unlisten_never_goes_below_zero(self) -> None:
        before = ac._listeners
        for _ in range(before + 2):
            ac.unlisten()
        assert ac._listeners == 0
        for _ in range(before):
            ac.listen()
