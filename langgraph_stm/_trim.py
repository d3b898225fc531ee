"""Tool-pair-safe trimming: :func:`trim_history`, :func:`plan_trim` and :class:`TrimNode`.

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
    ...     trimmed = trim_history(
    ...         history, max_tokens=budget, token_counter=len, start_on=start_on)
    ...     return [m.id for m in trimmed]
    >>> kept(5)  # the 3-message tool unit does not fit in the 2 tokens left: dropped whole
    ['s', 'ai2', 'h2']
    >>> kept(6)
    ['s', 'ai1', 'ta', 'tb', 'ai2', 'h2']
    >>> kept(6, start_on="human")  # the window must start at a human turn
    ['s', 'h2']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import filterfalse
from operator import attrgetter
from typing import Any, Literal, get_args

from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, SystemMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langgraph_stm._errors import BudgetExceededError, InvalidArgumentError, InvalidMessageError
from langgraph_stm._tokens import (
    REPLY_PRIMING,
    TokenCounter,
    TokenCounterLike,
    default_token_counter,
)
from langgraph_stm._units import Unit, group_units, repair_history

__all__ = [
    "OnInvalid",
    "OnOverflow",
    "StartOn",
    "TrimNode",
    "TrimResult",
    "plan_trim",
    "trim_history",
]

StartOn = Literal["human", "any"]
"""Where the kept window after the system message may start: at a HumanMessage, or anywhere."""
OnInvalid = Literal["raise", "repair"]
"""What to do with a history that breaks tool-pair integrity: raise ToolPairError, or repair it."""
OnOverflow = Literal["raise", "keep_mandatory"]
"""What to do when the mandatory part exceeds the budget: raise, or keep it and flag it."""

_get_id = attrgetter("id")


def check_max_tokens(max_tokens: object) -> int:
    """Return ``max_tokens`` if it is a positive int, else raise InvalidArgumentError."""
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
        raise InvalidArgumentError(f"max_tokens must be a positive int, got {max_tokens!r}")
    return max_tokens


def check_choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    """Raise InvalidArgumentError unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise InvalidArgumentError(f"{name} must be one of {list(allowed)}, got {value!r}")


class Meter:
    """Prices units and checks lists with a token counter (internal, shared with context).

    A unit's price is its *marginal* cost: what it adds to a list, without the
    counter's per-call overhead (:attr:`overhead`, charged once per list). With a
    plain :class:`TokenCounter` that is the sum of its cached per-message counts and
    the overhead is :data:`REPLY_PRIMING`, exactly what the counter returns. Any other
    counter is called on each unit and the overhead ``counter([])`` (computed once) is
    subtracted; the final list is always checked with the counter itself.

    An empty list is no model call: :meth:`total` prices it at 0.
    """

    def __init__(self, counter: TokenCounterLike | None) -> None:
        counter = default_token_counter() if counter is None else counter
        if not callable(counter):
            raise InvalidArgumentError(
                "token_counter must be a callable taking a list of messages, "
                f"got {type(counter).__name__}"
            )
        self.counter = counter
        self._exact: TokenCounter | None = (
            counter
            if isinstance(counter, TokenCounter) and type(counter).__call__ is TokenCounter.__call__
            else None
        )
        self._overhead: int | None = REPLY_PRIMING if self._exact is not None else None

    @property
    def overhead(self) -> int:
        """The counter's per-call overhead, ``counter([])``, computed on first use."""
        if self._overhead is None:
            self._overhead = self._checked(self.counter([]))
        return self._overhead

    def cost(self, messages: Sequence[BaseMessage]) -> int:
        """Return the tokens ``messages`` add to a list (a whole unit, or one message)."""
        if self._exact is not None:
            return sum(map(self._exact.count_message, messages))
        if not messages:
            return 0
        return max(self._checked(self.counter(list(messages))) - self.overhead, 0)

    def total(self, messages: list[BaseMessage]) -> int:
        """Return the exact count of ``messages`` as one model input (0 for no message)."""
        if not messages:
            return 0
        if self._exact is not None:
            return REPLY_PRIMING + sum(map(self._exact.count_message, messages))
        return self._checked(self.counter(messages))

    def budget_left(self, max_tokens: int, required: int, mandatory: Sequence[object]) -> int:
        """What is left of ``max_tokens`` for marginal costs once ``mandatory`` is in.

        ``required`` is the total of the mandatory messages; with none, the list does
        not exist yet and the first unit added brings the per-call overhead with it.
        """
        return max_tokens - (required if mandatory else self.overhead)

    def _checked(self, count: object) -> int:
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise InvalidArgumentError(
                f"token_counter {self.counter!r} must return a non-negative int, got {count!r}"
            )
        return count


def flatten(units: Sequence[Unit]) -> list[BaseMessage]:
    """Return the messages of ``units``, in order."""
    return [message for unit in units for message in unit.messages]


