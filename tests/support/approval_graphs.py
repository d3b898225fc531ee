"""Graphs around ApprovalToolNode for the approval tests, and a worker that resumes them.

The agent is scripted and deterministic: a HumanMessage whose content is a JSON list of
calls ``[{"name": ..., "args": {...}}, ...]`` (see :func:`ask`) gets one AIMessage with
those calls (id ``ai-<human id>``, call ids ``<human id>-c<i>``); once the calls are
answered it replies ``reply-<human id>``. Every tool appends one JSON line to a ledger
file when it runs, so tests count executions across re-runs and processes.

Run ``python -m tests.support.approval_graphs BACKEND TARGET THREAD LEDGER RESUME [MODE]``
to resume a paused thread from a brand-new process: ``BACKEND`` is ``sqlite`` (``TARGET``
a file path) or ``postgres`` (a URI), ``RESUME`` the JSON of ``Command(resume=...)``.
It prints ``{"messages": [...], "interrupts": [...]}`` (see :func:`snapshot`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from langgraph_stm import ApprovalToolNode, STMSaver, STMState, SummarizeNode, TrimNode
from langgraph_stm.tools import InterruptMode

POLICY: dict[str, Any] = {
    "send_email": True,
    "delete_file": {"allowed_decisions": ["approve", "reject"], "description": "Deletes!"},
    "fetch_page": True,
    "explode": True,
}
"""Gated: send_email (every decision), delete_file (approve/reject), fetch_page, explode.
Not gated: lookup, big_report."""


class Ledger:
    """The run log of the tools: one JSON line per execution in a file (shared across
    processes), or in memory when ``path`` is ``None``."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = None if path is None else Path(path)
        self._memory: list[dict[str, Any]] = []

    def record(self, name: str, call_id: str, args: Mapping[str, Any]) -> None:
        entry = {"tool": name, "call_id": call_id, "args": dict(args)}
        if self.path is None:
            self._memory.append(entry)
            return
        with self.path.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")

    def entries(self) -> list[dict[str, Any]]:
        if self.path is None:
            return list(self._memory)
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def calls(self) -> list[str]:
        """The call ids that ran, in order."""
        return [entry["call_id"] for entry in self.entries()]

    def count(self, call_id: str) -> int:
        return self.calls().count(call_id)


