"""Export -> JSON text -> import, across InMemorySaver, SqliteSaver and PostgresSaver.

A real graph over ``STMState`` (plus keys of its own) runs turns with parallel tool
calls, a running summary (``SummarizeNode`` with ``token_counter=len``), plan,
constraints, artifacts and last_error. The thread is exported, written as JSON text,
read back and imported into an empty thread of another (or the same) backend. Then:

- ``graph.get_state(config).values`` is the same (messages compared by exact class and
  full ``model_dump()``), the structured projection (``get_thread_state``) too;
- the imported thread is at rest and continues like the source: the same next turn on
  both gives the same values.

Also: the async twins over AsyncSqliteSaver / AsyncPostgresSaver, a thread paused at
``interrupt()`` (its values are exported, its pending interrupt is not), subgraph
namespaces in ``checkpoints``, a channel that is not JSON data, the TTL accessor, and
the refusals (unknown thread, non-empty target, bad document).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import operator
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any
from unittest.mock import ANY

import pytest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from langgraph_stm import STMState, SummarizeNode
from langgraph_stm._errors import InvalidArgumentError
from langgraph_stm.checkpoint import STMSaver
from langgraph_stm.checkpoint._document import SCHEMA, VERSION

_Saver = STMSaver


Graph = CompiledStateGraph[Any, Any, Any, Any]


class AgentState(STMState, total=False):
    """STMState plus keys of the user's own."""

    notes: Annotated[list[str], operator.add]
    turns: int
    profile: dict[str, Any]


def batch(state: Any, writes: list[Any]) -> Any:
    """DeltaChannel reducer: add_messages over a batch of writes."""
    for write in writes:
        state = add_messages(state, write)
    return state


class Delta(TypedDict):
    """Messages in a DeltaChannel."""

    messages: Annotated[list[AnyMessage], DeltaChannel(batch, snapshot_frequency=2)]
    goal: str


# -- the graph --------------------------------------------------------------------------
def _turn(state: AgentState) -> str:
    human = next(m for m in reversed(state["messages"]) if isinstance(m, HumanMessage))
    return human.id or "h?"


def agent(state: AgentState) -> dict[str, Any]:
    """Per user turn: two parallel lookups with structured updates, then a reply."""
    turn = _turn(state)
    turns = state.get("turns", 0)
    if isinstance(state["messages"][-1], HumanMessage):
        calls = [
            {
                "name": "lookup",
                "args": {"turn": turn, "part": k, "tags": ["a", "b"]},
                "id": f"{turn}-c{k}",
            }
            for k in range(2)
        ]
        update: dict[str, Any] = {
            "messages": [
                AIMessage(
                    "",
                    id=f"{turn}-call",
                    tool_calls=calls,
                    response_metadata={"model_name": "scripted", "finish_reason": "tool_calls"},
                    usage_metadata={"input_tokens": 10, "output_tokens": 3, "total_tokens": 13},
                    additional_kwargs={"trace": {"turn": turn}},
                )
            ],
            "plan": [{"id": f"s-{turn}", "task": f"answer {turn}"}],
            "artifacts": [
                {
                    "id": f"art-{turn}",
                    "kind": "report",
                    "summary": f"lookups of {turn}",
                    "uri": f"mem://{turn}",
                    "source_message_id": turn,
                    "tokens": 42,
                }
            ],
            "notes": [f"started {turn}"],
            "turns": turns + 1,
            "profile": {"name": "Ada", "langs": ["en", "fr"], "score": 0.5, "vip": True},
        }
        if turns == 0:
            update["goal"] = "migrate billing to v2"
            update["constraints"] = [
                {"id": "c1", "text": "never email external domains", "source_message_id": turn}
            ]
        if turns == 1:
            update["last_error"] = {
                "message": "lookup timed out",
                "recovery": "retry with a smaller page",
                "step_id": f"s-{turn}",
                "at": "2026-01-02T03:04:05+00:00",
            }
        return update
    return {
        "messages": [AIMessage(f"Handled {turn}.", id=f"{turn}-reply", name="agent")],
        "plan": [{"id": f"s-{turn}", "status": "done"}],
    }


def approve(state: AgentState) -> dict[str, Any]:
    """Ask a human before the tools run."""
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    decision = interrupt({"calls": [c["id"] for c in last.tool_calls]})
    return {"notes": [f"approved: {decision}"]}