def messages_of(state: object, key: str) -> list[BaseMessage]:
    """Return the list stored under ``key`` of a dict-like or attribute state."""
    if isinstance(state, Mapping):
        if key not in state:
            raise InvalidMessageError(f"the state has no {key!r} key; pass messages_key=")
        value = state[key]
    elif hasattr(state, key):
        value = getattr(state, key)
    else:
        raise InvalidMessageError(
            f"expected a state mapping with a {key!r} key, got {type(state).__name__}"
        )
    return as_message_list(value, key)


def as_message_list(value: object, name: str = "messages") -> list[BaseMessage]:
    """Return ``value`` as a list, or raise InvalidMessageError if it is not a sequence."""
    if value is None:
        return []
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise InvalidMessageError(
            f"{name} must be a list of LangChain messages, got {type(value).__name__}"
        )
    return list(value)


def apply_updates(messages: list[BaseMessage], updates: list[BaseMessage]) -> list[BaseMessage]:
    """Apply ``repair_history`` updates the way ``add_messages`` would."""
    if updates and updates[0].id == REMOVE_ALL_MESSAGES:
        return list(updates[1:])
    removed = {update.id for update in updates}
    return [m for m in messages if m.id not in removed]


def drop_promoted_notes(order: list[int], units: Sequence[Unit], leading: bool) -> list[int]:
    """Drop mid-history SystemMessage notes that eviction would bring to the window's head.

    Only the first message of the *input* is the leading system message (``leading``
    says whether ``units[0]`` is one, kept first). A later ``SystemMessage`` (a note)
    must not become first after the units before it were evicted: a later trim would
    take it for the leading system message, and providers would read it as part of
    the system prompt (it would also sit right after the leading one, where providers
    merge consecutive system messages). So a note heading the window goes with the
    units before it, unless nothing before it was evicted (it already headed the
    window in the input).
    """
    first = 1 if leading else 0
    result = list(order)
    while (
        len(result) > first
        and result[first] != first
        and isinstance(units[result[first]].head, SystemMessage)
    ):
        del result[first]
    return result


def start_at_human(order: list[int], units: Sequence[Unit], mandatory: set[int]) -> list[int]:
    """Drop optional units from the front of ``order`` until a HumanMessage heads it."""
    result: list[int] = []
    started = False
    for index in order:
        head = units[index].head
        if index == 0 and isinstance(head, SystemMessage) and index in mandatory:
            result.append(index)
            continue
        if not started:
            if not isinstance(head, HumanMessage) and index not in mandatory:
                continue
            started = True
        result.append(index)
    return result


@dataclass(frozen=True)
class TrimResult:
    """What :func:`plan_trim` decided, with the updates that apply it to the state."""

    messages: tuple[BaseMessage, ...]
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
    """The :func:`repair_history` updates applied before trimming (empty if none)."""

    def updates(self) -> list[BaseMessage]:
        """Return the ``add_messages`` updates that turn the input into ``messages``.

        Usually ``RemoveMessage(id=...)`` for each removed id (``[]`` if nothing is
        removed); a full rewrite only when a repair had to insert a synthetic result.
        """
        if self.repair and self.repair[0].id == REMOVE_ALL_MESSAGES:
            return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *self.messages]
        return [RemoveMessage(id=message_id) for message_id in self.removed_ids]


def plan_trim(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int,
    token_counter: TokenCounterLike | None = None,
    start_on: StartOn = "human",
    on_invalid: OnInvalid = "raise",
    on_overflow: OnOverflow = "raise",
) -> TrimResult:
    """Decide what to keep of ``messages`` within ``max_tokens``; see the module docstring.

    ``token_counter`` defaults to a shared :class:`TokenCounter` (``o200k_base``).
    Raises :class:`ToolPairError` for a history that breaks tool-pair integrity
    (unless ``on_invalid="repair"``), :class:`InvalidMessageError` for non-messages
    or missing ids, :class:`BudgetExceededError` when the mandatory messages (with the
    counter's per-call overhead) exceed the budget (unless
    ``on_overflow="keep_mandatory"``; never when there is no mandatory message) and
    :class:`InvalidArgumentError` for ``max_tokens <= 0`` or an unknown option.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> history = [HumanMessage("q1", id="h1"), AIMessage("a1", id="a1"),
        ...            HumanMessage("q2", id="h2"), AIMessage("a2", id="a2")]
        >>> result = plan_trim(history, max_tokens=2, token_counter=len)
        >>> result.removed_ids, result.tokens, result.over_budget
        (('h1', 'a1'), 2, False)
        >>> [(type(update).__name__, update.id) for update in result.updates()]
        [('RemoveMessage', 'h1'), ('RemoveMessage', 'a1')]
        >>> plan_trim([], max_tokens=1).messages  # nothing to trim, whatever the budget
        ()
    """
    check_max_tokens(max_tokens)
    check_choice("start_on", start_on, get_args(StartOn))
    check_choice("on_invalid", on_invalid, get_args(OnInvalid))
    check_choice("on_overflow", on_overflow, get_args(OnOverflow))
    source = as_message_list(messages)
    meter = Meter(token_counter)
    repair: list[BaseMessage] = []
    working = source
    if on_invalid == "repair":
        repair = repair_history(source)
        working = apply_updates(source, repair)
    units = group_units(working)

    n = len(units)
    mandatory: set[int] = set()
    # Only the input's first message can be the leading system message.
    leading = bool(n) and isinstance(units[0].head, SystemMessage)
    if leading:
        mandatory.add(0)
    if n and units[-1].pending:
        mandatory.add(n - 1)
    latest_human = next(
        (i for i in range(n - 1, -1, -1) if isinstance(units[i].head, HumanMessage)), None
    )
    if latest_human is not None:
        mandatory.add(latest_human)

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
        return _result(source, must, required, max_tokens, repair, over_budget=True)

    selected = set(mandatory)
    remaining = meter.budget_left(max_tokens, required, must)
    for index in range(n - 1, -1, -1):
        if index in mandatory:
            continue
        cost = meter.cost(units[index].messages)
        if cost > remaining:
            break
        selected.add(index)
        remaining -= cost

    def shape(order: list[int]) -> list[int]:
        order = drop_promoted_notes(order, units, leading)
        if start_on == "human" and latest_human is not None:
            order = start_at_human(order, units, mandatory)
        return order

    order = shape(sorted(selected))
    while True:
        kept = [units[i] for i in order]
        tokens = meter.total(flatten(kept))
        if tokens <= max_tokens:
            return _result(source, kept, tokens, max_tokens, repair, over_budget=False)
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
        messages=tuple(kept),
        removed_ids=removed,
        tokens=tokens,
        max_tokens=max_tokens,
        over_budget=over_budget,
        repair=tuple(repair),
    )


