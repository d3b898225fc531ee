"""ApprovalToolNode end to end: compiled StateGraphs over STMState, a scripted agent,
tools that record every run in a ledger, resumed in memory, on SQLite (also from a new
process) and on PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import InjectedToolArg, InjectedToolCallId, StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphInterrupt
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import InjectedState, InjectedStore, ToolRuntime
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command
from pydantic import BaseModel, ValidationError
from typing_extensions import TypedDict

from langgraph_stm import ApprovalToolNode, STMSaver, STMState, validate_history
from langgraph_stm._errors import InvalidArgumentError, STMError, ToolPairError
from langgraph_stm.state import merge_artifacts
from langgraph_stm.tools import offload_namespace, tool_result_id
from tests.support.approval_graphs import (
    Ledger,
    ask,
    build_graph,
    call_id,
    config,
    make_asking_tool,
    make_tools,
    open_saver,
    tools_graph,
)

REPO = Path(__file__).resolve().parents[2]


class Address(BaseModel):
    """A nested tool argument."""

    city: str


class Chat(TypedDict):
    """A state with its own names for the messages and the artifact records."""

    chat: Annotated[list[BaseMessage], add_messages]
    records: Annotated[list[Any], merge_artifacts]


APPROVE = {"type": "approve"}


def pending(graph: Any, thread: str) -> dict[str, str]:
    """Tool call id -> interrupt id of the thread's pending per-call interrupts."""
    return {i.value["tool_call_id"]: i.id for i in graph.get_state(config(thread)).interrupts}


def messages(graph: Any, thread: str) -> list[BaseMessage]:
    return list(graph.get_state(config(thread)).values["messages"])


def by_id(history: list[BaseMessage]) -> dict[str | None, BaseMessage]:
    return {m.id: m for m in history}


def edit(name: str, **args: Any) -> dict[str, Any]:
    return {"type": "edit", "edited_action": {"name": name, "args": args}}


def email(to: str = "ann@example.com", body: str = "hi") -> tuple[str, dict[str, Any]]:
    return ("send_email", {"to": to, "body": body})


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


def assert_turn_complete(history: list[BaseMessage], ai_id: str) -> None:
    """The AI message is followed directly by one result per call, in call order."""
    assert validate_history(history) == []
    position = next(i for i, m in enumerate(history) if m.id == ai_id)
    ai = history[position]
    assert isinstance(ai, AIMessage)
    results = history[position + 1 : position + 1 + len(ai.tool_calls)]
    assert [r.tool_call_id for r in results if isinstance(r, ToolMessage)] == [
        c["id"] for c in ai.tool_calls
    ]
    assert [r.id for r in results] == [tool_result_id(ai_id, c["id"] or "") for c in ai.tool_calls]


class TestExactlyOnce:
    """An approved call runs once, whatever the number of re-runs of the node."""

    def test_calls_approved_one_interrupt_at_a_time_run_once(self, ledger: Ledger) -> None:
        """Three gated calls answered in three resumes, with re-runs in between: each runs once."""
        graph = build_graph(InMemorySaver(), ledger)
        turn = ask("h1", email("a@x.io"), email("b@x.io"), ("delete_file", {"path": "/tmp/r"}))
        graph.invoke({"messages": [turn]}, config("t"))
        ids = pending(graph, "t")
        assert sorted(ids) == [call_id("h1", i) for i in range(3)]
        for position in range(3):
            graph.invoke(None, config("t"))  # a re-run with no answer asks again
            assert ledger.calls() == []
            graph.invoke(Command(resume={ids[call_id("h1", position)]: APPROVE}), config("t"))
        assert sorted(ledger.calls()) == [call_id("h1", i) for i in range(3)]
        assert pending(graph, "t") == {}
        history = messages(graph, "t")
        assert_turn_complete(history, "ai-h1")
        assert history[-1].id == "reply-h1"
        graph.invoke(None, config("t"))
        assert len(ledger.calls()) == 3

    def test_batched_calls_run_once_after_reruns(self, ledger: Ledger) -> None:
        """One batched interrupt, re-run without an answer, then answered: each call runs once."""
        graph = build_graph(InMemorySaver(), ledger, interrupt_mode="batched")
        graph.invoke(
            {"messages": [ask("h1", email(), ("lookup", {"key": "k"}), email())]}, config("t")
        )
        for _ in range(2):
            out = graph.invoke(None, config("t"))
            assert len(out["__interrupt__"]) == 1
        graph.invoke(Command(resume={"decisions": [APPROVE, APPROVE]}), config("t"))
        assert sorted(ledger.calls()) == [call_id("h1", i) for i in range(3)]
        assert_turn_complete(messages(graph, "t"), "ai-h1")

    def test_non_gated_calls_wait_for_the_gated_ones(self, ledger: Ledger) -> None:
        """A non-gated call in the same turn runs once, when every decision is in."""
        graph = build_graph(InMemorySaver(), ledger)
        graph.invoke({"messages": [ask("h1", ("lookup", {"key": "k"}), email())]}, config("t"))
        assert ledger.calls() == []
        graph.invoke(Command(resume=APPROVE), config("t"))
        assert sorted(ledger.calls()) == [call_id("h1", 0), call_id("h1", 1)]

    def test_running_the_node_on_its_own_result_changes_nothing(self, ledger: Ledger) -> None:
        """Idempotent: a complete last unit means there is nothing to run."""
        graph = build_graph(InMemorySaver(), ledger)
        graph.invoke({"messages": [ask("h1", ("lookup", {"key": "k"}))]}, config("t"))
        node = ApprovalToolNode(make_tools(ledger), interrupt_on={})
        history = messages(graph, "t")
        assert node({"messages": history[:-1]}) == {}
        assert len(ledger.calls()) == 1


class TestRejectAndRespond:
    """A rejected or answered call never runs; its result follows its AI message."""

    def test_rejected_call_never_runs_and_gets_an_error_result(self, ledger: Ledger) -> None:
        """The reviewer's message is in the error result, right after the AI message."""
        graph = build_graph(InMemorySaver(), ledger)
        graph.invoke(
            {"messages": [ask("h1", ("delete_file", {"path": "/etc"}), email())]}, config("t")
        )
        ids = pending(graph, "t")
        reject = {"type": "reject", "message": "never touch /etc"}
        graph.invoke(Command(resume={ids["h1-c0"]: reject, ids["h1-c1"]: APPROVE}), config("t"))
        assert ledger.calls() == ["h1-c1"]
        history = messages(graph, "t")
        assert_turn_complete(history, "ai-h1")
        result = by_id(history)[tool_result_id("ai-h1", "h1-c0")]
        assert isinstance(result, ToolMessage)
        assert result.status == "error"
        assert "never touch /etc" in str(result.content)
        assert result.name == "delete_file"

    def test_reject_without_a_message_says_it_did_not_run(self, ledger: Ledger) -> None:
        """A bare reject still gives a clear error result."""
        graph = build_graph(InMemorySaver(), ledger)
        graph.invoke({"messages": [ask("h1", email())]}, config("t"))
        graph.invoke(Command(resume={"type": "reject"}), config("t"))
        result = by_id(messages(graph, "t"))[tool_result_id("ai-h1", "h1-c0")]
        assert isinstance(result, ToolMessage)
        assert result.status == "error"
        assert "did not run" in str(result.content)
        assert ledger.calls() == []

    def test_respond_gives_the_reviewer_text_as_the_result(self, ledger: Ledger) -> None:
        """``respond`` skips the tool; its message is a successful result."""
        graph = build_graph(InMemorySaver(), ledger)
        graph.invoke({"messages": [ask("h1", email())]}, config("t"))
        graph.invoke(
            Command(resume={"type": "respond", "message": "I sent it myself"}), config("t")
        )
        result = by_id(messages(graph, "t"))[tool_result_id("ai-h1", "h1-c0")]
        assert isinstance(result, ToolMessage)
        assert (result.content, result.status) == ("I sent it myself", "success")
        assert ledger.calls() == []