def tools(state: AgentState) -> dict[str, Any]:
    """Answer every call of the last AI message."""
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    return {
        "messages": [
            ToolMessage(
                f"record {c['args']['part']} of {c['args']['turn']}",
                tool_call_id=c["id"],
                id=f"t-{c['id']}",
                name="lookup",
                artifact={"rows": [1, 2]},
                status="success",
            )
            for c in last.tool_calls
        ]
    }


def route(state: AgentState) -> str:
    last = state["messages"][-1]
    return "calls" if isinstance(last, AIMessage) and last.tool_calls else "done"


def build(saver: Any, *, approval: bool = False) -> Graph:
    """summarize -> agent -> (approve ->) tools -> agent -> ... -> END."""
    builder = StateGraph(AgentState)
    builder.add_node(SummarizeNode(trigger_tokens=4, keep_tokens=2, token_counter=len))
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "summarize")
    builder.add_edge("summarize", "agent")
    if approval:
        builder.add_node("approve", approve)
        builder.add_conditional_edges("agent", route, {"calls": "approve", "done": END})
        builder.add_edge("approve", "tools")
    else:
        builder.add_conditional_edges("agent", route, {"calls": "tools", "done": END})
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def human(i: int) -> Any:
    return {"messages": [HumanMessage(f"question {i}", id=f"h{i}")]}


# -- comparisons ------------------------------------------------------------------------
def normalize(value: Any) -> Any:
    """Messages become (module, class, full dump), so any lost field or class shows."""
    if isinstance(value, BaseMessage):
        cls = type(value)
        return ("message", cls.__module__, cls.__qualname__, normalize(value.model_dump()))
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    return value


PROJECTION_IDENTITY = {"thread_id", "checkpoint_id", "updated_at", "expires_at"}


def projection(state: Any) -> dict[str, Any]:
    """The projection's content, without what names the thread or its checkpoint."""
    assert state is not None
    return {k: v for k, v in dataclasses.asdict(state).items() if k not in PROJECTION_IDENTITY}


def json_only(value: Any, path: str = "document") -> None:
    """Fail unless ``value`` is made of JSON types only (exact types)."""
    if value is None or type(value) in (bool, int, str):
        return
    if type(value) is float:
        assert value == value, path
        assert value not in (float("inf"), float("-inf")), path
        return
    if type(value) is list:
        for i, item in enumerate(value):
            json_only(item, f"{path}[{i}]")
        return
    assert type(value) is dict, f"{path} is a {type(value).__name__}"
    for key, item in value.items():
        assert type(key) is str, f"{path} has key {key!r}"
        json_only(item, f"{path}[{key!r}]")


def through_json(document: Any) -> Any:
    """The document as another process would read it: written as text, parsed back."""
    json_only(document)
    text = json.dumps(document, allow_nan=False, ensure_ascii=False)
    reread = json.loads(text)
    assert reread == document
    return reread


def run_turns(graph: Graph, thread_id: str, turns: int) -> None:
    for i in range(turns):
        graph.invoke(human(i), config(thread_id))


async def arun_turns(graph: Graph, thread_id: str, turns: int) -> None:
    for i in range(turns):
        await graph.ainvoke(human(i), config(thread_id))


def check_document(document: Any, graph: Graph, thread_id: str) -> None:
    """The document describes the source thread: ids, values, summary, schema."""
    assert document["schema"] == SCHEMA == "langgraph-stm.thread"
    assert document["version"] == VERSION == 1
    assert document["thread_id"] == thread_id
    snap = graph.get_state(config(thread_id))
    assert document["checkpoint"]["id"] == snap.config["configurable"]["checkpoint_id"]
    assert document["checkpoint"]["ts"] == snap.created_at
    meta: Any = snap.metadata
    assert document["checkpoint"]["metadata"]["step"] == meta["step"]
    history = list(graph.get_state_history(config(thread_id)))
    assert [c["id"] for c in document["checkpoints"]] == sorted(
        s.config["configurable"]["checkpoint_id"] for s in history
    )
    assert {c["ns"] for c in document["checkpoints"]} == {""}
    by_id = {s.config["configurable"]["checkpoint_id"]: s for s in history}
    for entry in document["checkpoints"]:
        source = by_id[entry["id"]]
        assert entry["ts"] == source.created_at
        parent = source.parent_config
        assert entry["parent_id"] == (parent and parent["configurable"]["checkpoint_id"])
    values = document["values"]
    assert document["message_channels"] == ["messages"]
    assert document["skipped"] == []
    assert values["summary"]["version"] >= 1
    assert values["summary"]["coverage"]["message_count"] > 0
    assert values["goal"] == "migrate billing to v2"
    assert values["notes"][0] == "started h0"
    assert values["profile"] == {"name": "Ada", "langs": ["en", "fr"], "score": 0.5, "vip": True}
    assert any(m["type"] == "tool" for m in values["messages"])
    assert any(m["data"].get("tool_calls") for m in values["messages"])
    assert document["ttl"] is None
    assert document["expires_at"] is None
    datetime.fromisoformat(document["exported_at"])