def trim_history(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int,
    token_counter: TokenCounterLike | None = None,
    start_on: StartOn = "human",
    on_invalid: OnInvalid = "raise",
    on_overflow: OnOverflow = "raise",
) -> list[BaseMessage]:
    """Return the messages to keep so that ``messages`` fits ``max_tokens``, whole units only.

    The kept messages are the input objects, with their ids, in their order. See the
    module docstring for what is kept, and :func:`plan_trim` (same arguments) for the
    errors and for a result that also says what was removed.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> history = [
        ...     HumanMessage("book it", id="h1"),
        ...     AIMessage("", id="a1", tool_calls=[
        ...         {"name": "book", "args": {"day": "mon"}, "id": "c1"}]),
        ... ]
        >>> [m.id for m in trim_history(history, max_tokens=100, token_counter=len)]
        ['h1', 'a1']
    """
    result = plan_trim(
        messages,
        max_tokens=max_tokens,
        token_counter=token_counter,
        start_on=start_on,
        on_invalid=on_invalid,
        on_overflow=on_overflow,
    )
    return list(result.messages)


class TrimNode:
    """A graph node that trims the state's messages with reducer updates.

    It returns ``{messages_key: [RemoveMessage(id=...), ...]}`` for the dropped
    messages only (``{}`` when nothing has to go), so ids and order of the kept
    messages never change and LangGraph's ``add_messages`` applies it. Running it again
    on the state it produced returns ``{}``: safe to re-run on resume. Arguments are
    those of :func:`plan_trim`; they are checked when the node is built.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langgraph.graph import START, StateGraph
        >>> from langgraph_stm import STMState
        >>> graph = (StateGraph(STMState)
        ...     .add_node("trim", TrimNode(max_tokens=2, token_counter=len))
        ...     .add_edge(START, "trim").compile())
        >>> out = graph.invoke({"messages": [
        ...     HumanMessage("q1", id="h1"), AIMessage("a1", id="a1"),
        ...     HumanMessage("q2", id="h2"), AIMessage("a2", id="a2")]})
        >>> [m.id for m in out["messages"]]
        ['h2', 'a2']
    """

    def __init__(
        self,
        max_tokens: int,
        *,
        token_counter: TokenCounterLike | None = None,
        messages_key: str = "messages",
        start_on: StartOn = "human",
        on_invalid: OnInvalid = "raise",
        on_overflow: OnOverflow = "raise",
    ) -> None:
        self.max_tokens = check_max_tokens(max_tokens)
        check_choice("start_on", start_on, get_args(StartOn))
        check_choice("on_invalid", on_invalid, get_args(OnInvalid))
        check_choice("on_overflow", on_overflow, get_args(OnOverflow))
        self.token_counter = Meter(token_counter).counter
        self.messages_key = messages_key
        self.start_on: StartOn = start_on
        self.on_invalid: OnInvalid = on_invalid
        self.on_overflow: OnOverflow = on_overflow

    def __repr__(self) -> str:
        return f"TrimNode(max_tokens={self.max_tokens}, messages_key={self.messages_key!r})"

    def plan(self, state: object) -> TrimResult:
        """Return the :class:`TrimResult` for ``state`` without building the update."""
        return plan_trim(
            messages_of(state, self.messages_key),
            max_tokens=self.max_tokens,
            token_counter=self.token_counter,
            start_on=self.start_on,
            on_invalid=self.on_invalid,
            on_overflow=self.on_overflow,
        )

    def __call__(self, state: object) -> dict[str, Any]:
        """Return the state update that trims ``state``'s messages."""
        updates = self.plan(state).updates()
        return {self.messages_key: updates} if updates else {}