class TestEdit:
    """An edit replaces the AI message in place and only the edited args run."""

    def test_edit_replaces_the_ai_message_in_place(self, ledger: Ledger) -> None:
        """Same id and position, edited args in tool_calls, the tool ran with them only."""
        graph = build_graph(InMemorySaver(), ledger)
        graph.invoke({"messages": [ask("h1", email("ann@x.io"), email("bob@x.io"))]}, config("t"))
        before = [m.id for m in messages(graph, "t")]
        ids = pending(graph, "t")
        fixed = edit("send_email", to="ann@x.io", body="edited")
        graph.invoke(Command(resume={ids["h1-c0"]: fixed, ids["h1-c1"]: APPROVE}), config("t"))
        history = messages(graph, "t")
        assert [m.id for m in history][: len(before)] == before
        assert [m.id for m in history].count("ai-h1") == 1
        ai = by_id(history)["ai-h1"]
        assert isinstance(ai, AIMessage)
        assert [c["args"] for c in ai.tool_calls] == [
            {"to": "ann@x.io", "body": "edited"},
            {"to": "bob@x.io", "body": "hi"},
        ]
        assert [e["args"] for e in ledger.entries()] == [c["args"] for c in ai.tool_calls]
        assert_turn_complete(history, "ai-h1")

    def test_edit_updates_the_provider_copies_of_the_call(self, ledger: Ledger) -> None:
        """OpenAI-style ``additional_kwargs`` and Anthropic ``tool_use`` blocks show the edit."""
        call = {"name": "send_email", "args": {"to": "a", "body": "old"}, "id": "c1"}
        raw = {
            "id": "c1",
            "type": "function",
            "function": {"name": "send_email", "arguments": "{}"},
        }
        block = {"type": "tool_use", "id": "c1", "name": "send_email", "input": call["args"]}
        ai = AIMessage(
            [{"type": "text", "text": "sending"}, block],
            id="a1",
            tool_calls=[call],
            additional_kwargs={"tool_calls": [raw]},
        )
        graph = tools_graph(InMemorySaver(), ledger)
        graph.invoke({"messages": [HumanMessage("go", id="h0"), ai]}, config("t"))
        graph.invoke(Command(resume=edit("send_email", to="a", body="new")), config("t"))
        edited = by_id(messages(graph, "t"))["a1"]
        assert isinstance(edited, AIMessage)
        assert edited.tool_calls[0]["args"] == {"to": "a", "body": "new"}
        function = edited.additional_kwargs["tool_calls"][0]["function"]
        assert json.loads(function["arguments"]) == {"to": "a", "body": "new"}
        assert isinstance(edited.content, list)
        assert edited.content[1]["input"] == {"to": "a", "body": "new"}
        assert edited.content[0] == {"type": "text", "text": "sending"}


