"""STMMiddleware in ``create_agent``, composed with ``HumanInTheLoopMiddleware``.

The agent (``tests/support/middleware_agent.py``) runs a fake tool-calling model on a
SQLite ``STMSaver``: many turns with parallel lookups, so the state is summarized and
the requests are trimmed, then a payment that needs approval. The process that paused
exits; a new process resumes with ``Command(resume=...)`` and the approved tool runs
once. Every request the model received is checked for the invariants of
``docs/architecture.md``: tool pairs whole (invariant 1), the pending unit kept
(invariant 2), ids stable (invariant 3), the budget (invariant 5), the structured state
first (invariant 6) and the system message first and once (invariant 8).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.types import Command

from langgraph_stm import STMSaver, TokenCounter, validate_history
from langgraph_stm.errors import BudgetExceededError, InvalidArgumentError, ToolPairError
from langgraph_stm.middleware import STMMiddleware
from tests.support.middleware_agent import (
    CONSTRAINT,
    GOAL,
    MIDDLEWARE_OPTIONS,
    STRUCTURED,
    SYSTEM_PROMPT,
    build_agent,
    load,
)
from tests.support.models import (
    AsyncOnlyChatModel,
    ScriptedChatModel,
    ToolCallingChatModel,
    summary_json,
)

REPO = Path(__file__).resolve().parents[2]
COUNT = TokenCounter()
TURNS = 8
THREAD = "billing-3"


def config(thread: str = THREAD) -> Any:
    return {"configurable": {"thread_id": thread}}


def question(turn: int) -> dict[str, Any]:
    message = HumanMessage(f"check invoice batch {turn}", id=f"h{turn}")
    return {"messages": [message], **(STRUCTURED if turn == 0 else {})}


def pay(turn: int) -> dict[str, Any]:
    return {"messages": [HumanMessage("pay the open balance", id=f"h{turn}")]}


def ids(messages: list[BaseMessage]) -> list[str]:
    return [m.id or "" for m in messages]


def assert_request_is_sound(request: list[BaseMessage], max_tokens: int) -> None:
    """One model request: system first and once, the state block, whole units, in budget."""
    assert validate_history(request) == []
    assert isinstance(request[0], SystemMessage)
    assert request[0].text.startswith(SYSTEM_PROMPT)
    assert not any(isinstance(m, SystemMessage) for m in request[1:])
    block = request[1]
    assert block.id == "stm-context"
    for text in (GOAL, CONSTRAINT, "collect invoices", "pay the open balance"):
        assert text in block.text
    assert COUNT(request) <= max_tokens
    for k, message in enumerate(request):
        if isinstance(message, AIMessage) and message.tool_calls:
            answered = {m.tool_call_id for m in request[k + 1 : k + 1 + len(message.tool_calls)]}
            assert answered == {call["id"] for call in message.tool_calls}


def resume_in_new_process(mode: str, path: Path, ledger: Path) -> dict[str, Any]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.middleware_agent",
            "resume",
            mode,
            str(path),
            THREAD,
            str(ledger),
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=False,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def ledger_lines(ledger: Path) -> list[dict[str, Any]]:
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines()]


class Run:
    """What one scripted conversation left behind, for the tests to read."""

    def __init__(self, path: Path, ledger: Path) -> None:
        self.path = path
        self.ledger = ledger
        self.requests: list[list[BaseMessage]] = []
        self.snapshots: list[list[BaseMessage]] = []
        self.summaries: list[int] = []
        self.paused: dict[str, Any] = {}
        self.resumed: dict[str, Any] = {}


def sync_run(directory: Path) -> Run:
    run = Run(directory / "checkpoints.sqlite", directory / "ledger.jsonl")
    with STMSaver.from_sqlite(run.path) as saver:
        saver.setup()
        agent, model = build_agent(saver, run.ledger)
        for turn in range(TURNS):
            out = agent.invoke(question(turn), config())
            run.snapshots.append(list(out["messages"]))
            run.summaries.append((out.get("summary") or {}).get("version", 0))
        run.paused = agent.invoke(pay(TURNS), config())
        run.requests = list(model.prompts)
    run.resumed = resume_in_new_process("sync", run.path, run.ledger)
    return run


async def async_run(directory: Path) -> Run:
    run = Run(directory / "checkpoints.sqlite", directory / "ledger.jsonl")
    async with STMSaver.from_async_sqlite(run.path) as saver:
        await saver.asetup()
        agent, model = build_agent(saver, run.ledger)
        for turn in range(TURNS):
            out = await agent.ainvoke(question(turn), config())
            run.snapshots.append(list(out["messages"]))
            run.summaries.append((out.get("summary") or {}).get("version", 0))
        run.paused = await agent.ainvoke(pay(TURNS), config())
        run.requests = list(model.prompts)
    run.resumed = resume_in_new_process("async", run.path, run.ledger)
    return run


@pytest.fixture(scope="module", params=["sync", "async"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """The conversation, run once per mode: invoke/SQLite or ainvoke/async SQLite."""
    directory = tmp_path_factory.mktemp(f"middleware-{request.param}")
    if request.param == "sync":
        yield sync_run(directory)
    else:
        yield asyncio.run(async_run(directory))


class TestAgentWithApproval:
    """create_agent + STMMiddleware + HumanInTheLoopMiddleware on SQLite, sync and async."""

    def test_every_request_keeps_tool_pairs_whole_and_the_structured_state_first(
        self, run: Run
    ) -> None:
        """Each request the model got is valid, in budget, and starts with system + state."""
        assert len(run.requests) == 2 * TURNS + 1
        for request in run.requests:
            assert_request_is_sound(request, MIDDLEWARE_OPTIONS["max_tokens"])

    def test_long_conversations_are_summarized_and_the_requests_trimmed(self, run: Run) -> None:
        """The summary grows in versions, the state shrinks, the request leaves old units out."""
        assert run.summaries[0] == 0
        assert run.summaries[-1] >= 2
        assert run.summaries == sorted(run.summaries)
        assert min(len(s) for s in run.snapshots[3:]) < len(run.snapshots[2])
        last = run.requests[-1]
        assert "Summary of earlier conversation:" in last[1].text
        assert "check invoice batch" in last[1].text  # folded requests live on in the summary
        trimmed = 0
        for turn, snapshot in enumerate(run.snapshots):
            # The request after the turn's lookups saw the state without the final reply.
            state_ids = ids(snapshot)[:-1]
            window = ids(run.requests[2 * turn + 1])[2:]
            assert window == state_ids[len(state_ids) - len(window) :]  # contiguous, newest
            trimmed += len(window) < len(state_ids)
        assert trimmed >= 1

    def test_ids_stay_stable_across_turns(self, run: Run) -> None:
        """A message keeps its id, content and place; only the oldest leave the state."""
        seen: dict[str, Any] = {}
        for before, after in itertools.pairwise(run.snapshots):
            kept = [i for i in ids(before) if i in set(ids(after))]
            assert ids(before)[len(ids(before)) - len(kept) :] == kept  # a prefix left
            assert ids(after)[: len(kept)] == kept
        for snapshot in run.snapshots:
            for message in snapshot:
                assert seen.setdefault(message.id or "", message.content) == message.content

    def test_the_approval_pauses_with_the_call_pending_in_the_state(self, run: Run) -> None:
        """At the interrupt the payment call is the last message, unanswered, nothing paid."""
        assert run.paused["__interrupt__"][0].value["action_requests"][0]["name"] == "send_payment"
        pending = run.paused["messages"][-1]
        assert isinstance(pending, AIMessage)
        assert pending.id == f"h{TURNS}-call"
        assert [c["name"] for c in pending.tool_calls] == ["send_payment"]
        assert validate_history(run.paused["messages"]) == []
        assert run.requests[-1][-1].id == f"h{TURNS}"

    def test_a_new_process_resumes_and_the_approved_tool_runs_once(self, run: Run) -> None:
        """The resumed worker runs the payment once and shows the model the whole unit."""
        assert ledger_lines(run.ledger) == [{"amount": 40, "to": "ACME"}]
        final = load(run.resumed["messages"])
        assert final[-3].id == f"h{TURNS}-call"
        result = final[-2]
        assert isinstance(result, ToolMessage)
        assert result.tool_call_id == f"h{TURNS}-pay"
        assert result.text == "paid 40 EUR to ACME"
        assert final[-1].id == f"h{TURNS}-reply"
        (request,) = (load(p) for p in run.resumed["prompts"])
        assert_request_is_sound(request, MIDDLEWARE_OPTIONS["max_tokens"])
        assert ids(request)[-3:] == [f"h{TURNS}", f"h{TURNS}-call", result.id]

    def test_a_later_turn_never_runs_the_approved_tool_again(self, run: Run) -> None:
        """Another turn on the same thread after the resume leaves the ledger at one line."""
        with STMSaver.from_sqlite(run.path) as saver:
            agent, model = build_agent(saver, run.ledger)
            out = agent.invoke(question(TURNS + 1), config())
        assert ledger_lines(run.ledger) == [{"amount": 40, "to": "ACME"}]
        assert out["messages"][-1].id == f"h{TURNS + 1}-reply"
        assert out["goal"] == GOAL
        for request in model.prompts:
            assert_request_is_sound(request, MIDDLEWARE_OPTIONS["max_tokens"])

    def test_summarized_messages_stay_in_checkpoint_history(self, run: Run) -> None:
        """Moving a message out of the state is not deleting it: time travel still has it."""
        with STMSaver.from_sqlite(run.path) as saver:
            agent, _ = build_agent(saver, run.ledger)
            latest = agent.get_state(config()).values
            history = list(agent.get_state_history(config()))
        assert "h0" not in ids(latest["messages"])
        assert latest["summary"]["coverage"]["first_message_id"] == "h0"
        assert any("h0" in ids(snapshot.values.get("messages", [])) for snapshot in history)


class TestStateAndSummarizer:
    """What the middleware writes into the state, and with which summarizer."""

    def test_a_chat_model_writes_the_summary(self, sqlite_path: Path, tmp_path: Path) -> None:
        """With summarizer=<chat model>, its answer is the summary the request shows."""
        summarizer = ScriptedChatModel(
            respond=lambda prompt: summary_json("The user checked earlier batches.")
        )
        with STMSaver.from_sqlite(sqlite_path) as saver:
            saver.setup()
            agent, model = build_agent(saver, tmp_path / "ledger.jsonl", summarizer=summarizer)
            for turn in range(5):
                out = agent.invoke(question(turn), config())
        assert summarizer.calls >= 1
        assert out["summary"]["text"] == "The user checked earlier batches."
        assert "The user checked earlier batches." in model.prompts[-1][1].text
        assert out["plan"] == STRUCTURED["plan"]
        assert out["goal"] == GOAL

    def test_the_summarizer_call_is_a_checkpointed_task(
        self, sqlite_path: Path, tmp_path: Path
    ) -> None:
        """Inside the agent the summarizer runs as the stm_summarizer task (replayed on resume)."""
        updates: list[str] = []
        with STMSaver.from_sqlite(sqlite_path) as saver:
            saver.setup()
            agent, _ = build_agent(saver, tmp_path / "ledger.jsonl")
            for turn in range(5):
                for chunk in agent.stream(question(turn), config(), stream_mode="updates"):
                    updates.extend(chunk)
        assert "stm_summarizer" in updates
        assert "STMMiddleware.before_model" in updates

    async def test_async_runs_await_the_summarizer_and_the_model(
        self, sqlite_path: Path, tmp_path: Path
    ) -> None:
        """In ainvoke the async hooks run: an async-only summarizer and model are enough."""
        summarizer = AsyncOnlyChatModel(respond=lambda prompt: summary_json("Async summary."))
        async with STMSaver.from_async_sqlite(sqlite_path) as saver:
            await saver.asetup()
            agent, model = build_agent(
                saver, tmp_path / "ledger.jsonl", summarizer=summarizer, async_only=True
            )
            for turn in range(5):
                out = await agent.ainvoke(question(turn), config())
        assert summarizer.calls >= 1
        assert out["summary"]["text"] == "Async summary."
        for request in model.prompts:
            assert_request_is_sound(request, MIDDLEWARE_OPTIONS["max_tokens"])

    def test_trim_tokens_trims_the_state_by_id_without_a_summary(
        self, sqlite_path: Path, tmp_path: Path
    ) -> None:
        """trim_tokens alone removes the oldest whole units from the state, by id."""
        options: dict[str, Any] = {"summarize_over": None, "keep_tokens": None}
        with STMSaver.from_sqlite(sqlite_path) as saver:
            saver.setup()
            agent, model = build_agent(saver, tmp_path / "ledger.jsonl", trim_tokens=500, **options)
            snapshots = [list(agent.invoke(question(t), config())["messages"]) for t in range(6)]
            values = agent.get_state(config()).values
        assert values.get("summary") is None
        assert COUNT(values["messages"]) <= 500
        assert snapshots[-1][0].id != "h0"
        assert validate_history(snapshots[-1]) == []
        for request in model.prompts:
            assert validate_history(request) == []
        for before, after in itertools.pairwise(snapshots):
            kept = [m for m in before if m.id in set(ids(after))]
            assert after[: len(kept)] == kept

    def test_a_tool_updates_the_structured_fields_through_their_reducers(self) -> None:
        """A tool's Command(update=...) marks a plan step done by id; the rest stays."""

        @tool
        def finish_step(step: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command:
            """Mark a plan step done."""
            done = ToolMessage(f"{step} done", tool_call_id=tool_call_id)
            return Command(update={"plan": [{"id": step, "status": "done"}], "messages": [done]})

        call = {"name": "finish_step", "args": {"step": "s1"}, "id": "c1"}
        model = ToolCallingChatModel(
            script=[AIMessage("", id="a1", tool_calls=[call]), AIMessage("ok", id="a2")]
        )
        agent = create_agent(model, tools=[finish_step], middleware=[STMMiddleware(max_tokens=800)])
        out = agent.invoke({"messages": [HumanMessage("go", id="h1")], **STRUCTURED})
        assert out["plan"] == [
            {"id": "s1", "task": "collect invoices", "status": "done"},
            STRUCTURED["plan"][1],
        ]
        block = next(m for m in model.prompts[-1] if m.id == "stm-context")
        assert "[done] s1: collect invoices" in block.text

    def test_pending_unit_and_latest_human_survive_tiny_budgets(self) -> None:
        """before_model never removes the unit waiting on approval nor the latest question,
        and on its own output it changes nothing."""
        middleware = STMMiddleware(
            max_tokens=10_000,
            summarize_over=3,
            keep_tokens=1,
            trim_tokens=1,
            token_counter=len,
        )
        history: list[BaseMessage] = [
            HumanMessage("q1", id="h1"),
            AIMessage("a1", id="a1"),
            HumanMessage("pay", id="h2"),
            AIMessage("", id="a2", tool_calls=[{"name": "pay", "args": {}, "id": "c1"}]),
        ]
        update = middleware.before_model({"messages": history}, None)  # type: ignore[arg-type]
        assert update is not None
        removed = {m.id for m in update["messages"] if isinstance(m, RemoveMessage)}
        assert removed == {"h1", "a1"}
        assert update["summary"]["coverage"]["last_message_id"] == "a1"
        after = {"messages": history[2:], "summary": update["summary"]}
        assert middleware.before_model(after, None) is None  # type: ignore[arg-type]


class TestPausedThreadGetsANewMessage:
    """A thread paused at an approval that gets a new user message instead of a resume."""

    def test_repair_answers_the_call_and_the_tool_never_runs(
        self, sqlite_path: Path, tmp_path: Path
    ) -> None:
        """on_invalid='repair' gives the call a synthetic result, in the state and the request."""
        ledger = tmp_path / "ledger.jsonl"
        with STMSaver.from_sqlite(sqlite_path) as saver:
            saver.setup()
            agent, model = build_agent(
                saver, ledger, on_invalid="repair", repair_cause="not_approved"
            )
            assert "__interrupt__" in agent.invoke({**pay(0), **STRUCTURED}, config())
            out = agent.invoke(question(1), config())
        synthetic = "stm-repair:h0-call:h0-pay"
        assert ids(out["messages"])[:4] == ["h0", "h0-call", synthetic, "h1"]
        assert "__interrupt__" not in out
        assert ledger_lines(ledger) == []
        for request in model.prompts:
            assert_request_is_sound(request, MIDDLEWARE_OPTIONS["max_tokens"])
        assert synthetic in ids(model.prompts[1])

    def test_by_default_the_dangling_call_is_refused(
        self, sqlite_path: Path, tmp_path: Path
    ) -> None:
        """on_invalid='raise' (default) raises ToolPairError naming the call, runs nothing;
        the same thread then recovers with a middleware built with on_invalid='repair'."""
        ledger = tmp_path / "ledger.jsonl"
        with STMSaver.from_sqlite(sqlite_path) as saver:
            saver.setup()
            agent, _ = build_agent(saver, ledger)
            agent.invoke({**pay(0), **STRUCTURED}, config())
            with pytest.raises(ToolPairError) as caught:
                agent.invoke(question(1), config())
            stuck = agent.get_state(config())
            repaired, _ = build_agent(saver, ledger, on_invalid="repair")
            out = repaired.invoke(None, config())
        assert caught.value.message_ids == ("h0-call",)
        assert ids(stuck.values["messages"]) == ["h0", "h0-call", "h1"]
        assert stuck.next == ("STMMiddleware.before_model",)
        assert ids(out["messages"])[:4] == ["h0", "h0-call", "stm-repair:h0-call:h0-pay", "h1"]
        assert out["messages"][-1].id == "h1-reply"
        assert ledger_lines(ledger) == []


class TestOptionsAndImports:
    """Options are checked when built; langchain is only imported with the extra."""

    @pytest.mark.parametrize(
        ("options", "named"),
        [
            ({"max_tokens": 0}, "max_tokens"),
            ({"max_tokens": 100, "summarize_over": 0}, "summarize_over"),
            ({"max_tokens": 100, "summarize_over": 10, "keep_tokens": 20}, "keep_tokens"),
            ({"max_tokens": 100, "summarizer": ScriptedChatModel()}, "summarize_over"),
            ({"max_tokens": 100, "trim_tokens": -1}, "trim_tokens"),
            ({"max_tokens": 100, "on_invalid": "ignore"}, "on_invalid"),
        ],
    )
    def test_bad_options_fail_when_built(self, options: dict[str, Any], named: str) -> None:
        """Each bad option raises InvalidArgumentError naming it."""
        with pytest.raises(InvalidArgumentError, match=named):
            STMMiddleware(**options)

    def test_a_request_whose_mandatory_part_is_over_budget_raises(self) -> None:
        """The system prompt and state block alone over max_tokens: BudgetExceededError."""
        agent = create_agent(
            GenericFakeChatModel(messages=iter([AIMessage("never")])),
            system_prompt=SYSTEM_PROMPT,
            middleware=[STMMiddleware(max_tokens=30)],
        )
        with pytest.raises(BudgetExceededError) as caught:
            agent.invoke({"messages": [HumanMessage("hi", id="h1")], **STRUCTURED})
        assert caught.value.max_tokens == 30

    def test_the_agent_graph_has_our_before_model_and_hitl_after_model(
        self, tmp_path: Path
    ) -> None:
        """Both middleware hook into the one agent graph around its model node."""
        with STMSaver.from_sqlite(tmp_path / "c.sqlite") as saver:
            agent, _ = build_agent(saver, tmp_path / "ledger.jsonl")
            nodes = set(agent.get_graph().nodes)
        assert {"STMMiddleware.before_model", "model", "tools"} <= nodes
        assert "HumanInTheLoopMiddleware.after_model" in nodes

    def test_importing_the_package_does_not_import_langchain(self) -> None:
        """``import langgraph_stm`` leaves langchain unimported."""
        code = "import sys, langgraph_stm; print('langchain' in sys.modules)"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
        )
        assert out.stdout.strip() == "False"

    def test_without_langchain_the_import_names_the_extra(self) -> None:
        """Without langchain, importing the middleware says which extra to install."""
        code = (
            "import sys; sys.modules['langchain'] = None\n"
            "try:\n    import langgraph_stm.middleware\n"
            "except ImportError as exc:\n    print(exc, exc.__cause__, exc.__suppress_context__)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
        )
        assert "pip install 'langgraph-stm[agents]'" in out.stdout
        assert out.stdout.strip().endswith("None True")
