"""The graph and conversation that wrote the schema-migration fixtures.

``tests/data/migrations/make_fixtures.py`` runs :func:`write_conversation` with the code
of an old commit (this module only needs ``langgraph_stm.STMState``, which every commit
has); ``tests/integration/test_migrations.py`` runs :func:`build_graph` with today's code
to write a new turn on the old threads. Everything is deterministic, so the messages a
fixture holds are known exactly.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from langgraph_stm import STMState

TOOL_CALL_ID = "call-weather-1"
"""Id of the one tool call of thread ``t1``."""
LONG_THREAD_MESSAGES = 257
"""Human messages imported at once into thread ``long``: a snapshot of 256 or more."""


def build_graph(checkpointer: Any) -> Any:
    """An agent that answers each human message, calling a tool when asked about weather."""

    def agent(state: STMState) -> dict[str, Any]:
        messages = state["messages"]
        last = messages[-1]
        n = len(messages)
        if isinstance(last, HumanMessage) and "weather" in str(last.content):
            call = {"name": "get_weather", "args": {"city": "Paris"}, "id": TOOL_CALL_ID}
            return {"messages": [AIMessage(id=f"ai-{n}", content="", tool_calls=[call])]}
        return {"messages": [reply(n)], "plan": [{"id": "s1", "task": "pick dates"}]}

    def tools(state: STMState) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        call = last.tool_calls[0]
        tool = ToolMessage(
            id=f"tool-{call['id']}",
            content="sunny, 21 C",
            tool_call_id=str(call["id"]),
            name=call["name"],
        )
        return {"messages": [tool]}

    def route(state: STMState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    return (
        StateGraph(STMState)
        .add_node(agent)
        .add_node(tools)
        .add_edge(START, "agent")
        .add_conditional_edges("agent", route, ["tools", END])
        .add_edge("tools", "agent")
        .compile(checkpointer=checkpointer)
    )


def reply(n: int) -> AIMessage:
    """The agent's answer to a list of ``n`` messages ending with a human message."""
    return AIMessage(
        id=f"ai-{n}",
        content=f"answer {n}",
        response_metadata={"model_name": "scripted"},
        usage_metadata={"input_tokens": n, "output_tokens": 9, "total_tokens": n + 9},
    )


def config(thread_id: str) -> RunnableConfig:
    """The run config of ``thread_id``."""
    return {"configurable": {"thread_id": thread_id}}


def human(thread_id: str, i: int, text: str | None = None) -> HumanMessage:
    """The ``i``-th human message of a thread (``text`` overrides its content)."""
    content = f"question {i} of {thread_id}" if text is None else text
    return HumanMessage(id=f"{thread_id}-h-{i}", content=content)


def write_conversation(graph: Any) -> None:
    """Thread ``t1``: 18 turns, one with a tool call (38 messages, so packs and deltas);
    ``t2``: 3 turns, the last editing the first message (a list that is not an append);
    ``long``: 257 human messages at once, then one turn (snapshots of 256 and more)."""
    for i in range(18):
        text = "what is the weather in Paris?" if i == 9 else None
        update: dict[str, Any] = {"messages": [human("t1", i, text)]}
        if i == 0:
            update["goal"] = "plan a trip to Paris"
        graph.invoke(update, config("t1"))
    graph.invoke({"messages": [human("t2", 0)], "goal": "write a haiku"}, config("t2"))
    graph.invoke({"messages": [human("t2", 1)]}, config("t2"))
    edited = human("t2", 0, "question 0 of t2, edited")
    graph.invoke({"messages": [edited, human("t2", 2)]}, config("t2"))
    # A bulk import through update_state: the 257 messages are stored once, as bodies
    # (an input of that size would also sit in the input checkpoint and its writes).
    first = [human("long", i, f"line {i}") for i in range(LONG_THREAD_MESSAGES)]
    update = {"messages": first, "goal": "read a long log"}
    graph.update_state(config("long"), update, as_node="agent")
    graph.invoke({"messages": [human("long", LONG_THREAD_MESSAGES)]}, config("long"))


def dump_messages(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """Messages as the fixtures record them: class name plus full field dump."""
    return [{"class": type(m).__name__, **m.model_dump()} for m in messages]


def dump_thread(graph: Any, thread_id: str) -> dict[str, Any]:
    """What a fixture records of a thread: the latest state and the message ids of every
    checkpoint (newest first)."""
    values = graph.get_state(config(thread_id)).values
    history = [
        [s.config["configurable"]["checkpoint_id"], [m.id for m in s.values.get("messages", [])]]
        for s in graph.get_state_history(config(thread_id))
    ]
    return {
        "goal": values.get("goal"),
        "plan": values.get("plan", []),
        "messages": dump_messages(values["messages"]),
        "history": history,
    }
