"""Invariants 1-8 of DESIGN.md hold for summarization on generated histories."""

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

from langgraph_stm import (
    ExtractiveSummarizer,
    SummarizationError,
    SummarizeNode,
    SummaryDraft,
    SummaryRequest,
    TokenCounter,
    group_units,
    summarize_history,
    validate_history,
)

COUNT_TEXT = TokenCounter().count_text
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WORDS = st.sampled_from(
    ["migrate", "billing", "never", "email", "error", "HTTP 503", "done", "decided", "why?", ""]
)
TEXT = st.lists(WORDS, max_size=12).map(" ".join)


@st.composite
def histories(draw: st.DrawFn) -> list[BaseMessage]:
    """A valid history: optional system prompt, chat and tool units, maybe a pending tail."""
    counter = iter(range(10_000))

    def new_id(prefix: str) -> str:
        return f"{prefix}{next(counter)}"

    history: list[BaseMessage] = []
    if draw(st.booleans()):
        history.append(SystemMessage(draw(TEXT), id=new_id("s")))
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["human", "ai", "tools"]))
        if kind == "human":
            history.append(HumanMessage(draw(TEXT), id=new_id("h")))
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
    update = result.state_update()
    if update:
        assert add_messages(history, update["messages"]) == kept
    # 5. budget, or an explicit flag when only mandatory messages are left
    if counter(history) <= trigger:
        assert not result.summarized
    elif result.fits:
        assert counter(kept) <= keep
    else:
        assert {m.id for m in kept} == protected_ids(history)
    # 6. bounded summary text with a coverage record
    if result.summary is not None:
        assert 0 < COUNT_TEXT(result.summary["text"]) <= bound
        coverage = result.summary["coverage"]
        assert coverage is not None
        assert coverage["message_count"] == len(summarized)
    # 8. a leading system message stays first and once, no system message mid-list
    if history and isinstance(history[0], SystemMessage):
        assert kept[0] is history[0]
    assert not any(isinstance(m, SystemMessage) for m in kept[1:])
    # 4. idempotent: a re-run on the same input and on the produced state change nothing
    again = summarize_history(
        history,
        summarizer=summarizer,
        trigger_tokens=trigger,
        keep_tokens=keep,
        token_counter=counter,
        max_summary_tokens=bound,
    )
    assert again == result
    assert summarizer.calls == (1 if result.summarized else 0)
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