class TestInterrupts:
    """Per-call interrupts have distinct ids; resume maps and batched answers hit their calls."""

    def test_parallel_gated_calls_get_distinct_interrupt_ids(self, ledger: Ledger) -> None:
        """Every gated call of the turn is pending at once, each with its own id and request."""
        graph = build_graph(InMemorySaver(), ledger)
        out = graph.invoke(
            {
                "messages": [
                    ask("h1", email(), ("lookup", {"key": "k"}), ("delete_file", {"path": "/p"}))
                ]
            },
            config("t"),
        )
        interrupts = out["__interrupt__"]
        assert len({i.id for i in interrupts}) == len(interrupts) == 2
        requests = {i.value["tool_call_id"]: i.value for i in interrupts}
        assert requests["h1-c2"] == {
            "type": "tool_approval",
            "tool_call_id": "h1-c2",
            "ai_message_id": "ai-h1",
            "name": "delete_file",
            "args": {"path": "/p"},
            "description": "Deletes!",
            "allowed_decisions": ["approve", "reject"],
        }
        assert requests["h1-c0"]["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
        assert requests["h1-c0"]["description"] == (
            "The model wants to call 'send_email' with "
            '{"to": "ann@example.com", "body": "hi"}. Run it?'
        )
        with pytest.raises(RuntimeError, match="multiple pending interrupts"):
            graph.invoke(Command(resume=APPROVE), config("t"))
        assert ledger.calls() == []

    def test_a_resume_map_applies_each_decision_to_its_call(self, ledger: Ledger) -> None:
        """A map naming every interrupt, in any order, answers each call with its decision."""
        graph = build_graph(InMemorySaver(), ledger)
        calls = [email("a"), email("b"), email("c"), email("d")]
        graph.invoke({"messages": [ask("h1", *calls)]}, config("t"))
        ids = pending(graph, "t")
        answers = {
            ids["h1-c3"]: APPROVE,
            ids["h1-c2"]: {"type": "respond", "message": "answered c"},
            ids["h1-c1"]: {"type": "reject", "message": "not b"},
            ids["h1-c0"]: edit("send_email", to="a2", body="x"),
        }
        graph.invoke(Command(resume=answers), config("t"))
        assert {e["call_id"]: e["args"]["to"] for e in ledger.entries()} == {
            "h1-c0": "a2",
            "h1-c3": "d",
        }
        results = by_id(messages(graph, "t"))
        content = {c: results[tool_result_id("ai-h1", c)].content for c in ids}
        assert content["h1-c0"] == "sent to a2: x"
        assert "not b" in str(content["h1-c1"])
        assert content["h1-c2"] == "answered c"
        assert content["h1-c3"] == "sent to d: hi"

    def test_a_partial_resume_map_leaves_the_other_calls_pending(self, ledger: Ledger) -> None:
        """Answering one call keeps the others' interrupts, with the same ids."""
        graph = build_graph(InMemorySaver(), ledger)
        graph.invoke({"messages": [ask("h1", email("a"), email("b"), email("c"))]}, config("t"))
        ids = pending(graph, "t")
        graph.invoke(Command(resume={ids["h1-c1"]: APPROVE}), config("t"))
        left = pending(graph, "t")
        assert left == {c: ids[c] for c in ("h1-c0", "h1-c2")}
        assert ledger.calls() == []

    def test_an_invalid_answer_is_refused_before_it_is_saved(self, ledger: Ledger) -> None:
        """A decision the tool does not allow raises ValidationError; the interrupt stays."""
        graph = build_graph(InMemorySaver(), ledger)
        graph.invoke({"messages": [ask("h1", ("delete_file", {"path": "/p"}))]}, config("t"))
        ids = pending(graph, "t")
        with pytest.raises(ValidationError, match="allowed"):
            graph.invoke(
                Command(resume={ids["h1-c0"]: edit("delete_file", path="/q")}), config("t")
            )
        with pytest.raises(ValidationError):
            graph.invoke(Command(resume={ids["h1-c0"]: "yes"}), config("t"))
        assert pending(graph, "t") == ids
        graph.invoke(Command(resume={ids["h1-c0"]: APPROVE}), config("t"))
        assert ledger.calls() == ["h1-c0"]

    def test_valid_answers_sent_with_a_refused_one_are_kept(self, ledger: Ledger) -> None:
        """A map with one refused answer saves the others; nothing runs until all are in."""
        graph = build_graph(InMemorySaver(), ledger)
        graph.invoke(
            {"messages": [ask("h1", email("a"), ("delete_file", {"path": "/p"}))]}, config("t")
        )
        ids = pending(graph, "t")
        bad = {
            ids["h1-c0"]: edit("send_email", to="a2", body="x"),
            ids["h1-c1"]: {"type": "respond"},
        }
        with pytest.raises(ValidationError):
            graph.invoke(Command(resume=bad), config("t"))
        assert ledger.calls() == []
        later = {ids["h1-c0"]: {"type": "reject"}, ids["h1-c1"]: APPROVE}
        graph.invoke(Command(resume=later), config("t"))
        assert [(e["call_id"], e["args"]["to"]) for e in ledger.entries() if "to" in e["args"]] == [
            ("h1-c0", "a2")
        ]
        assert sorted(ledger.calls()) == ["h1-c0", "h1-c1"]
        assert_turn_complete(messages(graph, "t"), "ai-h1")

    def test_an_edit_cannot_switch_tools(self, ledger: Ledger) -> None:
        """An edit naming another tool, or without args, is refused."""
        graph = build_graph(InMemorySaver(), ledger)
        graph.invoke({"messages": [ask("h1", email())]}, config("t"))
        with pytest.raises(ValidationError, match="cannot change"):
            graph.invoke(Command(resume=edit("delete_file", path="/")), config("t"))
        with pytest.raises(ValidationError, match="respond"):
            graph.invoke(Command(resume={"type": "respond"}), config("t"))
        graph.invoke(Command(resume=APPROVE), config("t"))
        assert ledger.calls() == ["h1-c0"]

    def test_batched_mode_asks_once_and_applies_decisions_in_order(self, ledger: Ledger) -> None:
        """One HITLRequest-shaped interrupt; ``{"decisions": [...]}`` answers in call order."""
        graph = build_graph(InMemorySaver(), ledger, interrupt_mode="batched")
        turn = ask("h1", email("a"), ("lookup", {"key": "k"}), ("delete_file", {"path": "/p"}))
        out = graph.invoke({"messages": [turn]}, config("t"))
        (request,) = out["__interrupt__"]
        assert request.value["tool_call_ids"] == ["h1-c0", "h1-c2"]
        assert [a["name"] for a in request.value["action_requests"]] == [
            "send_email",
            "delete_file",
        ]
        assert request.value["review_configs"][1] == {
            "action_name": "delete_file",
            "allowed_decisions": ["approve", "reject"],
        }
        with pytest.raises(ValidationError, match="2 decision"):
            graph.invoke(Command(resume={"decisions": [APPROVE]}), config("t"))
        graph.invoke(
            Command(
                resume={"decisions": [edit("send_email", to="z", body="b"), {"type": "reject"}]}
            ),
            config("t"),
        )
        assert {e["call_id"]: e["args"] for e in ledger.entries()} == {
            "h1-c0": {"to": "z", "body": "b"},
            "h1-c1": {"key": "k"},
        }
        assert_turn_complete(messages(graph, "t"), "ai-h1")

    def test_non_gated_calls_run_without_an_interrupt(self, ledger: Ledger) -> None:
        """A turn of non-gated calls never pauses."""
        graph = build_graph(InMemorySaver(), ledger)
        out = graph.invoke(
            {"messages": [ask("h1", ("lookup", {"key": "a"}), ("lookup", {"key": "b"}))]},
            config("t"),
        )
        assert "__interrupt__" not in out
        assert sorted(ledger.calls()) == ["h1-c0", "h1-c1"]
        assert out["messages"][-1].id == "reply-h1"

    def test_interrupt_on_none_gates_every_tool(self, ledger: Ledger) -> None:
        """Without a policy every tool waits for a review; an empty policy gates none."""
        node = ApprovalToolNode(make_tools(ledger))
        graph = (
            StateGraph(STMState)
            .add_node(node)
            .add_edge(START, "tools")
            .compile(checkpointer=InMemorySaver())
        )
        calls = [{"name": n, "args": {"key": "a"}, "id": n} for n in ("lookup", "big_report")]
        out = graph.invoke({"messages": [AIMessage("", id="a1", tool_calls=calls)]}, config("t"))
        assert sorted(i.value["name"] for i in out["__interrupt__"]) == ["big_report", "lookup"]
        assert ledger.calls() == []
        open_graph = build_graph(InMemorySaver(), ledger, interrupt_on={})
        out = open_graph.invoke({"messages": [ask("h1", ("lookup", {"key": "a"}))]}, config("u"))
        assert "__interrupt__" not in out
        assert ledger.calls() == ["h1-c0"]


class TestResumeIsNeverReused:
    """A consumed answer is never applied to a later call."""

    @pytest.mark.parametrize("mode", ["per_call", "batched"])
    def test_a_new_gated_call_after_finishing_interrupts_again(
        self, ledger: Ledger, mode: Any
    ) -> None:
        """Turn two's call pauses for its own review; turn one's answer is not re-used."""
        graph = build_graph(InMemorySaver(), ledger, interrupt_mode=mode)
        graph.invoke({"messages": [ask("h1", email("a"))]}, config("t"))
        answer = APPROVE if mode == "per_call" else {"decisions": [APPROVE]}
        graph.invoke(Command(resume=answer), config("t"))
        assert ledger.calls() == ["h1-c0"]
        out = graph.invoke(None, config("t"))
        assert "__interrupt__" not in out
        out = graph.invoke({"messages": [ask("h2", email("b"))]}, config("t"))
        assert len(out["__interrupt__"]) == 1
        out = graph.invoke(None, config("t"))
        assert len(out["__interrupt__"]) == 1
        assert ledger.calls() == ["h1-c0"]
        reject = {"type": "reject", "message": "no"}
        graph.invoke(
            Command(resume=reject if mode == "per_call" else {"decisions": [reject]}), config("t")
        )
        assert ledger.calls() == ["h1-c0"]
        assert validate_history(messages(graph, "t")) == []

    def test_an_old_interrupt_id_is_refused_for_a_new_turn(self, ledger: Ledger) -> None:
        """Turn one's interrupt ids do not answer turn two's calls (strict resume)."""
        graph = build_graph(InMemorySaver(), ledger)
        graph.invoke({"messages": [ask("h1", email("a"))]}, config("t"))
        old = pending(graph, "t")["h1-c0"]
        graph.invoke(Command(resume={old: APPROVE}), config("t"))
        graph.invoke({"messages": [ask("h2", email("b"))]}, config("t"))
        assert old not in pending(graph, "t").values()
        graph.invoke(Command(resume={old: APPROVE}), config("t"))
        assert pending(graph, "t").keys() == {"h2-c0"}
        assert ledger.calls() == ["h1-c0"]


class TestPendingUnitSurvivesEviction:
    """While paused, TrimNode and SummarizeNode before the tools never evict the pending unit."""

    @staticmethod
    def long_history() -> list[BaseMessage]:
        history: list[BaseMessage] = []
        for i in range(10):
            history += [
                HumanMessage(f"old question {i}", id=f"old-h{i}"),
                AIMessage(f"answer {i}", id=f"old-a{i}"),
            ]
        return history

    @pytest.mark.parametrize("pre", [("trim",), ("summarize",), ("summarize", "trim")])
    def test_the_pending_unit_stays_while_paused(self, ledger: Ledger, pre: Any) -> None:
        """Older messages go; the unanswered AI message and its turn stay; resume completes it."""
        graph = build_graph(InMemorySaver(), ledger, pre=pre, max_tokens=6)
        turn = ask("h1", email("a"), email("b"))
        graph.invoke({"messages": [*self.long_history(), turn]}, config("t"))
        paused = messages(graph, "t")
        assert len(paused) < 22, "the evicting nodes did not run"
        assert [m.id for m in paused][-2:] == ["h1", "ai-h1"]
        assert validate_history(paused) == []
        for _ in range(2):  # paused re-runs
            graph.invoke(None, config("t"))
        assert [m.id for m in messages(graph, "t")][-2:] == ["h1", "ai-h1"]
        ids = pending(graph, "t")
        graph.invoke(Command(resume={ids["h1-c0"]: APPROVE, ids["h1-c1"]: APPROVE}), config("t"))
        history = messages(graph, "t")
        assert_turn_complete(history, "ai-h1")
        assert sorted(ledger.calls()) == ["h1-c0", "h1-c1"]
        if pre[0] == "summarize":
            assert graph.get_state(config("t")).values["summary"]["version"] >= 1


class TestToolErrors:
    """Unknown tools and raising tools give error results; handle_tool_errors controls it."""

    def test_an_unknown_tool_gets_an_error_result(self, ledger: Ledger) -> None:
        """No exception: the model reads which tools exist."""
        graph = build_graph(InMemorySaver(), ledger)
        out = graph.invoke({"messages": [ask("h1", ("teleport", {"to": "mars"}))]}, config("t"))
        result = by_id(out["messages"])[tool_result_id("ai-h1", "h1-c0")]
        assert isinstance(result, ToolMessage)
        assert result.status == "error"
        assert "'teleport' is not a tool" in str(result.content)
        assert "send_email" in str(result.content)

    def test_a_raising_tool_gets_an_error_result_with_the_exception_text(
        self, ledger: Ledger
    ) -> None:
        """The exception's type and text are in the result; the graph goes on."""
        graph = build_graph(InMemorySaver(), ledger)
        graph.invoke({"messages": [ask("h1", ("explode", {"reason": "disk full"}))]}, config("t"))
        out = graph.invoke(Command(resume=APPROVE), config("t"))
        result = by_id(out["messages"])[tool_result_id("ai-h1", "h1-c0")]
        assert isinstance(result, ToolMessage)
        assert result.status == "error"
        assert "RuntimeError: boom: disk full" in str(result.content)
        assert out["messages"][-1].id == "reply-h1"

    def test_handle_tool_errors_false_propagates_the_exception(self, ledger: Ledger) -> None:
        """The tool's own exception reaches the caller."""
        graph = build_graph(
            InMemorySaver(), ledger, interrupt_on={}, node_options={"handle_tool_errors": False}
        )
        with pytest.raises(RuntimeError, match="boom: x"):
            graph.invoke({"messages": [ask("h1", ("explode", {"reason": "x"}))]}, config("t"))

    @pytest.mark.parametrize(
        ("handler", "expected"),
        [("tool failed", "tool failed"), (lambda exc: f"custom: {exc}", "custom: boom: x")],
    )
    def test_handle_tool_errors_text_or_function(
        self, ledger: Ledger, handler: Any, expected: str
    ) -> None:
        """A string replaces the text; a function of the exception writes it."""
        graph = build_graph(
            InMemorySaver(), ledger, interrupt_on={}, node_options={"handle_tool_errors": handler}
        )
        out = graph.invoke({"messages": [ask("h1", ("explode", {"reason": "x"}))]}, config("t"))
        assert by_id(out["messages"])[tool_result_id("ai-h1", "h1-c0")].content == expected

    def test_bad_arguments_become_an_error_result(self, ledger: Ledger) -> None:
        """Arguments the tool's schema refuses are a tool error, not a crash."""
        graph = build_graph(InMemorySaver(), ledger, interrupt_on={})
        out = graph.invoke({"messages": [ask("h1", ("lookup", {"wrong": 1}))]}, config("t"))
        result = by_id(out["messages"])[tool_result_id("ai-h1", "h1-c0")]
        assert isinstance(result, ToolMessage)
        assert result.status == "error"
        assert ledger.calls() == []


class TestOptionsAndInputs:
    """Bad options fail when the node is built; bad states fail with STMError."""

    @pytest.mark.parametrize(
        "options",
        [
            {"interrupt_on": {"send_mail": True}},
            {"interrupt_on": {"send_email": {"allowed_decisions": []}}},
            {"interrupt_on": {"send_email": {"allowed_decisions": ["maybe"]}}},
            {"interrupt_on": {"send_email": "yes"}},
            {"interrupt_mode": "sometimes"},
            {"handle_tool_errors": 3},
            {"messages_key": ""},
            {"store": InMemoryStore()},
            {"offload_over_tokens": 0},
            {"artifacts_key": ""},
        ],
    )
    def test_bad_options_raise_invalid_argument(
        self, ledger: Ledger, options: dict[str, Any]
    ) -> None:
        """Each is refused with InvalidArgumentError (an STMError)."""
        with pytest.raises(InvalidArgumentError):
            ApprovalToolNode(make_tools(ledger), **options)

    def test_tools_must_be_a_non_empty_list_of_unique_tools(self, ledger: Ledger) -> None:
        """Empty lists, duplicates and non-tools are refused."""
        tools = make_tools(ledger)
        for bad in ([], [tools[0], tools[0]], ["lookup"]):
            with pytest.raises(InvalidArgumentError):
                ApprovalToolNode(bad)

    def test_plain_functions_are_converted_to_tools(self) -> None:
        """A function becomes a tool named after it."""

        def add(a: int, b: int) -> int:
            """Add two numbers."""
            return a + b

        node = ApprovalToolNode([add], interrupt_on={})
        ai = AIMessage(
            "", id="a1", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "c1"}]
        )
        update = node({"messages": [ai]})
        assert [(m.id, m.content) for m in update["messages"]] == [("stm-tool:a1:c1", "5")]

    def test_gated_calls_outside_a_graph_raise_a_clear_error(self, ledger: Ledger) -> None:
        """A review needs interrupt(), so a direct call names the calls waiting for it."""
        node = ApprovalToolNode(make_tools(ledger))
        ai = AIMessage(
            "", id="a1", tool_calls=[{"name": "lookup", "args": {"key": "k"}, "id": "c1"}]
        )
        with pytest.raises(InvalidArgumentError, match="c1"):
            node({"messages": [ai]})

    def test_a_broken_last_unit_raises_tool_pair_error(self, ledger: Ledger) -> None:
        """An orphan result in the tail is refused, not guessed at."""
        node = ApprovalToolNode(make_tools(ledger), interrupt_on={})
        state = {
            "messages": [HumanMessage("q", id="h1"), ToolMessage("x", tool_call_id="zz", id="t1")]
        }
        with pytest.raises(ToolPairError):
            node(state)

    def test_a_state_without_the_messages_key_raises(self, ledger: Ledger) -> None:
        """The error names the key to pass."""
        node = ApprovalToolNode(make_tools(ledger), messages_key="chat")
        with pytest.raises(STMError, match="chat"):
            node({"messages": []})

    def test_nothing_to_do_returns_an_empty_update(self, ledger: Ledger) -> None:
        """No AI message with unanswered calls at the end: ``{}``."""
        node = ApprovalToolNode(make_tools(ledger))
        assert node({"messages": []}) == {}
        assert node({"messages": [HumanMessage("q", id="h1")]}) == {}
        assert node({"messages": [AIMessage("plain", id="a1")]}) == {}

    def test_already_answered_calls_are_not_run_again(self, ledger: Ledger) -> None:
        """Only the unanswered calls of a pending unit run; their results follow the others."""
        node = ApprovalToolNode(make_tools(ledger), interrupt_on={})
        calls = [{"name": "lookup", "args": {"key": k}, "id": k} for k in ("c1", "c2", "c3")]
        ai = AIMessage("", id="a1", tool_calls=calls)
        done = ToolMessage("earlier", tool_call_id="c2", id="t2")
        update = node({"messages": [ai, done]})
        assert [m.tool_call_id for m in update["messages"]] == ["c1", "c3"]
        assert validate_history([ai, done, *update["messages"]]) == []
        assert ledger.calls() == ["c1", "c3"]


