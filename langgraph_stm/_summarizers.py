"""Summarizers: turn the previous summary plus newly evicted messages into a new one.

A summarizer receives a :class:`SummaryRequest` (the previous :class:`Summary`, the
messages to fold in, whole units in chronological order, and the structured state as
read-only context) and returns a :class:`SummaryDraft`: the summary text and the
structured fields extracted from what it covered. :func:`summarize_history` then turns
the draft into the stored :class:`Summary` (version, coverage record).

Two implementations ship:

- :class:`ExtractiveSummarizer`, the offline default: deterministic, no model. It keeps
  one tagged line per fact (user requests, decisions, completed work, one line per tool
  result, errors with their recovery, constraints) and drops the least important lines,
  oldest first, until the text fits ``max_summary_tokens``.
- :class:`~._model_summarizer.ChatModelSummarizer` (in :mod:`._model_summarizer`), for
  any LangChain ``BaseChatModel``: it asks for the
  structured fields with ``with_structured_output`` where the model supports it (as one
  JSON object in the prompt otherwise), validates the answer, asks again a bounded
  number of times, and raises :class:`SummarizationError` if it stays invalid.

Any object with ``summarize(request)`` and ``asummarize(request)`` methods (the
:class:`Summarizer` protocol) can be injected instead.

Example:
    >>> from langchain_core.messages import HumanMessage, AIMessage
    >>> request = SummaryRequest(messages=(
    ...     HumanMessage("Please migrate billing. Never email external domains.", id="h1"),
    ...     AIMessage("We decided to use the v2 schema.", id="a1"),
    ... ))
    >>> draft = ExtractiveSummarizer().summarize(request)
    >>> print(draft.text)
    Summary of the earlier conversation:
    - [constraint] Never email external domains.
    - [request] Please migrate billing.
    - [decision] We decided to use the v2 schema.
    >>> draft.constraints
    ('Never email external domains.',)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langgraph_stm._state import Constraint, PlanStep, Summary
from langgraph_stm._tokens import default_token_counter

__all__ = [
    "DEFAULT_MAX_SUMMARY_TOKENS",
    "MAX_CONSTRAINTS",
    "MAX_ITEMS",
    "ExtractiveSummarizer",
    "Summarizer",
    "SummaryDraft",
    "SummaryRequest",
    "dedupe",
    "default_text_counter",
    "message_text",
]

DEFAULT_MAX_SUMMARY_TOKENS = 600
"""Default bound of the summary text, in tokens."""

MAX_ITEMS = 20
"""Bound of each structured list of a summary (newest items are kept)."""

MAX_CONSTRAINTS = 50
"""Bound of the ``constraints`` list of a summary (oldest items are kept)."""

_HEADER = "Summary of the earlier conversation:"


def default_text_counter() -> Callable[[str], int]:
    """Return the exact text counter used to bound summaries (o200k_base, offline).

    Example:
        >>> default_text_counter()("hello world")
        2
    """
    return default_token_counter().count_text


@dataclass(frozen=True)
class SummaryRequest:
    """What a summarizer is asked to fold into the running summary."""

    messages: tuple[BaseMessage, ...]
    """The newly evicted messages: whole units, chronological, never empty in practice."""
    previous: Summary | None = None
    """The running summary so far; the new summary must carry its content forward."""
    goal: str | None = None
    """The task goal from the structured state (context only; it stays in ``goal``)."""
    plan: tuple[PlanStep, ...] = ()
    """The plan from the structured state (context only; it stays in ``plan``)."""
    constraints: tuple[Constraint, ...] = ()
    """The constraints from the structured state (context only)."""
    max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS
    """Bound of the summary text, counted with ``count_text``."""
    count_text: Callable[[str], int] = field(default_factory=default_text_counter)
    """Exact token counter for plain text."""


@dataclass(frozen=True)
class SummaryDraft:
    """A summarizer's answer: the text and the structured fields it extracted."""

    text: str
    """The new running summary text (previous content carried forward)."""
    goal: str | None = None
    """The goal as understood from the covered messages."""
    constraints: tuple[str, ...] = ()
    """Confirmed constraints found in the covered messages, verbatim."""
    completed_steps: tuple[str, ...] = ()
    """Work finished in the covered messages."""
    open_questions: tuple[str, ...] = ()
    """Questions raised and not answered yet."""
    errors: tuple[str, ...] = ()
    """Errors met, each with its recovery."""


@runtime_checkable
class Summarizer(Protocol):
    """Anything that folds a :class:`SummaryRequest` into a :class:`SummaryDraft`.

    Raise any exception to signal failure: the caller turns it into
    :class:`SummarizationError` and leaves the state untouched. Inside a graph run
    the answer is checkpointed as a LangGraph task, so a re-run node replays it
    instead of calling again; the summarizer itself needs no memo.
    """

    def summarize(self, request: SummaryRequest) -> SummaryDraft:
        """Return the new summary for ``request``."""
        ...

    async def asummarize(self, request: SummaryRequest) -> SummaryDraft:
        """Async twin of :meth:`summarize`."""
        ...


