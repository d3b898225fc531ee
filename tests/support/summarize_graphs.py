"""Graphs over STMState that summarize, used by the summarize integration tests.

``python -m tests.support.summarize_graphs resume BACKEND TARGET THREAD`` resumes an
approval interrupt from a brand-new process, on a SQLite file (``sqlite PATH``) or a
PostgreSQL database (``postgres URI``), with a model that fails if it is called, and
prints the final state as JSON (the restarted worker of the tests).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt

from langgraph_stm import STMState, SummarizeNode
from tests.support.models import ScriptedChatModel, summary_json

GOAL = "migrate billing to v2"
CONSTRAINT = "never email external domains"
STRUCTURED: dict[str, Any] = {
    "goal": GOAL,
    "plan": [
        {"id": "s1", "task": "export invoices", "status": "done"},
        {"id": "s2", "task": "map fields", "status": "in_progress"},
        {"id": "s3", "task": "switch traffic", "status": "pending"},
    ],
    "constraints": [{"id": "c1", "text": CONSTRAINT, "source_message_id": "h0"}],
}


def summary_model() -> ScriptedChatModel:
    """A model that answers a valid summary JSON naming the messages it was shown."""

    def respond(prompt: list[BaseMessage]) -> str:
        lines = prompt[-1].text.split("New messages to fold in:\n", 1)[-1].splitlines()
        shown = sum(1 for line in lines if line.startswith("["))
        return summary_json(f"Folded {shown} more messages.", goal=GOAL)

    return ScriptedChatModel(respond=respond)


# --- an agent loop: summarize -> agent -> tools -> agent ... ---------------------------------


def _turn(state: STMState) -> str:
    human = next(m for m in reversed(state["messages"]) if isinstance(m, HumanMessage))
    return human.id or "h?"


async def agent(state: STMState) -> dict[str, Any]:
    """Call two lookups in parallel for each user turn, then reply."""
    turn = _turn(state)
    if isinstance(state["messages"][-1], HumanMessage):
        calls = [
            {"name": "lookup", "args": {"turn": turn, "part": k}, "id": f"{turn}-c{k}"}
            for k in range(2)
        ]
        return {"messages": [AIMessage("", id=f"{turn}-call", tool_calls=calls)]}
    return {"messages": [AIMessage(f"Handled {turn}; step done.", id=f"{turn}-reply")]}


async def tools(state: STMState) -> dict[str, Any]:
    """Answer every call of the last AI message."""
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    return {
        "messages": [
            ToolMessage(f"record {c['args']} ok " * 5, tool_call_id=c["id"], id=f"t-{c['id']}")
            for c in last.tool_calls
        ]
    }


def _route(state: STMState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def agent_graph(
    node: SummarizeNode, checkpointer: BaseCheckpointSaver[Any] | None
) -> CompiledStateGraph[Any]:
    """START -> summarize -> agent <-> tools."""
    builder = StateGraph(STMState)
    builder.add_node(node)
    builder.add_node(agent)
    builder.add_node(tools)
    builder.add_edge(START, node.name)
    builder.add_edge(node.name, "agent")
    builder.add_conditional_edges("agent", _route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


# --- summarize and interrupt() in the same node ------------------------------------------------


def long_history(turns: int = 12) -> list[BaseMessage]:
    """A chat history ending with a send_email call waiting for approval."""
    history: list[BaseMessage] = []
    for i in range(turns):
        history.append(HumanMessage(f"Please handle invoice batch {i}.", id=f"h{i}"))
        history.append(AIMessage(f"Batch {i} exported; I will continue.", id=f"a{i}"))
    call = {"name": "send_email", "args": {"to": "cfo@example.com"}, "id": "mail-1"}
    history.append(AIMessage("", id="ask-mail", tool_calls=[call]))
    return history


def approval_graph(
    model: ScriptedChatModel, checkpointer: BaseCheckpointSaver[Any] | None
) -> CompiledStateGraph[Any]:
    """One node: summarize the history, then ask for approval of the pending call."""
    summarize = SummarizeNode(summarizer=model, trigger_tokens=8, keep_tokens=4, token_counter=len)

    async def summarize_then_approve(state: STMState) -> dict[str, Any]:
        update = await summarize.ainvoke(state)
        pending = state["messages"][-1]
        assert isinstance(pending, AIMessage)
        call = pending.tool_calls[0]
        decision = interrupt({"approve": call["name"], "args": call["args"]})
        result = ToolMessage(
            f"sent ({decision})", tool_call_id=call["id"] or "", id=f"t-{call['id']}"
        )
        return {**update, "messages": [*update.get("messages", []), result]}

    builder = StateGraph(STMState)
    builder.add_node(summarize_then_approve)
    builder.add_edge(START, "summarize_then_approve")
    builder.add_edge("summarize_then_approve", END)
    return builder.compile(checkpointer=checkpointer)


def snapshot(values: dict[str, Any]) -> dict[str, Any]:
    """The parts of a state the tests compare across processes."""
    return {
        "ids": [m.id for m in values["messages"]],
        "summary": values.get("summary"),
        "goal": values.get("goal"),
    }


@asynccontextmanager
async def open_saver(backend: str, target: str) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Open an async saver on a SQLite file or a PostgreSQL database (set up)."""
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(target) as sqlite:
            yield sqlite
    elif backend == "postgres":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(target) as postgres:
            await postgres.setup()
            yield postgres
    else:
        raise SystemExit(f"unknown backend {backend!r}: sqlite or postgres")


async def pause(backend: str, target: str, thread: str, model: ScriptedChatModel) -> None:
    """Run the approval graph on a fresh thread until its interrupt."""
    async with open_saver(backend, target) as saver:
        graph = approval_graph(model, saver)
        config: Any = {"configurable": {"thread_id": thread}}
        await graph.ainvoke({"messages": long_history(), **STRUCTURED}, config)


async def _resume(backend: str, target: str, thread: str) -> None:
    from langgraph.types import Command

    never = ScriptedChatModel(script=[AssertionError("the model was called after a restart")])
    async with open_saver(backend, target) as saver:
        graph = approval_graph(never, saver)
        config: Any = {"configurable": {"thread_id": thread}}
        values = await graph.ainvoke(Command(resume="approved"), config)
        print(json.dumps({**snapshot(values), "model_calls": never.calls}))


if __name__ == "__main__":
    _, command, backend_name, target_name, thread_id = sys.argv
    assert command == "resume"
    asyncio.run(_resume(backend_name, target_name, thread_id))