def check_round_trip(
    source: Graph,
    source_saver: Any,
    source_thread: str,
    target: Graph,
    target_saver: Any,
    target_thread: str,
    imported: RunnableConfig,
) -> None:
    """Same values and projection, a thread at rest, and the same next turn."""
    src = source.get_state(config(source_thread))
    dst = target.get_state(config(target_thread))
    assert normalize(dst.values) == normalize(src.values)
    assert dst.config["configurable"]["checkpoint_id"] == imported["configurable"]["checkpoint_id"]
    assert dst.next == ()
    assert dst.tasks == ()
    assert dst.interrupts == ()
    meta: Any = dst.metadata
    assert meta["source"] == "update"
    assert meta["step"] == -1
    assert meta["stm_imported_from"]["thread_id"] == source_thread
    assert (
        meta["stm_imported_from"]["checkpoint_id"] == (src.config["configurable"]["checkpoint_id"])
    )
    assert len(list(target.get_state_history(config(target_thread)))) == 1
    assert projection(target_saver.get_thread_state(target_thread)) == projection(
        source_saver.get_thread_state(source_thread)
    )
    # The imported thread goes on exactly as the source does.
    source.invoke(human(7), config(source_thread))
    target.invoke(human(7), config(target_thread))
    after_src = source.get_state(config(source_thread)).values
    after_dst = target.get_state(config(target_thread)).values
    assert normalize(after_dst) == normalize(after_src)
    assert after_dst["summary"]["version"] > src.values["summary"]["version"]
    assert projection(target_saver.get_thread_state(target_thread)) == projection(
        source_saver.get_thread_state(source_thread)
    )


