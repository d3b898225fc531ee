"""Approval graphs for the trim tests, in two layouts:

- ``trim_first``: agent -> trim -> approval interrupt -> tools -> agent. Trim runs while
  the tool call is pending, before the pause.
- ``approve_first``: agent -> approval interrupt -> trim -> tools -> agent. The thread
  is paused over budget; trim runs on resume, with the call still unanswered.

Run as ``python -m tests.support.trim_graphs LAYOUT TARGET THREAD RUN_LOG DECISION`` to
resume a paused thread from a brand-new process (``TARGET`` is a SQLite file path or a
``postgresql://`` URI) and print the resulting messages as JSON.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from langgraph_stm import STMState, TokenCounter, TrimNode

MAX_TOKENS = 400
COUNTER = TokenCounter(encoding="o200k_base")


def seed_history(turns: int = 15) -> list[BaseMessage]:
    """A long earlier conversation (about 60 tokens per message), without ids."""
    messages: list[BaseMessage] = []
    for turn in range(turns):
        messages.append(HumanMessage(f"turn {turn}: " + "please compare fares again " * 10))
        messages.append(AIMessage(f"turn {turn}: " + "here are the fares you asked for " * 8))
    return messages


def agent(state: STMState) -> dict[str, Any]:
    """A scripted model: a human turn gets a booking tool call, a tool result an answer."""
    last = state["messages"][-1]
    if isinstance(last, HumanMessage):
        call = {"name": "book_flight", "args": {"request": str(last.content)[:40]}}
        return {"messages": [AIMessage("", tool_calls=[{**call, "id": uuid.uuid4().hex}])]}
    return {"messages": [AIMessage(f"Done: {last.content}")]}


def route(state: STMState) -> str:
    """Go to approval when the last message asks for tools."""
    last = state["messages"][-1]
    return "approval" if isinstance(last, AIMessage) and last.tool_calls else END


def approval_node(on_approve: str) -> Any:
    """Ask a human to approve the pending tool calls (re-runs from the top on resume)."""

    def approval(state: STMState) -> Command[str]:
        pending = next(
            m for m in reversed(state["messages"]) if isinstance(m, AIMessage) and m.tool_calls
        )
        decision = interrupt({"ai_message_id": pending.id, "tool_calls": pending.tool_calls})
        if decision == "approve":
            return Command(goto=on_approve)
        rejected = [
            ToolMessage("rejected by the user", tool_call_id=c["id"] or "", status="error")
            for c in pending.tool_calls
        ]
        return Command(goto="agent", update={"messages": rejected})

    return approval


def tools(state: STMState, config: RunnableConfig) -> dict[str, Any]:
    """Run the approved calls; each run is appended to the run log file."""
    pending = state["messages"][-1]
    assert isinstance(pending, AIMessage), "trim must keep the pending call last"
    log = Path(config["configurable"]["run_log"])
    results = []
    for call in pending.tool_calls:
        with log.open("a") as handle:
            handle.write(f"{call['id']}\n")
        results.append(ToolMessage(f"booked {call['args']}", tool_call_id=call["id"] or ""))
    return {"messages": results}


def build_graph(
    checkpointer: BaseCheckpointSaver[Any], layout: str = "trim_first"
) -> CompiledStateGraph[Any]:
    """Build the approval graph in ``layout`` (see the module docstring)."""
    builder = StateGraph(STMState)
    builder.add_node("agent", agent)
    builder.add_node("trim", TrimNode(max_tokens=MAX_TOKENS, token_counter=COUNTER))
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_edge("tools", "agent")
    if layout == "trim_first":
        builder.add_node("approval", approval_node("tools"), destinations=("tools", "agent"))
        builder.add_edge("agent", "trim")
        builder.add_conditional_edges("trim", route, ["approval", END])
    elif layout == "approve_first":
        builder.add_node("approval", approval_node("trim"), destinations=("trim", "agent"))
        builder.add_conditional_edges("agent", route, ["approval", END])
        builder.add_edge("trim", "tools")
    else:
        raise ValueError(f"unknown layout {layout!r}")
    return builder.compile(checkpointer=checkpointer)


def config(thread: str, run_log: Path | str) -> RunnableConfig:
    """The run config of a thread."""
    return {"configurable": {"thread_id": thread, "run_log": str(run_log)}}


def dump(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """Messages as JSON-able records (type, id, content, tool call ids)."""
    return [
        {
            "type": m.type,
            "id": m.id,
            "content": m.content,
            "tool_call_ids": [c["id"] for c in m.tool_calls] if isinstance(m, AIMessage) else [],
            "tool_call_id": m.tool_call_id if isinstance(m, ToolMessage) else None,
        }
        for m in messages
    ]


@contextmanager
def open_saver(target: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """A fresh saver on a SQLite file or a PostgreSQL URI."""
    if target.startswith("postgresql://"):
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(target) as saver:
            saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(target) as saver:
            yield saver


if __name__ == "__main__":
    layout, target, thread, run_log, decision = sys.argv[1:6]
    with open_saver(target) as saver:
        graph = build_graph(saver, layout)
        graph.invoke(Command(resume=decision), config(thread, run_log))
        print(json.dumps(dump(graph.get_state(config(thread, run_log)).values["messages"])))
