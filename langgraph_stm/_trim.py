"""Tool-pair-safe trimming: :func:`trim_history` and :class:`TrimNode`.

Trimming keeps whole units (see :mod:`langgraph_stm._units`), so a trimmed history
never starts with an orphan ``ToolMessage`` nor cuts between parallel tool results,
and a tool call waiting on an approval ``interrupt()`` is never dropped.

What is kept, in this order of precedence:

1. **Mandatory**: a leading ``SystemMessage``, the pending unit (if the history ends
   with unanswered tool calls) and the latest ``HumanMessage``. If they alone exceed
   ``max_tokens``, :class:`BudgetExceededError` is raised (or, with
   ``on_overflow="keep_mandatory"``, they are returned with ``over_budget=True``).
   The counter's per-call overhead (:data:`REPLY_PRIMING` for a :class:`TokenCounter`,
   ``counter([])`` for another counter) is charged with the first kept message: an
   empty result is no model input and costs 0. So a history with no mandatory message
   (``[]``, or one with no system, human or pending message) never raises; it keeps
   the newest units that fit, possibly none.
2. **The newest units that fit**, newest first, stopping at the first that does not
   fit, so the kept window is contiguous.
3. **No promoted notes.** Only the input's *first* message is the leading system
   message. A ``SystemMessage`` further down (a "note") that would head the kept
   window once the units before it are evicted is dropped with them: kept first, a
   later trim would take it for the leading system message and providers would read
   it as part of the system prompt. A note already heading the window in the input
   (nothing before it evicted) stays.
4. **Provider-friendly start** (``start_on="human"``, the default): units at the
   front of the window are dropped until the first message after the system message
   is a ``HumanMessage``. Anthropic and Gemini reject a conversation whose first turn
   is an assistant or tool turn, OpenAI accepts it; ``start_on="any"`` keeps every
   unit that fits (for OpenAI-style providers or when you prepend your own user turn).
   A history without any ``HumanMessage`` is not constrained.

The result is checked with the token counter on the exact list returned, so it fits
the budget as counted. With a :class:`TokenCounter` the count is the sum of cached
per-message counts plus :data:`REPLY_PRIMING`, so trimming a long thread after one new
message tokenizes only that message; the tool-pair check of the whole history likewise
resumes the previous scan when the history only grew (see :mod:`langgraph_stm._units`).
Any other ``Callable[[list[BaseMessage]], int]`` works too: it is handed ``[]`` once
(its per-call overhead), whole units to price them at ``counter(unit) - counter([])``,
then the final list to check it.

Example:
    >>> from langchain_core.messages import (
    ...     AIMessage, HumanMessage, SystemMessage, ToolMessage)
    >>> history = [
    ...     SystemMessage("be brief", id="s"),
    ...     HumanMessage("hi", id="h1"),
    ...     AIMessage("", id="ai1", tool_calls=[
    ...         {"name": "f", "args": {}, "id": "a"}, {"name": "g", "args": {}, "id": "b"}]),
    ...     ToolMessage("1", tool_call_id="a", id="ta"),
    ...     ToolMessage("2", tool_call_id="b", id="tb"),
    ...     AIMessage("done", id="ai2"),
    ...     HumanMessage("thanks", id="h2"),
    ... ]
    >>> def kept(budget, start_on="any"):
    ...     result = trim_history(
    ...         history, max_tokens=budget, token_counter=len, start_on=start_on)
    ...     return [m.id for m in result.messages]
    >>> kept(5)  # the 3-message tool unit does not fit in the 2 tokens left: dropped whole
    ['s', 'ai2', 'h2']
    >>> kept(6)
    ['s', 'ai1', 'ta', 'tb', 'ai2', 'h2']
    >>> kept(6, start_on="human")  # the window must start at a human turn
    ['s', 'h2']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import filterfalse
from operator import attrgetter
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langgraph_stm._errors import BudgetExceededError
from langgraph_stm._node import StateNode
from langgraph_stm._policy import (
    Meter,
    OnInvalid,
    OnOverflow,
    StartOn,
    check_choice,
    check_counter,
    check_history_options,
    check_key,
    check_max_tokens,
    drop_promoted_notes,
    flatten,
    messages_of,
    prepare,
    protected,
    read_state,
    start_at_human,
)
from langgraph_stm._tokens import TokenCounterLike
from langgraph_stm._units import RepairCause, Unit, group_units

__all__ = ["TrimNode", "TrimResult", "trim_history"]

_get_id = attrgetter("id")


def _check_options(
    start_on: object, on_invalid: object, repair_cause: object, on_overflow: object
) -> None:
    check_choice("start_on", start_on, StartOn)
    check_history_options(on_invalid, repair_cause)
    check_choice("on_overflow", on_overflow, OnOverflow)


@dataclass(frozen=True)
class TrimResult:
    """What :func:`trim_history` kept, and the update that applies it to the state."""

    messages: list[BaseMessage]
    """The kept messages: the input objects, same ids, same order (plus synthetic
    repair results when ``on_invalid="repair"`` had to add some)."""
    removed_ids: tuple[str, ...]
    """Ids of input messages not kept, in input order."""
    tokens: int
    """Exact token count of ``messages`` as counted by the token counter (0 when
    ``messages`` is empty: nothing is sent)."""
    max_tokens: int
    """The budget that was asked for."""
    over_budget: bool
    """True only with ``on_overflow="keep_mandatory"`` when the mandatory part alone
    exceeds ``max_tokens`` (``messages`` is then that mandatory part)."""
    repair: tuple[BaseMessage, ...] = ()
    """The :func:`~langgraph_stm.repair_history` updates applied before trimming."""

    def update(self, *, messages_key: str = "messages") -> dict[str, Any]:
        """Return the graph state update that turns the input into :attr:`messages`.

        ``{messages_key: [RemoveMessage(id=...), ...]}`` for the removed ids (``{}``
        when nothing is removed); a full rewrite only when a repair had to insert a
        synthetic result.
        """
        if self.repair and self.repair[0].id == REMOVE_ALL_MESSAGES:
            return {messages_key: [RemoveMessage(id=REMOVE_ALL_MESSAGES), *self.messages]}
        if not self.removed_ids:
            return {}
        return {messages_key: [RemoveMessage(id=message_id) for message_id in self.removed_ids]}


def trim_history(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int,
    token_counter: TokenCounterLike | None = None,
    start_on: StartOn = "human",
    on_invalid: OnInvalid = "raise",
    repair_cause: RepairCause = "superseded",
    on_overflow: OnOverflow = "raise",
) -> TrimResult:
    """Keep the newest whole units of ``messages`` that fit ``max_tokens``.

    See the module docstring for what is kept. ``token_counter`` defaults to a shared
    :class:`TokenCounter` (``o200k_base``). Raises :class:`ToolPairError` for a
    history that breaks tool-pair integrity (unless ``on_invalid="repair"``),
    :class:`InvalidMessageError` for non-messages or missing ids,
    :class:`BudgetExceededError` when the mandatory messages (with the counter's
    per-call overhead) exceed the budget (unless ``on_overflow="keep_mandatory"``;
    never when there is no mandatory message) and :class:`InvalidArgumentError` for
    ``max_tokens <= 0`` or an unknown option.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> history = [HumanMessage("q1", id="h1"), AIMessage("a1", id="a1"),
        ...            HumanMessage("q2", id="h2"), AIMessage("a2", id="a2")]
        >>> result = trim_history(history, max_tokens=2, token_counter=len)
        >>> [m.id for m in result.messages], result.removed_ids, result.tokens
        (['h2', 'a2'], ('h1', 'a1'), 2)
        >>> [(type(u).__name__, u.id) for u in result.update()["messages"]]
        [('RemoveMessage', 'h1'), ('RemoveMessage', 'a1')]
        >>> trim_history([], max_tokens=1).messages  # nothing to trim, whatever the budget
        []
    """
    check_max_tokens(max_tokens)
    _check_options(start_on, on_invalid, repair_cause, on_overflow)
    meter = Meter(token_counter)
    working, repair = prepare(messages, on_invalid, repair_cause)
    original = list(messages) if repair else working
    units = group_units(working)
    facts = protected(units)
    mandatory = facts.mandatory

    must = [units[i] for i in sorted(mandatory)]
    required = meter.total(flatten(must))  # 0 when nothing is mandatory: never raises
    if required > max_tokens:
        if on_overflow == "raise":
            raise BudgetExceededError(
                f"the mandatory messages alone (ids {[m.id for m in flatten(must)]}: leading "
                "system message, pending tool-call unit, latest human message) need "
                f"{required} tokens, over max_tokens={max_tokens}; raise max_tokens, "
                "shorten them, or pass on_overflow='keep_mandatory'",
                required=required,
                max_tokens=max_tokens,
            )
        return _result(original, must, required, max_tokens, repair, over_budget=True)

    selected = set(mandatory)
    remaining = meter.budget_left(max_tokens, required, must)
    for index in range(len(units) - 1, -1, -1):
        if index in mandatory:
            continue
        cost = meter.cost(units[index].messages)
        if cost > remaining:
            break
        selected.add(index)
        remaining -= cost

    def shape(order: list[int]) -> list[int]:
        order = drop_promoted_notes(order, units, facts.leading)
        if start_on == "human" and facts.latest_human is not None:
            order = start_at_human(order, units, mandatory)
        return order

    order = shape(sorted(selected))
    while True:
        kept = [units[i] for i in order]
        tokens = meter.total(flatten(kept))
        if tokens <= max_tokens:
            return _result(original, kept, tokens, max_tokens, repair, over_budget=False)
        # Only reached with a counter that is not additive over units: drop the
        # oldest optional unit and check again (mandatory alone fits, checked above).
        oldest = next(i for i in order if i not in mandatory)
        order.remove(oldest)
        order = shape(order)


def _result(
    source: list[BaseMessage],
    kept_units: list[Unit],
    tokens: int,
    max_tokens: int,
    repair: list[BaseMessage],
    *,
    over_budget: bool,
) -> TrimResult:
    kept = flatten(kept_units)
    kept_ids = {m.id for m in kept}
    # Every source message has an id here (group_units checked); C-level filtering keeps
    # this cheap on long threads.
    removed = tuple(filterfalse(kept_ids.__contains__, map(_get_id, source)))
    return TrimResult(
        messages=kept,
        removed_ids=removed,
        tokens=tokens,
        max_tokens=max_tokens,
        over_budget=over_budget,
        repair=tuple(repair),
    )


class TrimNode(StateNode):
    """A graph node that trims the state's messages with reducer updates.

    It returns ``{messages_key: [RemoveMessage(id=...), ...]}`` for the dropped
    messages only (``{}`` when nothing has to go), so ids and order of the kept
    messages never change and LangGraph's ``add_messages`` applies it. Running it again
    on the state it produced returns ``{}``: safe to re-run on resume. Options are
    those of :func:`trim_history`, checked when the node is built.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langgraph.graph import START, StateGraph
        >>> from langgraph_stm import STMState
        >>> graph = (StateGraph(STMState)
        ...     .add_node(TrimNode(max_tokens=2, token_counter=len))
        ...     .add_edge(START, "trim").compile())
        >>> out = graph.invoke({"messages": [
        ...     HumanMessage("q1", id="h1"), AIMessage("a1", id="a1"),
        ...     HumanMessage("q2", id="h2"), AIMessage("a2", id="a2")]})
        >>> [m.id for m in out["messages"]]
        ['h2', 'a2']
    """

    def __init__(
        self,
        *,
        max_tokens: int,
        token_counter: TokenCounterLike | None = None,
        start_on: StartOn = "human",
        on_invalid: OnInvalid = "raise",
        repair_cause: RepairCause = "superseded",
        on_overflow: OnOverflow = "raise",
        messages_key: str = "messages",
        name: str = "trim",
    ) -> None:
        super().__init__(name=name)
        self.max_tokens = check_max_tokens(max_tokens)
        _check_options(start_on, on_invalid, repair_cause, on_overflow)
        self.token_counter = check_counter(token_counter)
        self.start_on: StartOn = start_on
        self.on_invalid: OnInvalid = on_invalid
        self.repair_cause: RepairCause = repair_cause
        self.on_overflow: OnOverflow = on_overflow
        self.messages_key = check_key("messages_key", messages_key)

    def __repr__(self) -> str:
        return f"TrimNode(max_tokens={self.max_tokens}, name={self.name!r})"

    def result(self, state: object) -> TrimResult:
        """Return the :class:`TrimResult` for ``state``."""
        values = read_state(state, f"TrimNode {self.name!r}", (self.messages_key,))
        return trim_history(
            messages_of(values, self.messages_key, f"TrimNode {self.name!r}"),
            max_tokens=self.max_tokens,
            token_counter=self.token_counter,
            start_on=self.start_on,
            on_invalid=self.on_invalid,
            repair_cause=self.repair_cause,
            on_overflow=self.on_overflow,
        )

    def run(self, state: Any, config: RunnableConfig | None) -> dict[str, Any]:
        """Return the state update that trims ``state``'s messages."""
        return self.result(state).update(messages_key=self.messages_key)