class TestAsync:
    """ainvoke: async tools, awaited, with the same guarantees."""

    async def test_ainvoke_runs_an_approved_async_tool_once(self, ledger: Ledger) -> None:
        """Two gated async calls answered one at a time, re-run in between: each runs once."""
        graph = build_graph(InMemorySaver(), ledger)
        turn = ask(
            "h1",
            ("fetch_page", {"url": "a"}),
            ("fetch_page", {"url": "b"}),
            ("lookup", {"key": "k"}),
        )
        out = await graph.ainvoke({"messages": [turn]}, config("t"))
        ids = {i.value["tool_call_id"]: i.id for i in out["__interrupt__"]}
        await graph.ainvoke(Command(resume={ids["h1-c1"]: APPROVE}), config("t"))
        await graph.ainvoke(None, config("t"))
        assert ledger.calls() == []
        out = await graph.ainvoke(
            Command(resume={ids["h1-c0"]: edit("fetch_page", url="a2")}), config("t")
        )
        assert sorted(ledger.calls()) == ["h1-c0", "h1-c1", "h1-c2"]
        assert by_id(out["messages"])[tool_result_id("ai-h1", "h1-c0")].content == "<html>a2</html>"
        assert_turn_complete(out["messages"], "ai-h1")

    async def test_ainvoke_batched_on_async_sqlite(self, ledger: Ledger, sqlite_path: Path) -> None:
        """Batched mode through STMSaver over AsyncSqliteSaver."""
        async with STMSaver.from_async_sqlite(sqlite_path) as saver:
            await saver.asetup()
            graph = build_graph(saver, ledger, interrupt_mode="batched")
            await graph.ainvoke(
                {"messages": [ask("h1", ("fetch_page", {"url": "a"}), email())]}, config("t")
            )
            await graph.ainvoke(None, config("t"))
            out = await graph.ainvoke(
                Command(resume={"decisions": [APPROVE, {"type": "reject", "message": "no"}]}),
                config("t"),
            )
        assert ledger.calls() == ["h1-c0"]
        assert_turn_complete(out["messages"], "ai-h1")


class TestOffload:
    """Large results are offloaded: summary plus reference in the message, an artifact record."""

    def test_a_large_result_is_offloaded_with_its_artifact(self, ledger: Ledger) -> None:
        """Stable id, short content with a reference, the full text in the store."""
        store = InMemoryStore()
        graph = build_graph(
            InMemorySaver(),
            ledger,
            node_options={"offload_over_tokens": 200, "store": store},
        )
        turn = ask("h1", ("big_report", {"rows": 300}), email())
        graph.invoke({"messages": [turn]}, config("t"))
        graph.invoke(None, config("t"))
        graph.invoke(Command(resume=APPROVE), config("t"))
        values = graph.get_state(config("t")).values
        result_id = tool_result_id("ai-h1", "h1-c0")
        result = by_id(values["messages"])[result_id]
        assert "offloaded" in str(result.content)
        assert len(str(result.content)) < 2_000
        (artifact,) = values["artifacts"]
        assert artifact["source_message_id"] == result_id
        assert artifact["tokens"] > 200
        full = store.get(offload_namespace("t"), result_id)
        assert full is not None
        assert full.value["content"].count("\n") == 299
        small = by_id(values["messages"])[tool_result_id("ai-h1", "h1-c1")]
        assert small.content == "sent to ann@example.com: hi"
        assert ledger.calls().count("h1-c0") == 1

    async def test_async_offload_uses_the_graph_store(self, ledger: Ledger) -> None:
        """With no store passed, the store the graph was compiled with receives the output."""
        store = InMemoryStore()
        graph = tools_graph(
            InMemorySaver(), ledger, interrupt_on={}, store=store, offload_over_tokens=100
        )
        ai = AIMessage(
            "", id="a1", tool_calls=[{"name": "big_report", "args": {"rows": 100}, "id": "c1"}]
        )
        out = await graph.ainvoke({"messages": [ai]}, config("t"))
        assert out["artifacts"][0]["source_message_id"] == "stm-tool:a1:c1"
        assert store.get(offload_namespace("t"), "stm-tool:a1:c1") is not None


