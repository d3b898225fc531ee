"""Invariants 1-8 of docs/architecture.md hold for summarization on generated histories."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import add_messages

from langgraph_stm import SummarizeNode, TokenCounter, summarize_history, validate_history
from langgraph_stm._units import group_units
from langgraph_stm.errors import SummarizationError
from langgraph_stm.summarizers import ExtractiveSummarizer, SummaryDraft, SummaryRequest

COUNT_TEXT = TokenCounter().count_text
SETTINGS = settings(max_examples=1_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WORDS = st.sampled_from(
    ["migrate", "billing", "never", "email", "error", "HTTP 503", "done", "decided", "why?", ""]
)
TEXT = st.lists(WORDS, max_size=12).map(" ".join)


@st.composite
def histories(draw: st.DrawFn) -> list[BaseMessage]:
    """A valid history: optional system prompt, chat, mid-list system notes and tool units,
    maybe a pending tail."""
    counter = iter(range(10_000))

    def new_id(prefix: str) -> str:
        return f"{prefix}{next(counter)}"

    history: list[BaseMessage] = []
    if draw(st.booleans()):
        history.append(SystemMessage(draw(TEXT), id=new_id("s")))
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["human", "ai", "tools", "note"]))
        if kind == "human":
            history.append(HumanMessage(draw(TEXT), id=new_id("h")))
        elif kind == "note":
            history.append(SystemMessage(draw(TEXT), id=new_id("n")))
        elif kind == "ai":
            history.append(AIMessage(draw(TEXT), id=new_id("a")))
        else:
            history.extend(draw(tool_unit(new_id, complete=True)))
    if draw(st.booleans()):
        history.extend(draw(tool_unit(new_id, complete=False)))
    return history


def tool_unit(new_id: Any, *, complete: bool) -> st.SearchStrategy[list[BaseMessage]]:
    @st.composite
    def build(draw: st.DrawFn) -> list[BaseMessage]:
        n = draw(st.integers(1, 4))
        calls = [{"name": "tool", "args": {"n": i}, "id": new_id("c")} for i in range(n)]
        head = AIMessage(draw(TEXT), id=new_id("a"), tool_calls=calls)
        answered = calls if complete else calls[: draw(st.integers(0, n - 1))]
        order = draw(st.permutations(answered))
        results = [
            ToolMessage(draw(TEXT), tool_call_id=c["id"], id=new_id("t"), status="success")
            for c in order
        ]
        return [head, *results]

    return build()


def weighted(messages: list[BaseMessage]) -> int:
    """A non-trivial counter: 2 per message plus one per word."""
    return sum(2 + len(m.text.split()) for m in messages)


COUNTERS = st.sampled_from([len, weighted])


class Counting(ExtractiveSummarizer):
    """The extractive summarizer, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> SummaryDraft:
        self.calls += 1
        return super().summarize(request)


def leading(history: list[BaseMessage]) -> int:
    """1 when the input starts with a SystemMessage (the only leading one), else 0."""
    return 1 if history and isinstance(history[0], SystemMessage) else 0


def protected_ids(history: list[BaseMessage]) -> set[str]:
    units = group_units(history)
    keep: set[str] = set()
    if units and isinstance(units[0].head, SystemMessage):
        keep.update(units[0].ids)
    for unit in units:
        if unit.pending:
            keep.update(unit.ids)
    humans = [u for u in units if isinstance(u.head, HumanMessage)]
    if humans:
        keep.update(humans[-1].ids)
    others = [u for u in units if not isinstance(u.head, SystemMessage)]
    if others:
        keep.update(others[-1].ids)
    return keep


@SETTINGS
@given(
    history=histories(),
    counter=COUNTERS,
    trigger=st.integers(1, 60),
    keep_share=st.floats(0.05, 1.0),
    bound=st.integers(1, 120),
)
def test_summarization_keeps_every_invariant(
    history: list[BaseMessage], counter: Any, trigger: int, keep_share: float, bound: int
) -> None:
    """Tool pairs, pending calls, ids/order, budget, bounded text, system first."""
    keep = max(1, int(trigger * keep_share))
    before = [m.model_dump() for m in history]
    summarizer = Counting()
    result = summarize_history(
        history,
        summarizer=summarizer,
        trigger_tokens=trigger,
        keep_tokens=keep,
        token_counter=counter,
        max_summary_tokens=bound,
    )
    kept = result.messages
    event("summarized" if result.summarized else "not summarized")
    event("fits" if result.fits else "only mandatory messages left")
    # 1. tool-pair integrity; units kept or summarized whole
    assert validate_history(kept) == []
    summarized = set(result.summarized_ids)
    for unit in group_units(history):
        assert set(unit.ids) <= summarized or not set(unit.ids) & summarized
    # 2. pending calls, the latest human and a leading system message stay
    assert protected_ids(history) <= {m.id for m in kept}
    # 3. kept messages are the same objects, same order; removals name existing ids
    remaining = iter(history)
    assert all(any(m is other for other in remaining) for m in kept)
    assert summarized == {m.id for m in history} - {m.id for m in kept}
    assert [m.model_dump() for m in history] == before
    update = result.update()
    if update:
        assert add_messages(history, update["messages"]) == kept
    # 3. what is summarized is one contiguous run right after the leading system message,
    # so everything after covered_until_message_id is live
    start = leading(history)
    n = len(result.summarized_ids)
    assert result.summarized_ids == tuple(m.id for m in history[start : start + n])
    assert all(a is b for a, b in zip(kept, [*history[:start], *history[start + n :]], strict=True))
    # 5. budget, or an explicit flag when eviction stopped at a protected unit
    if counter(history) <= trigger:
        assert not result.summarized
    elif result.fits:
        assert counter(kept) <= keep
    else:
        rest = group_units(kept[start:])
        assert not rest or rest[0].pending or set(rest[0].ids) & protected_ids(history)
    # 6. bounded summary text with a coverage record
    if result.summary is not None:
        assert 0 < COUNT_TEXT(result.summary["text"]) <= bound
        coverage = result.summary["coverage"]
        assert coverage == {
            "first_message_id": history[start].id,
            "last_message_id": history[start + n - 1].id,
            "message_count": n,
        }
        assert result.summary["coverage"]["last_message_id"] == history[start + n - 1].id
    # 8. a leading system message stays first and once; a mid-list note never becomes
    # first; no SystemMessage is created
    if start:
        assert kept[0] is history[0]
        assert sum(m is history[0] for m in kept) == 1
    elif kept:
        assert not isinstance(kept[0], SystemMessage) or kept[0] is history[0]
    if result.summarized and start + n < len(history):
        assert not isinstance(history[start + n], SystemMessage)
    # 4. idempotent: a re-run on the same input and on the produced state change nothing
    again = summarize_history(
        history,
        summarizer=summarizer,
        trigger_tokens=trigger,
        keep_tokens=keep,
        token_counter=counter,
        max_summary_tokens=bound,
    )
    assert again == result  # outside a graph run the summarizer is called again, same answer
    assert summarizer.calls == (2 if result.summarized else 0)
    after = summarize_history(
        kept,
        running_summary=result.summary,
        summarizer=summarizer,
        trigger_tokens=trigger,
        keep_tokens=keep,
        token_counter=counter,
        max_summary_tokens=bound,
    )
    assert not after.summarized
    assert after.summary is result.summary
    assert summarizer.calls == (2 if result.summarized else 0)


