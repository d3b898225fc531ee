"""Reducers of the structured thread state."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_stm import STMError
from langgraph_stm.errors import StateUpdateError
from langgraph_stm.state import (
    REMOVE_ALL,
    merge_artifacts,
    merge_constraints,
    merge_plan,
    remove_record,
    set_last_error,
    update_summary,
)

PLAN: list[Any] = [
    {"id": "s1", "task": "export invoices", "status": "done"},
    {"id": "s2", "task": "map fields to v2", "status": "in_progress"},
    {"id": "s3", "task": "switch traffic", "status": "pending"},
]


class TestMergePlan:
    """plan merges steps by id."""

    def test_status_update_without_resending_the_plan(self) -> None:
        """A {id, status} update changes one step and keeps the others and the order."""
        merged = merge_plan(PLAN, {"id": "s2", "status": "done"})
        assert [s["status"] for s in merged] == ["done", "done", "pending"]
        assert merged[1]["task"] == "map fields to v2"
        assert PLAN[1]["status"] == "in_progress", "the reducer must not mutate its input"

    def test_new_step_is_appended_as_pending(self) -> None:
        """An unknown id appends a step, pending by default."""
        merged = merge_plan(PLAN, [{"id": "s4", "task": "announce"}])
        assert merged[-1] == {"id": "s4", "task": "announce", "status": "pending"}

    def test_remove_by_id(self) -> None:
        """remove_record deletes one step; REMOVE_ALL empties the plan."""
        assert [s["id"] for s in merge_plan(PLAN, remove_record("s2"))] == ["s1", "s3"]
        assert merge_plan(PLAN, remove_record(REMOVE_ALL)) == []

    def test_removing_an_unknown_id_is_a_no_op(self) -> None:
        """Removing a step that is not there changes nothing (safe on re-run)."""
        assert merge_plan(PLAN, remove_record("nope")) == PLAN

    def test_same_update_twice_is_idempotent(self) -> None:
        """Applying one update twice gives the same plan as applying it once."""
        update = [{"id": "s3", "status": "blocked"}, {"id": "s5", "task": "cleanup"}]
        once = merge_plan(PLAN, update)
        assert merge_plan(once, update) == once

    def test_step_without_id_names_the_field(self) -> None:
        """A step without id raises StateUpdateError naming plan."""
        with pytest.raises(StateUpdateError, match=r"invalid update for plan: .*'id'") as info:
            merge_plan(PLAN, {"task": "orphan"})
        assert info.value.field == "plan"
        assert isinstance(info.value, STMError)

    def test_unknown_status_names_the_step(self) -> None:
        """An unknown status raises an error naming the step id and the allowed values."""
        with pytest.raises(StateUpdateError, match=r"plan\[id='s1'\].*'finished'.*'blocked'"):
            merge_plan(PLAN, {"id": "s1", "status": "finished"})

    def test_new_step_needs_a_task(self) -> None:
        """A new step with only a status is rejected: there is nothing to show for it."""
        with pytest.raises(StateUpdateError, match=r"plan\[id='s9'\].*'task'"):
            merge_plan(PLAN, {"id": "s9", "status": "done"})

    def test_non_dict_items_are_rejected(self) -> None:
        """A string where a record is expected is a clear error."""
        with pytest.raises(StateUpdateError, match="expected a dict per record, got str"):
            merge_plan(PLAN, ["s1"])
        with pytest.raises(StateUpdateError, match="got int"):
            merge_plan(PLAN, 3)


class TestMergeConstraints:
    """constraints merge by id and are removable by id."""

    def test_add_confirm_and_remove(self) -> None:
        """Constraints are added (confirmed by default), updated and removed by id."""
        current = merge_constraints(
            None,
            [
                {"id": "c1", "text": "never email external domains", "source_message_id": "h1"},
                {"id": "c2", "text": "budget under $500", "status": "pending"},
            ],
        )
        assert [c["status"] for c in current] == ["confirmed", "pending"]
        current = merge_constraints(current, {"id": "c2", "status": "confirmed"})
        assert current[1] == {
            "id": "c2",
            "text": "budget under $500",
            "source_message_id": None,
            "status": "confirmed",
        }
        current = merge_constraints(current, remove_record("c1"))
        assert [c["id"] for c in current] == ["c2"]

    def test_unknown_status_is_rejected(self) -> None:
        """Only confirmed and pending are valid statuses."""
        with pytest.raises(StateUpdateError, match=r"constraints\[id='c1'\].*'maybe'"):
            merge_constraints(None, {"id": "c1", "text": "x", "status": "maybe"})

    def test_empty_id_is_rejected(self) -> None:
        """An empty-string id is not an id."""
        with pytest.raises(StateUpdateError, match="constraints"):
            merge_constraints(None, {"id": "", "text": "x"})


class TestMergeArtifacts:
    """artifacts merge by id; new ones need kind and summary."""

    def test_add_and_update(self) -> None:
        """A new artifact gets defaults; a later update merges into it."""
        current = merge_artifacts(None, {"id": "a1", "kind": "table", "summary": "10k rows"})
        assert current[0] == {
            "id": "a1",
            "kind": "table",
            "summary": "10k rows",
            "uri": None,
            "source_message_id": None,
            "tokens": 0,
        }
        current = merge_artifacts(current, {"id": "a1", "uri": "s3://b/k", "tokens": 12000})
        assert (current[0]["uri"], current[0]["tokens"]) == ("s3://b/k", 12000)

    def test_negative_tokens_are_rejected(self) -> None:
        """tokens must be a non-negative int."""
        with pytest.raises(StateUpdateError, match=r"artifacts\[id='a1'\].*tokens"):
            merge_artifacts(None, {"id": "a1", "kind": "k", "summary": "s", "tokens": -1})

    def test_missing_summary_is_rejected(self) -> None:
        """A new artifact needs a summary to show in the context."""
        with pytest.raises(StateUpdateError, match="'summary'"):
            merge_artifacts(None, {"id": "a1", "kind": "file"})


class TestLastError:
    """last_error is replaced by the latest write and cleared by None."""

    def test_set_and_clear(self) -> None:
        """A dict sets the error with defaults; None clears it."""
        err = set_last_error(None, {"message": "503 from billing", "step_id": "s2"})
        assert err == {"message": "503 from billing", "recovery": None, "step_id": "s2", "at": None}
        assert set_last_error(err, None) is None

    def test_message_is_required(self) -> None:
        """An error record without a message is rejected."""
        with pytest.raises(StateUpdateError, match="last_error"):
            set_last_error(None, {"recovery": "retry"})


class TestSummaryReducer:
    """summary never goes backwards."""

    def test_higher_version_replaces(self) -> None:
        """A newer version replaces the summary."""
        s1 = update_summary(None, {"text": "a", "version": 1})
        assert update_summary(s1, {"text": "b", "version": 2}) == {"text": "b", "version": 2}

    def test_same_or_lower_version_is_ignored(self) -> None:
        """Re-applying version 2 or applying version 1 after 2 changes nothing."""
        s2 = update_summary(None, {"text": "b", "version": 2})
        assert update_summary(s2, {"text": "rerun", "version": 2}) is s2
        assert update_summary(s2, {"text": "old", "version": 1}) is s2

    def test_none_is_a_no_op(self) -> None:
        """None keeps the current summary."""
        s1 = update_summary(None, {"text": "a", "version": 1})
        assert update_summary(s1, None) is s1

    @pytest.mark.parametrize(
        "bad",
        [{"text": "x"}, {"text": "x", "version": 0}, {"text": 3, "version": 1}, "text"],
    )
    def test_malformed_summary_is_rejected(self, bad: object) -> None:
        """Summaries need a string text and an int version >= 1."""
        with pytest.raises(StateUpdateError, match="summary"):
            update_summary(None, bad)


class TestValidateUpdate:
    """validate_update checks what needs no current value, before anything is written."""

    @pytest.mark.parametrize(
        ("field", "update"),
        [
            ("plan", {"task": "no id"}),
            ("plan", {"id": "s1", "status": "finished"}),
            ("plan", {"id": "s1", "task": 7}),
            ("constraints", [{"id": "c1", "text": "x", "status": "maybe"}]),
            ("artifacts", {"id": "a1", "tokens": -5}),
            ("last_error", {"recovery": "retry"}),
            ("summary", {"text": "x", "version": 0}),
            ("plan", "s1"),
        ],
    )
    def test_rejects_what_no_state_can_accept(self, field: str, update: object) -> None:
        """Malformed writes to structured fields raise StateUpdateError naming the field."""
        from langgraph_stm._state import validate_update

        with pytest.raises(StateUpdateError, match=field):
            validate_update(field, update)

    @pytest.mark.parametrize(
        ("field", "update"),
        [
            ("plan", {"id": "s1", "status": "done"}),
            ("plan", remove_record(REMOVE_ALL)),
            ("constraints", [remove_record("c1"), {"id": "c2", "text": "t"}]),
            ("last_error", None),
            ("summary", {"text": "x", "version": 3}),
            ("messages", ["anything: not a structured field"]),
            ("goal", None),
        ],
    )
    def test_accepts_partial_and_removal_updates(self, field: str, update: object) -> None:
        """Partial records, removals, clears and other channels pass."""
        from langgraph_stm._state import validate_update

        validate_update(field, update)
