"""Invariants 1-4 of docs/architecture.md for ApprovalToolNode, on generated turns through a graph.

Each example is a valid history (parallel calls answered in any order) ending in an AI
message with one to four calls: gated (every decision, or approve/reject only), not
gated, unknown, or raising; some already answered. The gated calls get generated
decisions (approve, edit, reject, respond), given per call in random groups with re-runs
(``invoke(None)``) in between, or all at once in batched mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langgraph_stm import (
    ApprovalToolNode,
    build_context,
    summarize_history,
    trim_history,
    validate_history,
)
from langgraph_stm._units import group_units
from langgraph_stm.tools import InterruptMode, tool_result_id
from tests.support.approval_graphs import (
    POLICY,
    Ledger,
    config,
    make_asking_tool,
    make_tools,
    tools_graph,
)
from tests.support.trim_helpers import histories, result

FEW = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ALLOWED: dict[str, list[str]] = {
    "send_email": ["approve", "edit", "reject", "respond"],
    "delete_file": ["approve", "reject"],
    "explode": ["approve", "edit", "reject", "respond"],
}
KINDS = st.sampled_from(["send_email", "delete_file", "lookup", "teleport", "explode"])
WORDS = st.sampled_from(["a", "b", "report", "Zürich", "x" * 40])


def args_for(name: str, word: str) -> dict[str, Any]:
    return {
        "send_email": {"to": word, "body": "hi"},
        "delete_file": {"path": f"/tmp/{word}"},
        "lookup": {"key": word},
        "teleport": {"to": word},
        "explode": {"reason": word},
    }[name]


@dataclass
class Turn:
    """A generated example: the input history, the decisions, how they are given."""

    history: list[BaseMessage]
    ai: AIMessage
    answered: set[str]
    decisions: dict[str, dict[str, Any]]
    mode: InterruptMode
    groups: list[list[str]] = field(default_factory=list)
    reruns: list[bool] = field(default_factory=list)

    @property
    def unanswered(self) -> list[dict[str, Any]]:
        return [dict(c) for c in self.ai.tool_calls if c["id"] not in self.answered]

    @property
    def gated(self) -> list[str]:
        return [c["id"] for c in self.unanswered if c["name"] in POLICY]


@st.composite
def turns(draw: st.DrawFn) -> Turn:
    prefix = draw(histories(max_units=8, pending=False))
    head = "p-final"  # histories(pending=False) never uses the "p" prefix
    names = draw(st.lists(KINDS, min_size=1, max_size=4))
    calls = [
        {"name": n, "args": args_for(n, draw(WORDS)), "id": f"{head}-c{i}"}
        for i, n in enumerate(names)
    ]
    ai = AIMessage(draw(st.sampled_from(["", "let me do that"])), id=head, tool_calls=calls)
    order = draw(st.permutations([c["id"] for c in calls]))
    answered = set(order[: draw(st.integers(0, len(calls) - 1))])
    done = [result(c) for c in order if c in answered]
    decisions: dict[str, dict[str, Any]] = {}
    for c in calls:
        if c["id"] in answered or c["name"] not in ALLOWED:
            continue
        kind = draw(st.sampled_from(ALLOWED[c["name"]]))
        if kind == "edit":
            edited = args_for(c["name"], draw(WORDS) + "-edited")
            decisions[c["id"]] = {
                "type": "edit",
                "edited_action": {"name": c["name"], "args": edited},
            }
        elif kind == "reject":
            message = draw(st.sampled_from([None, "not now"]))
            decisions[c["id"]] = {"type": "reject", **({"message": message} if message else {})}
        elif kind == "respond":
            decisions[c["id"]] = {"type": "respond", "message": "the reviewer answers"}
        else:
            decisions[c["id"]] = {"type": "approve"}
    turn = Turn(
        [*prefix, ai, *done],
        ai,
        answered,
        decisions,
        draw(st.sampled_from(["per_call", "batched"])),
    )
    pending = list(decisions)
    pending = draw(st.permutations(pending))
    while pending:
        size = draw(st.integers(1, len(pending)))
        turn.groups.append(list(pending[:size]))
        turn.reruns.append(draw(st.booleans()))
        pending = pending[size:]
    return turn


def drive(turn: Turn, ledger: Ledger) -> tuple[list[BaseMessage], list[list[str]]]:
    """Run the turn through a graph; return the final messages and each pause's interrupt ids."""
    graph = tools_graph(InMemorySaver(), ledger, interrupt_mode=turn.mode)
    out = graph.invoke({"messages": turn.history}, config("t"))
    paused: list[list[str]] = []
    if turn.mode == "batched":
        if turn.gated:
            paused.append([i.id for i in out["__interrupt__"]])
            graph.invoke(None, config("t"))
            answer = {"decisions": [turn.decisions[c] for c in turn.gated]}
            out = graph.invoke(Command(resume=answer), config("t"))
    else:
        for group, rerun in zip(turn.groups, turn.reruns, strict=True):
            ids = {i.value["tool_call_id"]: i.id for i in out["__interrupt__"]}
            paused.append(list(ids.values()))
            assert ledger.calls() == [], "a tool ran before every decision was in"
            if rerun:
                graph.invoke(None, config("t"))
            out = graph.invoke(
                Command(resume={ids[c]: turn.decisions[c] for c in group}), config("t")
            )
    assert "__interrupt__" not in out
    return list(out["messages"]), paused


