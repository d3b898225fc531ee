"""TrimNode in real graphs with approval interrupts, on a SQLite file and on PostgreSQL.

The resume happens in a brand-new Python process (``python -m tests.support.trim_graphs``)
that opens the same database, as a restarted worker would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command

from langgraph_stm import STMError, STMState, TrimNode, repair_history, validate_history
from langgraph_stm.errors import InvalidArgumentError, InvalidMessageError, ToolPairError
from tests.support.trim_graphs import (
    COUNTER,
    MAX_TOKENS,
    build_graph,
    config,
    dump,
    open_saver,
    seed_history,
)

REPO = Path(__file__).resolve().parents[2]


LAYOUTS = ["trim_first", "approve_first"]


def resume_in_new_process(
    target: str, thread: str, run_log: Path, decision: str, layout: str = "trim_first"
) -> list[Any]:
    """Resume the thread from a fresh interpreter; return its final messages as JSON."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "tests.support.trim_graphs", layout, target, thread]
    done = subprocess.run(
        [*command, str(run_log), decision],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: list[Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def approval_scenario(target: str, tmp_path: Path, layout: str) -> None:
    """Pause on approval over budget, resume elsewhere, check ids, runs and the pending call."""
    thread, run_log = "trip-1", tmp_path / "runs.log"
    cfg = config(thread, run_log)
    request = [*seed_history(), HumanMessage("book me a flight to Rome on Monday")]
    assert COUNTER(request) > MAX_TOKENS

    with open_saver(target) as saver:
        graph = build_graph(saver, layout)
        graph.invoke({"messages": request}, cfg)
        paused = graph.get_state(cfg)
        assert paused.next == ("approval",)
        before = dump(paused.values["messages"])
        pending = paused.values["messages"][-1]
        assert isinstance(pending, AIMessage)
        assert pending.tool_calls
        call_id = pending.tool_calls[0]["id"]
        assert paused.interrupts[0].value["ai_message_id"] == pending.id
        assert validate_history(paused.values["messages"]) == []
        if layout == "approve_first":
            # Paused over budget: trim has not run yet, it will on resume.
            assert COUNTER(paused.values["messages"]) > MAX_TOKENS
        else:
            # Trim ran while the call was pending: within budget, the call kept last.
            assert COUNTER(paused.values["messages"]) <= MAX_TOKENS
            assert len(before) < len(request) + 1
            # Moving out of the window is not deleting: the untrimmed state is in history.
            sizes = [len(s.values.get("messages", [])) for s in graph.get_state_history(cfg)]
            assert max(sizes) == len(request) + 1

    final = resume_in_new_process(target, thread, run_log, "approve", layout)

    # The approved tool ran exactly once, for the pending call.
    assert run_log.read_text().splitlines() == [call_id]
    # The pending AI message was never trimmed, and its result follows it.
    final_ids = [m["id"] for m in final]
    assert len(set(final_ids)) == len(final_ids)
    position = final_ids.index(pending.id)
    assert final[position + 1]["tool_call_id"] == call_id
    assert final[-1]["type"] == "ai"
    assert final[-1]["content"].startswith("Done: booked")
    with open_saver(target) as saver:
        graph = build_graph(saver, layout)
        snapshots = list(reversed(list(graph.get_state_history(cfg))))
        after_tools = next(
            dump(s.values["messages"])
            for s in snapshots
            if any(m.get("tool_call_id") == call_id for m in dump(s.values["messages"]))
        )
        # Right after the tools ran: every message is one read before the interrupt
        # (same id, same content, same order) plus the new result after the pending call.
        assert after_tools[-1]["tool_call_id"] == call_id
        assert after_tools[-2] == before[-1]
        kept = after_tools[:-1]
        by_id = {m["id"]: m for m in before}
        assert all(by_id[m["id"]] == m for m in kept)
        kept_ids = [m["id"] for m in kept]
        assert [m["id"] for m in before if m["id"] in set(kept_ids)] == kept_ids
        if layout == "trim_first":
            assert kept == before
            assert COUNTER(graph.get_state(cfg).values["messages"]) <= MAX_TOKENS
        else:
            # Trim ran on resume, with the call still unanswered: it fit the budget and
            # kept the pending call last.
            trimmed = next(s for s in snapshots if s.next == ("tools",)).values["messages"]
            assert COUNTER(trimmed) <= MAX_TOKENS
            assert trimmed[-1].id == pending.id


@pytest.fixture
def sqlite_target(sqlite_path: Path) -> str:
    """The SQLite file as a target string."""
    return str(sqlite_path)


class TestApprovalOnSqlite:
    """agent -> trim -> approval interrupt -> tools, resumed by a new process on SQLite."""

    @pytest.mark.parametrize("layout", LAYOUTS)
    def test_resume_in_new_process_runs_tool_once_and_keeps_ids(
        self, sqlite_target: str, tmp_path: Path, layout: str
    ) -> None:
        """The approved tool runs once; ids read before the interrupt survive unchanged."""
        approval_scenario(sqlite_target, tmp_path, layout)

    def test_rejection_answers_the_call_and_trims_nothing_pending(
        self, sqlite_target: str, tmp_path: Path
    ) -> None:
        """A rejected approval leaves a valid history: the call gets an error result."""
        cfg = config("trip-2", tmp_path / "runs.log")
        with open_saver(sqlite_target) as saver:
            graph = build_graph(saver)
            graph.invoke({"messages": [*seed_history(), HumanMessage("book Oslo")]}, cfg)
        final = resume_in_new_process(sqlite_target, "trip-2", tmp_path / "runs.log", "reject")
        assert not (tmp_path / "runs.log").exists()
        assert final[-2]["type"] == "tool"
        assert final[-1]["content"] == "Done: rejected by the user"

    def test_ids_are_stable_across_three_interrupt_resume_cycles(
        self, sqlite_target: str, tmp_path: Path
    ) -> None:
        """Messages created without ids keep the ids LangGraph gave them, with no duplicates."""
        cfg = config("trip-3", tmp_path / "runs.log")
        id_of: dict[tuple[Any, ...], str] = {}  # message identity (content) -> id
        first_read: dict[tuple[Any, ...], str] = {}
        reads = 0
        with open_saver(sqlite_target) as saver:
            graph = build_graph(saver)
            for cycle in range(3):
                earlier = seed_history(5) if cycle == 0 else []
                request = [*earlier, HumanMessage(f"book trip {cycle}")]
                assert all(m.id is None for m in request)
                graph.invoke({"messages": request}, cfg)
                paused = graph.get_state(cfg).values["messages"]
                assert graph.get_state(cfg).next == ("approval",)
                graph.invoke(Command(resume="approve"), cfg)
                now = graph.get_state(cfg).values["messages"]
                for snapshot in (paused, now, graph.get_state(cfg).values["messages"]):
                    reads += 1
                    snapshot_ids = [m.id for m in snapshot]
                    keys = [identity(m) for m in snapshot]
                    assert None not in snapshot_ids
                    assert len(set(snapshot_ids)) == len(snapshot_ids)  # no duplicate ids
                    assert len(set(keys)) == len(keys)  # each message once
                    for key, message_id in zip(keys, snapshot_ids, strict=True):
                        # The same message always carries the same id, read after read.
                        assert id_of.setdefault(key, message_id) == message_id
                    assert len(set(id_of.values())) == len(id_of)  # ids never reused
                    assert COUNTER(snapshot) <= MAX_TOKENS
                    if not first_read:
                        first_read = dict(zip(keys, snapshot_ids, strict=True))
            assert reads == 9
            # A RemoveMessage with an id read in the first cycle (and still kept) succeeds.
            final = graph.get_state(cfg).values["messages"]
            survivors = [m for m in final if first_read.get(identity(m)) == m.id]
            assert survivors, "some message read in the first cycle is still kept"
            target = survivors[0]
            graph.update_state(cfg, {"messages": [RemoveMessage(id=target.id)]})
            after = graph.get_state(cfg).values["messages"]
            assert [m.id for m in after] == [m.id for m in final if m.id != target.id]
        assert len((tmp_path / "runs.log").read_text().splitlines()) == 3


def identity(message: Any) -> tuple[Any, ...]:
    """What makes a message itself, without its id: type, content, tool call details."""
    calls = tuple(
        (c["name"], json.dumps(c["args"], sort_keys=True), c["id"])
        for c in getattr(message, "tool_calls", None) or []
    )
    return (message.type, str(message.content), calls, getattr(message, "tool_call_id", None))


@pytest.mark.postgres
class TestApprovalOnPostgres:
    """The same approval scenario on a real PostgreSQL database."""

    @pytest.mark.parametrize("layout", LAYOUTS)
    def test_resume_in_new_process_runs_tool_once_and_keeps_ids(
        self, postgres_uri: str, tmp_path: Path, layout: str
    ) -> None:
        """The approved tool runs once; ids read before the interrupt survive unchanged."""
        approval_scenario(postgres_uri, tmp_path, layout)


def trim_graph(saver: SqliteSaver, node: TrimNode) -> Any:
    """A graph whose only node is ``node``; bad writes are staged with update_state."""
    return (
        StateGraph(STMState)
        .add_node("trim", node)
        .add_edge(START, "trim")
        .compile(checkpointer=saver)
    )


@pytest.fixture
def saver(sqlite_path: Path) -> Iterator[SqliteSaver]:
    """A SqliteSaver on a fresh file."""
    manager: AbstractContextManager[SqliteSaver] = SqliteSaver.from_conn_string(str(sqlite_path))
    with manager as opened:
        yield opened


class TestBadInputLeavesStateUntouched:
    """A broken history makes TrimNode raise a clear STMError; the state does not change."""

    CFG: ClassVar[Any] = {"configurable": {"thread_id": "bad"}}

    def stage(self, saver: SqliteSaver, bad: list[Any]) -> tuple[Any, dict[str, Any]]:
        graph = trim_graph(saver, TrimNode(max_tokens=50, token_counter=len))
        graph.invoke(
            {"messages": [HumanMessage("hi", id="h1"), AIMessage("yo", id="a1")]}, self.CFG
        )
        graph.update_state(self.CFG, {"messages": bad}, as_node="__start__")
        return graph, graph.get_state(self.CFG).values

    @pytest.mark.parametrize(
        ("bad", "error", "named"),
        [
            ([ToolMessage("stray", tool_call_id="zz", id="t-zz")], ToolPairError, "t-zz"),
            (
                [
                    AIMessage("", id="a2", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
                    ToolMessage("one", tool_call_id="c1", id="t1"),
                    ToolMessage("two", tool_call_id="c1", id="t2"),
                ],
                ToolPairError,
                "t2",
            ),
        ],
        ids=["orphan-result", "duplicate-result"],
    )
    def test_broken_history_raises_and_keeps_state(
        self, saver: SqliteSaver, bad: list[Any], error: type[STMError], named: str
    ) -> None:
        """The node refuses, naming the message; get_state is identical before and after."""
        graph, before = self.stage(saver, bad)
        with pytest.raises(error, match=named):
            graph.invoke(None, self.CFG)
        assert graph.get_state(self.CFG).values == before
        # The documented way out: apply repair_history, then trimming works.
        graph.update_state(self.CFG, {"messages": list(repair_history(before["messages"]).updates)})
        assert validate_history(graph.get_state(self.CFG).values["messages"]) == []

    def test_non_message_values_raise_invalid_message_error(self, saver: SqliteSaver) -> None:
        """A key holding non-messages is refused with InvalidMessageError, state unchanged."""

        class LooseState(STMState, total=False):
            chat: list[Any]

        graph = (
            StateGraph(LooseState)
            .add_node("trim", TrimNode(max_tokens=5, token_counter=len, messages_key="chat"))
            .add_edge(START, "trim")
            .compile(checkpointer=saver)
        )
        graph.update_state(self.CFG, {"messages": [], "chat": [{"role": "user"}, 42]})
        before = graph.get_state(self.CFG).values
        with pytest.raises(InvalidMessageError, match="not a LangChain BaseMessage"):
            graph.invoke(None, self.CFG)
        assert graph.get_state(self.CFG).values == before

    def test_non_positive_budget_is_refused_before_anything_runs(self) -> None:
        """TrimNode(0) raises InvalidArgumentError when the graph is built."""
        with pytest.raises(InvalidArgumentError, match="max_tokens"):
            TrimNode(max_tokens=0)
