"""Redaction before write (``STMSaver(..., redact=True)`` or ``redact=Redactor(...)``).

Secrets that users paste into a chat or tools print (API keys, tokens, passwords, private
keys, card numbers) are replaced by a typed marker such as ``[REDACTED:api_key]`` in
everything the saver hands to storage:

- ``put``/``aput``: a copy of the checkpoint's ``channel_values`` (every channel: message
  lists, the structured fields ``goal``, ``plan``, ``constraints``, ``artifacts``,
  ``last_error``, ``summary`` and any other str/dict/list value) and the string values of
  ``metadata``; the projection and our message rows are computed from that copy, so they
  are redacted too;
- ``put_writes``/``aput_writes``: a copy of every pending write's value (a task's messages,
  structured updates, ``interrupt()`` values, ``Command(resume=...)`` values, ``Send``
  arguments).

In a message: ``content`` (a string, or content blocks: every string inside them, nested
dicts and lists included), ``additional_kwargs`` (e.g. OpenAI ``function_call.arguments``
strings), ``response_metadata``, ``tool_calls`` (the args, nested), ``invalid_tool_calls``
and a ``ToolMessage``'s ``artifact``. Ids, names, types and ``tool_call_id`` are kept.
Dict keys are never changed; a dict value whose key names a secret (``password``,
``passwd``, ``pwd``, ``passphrase``, ``*secret``) is replaced whole by the
``password`` marker. Objects of other types (exceptions, custom classes) pass unchanged.

**Never the live objects.** What changes is copied (a message through
``model_copy(update=...)``, keeping its id; dicts, lists and tuples rebuilt); the
objects the graph holds are untouched. So the *live* run, before its next checkpoint
is read back, still sees the secret (a node later in the same run can use the key the
user pasted). A run that **resumes** from storage (after ``interrupt()``, in another
process, or any later invocation on the thread, which starts from the stored
checkpoint) sees the stored, redacted state: the model then reads
``[REDACTED:api_key]`` where the key was, and a tool that needed it must get it from
elsewhere (a secret store, the run's config), never from the thread's memory. Likewise
a ``Command(resume=...)`` value reaches the resumed node as given, but is stored
redacted: a node that calls ``interrupt()`` several times gets the earlier answers back
from storage on a later resume, redacted. After an ``interrupt()``, the interrupt's
value shown to the caller (``graph.get_state(config).interrupts``) is the stored one.

**Counts.** The metadata of each checkpoint whose stored state holds redaction markers
gets ``stm_redactions``: how many it holds (channel values and metadata), whether
redacted by this write or by an earlier one (the resumed state already holds markers);
a checkpoint without markers gets no key, so its metadata is what it would be
without redaction.
:meth:`Redaction.redaction_count` reads it from the thread's latest root checkpoint.
It is a count of the state, not a running total of writes: the live state re-sends
its secrets with every checkpoint of a run, so a sum over checkpoints would count one
secret many times; a message trimmed or summarized away leaves the count. No table
holds it (none is added).

Detection is deterministic (regexes applied in order, the first detector that
matches a span wins, markers already in the text are never matched again). Card numbers
are Luhn-checked, so order ids and other long digit runs that fail the check are kept;
a digit run that passes it is redacted whatever it is.

Example:
    >>> r = Redactor()
    >>> r.redact("key sk-proj-abcdefghijklmnopqrstuvwx, card 4111 1111 1111 1111")
    'key [REDACTED:api_key], card [REDACTED:card_number]'
    >>> r.redact({"password": "hunter2", "note": "order 4111111111111112"})
    {'password': '[REDACTED:password]', 'note': 'order 4111111111111112'}
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
)
from langgraph.types import Interrupt, Send

from langgraph_stm._errors import InvalidArgumentError
from langgraph_stm.checkpoint._saver import SaverCore, bridged

__all__ = [
    "API_KEY",
    "BEARER_TOKEN",
    "CARD_NUMBER",
    "DEFAULT_DETECTORS",
    "DEFAULT_MARKER",
    "JWT",
    "METADATA_KEY",
    "PASSWORD",
    "PRIVATE_KEY",
    "Detector",
    "Redaction",
    "Redactor",
    "luhn_valid",
    "redactions_in",
]

DEFAULT_MARKER = "[REDACTED:{kind}]"
"""The marker a detection is replaced with; ``{kind}`` is the detector's kind."""
METADATA_KEY = "stm_redactions"
"""Checkpoint metadata key holding the number of markers of the stored state."""