class TestBackends:
    """Resumes through STMSaver on SQLite (from a new process) and on PostgreSQL."""

    @staticmethod
    def run_worker(
        backend: str, target: str, thread: str, ledger: Path, answer: Any, mode: str = "per_call"
    ) -> dict[str, Any]:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.support.approval_graphs",
                backend,
                target,
                thread,
                str(ledger),
                json.dumps(answer),
                mode,
            ],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return dict(json.loads(result.stdout))

    @pytest.mark.parametrize(
        "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
    )
    def test_resume_map_answered_from_new_processes(
        self, backend: str, tmp_path: Path, request: pytest.FixtureRequest
    ) -> None:
        """Pause here; two new processes each answer some calls; every call runs once."""
        target = (
            str(tmp_path / "approvals.sqlite")
            if backend == "sqlite"
            else request.getfixturevalue("postgres_uri")
        )
        ledger = Ledger(tmp_path / "ledger.jsonl")
        with open_saver(backend, target) as saver:
            graph = build_graph(saver, ledger)
            turn = ask(
                "h1",
                email("a"),
                ("lookup", {"key": "k"}),
                email("b"),
                ("delete_file", {"path": "/p"}),
            )
            graph.invoke({"messages": [turn]}, config("t"))
            ids = pending(graph, "t")
        assert len(ids) == 3
        first = self.run_worker(
            backend, target, "t", ledger.path or tmp_path, {ids["h1-c0"]: APPROVE}
        )
        assert {i["value"]["tool_call_id"] for i in first["interrupts"]} == {"h1-c2", "h1-c3"}
        assert {i["id"] for i in first["interrupts"]} == {ids["h1-c2"], ids["h1-c3"]}
        assert ledger.calls() == []
        answers = {
            ids["h1-c2"]: edit("send_email", to="b2", body="x"),
            ids["h1-c3"]: {"type": "reject"},
        }
        final = self.run_worker(backend, target, "t", ledger.path or tmp_path, answers)
        assert final["interrupts"] == []
        assert sorted(ledger.calls()) == ["h1-c0", "h1-c1", "h1-c2"]
        assert [e["args"] for e in ledger.entries() if e["call_id"] == "h1-c2"] == [
            {"to": "b2", "body": "x"}
        ]
        ids_in_order = [m["id"] for m in final["messages"]]
        assert ids_in_order[:2] == ["h1", "ai-h1"]
        assert ids_in_order[2:6] == [tool_result_id("ai-h1", call_id("h1", i)) for i in range(4)]
        assert final["messages"][1]["tool_calls"][2]["args"] == {"to": "b2", "body": "x"}
        with open_saver(backend, target) as saver:
            graph = build_graph(saver, ledger)
            assert validate_history(messages(graph, "t")) == []
            graph.invoke(None, config("t"))
        assert len(ledger.calls()) == 3

    def test_batched_resume_from_a_new_process_on_sqlite(self, tmp_path: Path) -> None:
        """The batched answer given in another process runs each approved call once."""
        target = str(tmp_path / "approvals.sqlite")
        ledger = Ledger(tmp_path / "ledger.jsonl")
        with open_saver("sqlite", target) as saver:
            graph = build_graph(saver, ledger, interrupt_mode="batched")
            graph.invoke({"messages": [ask("h1", email("a"), email("b"))]}, config("t"))
        answer = {"decisions": [APPROVE, {"type": "respond", "message": "skip"}]}
        final = self.run_worker("sqlite", target, "t", tmp_path / "ledger.jsonl", answer, "batched")
        assert final["interrupts"] == []
        assert ledger.calls() == ["h1-c0"]
        assert final["messages"][3]["content"] == "skip"

    def test_sqlite_saver_on_a_shared_connection(self, tmp_path: Path, ledger: Ledger) -> None:
        """STMSaver(SqliteSaver(sqlite3.connect(...))) works the same."""
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        connection = sqlite3.connect(tmp_path / "shared.sqlite", check_same_thread=False)
        try:
            saver = STMSaver(SqliteSaver(connection))
            saver.setup()
            graph = build_graph(saver, ledger)
            graph.invoke({"messages": [ask("h1", email("a"), email("b"))]}, config("t"))
            ids = pending(graph, "t")
            graph.invoke(Command(resume={ids["h1-c1"]: APPROVE}), config("t"))
            graph.invoke(Command(resume={ids["h1-c0"]: APPROVE}), config("t"))
        finally:
            connection.close()
        assert sorted(ledger.calls()) == ["h1-c0", "h1-c1"]

    @pytest.mark.postgres
    async def test_async_postgres_resume(self, postgres_uri: str, ledger: Ledger) -> None:
        """STMSaver over AsyncPostgresSaver: per-call interrupts answered in two resumes."""
        async with STMSaver.from_async_postgres(postgres_uri) as saver:
            await saver.asetup()
            graph = build_graph(saver, ledger)
            out = await graph.ainvoke(
                {"messages": [ask("h1", ("fetch_page", {"url": "a"}), email())]}, config("t")
            )
            ids = {i.value["tool_call_id"]: i.id for i in out["__interrupt__"]}
            await graph.ainvoke(Command(resume={ids["h1-c1"]: APPROVE}), config("t"))
            assert ledger.calls() == []
            out = await graph.ainvoke(Command(resume={ids["h1-c0"]: APPROVE}), config("t"))
        assert sorted(ledger.calls()) == ["h1-c0", "h1-c1"]
        assert_turn_complete(out["messages"], "ai-h1")


def ask_turn(ai_id: str, *calls: tuple[str, dict[str, Any], str]) -> AIMessage:
    """An AI message with ``calls`` as (tool name, args, call id)."""
    return AIMessage(
        "", id=ai_id, tool_calls=[{"name": n, "args": a, "id": i} for n, a, i in calls]
    )


def confirming_turn() -> AIMessage:
    """A gated email, a non-gated lookup and two calls to a tool that interrupts itself."""
    return ask_turn(
        "a1",
        ("send_email", {"to": "ann", "body": "hi"}, "c1"),
        ("lookup", {"key": "k"}, "c2"),
        ("confirm", {"question": "refund?"}, "c3"),
        ("confirm", {"question": "notify?"}, "c4"),
    )


