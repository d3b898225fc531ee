"""Invariants 1-5 and 8 of docs/architecture.md: trim_history and TrimNode on generated histories.

Most properties use a ``len`` counter (one token per message) so each example is cheap
and they run 2,000 generated histories each; one property uses the exact tiktoken
counter on fewer examples.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.graph.message import add_messages

from langgraph_stm import TokenCounter, TrimNode, trim_history
from langgraph_stm._units import group_units
from langgraph_stm.errors import BudgetExceededError
from langgraph_stm.typing import StartOn
from tests.support.trim_helpers import (
    RecordingCounter,
    ai,
    assert_whole_units,
    histories,
    human,
    ids,
    mandatory_ids,
    system,
)

MANY = settings(max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
START_ON = st.sampled_from(["human", "any"])
EXACT = TokenCounter(encoding="cl100k_base")


def check_trim(
    history: list[BaseMessage],
    kept: list[BaseMessage],
    budget: int,
    counter: Any,
    start_on: StartOn,
) -> None:
    """The invariants every trim result satisfies."""
    assert_whole_units(history, kept)  # 1 and 3: whole units, same objects, same order
    assert not kept or counter(kept) <= budget  # 5: fits, counted exactly ([] is no call)
    assert mandatory_ids(history) <= set(ids(kept))  # 2: pending unit and latest human stay
    if history and isinstance(history[0], SystemMessage):  # 8: system stays first, once
        assert kept[0] is history[0]
        assert ids(kept).count(history[0].id) == 1
    assert_no_promoted_note(history, kept)
    rest = (
        kept[1:] if kept and isinstance(kept[0], SystemMessage) and kept[0] is history[0] else kept
    )
    if start_on == "human" and any(isinstance(m, HumanMessage) for m in history):
        assert isinstance(rest[0], HumanMessage)


def assert_no_promoted_note(history: list[BaseMessage], kept: list[BaseMessage]) -> None:
    """8: only the input's first message can be first as a SystemMessage, and a mid-list
    note heads the window after it only if it already did in the input."""
    if kept and isinstance(kept[0], SystemMessage):
        assert kept[0] is history[0], f"note {kept[0].id} was promoted to first"
    leading = bool(history) and isinstance(history[0], SystemMessage)
    window = kept[1:] if leading else kept
    if window and isinstance(window[0], SystemMessage):
        assert window[0] is history[int(leading)], f"note {window[0].id} now heads the window"


def attempt(
    history: list[BaseMessage], budget: int, counter: Any, start_on: StartOn = "human"
) -> list[BaseMessage] | BudgetExceededError:
    """Trim, or return the BudgetExceededError raised."""
    try:
        return trim_history(
            history, max_tokens=budget, token_counter=counter, start_on=start_on
        ).messages
    except BudgetExceededError as exc:
        return exc


def attempt_node(node: TrimNode, state: list[BaseMessage]) -> dict[str, Any] | BudgetExceededError:
    """Run the node, or return the BudgetExceededError raised."""
    try:
        return node({"messages": state})
    except BudgetExceededError as exc:
        return exc


class TestTrimHistoryProperties:
    """trim_history on generated histories with parallel and pending tool calls."""

    @MANY
    @given(history=histories(), budget=st.integers(1, 40), start_on=START_ON)
    def test_result_keeps_whole_units_within_budget(
        self, history: list[BaseMessage], budget: int, start_on: StartOn
    ) -> None:
        """Whole units, stable order and ids, mandatory kept, within budget, or a clear error."""
        kept = attempt(history, budget, len, start_on)
        if isinstance(kept, BudgetExceededError):
            assert kept.required > budget
            assert len([m for m in history if m.id in mandatory_ids(history)]) > budget
            return
        check_trim(history, kept, budget, len, start_on)

    @MANY
    @given(history=histories(), budget=st.integers(1, 40))
    def test_window_is_the_longest_suffix_that_fits(
        self, history: list[BaseMessage], budget: int
    ) -> None:
        """With start_on='any', the next older unit would not have fitted (no wasted budget)."""
        try:
            kept = trim_history(
                history, max_tokens=budget, token_counter=len, start_on="any"
            ).messages
        except BudgetExceededError:
            return
        kept_ids = set(ids(kept))
        units = group_units(history)
        dropped = [i for i, u in enumerate(units) if not set(u.ids) <= kept_ids]
        if dropped:
            newest = dropped[-1]
            fits = len(kept) + len(units[newest].messages) <= budget
            if fits:
                # Only a note that would head the window is dropped although it fits (8).
                assert newest > 0
                assert isinstance(units[newest].head, SystemMessage)
                leading = isinstance(units[0].head, SystemMessage)
                assert not any(set(u.ids) <= kept_ids for u in units[int(leading) : newest])

    @MANY
    @given(history=histories(), budget=st.integers(1, 40), start_on=START_ON)
    def test_trimming_twice_changes_nothing(
        self, history: list[BaseMessage], budget: int, start_on: StartOn
    ) -> None:
        """Trimming the result again keeps every message (invariant 4)."""
        try:
            once = trim_history(
                history, max_tokens=budget, token_counter=len, start_on=start_on
            ).messages
        except BudgetExceededError:
            return
        twice = trim_history(once, max_tokens=budget, token_counter=len, start_on=start_on).messages
        assert ids(twice) == ids(once)

    @MANY
    @given(history=histories(), budget=st.integers(1, 40))
    def test_counter_only_sees_valid_chronological_lists(
        self, history: list[BaseMessage], budget: int
    ) -> None:
        """Any callable counter is handed ordered lists that satisfy the invariants."""
        recorder = RecordingCounter(len, history)
        with contextlib.suppress(BudgetExceededError):
            trim_history(history, max_tokens=budget, token_counter=recorder)

    @MANY
    @given(
        history=histories(),
        budget=st.integers(1, 120),
        overhead=st.integers(0, 7),
        start_on=START_ON,
    )
    def test_non_additive_counter_budget_holds(
        self, history: list[BaseMessage], budget: int, overhead: int, start_on: StartOn
    ) -> None:
        """A counter with a per-call overhead and uneven message weights is respected."""

        def counter(messages: list[BaseMessage]) -> int:
            return overhead + sum(1 + len(str(m.content)) // 200 for m in messages)

        kept = attempt(history, budget, counter, start_on)
        if isinstance(kept, BudgetExceededError):
            assert kept.required > budget
            return
        check_trim(history, kept, budget, counter, start_on)

    @FEW
    @given(history=histories(), budget=st.integers(20, 3_000), start_on=START_ON)
    def test_exact_tiktoken_budget_holds(
        self, history: list[BaseMessage], budget: int, start_on: StartOn
    ) -> None:
        """With the exact tiktoken counter the result counts at most max_tokens."""
        kept = attempt(history, budget, EXACT, start_on)
        if isinstance(kept, BudgetExceededError):
            assert kept.required > budget
            return
        check_trim(history, kept, budget, EXACT, start_on)


class TestNoteProperties:
    """Mid-list SystemMessage notes are never promoted to the leading system message."""

    @MANY
    @given(
        history=histories(notes=True, pending=False),
        turns=st.lists(st.sampled_from(["human", "ai", "note"]), max_size=6),
        budget=st.integers(1, 20),
        start_on=START_ON,
    )
    def test_repeated_trims_keep_the_input_first_system_message(
        self, history: list[BaseMessage], turns: list[str], budget: int, start_on: StartOn
    ) -> None:
        """Trim, append a turn, trim again: a SystemMessage first is always the original one."""
        node = TrimNode(max_tokens=budget, token_counter=len, start_on=start_on)
        first = history[0] if history and isinstance(history[0], SystemMessage) else None
        state = list(history)
        for turn, kind in enumerate([*turns, "human"]):
            update = attempt_node(node, state)
            if isinstance(update, BudgetExceededError):
                assert update.required > budget
                return
            trimmed: list[BaseMessage] = add_messages(state, update.get("messages", []))  # type: ignore[arg-type,assignment]
            assert_no_promoted_note(state, trimmed)
            if trimmed and isinstance(trimmed[0], SystemMessage):
                assert trimmed[0] is first
            factory = {"human": human, "ai": ai, "note": system}[kind]
            state = [*trimmed, factory(f"x{turn}")]
            if len(state) == 1 and isinstance(state[0], SystemMessage):
                first = state[0]  # appended to an empty thread: it is the first message


class TestTrimNodeProperties:
    """TrimNode updates applied through add_messages."""

    @MANY
    @given(history=histories(), budget=st.integers(1, 40), start_on=START_ON)
    def test_node_update_equals_trim_and_rerun_is_empty(
        self, history: list[BaseMessage], budget: int, start_on: StartOn
    ) -> None:
        """Applied by add_messages the update yields trim_history's result; a re-run is {}."""
        node = TrimNode(max_tokens=budget, token_counter=len, start_on=start_on)
        try:
            update = node({"messages": history})
        except BudgetExceededError:
            return
        removals = update.get("messages", [])
        assert {m.id for m in removals} <= {m.id for m in history}
        state = add_messages(history, removals)  # type: ignore[arg-type]
        expected = trim_history(
            history, max_tokens=budget, token_counter=len, start_on=start_on
        ).messages
        assert ids(state) == ids(expected)  # type: ignore[arg-type]
        check_trim(history, state, budget, len, start_on)  # type: ignore[arg-type]
        assert node({"messages": state}) == {}