def expected_runs(turn: Turn) -> dict[str, dict[str, Any]]:
    """Call id -> the args it must have run with, for every call that must run."""
    runs: dict[str, dict[str, Any]] = {}
    for c in turn.unanswered:
        decision = turn.decisions.get(c["id"])
        if c["name"] == "teleport":
            continue
        if decision is None or decision["type"] == "approve":
            runs[c["id"]] = c["args"]
        elif decision["type"] == "edit":
            runs[c["id"]] = decision["edited_action"]["args"]
    return runs


@FEW
@given(turns())
def test_every_call_is_answered_once_right_after_its_ai_message(turn: Turn) -> None:
    """1 and 3: the output is a valid history; input ids and order kept; new ids derived."""
    final, _ = drive(turn, Ledger())
    assert validate_history(final) == []
    assert [m.id for m in final[: len(turn.history)]] == [m.id for m in turn.history]
    for before, after in zip(turn.history, final, strict=False):
        if before.id != turn.ai.id:
            assert after.content == before.content
    new = final[len(turn.history) :]
    assert [m.id for m in new] == [
        tool_result_id(turn.ai.id or "", c["id"]) for c in turn.unanswered
    ]
    assert all(isinstance(m, ToolMessage) for m in new)


@FEW
@given(turns())
def test_only_approved_and_edited_calls_run_each_once(turn: Turn) -> None:
    """Rejected, answered and unknown calls never run; the others run once, with the
    args the reviewer left them; an edit is visible in the AI message, in place."""
    ledger = Ledger()
    final, _ = drive(turn, ledger)
    assert sorted(ledger.calls()) == sorted(expected_runs(turn))
    assert {e["call_id"]: e["args"] for e in ledger.entries()} == expected_runs(turn)
    ai = next(m for m in final if m.id == turn.ai.id)
    assert isinstance(ai, AIMessage)
    for c in ai.tool_calls:
        decision = turn.decisions.get(c["id"] or "")
        if decision is not None and decision["type"] == "edit":
            assert c["args"] == decision["edited_action"]["args"]
        else:
            assert c["args"] == next(o["args"] for o in turn.ai.tool_calls if o["id"] == c["id"])
    for m in final[len(turn.history) :]:
        assert isinstance(m, ToolMessage)
        decision = turn.decisions.get(m.tool_call_id)
        if decision is not None and decision["type"] == "reject":
            assert m.status == "error"
        if decision is not None and decision["type"] == "respond":
            assert (m.content, m.status) == ("the reviewer answers", "success")


@FEW
@given(turns())
def test_interrupts_are_distinct_and_the_result_is_idempotent(turn: Turn) -> None:
    """Per call: each pause lists distinct ids, one per undecided gated call. 4: running
    the node again on its own output returns ``{}`` and runs nothing."""
    ledger = Ledger()
    final, paused = drive(turn, ledger)
    if turn.mode == "per_call":
        decided = 0
        for ids, group in zip(paused, turn.groups, strict=True):
            assert len(set(ids)) == len(ids) == len(turn.gated) - decided
            decided += len(group)
    else:
        assert paused == ([[paused[0][0]]] if turn.gated else [])
    runs = len(ledger.calls())
    node = ApprovalToolNode(make_tools(ledger), interrupt_on=POLICY)
    assert node({"messages": final}) == {}
    assert len(ledger.calls()) == runs


ASKING_KINDS = st.sampled_from(["send_email", "delete_file", "lookup", "confirm"])


