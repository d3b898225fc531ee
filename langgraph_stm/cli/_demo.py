"""The ``langgraph-stm`` command.

``langgraph-stm demo`` (or ``python -m langgraph_stm demo``) runs a scripted, fully
offline agent on :class:`~langgraph_stm.STMState`, persists it to a SQLite file,
counts its context exactly with :class:`~langgraph_stm.TokenCounter`, then reopens
the file with a brand-new saver (as a restarted worker would) and checks that the
structured state came back identical. It needs the ``sqlite`` extra and no API key.

Example:
    >>> import io, tempfile, pathlib
    >>> out = io.StringIO()
    >>> from langgraph_stm.cli import main
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     code = main(["demo", "--db", str(pathlib.Path(tmp) / "demo.sqlite")], out=out)
    >>> code, "reloaded from disk: identical" in out.getvalue()
    (0, True)
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any, TextIO

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langgraph_stm._state import STM_FIELDS, STMState
from langgraph_stm._tokens import TokenCounter, message_role

__all__ = ["build_demo_graph", "register"]

_TOOL_RESULTS = {
    "export_invoices": "exported 1,204 invoices to s3://billing/export-2026-11.csv",
    "map_fields": "error: HTTP 503 from billing-v2 schema service",
    "map_fields_retry": "mapped 37 fields; 2 renamed (vat_id -> tax_id, due -> due_date)",
}


def _planner(state: STMState) -> dict[str, Any]:
    """Turn the user's request into a goal, a plan and constraints."""
    request = state["messages"][-1]
    return {
        "goal": "migrate billing to v2",
        "plan": [
            {"id": "export", "task": "export v1 invoices"},
            {"id": "map", "task": "map v1 fields to the v2 schema"},
            {"id": "switch", "task": "switch traffic to v2"},
        ],
        "constraints": [
            {
                "id": "no-external-email",
                "text": "never email external domains",
                "source_message_id": request.id,
            }
        ],
        "messages": [AIMessage("Plan: export, map fields, switch traffic.", id="ai-plan")],
    }


def _agent(state: STMState) -> dict[str, Any]:
    """A scripted agent: call the tool for the next unfinished step."""
    done = {s["id"] for s in state.get("plan", []) if s["status"] == "done"}
    if "export" not in done:
        call = {"name": "export_invoices", "args": {"month": "2026-11"}, "id": "call-export"}
    elif "map" not in done and state.get("last_error") is None:
        call = {"name": "map_fields", "args": {"target": "v2"}, "id": "call-map"}
    elif "map" not in done:
        call = {"name": "map_fields_retry", "args": {"target": "v2"}, "id": "call-map-retry"}
    else:
        return {"messages": [AIMessage("Export and mapping done; ready to switch.", id="ai-done")]}
    return {"messages": [AIMessage("", id=f"ai-{call['id']}", tool_calls=[call])]}


def _tools(state: STMState) -> dict[str, Any]:
    """Run the requested tool and record its effect on the structured state."""
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    call = last.tool_calls[0]
    name, call_id = call["name"], call["id"]
    assert call_id is not None
    result = _TOOL_RESULTS[name]
    update: dict[str, Any] = {
        "messages": [ToolMessage(result, tool_call_id=call_id, id=f"tool-{call_id}")]
    }
    if name == "export_invoices":
        update["plan"] = {"id": "export", "status": "done"}
        update["artifacts"] = {
            "id": "invoice-export",
            "kind": "file",
            "summary": "1,204 v1 invoices as CSV",
            "uri": "s3://billing/export-2026-11.csv",
            "source_message_id": f"tool-{call_id}",
        }
    elif result.startswith("error"):
        update["plan"] = {"id": "map", "status": "in_progress"}
        update["last_error"] = {"message": result, "recovery": "retry once", "step_id": "map"}
    else:
        update["plan"] = {"id": "map", "status": "done"}
        update["last_error"] = None
    return update


def _route(state: STMState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def build_demo_graph(checkpointer: Any) -> CompiledStateGraph[Any]:
    """The demo graph: planner -> agent <-> tools."""
    builder = StateGraph(STMState)
    builder.add_node("planner", _planner)
    builder.add_node("agent", _agent)
    builder.add_node("tools", _tools)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", "agent")
    builder.add_conditional_edges("agent", _route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def _describe(message: BaseMessage) -> str:
    if isinstance(message, AIMessage) and message.tool_calls:
        return "calls " + ", ".join(c["name"] for c in message.tool_calls)
    return str(message.content)[:60]


def _structured(values: dict[str, Any]) -> dict[str, Any]:
    return {key: values.get(key) for key in STM_FIELDS}


def _demo(db: Path, thread_id: str, out: TextIO) -> int:
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        print(
            "the demo needs the sqlite extra: pip install 'langgraph-stm[sqlite]'", file=sys.stderr
        )
        return 2
    config: Any = {"configurable": {"thread_id": thread_id}}
    counter = TokenCounter(model="gpt-4o")
    request = HumanMessage(
        "Migrate billing to v2. Never email external domains.", id=f"user-{thread_id}"
    )
    with SqliteSaver.from_conn_string(str(db)) as saver:
        graph = build_demo_graph(saver)
        final = graph.invoke({"messages": [request]}, config)
        steps = len(list(graph.get_state_history(config)))
    print(f"thread {thread_id} in {db} ({steps} checkpoints)", file=out)
    for message in final["messages"]:
        role = message_role(message)
        tokens = counter.count_message(message)
        print(f"  {role:>9} {tokens:>4} tok  {_describe(message)}", file=out)
    print(f"context: {counter(final['messages'])} tokens exactly (o200k_base)", file=out)
    print("structured state:", file=out)
    print(json.dumps(_structured(final), indent=2), file=out)

    with SqliteSaver.from_conn_string(str(db)) as fresh:
        reloaded = build_demo_graph(fresh).get_state(config).values
    same = _structured(reloaded) == _structured(final) and [m.id for m in reloaded["messages"]] == [
        m.id for m in final["messages"]
    ]
    print(f"reloaded from disk: {'identical' if same else 'DIFFERENT'}", file=out)
    return 0 if same else 1


def register(commands: Any) -> None:
    """Add ``demo`` to the command line."""
    demo = commands.add_parser("demo", help="run the offline demo agent on a SQLite file")
    demo.add_argument("--db", type=Path, default=Path("stm-demo.sqlite"), help="SQLite file")
    demo.add_argument("--thread", default=None, help="thread id (default: a new one)")
    demo.set_defaults(
        run=lambda a, io: _demo(a.db, a.thread or f"demo-{uuid.uuid4().hex[:8]}", io.out)
    )
