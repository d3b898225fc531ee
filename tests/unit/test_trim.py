"""trim_history, plan_trim and TrimNode on hand-written histories."""

from __future__ import annotations

from typing import Any, cast

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, SystemMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from langgraph_stm import STMError, TokenCounter, TrimNode, trim_history
from langgraph_stm._units import synthetic_result_id
from langgraph_stm.errors import (
    BudgetExceededError,
    InvalidArgumentError,
    InvalidMessageError,
    ToolPairError,
)
from tests.support.trim_helpers import RecordingCounter, ai, call, human, ids, result, system

# The example of the issue: [S, H1, AI1(calls a,b), T(a), T(b), AI2, H2].
EXAMPLE = [
    system("s"),
    human("h1"),
    call("ai1", "a", "b"),
    result("a"),
    result("b"),
    ai("ai2"),
    human("h2"),
]


def kept(messages: list[BaseMessage], max_tokens: int, **kwargs: Any) -> list[str | None]:
    kwargs.setdefault("token_counter", len)
    return ids(trim_history(messages, max_tokens=max_tokens, **kwargs).messages)


class TestTrimHistory:
    """trim_history keeps whole units, the mandatory messages and the newest units that fit."""

    @pytest.mark.parametrize("budget", [3, 4, 5])
    def test_parallel_results_are_kept_together_or_dropped_together(self, budget: int) -> None:
        """A budget that would cut between T(a) and T(b) keeps both or neither (with AI1)."""
        assert kept(EXAMPLE, budget, start_on="any") == ["s", "ai2", "h2"]

    def test_whole_tool_unit_kept_when_it_fits(self) -> None:
        """With room for the whole unit, AI1, T(a) and T(b) are all kept."""
        assert kept(EXAMPLE, 6, start_on="any") == ["s", "ai1", "t-a", "t-b", "ai2", "h2"]

    def test_everything_kept_when_it_fits(self) -> None:
        """A history within budget comes back unchanged, same objects."""
        out = trim_history(EXAMPLE, max_tokens=100, token_counter=len).messages
        assert out == EXAMPLE
        assert all(a is b for a, b in zip(out, EXAMPLE, strict=True))

    def test_default_window_starts_at_a_human_message(self) -> None:
        """By default the first message after the system message is a HumanMessage."""
        assert kept(EXAMPLE, 6) == ["s", "h2"]
        history = [system("s"), human("h1"), ai("a1"), human("h2"), ai("a2"), ai("a3")]
        assert kept(history, 5) == ["s", "h2", "a2", "a3"]

    def test_leading_system_message_is_always_kept_first(self) -> None:
        """The leading SystemMessage survives even a tight budget, and stays first."""
        assert kept([system("s"), human("h1"), ai("a1"), human("h2")], 2) == ["s", "h2"]

    def test_latest_human_message_is_always_kept(self) -> None:
        """The latest HumanMessage is kept even when newer units do not fit."""
        history = [human("h1"), ai("a1"), call("c", "x", "y"), result("x"), result("y")]
        assert kept(history, 4) == ["h1", "c", "t-x", "t-y"]
        assert kept(history, 2) == ["h1"]

    def test_pending_unit_is_never_trimmed(self) -> None:
        """An AIMessage waiting on approval is kept, with the results it already has."""
        history = [human("h1"), ai("a1"), human("h2"), call("p", "x", "y"), result("x")]
        assert kept(history, 3) == ["h2", "p", "t-x"]

    def test_mid_history_system_note_stays_mid_list(self) -> None:
        """A SystemMessage that is not first is kept in place while what precedes it stays."""
        history = [human("h1"), system("note"), ai("a1"), human("h2")]
        assert kept(history, 4, start_on="any") == ["h1", "note", "a1", "h2"]

    def test_note_is_not_promoted_to_first_when_units_before_it_are_evicted(self) -> None:
        """A note that eviction would bring to index 0 is dropped with the units before it."""
        history = [human("h1"), system("note"), ai("a1"), human("h2")]
        assert kept(history, 3, start_on="any") == ["a1", "h2"]
        no_human = [ai("a0"), system("note"), ai("a1"), ai("a2")]
        assert kept(no_human, 3) == ["a1", "a2"]  # start_on="human" does not apply here

    def test_note_is_not_brought_next_to_the_leading_system_message(self) -> None:
        """After the leading SystemMessage, the window never starts with an evicted-into note."""
        history = [system("s"), human("h1"), ai("a1"), system("note"), ai("a2"), human("h2")]
        assert kept(history, 4, start_on="any") == ["s", "a2", "h2"]
        assert kept(history, 6, start_on="any") == ["s", "h1", "a1", "note", "a2", "h2"]

    def test_note_already_after_the_leading_system_message_stays(self) -> None:
        """A note that headed the window in the input is not evicted for being a note."""
        history = [system("s"), system("note"), ai("a1"), human("h1")]
        assert kept(history, 4, start_on="any") == ["s", "note", "a1", "h1"]

    def test_note_never_becomes_leading_over_repeated_trims(self) -> None:
        """Re-trimming a trimmed thread never treats a former mid-list note as the system."""
        node = TrimNode(max_tokens=3, token_counter=len, start_on="any")
        state: Any = [human("h1"), ai("a1"), system("note"), ai("a2"), human("h2")]
        for turn in range(3):
            state = add_messages(state, node({"messages": state}).get("messages", []))
            assert not isinstance(state[0], SystemMessage)
            assert node({"messages": state}) == {}
            state = add_messages(state, cast(Any, [ai(f"r{turn}"), human(f"q{turn}")]))

    def test_empty_history_stays_empty(self) -> None:
        """Nothing to trim, nothing returned."""
        assert trim_history([], max_tokens=10, token_counter=len).messages == []

    @pytest.mark.parametrize("budget", [1, 2, 3])
    def test_empty_history_with_a_tiny_budget_returns_empty(self, budget: int) -> None:
        """An empty list has nothing to trim: no error below the per-call overhead."""
        assert trim_history([], max_tokens=budget).messages == []
        result = trim_history([], max_tokens=budget)
        assert (result.messages, result.tokens, result.over_budget) == ([], 0, False)

    def test_history_without_mandatory_messages_never_raises(self) -> None:
        """With no system, human or pending message, units that do not fit are all dropped."""
        history = [ai("a1", "long answer " * 20), ai("a2", "another long answer " * 20)]
        assert trim_history(history, max_tokens=2).messages == []

    def test_exact_counter_result_fits_the_budget(self) -> None:
        """With the tiktoken counter, the result counts at most max_tokens."""
        counter = TokenCounter(encoding="cl100k_base")
        history = [
            human(f"h{i}", "word " * 30) if i % 2 else ai(f"a{i}", "x " * 40) for i in range(40)
        ]
        for budget in (60, 200, 777, 1500):
            out = trim_history(
                history, max_tokens=budget, token_counter=counter, start_on="any"
            ).messages
            assert counter(out) <= budget
            assert len(out) < len(history)
            assert counter(history[-(len(out) + 1) :]) > budget  # the window is maximal

    def test_counter_is_handed_only_valid_ordered_lists(self) -> None:
        """Any callable counter only ever sees chronological lists of whole units."""
        recorder = RecordingCounter(len, EXAMPLE)
        trim_history(EXAMPLE, max_tokens=5, token_counter=recorder)
        assert recorder.calls

    def test_counter_per_call_overhead_is_charged_once(self) -> None:
        """A counter with a per-call overhead prices units at their marginal cost."""

        def counter(messages: list[BaseMessage]) -> int:
            return 10 + 2 * len(messages)

        history = [human(f"h{i}") for i in range(10)]
        out = trim_history(history, max_tokens=20, token_counter=counter).messages
        assert counter(out) == 20  # the whole budget is used: 10 + 5 messages * 2
        assert ids(out) == ["h5", "h6", "h7", "h8", "h9"]

    def test_non_additive_counter_is_still_respected(self) -> None:
        """A counter that is not additive over units is checked on the final list."""

        def counter(messages: list[BaseMessage]) -> int:
            return 10 + len(messages) ** 2

        history = [human(f"h{i}") for i in range(10)]
        out = trim_history(history, max_tokens=20, token_counter=counter).messages
        assert counter(out) <= 20
        assert ids(out) == ["h7", "h8", "h9"]

    def test_default_counter_is_the_exact_one(self) -> None:
        """Without token_counter, the o200k_base TokenCounter is used."""
        history = [human("h1", "hello world"), ai("a1", "hi")]
        tokens = TokenCounter()(history)
        assert trim_history(history, max_tokens=tokens).messages == history
        assert ids(trim_history(history, max_tokens=tokens - 1).messages) == ["h1"]