@FEW
@given(st.data())
def test_tools_that_interrupt_run_once_and_get_their_own_answers(data: st.DataObject) -> None:
    """Gated calls, plain calls and calls to a tool that interrupts itself, in one turn.
    The pending interrupts (reviews first, then the tools' own) are answered in random
    groups by id, or with a plain value when only one is pending, with re-runs in
    between: every call that runs runs once, each asking call gets the answer sent to
    its own interrupt, rejected calls never run, and the turn ends complete."""
    names = data.draw(st.lists(ASKING_KINDS, min_size=1, max_size=4), label="calls")
    calls = [
        {
            "name": n,
            "args": {"question": f"q{i}"} if n == "confirm" else args_for(n, "a"),
            "id": f"c{i}",
        }
        for i, n in enumerate(names)
    ]
    ai = AIMessage("", id="a1", tool_calls=calls)
    mode = data.draw(st.sampled_from(["per_call", "batched"]), label="mode")
    ledger = Ledger()
    graph = tools_graph(
        InMemorySaver(), ledger, interrupt_mode=mode, extra_tools=[make_asking_tool(ledger)]
    )
    decisions = {
        c["id"]: {"type": data.draw(st.sampled_from(["approve", "reject"]), label=c["id"])}
        for c in calls
        if c["name"] in ALLOWED
    }
    out = graph.invoke({"messages": [ai]}, config("t"))
    plain_used = False
    for _ in range(20):
        pending = {i.id: i for i in out.get("__interrupt__", ())}  # deduped by id
        if not pending:
            break
        assert len(pending) == len(out["__interrupt__"])

        def answer(value: dict[str, Any]) -> Any:
            if value.get("type") == "tool_approval":
                return decisions[value["tool_call_id"]]
            if "action_requests" in value:
                return {"decisions": [decisions[c] for c in value["tool_call_ids"]]}
            return f"answer-{value['tool_call_id']}"

        if not plain_used and data.draw(st.booleans(), label="rerun"):
            graph.invoke(None, config("t"))  # a re-run without an answer changes nothing
        ids = sorted(pending)
        if len(ids) == 1 and data.draw(st.booleans(), label="plain"):
            plain_used = True
            out = graph.invoke(Command(resume=answer(pending[ids[0]].value)), config("t"))
        else:
            group = data.draw(st.lists(st.sampled_from(ids), min_size=1, unique=True))
            resume = {i: answer(pending[i].value) for i in group}
            out = graph.invoke(Command(resume=resume), config("t"))
    assert "__interrupt__" not in out
    runs = [
        c["id"] for c in calls if decisions.get(c["id"], {"type": "approve"})["type"] != "reject"
    ]
    assert sorted(ledger.calls()) == sorted(runs)
    for entry in ledger.entries():
        if entry["tool"] == "confirm":
            assert entry["args"]["answer"] == f"answer-{entry['call_id']}"
    final = list(out["messages"])
    assert validate_history(final) == []
    assert [m.id for m in final[1:]] == [tool_result_id("a1", c["id"]) for c in calls]
    for m in final[1:]:
        if m.name == "confirm":
            assert m.content == f"the user said answer-{m.tool_call_id}"


@FEW
@given(turns(), st.integers(1, 60))
def test_trim_summarize_and_context_keep_approval_histories_valid(turn: Turn, budget: int) -> None:
    """The histories the node produces (rejected, edited, responded and raising calls,
    answered in any order) go through trim, summarize and context as any history does:
    whole units, a valid result; while paused, the pending unit is always kept."""
    graph = tools_graph(InMemorySaver(), Ledger(), interrupt_mode=turn.mode)
    out = graph.invoke({"messages": turn.history}, config("t"))
    paused = list(out["messages"])
    final, _ = drive(turn, Ledger())
    for history, pending in ((paused, bool(turn.gated)), (final, False)):
        trimmed = trim_history(
            history, max_tokens=budget, token_counter=len, on_overflow="keep_mandatory"
        )
        folded = summarize_history(
            history,
            trigger_tokens=budget,
            keep_tokens=max(budget // 2, 1),
            token_counter=len,
        )
        context = build_context(
            {"messages": history},
            max_tokens=budget + 4,
            token_counter=len,
            on_overflow="keep_mandatory",
        )
        for kept in (trimmed.messages, folded.messages, context.messages):
            assert validate_history(kept) == []
            if pending:
                assert turn.ai.id in {m.id for m in kept}, "the pending unit was evicted"
        units = {u.ids: u for u in group_units(history)}
        kept_ids = {m.id for m in trimmed.messages}
        for ids in units:
            assert set(ids) <= kept_ids or not (set(ids) & kept_ids), "a unit was split"