@SETTINGS
@given(history=histories(), trigger=st.integers(1, 40), keep_share=st.floats(0.05, 1.0))
def test_coverage_stays_contiguous_as_the_thread_grows(
    history: list[BaseMessage], trigger: int, keep_share: float
) -> None:
    """3, 8. Unit by unit, as a graph would see it: the removed ids are always the oldest
    messages after the leading one, the coverage record describes exactly them, and a
    mid-list system note is never taken for the leading system message."""
    keep = max(1, int(trigger * keep_share))
    start = leading(history)
    live: list[BaseMessage] = []
    summary = None
    removed: list[str] = []
    for unit in group_units(history):
        live = [*live, *unit.messages]
        result = summarize_history(
            live,
            running_summary=summary,
            trigger_tokens=trigger,
            keep_tokens=keep,
            token_counter=len,
            max_summary_tokens=40,
        )
        removed += result.summarized_ids
        live, summary = result.messages, result.summary
        if live and isinstance(live[0], SystemMessage):
            assert start == 1
            assert live[0] is history[0]
    assert removed == [m.id for m in history[start : start + len(removed)]]
    assert all(
        a is b
        for a, b in zip(live, [*history[:start], *history[start + len(removed) :]], strict=True)
    )
    if removed:
        assert summary is not None
        assert summary["version"] >= 1
        assert summary["coverage"] == {
            "first_message_id": removed[0],
            "last_message_id": removed[-1],
            "message_count": len(removed),
        }
        assert summary["coverage"]["last_message_id"] == removed[-1]


@SETTINGS
@given(history=histories(), trigger=st.integers(1, 30))
def test_a_failing_summarizer_leaves_state_untouched(
    history: list[BaseMessage], trigger: int
) -> None:
    """7. Raising summarizer: SummarizationError, state byte-identical, no update returned."""

    class Failing(ExtractiveSummarizer):
        def summarize(self, request: SummaryRequest) -> SummaryDraft:
            raise RuntimeError("boom: provider said no")

    state: dict[str, Any] = {
        "messages": history,
        "goal": "migrate billing to v2",
        "summary": {"text": "earlier", "version": 5},
    }
    snapshot = copy.deepcopy(state)
    node = SummarizeNode(
        summarizer=Failing(), trigger_tokens=trigger, keep_tokens=1, token_counter=len
    )
    needed = summarize_history(
        history, trigger_tokens=trigger, keep_tokens=1, token_counter=len
    ).summarized
    if needed:
        with pytest.raises(SummarizationError) as caught:
            node(state)
        assert "boom" not in str(caught.value)
        assert isinstance(caught.value.__cause__, RuntimeError)
    else:  # nothing was over the trigger, or nothing could be evicted
        assert node(state) == {}
    assert [m.model_dump() for m in state["messages"]] == [
        m.model_dump() for m in snapshot["messages"]
    ]
    assert state["summary"] == snapshot["summary"]


@SETTINGS
@given(history=histories(), trigger=st.integers(1, 30), goal=TEXT)
def test_structured_state_is_never_touched(
    history: list[BaseMessage], trigger: int, goal: str
) -> None:
    """6. The node's update only ever carries messages and summary."""
    state: dict[str, Any] = {
        "messages": history,
        "goal": goal,
        "plan": [{"id": "p1", "task": "export", "status": "done"}],
        "constraints": [
            {"id": "c1", "text": "never email", "source_message_id": None, "status": "confirmed"}
        ],
    }
    snapshot = copy.deepcopy({k: v for k, v in state.items() if k != "messages"})
    update = SummarizeNode(trigger_tokens=trigger, keep_tokens=1, token_counter=len)(state)
    assert set(update) <= {"messages", "summary"}
    assert {k: v for k, v in state.items() if k != "messages"} == snapshot
