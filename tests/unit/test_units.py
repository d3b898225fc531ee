"""Units and the tool-pair validator: group_units, validate_history, repair_history."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from langgraph_stm import _units as units_module
from langgraph_stm import repair_history, trim_history, validate_history
from langgraph_stm._units import _Scanner, group_units, synthetic_result_id
from langgraph_stm.errors import InvalidMessageError, ToolPairError
from langgraph_stm.typing import HistoryProblem, Unit
from tests.support.trim_helpers import ai, call, human, ids, result, system


def kinds(messages: list[Any]) -> list[tuple[str, str | None, str | None]]:
    return [(p.kind, p.message_id, p.tool_call_id) for p in validate_history(messages)]


class TestUnit:
    """The Unit record."""

    def test_ids_and_head_follow_the_messages(self) -> None:
        """ids lists the message ids in order; head is the first message."""
        unit = Unit((call("a1", "c1"), result("c1")), pending=False)
        assert unit.ids == ("a1", "t-c1")
        assert unit.head.id == "a1"

    def test_unanswered_lists_calls_without_results(self) -> None:
        """unanswered names the head's call ids that have no result in the unit."""
        unit = Unit((call("a1", "c1", "c2"), result("c2")), pending=True)
        assert unit.unanswered == ("c1",)
        assert Unit((human("h1"),), pending=False).unanswered == ()

    def test_is_frozen(self) -> None:
        """A unit cannot be mutated."""
        unit = Unit((human("h1"),), pending=False)
        with pytest.raises(AttributeError):
            unit.pending = True  # type: ignore[misc]


class TestGroupUnits:
    """group_units splits a valid history into units and refuses a broken one."""

    def test_lone_messages_are_units(self) -> None:
        """Each message without tool calls is its own unit."""
        units = group_units([system("s"), human("h1"), ai("a1")])
        assert [u.ids for u in units] == [("s",), ("h1",), ("a1",)]
        assert not any(u.pending for u in units)

    def test_parallel_results_join_their_call_in_any_order(self) -> None:
        """Results answering parallel calls, in any order, form one unit with the call."""
        units = group_units([call("a1", "x", "y"), result("y"), result("x"), ai("a2")])
        assert [u.ids for u in units] == [("a1", "t-y", "t-x"), ("a2",)]

    def test_last_unit_with_unanswered_calls_is_pending(self) -> None:
        """An unanswered call at the end of the history makes a pending unit."""
        units = group_units([human("h1"), call("a1", "x", "y"), result("x")])
        assert units[-1].pending
        assert units[-1].ids == ("a1", "t-x")

    def test_empty_history_has_no_units(self) -> None:
        """An empty history groups into no units."""
        assert group_units([]) == []

    def test_orphan_result_raises_naming_the_id(self) -> None:
        """A ToolMessage answering no call raises ToolPairError naming it."""
        with pytest.raises(ToolPairError, match="t-zz") as info:
            group_units([human("h1"), result("zz")])
        assert info.value.message_ids == ("t-zz",)

    def test_dangling_call_raises(self) -> None:
        """An unanswered call followed by another message raises ToolPairError."""
        with pytest.raises(ToolPairError, match="a1") as info:
            group_units([call("a1", "x"), human("h1")])
        assert info.value.message_ids == ("a1",)

    def test_non_message_raises_invalid_message_error(self) -> None:
        """A dict in the history is not a message."""
        with pytest.raises(InvalidMessageError, match=r"messages\[1\] is a dict"):
            group_units([human("h1"), {"role": "user", "content": "hi"}])  # type: ignore[list-item]

    def test_message_without_id_raises_invalid_message_error(self) -> None:
        """Units need ids; a message without one is refused."""
        with pytest.raises(InvalidMessageError, match="has no id"):
            group_units([HumanMessage("hi")])


