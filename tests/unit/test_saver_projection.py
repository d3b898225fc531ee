"""The structured-state projection computed from a root checkpoint's channel values."""

from __future__ import annotations

from datetime import UTC, datetime

from langchain_core.messages import HumanMessage

from langgraph_stm.checkpoint import ThreadState
from langgraph_stm.checkpoint._threads import format_ts, project, to_state


class TestProject:
    """project() and to_state()."""

    def test_structured_fields_are_copied(self) -> None:
        """Goal, plan, constraints, artifacts, last_error and summary survive the JSON trip."""
        values = {
            "goal": "ship",
            "plan": [{"id": "s1", "task": "t", "status": "done"}],
            "constraints": [
                {"id": "c1", "text": "x", "source_message_id": None, "status": "confirmed"}
            ],
            "artifacts": [
                {
                    "id": "a",
                    "kind": "f",
                    "summary": "s",
                    "uri": None,
                    "source_message_id": None,
                    "tokens": 3,
                }
            ],
            "last_error": {"message": "boom", "recovery": None, "step_id": None, "at": None},
            "summary": {"text": "so far", "version": 2},
            "messages": [HumanMessage(content="hi")],
        }
        state = to_state(project("t1", "c1", "2026-01-01T00:00:00+00:00", values))
        assert state == ThreadState(
            thread_id="t1",
            checkpoint_id="c1",
            updated_at=datetime(2026, 1, 1, tzinfo=UTC),
            goal="ship",
            plan=values["plan"],  # type: ignore[arg-type]
            constraints=values["constraints"],  # type: ignore[arg-type]
            artifacts=values["artifacts"],  # type: ignore[arg-type]
            last_error=values["last_error"],  # type: ignore[arg-type]
            summary=values["summary"],  # type: ignore[arg-type]
            message_count=1,
        )

    def test_missing_fields_are_empty(self) -> None:
        """A state without the structured keys projects to empty values."""
        state = to_state(project("t1", "c1", None, {"other": 1}))
        assert (state.goal, state.plan, state.summary, state.message_count) == (
            None,
            [],
            None,
            None,
        )
        assert state.updated_at is not None

    def test_values_that_are_not_json_are_dropped(self) -> None:
        """A custom object in a field of the same name is stored as None, never raises."""
        state = to_state(project("t1", "c1", None, {"goal": object()}))
        assert state.goal is None

    def test_timestamps_sort_as_strings(self) -> None:
        """Stored timestamps are fixed width UTC, so SQL string order is time order."""
        early = format_ts(datetime(2026, 1, 1, 23, 0, tzinfo=UTC))
        late = format_ts(datetime.fromisoformat("2026-01-02T00:30:00+01:00"))
        assert early < late
        assert len(early) == len(late)
