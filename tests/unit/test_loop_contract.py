"""The facts about LangGraph's loop that exclusive runs rely on (``_inner.py``).

If a LangGraph release changes one of them, these fail loudly instead of exclusive
runs quietly holding threads (or letting a second run through).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, Checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt

from langgraph_stm.checkpoint._inner import (
    RUN_ENDING_CHANNELS,
    RUNTIME_KEY,
    is_run_read,
    triggers_a_node,
)


class _Spy(InMemorySaver):
    """Records each read's kind and each checkpoint's "does the run go on"."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[bool] = []
        self.goes_on: list[bool] = []
        self.write_channels: list[str] = []

    def get_tuple(self, config: RunnableConfig) -> Any:
        self.reads.append(is_run_read(config))
        return super().get_tuple(config)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: Any, v: Any) -> Any:
        if not config["configurable"].get("checkpoint_ns"):
            self.goes_on.append(triggers_a_node(checkpoint))
        return super().put(config, checkpoint, metadata, v)

    def put_writes(self, config: RunnableConfig, writes: Any, task_id: str, path: str = "") -> None:
        self.write_channels.extend(channel for channel, _ in writes)
        super().put_writes(config, writes, task_id, path)


class _S(TypedDict):
    x: Annotated[list[str], operator.add]


def _a(state: _S) -> dict[str, Any]:
    return {"x": ["a"]}


def _b(state: _S) -> dict[str, Any]:
    return {"x": ["b"]}


def _run(builder: StateGraph[Any]) -> _Spy:
    saver = _Spy()
    builder.compile(checkpointer=saver).invoke({"x": []}, {"configurable": {"thread_id": "t"}})
    return saver


class TestRunRead:
    def test_the_runtime_key_is_langgraphs(self) -> None:
        """The key a run's config carries its Runtime under."""
        import langgraph.runtime

        assert langgraph.runtime.CONFIG_KEY_RUNTIME == RUNTIME_KEY

    def test_a_run_reads_with_its_runtime_and_get_state_without(self) -> None:
        """invoke/stream/update_state vs get_state: only a run's read is a run read."""
        builder = StateGraph(_S).add_node(_a).add_edge(START, "_a")
        saver = _Spy()
        graph = builder.compile(checkpointer=saver)
        config: RunnableConfig = {"configurable": {"thread_id": "t"}}
        graph.invoke({"x": []}, config)
        assert saver.reads == [True]
        graph.get_state(config)
        list(graph.get_state_history(config))
        assert saver.reads == [True, False]
        graph.update_state(config, {"x": ["u"]})
        assert saver.reads[-1] is False
        list(graph.stream({"x": []}, config))
        assert saver.reads[-1] is True

    def test_a_run_addressed_at_a_checkpoint_reads_no_run_start(self) -> None:
        """A replay from a past checkpoint id reads it and the latest (to see whether
        the thread moved past it): neither read starts a run on the latest."""
        builder = StateGraph(_S).add_node(_a).add_edge(START, "_a")
        saver = _Spy()
        graph = builder.compile(checkpointer=saver)
        config: RunnableConfig = {"configurable": {"thread_id": "t"}}
        graph.invoke({"x": []}, config)
        graph.invoke({"x": []}, config)
        past = list(graph.get_state_history(config))[-1].config
        saver.reads.clear()
        graph.invoke(None, past)
        assert len(saver.reads) == 2
        assert saver.reads == [False, False]


class TestRunEnd:
    def test_only_the_last_checkpoint_of_a_linear_graph_schedules_nothing(self) -> None:
        """START -> a -> b: input, a and b's checkpoints: the last one ends the run."""
        builder = StateGraph(_S).add_node(_a).add_node(_b)
        saver = _run(builder.add_edge(START, "_a").add_edge("_a", "_b"))
        assert saver.goes_on == [True, True, True, False]

    def test_a_conditional_edge_to_end_ends_the_run(self) -> None:
        """A router that returns END: the checkpoint after it schedules nothing."""
        builder = StateGraph(_S).add_node(_a).add_node(_b).add_edge(START, "_a")
        saver = _run(builder.add_conditional_edges("_a", lambda s: END, ["_b", END]))
        assert saver.goes_on == [True, True, False]

    def test_send_and_join_go_on_until_the_join_ran(self) -> None:
        """Send fan-out to two nodes, then a join: every step but the last goes on."""

        def fan(state: _S) -> list[Send]:
            return [Send("_b", state), Send("c", state)]

        builder = StateGraph(_S).add_node(_a).add_node(_b).add_node("c", _b).add_node("d", _a)
        builder.add_edge(START, "_a").add_conditional_edges("_a", fan)
        saver = _run(builder.add_edge(["_b", "c"], "d"))
        assert saver.goes_on[-1] is False
        assert all(saver.goes_on[:-1])
        assert len(saver.goes_on) == 5

    def test_a_subgraph_step_goes_on_and_the_parent_end_ends(self) -> None:
        """A compiled subgraph as a node, then b: the root's last checkpoint ends."""
        sub = StateGraph(_S).add_node(_a).add_edge(START, "_a").compile()
        builder = StateGraph(_S).add_node("s", sub).add_node(_b)
        saver = _run(builder.add_edge(START, "s").add_edge("s", "_b"))
        assert saver.goes_on == [True, True, True, False]

    def test_the_functional_api_ends_with_its_return(self) -> None:
        """@entrypoint with @task calls: the input goes on, the return ends."""
        saver = _Spy()

        @task
        def inc(x: int) -> int:
            return x + 1

        @entrypoint(checkpointer=saver)
        def flow(x: int) -> int:
            return int(inc(x).result()) + 1

        assert flow.invoke(1, {"configurable": {"thread_id": "f"}}) == 3
        assert saver.goes_on == [True, False]

    def test_an_interrupt_and_an_error_are_run_ending_writes(self) -> None:
        """The channels an interrupted or failed task writes are the ones we watch."""

        def ask(state: _S) -> dict[str, Any]:
            return {"x": [interrupt("ok?")]}

        def fail(state: _S) -> dict[str, Any]:
            raise RuntimeError("boom")

        saver = _Spy()
        graph = StateGraph(_S).add_node(ask).add_node(fail).add_edge(START, "ask")
        graph = graph.add_edge("ask", "fail").compile(checkpointer=saver)
        config: RunnableConfig = {"configurable": {"thread_id": "t"}}
        graph.invoke({"x": []}, config)
        with pytest.raises(RuntimeError, match="boom"):
            graph.invoke(Command(resume="yes"), config)
        assert set(saver.write_channels) >= RUN_ENDING_CHANNELS
        assert set(WRITES_IDX_MAP) >= RUN_ENDING_CHANNELS

    def test_a_checkpoint_that_does_not_say_counts_as_going_on(self) -> None:
        """No ``updated_channels`` (an old or foreign checkpoint): assume the run goes on."""
        checkpoint: Any = {"id": "1", "channel_values": {}}
        assert triggers_a_node(checkpoint) is True
        assert triggers_a_node({**checkpoint, "updated_channels": ["x"]}) is False
