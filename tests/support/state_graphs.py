"""A small graph over STMState used by the state integration tests (and their subprocesses)."""

from __future__ import annotations

import json
import sys
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langgraph_stm import STMState
from langgraph_stm.state import remove_record


class TaskState(STMState, total=False):
    """STMState extended with a user key, as users do."""

    ticket: str


def plan(state: TaskState) -> dict[str, Any]:
    """Set the goal, a three-step plan and two constraints."""
    return {
        "goal": "migrate billing to v2",
        "plan": [
            {"id": "s1", "task": "export invoices"},
            {"id": "s2", "task": "map fields"},
            {"id": "s3", "task": "switch traffic"},
        ],
        "constraints": [
            {"id": "c1", "text": "never email external domains", "source_message_id": "h1"},
            {"id": "c2", "text": "finish before Friday", "status": "pending"},
        ],
        "messages": [AIMessage("Plan ready.", id="a-plan")],
        "ticket": "BILL-42",
    }


def work(state: TaskState) -> dict[str, Any]:
    """Finish step s1 by id, start s2, swap a constraint and record an error."""
    return {
        "plan": [{"id": "s1", "status": "done"}, {"id": "s2", "status": "in_progress"}],
        "constraints": [
            remove_record("c2"),
            {"id": "c3", "text": "keep v1 read-only", "status": "confirmed"},
        ],
        "last_error": {"message": "HTTP 503 from billing API", "step_id": "s2"},
        "messages": [AIMessage("Export done; mapping hit a 503.", id="a-work")],
    }


def recover(state: TaskState) -> dict[str, Any]:
    """Record the recovery, then clear the error in the next node."""
    return {"last_error": {**state["last_error"], "recovery": "retry with backoff"}}  # type: ignore[dict-item]


def clear(state: TaskState) -> dict[str, Any]:
    """Clear last_error once recovered."""
    return {"last_error": None, "plan": {"id": "s2", "status": "done"}}


def build_graph(checkpointer: BaseCheckpointSaver[Any] | None) -> CompiledStateGraph[Any]:
    """plan -> work -> recover -> clear, with TaskState."""
    builder = StateGraph(TaskState)
    builder.add_node(plan)
    builder.add_node(work)
    builder.add_node(recover)
    builder.add_node(clear)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "work")
    builder.add_edge("work", "recover")
    builder.add_edge("recover", "clear")
    builder.add_edge("clear", END)
    return builder.compile(checkpointer=checkpointer)


FIRST_INPUT = {"messages": [HumanMessage("Move billing to v2, no external email.", id="h1")]}


def dump(values: dict[str, Any]) -> str:
    """Serialize state values to canonical JSON for comparison across processes."""
    out = dict(values)
    out["messages"] = messages_to_dict(values.get("messages", []))
    return json.dumps(out, sort_keys=True)


if __name__ == "__main__":
    # python -m tests.support.state_graphs PATH THREAD: print the thread's state from a
    # brand-new SqliteSaver on the file, as a restarted worker would see it.
    from langgraph.checkpoint.sqlite import SqliteSaver

    path, thread = sys.argv[1], sys.argv[2]
    with SqliteSaver.from_conn_string(path) as saver:
        graph = build_graph(saver)
        snapshot = graph.get_state({"configurable": {"thread_id": thread}})
        print(dump(snapshot.values))