class TestTrimHistoryErrors:
    """Bad input gets a clear STMError subclass."""

    def test_orphan_result_raises_tool_pair_error(self) -> None:
        """A broken history is refused, naming the message at fault."""
        with pytest.raises(ToolPairError, match="t-zz"):
            trim_history([human("h1"), result("zz")], max_tokens=10, token_counter=len)

    def test_duplicate_result_raises_tool_pair_error(self) -> None:
        """Two results for one call are refused."""
        history = [call("a1", "x"), result("x"), result("x", "t-dup"), human("h1")]
        with pytest.raises(ToolPairError, match="t-dup"):
            trim_history(history, max_tokens=10, token_counter=len)

    def test_non_messages_raise_invalid_message_error(self) -> None:
        """A dict or string where a message belongs is refused."""
        with pytest.raises(InvalidMessageError):
            trim_history([human("h1"), "hello"], max_tokens=10, token_counter=len)  # type: ignore[list-item]
        with pytest.raises(InvalidMessageError):
            trim_history("hello", max_tokens=10, token_counter=len)  # type: ignore[arg-type]

    @pytest.mark.parametrize("budget", [0, -5, 1.5, True, None])
    def test_non_positive_budget_raises_invalid_argument_error(self, budget: Any) -> None:
        """max_tokens must be a positive int."""
        with pytest.raises(InvalidArgumentError, match="max_tokens"):
            trim_history(EXAMPLE, max_tokens=budget, token_counter=len)

    def test_unknown_option_raises_invalid_argument_error(self) -> None:
        """An unknown start_on value is named in the error."""
        with pytest.raises(InvalidArgumentError, match="start_on"):
            trim_history(EXAMPLE, max_tokens=5, token_counter=len, start_on="ai")  # type: ignore[arg-type]

    def test_bad_counter_result_raises_invalid_argument_error(self) -> None:
        """A counter returning a non-int is reported, not trusted."""
        with pytest.raises(InvalidArgumentError, match="non-negative int"):
            trim_history(EXAMPLE, max_tokens=5, token_counter=lambda m: "many")  # type: ignore[arg-type,return-value]

    def test_mandatory_over_budget_raises_budget_exceeded(self) -> None:
        """When system + latest human alone exceed the budget, nothing is silently cut."""
        with pytest.raises(BudgetExceededError) as info:
            trim_history(EXAMPLE, max_tokens=1, token_counter=len)
        assert (info.value.required, info.value.max_tokens) == (2, 1)
        assert "'s'" in str(info.value)
        assert "'h2'" in str(info.value)

    def test_errors_share_the_stm_base(self) -> None:
        """Every error above is an STMError."""
        for exc in (ToolPairError, InvalidMessageError, InvalidArgumentError, BudgetExceededError):
            assert issubclass(exc, STMError)