# -- savers -----------------------------------------------------------------------------
@contextmanager
def open_saver(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[_Saver]:
    """A fresh saver of ``kind``; ``postgres`` uses the test's own database."""
    if kind == "memory":
        yield _Saver(InMemorySaver())
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = tmp_path / f"export-{uuid.uuid4().hex[:8]}.sqlite"
        with SqliteSaver.from_conn_string(str(path)) as inner:
            yield _Saver(inner)
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        uri = request.getfixturevalue("postgres_uri")
        with PostgresSaver.from_conn_string(uri) as pg:
            saver = _Saver(pg)
            saver.setup()
            yield saver


@asynccontextmanager
async def aopen_saver(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[_Saver]:
    """A fresh async-capable saver of ``kind``."""
    if kind == "memory":
        yield _Saver(InMemorySaver())
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        path = tmp_path / f"export-{uuid.uuid4().hex[:8]}.sqlite"
        async with AsyncSqliteSaver.from_conn_string(str(path)) as inner:
            yield _Saver(inner)
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        uri = request.getfixturevalue("postgres_uri")
        async with AsyncPostgresSaver.from_conn_string(uri) as pg:
            saver = _Saver(pg)
            await saver.asetup()
            yield saver


@contextmanager
def nullsaver(saver: _Saver) -> Iterator[_Saver]:
    """The same saver again (an import into the same database)."""
    yield saver


PAIRS = [
    ("memory", "memory"),
    ("sqlite", "sqlite"),
    pytest.param("postgres", "postgres", marks=pytest.mark.postgres),
    pytest.param("sqlite", "postgres", marks=pytest.mark.postgres),
    pytest.param("postgres", "memory", marks=pytest.mark.postgres),
    pytest.param("memory", "sqlite"),
]


# -- round trips ------------------------------------------------------------------------
class TestRoundTrip:
    """export_thread -> JSON text -> import_thread reproduces get_state and the projection."""

    @pytest.mark.parametrize(("source_kind", "target_kind"), PAIRS)
    def test_sync(
        self, source_kind: str, target_kind: str, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        with open_saver(source_kind, tmp_path, request) as source_saver:
            source = build(source_saver)
            run_turns(source, "billing-7", 3)
            document = through_json(source_saver.export_thread("billing-7"))
            check_document(document, source, "billing-7")
            with (
                nullsaver(source_saver)
                if source_kind == target_kind == "postgres"
                else open_saver(target_kind, tmp_path, request)
            ) as target_saver:
                # Into the same database, under another id; elsewhere, under the same id.
                target_thread = "billing-7-copy" if target_saver is source_saver else "billing-7"
                imported = target_saver.import_thread(document, thread_id=target_thread)
                target = build(target_saver)
                check_round_trip(
                    source, source_saver, "billing-7", target, target_saver, target_thread, imported
                )

    @pytest.mark.parametrize(
        ("source_kind", "target_kind"),
        [
            ("memory", "memory"),
            ("sqlite", "sqlite"),
            pytest.param("sqlite", "postgres", marks=pytest.mark.postgres),
            pytest.param("postgres", "memory", marks=pytest.mark.postgres),
        ],
    )
    async def test_async(
        self, source_kind: str, target_kind: str, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        async with aopen_saver(source_kind, tmp_path, request) as source_saver:
            source = build(source_saver)
            await arun_turns(source, "billing-7", 3)
            document = through_json(await source_saver.aexport_thread("billing-7"))
            assert document["values"]["summary"]["coverage"]["message_count"] > 0
            async with aopen_saver(target_kind, tmp_path, request) as target_saver:
                imported = await target_saver.aimport_thread(document)
                assert imported["configurable"]["thread_id"] == "billing-7"
                target = build(target_saver)
                src = await source.aget_state(config("billing-7"))
                dst = await target.aget_state(config("billing-7"))
                assert normalize(dst.values) == normalize(src.values)
                assert dst.next == ()
                assert projection(await target_saver.aget_thread_state("billing-7")) == (
                    projection(await source_saver.aget_thread_state("billing-7"))
                )
                await source.ainvoke(human(7), config("billing-7"))
                await target.ainvoke(human(7), config("billing-7"))
                assert normalize((await target.aget_state(config("billing-7"))).values) == (
                    normalize((await source.aget_state(config("billing-7"))).values)
                )
                with pytest.raises(InvalidArgumentError, match="already has checkpoints"):
                    await target_saver.aimport_thread(document)

    async def test_sync_methods_over_an_async_saver_from_a_worker_thread(
        self, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        async with (
            aopen_saver("sqlite", tmp_path, request) as source_saver,
            aopen_saver("sqlite", tmp_path, request) as target_saver,
        ):
            source = build(source_saver)
            await arun_turns(source, "t", 2)
            document = await asyncio.to_thread(source_saver.export_thread, "t")
            assert document == {**await source_saver.aexport_thread("t"), "exported_at": ANY}
            await asyncio.to_thread(target_saver.import_thread, through_json(document))
            dst = await build(target_saver).aget_state(config("t"))
            assert normalize(dst.values) == normalize((await source.aget_state(config("t"))).values)

    def test_export_is_a_copy(self) -> None:
        """Editing the document changes nothing in the saver, and vice versa."""
        saver = _Saver(InMemorySaver())
        graph = build(saver)
        run_turns(graph, "t", 2)
        document = saver.export_thread("t")
        before = normalize(graph.get_state(config("t")).values)
        document["values"]["plan"].clear()
        document["values"]["messages"][0]["data"]["content"] = "edited"
        assert normalize(graph.get_state(config("t")).values) == before
        assert saver.export_thread("t")["values"]["plan"]


class TestPausedThread:
    """A thread paused at interrupt() exports its values; import gives a thread at rest."""

    @pytest.mark.parametrize(
        ("source_kind", "target_kind"),
        [("memory", "sqlite"), pytest.param("postgres", "memory", marks=pytest.mark.postgres)],
    )
    def test_paused_values_are_exported_not_the_interrupt(
        self, source_kind: str, target_kind: str, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        with open_saver(source_kind, tmp_path, request) as source_saver:
            source = build(source_saver, approval=True)
            cfg = config("paused")
            source.invoke(human(0), cfg)
            source.invoke(Command(resume="yes"), cfg)
            source.invoke(human(1), cfg)
            paused = source.get_state(cfg)
            assert paused.next == ("approve",)
            assert paused.interrupts
            document = through_json(source_saver.export_thread("paused"))
            assert document["checkpoint"]["id"] == paused.config["configurable"]["checkpoint_id"]
            assert not [c for c in document["values"] if c.startswith(("__", "branch:"))]
            assert "interrupt" not in json.dumps(document).lower()
            with open_saver(target_kind, tmp_path, request) as target_saver:
                imported = target_saver.import_thread(document)
                target = build(target_saver, approval=True)
                dst = target.get_state(config("paused"))
                assert normalize(dst.values) == normalize(paused.values)
                assert (
                    dst.config["configurable"]["checkpoint_id"]
                    == (imported["configurable"]["checkpoint_id"])
                )
                assert (dst.next, dst.tasks, dst.interrupts) == ((), (), ())
                last = dst.values["messages"][-1]
                assert isinstance(last, AIMessage)
                assert last.tool_calls  # the calls that waited for approval, unanswered
                assert projection(target_saver.get_thread_state("paused")) == projection(
                    source_saver.get_thread_state("paused")
                )
            # The source is untouched and still resumes.
            source.invoke(Command(resume="yes"), cfg)
            assert source.get_state(cfg).next == ()

    async def test_async_paused(self, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        async with aopen_saver("sqlite", tmp_path, request) as source_saver:
            source = build(source_saver, approval=True)
            cfg = config("paused")
            await source.ainvoke(human(0), cfg)
            paused = await source.aget_state(cfg)
            assert paused.next == ("approve",)
            document = through_json(await source_saver.aexport_thread("paused"))
            target_saver = _Saver(InMemorySaver())
            await target_saver.aimport_thread(document)
            dst = await build(target_saver, approval=True).aget_state(cfg)
            assert normalize(dst.values) == normalize(paused.values)
            assert (dst.next, dst.interrupts) == ((), ())


# -- what the document holds -------------------------------------------------------------
class TestDocument:
    """Schema, JSON types only, namespaces, skipped channels, TTL."""

    def test_only_json_types_and_a_schema_version(self) -> None:
        saver = _Saver(InMemorySaver())
        graph = build(saver)
        run_turns(graph, "t", 3)
        document = saver.export_thread("t")
        json_only(document)
        assert json.loads(json.dumps(document, allow_nan=False)) == document
        assert (document["schema"], document["version"]) == ("langgraph-stm.thread", 1)
        assert list(document) == [
            "schema",
            "version",
            "thread_id",
            "exported_at",
            "checkpoint",
            "checkpoints",
            "values",
            "message_channels",
            "skipped",
            "ttl",
            "expires_at",
        ]
        summary = document["values"]["summary"]
        assert summary == graph.get_state(config("t")).values["summary"]
        assert set(summary["coverage"]) == {"first_message_id", "last_message_id", "message_count"}
        assert document["values"]["last_error"]["message"] == "lookup timed out"
        assert document["values"]["artifacts"][0]["tokens"] == 42
        assert document["values"]["constraints"][0]["status"] == "confirmed"
        assert {s["status"] for s in document["values"]["plan"]} == {"done"}

    def test_subgraph_namespaces_are_listed(self) -> None:
        """Every namespace's checkpoints are listed; values are the root's."""
        child = StateGraph(AgentState)
        child.add_node("inner", lambda s: {"notes": ["from the subgraph"]})
        child.add_edge(START, "inner")
        parent = StateGraph(AgentState)
        parent.add_node("child", child.compile())
        parent.add_edge(START, "child")
        parent.add_edge("child", END)
        saver = _Saver(InMemorySaver())
        graph = parent.compile(checkpointer=saver)
        graph.invoke(human(0), config("nested"))
        document = through_json(saver.export_thread("nested"))
        namespaces = {c["ns"] for c in document["checkpoints"]}
        assert "" in namespaces
        assert any(ns.startswith("child:") for ns in namespaces)
        ids = [c["id"] for c in document["checkpoints"]]
        assert len(ids) == len(set(ids)) == len(list(saver.inner.list(config("nested"))))
        assert document["checkpoints"][0]["ns"] == ""
        assert document["values"]["notes"] == ["from the subgraph"]
        target = _Saver(InMemorySaver())
        target.import_thread(document)
        assert normalize(
            parent.compile(checkpointer=target).get_state(config("nested")).values
        ) == (normalize(graph.get_state(config("nested")).values))
        assert {c["ns"] for c in target.export_thread("nested")["checkpoints"]} == {""}

    def test_values_that_are_not_json_are_skipped_by_name(self) -> None:
        class Odd(STMState, total=False):
            opened: datetime
            tags: set[str]

        def node(state: Odd) -> dict[str, Any]:
            return {
                "goal": "g",
                "opened": datetime(2026, 1, 1, tzinfo=UTC),
                "tags": {"x", "y"},
                "messages": [AIMessage("ok", id="a1")],
            }

        builder = StateGraph(Odd).add_node("node", node).add_edge(START, "node")
        saver = _Saver(InMemorySaver())
        builder.compile(checkpointer=saver).invoke(human(0), config("odd"))
        document = through_json(saver.export_thread("odd"))
        assert document["skipped"] == [
            {
                "channel": "opened",
                "type": "datetime.datetime",
                "reason": "holds a datetime.datetime, which is not JSON data",
            },
            {"channel": "tags", "type": "set", "reason": "holds a set, which is not JSON data"},
        ]
        assert "opened" not in document["values"]
        assert "tags" not in document["values"]
        target = _Saver(InMemorySaver())
        target.import_thread(document)
        values = builder.compile(checkpointer=target).get_state(config("odd")).values
        assert values["goal"] == "g"
        assert "opened" not in values

    def test_a_message_field_that_is_not_json_keeps_the_conversation(self) -> None:
        """A tuple artifact: that field is left out (and recorded), the messages are kept."""

        def node(state: STMState) -> dict[str, Any]:
            return {
                "messages": [
                    AIMessage("", id="a", tool_calls=[{"id": "c", "name": "t", "args": {}}]),
                    ToolMessage("r", tool_call_id="c", id="tm", artifact=("x", 1)),
                    AIMessage("done", id="a2"),
                ],
                "goal": "g",
            }

        builder = StateGraph(STMState).add_node("node", node).add_edge(START, "node")
        saver = _Saver(InMemorySaver())
        source = builder.compile(checkpointer=saver)
        source.invoke({"messages": [HumanMessage("hi", id="h")]}, config("t"))
        document = through_json(saver.export_thread("t"))
        assert document["message_channels"] == ["messages"]
        assert [m["data"]["id"] for m in document["values"]["messages"]] == ["h", "a", "tm", "a2"]
        assert document["skipped"] == [
            {
                "channel": "messages",
                "index": 2,
                "message_id": "tm",
                "field": "artifact",
                "type": "tuple",
                "reason": "a tuple is not JSON data: the field is left out and reads back as None",
            }
        ]
        target_saver = _Saver(InMemorySaver())
        target_saver.import_thread(document)
        target = builder.compile(checkpointer=target_saver)
        src = source.get_state(config("t")).values
        dst = target.get_state(config("t")).values
        expected = [*src["messages"][:2], src["messages"][2].model_copy(update={"artifact": None})]
        assert normalize(dst["messages"]) == normalize([*expected, src["messages"][3]])
        assert dst["goal"] == "g"
        thread_state = target_saver.get_thread_state("t")
        assert thread_state is not None
        assert thread_state.message_count == 4
        # The imported thread goes on.
        out = target.invoke({"messages": [HumanMessage("more", id="h2")]}, config("t"))
        assert [m.id for m in out["messages"]] == ["h", "a", "tm", "a2", "h2"]

    def test_delta_channel_is_skipped_not_guessed(self) -> None:
        """A DeltaChannel's value is rebuilt by the graph from writes: reported, not exported."""

        builder = StateGraph(Delta)
        builder.add_node("a", lambda s: {"messages": [AIMessage("x", id="a1")], "goal": "g"})
        builder.add_edge(START, "a")
        saver = _Saver(InMemorySaver())
        builder.compile(checkpointer=saver).invoke(human(0), config("d"))
        document = through_json(saver.export_thread("d"))
        assert document["values"] == {"goal": "g"}
        assert [s["channel"] for s in document["skipped"]] == ["messages"]
        assert "DeltaChannel" in document["skipped"][0]["reason"]

    def test_the_ttl_and_expiry_of_the_source_are_recorded(self) -> None:
        """A per-thread TTL (set_ttl) and the saver's default are exported with expires_at."""
        now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
        saver = STMSaver(InMemorySaver(), ttl=timedelta(days=1), clock=lambda: now)
        graph = build(saver)
        run_turns(graph, "kept", 1)
        run_turns(graph, "other", 1)
        saver.set_ttl("kept", timedelta(hours=2))
        document = saver.export_thread("kept")
        assert document["ttl"] == 7200.0
        assert document["exported_at"] == now.isoformat()
        expires_at = document["expires_at"]
        assert expires_at is not None
        assert datetime.fromisoformat(expires_at) == now + timedelta(hours=2)
        assert saver.export_thread("other")["ttl"] == 86400.0
        # ttl is a record of the source: a saver without TTL imports it as is.
        target = _Saver(InMemorySaver())
        target.import_thread(through_json(document))
        assert target.export_thread("kept")["ttl"] is None
        assert target.export_thread("kept")["expires_at"] is None

    async def test_async_export_records_the_ttl(self) -> None:
        """The async twin reads the same TTL."""
        saver = STMSaver(InMemorySaver(), ttl=60)
        await arun_turns(build(saver), "t", 1)
        assert (await saver.aexport_thread("t"))["ttl"] == 60.0


# -- refusals ---------------------------------------------------------------------------
def _first_call(document: Any) -> int:
    """The index of the document's first AI message with tool calls."""
    return next(
        i for i, m in enumerate(document["values"]["messages"]) if m["data"].get("tool_calls")
    )


class TestRefusals:
    """Unknown thread, non-empty target, invalid document: a clear InvalidArgumentError."""

    def test_unknown_thread(self) -> None:
        saver = _Saver(InMemorySaver())
        with pytest.raises(InvalidArgumentError, match="'ghost'"):
            saver.export_thread("ghost")

    async def test_unknown_thread_async(self) -> None:
        saver = _Saver(InMemorySaver())
        with pytest.raises(InvalidArgumentError, match="'ghost'"):
            await saver.aexport_thread("ghost")

    def test_deleted_thread_is_unknown(self) -> None:
        saver = _Saver(InMemorySaver())
        run_turns(build(saver), "gone", 1)
        saver.delete_thread("gone")
        with pytest.raises(InvalidArgumentError, match="'gone'"):
            saver.export_thread("gone")

    def test_non_empty_target_is_refused_and_untouched(self, tmp_path: Path) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(str(tmp_path / "t.sqlite")) as inner:
            saver = _Saver(inner)
            graph = build(saver)
            run_turns(graph, "a", 1)
            run_turns(graph, "b", 1)
            document = saver.export_thread("a")
            before = normalize(graph.get_state(config("b")).values)
            count = len(list(graph.get_state_history(config("b"))))
            with pytest.raises(InvalidArgumentError, match="'b' already has checkpoints"):
                saver.import_thread(document, thread_id="b")
            with pytest.raises(InvalidArgumentError, match="'a' already has checkpoints"):
                saver.import_thread(document)
            assert normalize(graph.get_state(config("b")).values) == before
            assert len(list(graph.get_state_history(config("b")))) == count
            # After deletion the id is free again.
            saver.delete_thread("b")
            saver.import_thread(document, thread_id="b")
            assert normalize(graph.get_state(config("b")).values) == (
                normalize(graph.get_state(config("a")).values)
            )

    def test_target_with_subgraph_checkpoints_only_is_refused(self) -> None:
        saver = _Saver(InMemorySaver())
        source = _Saver(InMemorySaver())
        run_turns(build(source), "a", 1)
        sub: RunnableConfig = {"configurable": {"thread_id": "x", "checkpoint_ns": "child:1"}}
        from langgraph.checkpoint.base import empty_checkpoint

        saver.put(sub, empty_checkpoint(), {"source": "loop", "step": 0, "parents": {}}, {})
        with pytest.raises(InvalidArgumentError, match="already has checkpoints"):
            saver.import_thread(source.export_thread("a"), thread_id="x")

    @pytest.mark.parametrize(
        ("edit", "match"),
        [
            (lambda d: d.update(schema="other"), "schema"),
            (lambda d: d.update(version=2), "version 2 is not supported"),
            (lambda d: d.pop("values"), "lacks 'values'"),
            (lambda d: d["values"].update(plan="do it"), "plan"),
            (lambda d: d["values"]["messages"].append({"type": "martian", "data": {}}), "martian"),
            (lambda d: d.update(message_channels=["nope"]), "message_channels"),
            (lambda d: d["values"].update({"branch:to:agent": None}), "branch:to:agent"),
            (
                lambda d: d["values"]["messages"][_first_call(d)]["data"].update(tool_calls="oops"),
                r"document\['values'\]\['messages'\]\[\d+\] is not a message LangChain reads "
                r"\(AttributeError",
            ),
            (
                lambda d: d.update(message_channels=[]),
                r"document\['values'\]\['messages'\] holds messages_to_dict items",
            ),
        ],
    )
    def test_bad_document(self, edit: Any, match: str) -> None:
        source = _Saver(InMemorySaver())
        run_turns(build(source), "a", 2)
        document = through_json(source.export_thread("a"))
        edit(document)
        target = _Saver(InMemorySaver())
        with pytest.raises(InvalidArgumentError, match=match):
            target.import_thread(document)
        assert list(target.inner.list(None)) == []

    def test_expired_target_is_empty(self) -> None:
        """An expired thread not swept yet reads as absent: import replaces it."""
        now = [datetime(2026, 12, 1, 12, 0, tzinfo=UTC)]
        saver = STMSaver(InMemorySaver(), ttl=timedelta(seconds=10), clock=lambda: now[0])
        graph = build(saver)
        run_turns(graph, "t", 1)
        source = _Saver(InMemorySaver())
        run_turns(build(source), "a", 2)
        document = through_json(source.export_thread("a"))
        with pytest.raises(InvalidArgumentError, match="'t' already has checkpoints"):
            saver.import_thread(document, thread_id="t")
        now[0] += timedelta(seconds=11)
        assert saver.get_tuple(config("t")) is None
        assert list(saver.inner.list(config("t")))  # expired, not swept
        imported = saver.import_thread(document, thread_id="t")
        state = graph.get_state(config("t"))
        assert (
            state.config["configurable"]["checkpoint_id"]
            == (imported["configurable"]["checkpoint_id"])
        )
        assert normalize(state.values) == normalize(build(source).get_state(config("a")).values)
        # The expired thread's checkpoints were deleted; the import's is the only one.
        assert len(list(saver.inner.list(config("t")))) == 1
        imported_state = saver.get_thread_state("t")
        assert imported_state is not None
        assert imported_state.ttl == timedelta(seconds=10)  # the target's TTL rules
        assert projection(dataclasses.replace(imported_state, ttl=None)) == projection(
            source.get_thread_state("a")
        )

    async def test_expired_target_is_empty_async(self) -> None:
        now = [datetime(2026, 12, 1, 12, 0, tzinfo=UTC)]
        saver = STMSaver(InMemorySaver(), ttl=timedelta(seconds=10), clock=lambda: now[0])
        graph = build(saver)
        await arun_turns(graph, "t", 1)
        source = _Saver(InMemorySaver())
        await arun_turns(build(source), "a", 2)
        document = through_json(await source.aexport_thread("a"))
        with pytest.raises(InvalidArgumentError, match="'t' already has checkpoints"):
            await saver.aimport_thread(document, thread_id="t")
        now[0] += timedelta(seconds=11)
        assert await saver.aget_tuple(config("t")) is None
        await saver.aimport_thread(document, thread_id="t")
        state = await graph.aget_state(config("t"))
        assert normalize(state.values) == normalize(
            (await build(source).aget_state(config("a"))).values
        )
        assert len([t async for t in saver.inner.alist(config("t"))]) == 1

    @pytest.mark.parametrize("thread_id", ["", 7])
    def test_bad_target_thread_id(self, thread_id: Any) -> None:
        source = _Saver(InMemorySaver())
        run_turns(build(source), "a", 1)
        with pytest.raises(InvalidArgumentError, match="thread_id must be a non-empty string"):
            _Saver(InMemorySaver()).import_thread(source.export_thread("a"), thread_id=thread_id)

    async def test_bad_document_async(self) -> None:
        with pytest.raises(InvalidArgumentError, match="schema"):
            await _Saver(InMemorySaver()).aimport_thread({"schema": "x"})
