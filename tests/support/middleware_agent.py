"""A ``create_agent`` agent with STMMiddleware and HumanInTheLoopMiddleware, for the tests.

``python -m tests.support.middleware_agent resume MODE PATH THREAD LEDGER`` (``MODE`` is
``sync`` or ``async``) opens the SQLite file ``PATH`` in a brand-new process, rebuilds
the agent, approves the pending payment with ``Command(resume=...)`` and prints JSON:
the model requests of that process and the thread's final messages (the restarted
worker of the tests). The payment tool appends one line to ``LEDGER`` per run.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from langgraph_stm import STMSaver
from langgraph_stm.middleware import STMMiddleware
from tests.support.models import ToolCallingChatModel

SYSTEM_PROMPT = "You are the billing agent of ACME. Answer briefly."
GOAL = "reconcile the March invoices"
CONSTRAINT = "never pay more than 50 EUR without approval"
STRUCTURED: dict[str, Any] = {
    "goal": GOAL,
    "plan": [
        {"id": "s1", "task": "collect invoices", "status": "in_progress"},
        {"id": "s2", "task": "pay the open balance", "status": "pending"},
    ],
    "constraints": [{"id": "c1", "text": CONSTRAINT}],
}
MIDDLEWARE_OPTIONS: dict[str, Any] = {
    "max_tokens": 700,
    "summarize_over": 900,
    "keep_tokens": 450,
    "recent_units": 3,
    "max_summary_tokens": 120,
}
"""Budgets (exact tiktoken counts) small enough that a few turns summarize and trim."""
APPROVE: dict[str, Any] = {"decisions": [{"type": "approve"}]}


def latest_human_id(messages: list[BaseMessage]) -> str:
    """The id of the user's latest turn (the working-memory block is not one)."""
    human = next(
        m for m in reversed(messages) if isinstance(m, HumanMessage) and m.id != "stm-context"
    )
    return human.id or "h?"


def decide(messages: list[BaseMessage]) -> AIMessage:
    """The scripted agent: two lookups per question, a payment on "pay", then a reply."""
    turn = latest_human_id(messages)
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"Done with {turn}: the records are consistent.", id=f"{turn}-reply")
    human = next(m for m in reversed(messages) if m.id == turn)
    if human.text.startswith("pay"):
        call = {"name": "send_payment", "args": {"amount": 40, "to": "ACME"}, "id": f"{turn}-pay"}
        return AIMessage("", id=f"{turn}-call", tool_calls=[call])
    calls = [
        {"name": "lookup", "args": {"topic": f"{turn} part {k}"}, "id": f"{turn}-c{k}"}
        for k in range(2)
    ]
    return AIMessage("", id=f"{turn}-call", tool_calls=calls)


def make_tools(ledger: Path) -> list[BaseTool]:
    """``lookup`` (long outputs, auto-approved) and ``send_payment`` (writes the ledger)."""

    @tool
    def lookup(topic: str) -> str:
        """Look up the billing records of a topic."""
        return f"Records for {topic}: " + "invoice line reconciled without differences; " * 8

    @tool
    def send_payment(amount: int, to: str) -> str:
        """Send a payment (needs a human approval)."""
        with ledger.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"amount": amount, "to": to}) + "\n")
        return f"paid {amount} EUR to {to}"

    return [lookup, send_payment]


class AsyncOnlyAgentModel(ToolCallingChatModel):
    """The scripted agent model with no sync path: proves an async run never uses it."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the sync path of an async-only model was used")


def build_agent(
    saver: BaseCheckpointSaver[Any], ledger: Path, *, async_only: bool = False, **options: Any
) -> tuple[CompiledStateGraph[Any, Any, Any, Any], ToolCallingChatModel]:
    """The agent under test and its model (whose ``prompts`` the tests read)."""
    kind = AsyncOnlyAgentModel if async_only else ToolCallingChatModel
    model = kind(respond=decide)  # prompts: every request as received
    agent = create_agent(
        model,
        tools=make_tools(ledger),
        system_prompt=SYSTEM_PROMPT,
        middleware=[
            STMMiddleware(**{**MIDDLEWARE_OPTIONS, **options}),
            HumanInTheLoopMiddleware(interrupt_on={"send_payment": True}),
        ],
        checkpointer=saver,
    )
    return agent, model


def dump(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """Messages as JSON-ready dicts (``load`` turns them back)."""
    return messages_to_dict(messages)


def load(data: list[dict[str, Any]]) -> list[BaseMessage]:
    """The inverse of :func:`dump`."""
    return messages_from_dict(data)


def _report(model: ToolCallingChatModel, values: dict[str, Any]) -> str:
    return json.dumps(
        {
            "prompts": [dump(prompt) for prompt in model.prompts],
            "messages": dump(values["messages"]),
            "summary": values.get("summary"),
        }
    )


def resume(mode: str, path: str, thread: str, ledger: str) -> str:
    """Approve the pending payment of ``thread`` from this (new) process."""
    config: Any = {"configurable": {"thread_id": thread}}
    if mode == "sync":
        with STMSaver.from_sqlite(path) as saver:
            agent, model = build_agent(saver, Path(ledger))
            values = agent.invoke(Command(resume=APPROVE), config)
            return _report(model, values)

    async def run() -> str:
        async with STMSaver.from_async_sqlite(path) as saver:
            agent, model = build_agent(saver, Path(ledger))
            values = await agent.ainvoke(Command(resume=APPROVE), config)
            return _report(model, values)

    return asyncio.run(run())


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    assert command == "resume", command
    print(resume(*args))