class TestPlanTrim:
    """plan_trim reports what was kept and removed, and honours the caller's choices."""

    def test_reports_removed_ids_and_exact_tokens(self) -> None:
        """removed_ids lists dropped input ids in order; tokens is the exact count."""
        plan = trim_history(EXAMPLE, max_tokens=5, token_counter=len, start_on="any")
        assert plan.removed_ids == ("h1", "ai1", "t-a", "t-b")
        assert plan.tokens == 3
        assert not plan.over_budget
        assert plan.update().get("messages", []) == [RemoveMessage(id=i) for i in plan.removed_ids]

    def test_keep_mandatory_flags_an_over_budget_result(self) -> None:
        """on_overflow='keep_mandatory' returns the mandatory part with over_budget=True."""
        plan = trim_history(EXAMPLE, max_tokens=1, token_counter=len, on_overflow="keep_mandatory")
        assert ids(plan.messages) == ["s", "h2"]
        assert plan.over_budget
        assert plan.tokens == 2

    def test_repair_option_fixes_then_trims(self) -> None:
        """on_invalid='repair' removes orphans and answers dangling calls before trimming."""
        history = [human("h1"), call("a1", "x"), human("h2"), result("zz"), ai("a2")]
        plan = trim_history(history, max_tokens=100, token_counter=len, on_invalid="repair")
        assert ids(plan.messages) == ["h1", "a1", synthetic_result_id("a1", "x"), "h2", "a2"]
        updates = plan.update().get("messages", [])
        assert updates[0] == RemoveMessage(id=REMOVE_ALL_MESSAGES)
        assert ids(add_messages(history, updates)) == ids(plan.messages)  # type: ignore[arg-type]

    def test_repair_with_removals_only_stays_incremental(self) -> None:
        """When repair only removes orphans, the update is RemoveMessage items only."""
        history = [human("h1"), result("zz"), ai("a1"), human("h2"), ai("a2")]
        plan = trim_history(history, max_tokens=2, token_counter=len, on_invalid="repair")
        assert ids(plan.update().get("messages", [])) == ["h1", "t-zz", "a1"]


