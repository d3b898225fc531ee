"""Regression tests for STMSaver bugs found in review (issue 5), one per finding.

A new finding is added here first as ``xfail(strict=True)``; the fix removes the marker
(a strict xfail that starts passing turns the run red).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt

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
    """Reproducers of the review findings (all fixed so far)."""

    def test_message_edited_in_place_is_stored_with_its_new_content(self) -> None:
        """A message edited in place and returned under its id is stored as edited."""
        plain = _history_contents(SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False)))
        inner = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
        wrapped = _history_contents(STMSaver(inner))
        assert plain[0] == "final"
        assert wrapped == plain

    @pytest.mark.parametrize("durability", ["sync", "async", "exit"])
    def test_in_place_edit_is_stored_whatever_the_durability(self, durability: Any) -> None:
        """With ``durability="exit"`` LangGraph reports no pending writes, so the saver
        cannot learn from them that a node returned an edited message object; the final
        checkpoint must still hold the edit (a reviewer found it lost; fixed)."""

        def edit(state: STMState) -> dict[str, Any]:
            message = state["messages"][0]
            message.content = f"{message.content}!"
            return {"messages": [message]}

        with STMSaver.from_sqlite(":memory:") as saver:
            saver.setup()
            graph = StateGraph(STMState).add_node(edit).add_edge(START, "edit")
            app = graph.compile(checkpointer=saver)
            app.invoke({"messages": [HumanMessage("hi", id="h")]}, CONFIG, durability=durability)
            app.invoke({"messages": []}, CONFIG, durability=durability)
            saver = STMSaver(saver.inner)  # a new wrapper: read what is stored, not cached
            tup = saver.get_tuple(CONFIG)
            assert tup is not None
            assert tup.checkpoint["channel_values"]["messages"][0].content == "hi!!"

    @pytest.mark.parametrize("durability", ["sync", "exit"])
    def test_in_place_edit_after_a_resume_is_stored(self, durability: Any) -> None:
        """The interrupted run reported its tasks' writes on the checkpoint the resume
        starts from; with ``durability="exit"`` the resumed tasks report none, so those
        earlier reports must not vouch for the resumed run's objects (a reviewer found
        the edit lost when the interrupted run's writes landed after its checkpoint).
        Pending writes are delayed here to make that ordering certain."""

        class SlowWrites(STMSaver):
            def put_writes(self, *args: Any, **kwargs: Any) -> None:
                time.sleep(0.05)
                super().put_writes(*args, **kwargs)

        def ask(state: STMState) -> dict[str, Any]:
            if len(state["messages"]) > 1:
                interrupt("ok?")
            return {}

        def edit(state: STMState) -> dict[str, Any]:
            message = state["messages"][0]
            message.content = f"{message.content}!"
            return {"messages": [message]}

        with SqliteSaver.from_conn_string(":memory:") as inner:
            saver = SlowWrites(inner)
            saver.setup()
            graph = StateGraph(STMState).add_node(ask).add_node(edit)
            app = graph.add_edge(START, "ask").add_edge("ask", "edit").compile(checkpointer=saver)
            app.invoke({"messages": [HumanMessage("hi", id="h")]}, CONFIG, durability=durability)
            app.invoke({"messages": [HumanMessage("more", id="m")]}, CONFIG, durability=durability)
            out = app.invoke(Command(resume="yes"), CONFIG, durability=durability)
            assert out["messages"][0].content == "hi!!"
            saver = STMSaver(saver.inner)  # a new wrapper: read what is stored
            tup = saver.get_tuple(CONFIG)
            assert tup is not None
            assert tup.checkpoint["channel_values"]["messages"][0].content == "hi!!"

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

    def test_failed_sync_write_never_breaks_another_thread(self, sqlite_path: Path) -> None:
        """Two puts on one SqliteSaver from two threads, one failing: the other stays readable.

        A put's rows and checkpoint share one transaction of the shared connection, so a
        second put waits until the first is committed and its failure (a rollback) can
        only undo its own rows."""
        with SqliteSaver.from_conn_string(str(sqlite_path)) as inner:
            saver = STMSaver(inner)
            saver.setup()
            real = inner.put
            a_in_put, a_release, b_in_put = threading.Event(), threading.Event(), threading.Event()

            def patched_put(config: Any, *args: Any, **kwargs: Any) -> Any:
                if config["configurable"]["thread_id"] == "B":
                    b_in_put.set()
                    raise RuntimeError("inner put failed")
                a_in_put.set()
                assert a_release.wait(5)
                return real(config, *args, **kwargs)

            inner.put = patched_put  # type: ignore[method-assign]

            def put(thread_id: str) -> Any:
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {
                    "messages": [HumanMessage(f"hello from {thread_id}", id=f"{thread_id}-1")]
                }
                checkpoint["channel_versions"] = {"messages": 1}
                config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
                return saver.put(config, checkpoint, {}, {"messages": 1})

            errors: list[BaseException] = []

            def failing_put() -> None:
                try:
                    put("B")
                except BaseException as exc:
                    errors.append(exc)

            worker = threading.Thread(target=put, args=("A",))
            worker.start()
            assert a_in_put.wait(5)
            other = threading.Thread(target=failing_put)
            other.start()
            assert not b_in_put.wait(0.3)  # B waits while A's transaction is open
            a_release.set()
            worker.join(5)
            other.join(5)
            assert len(errors) == 1
            assert isinstance(errors[0], RuntimeError)
            tup = STMSaver(inner).get_tuple(
                {"configurable": {"thread_id": "A", "checkpoint_ns": ""}}
            )
            assert tup is not None
            assert tup.checkpoint["channel_values"]["messages"][0].content == "hello from A"
            assert (
                STMSaver(inner).get_tuple({"configurable": {"thread_id": "B", "checkpoint_ns": ""}})
                is None
            )

    def test_list_records_grow_linearly_on_long_threads(self) -> None:
        """From 1,000 to 4,000 messages, list-record bytes grow at most ~linearly (<= 4.5x)."""
        from langgraph_stm.checkpoint._encoder import Encoder

        encoder = Encoder(JsonPlusSerializer())
        messages: list[Any] = []
        list_bytes = 0
        marks: dict[int, int] = {}
        parent: str | None = None
        for turn in range(1, 2001):
            messages = [*messages, HumanMessage("word " * 20, id=f"h{turn}")]
            for step in range(2):
                checkpoint_id = f"{turn:05d}.{step}"
                write = encoder.encode("t", "", checkpoint_id, parent, {"messages": messages}, None)
                list_bytes += sum(len(r.ops) for r in write.lists)
                encoder.installed(write)
                parent = checkpoint_id
                if step == 0:
                    messages = [*messages, AIMessage("word " * 20, id=f"a{turn}")]
            if turn in (500, 2000):
                marks[turn] = list_bytes
        assert marks[2000] / marks[500] <= 4.5


def _setup_at_once(setup: Any, workers: int = 4) -> None:
    """Run ``setup(index)`` in ``workers`` threads released together; re-raise any error."""
    barrier = threading.Barrier(workers)
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            setup(index, barrier)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


class TestConcurrentSetup:
    """Workers starting at once on a fresh database all set it up without errors."""

    @pytest.mark.postgres
    def test_postgres_setup_from_four_workers_at_once(self, postgres_uri: str) -> None:
        def setup(index: int, barrier: threading.Barrier) -> None:
            with STMSaver.from_postgres(postgres_uri) as saver:
                barrier.wait(10)
                saver.setup()
                assert saver.list_threads() == []

        _setup_at_once(setup)

    @pytest.mark.postgres
    def test_async_postgres_setup_from_four_workers_at_once(self, postgres_uri: str) -> None:
        def setup(index: int, barrier: threading.Barrier) -> None:
            async def run() -> None:
                async with STMSaver.from_async_postgres(postgres_uri) as saver:
                    barrier.wait(10)
                    await saver.asetup()
                    assert await saver.alist_threads() == []

            asyncio.run(run())

        _setup_at_once(setup)

    @pytest.mark.parametrize("attempt", range(3))
    def test_sqlite_setup_from_four_workers_at_once(self, sqlite_path: Path, attempt: int) -> None:
        def setup(index: int, barrier: threading.Barrier) -> None:
            with STMSaver.from_sqlite(sqlite_path) as saver:
                barrier.wait(10)
                saver.setup()
                assert saver.list_threads() == []

        _setup_at_once(setup)

    def test_async_sqlite_setup_from_four_workers_at_once(self, sqlite_path: Path) -> None:
        def setup(index: int, barrier: threading.Barrier) -> None:
            async def run() -> None:
                async with STMSaver.from_async_sqlite(sqlite_path) as saver:
                    barrier.wait(10)
                    await saver.asetup()
                    assert await saver.alist_threads() == []

            asyncio.run(run())

        _setup_at_once(setup)
