"""The rules trim, summarize, context and approval share, each in one place.

- **Options**: :func:`check_max_tokens`, :func:`check_positive`, :func:`check_choice`,
  :func:`check_counter`; every function and node calls them, a node when it is built.
- **Reading a state**: :func:`read_state` and :func:`messages_of`, one error for a
  state of the wrong shape or without its messages key.
- **A history made valid or refused**: :func:`prepare` honours ``on_invalid`` the same
  way for every feature (``"raise"``: the same :class:`ToolPairError`; ``"repair"``:
  the same :func:`repair_history` updates).
- **What is protected from eviction**: :func:`protected` (the leading
  ``SystemMessage``, the pending unit, the latest ``HumanMessage``'s unit, and the
  newest unit that is not a ``SystemMessage``).
- **The leading system message**: only the input's first message is one, and a
  mid-history ``SystemMessage`` (a note) never becomes first after eviction:
  :func:`drop_promoted_notes`.
- **Pricing with a token counter**: :class:`Meter`.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    >>> from langgraph_stm._units import group_units
    >>> working, repair = prepare(
    ...     [SystemMessage("s", id="s"), HumanMessage("q", id="h1"), AIMessage("a", id="a1")],
    ...     "raise")
    >>> p = protected(group_units(working))
    >>> p.leading, p.latest_human, p.pending, p.mandatory
    (True, 1, None, frozenset({0, 1}))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from pydantic import BaseModel

from langgraph_stm._errors import InvalidArgumentError, InvalidMessageError
from langgraph_stm._tokens import (
    REPLY_PRIMING,
    TokenCounter,
    TokenCounterLike,
    default_token_counter,
)
from langgraph_stm._units import RepairCause, Unit, repair_updates

__all__ = [
    "Meter",
    "OnInvalid",
    "OnOverflow",
    "Protected",
    "StartOn",
    "as_message_list",
    "check_choice",
    "check_counter",
    "check_history_options",
    "check_key",
    "check_max_tokens",
    "check_positive",
    "drop_promoted_notes",
    "flatten",
    "messages_of",
    "prepare",
    "protected",
    "read_state",
    "start_at_human",
]

StartOn = Literal["human", "any"]
"""Where the kept window after the system message may start: at a HumanMessage, or anywhere."""
OnInvalid = Literal["raise", "repair"]
"""What to do with a history that breaks tool-pair integrity: raise ToolPairError, or repair it."""
OnOverflow = Literal["raise", "keep_mandatory"]
"""What to do when the mandatory part exceeds the budget: raise, or keep it and flag it."""


# -- options -------------------------------------------------------------------------------
def check_positive(name: str, value: object) -> int:
    """Return ``value`` if it is a positive int, else raise InvalidArgumentError."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InvalidArgumentError(f"{name} must be a positive int, got {value!r}")
    return value


def check_max_tokens(max_tokens: object) -> int:
    """Return ``max_tokens`` if it is a positive int, else raise InvalidArgumentError."""
    return check_positive("max_tokens", max_tokens)


def check_choice(name: str, value: object, allowed: tuple[str, ...] | Any) -> None:
    """Raise InvalidArgumentError unless ``value`` is one of ``allowed`` (a tuple, or a
    ``Literal`` type whose arguments are the choices)."""
    choices = allowed if isinstance(allowed, tuple) else get_args(allowed)
    if value not in choices:
        raise InvalidArgumentError(f"{name} must be one of {list(choices)}, got {value!r}")


def check_key(name: str, value: object) -> str:
    """Return ``value`` if it is a non-empty string (a state key), else raise."""
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"{name} must be a non-empty string, got {value!r}")
    return value


def check_history_options(on_invalid: object, repair_cause: object) -> None:
    """Check ``on_invalid`` and ``repair_cause``, the options every history feature takes."""
    check_choice("on_invalid", on_invalid, OnInvalid)
    check_choice("repair_cause", repair_cause, RepairCause)


def check_counter(counter: object) -> TokenCounterLike:
    """Return ``counter`` (the shared :class:`TokenCounter` for ``None``) if callable."""
    if counter is None:
        return default_token_counter()
    if not callable(counter):
        raise InvalidArgumentError(
            "token_counter must be a callable taking a list of messages, "
            f"got {type(counter).__name__}"
        )
    return counter


# -- reading a state -----------------------------------------------------------------------
def read_state(state: object, node: str, keys: Sequence[str] = ()) -> Mapping[str, Any]:
    """Return a graph state as a mapping: a mapping (``TypedDict`` state) as is, a
    pydantic model or a dataclass (a graph whose schema is one) field by field, any
    other object by the attributes among ``keys`` it has.

    Raises :class:`InvalidArgumentError` naming ``node`` for anything else.

    Example:
        >>> read_state({"goal": "g"}, "trim")["goal"]
        'g'
    """
    if isinstance(state, Mapping):
        return state
    if isinstance(state, BaseModel):
        return {name: getattr(state, name) for name in type(state).model_fields}
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    found = {key: getattr(state, key) for key in keys if hasattr(state, key)}
    if found:
        return found
    raise InvalidArgumentError(
        f"{node}: the state must be a mapping (TypedDict), a pydantic model or a "
        f"dataclass, got {type(state).__name__}"
    )


def messages_of(state: Mapping[str, Any], key: str, node: str) -> list[BaseMessage]:
    """Return the message list under ``key`` of a state read by :func:`read_state`."""
    if key not in state:
        raise InvalidArgumentError(
            f"{node}: the state has no {key!r} key (keys: {sorted(map(str, state))}); "
            "pass messages_key= to name the key that holds the messages"
        )
    return as_message_list(state[key], key)