class TestTrimNode:
    """TrimNode returns RemoveMessage updates for dropped messages only."""

    def test_returns_removals_for_dropped_ids(self) -> None:
        """The update removes exactly the dropped messages."""
        node = TrimNode(max_tokens=5, token_counter=len, start_on="any")
        update = node({"messages": EXAMPLE})
        assert update == {"messages": [RemoveMessage(id=i) for i in ["h1", "ai1", "t-a", "t-b"]]}
        assert ids(add_messages(EXAMPLE, update["messages"])) == ["s", "ai2", "h2"]  # type: ignore[arg-type]

    def test_rerun_on_its_own_output_returns_nothing(self) -> None:
        """Applying the node twice removes nothing the second time."""
        node = TrimNode(max_tokens=5, token_counter=len)
        once = add_messages(EXAMPLE, node({"messages": EXAMPLE})["messages"])  # type: ignore[arg-type]
        assert node({"messages": once}) == {}

    @pytest.mark.parametrize("budget", [1, 2])
    def test_empty_state_with_a_tiny_budget_returns_no_update(self, budget: int) -> None:
        """An empty thread gives {} whatever the budget (no error for the per-call overhead)."""
        assert TrimNode(max_tokens=budget)({"messages": []}) == {}

    def test_custom_messages_key(self) -> None:
        """messages_key selects the state key read and written."""
        node = TrimNode(max_tokens=1, token_counter=len, messages_key="chat")
        assert node({"chat": [human("h1"), human("h2")]}) == {"chat": [RemoveMessage(id="h1")]}

    def test_bad_configuration_fails_when_built(self) -> None:
        """max_tokens and options are checked at construction."""
        with pytest.raises(InvalidArgumentError):
            TrimNode(max_tokens=0)
        with pytest.raises(InvalidArgumentError):
            TrimNode(max_tokens=10, on_overflow="truncate")  # type: ignore[arg-type]

    def test_missing_messages_key_raises_invalid_argument_error(self) -> None:
        """A state without the messages key is reported clearly (as by every node)."""
        with pytest.raises(InvalidArgumentError, match="'messages'"):
            TrimNode(max_tokens=10)({"msgs": []})

    def test_only_ids_present_in_state_are_removed(self) -> None:
        """Messages get ids from add_messages first; removals name only those ids."""
        fresh: list[Any] = [HumanMessage("q1"), HumanMessage("q2"), HumanMessage("q3")]
        state = add_messages([], fresh)
        update = TrimNode(max_tokens=1, token_counter=len)({"messages": state})
        assert {m.id for m in update["messages"]} <= {m.id for m in state}  # type: ignore[union-attr]