class TestValidateHistory:
    """validate_history lists every defect and never raises."""

    def test_valid_history_has_no_problems(self) -> None:
        """A well-formed history, even ending with a pending call, is valid."""
        history = [system("s"), human("h1"), call("a1", "x", "y"), result("x"), result("y")]
        assert validate_history([*history, ai("a2"), call("a3", "z")]) == []

    def test_orphan_result(self) -> None:
        """A result before any call is an orphan."""
        assert kinds([result("x"), call("a1", "x")]) == [("orphan_tool_result", "t-x", "x")]

    def test_misplaced_result(self) -> None:
        """A result separated from its call by another message is misplaced."""
        assert kinds([call("a1", "x"), ai("a2"), result("x")]) == [
            ("dangling_tool_call", "a1", "x"),
            ("misplaced_tool_result", "t-x", "x"),
        ]

    def test_duplicate_result(self) -> None:
        """A second result for one call id is a duplicate, wherever it appears."""
        history = [call("a1", "x"), result("x"), result("x", "t-again"), ai("a2")]
        assert kinds(history) == [("duplicate_tool_result", "t-again", "x")]
        later = [call("a1", "x"), result("x"), ai("a2"), result("x", "t-late")]
        assert kinds(later) == [("duplicate_tool_result", "t-late", "x")]

    def test_dangling_call(self) -> None:
        """A call left unanswered before a later message is dangling."""
        assert kinds([call("a1", "x", "y"), result("x"), human("h1")]) == [
            ("dangling_tool_call", "a1", "y")
        ]

    def test_message_without_id_and_duplicate_id(self) -> None:
        """Missing and reused message ids are reported."""
        assert kinds([HumanMessage("hi"), human("h1"), ai("h1")]) == [
            ("missing_id", None, None),
            ("duplicate_id", "h1", None),
        ]

    def test_tool_call_without_id_and_reused_call_id(self) -> None:
        """A call with no id, or one reusing an earlier call id, is reported."""
        no_id = AIMessage("", id="a1", tool_calls=[{"name": "f", "args": {}, "id": None}])
        assert kinds([no_id]) == [("missing_tool_call_id", "a1", None)]
        reused = [call("a1", "x"), result("x"), call("a2", "x")]
        assert kinds(reused) == [("duplicate_tool_call_id", "a2", "x")]

    def test_non_messages_are_problems_not_exceptions(self) -> None:
        """Non-message items and non-sequences are reported, never raised."""
        assert kinds([None, "hello"]) == [("not_a_message", None, None)] * 2
        assert kinds(42)[0][0] == "not_a_message"  # type: ignore[arg-type]

    def test_problems_are_frozen_records_with_details(self) -> None:
        """Each problem is a frozen dataclass whose detail names the position."""
        problem = validate_history([human("h1"), result("x")])[0]
        assert isinstance(problem, HistoryProblem)
        assert "messages[1]" in problem.detail
        with pytest.raises(AttributeError):
            problem.kind = "missing_id"  # type: ignore[misc]


def apply(history: list[Any], updates: list[Any]) -> list[Any]:
    return list(add_messages(history, updates))


class TestRepairHistory:
    """repair_history returns add_messages updates that fix a broken history."""

    def test_valid_history_needs_no_updates(self) -> None:
        """A valid history, pending call included, repairs to []."""
        assert list(repair_history([human("h1"), call("a1", "x")]).updates) == []

    def test_orphans_and_duplicates_are_removed_by_id(self) -> None:
        """Only RemoveMessage updates when nothing has to be inserted."""
        history = [result("zz"), call("a1", "x"), result("x"), result("x", "t-dup"), ai("a2")]
        updates = list(repair_history(history).updates)
        assert all(isinstance(u, RemoveMessage) for u in updates)
        assert ids(updates) == ["t-zz", "t-dup"]
        assert ids(apply(history, updates)) == ["a1", "t-x", "a2"]

    def test_dangling_call_gets_a_synthetic_error_result_after_its_unit(self) -> None:
        """A rejected approval leaves a dangling call; it gets an error result in place."""
        history = [human("h1"), call("a1", "x", "y"), result("x"), human("h2"), ai("a2")]
        fixed = apply(history, list(repair_history(history).updates))
        assert ids(fixed) == ["h1", "a1", "t-x", synthetic_result_id("a1", "y"), "h2", "a2"]
        synthetic = fixed[3]
        assert isinstance(synthetic, ToolMessage)
        assert synthetic.status == "error"
        assert synthetic.tool_call_id == "y"
        assert validate_history(fixed) == []

    def test_repair_keeps_every_surviving_message_object(self) -> None:
        """Kept messages are the same objects, in the same order."""
        history = [human("h1"), call("a1", "x"), human("h2")]
        fixed = apply(history, list(repair_history(history).updates))
        assert fixed[0] is history[0]
        assert fixed[1] is history[1]
        assert fixed[-1] is history[2]

    def test_misplaced_result_is_moved_next_to_its_call(self) -> None:
        """A real result that arrived late is moved, not discarded."""
        history = [call("a1", "x"), human("h1"), result("x")]
        updates = list(repair_history(history).updates)
        assert updates[0] == RemoveMessage(id=REMOVE_ALL_MESSAGES)
        assert ids(apply(history, updates)) == ["a1", "t-x", "h1"]

    def test_repair_is_deterministic_and_idempotent(self) -> None:
        """Two repairs produce equal updates, and repairing the result returns []."""
        history = [call("a1", "x"), human("h1"), result("zz")]
        assert list(repair_history(history).updates) == list(repair_history(history).updates)
        assert (
            list(repair_history(apply(history, list(repair_history(history).updates))).updates)
            == []
        )

    def test_pending_last_unit_is_left_alone(self) -> None:
        """Orphans are removed, but the pending call at the end gets no synthetic result."""
        history = [human("h1"), call("a1", "x", "y"), result("x"), result("zz")]
        assert ids(apply(history, list(repair_history(history).updates))) == ["h1", "a1", "t-x"]

    def test_unrepairable_histories_raise(self) -> None:
        """Missing ids and reused call ids cannot be fixed without guessing."""
        with pytest.raises(InvalidMessageError, match="has no id"):
            list(repair_history([HumanMessage("hi"), result("zz")]).updates)
        with pytest.raises(ToolPairError, match="reuses tool call id"):
            list(
                repair_history(
                    [call("a1", "x"), result("x"), call("a2", "x"), result("zz")]
                ).updates
            )


