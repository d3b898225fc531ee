"""The audit trail end to end: compiled StateGraphs over STMState whose nodes call
``build_context``, interrupted and resumed (also from a new process), on InMemorySaver,
a SQLite file and PostgreSQL, sync and async.

The saver under test is :class:`AuditedSaver`: ``STMSaver`` plus the wiring that
``STMSaver(..., audit=True)`` adds: an ``AuditTrail`` on the saver, the audit entry's
statements chained after the plan of the checkpoint's write (``put``/``aput``), and the
task-writes plan after the guard of ``put_writes``/``aput_writes``.

Run ``python -m tests.integration.test_audit SQLITE_PATH THREAD`` to resume a paused
thread from a brand-new process (it prints the run's final AI message id).
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import RunControl, Runtime
from langgraph.types import Command, interrupt

from langgraph_stm import STMSaver, STMState, build_context
from langgraph_stm.checkpoint._audit import AuditEntry
from langgraph_stm.checkpoint._tables import Plan, Stmt
from langgraph_stm.errors import ThreadDeletedError

REPO = Path(__file__).resolve().parents[2]
MARK = "ZEBRA"
"""Every text of the test threads contains it; no audit row may."""


# -- the saver: STMSaver with the audit trail on by default -----------------------------------
class AuditedSaver(STMSaver):
    """``STMSaver(..., audit=True)``, so the constructors below default to auditing."""

    def __init__(
        self, inner: BaseCheckpointSaver[Any], /, *, audit: bool = True, **options: Any
    ) -> None:
        super().__init__(inner, audit=audit, **options)


@pytest.fixture(autouse=True, scope="module")
def _stop_listening() -> Iterator[None]:
    """Savers of this module hold audit trails: collect them after the module, so later
    tests run with no audited saver in the process."""
    yield
    gc.collect()


@contextmanager
def open_saver(backend: str, target: str, *, audit: bool = True) -> Iterator[AuditedSaver]:
    """A set-up audited saver: ``memory``, ``sqlite`` (``target`` a path) or ``postgres``."""
    if backend == "memory":
        saver = AuditedSaver(InMemorySaver(), audit=audit)
        saver.setup()
        yield saver
        return
    opener = AuditedSaver.from_sqlite if backend == "sqlite" else AuditedSaver.from_postgres
    with opener(target, audit=audit) as opened:
        assert isinstance(opened, AuditedSaver)
        opened.setup()
        yield opened


@asynccontextmanager
async def aopen_saver(backend: str, target: str) -> AsyncIterator[AuditedSaver]:
    """The async twin of :func:`open_saver` (AsyncSqliteSaver, AsyncPostgresSaver)."""
    if backend == "memory":
        saver = AuditedSaver(InMemorySaver())
        await saver.asetup()
        yield saver
        return
    opener = (
        AuditedSaver.from_async_sqlite if backend == "sqlite" else AuditedSaver.from_async_postgres
    )
    async with opener(target) as opened:
        assert isinstance(opened, AuditedSaver)
        await opened.asetup()
        yield opened


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """``(backend, target)`` of each backend."""
    name = str(request.param)
    if name == "postgres":
        return name, str(request.getfixturevalue("postgres_uri"))
    return name, str(tmp_path / "audit.sqlite")


# -- the graph -----------------------------------------------------------------------------
class Seen:
    """The model inputs the nodes built, to check the text did reach the model."""

    def __init__(self) -> None:
        self.inputs: list[list[BaseMessage]] = []

    def text(self) -> str:
        return "\n".join(str(m.content) for messages in self.inputs for m in messages)


def build_graph(saver: BaseCheckpointSaver[Any], seen: Seen | None = None) -> Any:
    """agent -> (tool call) approve [interrupt] -> tool -> agent -> END.

    The agent builds its context with ``build_context`` and, on the first turn, asks for
    a tool; ``approve`` builds the reviewer's context (the pending unit is in it), then
    waits in ``interrupt()``; ``tool`` answers the call.
    """
    seen = seen if seen is not None else Seen()

    def agent(state: STMState) -> dict[str, Any]:
        context = build_context(state, max_tokens=4000, system_prompt=f"{MARK}-SYSTEM agent")
        seen.inputs.append(context.messages)
        turn = sum(isinstance(m, AIMessage) for m in state["messages"])
        if not any(isinstance(m, ToolMessage) for m in state["messages"]):
            call = {"name": "lookup", "args": {"q": f"{MARK}-TOOLARG"}, "id": f"call-{turn}"}
            return {
                "messages": [AIMessage(f"{MARK}-AI asking", id=f"ai-{turn}", tool_calls=[call])]
            }
        return {"messages": [AIMessage(f"{MARK}-AI done", id=f"ai-{turn}")]}

    def approve(state: STMState) -> dict[str, Any]:
        context = build_context(state, max_tokens=4000)
        seen.inputs.append(context.messages)
        answer = interrupt({"ask": "run the tool?"})
        return {"goal": f"{MARK}-GOAL approved {answer}"}

    def tool(state: STMState) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        call = last.tool_calls[0]
        result = ToolMessage(f"{MARK}-TOOLRESULT", tool_call_id=call["id"], id=f"tm-{call['id']}")
        return {"messages": [result]}

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


def config(thread: str, **extra: Any) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "owner": "ann"}, **extra}  # type: ignore[typeddict-item]


def first_input() -> dict[str, Any]:
    """A first turn whose every field carries text (all of it marked)."""
    return {
        "messages": [HumanMessage(f"{MARK}-HUMAN refund order 42", id="h1")],
        "goal": f"{MARK}-GOAL refund order 42",
        "constraints": [
            {"id": "c1", "text": f"{MARK}-CONSTRAINT at most 100 EUR"},
            {"id": "c2", "text": f"{MARK}-CONSTRAINT ask first", "status": "pending"},
        ],
        "plan": [
            {"id": "s1", "task": f"{MARK}-PLAN look up", "status": "done"},
            {"id": "s2", "task": f"{MARK}-PLAN refund"},
        ],
        "last_error": {"message": f"{MARK}-ERROR HTTP 503", "recovery": f"{MARK}-ERROR retry"},
        "summary": {"text": f"{MARK}-SUMMARY the user asked before", "version": 1},
        "artifacts": [
            {"id": "art-1", "kind": "file", "summary": f"{MARK}-ARTIFACT invoice", "uri": None}
        ],
    }


def checkpoint_id(graph: Any, thread: str) -> str:
    return str(graph.get_state(config(thread)).config["configurable"]["checkpoint_id"])


async def acheckpoint_id(graph: Any, thread: str) -> str:
    snapshot = await graph.aget_state(config(thread))
    return str(snapshot.config["configurable"]["checkpoint_id"])


def audit_rows(saver: STMSaver, thread: str | None = None) -> list[tuple[Any, ...]]:
    """Every column of every audit row (of ``thread``, or all)."""

    def select() -> Plan:
        sql = "SELECT * FROM stm_audit"
        if thread is None:
            rows = yield Stmt(sql)
        else:
            rows = yield Stmt(f"{sql} WHERE thread_id = {saver._tables.dialect.param}", [thread])
        return [tuple(r) for r in rows or []]

    rows: list[tuple[Any, ...]] = saver._sync_driver().read(select())
    return rows


def assert_interrupted_then_resumed(
    entries: list[AuditEntry], interrupted_at: str, final: str
) -> None:
    """Two runs: the first started the thread and paused at ``interrupted_at``; the
    second resumed from there and ended at ``final``."""
    assert len(entries) == 2
    first, second = entries
    assert first.run_id != second.run_id
    assert (first.resumed_from, first.checkpoint_id) == (None, interrupted_at)
    assert (second.resumed_from, second.checkpoint_id) == (interrupted_at, final)
    assert (first.owner, second.owner) == ("ann", "ann")
    assert (first.source, second.source) == ("input", "loop")
    assert first.recorded_at <= second.recorded_at
    assert first.run_id_from == second.run_id_from == "minted"

    # run 1: the agent's context, then the reviewer's (the pending unit in it)
    assert [c["node"] for c in first.contexts] == ["agent", "approve"]
    agent, review = first.contexts
    assert agent["goal"]
    assert agent["last_error"]
    assert agent["system_message"]
    assert agent["constraints"] == [
        {"id": "c1", "status": "confirmed"},
        {"id": "c2", "status": "pending"},
    ]
    assert agent["plan"] == [{"id": "s1", "status": "done"}, {"id": "s2", "status": "pending"}]
    assert agent["summary_version"] == 1
    assert agent["artifact_ids"] == ["art-1"]
    assert agent["pending_unit"] is None
    assert (agent["messages_included"], agent["messages_omitted"]) == (1, 0)
    assert 0 < agent["tokens"] <= agent["max_tokens"] == 4000
    assert review["pending_unit"] == {"ai_message_id": "ai-0", "tool_call_ids": ["call-0"]}
    assert not review["system_message"]
    assert first.sections == review
    assert first.context_calls == 2

    # run 2: the reviewer's node re-ran (LangGraph re-runs an interrupted node), then the
    # agent saw the answered call
    assert [c["node"] for c in second.contexts] == ["approve", "agent"]
    assert second.contexts[0]["pending_unit"] == review["pending_unit"]
    assert second.sections["pending_unit"] is None
    assert second.sections["messages_included"] == 3  # human, AI with call, tool result
    assert second.context_calls == 2


def assert_no_text(rows: list[tuple[Any, ...]]) -> None:
    assert rows
    dump = "\n".join(repr(value) for row in rows for value in row)
    assert MARK not in dump
    for word in ("refund", "invoice", "HTTP 503", "asking", "TOOLRESULT"):
        assert word not in dump


# -- tests -----------------------------------------------------------------------------------
class TestRuns:
    def test_interrupted_then_resumed_run(self, backend: tuple[str, str]) -> None:
        """One entry per run, naming the checkpoint it resumed from and what it injected."""
        with open_saver(*backend) as saver:
            seen = Seen()
            graph = build_graph(saver, seen)
            graph.invoke(first_input(), config("t1"))
            paused = checkpoint_id(graph, "t1")
            assert graph.get_state(config("t1")).interrupts
            graph.invoke(Command(resume="yes"), config("t1"))
            assert graph.get_state(config("t1")).next == ()
            assert_interrupted_then_resumed(
                saver.audit_log("t1"), paused, checkpoint_id(graph, "t1")
            )
            assert MARK in seen.text()  # the text did reach the model input

    def test_no_message_text_in_the_audit_table(self, backend: tuple[str, str]) -> None:
        """Every column of every row is free of the text of messages and fields."""
        with open_saver(*backend) as saver:
            graph = build_graph(saver)
            graph.invoke(first_input(), config("t1"))
            graph.invoke(Command(resume=f"{MARK}-RESUME"), config("t1"))
            graph.invoke({"messages": [HumanMessage(f"{MARK}-HUMAN again", id="h2")]}, config("t1"))
            rows = audit_rows(saver)
            assert len(rows) == 3
            assert_no_text(rows)

    def test_audit_off_writes_no_rows(self, backend: tuple[str, str]) -> None:
        with open_saver(*backend, audit=False) as saver:
            graph = build_graph(saver)
            graph.invoke(first_input(), config("t1"))
            graph.invoke(Command(resume="yes"), config("t1"))
            assert audit_rows(saver) == []
            assert saver.audit_log("t1") == []

    def test_entries_are_deleted_with_the_thread(self, backend: tuple[str, str]) -> None:
        with open_saver(*backend) as saver:
            graph = build_graph(saver)
            for thread in ("t1", "t2"):
                graph.invoke(first_input(), config(thread))
                graph.invoke(Command(resume="yes"), config(thread))
            saver.delete_thread("t1")
            assert audit_rows(saver, "t1") == []
            assert saver.audit_log("t1") == []
            assert len(saver.audit_log("t2")) == 2
            # a new run on the same id starts a new trail
            graph.invoke(first_input(), config("t1"))
            [entry] = saver.audit_log("t1")
            assert entry.resumed_from is None

    def test_a_late_write_after_deletion_leaves_no_entry(self, backend: tuple[str, str]) -> None:
        """A worker still holding the deleted thread's config is refused before any
        audit row is written."""
        with open_saver(*backend) as saver:
            graph = build_graph(saver)
            graph.invoke(first_input(), config("t1"))
            old = graph.get_state(config("t1")).config
            saver.delete_thread("t1")
            late: Any = {
                "configurable": {
                    **old["configurable"],
                    "__pregel_runtime": Runtime(control=RunControl()),
                }
            }
            with pytest.raises(ThreadDeletedError):
                saver.put_writes(late, [("goal", "late")], "task-1")
            assert audit_rows(saver, "t1") == []

    def test_a_continued_run_names_the_checkpoint_it_continued_from(
        self, backend: tuple[str, str]
    ) -> None:
        with open_saver(*backend) as saver:
            graph = build_graph(saver)
            graph.invoke(first_input(), config("t1"))
            graph.invoke(Command(resume="yes"), config("t1"))
            done = checkpoint_id(graph, "t1")
            graph.invoke({"messages": [HumanMessage("thanks", id="h2")]}, config("t1"))
            entries = saver.audit_log("t1")
            assert len(entries) == 3
            assert entries[2].resumed_from == done
            assert entries[2].source == "input"
            assert entries[2].checkpoint_id == checkpoint_id(graph, "t1")
            assert entries[2].sections["messages_included"] == 5

    def test_a_resume_that_pauses_again_writes_no_checkpoint_but_has_its_entry(
        self, backend: tuple[str, str]
    ) -> None:
        def ask(state: STMState) -> dict[str, Any]:
            build_context(state, max_tokens=500)
            first = interrupt("first?")
            second = interrupt("second?")
            return {"goal": f"{first} {second}"}

        with open_saver(*backend) as saver:
            graph = (StateGraph(STMState).add_node("ask", ask).add_edge(START, "ask")).compile(
                checkpointer=saver
            )
            graph.invoke({"messages": [HumanMessage("hi", id="h1")]}, config("t1"))
            paused = checkpoint_id(graph, "t1")
            graph.invoke(Command(resume="a"), config("t1"))
            assert checkpoint_id(graph, "t1") == paused  # paused again, nothing written
            graph.invoke(Command(resume="b"), config("t1"))
            assert graph.get_state(config("t1")).values["goal"] == "a b"
            first, second, third = saver.audit_log("t1")
            assert (first.resumed_from, first.checkpoint_id) == (None, paused)
            assert (second.resumed_from, second.checkpoint_id) == (paused, None)
            assert (third.resumed_from, third.checkpoint_id) == (paused, checkpoint_id(graph, "t1"))
            assert [e.context_calls for e in (first, second, third)] == [1, 1, 1]
            assert second.sections["node"] == "ask"

    def test_update_state_is_no_run(self, backend: tuple[str, str]) -> None:
        with open_saver(*backend) as saver:
            graph = build_graph(saver)
            graph.invoke(first_input(), config("t1"))
            graph.update_state(config("t1"), {"goal": "changed by an operator"})
            assert len(saver.audit_log("t1")) == 1


class TestRunIds:
    def test_the_callers_run_id(self) -> None:
        with open_saver("memory", "") as saver:
            graph = build_graph(saver)
            graph.invoke(first_input(), config("t1", run_id="00000000-0000-0000-0000-000000000001"))
            graph.invoke(Command(resume="yes"), config("t1", metadata={"run_id": "server-run-2"}))
            first, second = saver.audit_log("t1")
            assert (first.run_id, first.run_id_from) == (
                "00000000-0000-0000-0000-000000000001",
                "config",
            )
            assert (second.run_id, second.run_id_from) == ("server-run-2", "metadata")
            assert second.resumed_from == first.checkpoint_id

    def test_a_run_id_seen_again_continues_its_entry(self) -> None:
        """A server re-entering a run (same run id) adds to the run's entry."""
        with open_saver("memory", "") as saver:
            graph = build_graph(saver)
            same = config("t1", metadata={"run_id": "run-1"})
            graph.invoke(first_input(), same)
            paused = checkpoint_id(graph, "t1")
            graph.invoke(Command(resume="yes"), same)
            [entry] = saver.audit_log("t1")
            assert entry.resumed_from is None
            assert entry.checkpoint_id == checkpoint_id(graph, "t1") != paused
            assert [c["node"] for c in entry.contexts] == ["agent", "approve", "approve", "agent"]

    def test_durability_exit_and_subgraphs(self) -> None:
        """Calls of every step, and of a subgraph's nodes, join the run's one write."""

        def inner(state: STMState) -> dict[str, Any]:
            build_context(state, max_tokens=500)
            return {"messages": [AIMessage("inner", id=f"in-{len(state['messages'])}")]}

        def outer(state: STMState) -> dict[str, Any]:
            build_context(state, max_tokens=500)
            return {"messages": [AIMessage("outer", id=f"out-{len(state['messages'])}")]}

        sub = StateGraph(STMState).add_node("inner", inner).add_edge(START, "inner").compile()
        with open_saver("memory", "") as saver:
            graph = (
                StateGraph(STMState)
                .add_node("outer", outer)
                .add_node("sub", sub)
                .add_edge(START, "outer")
                .add_edge("outer", "sub")
                .compile(checkpointer=saver)
            )
            graph.invoke({"messages": [HumanMessage("hi", id="h1")]}, config("t1"))
            graph.invoke(
                {"messages": [HumanMessage("again", id="h2")]}, config("t1"), durability="exit"
            )
            first, second = saver.audit_log("t1")
            assert [c["node"] for c in first.contexts] == ["outer", "inner"]
            assert [c["node"] for c in second.contexts] == ["outer", "inner"]
            assert second.resumed_from == first.checkpoint_id


