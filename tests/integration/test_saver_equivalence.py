"""Graphs behave identically with and without STMSaver, on every backend.

Each scenario runs twice on the same kind of backend, once with the plain saver and
once wrapped in STMSaver, and records a trace: the state after every step (values,
next nodes, interrupts, subgraph state), then the whole ``get_state_history``. The
traces must be equal. With the wrapper, the structured projection must also match
the state after every step.

Backends: InMemorySaver (sync and async), SqliteSaver, AsyncSqliteSaver,
PostgresSaver, AsyncPostgresSaver. Message ids are explicit so traces compare.

Messages are compared by their exact class and their full field dump, so a wrapper
that dropped ``additional_kwargs``, ``response_metadata``, ``tool_calls``,
``usage_metadata``, ``tool_call_id``, ``status``, ``artifact`` or ``name``, or turned an
``AIMessageChunk`` into an ``AIMessage``, would fail. The graphs write messages with
all of those fields set.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Interrupt, Send, StateSnapshot, interrupt
from typing_extensions import TypedDict

from langgraph_stm import STMState
from langgraph_stm.checkpoint import STMSaver

BACKENDS = [
    "memory-sync",
    "memory-async",
    "sqlite-sync",
    "sqlite-async",
    pytest.param("postgres-sync", marks=pytest.mark.postgres),
    pytest.param("postgres-async", marks=pytest.mark.postgres),
]

Trace = list[Any]


@asynccontextmanager
async def open_saver(
    backend: str, wrapped: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """Yield a fresh plain saver of ``backend``, wrapped in STMSaver when ``wrapped``."""
    name = f"{'stm' if wrapped else 'plain'}-{uuid.uuid4().hex[:8]}.sqlite"
    if backend.startswith("memory"):
        inner: BaseCheckpointSaver[Any] = InMemorySaver()
        yield STMSaver(inner) if wrapped else inner
    elif backend == "sqlite-sync":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(str(tmp_path / name)) as sqlite_saver:
            yield STMSaver(sqlite_saver) if wrapped else sqlite_saver
    elif backend == "sqlite-async":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / name)) as asqlite_saver:
            yield STMSaver(asqlite_saver) if wrapped else asqlite_saver
    elif backend == "postgres-sync":
        from langgraph.checkpoint.postgres import PostgresSaver

        uri = request.getfixturevalue("postgres_uri")
        with PostgresSaver.from_conn_string(uri) as pg_saver:
            saver: BaseCheckpointSaver[Any] = STMSaver(pg_saver) if wrapped else pg_saver
            saver.setup()  # type: ignore[attr-defined]
            yield saver
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        uri = request.getfixturevalue("postgres_uri")
        async with AsyncPostgresSaver.from_conn_string(uri) as apg_saver:
            asaver: Any = STMSaver(apg_saver) if wrapped else apg_saver
            await (asaver.asetup() if wrapped else asaver.setup())
            yield asaver


def normalize(value: Any) -> Any:
    """Turn state values into comparable plain data.

    A message becomes its class (module and name, so ``AIMessageChunk`` differs from
    ``AIMessage``) and its full ``model_dump()``. An interrupt is compared by value:
    its id derives from the run's checkpoint ids, which differ between runs.
    """
    if isinstance(value, Interrupt):
        return ("interrupt", normalize(value.value))
    if isinstance(value, BaseMessage):
        cls = type(value)
        return ("message", cls.__module__, cls.__qualname__, normalize(value.model_dump()))
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    return value


def snapshot_trace(snap: StateSnapshot) -> Any:
    """The comparable part of a state snapshot, including subgraph state."""
    tasks = []
    for task in snap.tasks:
        sub = task.state
        tasks.append(
            (
                task.name,
                [normalize(i) for i in task.interrupts],
                normalize(task.result),
                snapshot_trace(sub) if isinstance(sub, StateSnapshot) else None,
            )
        )
    return {
        "values": normalize(snap.values),
        "next": list(snap.next),
        "tasks": tasks,
        "source": (snap.metadata or {}).get("source"),
        "step": (snap.metadata or {}).get("step"),
    }


class Runner:
    """Drives a compiled graph through its sync or async API and records a trace."""

    def __init__(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        saver: BaseCheckpointSaver[Any],
        is_async: bool,
        durability: Any = None,
    ) -> None:
        self.graph = graph
        self.saver = saver
        self.is_async = is_async
        self.kwargs: dict[str, Any] = {} if durability is None else {"durability": durability}
        self.config: RunnableConfig = {"configurable": {"thread_id": f"thread-{uuid.uuid4().hex}"}}
        self.trace: Trace = []

    async def invoke(self, value: Any, config: RunnableConfig | None = None) -> None:
        config = config or self.config
        if self.is_async:
            result = await self.graph.ainvoke(value, config, **self.kwargs)
        else:
            result = self.graph.invoke(value, config, **self.kwargs)
        self.trace.append(("result", normalize(result)))
        await self.record()

    async def state(self, config: RunnableConfig | None = None) -> StateSnapshot:
        config = config or self.config
        if self.is_async:
            return await self.graph.aget_state(config, subgraphs=True)
        return self.graph.get_state(config, subgraphs=True)

    async def history(self) -> list[StateSnapshot]:
        if self.is_async:
            return [s async for s in self.graph.aget_state_history(self.config)]
        return list(self.graph.get_state_history(self.config))

    async def update(
        self, config: RunnableConfig, values: Any, as_node: str | None = None
    ) -> RunnableConfig:
        if self.is_async:
            new = await self.graph.aupdate_state(config, values, as_node=as_node)
        else:
            new = self.graph.update_state(config, values, as_node=as_node)
        await self.record()
        return new

    async def record(self) -> None:
        snap = await self.state()
        self.trace.append(("state", snapshot_trace(snap)))
        if isinstance(self.saver, STMSaver):
            await self.check_projection(snap)

    async def check_projection(self, snap: StateSnapshot) -> None:
        thread_id = self.config["configurable"]["thread_id"]
        if self.is_async:
            projected = await self.saver.aget_thread_state(thread_id)  # type: ignore[attr-defined]
        else:
            projected = self.saver.get_thread_state(thread_id)  # type: ignore[attr-defined]
        assert projected is not None
        values = snap.values
        assert projected.checkpoint_id == snap.config["configurable"]["checkpoint_id"]
        assert projected.goal == values.get("goal")
        assert projected.plan == values.get("plan", [])
        assert projected.constraints == values.get("constraints", [])
        assert projected.last_error == values.get("last_error")
        assert projected.summary == values.get("summary")
        # With DeltaChannel the checkpoint holds no message list, so no count is known.
        if projected.message_count is not None:
            assert projected.message_count == len(values.get("messages", []))

    async def finish(self) -> Trace:
        for snap in await self.history():
            self.trace.append(("history", snapshot_trace(snap)))
        return self.trace


Scenario = Callable[[BaseCheckpointSaver[Any], bool], Awaitable[Trace]]


def human(i: int, text: str) -> HumanMessage:
    return HumanMessage(id=f"h{i}", content=text)


def rich_ai(message_id: str, content: Any, n: int) -> AIMessage:
    """An AI message with every optional field set: name, tool calls, usage, metadata."""
    return AIMessage(
        id=message_id,
        content=content,
        name="assistant",
        tool_calls=[
            {"id": f"call-{message_id}", "name": "lookup", "args": {"q": message_id, "n": n}}
        ],
        invalid_tool_calls=[
            {"id": f"bad-{message_id}", "name": "lookup", "args": "{oops", "error": "bad json"}
        ],
        usage_metadata={
            "input_tokens": n,
            "output_tokens": 2 * n + 1,
            "total_tokens": 3 * n + 1,
            "input_token_details": {"cache_read": n},
        },
        response_metadata={"model_name": "fake-model", "finish_reason": "tool_calls", "seq": n},
        additional_kwargs={"refusal": None, "custom": {"turn": n, "tags": ["a", "b"]}},
    )


def rich_chunk(message_id: str, n: int) -> AIMessageChunk:
    """A streamed AI chunk, with tool call chunks, usage and metadata."""
    return AIMessageChunk(
        id=message_id,
        content=f"chunk {n}",
        name="streamer",
        tool_call_chunks=[
            {"id": f"call-{message_id}", "name": "lookup", "args": '{"n": ', "index": 0}
        ],
        usage_metadata={"input_tokens": 1, "output_tokens": n, "total_tokens": n + 1},
        response_metadata={"model_name": "fake-model", "chunk": n},
        additional_kwargs={"stream": {"part": n}},
    )


def tool_error(message_id: str, call_id: str, n: int) -> ToolMessage:
    """A failed tool result with an artifact, a name and metadata."""
    return ToolMessage(
        id=message_id,
        content=[{"type": "text", "text": f"lookup failed {n}"}],
        tool_call_id=call_id,
        name="lookup",
        status="error",
        artifact={"raw": [n, "timeout"], "code": 504, "nested": {"retry": n % 2 == 0}},
        additional_kwargs={"attempt": n},
        response_metadata={"latency_ms": 10 * n},
    )


async def scenario_interrupt_and_resume(saver: BaseCheckpointSaver[Any], is_async: bool) -> Trace:
    """A node asks for approval with interrupt(); Command(resume=...) continues it."""

    def plan(state: STMState) -> dict[str, Any]:
        n = len(state["messages"])
        return {
            "goal": "refund order 42",
            "plan": [{"id": "s1", "task": "check order"}, {"id": "s2", "task": "refund"}],
            "messages": [rich_ai(f"plan-{n}", "planning", n)],
        }

    def approve(state: STMState) -> dict[str, Any]:
        n = len(state["messages"])
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        assert last.tool_calls
        call_id = str(last.tool_calls[0]["id"])
        answer = interrupt({"question": "refund?", "count": n, "draft": rich_chunk(f"d{n}", n)})
        return {
            "plan": {"id": "s2", "status": "done"},
            "messages": [
                tool_error(f"tool-{answer}", call_id, n),
                AIMessage(id=f"done-{answer}", content=f"answer: {answer}"),
            ],
        }

    graph = (
        StateGraph(STMState)
        .add_node(plan)
        .add_node(approve)
        .add_edge(START, "plan")
        .add_edge("plan", "approve")
        .compile(checkpointer=saver)
    )
    run = Runner(graph, saver, is_async)
    await run.invoke({"messages": [human(1, "refund please")]})
    await run.invoke(Command(resume="yes"))
    await run.invoke({"messages": [human(2, "and another")]})
    await run.invoke(Command(resume="no"))
    return await run.finish()


class Fanout(STMState, total=False):
    visits: Annotated[list[str], operator.add]
    chunks: Annotated[list[AnyMessage], operator.add]
    """Appended without add_messages, so AIMessageChunk stays a chunk."""


async def scenario_parallel_nodes(saver: BaseCheckpointSaver[Any], is_async: bool) -> Trace:
    """Two branches run in the same step and a Send fan-out; all append messages."""

    def left(state: Fanout) -> dict[str, Any]:
        n = len(state["messages"])
        return {
            "messages": [rich_ai(f"left-{n}", "left", n)],
            "visits": ["left"],
            "chunks": [rich_chunk(f"lc-{n}", n)],
        }

    def right(state: Fanout) -> dict[str, Any]:
        n = len(state["messages"])
        return {
            "messages": [
                ChatMessage(id=f"right-{n}", content="right", role="critic", name="r"),
                SystemMessage(id=f"sys-{n}", content="be nice", additional_kwargs={"n": n}),
            ],
            "visits": ["right"],
            "chunks": [rich_chunk(f"rc-{n}", n), rich_ai(f"ra-{n}", "not a chunk", n)],
        }

    def worker(arg: dict[str, Any]) -> dict[str, Any]:
        message_id = f"w-{arg['i']}-{arg['n']}"
        if arg["i"] == 1:
            return {"messages": [tool_error(message_id, f"call-left-{arg['n']}", arg["n"])]}
        return {"messages": [AIMessage(id=message_id, content="w")]}

    def fan(state: Fanout) -> list[Send]:
        return [Send("worker", {"i": i, "n": len(state["messages"])}) for i in range(3)]

    def join(state: Fanout) -> dict[str, Any]:
        return {"goal": f"joined {len(state['messages'])}"}

    graph = (
        StateGraph(Fanout)
        .add_node(left)
        .add_node(right)
        .add_node("worker", worker)
        .add_node(join)
        .add_edge(START, "left")
        .add_edge(START, "right")
        .add_conditional_edges("left", fan, ["worker"])
        .add_edge(["left", "right"], "join")
        .add_edge("worker", "join")
        .compile(checkpointer=saver)
    )
    run = Runner(graph, saver, is_async)
    for i in range(3):
        await run.invoke({"messages": [human(i, f"turn {i}")]})
    return await run.finish()


async def scenario_subgraph_namespaces(saver: BaseCheckpointSaver[Any], is_async: bool) -> Trace:
    """A subgraph writes messages under its own checkpoint namespace and interrupts."""

    def draft(state: STMState) -> dict[str, Any]:
        n = len(state["messages"])
        content = [{"type": "text", "text": "draft"}, {"type": "text", "text": f"v{n}"}]
        return {"messages": [rich_ai(f"draft-{n}", content, n)]}

    def review(state: STMState) -> dict[str, Any]:
        verdict = interrupt("review the draft")
        n = len(state["messages"])
        return {"messages": [AIMessage(id=f"review-{n}", content=verdict)], "goal": verdict}

    child = (
        StateGraph(STMState)
        .add_node(draft)
        .add_node(review)
        .add_edge(START, "draft")
        .add_edge("draft", "review")
        .compile()
    )
    graph = (
        StateGraph(STMState)
        .add_node("child", child)
        .add_edge(START, "child")
        .compile(checkpointer=saver)
    )
    run = Runner(graph, saver, is_async)
    await run.invoke({"messages": [human(1, "write it")]})
    await run.invoke(Command(resume="looks good"))
    await run.invoke({"messages": [human(2, "again")]})
    await run.invoke(Command(resume="ship it"))
    return await run.finish()


async def scenario_update_state_and_fork(saver: BaseCheckpointSaver[Any], is_async: bool) -> Trace:
    """update_state edits, removes and forks; time travel replays from an old checkpoint."""

    def reply(state: STMState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [rich_ai(f"ai-{n}", f"reply to {n}", n)]}

    graph = (
        StateGraph(STMState).add_node(reply).add_edge(START, "reply").compile(checkpointer=saver)
    )
    run = Runner(graph, saver, is_async)
    for i in range(4):
        await run.invoke({"messages": [human(i, f"q{i}")]})
    # Edit a message in place (same id, new content) and remove another.
    await run.update(
        run.config,
        {
            "messages": [
                HumanMessage(
                    id="h1", content="q1 edited", name="editor", additional_kwargs={"edit": 1}
                ),
                RemoveMessage(id="ai-3"),
            ]
        },
        as_node="reply",
    )
    await run.update(run.config, {"constraints": [{"id": "c1", "text": "be brief"}]})
    # Fork from an early checkpoint and continue the fork.
    history = await run.history()
    early = next(s for s in reversed(history) if len(s.values.get("messages", [])) == 2)
    fork = await run.update(early.config, {"goal": "forked"}, as_node="reply")
    await run.invoke({"messages": [human(9, "on the fork")]}, fork)
    # Replay from an old checkpoint without new input.
    replay = next(s for s in reversed(history) if s.next == ("reply",))
    await run.invoke(None, replay.config)
    return await run.finish()


async def scenario_long_thread_trim_and_fork(
    saver: BaseCheckpointSaver[Any], is_async: bool
) -> Trace:
    """A thread long enough for STMSaver to pack bodies; the oldest messages are then
    removed (the list no longer starts at a pack) and an early checkpoint is forked."""

    def reply(state: STMState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [rich_ai(f"ai-{n}", f"reply to {n}", n)]}

    graph = (
        StateGraph(STMState).add_node(reply).add_edge(START, "reply").compile(checkpointer=saver)
    )
    run = Runner(graph, saver, is_async)
    for i in range(40):
        # Every fourth turn is a failed tool result, so packs mix message classes.
        message = (
            tool_error(f"t{i}", f"call-ai-{2 * i - 1}", i) if i % 4 == 3 else human(i, f"q{i}")
        )
        await run.invoke({"messages": [message]})
    removed = [RemoveMessage(id=m.id) for m in (await run.state()).values["messages"][:5]]
    await run.update(run.config, {"messages": removed}, as_node="reply")
    await run.invoke({"messages": [human(40, "after the trim")]})
    history = await run.history()
    early = next(s for s in reversed(history) if len(s.values.get("messages", [])) == 50)
    fork = await run.update(early.config, {"goal": "forked"}, as_node="reply")
    await run.invoke({"messages": [human(41, "on the fork")]}, fork)
    return await run.finish()


def add_messages_batch(current: list[AnyMessage], batches: Sequence[Any]) -> list[AnyMessage]:
    """DeltaChannel reducer: add_messages over a batch of writes."""
    result = current
    for batch in batches:
        result = add_messages(result, batch)  # type: ignore[assignment]
    return result


class DeltaState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], DeltaChannel(add_messages_batch, snapshot_frequency=3)]
    goal: str | None


async def scenario_delta_channel(saver: BaseCheckpointSaver[Any], is_async: bool) -> Trace:
    """A graph whose messages use DeltaChannel keeps working, snapshots included."""

    def reply(state: DeltaState) -> dict[str, Any]:
        n = len(state.get("messages", []))
        return {"messages": [rich_ai(f"ai-{n}", f"reply {n}", n)], "goal": f"g{n}"}

    graph = (
        StateGraph(DeltaState).add_node(reply).add_edge(START, "reply").compile(checkpointer=saver)
    )
    run = Runner(graph, saver, is_async)
    for i in range(6):
        await run.invoke({"messages": [human(i, f"q{i}")]})
    await run.update(run.config, {"messages": [RemoveMessage(id="h0")]}, as_node="reply")
    return await run.finish()


async def scenario_message_edited_in_place(
    saver: BaseCheckpointSaver[Any], is_async: bool
) -> Trace:
    """A node edits a message object it received and returns it under the same id."""

    def answer(state: STMState) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [rich_ai(f"a{n}", "draft", n)]}

    def polish(state: STMState) -> dict[str, Any]:
        message = state["messages"][-1]
        assert isinstance(message, AIMessage)
        n = len(state["messages"])
        message.content = f"final {n}"
        # Nested fields edited in place too: only the stored copy can tell them apart.
        message.additional_kwargs["custom"]["tags"].append("polished")
        message.response_metadata["finish_reason"] = "stop"
        message.tool_calls[0]["args"]["n"] = -n
        if message.usage_metadata is not None:
            message.usage_metadata["output_tokens"] += 100
        return {"messages": [message]}

    graph = (
        StateGraph(STMState)
        .add_node(answer)
        .add_node(polish)
        .add_edge(START, "answer")
        .add_edge("answer", "polish")
        .compile(checkpointer=saver)
    )
    # Durability "sync": with "async", a checkpoint may be serialized while the next
    # node edits the message, so even the plain saver stores either body.
    run = Runner(graph, saver, is_async, durability="sync")
    for i in range(3):
        await run.invoke({"messages": [human(i, f"q{i}")]})
    return await run.finish()


SCENARIOS: dict[str, Scenario] = {
    "interrupt-resume": scenario_interrupt_and_resume,
    "parallel-nodes": scenario_parallel_nodes,
    "subgraph-namespaces": scenario_subgraph_namespaces,
    "update-state-fork": scenario_update_state_and_fork,
    "delta-channel": scenario_delta_channel,
    "long-thread-trim-fork": scenario_long_thread_trim_and_fork,
    "message-edited-in-place": scenario_message_edited_in_place,
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("backend", BACKENDS)
async def test_graph_behaves_identically_with_and_without_stm_saver(
    backend: str, scenario: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The same scenario gives the same trace with the plain saver and with STMSaver."""
    is_async = backend.endswith("async")
    traces = []
    for wrapped in (False, True):
        async with open_saver(backend, wrapped, tmp_path, request) as saver:
            traces.append(await SCENARIOS[scenario](saver, is_async))
    plain, stm = traces
    assert len(plain) == len(stm)
    for i, (a, b) in enumerate(zip(plain, stm, strict=True)):
        assert a == b, f"trace entry {i} differs"
