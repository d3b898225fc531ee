"""Summarization in real async StateGraphs, on SQLite and PostgreSQL, across restarts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from langgraph_stm import SummarizeNode, TokenCounter, validate_history
from tests.support.models import ScriptedChatModel
from tests.support.summarize_graphs import (
    CONSTRAINT,
    GOAL,
    STRUCTURED,
    agent_graph,
    approval_graph,
    long_history,
    snapshot,
    summary_model,
)

REPO = Path(__file__).resolve().parents[2]
CONFIG: Any = {"configurable": {"thread_id": "billing-7"}}

SaverFactory = Callable[[], AbstractAsyncContextManager[BaseCheckpointSaver[Any]]]


@pytest.fixture(params=["sqlite", "postgres"])
def open_saver(request: pytest.FixtureRequest, tmp_path: Path) -> SaverFactory:
    """Opens a *new* async saver on the same database each time it is called."""
    if request.param == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        path = str(tmp_path / "checkpoints.sqlite")

        @asynccontextmanager
        async def sqlite() -> AsyncIterator[BaseCheckpointSaver[Any]]:
            async with AsyncSqliteSaver.from_conn_string(path) as saver:
                yield saver

        return sqlite

    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    uri: str = request.getfixturevalue("postgres_uri")

    @asynccontextmanager
    async def postgres() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        async with AsyncPostgresSaver.from_conn_string(uri) as saver:
            await saver.setup()
            yield saver

    return postgres


class TestAgentLoop:
    """SummarizeNode at the start of every turn of an async tool-calling agent."""

    async def test_summaries_accumulate_and_structured_state_survives(
        self, open_saver: SaverFactory
    ) -> None:
        """12 turns: versions grow by one per summarization, one model call each, no orphans."""
        model = summary_model()
        counter = TokenCounter()
        node = SummarizeNode(
            summarizer=model, trigger_tokens=400, keep_tokens=200, token_counter=counter
        )
        versions: list[int] = []
        async with open_saver() as saver:
            graph = agent_graph(node, saver)
            await graph.aupdate_state(CONFIG, STRUCTURED)
            for i in range(12):
                values = await graph.ainvoke(
                    {"messages": [HumanMessage(f"Process invoice batch {i}.", id=f"h{i}")]},
                    CONFIG,
                )
                if values.get("summary"):
                    versions.append(values["summary"]["version"])
        assert versions[-1] >= 3
        assert sorted(set(versions)) == list(range(1, versions[-1] + 1))
        assert model.calls == versions[-1]
        async with open_saver() as saver:  # a fresh saver sees the same state
            values = (await agent_graph(node, saver).aget_state(CONFIG)).values
        assert validate_history(values["messages"]) == []
        assert counter(values["messages"]) <= 400 + 200  # at most one turn past the trigger
        assert values["goal"] == GOAL
        assert [s["status"] for s in values["plan"]] == ["done", "in_progress", "pending"]
        assert values["constraints"][0]["text"] == CONSTRAINT
        assert values["summary"]["goal"] == GOAL
        assert values["messages"][-1].id == "h11-reply"


class TestSummarizeAndInterruptInOneNode:
    """The node body runs twice (before the interrupt, again on resume)."""

    async def test_resume_with_a_fresh_saver(self, open_saver: SaverFactory) -> None:
        """One model call in total, one summary version, removals applied once."""
        model = summary_model()
        async with open_saver() as saver:
            graph = approval_graph(model, saver)
            paused = await graph.ainvoke({"messages": long_history(), **STRUCTURED}, CONFIG)
            assert paused["__interrupt__"][0].value["approve"] == "send_email"
            assert model.calls == 1
            assert "summary" not in paused  # the node's return value was never applied
        # a new saver and a new model object, as a restarted worker would have
        restarted = ScriptedChatModel(script=[AssertionError("called again")])
        async with open_saver() as saver:
            graph = approval_graph(restarted, saver)
            values = await graph.ainvoke(Command(resume="approved"), CONFIG)
        assert restarted.calls == 0
        assert values["summary"]["version"] == 1
        assert values["summary"]["text"] == "Folded 21 more messages."
        assert [m.id for m in values["messages"]] == ["a10", "h11", "a11", "ask-mail", "t-mail-1"]
        assert validate_history(values["messages"]) == []
        assert values["goal"] == GOAL

    async def test_resume_in_the_same_process_and_graph(self) -> None:
        """With the in-memory saver and one graph object, the model is called once too."""
        from langgraph.checkpoint.memory import InMemorySaver

        model = summary_model()
        graph = approval_graph(model, InMemorySaver())
        await graph.ainvoke({"messages": long_history()}, CONFIG)
        values = await graph.ainvoke(Command(resume="approved"), CONFIG)
        assert model.calls == 1
        assert values["summary"]["version"] == 1
        history = [s.values.get("summary") for s in graph.get_state_history(CONFIG)]
        assert {s["version"] for s in history if s} == {1}

    async def test_a_failing_model_leaves_the_thread_untouched(
        self, open_saver: SaverFactory
    ) -> None:
        """The run fails with SummarizationError; the checkpointed state is unchanged."""
        from langgraph_stm.errors import SummarizationError

        failing = ScriptedChatModel(script=[ConnectionError("provider down: key sk-123")])
        async with open_saver() as saver:
            graph = approval_graph(failing, saver)
            await graph.aupdate_state(CONFIG, {"messages": long_history(), **STRUCTURED})
            before = snapshot((await graph.aget_state(CONFIG)).values)
            with pytest.raises(SummarizationError) as caught:
                await graph.ainvoke(None, CONFIG)
            assert "sk-123" not in str(caught.value)
            after = (await graph.aget_state(CONFIG)).values
        assert snapshot(after) == before
        assert after.get("summary") is None


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_resume_in_a_new_process(backend: str, request: pytest.FixtureRequest) -> None:
    """A subprocess opens the same database and resumes; the model is never called there."""
    import asyncio

    from tests.support.summarize_graphs import pause

    if backend == "sqlite":
        target = str(request.getfixturevalue("tmp_path") / "checkpoints.sqlite")
    else:
        target = request.getfixturevalue("postgres_uri")
    model = summary_model()
    asyncio.run(pause(backend, target, "billing-7", model))
    assert model.calls == 1
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.summarize_graphs",
            "resume",
            backend,
            target,
            "billing-7",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    final = json.loads(result.stdout)
    assert final["model_calls"] == 0
    assert final["ids"] == ["a10", "h11", "a11", "ask-mail", "t-mail-1"]
    assert final["summary"]["version"] == 1
    assert final["summary"]["text"] == "Folded 21 more messages."
    assert final["goal"] == GOAL


DECISIONS = {
    20: "We decided to use UUID invoice ids in the v2 schema.",
    90: "We agreed on a batch size of 500 for the export.",
    160: "We decided to keep the legacy webhook for 30 days.",
    230: "We will switch traffic with the EU region first.",
}
FAILURES = {
    50: ("billing_api", "HTTP 503 Service Unavailable", "I will retry with exponential backoff."),
    120: ("billing_api", "Error: 401 token expired", "I rotated the expired API token."),
    190: ("bulk_update", "Error: payload too large", "I split the batch into chunks of 100."),
    260: ("ledger_db", "Error: primary timed out", "I fell back to the read replica."),
}


def scripted_turn(i: int) -> list[Any]:
    """One tool-heavy turn: a request, two parallel calls, their results, a reply.

    Some turns carry a decision (the reply) or a failed call and its recovery (the
    second call fails, the reply says how the agent recovered).
    """
    from langchain_core.messages import AIMessage, ToolMessage

    failure = FAILURES.get(i)
    calls = [
        {"name": "fetch", "args": {"batch": i, "part": 0}, "id": f"c{i}-0"},
        {
            "name": failure[0] if failure else "fetch",
            "args": {"batch": i, "part": 1},
            "id": f"c{i}-1",
        },
    ]
    results = [
        ToolMessage(
            f"batch {i} part {k}: " + "sku qty amount; " * 20,
            tool_call_id=c["id"],
            id=f"t{i}-{k}",
        )
        for k, c in enumerate(calls)
    ]
    if failure:
        results[1] = ToolMessage(
            failure[1], tool_call_id=calls[1]["id"], id=f"t{i}-1", status="error"
        )
    reply = failure[2] if failure else DECISIONS.get(i, f"Batch {i} processed.")
    return [
        HumanMessage(f"Process invoice batch {i}.", id=f"h{i}"),
        AIMessage("", id=f"a{i}c", tool_calls=calls),
        *results,
        AIMessage(reply, id=f"a{i}r"),
    ]


async def test_structured_state_survives_ten_summarizations_in_build_context() -> None:
    """300 turns, >= 10 summaries: the context keeps goal, constraint and plan statuses,
    and the one bounded summary keeps the decisions and error recoveries it covered."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph

    from langgraph_stm import STMState, build_context

    counter = TokenCounter()
    node = SummarizeNode(
        trigger_tokens=6000, keep_tokens=1500, token_counter=counter, max_summary_tokens=300
    )
    graph = (
        StateGraph(STMState)
        .add_node(node)
        .add_edge(START, "summarize")
        .compile(checkpointer=InMemorySaver())
    )
    await graph.aupdate_state(CONFIG, STRUCTURED)
    all_ids: list[str] = []
    summarizations = 0
    version = 0
    for i in range(300):
        turn = scripted_turn(i)
        all_ids += [m.id for m in turn]
        update: dict[str, Any] = {"messages": turn}
        if i == 150:
            update["plan"] = [{"id": "s2", "status": "done"}, {"id": "s3", "status": "in_progress"}]
        values = await graph.ainvoke(update, CONFIG)
        new_version = (values.get("summary") or {}).get("version", 0)
        assert new_version in (version, version + 1)
        summarizations += new_version - version
        version = new_version
    state = (await graph.aget_state(CONFIG)).values
    summary = state["summary"]
    # one running summary, one version per summarization, bounded, covering exactly the
    # oldest messages up to covered_until_message_id
    assert summarizations >= 10
    assert summary["version"] == summarizations
    assert counter.count_text(summary["text"]) <= 300
    covered = summary["coverage"]["message_count"]
    assert summary["coverage"]["first_message_id"] == "h0"
    assert summary["coverage"]["last_message_id"] == all_ids[covered - 1]
    assert [m.id for m in state["messages"]] == all_ids[covered:]
    assert not any("Summary of the earlier conversation" in m.text for m in state["messages"])
    # what the summary itself kept from the covered turns
    assert covered > 270 * 5  # every decision and failure turn is covered
    for decision in DECISIONS.values():
        assert decision in summary["text"]
    for tool, error, recovery in FAILURES.values():
        line = f"{tool} failed: {error}; recovery: {recovery}"
        assert line in summary["text"]
        assert line in summary["errors"]
    assert "Process invoice batch 0." not in summary["text"]  # old requests went first
    context = build_context(
        state, max_tokens=3000, system_prompt="You are a billing agent.", token_counter=counter
    ).messages
    text = "\n".join(str(m.content) for m in context)
    assert f"Goal: {GOAL}" in text
    assert f"- [c1] {CONSTRAINT}" in text
    assert "- [done] s1: export invoices" in text
    assert "- [done] s2: map fields" in text
    assert "- [in_progress] s3: switch traffic" in text
    assert text.count("Summary of earlier conversation:") == 1
    for decision in DECISIONS.values():
        assert decision in text
    assert not any(m.type == "system" for m in context[1:])
    assert counter(context) <= 3000
    assert validate_history(state["messages"]) == []