class TestToolsThatInterrupt:
    """A tool that calls interrupt() itself never makes its finished siblings run again."""

    @pytest.mark.parametrize("mode", ["per_call", "batched"])
    def test_the_review_repro_runs_the_gated_call_once(self, ledger: Ledger, mode: Any) -> None:
        """The review's repro: approve the gated call, answer the asking tool; one run each."""
        graph = tools_graph(
            InMemorySaver(), ledger, extra_tools=[make_asking_tool(ledger)], interrupt_mode=mode
        )
        turn = ask_turn(
            "a1",
            ("send_email", {"to": "ann", "body": "hi"}, "c1"),
            ("confirm", {"question": "sure?"}, "c2"),
        )
        graph.invoke({"messages": [turn]}, config("t"))
        graph.invoke(
            Command(resume=APPROVE if mode == "per_call" else {"decisions": [APPROVE]}),
            config("t"),
        )
        assert ledger.calls() == ["c1"]
        out = graph.invoke(Command(resume="yes"), config("t"))
        assert ledger.calls() == ["c1", "c2"]
        results = by_id(out["messages"])
        assert results[tool_result_id("a1", "c2")].content == "the user said yes"
        assert results[tool_result_id("a1", "c1")].content == "sent to ann: hi"
        assert_turn_complete(out["messages"], "a1")

    def test_sibling_interrupts_are_raised_together_and_answered_by_id(
        self, ledger: Ledger
    ) -> None:
        """Both asking calls interrupt at once (distinct ids); each answer reaches its own
        call, one resume at a time; the finished calls never run again."""
        graph = tools_graph(InMemorySaver(), ledger, extra_tools=[make_asking_tool(ledger)])
        graph.invoke({"messages": [confirming_turn()]}, config("t"))
        out = graph.invoke(Command(resume=APPROVE), config("t"))
        asked = {i.value["tool_call_id"]: i.id for i in out["__interrupt__"]}
        assert sorted(asked) == ["c3", "c4"]
        assert len(set(asked.values())) == 2
        assert sorted(ledger.calls()) == ["c1", "c2"]
        out = graph.invoke(Command(resume={asked["c4"]: "no"}), config("t"))
        assert [i.id for i in out["__interrupt__"]] == [asked["c3"]]
        assert sorted(ledger.calls()) == ["c1", "c2", "c4"]
        out = graph.invoke(Command(resume={asked["c3"]: "yes"}), config("t"))
        assert "__interrupt__" not in out
        assert sorted(ledger.calls()) == ["c1", "c2", "c3", "c4"]
        answers = {e["call_id"]: e["args"].get("answer") for e in ledger.entries()}
        assert (answers["c3"], answers["c4"]) == ("yes", "no")
        results = by_id(out["messages"])
        assert results[tool_result_id("a1", "c3")].content == "the user said yes"
        assert results[tool_result_id("a1", "c4")].content == "the user said no"
        assert_turn_complete(out["messages"], "a1")

    async def test_async_siblings_run_once_and_get_their_own_answers(self, ledger: Ledger) -> None:
        """ainvoke: the same, with an async gated tool among the calls."""
        graph = tools_graph(InMemorySaver(), ledger, extra_tools=[make_asking_tool(ledger)])
        turn = ask_turn(
            "a1",
            ("fetch_page", {"url": "u"}, "c1"),
            ("confirm", {"question": "a?"}, "c2"),
            ("confirm", {"question": "b?"}, "c3"),
        )
        await graph.ainvoke({"messages": [turn]}, config("t"))
        out = await graph.ainvoke(Command(resume=APPROVE), config("t"))
        asked = {i.value["tool_call_id"]: i.id for i in out["__interrupt__"]}
        assert sorted(asked) == ["c2", "c3"]
        out = await graph.ainvoke(Command(resume={asked["c2"]: "first"}), config("t"))
        assert [i.id for i in out["__interrupt__"]] == [asked["c3"]]
        out = await graph.ainvoke(Command(resume={asked["c3"]: "second"}), config("t"))
        assert sorted(ledger.calls()) == ["c1", "c2", "c3"]
        results = by_id(out["messages"])
        assert results[tool_result_id("a1", "c2")].content == "the user said first"
        assert results[tool_result_id("a1", "c3")].content == "the user said second"
        assert_turn_complete(out["messages"], "a1")

    def test_a_failing_tool_does_not_rerun_its_finished_siblings(self, ledger: Ledger) -> None:
        """handle_tool_errors=False: the node fails; the next attempt re-runs the failed
        call only."""
        graph = tools_graph(InMemorySaver(), ledger, interrupt_on={}, handle_tool_errors=False)
        turn = ask_turn("a1", ("lookup", {"key": "k"}, "c1"), ("explode", {"reason": "r"}, "c2"))
        with pytest.raises(RuntimeError, match="boom"):
            graph.invoke({"messages": [turn]}, config("t"))
        with pytest.raises(RuntimeError, match="boom"):
            graph.invoke(None, config("t"))
        assert ledger.calls() == ["c1", "c2", "c2"]

    def test_calls_start_in_call_order_and_run_concurrently(self, ledger: Ledger) -> None:
        """Each tool waits at a barrier for the other: both finish only if they run at the
        same time; the ledger shows them started in ``tool_calls`` order."""
        barrier = threading.Barrier(2, timeout=10)

        @tool
        def meet(who: str, call: Annotated[str, InjectedToolCallId]) -> str:
            """Wait for the other call."""
            ledger.record("meet", call, {"who": who})
            barrier.wait()
            return f"{who} met"

        graph = (
            StateGraph(STMState)
            .add_node(ApprovalToolNode([meet], interrupt_on={"meet": True}))
            .add_edge(START, "tools")
            .compile(checkpointer=InMemorySaver())
        )
        turn = ask_turn("a1", ("meet", {"who": "a"}, "c1"), ("meet", {"who": "b"}, "c2"))
        graph.invoke({"messages": [turn]}, config("t"))
        ids = pending(graph, "t")
        out = graph.invoke(Command(resume={i: APPROVE for i in ids.values()}), config("t"))
        assert [m.content for m in out["messages"][1:]] == ["a met", "b met"]
        assert ledger.calls() == ["c1", "c2"]

    async def test_a_thread_paused_by_invoke_resumes_with_ainvoke(self, ledger: Ledger) -> None:
        """The sync and async runs share the saved results: nothing runs twice."""
        graph = tools_graph(InMemorySaver(), ledger, extra_tools=[make_asking_tool(ledger)])
        turn = ask_turn(
            "a1",
            ("send_email", {"to": "ann", "body": "hi"}, "c1"),
            ("confirm", {"question": "sure?"}, "c2"),
        )
        graph.invoke({"messages": [turn]}, config("t"))
        graph.invoke(Command(resume=APPROVE), config("t"))
        out = await graph.ainvoke(Command(resume="yes"), config("t"))
        assert ledger.calls() == ["c1", "c2"]
        assert_turn_complete(out["messages"], "a1")

    def test_resume_key_contract(self) -> None:
        """Contract: the configurable keys the node reads to drop a stale plain resume
        value (langgraph#8837) are LangGraph's; fails loudly if LangGraph renames them."""
        from langgraph._internal._constants import CONFIG_KEY_RESUME_MAP, CONFIG_KEY_SCRATCHPAD
        from langgraph._internal._scratchpad import PregelScratchpad

        from langgraph_stm import _approval

        assert _approval.RESUME_MAP_KEY == CONFIG_KEY_RESUME_MAP
        assert _approval.SCRATCHPAD_KEY == CONFIG_KEY_SCRATCHPAD
        assert "get_null_resume" in {f.name for f in dataclasses.fields(PregelScratchpad)}


class TestEditedArgs:
    """An edit's args are checked against the tool's schema before LangGraph saves them."""

    @pytest.mark.parametrize(
        ("args", "match"),
        [
            ({"ordr": 5}, "not arguments of 'send_email'"),
            ({"to": "a"}, "body: Field required"),
            ({"to": 5, "body": "x"}, "to: Input should be a valid string"),
            ({"to": "a", "body": "x", "cc": "b"}, r"\['cc'\] are not arguments"),
        ],
    )
    @pytest.mark.parametrize("mode", ["per_call", "batched"])
    def test_args_that_do_not_fit_are_refused_and_can_be_answered_again(
        self, ledger: Ledger, mode: Any, args: dict[str, Any], match: str
    ) -> None:
        """ValidationError names the problem; the same interrupt stays; a good edit runs."""
        graph = tools_graph(InMemorySaver(), ledger, interrupt_mode=mode)
        turn = ask_turn("a1", ("send_email", {"to": "a", "body": "hi"}, "c1"))
        before = graph.invoke({"messages": [turn]}, config("t"))["__interrupt__"]

        def answer(decision: dict[str, Any]) -> Any:
            return decision if mode == "per_call" else {"decisions": [decision]}

        bad = {"type": "edit", "edited_action": {"name": "send_email", "args": args}}
        with pytest.raises(ValidationError, match=match):
            graph.invoke(Command(resume=answer(bad)), config("t"))
        assert [i.id for i in graph.get_state(config("t")).interrupts] == [i.id for i in before]
        assert ledger.calls() == []
        graph.invoke(Command(resume=answer(edit("send_email", to="b", body="ok"))), config("t"))
        assert [e["args"] for e in ledger.entries()] == [{"to": "b", "body": "ok"}]

    @pytest.mark.parametrize("mode", ["per_call", "batched"])
    def test_the_response_schema_shows_the_tool_args_schema(
        self, ledger: Ledger, mode: Any
    ) -> None:
        """The edit branch of the published schema is the tool's own argument schema
        (what the model sees: the injected call id is not in it)."""
        graph = tools_graph(InMemorySaver(), ledger, interrupt_mode=mode)
        turn = ask_turn("a1", ("send_email", {"to": "a", "body": "hi"}, "c1"))
        (request,) = graph.invoke({"messages": [turn]}, config("t"))["__interrupt__"]
        schema = request.response_schema
        if mode == "batched":
            schema = schema["properties"]["decisions"]["prefixItems"][0]
        (edit_branch,) = [
            b for b in schema["oneOf"] if b["properties"]["type"] == {"const": "edit"}
        ]
        args = edit_branch["properties"]["edited_action"]["properties"]["args"]
        assert sorted(args["properties"]) == ["body", "to"]
        assert sorted(args["required"]) == ["body", "to"]
        assert args["properties"]["to"]["type"] == "string"

    def test_nested_models_are_inlined_in_the_published_schema(self, ledger: Ledger) -> None:
        """A tool argument that is a model shows up in full (no dangling $ref)."""

        @tool
        def ship(order: str, to: Address) -> str:
            """Ship an order."""
            ledger.record("ship", order, {"city": to.city})
            return f"shipped to {to.city}"

        graph = (
            StateGraph(STMState)
            .add_node(ApprovalToolNode([ship], interrupt_on={"ship": True}))
            .add_edge(START, "tools")
            .compile(checkpointer=InMemorySaver())
        )
        turn = ask_turn("a1", ("ship", {"order": "1", "to": {"city": "Oslo"}}, "c1"))
        (request,) = graph.invoke({"messages": [turn]}, config("t"))["__interrupt__"]
        assert "$ref" not in json.dumps(request.response_schema)
        with pytest.raises(ValidationError, match=r"to\.city: Field required"):
            graph.invoke(Command(resume=edit("ship", order="1", to={})), config("t"))
        out = graph.invoke(
            Command(resume=edit("ship", order="1", to={"city": "Rome"})), config("t")
        )
        assert out["messages"][-1].content == "shipped to Rome"

    def test_a_json_schema_tool_gets_its_required_and_closed_keys_checked(
        self, ledger: Ledger
    ) -> None:
        """A tool defined by a JSON schema: missing required or unknown (closed schema)
        args are refused; the schema is published as it is."""
        schema = {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
            "additionalProperties": False,
        }

        def search(**kwargs: Any) -> str:
            ledger.record("search", "c1", kwargs)
            return f"found {kwargs['q']}"

        tool_ = StructuredTool.from_function(
            search, name="search", description="Search.", args_schema=schema
        )
        graph = (
            StateGraph(STMState)
            .add_node(ApprovalToolNode([tool_], interrupt_on={"search": True}))
            .add_edge(START, "tools")
            .compile(checkpointer=InMemorySaver())
        )
        (request,) = graph.invoke(
            {"messages": [ask_turn("a1", ("search", {"q": "x"}, "c1"))]}, config("t")
        )["__interrupt__"]
        (edit_branch,) = [
            b
            for b in request.response_schema["oneOf"]
            if b["properties"]["type"]["const"] == "edit"
        ]
        shown = edit_branch["properties"]["edited_action"]["properties"]["args"]
        assert shown["properties"] == schema["properties"]
        for bad in ({}, {"q": "y", "page": 2}):
            with pytest.raises(ValidationError, match="do not fit"):
                graph.invoke(Command(resume=edit("search", **bad)), config("t"))
        out = graph.invoke(Command(resume=edit("search", q="y")), config("t"))
        assert out["messages"][-1].content == "found y"
        assert ledger.calls() == ["c1"]