_MESSAGE_FIELDS = (
    "content",
    "additional_kwargs",
    "response_metadata",
    "tool_calls",
    "invalid_tool_calls",
    "artifact",
)
"""The message fields redacted (the others are ids, names and types)."""
_METADATA_KEPT = frozenset(
    {
        "source",
        "step",
        "parents",
        "run_id",
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "counters_since_delta_snapshot",
    }
)
"""Metadata keys LangGraph writes with ids and counters only: never redacted."""
_SECRET_KEY = re.compile(r"(?i)^[\w.-]*(?:password|passwd|pwd|passphrase|secret)$")
"""A dict key whose (string) value is a secret as a whole."""


def luhn_valid(digits: str) -> bool:
    """Whether ``digits`` (digits only) passes the Luhn check of card numbers.

    Example:
        >>> luhn_valid("4111111111111111"), luhn_valid("4111111111111112")
        (True, False)
    """
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _card_number(match: re.Match[str]) -> bool:
    digits = re.sub(r"[ -]", "", match.group(0))
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of secret: a regex, the marker's kind, and an optional check of a match.

    When ``pattern`` has groups named ``secret`` (or starting with ``secret``), only the
    group that matched is replaced (``password=hunter2`` keeps ``password=``);
    otherwise the whole match is.
    """

    kind: str
    pattern: re.Pattern[str]
    check: Callable[[re.Match[str]], bool] | None = None

    def sub(self, text: str, marker: Callable[[str], str]) -> tuple[str, int]:
        """``text`` with every accepted match replaced by the marker, and how many."""
        groups = [name for name in self.pattern.groupindex if name.startswith("secret")]
        count = 0

        def replace(match: re.Match[str]) -> str:
            nonlocal count
            if self.check is not None and not self.check(match):
                return match.group(0)
            for name in groups:
                if match.group(name) is not None:
                    start, end = match.span(name)
                    base = match.start()
                    whole = match.group(0)
                    count += 1
                    return whole[: start - base] + marker(self.kind) + whole[end - base :]
            if groups:
                return match.group(0)
            count += 1
            return marker(self.kind)

        return self.pattern.sub(replace, text), count


PRIVATE_KEY = Detector(
    "private_key",
    re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r".*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        re.DOTALL,
    ),
)
"""PEM private-key blocks (RSA, EC, OPENSSH, PGP, encrypted...), header to footer."""
JWT = Detector(
    "jwt",
    re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{8,}"),
)
"""JSON Web Tokens: three base64url parts, header and payload JSON objects (``eyJ``)."""
API_KEY = Detector(
    "api_key",
    re.compile(
        r"(?<![A-Za-z0-9_-])(?:"
        r"sk-(?:proj-|ant-(?:api\d\d-)?|live-|test-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"
        r"|(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])"
        r"|gh[pousr]_[A-Za-z0-9]{36,255}(?![A-Za-z0-9])"
        r"|github_pat_[A-Za-z0-9_]{22,255}"
        r"|xox[abprs]-[A-Za-z0-9-]{10,}"
        r")"
    ),
)
"""API keys and tokens: OpenAI/Anthropic-style ``sk-…`` (``sk-proj-…``), AWS access key
ids (``AKIA…``), GitHub tokens (``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``,
``github_pat_``), Slack tokens (``xoxb-``, ``xoxp-``...)."""
BEARER_TOKEN = Detector(
    "bearer_token",
    re.compile(r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})"),
)
"""``Bearer <token>`` (an ``Authorization`` header): the token, ``Bearer`` kept."""
PASSWORD = Detector(
    "password",
    re.compile(
        r"(?i)(?<![\w-])(?P<key>[\w.-]*(?:password|passwd|pwd|passphrase|secret))"
        r"(?P<sep>[\"']?\s*[:=]\s*)"
        r"(?:\"(?P<secret_dq>[^\"\n]+)\"|'(?P<secret_sq>[^'\n]+)'"
        r"|(?P<secret>[^\s\"'&,;<>)\]}]+))"
    ),
)
"""``password=…``, ``passwd: …``, ``client_secret=…``, ``"password": "…"`` pairs: the
value, the key kept (a quoted value whole, else up to a space, quote or ``&,;``)."""
CARD_NUMBER = Detector(
    "card_number",
    re.compile(r"(?<![\d-])(?:\d{4}[ -]?\d{6}[ -]?\d{5}|(?:\d{4}[ -]?){3}\d{1,7})(?![\d])"),
    check=_card_number,
)
"""Card numbers: 13 to 19 digits, in groups of four (or Amex 4-6-5) separated by
single spaces or dashes or not at all, that pass the Luhn check."""

DEFAULT_DETECTORS: tuple[Detector, ...] = (
    PRIVATE_KEY,
    JWT,
    API_KEY,
    BEARER_TOKEN,
    PASSWORD,
    CARD_NUMBER,
)
"""The built-in detectors, in the order they run (``redact=True``)."""

ExtraRule = str | re.Pattern[str] | tuple[str, "str | re.Pattern[str]"] | Detector
"""A user rule: a regex (kind ``custom``), ``(kind, regex)``, a :class:`Detector`, or a
callable ``str -> str`` (see :class:`Redactor`)."""


def _detector(rule: Any) -> Detector:
    if isinstance(rule, Detector):
        return rule
    if isinstance(rule, str | re.Pattern):
        return Detector("custom", re.compile(rule) if isinstance(rule, str) else rule)
    if isinstance(rule, tuple) and len(rule) == 2 and isinstance(rule[0], str):
        kind, pattern = rule
        if isinstance(pattern, str | re.Pattern):
            return Detector(kind, re.compile(pattern) if isinstance(pattern, str) else pattern)
    raise InvalidArgumentError(
        "Redactor(extra=...) takes regexes, (kind, regex) pairs, Detector objects or "
        f"callables str -> str, got {rule!r}"
    )


class Redactor:
    """Replaces secrets in strings and, recursively, in messages, dicts, lists and tuples.

    Args:
        detectors: the detectors run first, in order (default :data:`DEFAULT_DETECTORS`).
        extra: more rules, run after ``detectors`` in order: a regex string or compiled
            pattern (marker kind ``custom``), a ``(kind, regex)`` pair, a
            :class:`Detector`, or a callable ``str -> str`` returning the text with its
            own replacements (counted as the markers it added, or one when it changed
            the text without adding any).
        marker: the replacement, ``{kind}`` standing for the detector's kind.

    Example:
        >>> acme = lambda text: text.replace("ACME-7", "<vendor>")
        >>> r = Redactor(extra=[("employee_id", r"EMP-\\d{6}"), acme], marker="<{kind}>")
        >>> r.redact("EMP-123456 at ACME-7")
        '<employee_id> at <vendor>'
    """

    def __init__(
        self,
        detectors: Iterable[Detector] = DEFAULT_DETECTORS,
        *,
        extra: Sequence[ExtraRule | Callable[[str], str]] = (),
        marker: str = DEFAULT_MARKER,
    ) -> None:
        if not isinstance(marker, str) or not marker:
            raise InvalidArgumentError("Redactor(marker=...) must be a non-empty string")
        self.detectors: tuple[Detector, ...] = tuple(_detector(d) for d in detectors)
        rules: list[Detector | Callable[[str], str]] = []
        for rule in extra:
            if callable(rule) and not isinstance(rule, Detector | re.Pattern):
                rules.append(rule)
            else:
                rules.append(_detector(rule))
        self.extra: tuple[Detector | Callable[[str], str], ...] = tuple(rules)
        self.marker = marker
        before, _, after = marker.partition("{kind}")
        kind = r"[\w.:-]+" if "{kind}" in marker else ""
        self._markers = re.compile(re.escape(before) + kind + re.escape(after))

    def marker_for(self, kind: str) -> str:
        """The marker that replaces a detection of ``kind``."""
        return self.marker.replace("{kind}", kind)

    def count_markers(self, value: Any) -> int:
        """How many markers ``value`` holds (strings inside it, messages included)."""
        if isinstance(value, str):
            return len(self._markers.findall(value))
        if isinstance(value, BaseMessage):
            return sum(self.count_markers(getattr(value, f, None)) for f in _MESSAGE_FIELDS)
        if isinstance(value, dict):
            return sum(self.count_markers(v) for v in value.values())
        if isinstance(value, list | tuple):
            return sum(self.count_markers(v) for v in value)
        if isinstance(value, Interrupt):
            return self.count_markers(value.value)
        if isinstance(value, Send):
            return self.count_markers(value.arg)
        return 0

    # -- strings -----------------------------------------------------------------------
    def _outside_markers(self, text: str, rule: Detector) -> tuple[str, int]:
        """Apply ``rule`` to the parts of ``text`` that are not markers."""
        parts: list[str] = []
        total = 0
        last = 0
        for found in self._markers.finditer(text):
            replaced, count = rule.sub(text[last : found.start()], self.marker_for)
            parts += [replaced, found.group(0)]
            total += count
            last = found.end()
        replaced, count = rule.sub(text[last:], self.marker_for)
        parts.append(replaced)
        return "".join(parts), total + count

    def redact_text(self, text: str) -> tuple[str, int]:
        """``text`` with its secrets replaced, and how many were."""
        total = 0
        for rule in (*self.detectors, *self.extra):
            if isinstance(rule, Detector):
                text, count = self._outside_markers(text, rule)
            else:
                before = len(self._markers.findall(text))
                replaced = rule(text)
                if not isinstance(replaced, str):
                    raise InvalidArgumentError(
                        f"a Redactor(extra=...) callable must return a str, got {replaced!r}"
                    )
                count = len(self._markers.findall(replaced)) - before
                if count <= 0:
                    count = int(replaced != text)
                text = replaced
            total += count
        return text, total

    # -- values ------------------------------------------------------------------------
    def redact_value(self, value: Any) -> tuple[Any, int]:
        """``value`` with its secrets replaced (a copy where anything changed, ``value``
        itself otherwise), and how many were."""
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, BaseMessage):
            update: dict[str, Any] = {}
            total = 0
            for name in _MESSAGE_FIELDS:
                if name not in type(value).model_fields:
                    continue
                current = getattr(value, name)
                replaced, count = self.redact_value(current)
                if count or replaced is not current:
                    update[name] = replaced
                    total += count
            return (value.model_copy(update=update), total) if update else (value, 0)
        if isinstance(value, dict):
            items: dict[Any, Any] = {}
            total = 0
            changed = False
            for key, item in value.items():
                if (
                    isinstance(key, str)
                    and isinstance(item, str)
                    and item
                    and _SECRET_KEY.match(key)
                    and not self._markers.fullmatch(item)
                ):
                    replaced, count = self.marker_for("password"), 1
                else:
                    replaced, count = self.redact_value(item)
                changed = changed or replaced is not item
                total += count
                items[key] = replaced
            if not changed:
                return value, 0
            if type(value) is dict:
                return items, total
            other = copy.copy(value)  # a dict subclass (OrderedDict, defaultdict...)
            other.clear()
            other.update(items)
            return other, total
        if isinstance(value, list | tuple):
            results = [self.redact_value(item) for item in value]
            if all(new is old for (new, _), old in zip(results, value, strict=True)):
                return value, 0
            total = sum(count for _, count in results)
            news = [new for new, _ in results]
            if type(value) is list:
                return news, total
            if type(value) is tuple:
                return tuple(news), total
            try:
                return type(value)(news), total  # list/tuple subclasses (not named tuples)
            except TypeError:
                return type(value)(*news), total  # named tuples
        if isinstance(value, Interrupt):
            replaced, count = self.redact_value(value.value)
            if replaced is value.value:
                return value, 0
            return dataclasses.replace(value, value=replaced), count
        if isinstance(value, Send):
            replaced, count = self.redact_value(value.arg)
            if replaced is value.arg:
                return value, 0
            return Send(value.node, replaced, timeout=value.timeout), count
        return value, 0

    def redact(self, value: Any) -> Any:
        """``value`` with its secrets replaced (see :meth:`redact_value`)."""
        return self.redact_value(value)[0]

    # -- what the saver stores -----------------------------------------------------------
    def redact_checkpoint(
        self, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> tuple[Checkpoint, CheckpointMetadata, int]:
        """Copies of ``checkpoint`` (its ``channel_values``) and ``metadata`` with their
        secrets replaced, the metadata carrying :data:`METADATA_KEY`; and how many
        secrets this call replaced."""
        values: dict[str, Any] = {}
        total = 0
        changed = False
        for channel, value in checkpoint["channel_values"].items():
            replaced, count = self.redact_value(value)
            values[channel] = replaced
            total += count
            changed = changed or replaced is not value
        stored = (
            cast(Checkpoint, {**checkpoint, "channel_values": values}) if changed else checkpoint
        )
        meta: dict[str, Any] = {}
        for key, value in metadata.items():
            if key in _METADATA_KEPT or key == METADATA_KEY:
                meta[key] = value
                continue
            meta[key], count = self.redact_value(value)
            total += count
        markers = self.count_markers(values) + self.count_markers(
            {k: v for k, v in meta.items() if k not in _METADATA_KEPT and k != METADATA_KEY}
        )
        if markers:
            meta[METADATA_KEY] = markers
        else:
            meta.pop(METADATA_KEY, None)
        return stored, cast(CheckpointMetadata, meta), total

    def redact_writes(self, writes: Sequence[tuple[str, Any]]) -> tuple[list[tuple[str, Any]], int]:
        """Copies of the pending writes' values with their secrets replaced; how many."""
        result: list[tuple[str, Any]] = []
        total = 0
        for channel, value in writes:
            replaced, count = self.redact_value(value)
            result.append((channel, replaced))
            total += count
        return result, total


