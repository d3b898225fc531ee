"""STMState inside compiled StateGraphs, on InMemorySaver and on a real SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph

from langgraph_stm import STMState
from langgraph_stm.errors import StateUpdateError
from tests.support.state_graphs import FIRST_INPUT, build_graph, dump

REPO = Path(__file__).resolve().parents[2]
CONFIG: Any = {"configurable": {"thread_id": "billing-1"}}


def expected_final(values: dict[str, Any]) -> None:
    assert values["goal"] == "migrate billing to v2"
    assert [(s["id"], s["status"]) for s in values["plan"]] == [
        ("s1", "done"),
        ("s2", "done"),
        ("s3", "pending"),
    ]
    assert [(c["id"], c["status"]) for c in values["constraints"]] == [
        ("c1", "confirmed"),
        ("c3", "confirmed"),
    ]
    assert values["constraints"][0]["source_message_id"] == "h1"
    assert values["last_error"] is None
    assert values["ticket"] == "BILL-42"
    assert [m.id for m in values["messages"]] == ["h1", "a-plan", "a-work"]


class TestInMemory:
    """Reducers behave in a real graph on InMemorySaver."""

    def test_full_run(self) -> None:
        """Plan, status update by id, constraint add/remove, error set then cleared."""
        graph = build_graph(InMemorySaver())
        expected_final(graph.invoke(FIRST_INPUT, CONFIG))

    def test_intermediate_states_in_history(self) -> None:
        """The checkpoint after 'work' holds the error and s2 in progress."""
        graph = build_graph(InMemorySaver())
        graph.invoke(FIRST_INPUT, CONFIG)
        after_work = next(
            s for s in graph.get_state_history(CONFIG) if s.next == ("recover",)
        ).values
        assert after_work["last_error"]["message"] == "HTTP 503 from billing API"
        assert after_work["last_error"]["recovery"] is None
        assert [s["status"] for s in after_work["plan"]] == ["done", "in_progress", "pending"]
        assert [c["id"] for c in after_work["constraints"]] == ["c1", "c3"]

    def test_bad_update_raises_and_keeps_state(self) -> None:
        """A node writing a plan step without id fails clearly; the state is unchanged."""
        graph = build_graph(InMemorySaver())
        graph.invoke(FIRST_INPUT, CONFIG)
        before = dump(graph.get_state(CONFIG).values)
        with pytest.raises(StateUpdateError, match="invalid update for plan"):
            graph.update_state(CONFIG, {"plan": [{"task": "no id"}]})
        with pytest.raises(StateUpdateError, match="unknown status 'finished'"):
            graph.update_state(CONFIG, {"plan": [{"id": "s3", "status": "finished"}]})
        assert dump(graph.get_state(CONFIG).values) == before

    def test_bad_update_from_a_node_keeps_the_checkpoint(self) -> None:
        """A node returning a malformed constraint fails the run; no checkpoint is written.

        (LangGraph itself keeps the failed step's writes as pending writes of the last
        checkpoint; rejecting them before they are written is the saver's job.)
        """

        def bad(state: STMState) -> dict[str, Any]:
            return {"constraints": [{"id": "c9", "text": "x", "status": "maybe"}]}

        saver = InMemorySaver()
        builder = StateGraph(STMState).add_node(bad).add_edge(START, "bad")
        graph = builder.compile(checkpointer=saver)
        graph.update_state(CONFIG, {"messages": [HumanMessage("hi", id="h1")]})
        before = saver.get_tuple(CONFIG)
        assert before is not None
        with pytest.raises(StateUpdateError, match=r"constraints\[id='c9'\]"):
            graph.invoke(None, CONFIG)
        after = saver.get_tuple(CONFIG)
        assert after is not None
        assert after.checkpoint["id"] == before.checkpoint["id"]
        assert after.checkpoint["channel_values"] == before.checkpoint["channel_values"]

    def test_first_write_is_validated_and_completed(self) -> None:
        """The very first last_error/summary write goes through the reducer too."""
        graph = build_graph(InMemorySaver())
        with pytest.raises(StateUpdateError, match="last_error"):
            graph.update_state(CONFIG, {"last_error": {"recovery": "no message"}})
        with pytest.raises(StateUpdateError, match="summary"):
            graph.update_state(CONFIG, {"summary": {"text": "x", "version": 0}})
        graph.update_state(CONFIG, {"last_error": {"message": "boom"}})
        assert graph.get_state(CONFIG).values["last_error"] == {
            "message": "boom",
            "recovery": None,
            "step_id": None,
            "at": None,
        }

    def test_subclass_keeps_reducers_and_adds_keys(self) -> None:
        """A user TypedDict extending STMState keeps every reducer and its own key."""
        graph = build_graph(InMemorySaver())
        final = graph.invoke(FIRST_INPUT, CONFIG)
        assert final["ticket"] == "BILL-42"
        graph.update_state(CONFIG, {"plan": {"id": "s3", "status": "blocked"}})
        assert [s["status"] for s in graph.get_state(CONFIG).values["plan"]][-1] == "blocked"


class TestSqliteFile:
    """The same graph persists to a SQLite file and reloads identically elsewhere."""

    def test_reload_from_a_new_process(self, sqlite_path: Path) -> None:
        """A new process with a new saver on the same file sees the identical state."""
        with SqliteSaver.from_conn_string(str(sqlite_path)) as saver:
            graph = build_graph(saver)
            final = graph.invoke(FIRST_INPUT, CONFIG)
            expected_final(final)
            here = dump(graph.get_state(CONFIG).values)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        result = subprocess.run(
            [sys.executable, "-m", "tests.support.state_graphs", str(sqlite_path), "billing-1"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(result.stdout) == json.loads(here)

    def test_reload_with_a_new_saver_in_process(self, sqlite_path: Path) -> None:
        """Closing and reopening the file keeps every structured field."""
        with SqliteSaver.from_conn_string(str(sqlite_path)) as saver:
            build_graph(saver).invoke(FIRST_INPUT, CONFIG)
        with SqliteSaver.from_conn_string(str(sqlite_path)) as saver:
            expected_final(build_graph(saver).get_state(CONFIG).values)


class TestWriteValidation:
    """STMSaver(validate_writes=True) keeps malformed updates out of storage."""

    @staticmethod
    def bad_graph(saver: Any) -> Any:
        def bad(state: STMState) -> dict[str, Any]:
            return {"plan": [{"id": "s1", "status": "finished"}]}

        return StateGraph(STMState).add_node(bad).add_edge(START, "bad").compile(checkpointer=saver)

    def test_plain_saver_keeps_the_bad_write_and_every_read_fails(self) -> None:
        """Why the option exists: LangGraph stores the failed step's writes as pending."""
        graph = self.bad_graph(InMemorySaver())
        graph.update_state(CONFIG, {"messages": [HumanMessage("hi", id="h1")]})
        with pytest.raises(StateUpdateError):
            graph.invoke(None, CONFIG)
        with pytest.raises(StateUpdateError):
            graph.get_state(CONFIG)

    @pytest.mark.parametrize("backend", ["memory", "sqlite"])
    def test_bad_write_is_refused_and_the_thread_stays_readable(
        self, backend: str, sqlite_path: Path
    ) -> None:
        """The run fails with StateUpdateError; get_state still works and is unchanged."""
        from langgraph_stm import STMSaver

        inner: Any = InMemorySaver()
        if backend == "sqlite":
            import sqlite3

            inner = SqliteSaver(sqlite3.connect(str(sqlite_path), check_same_thread=False))
        saver = STMSaver(inner, validate_writes=True)
        saver.setup()
        graph = self.bad_graph(saver)
        graph.update_state(CONFIG, {"messages": [HumanMessage("hi", id="h1")]})
        before = dump(graph.get_state(CONFIG).values)
        with pytest.raises(StateUpdateError, match=r"plan\[id='s1'\].*'finished'"):
            graph.invoke(None, CONFIG)
        assert dump(graph.get_state(CONFIG).values) == before
        graph.update_state(CONFIG, {"plan": [{"id": "s1", "task": "retry"}]})
        assert graph.get_state(CONFIG).values["plan"][0]["status"] == "pending"
