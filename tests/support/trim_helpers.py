"""Message builders, a history strategy and invariant checks for the trim/context tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langgraph_stm import validate_history
from langgraph_stm._units import group_units


def human(message_id: str, text: str = "question") -> HumanMessage:
    """A HumanMessage with an id."""
    return HumanMessage(text, id=message_id)


def ai(message_id: str, text: str = "answer") -> AIMessage:
    """An AIMessage without tool calls."""
    return AIMessage(text, id=message_id)


def system(message_id: str, text: str = "You are helpful.") -> SystemMessage:
    """A SystemMessage with an id."""
    return SystemMessage(text, id=message_id)


def call(message_id: str, *call_ids: str, text: str = "") -> AIMessage:
    """An AIMessage calling the tool ``lookup`` once per call id."""
    return AIMessage(
        text,
        id=message_id,
        tool_calls=[{"name": "lookup", "args": {"key": c}, "id": c} for c in call_ids],
    )


def result(call_id: str, message_id: str | None = None, text: str = "ok") -> ToolMessage:
    """The ToolMessage answering ``call_id`` (id ``t-<call_id>`` by default)."""
    return ToolMessage(text, tool_call_id=call_id, id=message_id or f"t-{call_id}")


def ids(messages: Sequence[BaseMessage]) -> list[str | None]:
    """The ids of ``messages``, in order."""
    return [m.id for m in messages]


@dataclass
class RecordingCounter:
    """Wraps a counter and checks every list it is handed is a valid, ordered sub-history."""

    inner: Callable[[list[BaseMessage]], int]
    history: Sequence[BaseMessage]
    calls: list[list[str | None]] = field(default_factory=list)

    def __call__(self, messages: list[BaseMessage]) -> int:
        position = {id(m): i for i, m in enumerate(self.history)}
        indices = [position.get(id(m)) for m in messages]
        known = [i for i in indices if i is not None]
        assert known == sorted(known), "the counter was handed messages out of order"
        assert validate_history(messages) == [], "the counter was handed a broken list"
        self.calls.append(ids(messages))
        return self.inner(messages)


# Strategies are built once: building them inside the composite on every draw costs
# more than the tests themselves. Texts: empty, short, multilingual, long.
_TEXTS = st.sampled_from(
    [
        "",
        "ok",
        "please refund order 42",
        "Paris, Zürich, 東京 🙂\nnext line",
        "lorem ipsum " * 60,
        "lorem ipsum dolor " * 400,
    ]
)
_KINDS = st.sampled_from(["human", "human", "ai", "tools", "tools", "note"])
_NOTE_HEAVY_KINDS = st.sampled_from(["human", "ai", "tools", "note", "note"])
_FANOUT = st.integers(1, 3)
_BOOLS = st.booleans()
_UNIT_COUNTS = {n: st.integers(0, n) for n in range(0, 41)}
_SUBSETS = {n: st.integers(0, n - 1) for n in range(1, 4)}
_ORDERS = {n: st.permutations(range(n)) for n in range(1, 4)}


@st.composite
def histories(
    draw: st.DrawFn,
    *,
    max_units: int = 14,
    pending: bool | None = None,
    leading_system: bool | None = None,
    notes: bool = False,
) -> list[BaseMessage]:
    """Valid histories: optional leading system message, human/AI turns, parallel tool
    calls answered in any order, mid-history system notes, and maybe a pending last unit
    (some of its calls unanswered). ``pending``/``leading_system`` force the choice;
    ``notes=True`` makes mid-history system notes far more frequent."""
    messages: list[BaseMessage] = []
    serial = iter(range(10_000))

    def next_id(prefix: str) -> str:
        return f"{prefix}{next(serial)}"

    if leading_system if leading_system is not None else draw(_BOOLS):
        messages.append(system(next_id("s"), draw(_TEXTS)))
    for _ in range(draw(_UNIT_COUNTS[max_units])):
        kind = draw(_NOTE_HEAVY_KINDS if notes else _KINDS)
        if kind == "human":
            messages.append(human(next_id("h"), draw(_TEXTS)))
        elif kind == "ai":
            messages.append(ai(next_id("a"), draw(_TEXTS)))
        elif kind == "note":
            messages.append(system(next_id("n"), draw(_TEXTS)))
        else:
            head = next_id("a")
            call_ids = [f"{head}-c{i}" for i in range(draw(_FANOUT))]
            messages.append(call(head, *call_ids, text=draw(_TEXTS)))
            for i in draw(_ORDERS[len(call_ids)]):
                messages.append(result(call_ids[i], text=draw(_TEXTS)))
    if pending if pending is not None else draw(_BOOLS):
        head = next_id("p")
        call_ids = [f"{head}-c{i}" for i in range(draw(_FANOUT))]
        messages.append(call(head, *call_ids, text=draw(_TEXTS)))
        order = draw(_ORDERS[len(call_ids)])
        for i in order[: draw(_SUBSETS[len(call_ids)])]:
            messages.append(result(call_ids[i], text=draw(_TEXTS)))
    return messages


def assert_whole_units(original: Sequence[BaseMessage], kept: Sequence[BaseMessage]) -> None:
    """``kept`` is an ordered subsequence of ``original`` (same objects) of whole units."""
    kept_ids = {id(m) for m in kept}
    assert [m for m in original if id(m) in kept_ids] == list(kept), "order or identity changed"
    for unit in group_units(original):
        inside = [id(m) in kept_ids for m in unit.messages]
        assert all(inside) or not any(inside), f"unit {unit.ids} was split"
    assert validate_history(kept) == []


def mandatory_ids(history: Sequence[BaseMessage]) -> set[str | None]:
    """Ids trim must always keep: leading system, pending unit, latest human message."""
    units = group_units(history)
    must: set[str | None] = set()
    if units and isinstance(units[0].head, SystemMessage):
        must.add(units[0].head.id)
    if units and units[-1].pending:
        must.update(units[-1].ids)
    humans = [u for u in units if isinstance(u.head, HumanMessage)]
    if humans:
        must.add(humans[-1].head.id)
    return must