# --- text helpers ---------------------------------------------------------------------

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_CONSTRAINT = re.compile(
    r"\b(never|always|must|must not|do not|don't|only ever|under no circumstances)\b", re.I
)
_DECISION = re.compile(
    r"\b(decided|decide|decision|we will|i will|we'll|i'll|chose|choose|agreed|"
    r"going with|switch(?:ed)? to|instead of|approved)\b",
    re.I,
)
_DONE = re.compile(
    r"\b(done|completed?|finished|succeeded|migrated|deployed|created|fixed|resolved|"
    r"merged|shipped)\b",
    re.I,
)
_ERROR = re.compile(
    r"^\s*(error|exception|traceback)\b|\b(failed|failure|timed out|timeout|refused|"
    r"denied|unavailable|HTTP [45]\d\d)\b",
    re.I,
)
_LINE = re.compile(r"^- \[(\w+)\] (.*)$")

# Drop order when the text is over its bound: first tags first, oldest lines first.
_DROP_ORDER = ("tool", "request", "earlier", "done", "question", "decision", "error", "constraint")


def message_text(message: BaseMessage) -> str:
    """Return the plain text of a message, whitespace collapsed."""
    return " ".join(message.text.split())


def _brief(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] or text[:limit]
    return cut + "…"


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


def _is_error(message: ToolMessage) -> bool:
    return message.status == "error" or bool(_ERROR.search(message_text(message)[:200]))


def _args_brief(args: Mapping[str, Any]) -> str:
    parts = [f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in args.items()]
    return _brief(", ".join(parts), 80)


def clip_text(text: str, max_tokens: int, count_text: Callable[[str], int]) -> str:
    """Return ``text`` cut (at a character boundary, deterministically) to ``max_tokens``.

    Example:
        >>> clip_text("one two three four", 2, lambda s: len(s.split()))
        'one two'
    """
    if count_text(text) <= max_tokens:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count_text(text[:middle].rstrip()) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low].rstrip()


def dedupe(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(item for item in items if item))


# --- the offline summarizer -------------------------------------------------------------


@dataclass
class _Extraction:
    lines: list[tuple[str, str]] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    first_request: str | None = None


class ExtractiveSummarizer:
    """The deterministic offline summarizer: one tagged line per fact, no model.

    From the new messages it extracts user requests and constraints (sentences with
    *never*, *always*, *must*, *do not*... kept verbatim), assistant decisions and
    completed work, one line per tool result, and each tool error with its recovery
    (the assistant's next words, or the retry that succeeded). Lines of the previous
    summary are carried forward; when the text exceeds ``max_summary_tokens``, tool
    lines go first, then requests, completed work, questions, decisions, errors and
    constraints last, oldest first within each kind. Same input, same output.

    Example:
        >>> from langchain_core.messages import AIMessage, ToolMessage
        >>> call = AIMessage("", id="a1", tool_calls=[
        ...     {"name": "billing_api", "args": {"op": "export"}, "id": "c1"}])
        >>> failed = ToolMessage("HTTP 503 Service Unavailable", tool_call_id="c1", id="t1")
        >>> note = AIMessage("The API is down; I will retry with backoff.", id="a2")
        >>> draft = ExtractiveSummarizer().summarize(SummaryRequest((call, failed, note)))
        >>> draft.errors
        ('billing_api failed: HTTP 503 Service Unavailable; recovery: The API is down; I will retry with backoff.',)
    """  # noqa: E501

    def summarize(self, request: SummaryRequest) -> SummaryDraft:
        """Return the new summary: previous lines plus the new facts, within the bound."""
        previous = request.previous
        found = _extract(request.messages)
        old_lines = _parse_lines(previous["text"]) if previous else []
        lines = _dedupe_lines([*old_lines, *found.lines])
        text = _compact(lines, request.max_summary_tokens, request.count_text)
        prev_constraints = list(previous.get("constraints") or []) if previous else []
        prev_completed = list(previous.get("completed_steps") or []) if previous else []
        prev_errors = list(previous.get("errors") or []) if previous else []
        prev_questions = list(previous.get("open_questions") or []) if previous else []
        talked = any(
            isinstance(m, HumanMessage | AIMessage) and message_text(m) for m in request.messages
        )
        questions = found.questions if talked else [*prev_questions, *found.questions]
        prev_goal = previous.get("goal") if previous else None
        return SummaryDraft(
            text=text,
            goal=request.goal or prev_goal or found.first_request,
            constraints=tuple(dedupe([*prev_constraints, *found.constraints])[:MAX_CONSTRAINTS]),
            completed_steps=tuple(dedupe([*prev_completed, *found.completed])[-MAX_ITEMS:]),
            open_questions=tuple(dedupe(questions)[-MAX_ITEMS:]),
            errors=tuple(dedupe([*prev_errors, *found.errors])[-MAX_ITEMS:]),
        )

    async def asummarize(self, request: SummaryRequest) -> SummaryDraft:
        """Async twin of :meth:`summarize` (pure computation, no I/O)."""
        return self.summarize(request)


