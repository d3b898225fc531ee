"""Known STMSaver bugs found in review (issue 5), written as the behaviour we want.

Each test is marked ``xfail(strict=True)`` until its fix lands: when a fix makes one
pass, the strict marker turns the run red, so the marker is removed with the fix.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph

from langgraph_stm import STMSaver, STMState

CONFIG: Any = {"configurable": {"thread_id": "t"}}


def _answer(state: STMState) -> dict[str, Any]:
    return {"messages": [AIMessage(id="a1", content="draft")]}


def _polish(state: STMState) -> dict[str, Any]:
    message = state["messages"][-1]
    message.content = "final"  # edited in place, returned under the same id
    return {"messages": [message]}


def _history_contents(saver: Any) -> list[str | None]:
    graph = (
        StateGraph(STMState)
        .add_node("answer", _answer)
        .add_node("polish", _polish)
        .add_edge(START, "answer")
        .add_edge("answer", "polish")
        .compile(checkpointer=saver)
    )
    graph.invoke({"messages": [HumanMessage("hi", id="h1")]}, CONFIG, durability="sync")
    return [
        str(s.values["messages"][-1].content) if s.values.get("messages") else None
        for s in graph.get_state_history(CONFIG)
    ]


class TestKnownBugs:
    """Reproducers of the review findings that are still open."""

    @pytest.mark.xfail(
        strict=True,
        raises=AssertionError,
        reason="B1: message edited in place is stored with its old body",
    )
    def test_message_edited_in_place_is_stored_with_its_new_content(self) -> None:
        """A message edited in place and returned under its id is stored as edited."""
        plain = _history_contents(SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False)))
        inner = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
        wrapped = _history_contents(STMSaver(inner))
        assert plain[0] == "final"
        assert wrapped == plain

    @pytest.mark.xfail(
        strict=True, raises=LookupError, reason="B3: cached delta base deleted by another worker"
    )
    def test_thread_deleted_by_another_worker_can_be_reused(self, sqlite_path: Path) -> None:
        """Worker B deletes a thread; worker A reuses the id; both can read it afterwards."""

        def reply(state: STMState) -> dict[str, Any]:
            return {"messages": [AIMessage(f"r{len(state['messages'])}")]}

        with STMSaver.from_sqlite(sqlite_path) as a, STMSaver.from_sqlite(sqlite_path) as b:
            a.setup()
            b.setup()
            graph = (
                StateGraph(STMState)
                .add_node(reply)
                .add_edge(START, "reply")
                .compile(checkpointer=a)
            )
            for i in range(3):
                graph.invoke({"messages": [HumanMessage(f"q{i}")]}, CONFIG)
            b.delete_thread("t")
            graph.invoke({"messages": [HumanMessage("new conversation")]}, CONFIG)
            assert len(graph.get_state(CONFIG).values["messages"]) == 2
            assert b.get_tuple(CONFIG) is not None

    @pytest.mark.xfail(
        strict=True, raises=LookupError, reason="B2: a cancelled put rolls back other writers' rows"
    )
    async def test_cancelled_write_never_breaks_another_thread(self, sqlite_path: Path) -> None:
        """Two concurrent puts on one AsyncSqliteSaver, one cancelled: the other stays readable."""
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(sqlite_path)) as inner:
            saver = STMSaver(inner)
            await saver.asetup()
            real = inner.aput

            async def slow_aput(*args: Any, **kwargs: Any) -> Any:
                await asyncio.sleep(0.05)
                return await real(*args, **kwargs)

            inner.aput = slow_aput  # type: ignore[method-assign]

            async def put(thread_id: str) -> Any:
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {
                    "messages": [HumanMessage(f"hello from {thread_id}", id=f"{thread_id}-1")]
                }
                checkpoint["channel_versions"] = {"messages": 1}
                config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
                return await saver.aput(config, checkpoint, {}, {"messages": 1})

            first = asyncio.create_task(put("A"))
            await asyncio.sleep(0.01)
            second = asyncio.create_task(put("B"))
            await asyncio.sleep(0.01)
            second.cancel()
            await asyncio.gather(first, second, return_exceptions=True)
            fresh = STMSaver(inner)
            tup = await fresh.aget_tuple({"configurable": {"thread_id": "A", "checkpoint_ns": ""}})
            assert tup is not None
            assert tup.checkpoint["channel_values"]["messages"][0].content == "hello from A"

    @pytest.mark.xfail(
        strict=True, raises=AssertionError, reason="B4: list records grow as N^2 on long threads"
    )
    def test_list_records_grow_linearly_on_long_threads(self) -> None:
        """From 1,000 to 4,000 messages, list-record bytes grow at most ~linearly (<= 4.5x)."""
        from langgraph_stm.checkpoint._codec import MessageCodec

        serde, codec = JsonPlusSerializer(), MessageCodec()
        messages: list[Any] = []
        list_bytes = 0
        marks: dict[int, int] = {}
        for turn in range(1, 2001):
            messages = [*messages, HumanMessage("word " * 20, id=f"h{turn}")]
            for step in range(2):
                encoded = codec.encode(serde, "t", "", {"messages": messages}, None)
                list_bytes += sum(len(r.ops) for r in encoded.lists)
                codec.install(encoded.updates)
                if step == 0:
                    messages = [*messages, AIMessage("word " * 20, id=f"a{turn}")]
            if turn in (500, 2000):
                marks[turn] = list_bytes
        assert marks[2000] / marks[500] <= 4.5