def as_message_list(value: object, name: str = "messages") -> list[BaseMessage]:
    """Return ``value`` as a list, or raise InvalidMessageError if it is not a sequence."""
    if value is None:
        return []
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise InvalidMessageError(
            f"{name} must be a list of LangChain messages, got {type(value).__name__}"
        )
    return list(value)


# -- a valid history -----------------------------------------------------------------------
def prepare(
    messages: object, on_invalid: OnInvalid, cause: RepairCause = "superseded"
) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """Return ``(working history, repair updates)`` for ``on_invalid``.

    ``"raise"`` leaves the history as it is (grouping it then raises the one
    :class:`ToolPairError` every feature raises); ``"repair"`` applies
    :func:`repair_history`'s updates to a copy, a dangling call's synthetic result
    telling ``cause``, and returns them too.
    """
    source = as_message_list(messages)
    if on_invalid == "raise":
        return source, []
    updates = repair_updates(source, cause=cause)
    if updates and updates[0].id == REMOVE_ALL_MESSAGES:
        return list(updates[1:]), updates
    removed = {update.id for update in updates}
    return [m for m in source if m.id not in removed], updates


# -- what eviction must keep ---------------------------------------------------------------
@dataclass(frozen=True)
class Protected:
    """Unit indexes of a history that eviction treats specially."""

    leading: bool
    """Whether unit 0 is the leading ``SystemMessage`` (only the input's first message)."""
    pending: int | None
    """The pending unit (tool calls awaiting an approval ``interrupt()``): always last."""
    latest_human: int | None
    """The unit of the latest ``HumanMessage``."""
    newest_turn: int | None
    """The newest unit that is not a ``SystemMessage``."""

    @property
    def mandatory(self) -> frozenset[int]:
        """What every feature keeps whatever the budget: leading system, pending unit,
        latest human message."""
        kept = {0} if self.leading else set()
        kept.update(i for i in (self.pending, self.latest_human) if i is not None)
        return frozenset(kept)

    @property
    def first_protected(self) -> int | None:
        """The first unit a prefix eviction (summarize) must stop at: pending, latest
        human, or the newest non-system unit (what is kept is then never only notes)."""
        stops = [i for i in (self.pending, self.latest_human, self.newest_turn) if i is not None]
        return min(stops) if stops else None


def protected(units: Sequence[Unit]) -> Protected:
    """Return the :class:`Protected` facts of ``units`` (see :func:`group_units`)."""
    n = len(units)
    latest_human = next((i for i in range(n - 1, -1, -1) if _is(units[i], HumanMessage)), None)
    newest_turn = next((i for i in range(n - 1, -1, -1) if not _is(units[i], SystemMessage)), None)
    return Protected(
        leading=bool(n) and _is(units[0], SystemMessage),
        pending=n - 1 if n and units[-1].pending else None,
        latest_human=latest_human,
        newest_turn=newest_turn,
    )


def _is(unit: Unit, kind: type[BaseMessage]) -> bool:
    return isinstance(unit.head, kind)


def drop_promoted_notes(order: list[int], units: Sequence[Unit], leading: bool) -> list[int]:
    """Drop mid-history SystemMessage notes that eviction would bring to the window's head.

    ``order`` lists the kept unit indexes, ascending. Only the first message of the
    *input* is the leading system message (``leading``: ``units[0]`` is one, kept
    first). A later ``SystemMessage`` (a note) must not become first once the units
    before it are evicted: a later pass would take it for the leading system message,
    and providers would read it as part of the system prompt. So a note heading the
    window goes with the units before it, unless nothing before it was evicted.
    """
    first = 1 if leading else 0
    result = list(order)
    while len(result) > first and result[first] != first:
        if not _is(units[result[first]], SystemMessage):
            break
        del result[first]
    return result


def start_at_human(order: list[int], units: Sequence[Unit], mandatory: frozenset[int]) -> list[int]:
    """Drop optional units from the front of ``order`` until a HumanMessage heads it."""
    result: list[int] = []
    started = False
    for index in order:
        if index == 0 and index in mandatory and _is(units[index], SystemMessage):
            result.append(index)
            continue
        if not started:
            if not _is(units[index], HumanMessage) and index not in mandatory:
                continue
            started = True
        result.append(index)
    return result


def flatten(units: Sequence[Unit]) -> list[BaseMessage]:
    """Return the messages of ``units``, in order."""
    return [message for unit in units for message in unit.messages]


# -- pricing -------------------------------------------------------------------------------
class Meter:
    """Prices units and checks lists with a token counter.

    A unit's price is its *marginal* cost: what it adds to a list, without the
    counter's per-call overhead (:attr:`overhead`, charged once per list). With a
    plain :class:`TokenCounter` that is the sum of its cached per-message counts and
    the overhead is :data:`REPLY_PRIMING`, exactly what the counter returns. Any other
    counter is called on each unit and the overhead ``counter([])`` (computed once) is
    subtracted; the final list is always checked with the counter itself.

    An empty list is no model call: :meth:`total` prices it at 0.
    """

    def __init__(self, counter: TokenCounterLike | None) -> None:
        self.counter = check_counter(counter)
        exact = self.counter
        self._exact: TokenCounter | None = (
            exact
            if isinstance(exact, TokenCounter) and type(exact).__call__ is TokenCounter.__call__
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