class TestStateKeys:
    """messages_key and artifacts_key name the state keys the node reads and updates."""

    def test_custom_keys_through_a_graph(self, ledger: Ledger) -> None:
        """Messages under ``chat``, offload records under ``records``."""
        node = ApprovalToolNode(
            make_tools(ledger),
            interrupt_on={"send_email": True},
            messages_key="chat",
            artifacts_key="records",
            offload_over_tokens=100,
            store=InMemoryStore(),
        )
        graph = (
            StateGraph(Chat)
            .add_node(node)
            .add_edge(START, "tools")
            .compile(checkpointer=InMemorySaver())
        )
        turn = ask_turn(
            "a1",
            ("big_report", {"rows": 100}, "c1"),
            ("send_email", {"to": "a", "body": "b"}, "c2"),
        )
        graph.invoke({"chat": [turn]}, config("t"))
        out = graph.invoke(Command(resume=APPROVE), config("t"))
        assert [m.id for m in out["chat"]] == [
            "a1",
            tool_result_id("a1", "c1"),
            tool_result_id("a1", "c2"),
        ]
        assert "offloaded" in str(out["chat"][1].content)
        assert [r["source_message_id"] for r in out["records"]] == [tool_result_id("a1", "c1")]

    def test_offload_on_a_state_without_the_artifacts_key_fails_before_running(
        self, ledger: Ledger
    ) -> None:
        """MessagesState has no ``artifacts``: a clear error on the first run, no tool ran,
        rather than artifact records dropped silently."""
        node = ApprovalToolNode(
            make_tools(ledger), interrupt_on={}, offload_over_tokens=100, store=InMemoryStore()
        )
        graph = (
            StateGraph(MessagesState)
            .add_node(node)
            .add_edge(START, "tools")
            .compile(checkpointer=InMemorySaver())
        )
        turn = ask_turn("a1", ("big_report", {"rows": 100}, "c1"))
        with pytest.raises(InvalidArgumentError, match="'artifacts', which the state does not"):
            graph.invoke({"messages": [turn]}, config("t"))
        assert ledger.calls() == []

    def test_artifacts_key_none_offloads_without_records(self, ledger: Ledger) -> None:
        """``artifacts_key=None``: the result is offloaded, no record is written."""
        store = InMemoryStore()
        node = ApprovalToolNode(
            make_tools(ledger),
            interrupt_on={},
            offload_over_tokens=100,
            store=store,
            artifacts_key=None,
        )
        graph = (
            StateGraph(MessagesState)
            .add_node(node)
            .add_edge(START, "tools")
            .compile(checkpointer=InMemorySaver())
        )
        out = graph.invoke(
            {"messages": [ask_turn("a1", ("big_report", {"rows": 100}, "c1"))]}, config("t")
        )
        assert "offloaded" in str(out["messages"][-1].content)
        assert "artifacts" not in out
        assert store.get(offload_namespace("t"), tool_result_id("a1", "c1")) is not None


class TestRefusedTools:
    """Tools the node cannot run are refused when it is built; a Command is never applied."""

    @pytest.mark.parametrize("kind", ["state", "state_field", "store", "runtime", "plain"])
    def test_tools_with_injected_parameters_are_refused(self, kind: str) -> None:
        """InjectedState, InjectedStore, ToolRuntime (and any other hidden parameter but
        InjectedToolCallId) would be left unfilled."""
        if kind == "state":

            @tool
            def peek(x: int, state: Annotated[dict[str, Any], InjectedState]) -> str:
                """Peek."""
                return ""
        elif kind == "state_field":

            @tool
            def peek(x: int, goal: Annotated[str, InjectedState("goal")]) -> str:
                """Peek."""
                return ""
        elif kind == "store":

            @tool
            def peek(x: int, store: Annotated[Any, InjectedStore()]) -> str:
                """Peek."""
                return ""
        elif kind == "runtime":

            @tool
            def peek(x: int, runtime: ToolRuntime) -> str:
                """Peek."""
                return ""
        else:

            @tool
            def peek(x: int, secret: Annotated[str, InjectedToolArg]) -> str:
                """Peek."""
                return ""

        with pytest.raises(InvalidArgumentError, match="'peek' has parameters"):
            ApprovalToolNode([peek])

    def test_a_tool_declared_to_return_a_command_is_refused(self) -> None:
        """Its Command would not be applied, so it is refused up front."""

        @tool
        def route(x: int) -> Command:  # type: ignore[type-arg]
            """Route."""
            return Command(goto="x")

        with pytest.raises(InvalidArgumentError, match="declared to return a Command"):
            ApprovalToolNode([route])

    @pytest.mark.parametrize("handle_tool_errors", [True, False])
    def test_an_undeclared_command_gets_an_error_result_once(
        self, ledger: Ledger, handle_tool_errors: bool
    ) -> None:
        """It ran, so the node does not fail (which would run it again): an error result
        says the Command was not applied, and the graph goes on."""

        @tool
        def sneaky(x: int) -> Any:
            """Returns a Command without saying so."""
            ledger.record("sneaky", "c1", {"x": x})
            return Command(update={"goal": "hijacked"})

        graph = (
            StateGraph(STMState)
            .add_node(
                ApprovalToolNode(
                    [sneaky], interrupt_on={"sneaky": True}, handle_tool_errors=handle_tool_errors
                )
            )
            .add_edge(START, "tools")
            .compile(checkpointer=InMemorySaver())
        )
        graph.invoke({"messages": [ask_turn("a1", ("sneaky", {"x": 1}, "c1"))]}, config("t"))
        out = graph.invoke(Command(resume=APPROVE), config("t"))
        result = out["messages"][-1]
        assert (result.id, result.status) == (tool_result_id("a1", "c1"), "error")
        assert "Command" in str(result.content)
        assert out.get("goal") is None
        assert ledger.calls() == ["c1"]
        graph.invoke(None, config("t"))
        assert ledger.calls() == ["c1"]

    def test_injected_tool_call_id_and_config_parameters_are_filled(self, ledger: Ledger) -> None:
        """The two parameters the node does fill are accepted."""

        @tool
        def who(x: int, call: Annotated[str, InjectedToolCallId], config: RunnableConfig) -> str:
            """Who am I."""
            return f"{call} in {config['configurable']['thread_id']}"

        graph = (
            StateGraph(STMState)
            .add_node(ApprovalToolNode([who], interrupt_on={}))
            .add_edge(START, "tools")
            .compile(checkpointer=InMemorySaver())
        )
        out = graph.invoke({"messages": [ask_turn("a1", ("who", {"x": 1}, "c1"))]}, config("t"))
        assert out["messages"][-1].content == "c1 in t"