def make_tools(ledger: Ledger) -> list[BaseTool]:
    """The tools of the approval graphs; each records its runs in ``ledger``."""

    @tool
    def send_email(to: str, body: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Send an email."""
        ledger.record("send_email", tool_call_id, {"to": to, "body": body})
        return f"sent to {to}: {body}"

    @tool
    def delete_file(path: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Delete a file."""
        ledger.record("delete_file", tool_call_id, {"path": path})
        return f"deleted {path}"

    @tool
    def lookup(key: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Look a key up (not gated)."""
        ledger.record("lookup", tool_call_id, {"key": key})
        return f"value of {key}"

    @tool
    def explode(reason: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """A tool that always raises."""
        ledger.record("explode", tool_call_id, {"reason": reason})
        raise RuntimeError(f"boom: {reason}")

    @tool
    def big_report(rows: int, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """A large output (not gated)."""
        ledger.record("big_report", tool_call_id, {"rows": rows})
        return "\n".join(
            f"row {i}: order {1000 + i} shipped to warehouse {i % 7}" for i in range(rows)
        )

    @tool
    async def fetch_page(url: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Fetch a page (async)."""
        await asyncio.sleep(0)
        ledger.record("fetch_page", tool_call_id, {"url": url})
        return f"<html>{url}</html>"

    return [send_email, delete_file, lookup, explode, big_report, fetch_page]


def make_asking_tool(ledger: Ledger) -> BaseTool:
    """``confirm``: a tool that asks the user itself, with ``interrupt()``, then records the
    answer it got (so a run that was interrupted records nothing)."""

    @tool
    def confirm(question: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Ask the user a question."""
        answer = interrupt({"question": question, "tool_call_id": tool_call_id})
        ledger.record("confirm", tool_call_id, {"question": question, "answer": answer})
        return f"the user said {answer}"

    return confirm


def ask(human_id: str, *calls: tuple[str, dict[str, Any]]) -> HumanMessage:
    """The human turn that makes the agent issue ``calls`` (name, args), in order."""
    return HumanMessage(
        json.dumps([{"name": name, "args": args} for name, args in calls]), id=human_id
    )


def call_id(human_id: str, position: int) -> str:
    """The id the agent gives the call at ``position`` of the turn ``human_id``."""
    return f"{human_id}-c{position}"


def agent(state: STMState) -> dict[str, Any]:
    """The scripted model (see the module docstring)."""
    messages = state["messages"]
    human = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
    if messages[-1] is human:
        try:
            wanted = json.loads(str(human.content))
        except ValueError:
            wanted = []
        if isinstance(wanted, list) and wanted:
            calls = [
                {"name": c["name"], "args": c["args"], "id": call_id(str(human.id), i)}
                for i, c in enumerate(wanted)
            ]
            return {"messages": [AIMessage("", id=f"ai-{human.id}", tool_calls=calls)]}
    return {"messages": [AIMessage(f"done with {human.id}", id=f"reply-{human.id}")]}


def _route(state: STMState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


Pre = Literal["trim", "summarize"]


def build_graph(
    checkpointer: BaseCheckpointSaver[Any] | None,
    ledger: Ledger,
    *,
    interrupt_on: Mapping[str, Any] | None = None,
    interrupt_mode: InterruptMode = "per_call",
    pre: Sequence[Pre] = (),
    node_options: Mapping[str, Any] | None = None,
    max_tokens: int = 12,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """agent -> [trim] -> [summarize] -> tools -> agent, with ``len`` token counters.

    ``pre`` places TrimNode / SummarizeNode between the agent and the tools, so they run
    while the calls are pending; ``max_tokens`` is their budget in messages.
    """
    node = ApprovalToolNode(
        make_tools(ledger),
        interrupt_on=POLICY if interrupt_on is None else interrupt_on,
        interrupt_mode=interrupt_mode,
        **(node_options or {}),
    )
    builder = StateGraph(STMState)
    builder.add_node("agent", agent)
    builder.add_node(node)
    builder.add_edge(START, "agent")
    previous = "agent"
    for kind in pre:
        if kind == "trim":
            builder.add_node("trim", TrimNode(max_tokens=max_tokens, token_counter=len))
        else:
            builder.add_node(
                SummarizeNode(
                    trigger_tokens=max_tokens, keep_tokens=max_tokens // 2, token_counter=len
                )
            )
        builder.add_edge(previous, kind)
        previous = kind
    builder.add_conditional_edges(previous, _route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def tools_graph(
    checkpointer: BaseCheckpointSaver[Any] | None,
    ledger: Ledger,
    *,
    interrupt_on: Mapping[str, Any] | None = None,
    store: Any = None,
    extra_tools: Sequence[BaseTool] = (),
    **options: Any,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """START -> tools -> END: the node alone, on a state given as input (``extra_tools``
    join the ledger's tools, not gated unless ``interrupt_on`` names them)."""
    node = ApprovalToolNode(
        [*make_tools(ledger), *extra_tools],
        interrupt_on=POLICY if interrupt_on is None else interrupt_on,
        **options,
    )
    builder = StateGraph(STMState)
    builder.add_node(node)
    builder.add_edge(START, "tools")
    return builder.compile(checkpointer=checkpointer, store=store)


def config(thread: str) -> Any:
    """The run config of ``thread``."""
    return {"configurable": {"thread_id": thread}}


def dump(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Messages as JSON-able records."""
    return [
        {
            "type": m.type,
            "id": m.id,
            "content": m.content,
            "tool_calls": [
                {"id": c["id"], "name": c["name"], "args": c["args"]} for c in m.tool_calls
            ]
            if isinstance(m, AIMessage)
            else [],
            "tool_call_id": m.tool_call_id if isinstance(m, ToolMessage) else None,
            "status": m.status if isinstance(m, ToolMessage) else None,
        }
        for m in messages
    ]


def snapshot(graph: CompiledStateGraph[Any, Any, Any, Any], thread: str) -> dict[str, Any]:
    """The thread's messages and pending interrupts, JSON-able."""
    state = graph.get_state(config(thread))
    return {
        "messages": dump(state.values.get("messages", [])),
        "interrupts": [{"id": i.id, "value": i.value} for i in state.interrupts],
    }


@contextmanager
def open_saver(backend: str, target: str) -> Iterator[STMSaver]:
    """A set-up STMSaver over a SQLite file or a PostgreSQL database."""
    if backend == "sqlite":
        with STMSaver.from_sqlite(target) as saver:
            saver.setup()
            yield saver
    elif backend == "postgres":
        with STMSaver.from_postgres(target) as saver:
            saver.setup()
            yield saver
    else:
        raise SystemExit(f"unknown backend {backend!r}: sqlite or postgres")


def resume(
    backend: str, target: str, thread: str, ledger: Path | str, answer: Any, mode: InterruptMode
) -> dict[str, Any]:
    """Resume ``thread`` with ``Command(resume=answer)`` and return its snapshot."""
    with open_saver(backend, target) as saver:
        graph = build_graph(saver, Ledger(ledger), interrupt_mode=mode)
        graph.invoke(Command(resume=answer), config(thread))
        return snapshot(graph, thread)


if __name__ == "__main__":
    backend_name, target_name, thread_id, ledger_path, answer_json, *rest = sys.argv[1:]
    interrupt_mode: InterruptMode = "batched" if rest == ["batched"] else "per_call"
    result = resume(
        backend_name, target_name, thread_id, ledger_path, json.loads(answer_json), interrupt_mode
    )
    print(json.dumps(result))