def redactions_in(metadata: CheckpointMetadata) -> int:
    """How many markers the state of the checkpoint with ``metadata`` holds."""
    count = cast(dict[str, Any], metadata).get(METADATA_KEY)
    return count if isinstance(count, int) else 0


def _redactor_of(redact: bool | Redactor) -> Redactor | None:
    if isinstance(redact, Redactor):
        return redact
    if redact is True:
        return Redactor()
    if redact is False:
        return None
    raise InvalidArgumentError(
        f"STMSaver(redact=...) takes True, False or a Redactor, got {type(redact).__name__}"
    )


class Redaction(SaverCore):
    """The ``redact=`` option of :class:`STMSaver`: secrets replaced before every write
    (see the module doc). With ``redact=False`` (default) writes pass unchanged."""

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        /,
        *,
        redact: bool | Redactor = False,
        **options: Any,
    ) -> None:
        self.redactor: Redactor | None = _redactor_of(redact)
        super().__init__(inner, **options)

    # -- writes --------------------------------------------------------------------------
    @bridged("aput")
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store the checkpoint with its secrets replaced (copies; see the module doc)."""
        if self.redactor is not None:
            checkpoint, metadata, _ = self.redactor.redact_checkpoint(checkpoint, metadata)
        return super().put(config, checkpoint, metadata, new_versions)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async twin of :meth:`put`."""
        if self.redactor is not None:
            checkpoint, metadata, _ = self.redactor.redact_checkpoint(checkpoint, metadata)
        return await super().aput(config, checkpoint, metadata, new_versions)

    @bridged("aput_writes")
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes with their secrets replaced (copies)."""
        if self.redactor is not None:
            writes, _ = self.redactor.redact_writes(writes)
        super().put_writes(config, writes, task_id, task_path)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of :meth:`put_writes`."""
        if self.redactor is not None:
            writes, _ = self.redactor.redact_writes(writes)
        await super().aput_writes(config, writes, task_id, task_path)

    # -- counts --------------------------------------------------------------------------
    @bridged("aredaction_count")
    def redaction_count(self, thread_id: str) -> int:
        """How many redaction markers the thread's latest stored state holds
        (``stm_redactions`` of its latest root checkpoint; 0 for an unknown thread)."""
        tup = self.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        return 0 if tup is None else redactions_in(tup.metadata)

    async def aredaction_count(self, thread_id: str) -> int:
        """Async twin of :meth:`redaction_count`."""
        config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        tup = await self.aget_tuple(config)
        return 0 if tup is None else redactions_in(tup.metadata)