class TestWhereItRuns:
    """Outside a graph run, or without a checkpointer, gated calls raise STMError."""

    def test_inside_a_plain_runnable_gated_calls_raise_invalid_argument(
        self, ledger: Ledger
    ) -> None:
        """Not a KeyError from LangGraph's internals; non-gated calls still run."""
        node = ApprovalToolNode(make_tools(ledger), interrupt_on={"send_email": True})
        wrapped = RunnableLambda(lambda state: node.invoke(state))
        gated = ask_turn("a1", ("send_email", {"to": "a", "body": "b"}, "c1"))
        with pytest.raises(InvalidArgumentError, match="c1"):
            wrapped.invoke({"messages": [gated]})
        update = wrapped.invoke({"messages": [ask_turn("a2", ("lookup", {"key": "k"}, "c2"))]})
        assert [m.content for m in update["messages"]] == ["value of k"]
        assert ledger.calls() == ["c2"]

    async def test_inside_a_plain_runnable_async(self, ledger: Ledger) -> None:
        """The async path too."""
        node = ApprovalToolNode(make_tools(ledger), interrupt_on={"send_email": True})

        async def call(state: Any) -> Any:
            return await node.ainvoke(state)

        gated = ask_turn("a1", ("send_email", {"to": "a", "body": "b"}, "c1"))
        with pytest.raises(InvalidArgumentError, match="c1"):
            await RunnableLambda(call).ainvoke({"messages": [gated]})

    @pytest.mark.parametrize("use_async", [False, True])
    async def test_without_a_checkpointer_gated_calls_raise(
        self, ledger: Ledger, use_async: bool
    ) -> None:
        """The interrupt could never be resumed: a clear error, nothing ran; a turn
        without gated calls still runs."""
        graph = tools_graph(None, ledger)
        gated = {"messages": [ask_turn("a1", ("send_email", {"to": "a", "body": "b"}, "c1"))]}
        with pytest.raises(InvalidArgumentError, match="without a checkpointer"):
            await graph.ainvoke(gated) if use_async else graph.invoke(gated)
        assert ledger.calls() == []
        free = {"messages": [ask_turn("a2", ("lookup", {"key": "k"}, "c2"))]}
        out = await graph.ainvoke(free) if use_async else graph.invoke(free)
        assert out["messages"][-1].content == "value of k"

    async def test_the_sync_entry_point_inside_an_async_node_raises(self, ledger: Ledger) -> None:
        """Its tasks cannot be waited for there: a clear error naming ainvoke."""
        node = ApprovalToolNode(make_tools(ledger), interrupt_on={})

        async def wrapper(state: STMState) -> dict[str, Any]:
            return node.invoke(state)

        graph = (
            StateGraph(STMState)
            .add_node("wrapper", wrapper)
            .add_edge(START, "wrapper")
            .compile(checkpointer=InMemorySaver())
        )
        turn = ask_turn("a1", ("lookup", {"key": "k"}, "c1"))
        with pytest.raises(InvalidArgumentError, match="ainvoke"):
            await graph.ainvoke({"messages": [turn]}, config("t"))


class TestEditedContentBlocks:
    """An edit updates every content block that carries the call id."""

    def test_v1_tool_call_and_responses_function_call_blocks(self, ledger: Ledger) -> None:
        """LangChain v1 ``tool_call`` and OpenAI Responses ``function_call`` blocks show the
        edited args; blocks of other calls and other kinds are kept as they are."""
        args = {"to": "a", "body": "old"}
        calls = [
            {"name": "send_email", "args": args, "id": "c1"},
            {"name": "send_email", "args": args, "id": "c2"},
        ]
        content: list[Any] = [
            {"type": "reasoning", "reasoning": "think"},
            {"type": "tool_call", "id": "c1", "name": "send_email", "args": args},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "c1",
                "name": "send_email",
                "arguments": json.dumps(args),
            },
            {"type": "tool_call", "id": "c2", "name": "send_email", "args": args},
        ]
        ai = AIMessage(content, id="a1", tool_calls=calls)
        graph = tools_graph(InMemorySaver(), ledger)
        graph.invoke({"messages": [ai]}, config("t"))
        ids = pending(graph, "t")
        graph.invoke(
            Command(resume={ids["c1"]: edit("send_email", to="a", body="new"), ids["c2"]: APPROVE}),
            config("t"),
        )
        edited = by_id(messages(graph, "t"))["a1"]
        assert isinstance(edited, AIMessage)
        assert isinstance(edited.content, list)
        reasoning, v1, responses, other = edited.content
        assert reasoning == content[0]
        assert isinstance(v1, dict)
        assert isinstance(responses, dict)
        assert v1["args"] == {"to": "a", "body": "new"}
        assert json.loads(responses["arguments"]) == {"to": "a", "body": "new"}
        assert responses["id"] == "fc_1"
        assert other == content[3]
        assert [c["args"] for c in edited.tool_calls] == [{"to": "a", "body": "new"}, args]


class TestSubgraph:
    """Inside a subgraph LangGraph lists each task interrupt twice; resume by id works."""

    def test_interrupts_are_listed_twice_and_resume_by_id_works(self, ledger: Ledger) -> None:
        """Dedupe ``__interrupt__`` by id; a partial resume map, then the rest; each call
        ran once, with its own answer."""
        inner = tools_graph(None, ledger, extra_tools=[make_asking_tool(ledger)])
        graph = (
            StateGraph(STMState)
            .add_node("inner", inner)
            .add_edge(START, "inner")
            .compile(checkpointer=InMemorySaver())
        )
        turn = ask_turn(
            "a1",
            ("send_email", {"to": "a", "body": "b"}, "c1"),
            ("send_email", {"to": "c", "body": "d"}, "c2"),
            ("confirm", {"question": "sure?"}, "c3"),
        )
        out = graph.invoke({"messages": [turn]}, config("t"))
        listed = [i.id for i in out["__interrupt__"]]
        unique = {i.id: i for i in out["__interrupt__"]}
        assert len(listed) == 2 * len(unique) == 4  # LangGraph's own behaviour
        ids = {i.value["tool_call_id"]: i.id for i in unique.values()}
        out = graph.invoke(Command(resume={ids["c2"]: {"type": "reject"}}), config("t"))
        assert {i.id for i in out["__interrupt__"]} == {ids["c1"]}
        out = graph.invoke(Command(resume={ids["c1"]: APPROVE}), config("t"))
        (asked,) = {i.id: i for i in out["__interrupt__"]}.values()
        assert asked.value["tool_call_id"] == "c3"
        assert ledger.calls() == ["c1"]
        out = graph.invoke(Command(resume={asked.id: "yes"}), config("t"))
        assert "__interrupt__" not in out
        assert ledger.calls() == ["c1", "c3"]
        assert_turn_complete(out["messages"], "a1")
        assert by_id(out["messages"])[tool_result_id("a1", "c3")].content == "the user said yes"


class TestModuleShape:
    """The module split keeps every name importable from ``langgraph_stm._approval``."""

    def test_every_name_is_importable_from_approval_and_tools(self) -> None:
        """``langgraph_stm.tools`` re-exports the same objects."""
        import langgraph_stm.tools as public
        from langgraph_stm import _approval

        for name in _approval.__all__:
            assert getattr(_approval, name) is getattr(public, name)
        assert set(_approval.__all__) == {
            "Action",
            "ActionRequest",
            "ApprovalRequest",
            "ApprovalToolNode",
            "ApproveDecision",
            "BatchedApprovalRequest",
            "Decision",
            "DecisionType",
            "EditDecision",
            "HandleToolErrors",
            "InterruptMode",
            "InterruptOnConfig",
            "RejectDecision",
            "RespondDecision",
            "ReviewConfig",
            "tool_result_id",
        }

    def test_the_node_has_no_duplicate_or_private_typed_attributes(self, ledger: Ledger) -> None:
        """``name`` is the node name (no ``node_name``); the gates are private."""
        node = ApprovalToolNode(make_tools(ledger), name="approve")
        assert node.name == "approve"
        assert not hasattr(node, "node_name")
        assert not hasattr(node, "gates")


def test_graph_interrupt_combining_is_what_langgraph_does() -> None:
    """Contract: the node raises one GraphInterrupt carrying all its tasks' interrupts, as
    LangGraph's runner does for parallel tasks; fails loudly if that class changes shape."""
    from langgraph.types import Interrupt

    combined = GraphInterrupt((Interrupt("a", id="1" * 32), Interrupt("b", id="2" * 32)))
    assert [i.value for i in combined.args[0]] == ["a", "b"]