def long_history(turns: int = 100) -> list[Any]:
    """A valid history of 3 * turns messages (long enough for the scan cache)."""
    messages: list[Any] = []
    for i in range(turns):
        messages += [human(f"h{i}"), call(f"a{i}", f"c{i}"), result(f"c{i}")]
    return messages


def fresh_problems(messages: list[Any]) -> list[HistoryProblem]:
    """Problems found by a scan that cannot use the cache."""
    scanner = _Scanner()
    scanner.feed(messages)
    return scanner.finish()[1]


class TestScanCache:
    """Re-validating a long history after new messages reuses the previous scan safely."""

    def test_appended_messages_are_checked(self) -> None:
        """A defect appended to an already-scanned history is found."""
        history = long_history()
        assert validate_history(history) == []
        assert kinds([*history, result("zz")]) == [("orphan_tool_result", "t-zz", "zz")]

    def test_replaced_message_in_the_prefix_forces_a_full_scan(self) -> None:
        """A different object in the middle is noticed, not trusted."""
        history = long_history()
        assert validate_history(history) == []
        changed = [*history]
        changed[100] = result("zz", "t-new")
        assert validate_history(changed) == fresh_problems(changed) != []

    def test_id_changed_in_place_forces_a_full_scan(self) -> None:
        """Ids assigned in place (as add_messages does) are noticed."""
        history = long_history()
        history[5].id = None
        assert [p.kind for p in validate_history(history)] == ["missing_id"]
        history[5].id = "fixed"
        assert validate_history(history) == []

    def test_tool_call_ids_edited_in_place_force_a_full_scan(self) -> None:
        """An AI message whose tool_calls list is edited in place is scanned again."""
        history = [*long_history(), call("p", "x"), result("x"), human("after")]
        assert validate_history(history) == []
        pending = history[-3]
        assert isinstance(pending, AIMessage)
        pending.tool_calls.append({"name": "lookup", "args": {}, "id": "y", "type": "tool_call"})
        assert kinds(history) == [("dangling_tool_call", "p", "y")]
        assert validate_history(history) == fresh_problems(history)
        pending.tool_calls[1]["id"] = "x2"
        assert kinds(history) == [("dangling_tool_call", "p", "x2")]
        del pending.tool_calls[1]
        assert validate_history(history) == []

    def test_a_result_retargeted_in_place_forces_a_full_scan(self) -> None:
        """A ToolMessage whose tool_call_id is changed in place is scanned again."""
        history = [*long_history(), call("p", "x"), result("x"), human("after")]
        assert validate_history(history) == []
        answer = history[-2]
        assert isinstance(answer, ToolMessage)
        answer.tool_call_id = "zz"
        assert validate_history(history) == fresh_problems(history) != []

    def test_trim_follows_tool_calls_added_in_place(self) -> None:
        """Trim groups a call edited in place into a pending unit, as a fresh scan would."""
        history = [*long_history(), call("p", "x"), result("x")]
        assert trim_history(history, max_tokens=10_000, token_counter=len).messages[-1].id == "t-x"
        last = history[-2]
        assert isinstance(last, AIMessage)
        last.tool_calls.append({"name": "lookup", "args": {}, "id": "y", "type": "tool_call"})
        kept = trim_history(history, max_tokens=10_000, token_counter=len)
        assert [m.id for m in kept.messages[-2:]] == ["p", "t-x"]
        assert group_units(history)[-1].pending

    def test_prefix_problems_stay_reported_and_pending_closes_correctly(self) -> None:
        """Extending a scan keeps earlier problems and re-judges the open unit."""
        history = [*long_history(), call("p", "x")]
        assert validate_history(history) == []  # pending at the end
        extended = [*history, human("later")]
        assert kinds(extended) == [("dangling_tool_call", "p", "x")]
        assert kinds([*extended, ai("more")]) == [("dangling_tool_call", "p", "x")]
        assert group_units([*history, result("x")])[-1].pending is False

    def test_shorter_history_is_scanned_from_scratch(self) -> None:
        """A history that is not an extension of the cached one gets a fresh scan."""
        history = long_history()
        validate_history([*history, result("zz")])
        assert validate_history(history) == []