def _extract(messages: Sequence[BaseMessage]) -> _Extraction:
    found = _Extraction()
    calls: dict[str, tuple[str, str]] = {}  # tool_call_id -> (name, args brief)
    open_errors: dict[str, str] = {}  # tool name -> error brief, awaiting a recovery

    def recover(name: str, how: str) -> None:
        error = open_errors.pop(name)
        line = f"{name} failed: {error}; recovery: {how}"
        found.lines.append(("error", line))
        found.errors.append(line)

    for index, message in enumerate(messages):
        text = message_text(message)
        if isinstance(message, ToolMessage):
            name, args = calls.get(message.tool_call_id, (message.name or "tool", ""))
            if _is_error(message):
                open_errors[name] = _brief(text, 120)
            elif name in open_errors:
                recover(name, f"retried {name}({args}) -> {_brief(text, 80)}")
            else:
                found.lines.append(("tool", f"{name}({args}) -> {_brief(text, 100)}"))
            continue
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                calls[call["id"] or ""] = (call["name"], _args_brief(call["args"]))
            if not text:
                continue
            if open_errors:  # the assistant's next words after a failure: its recovery
                for name in list(open_errors):
                    recover(name, _brief(text, 160))
                continue
            for sentence in _sentences(text):
                if _DECISION.search(sentence):
                    found.lines.append(("decision", _brief(sentence, 200)))
                elif _DONE.search(sentence):
                    found.lines.append(("done", _brief(sentence, 160)))
                    found.completed.append(_brief(sentence, 160))
            found.questions.extend(
                _brief(q, 160) for q in _open_questions(text, messages[index + 1 :], HumanMessage)
            )
            continue
        if isinstance(message, HumanMessage):
            request_parts: list[str] = []
            for sentence in _sentences(text):
                if _CONSTRAINT.search(sentence):
                    found.lines.append(("constraint", sentence))
                    found.constraints.append(sentence)
                else:
                    request_parts.append(sentence)
            if request_parts:
                brief = _brief(" ".join(request_parts), 200)
                found.lines.append(("request", brief))
                found.first_request = found.first_request or brief
            found.questions.extend(
                _brief(q, 160) for q in _open_questions(text, messages[index + 1 :], AIMessage)
            )
            continue
        if isinstance(message, SystemMessage) and text:
            found.lines.append(("earlier", f"system note: {_brief(text, 120)}"))
    for name in list(open_errors):
        line = f"{name} failed: {open_errors.pop(name)}; no recovery yet"
        found.lines.append(("error", line))
        found.errors.append(line)
    return found


def _open_questions(
    text: str, later: Sequence[BaseMessage], answerer: type[BaseMessage]
) -> list[str]:
    if any(isinstance(m, answerer) and message_text(m) for m in later):
        return []
    return [s for s in _sentences(text) if s.endswith("?")]


def _parse_lines(text: str) -> list[tuple[str, str]]:
    lines: list[tuple[str, str]] = []
    for raw in text.splitlines():
        raw = raw.strip()
        if not raw or raw == _HEADER:
            continue
        match = _LINE.match(raw)
        if match and match.group(1) in _DROP_ORDER:
            lines.append((match.group(1), match.group(2)))
        else:
            lines.append(("earlier", raw.removeprefix("- ")))
    return lines


def _dedupe_lines(lines: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    return list(dict.fromkeys(lines))


def _render(lines: Sequence[tuple[str, str]]) -> str:
    return "\n".join([_HEADER, *(f"- [{tag}] {body}" for tag, body in lines)])


def _compact(
    lines: list[tuple[str, str]], max_tokens: int, count_text: Callable[[str], int]
) -> str:
    """Drop lines by :data:`_DROP_ORDER`, oldest first, until the text fits."""
    sizes = [count_text(f"- [{tag}] {body}") + 1 for tag, body in lines]
    budget = max_tokens - count_text(_HEADER)
    keep = [True] * len(lines)
    total = sum(sizes)
    order = sorted(
        range(len(lines)), key=lambda i: (_DROP_ORDER.index(lines[i][0]), i)
    )  # least important, oldest first
    for position in order:
        if total <= budget:
            break
        keep[position] = False
        total -= sizes[position]
    kept = [line for line, flag in zip(lines, keep, strict=True) if flag]
    text = _render(kept)
    while kept and count_text(text) > max_tokens:  # per-line sums are close, not exact
        victim = min(range(len(kept)), key=lambda i: (_DROP_ORDER.index(kept[i][0]), i))
        del kept[victim]
        text = _render(kept)
    return clip_text(text, max_tokens, count_text)
