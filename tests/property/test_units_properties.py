"""validate_history, repair_history and the scan cache on generated broken histories."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage, ToolMessage
from langgraph.graph.message import add_messages

from langgraph_stm import repair_history, validate_history
from langgraph_stm._units import _Scanner, group_units
from tests.support.trim_helpers import histories, human, ids, result

MANY = settings(max_examples=1_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PREFIX = [human(f"base{i}") for i in range(300)]  # long enough for the scan cache


@st.composite
def broken_histories(draw: st.DrawFn) -> list[BaseMessage]:
    """Valid histories with up to three defects: deleted, duplicated, moved or orphan results."""
    messages = draw(histories(max_units=10))
    for serial in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["delete", "duplicate", "move", "orphan"]))
        tools = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
        if action == "orphan" or not tools:
            position = draw(st.integers(0, len(messages)))
            messages.insert(position, result(f"ghost{serial}", f"t-ghost{serial}"))
            continue
        index = draw(st.sampled_from(tools))
        victim = messages[index]
        assert isinstance(victim, ToolMessage)
        if action == "delete":
            del messages[index]
        elif action == "duplicate":
            copy = result(victim.tool_call_id, f"dup{serial}-{victim.id}")
            messages.insert(draw(st.integers(index + 1, len(messages))), copy)
        else:
            del messages[index]
            messages.insert(draw(st.integers(index, len(messages))), victim)
    return messages


def fresh(messages: list[Any]) -> Any:
    scanner = _Scanner()
    scanner.feed(messages)
    return scanner.finish()


class TestRepairProperties:
    """repair_history fixes any generated defect, deterministically."""

    @MANY
    @given(history=broken_histories())
    def test_repair_yields_a_valid_history_keeping_ids_and_order(
        self, history: list[BaseMessage]
    ) -> None:
        """After the updates the history validates, and survivors keep ids and order."""
        updates = list(repair_history(history).updates)
        fixed = cast(list[BaseMessage], add_messages(cast(Any, history), cast(Any, updates)))
        assert validate_history(fixed) == []
        assert list(repair_history(fixed).updates) == []
        assert updates == list(repair_history(history).updates)
        original = {id(m) for m in history}
        survivors = [m for m in fixed if id(m) in original]
        non_tool = [m for m in history if not isinstance(m, ToolMessage)]
        assert [m for m in survivors if not isinstance(m, ToolMessage)] == non_tool
        assert len(set(ids(fixed))) == len(fixed)

    @MANY
    @given(history=broken_histories())
    def test_validation_agrees_with_group_units(self, history: list[BaseMessage]) -> None:
        """group_units raises exactly when validate_history reports problems."""
        problems = validate_history(history)
        try:
            group_units(history)
        except ValueError:
            assert problems
        else:
            assert problems == []


class TestScanCacheProperties:
    """Scanning an extension of a cached history equals scanning it from scratch."""

    @MANY
    @given(first=broken_histories(), second=broken_histories())
    def test_cached_scan_equals_fresh_scan(
        self, first: list[BaseMessage], second: list[BaseMessage]
    ) -> None:
        """Prefix scanned, then extended: same units and problems as a fresh scan."""
        renamed = [m.model_copy(update={"id": f"x-{m.id}"}) for m in second]
        base = [*PREFIX, *first]
        extended = [*base, *renamed]
        validate_history(base)  # fills the cache with the prefix
        assert validate_history(extended) == fresh(extended)[1]
        validate_history(base)
        if not fresh(extended)[1]:
            assert group_units(extended) == fresh(extended)[0]