def fresh_scan(messages: list[Any]) -> tuple[list[Unit], list[HistoryProblem]]:
    """Units and problems of a scan that cannot use the cache."""
    scanner = _Scanner()
    scanner.feed(messages)
    return scanner.finish()


class TestScanCacheConcurrencyAndBounds:
    """The scan cache is safe across threads, bounded, and helps concurrent runs."""

    @pytest.fixture(autouse=True)
    def _empty_cache(self) -> Iterator[None]:
        units_module._clear_scan_cache()
        yield
        units_module._clear_scan_cache()

    def test_threads_scanning_different_histories_never_get_each_others_units(self) -> None:
        """Same ids, shared prefixes, different groupings: each thread sees its own units."""
        tools = long_history()  # [h_i, a_i calling c_i, t-c_i]: tool-call units
        flat = [m for i in range(100) for m in (human(f"h{i}"), ai(f"a{i}"), human(f"t-c{i}"))]
        shared = [*tools[:150], *[human(f"s{i}") for i in range(150)]]  # tools' objects first
        histories = [tools, flat, shared]
        errors: list[BaseException] = []
        barrier = threading.Barrier(len(histories))

        def work(base: list[Any], tag: str) -> None:
            try:
                barrier.wait()
                history = list(base)
                for step in range(120):
                    history.append(human(f"{tag}-{step}"))
                    expected = fresh_scan(history)
                    assert group_units(history) == expected[0]
                    assert validate_history(history) == expected[1] == []
                    if step % 7 == 0:  # also rescan a shorter prefix of its own history
                        short = history[: len(base) + step // 2]
                        assert group_units(short) == fresh_scan(short)[0]
            except BaseException as exc:  # reported to the main thread
                errors.append(exc)

        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            threads = [
                threading.Thread(target=work, args=(history, f"x{n}"))
                for n, history in enumerate(histories)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            sys.setswitchinterval(interval)
        assert errors == []

    def test_cache_holds_a_bounded_number_of_histories_and_messages(self) -> None:
        """At most _MAX_ENTRIES histories and _MAX_CACHED_MESSAGES messages are referenced."""
        for n in range(units_module._MAX_ENTRIES + 3):
            validate_history([human(f"m{n}-{i}") for i in range(300)])
        cached = units_module._cache
        assert len(cached) == units_module._MAX_ENTRIES
        assert sum(len(entry.refs) for entry in cached) <= units_module._MAX_CACHED_MESSAGES
        huge = [human(f"big{i}") for i in range(units_module._MAX_CACHED_MESSAGES + 1)]
        assert validate_history(huge) == []
        assert all(entry.refs[0] is not huge[0] for entry in units_module._cache)

    def test_interleaved_histories_each_resume_their_own_scan(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Two runs taking turns both scan only their new messages (a few concurrent runs)."""
        fed: list[int] = []
        original = _Scanner.feed

        def counting_feed(self: _Scanner, messages: Any) -> None:
            fed.append(len(messages))
            original(self, messages)

        monkeypatch.setattr(_Scanner, "feed", counting_feed)
        first, second = long_history(), [human(f"other{i}") for i in range(300)]
        validate_history(first)
        validate_history(second)
        fed.clear()
        for step in range(3):
            first.append(human(f"f{step}"))
            second.append(human(f"s{step}"))
            assert validate_history(first) == validate_history(second) == []
        assert fed == [1] * 6