class TestAsync:
    @pytest.mark.parametrize(
        "name", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
    )
    async def test_interrupted_then_resumed_run(
        self, name: str, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        target = (
            str(request.getfixturevalue("postgres_uri"))
            if name == "postgres"
            else str(tmp_path / "audit.sqlite")
        )
        async with aopen_saver(name, target) as saver:
            graph = build_graph(saver)
            await graph.ainvoke(first_input(), config("t1"))
            paused = await acheckpoint_id(graph, "t1")
            await graph.ainvoke(Command(resume="yes"), config("t1"))
            assert_interrupted_then_resumed(
                await saver.aaudit_log("t1"), paused, await acheckpoint_id(graph, "t1")
            )
            if name != "memory":
                # sync reads of an async saver run on its loop, from another thread
                entries = await asyncio.to_thread(saver.audit_log, "t1")
                assert entries == await saver.aaudit_log("t1")
            rows = [
                tuple(r)
                for r in await saver._aread(_select_all())  # every column, every row
            ]
            assert_no_text(rows)
            await saver.adelete_thread("t1")
            assert await saver.aaudit_log("t1") == []


def _select_all() -> Plan:
    rows = yield Stmt("SELECT * FROM stm_audit")
    return rows or []


class TestNewProcess:
    def test_resumed_in_a_new_process(self, tmp_path: Path) -> None:
        """Paused here, resumed by another process: the resumed run's entry is there."""
        path = tmp_path / "audit.sqlite"
        with open_saver("sqlite", str(path)) as saver:
            graph = build_graph(saver)
            graph.invoke(first_input(), config("t1"))
            paused = checkpoint_id(graph, "t1")
        done = subprocess.run(
            [sys.executable, "-m", "tests.integration.test_audit", str(path), "t1"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        assert done.stdout.strip() == "ai-1"
        with open_saver("sqlite", str(path)) as saver:
            graph = build_graph(saver)
            assert_interrupted_then_resumed(
                saver.audit_log("t1"), paused, checkpoint_id(graph, "t1")
            )


def resume_in_this_process(path: str, thread: str) -> str:
    with open_saver("sqlite", path) as saver:
        graph = build_graph(saver)
        graph.invoke(Command(resume="yes"), config(thread))
        last = graph.get_state(config(thread)).values["messages"][-1]
        return str(last.id)


if __name__ == "__main__":
    print(resume_in_this_process(sys.argv[1], sys.argv[2]))
