"""Exact, offline token counting for LangChain messages.

:func:`load_encoding` builds a ``tiktoken.Encoding`` from the BPE files shipped inside
this package (``langgraph_stm/_data``), after checking their sha256 against the hashes
tiktoken pins for them. Nothing is downloaded and nothing is written to tiktoken's
cache, so counts work on a machine with no network and are identical to tiktoken's.

:class:`TokenCounter` counts a list of messages the way the OpenAI chat format frames
them. The formula, with ``tok(s)`` the exact number of tokens of string ``s``::

    count(messages) = REPLY_PRIMING + sum(count_message(m) for m in messages)

    count_message(m) = TOKENS_PER_MESSAGE                  # <|start|>, <|message|>, <|end|>
                     + tok(role)                           # system/user/assistant/tool
                     + tok(content text)
                     + (TOKENS_PER_NAME + tok(name))        if the message has a name
                     + sum(TOKENS_PER_TOOL_CALL + tok(call name) + tok(json(args)))
                                                           for each tool call of an AI message

with ``REPLY_PRIMING = 3``, ``TOKENS_PER_MESSAGE = 3``, ``TOKENS_PER_NAME = 1`` (OpenAI's
published framing constants) and ``TOKENS_PER_TOOL_CALL = 3``. ``json(args)`` is
``json.dumps(args, ensure_ascii=False)``, the arguments string the provider receives.
Content given as a list of blocks counts each text block's text; an image block counts a
flat ``IMAGE_TOKENS`` (85, OpenAI's low-detail cost); any other block counts the tokens
of its JSON. A ToolMessage's ``tool_call_id`` is not counted (it is not model text).

``json(...)`` is exactly what ``json.dumps(value, ensure_ascii=False, default=str)``
writes, which is what a provider integration sends:

- a dict key that is an ``int``, ``float``, ``bool`` or ``None`` is written the way JSON
  writes it (``{1: "x"}`` counts as ``{"1": "x"}``, ``{True: 1}`` as ``{"true": 1}``);
- a value JSON has no type for (a ``datetime``, a ``UUID``...) counts as its ``str()``;
- nesting depth is unlimited: a value too deep for ``json.dumps`` (arguments nested
  thousands of levels) is written by an iterative encoder with the same output;
- a dict key of any other type (a tuple...) and a circular reference cannot be sent to a
  provider, so they raise :class:`InvalidMessageError` naming the message id and the
  tool call or content at fault; so does a message whose fields were mutated into
  types LangChain does not accept (``content=5``, a tool call name that is not a str).

Bad arguments to :class:`TokenCounter` raise :class:`InvalidArgumentError` (a
``ValueError``); an unknown model or encoding raises :class:`TokenizerError`.

Counts are cached per message, keyed by the message id and everything the formula
reads, so a long history is tokenized once and recounting it after one new message
costs one message. A message whose content changes under the same id is recounted.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> counter = TokenCounter(encoding="cl100k_base")
    >>> counter.count_text("hello world")
    2
    >>> counter([HumanMessage("hello world", id="h1")])  # 3 + (3 + tok("user") + 2)
    9
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import tiktoken
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from tiktoken.model import encoding_name_for_model

from langgraph_stm._errors import InvalidArgumentError, InvalidMessageError, TokenizerError

__all__ = [
    "IMAGE_TOKENS",
    "REPLY_PRIMING",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "TOKENS_PER_TOOL_CALL",
    "CacheInfo",
    "TokenCounter",
    "TokenCounterLike",
    "default_token_counter",
    "load_encoding",
    "message_role",
]

REPLY_PRIMING = 3
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_PER_TOOL_CALL = 3
IMAGE_TOKENS = 85

_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"


@dataclass(frozen=True)
class _EncodingSpec:
    sha256: str
    pat_str: str
    special_tokens: dict[str, int]


# Facts about the two encodings, as tiktoken defines them (tiktoken_ext/openai_public.py).
# tests/unit/test_tokens.py checks that they still match the installed tiktoken.
_SPECS: dict[str, _EncodingSpec] = {
    "cl100k_base": _EncodingSpec(
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=(
            r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
            r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
        ),
        special_tokens={
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": _EncodingSpec(
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str="|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
}

DEFAULT_ENCODING = "o200k_base"


def _read_ranks(name: str, data_dir: Path | None) -> bytes:
    """Return the raw ``.tiktoken`` bytes of ``name``, from the package or ``data_dir``."""
    if data_dir is None:
        source = resources.files("langgraph_stm") / "_data" / f"{name}.tiktoken.gz"
        try:
            return gzip.decompress(source.read_bytes())
        except (OSError, EOFError) as exc:
            raise TokenizerError(
                f"cannot read the shipped encoding file for {name!r} ({source}): {exc}; "
                "reinstall langgraph-stm"
            ) from exc
    for candidate in (data_dir / f"{name}.tiktoken.gz", data_dir / f"{name}.tiktoken"):
        if candidate.exists():
            try:
                raw = candidate.read_bytes()
                return gzip.decompress(raw) if candidate.suffix == ".gz" else raw
            except (OSError, EOFError) as exc:
                raise TokenizerError(f"cannot read encoding file {candidate}: {exc}") from exc
    raise TokenizerError(f"no {name}.tiktoken(.gz) file in {data_dir}")


@lru_cache(maxsize=8)
def load_encoding(name: str, data_dir: Path | None = None) -> tiktoken.Encoding:
    """Build the tiktoken encoding ``name`` offline, from verified local files.

    The BPE ranks come from the files shipped in this package (or from ``data_dir``,
    holding ``{name}.tiktoken`` or ``{name}.tiktoken.gz``). Their sha256 must equal the
    hash tiktoken pins for them, else :class:`TokenizerError` is raised. The result is
    cached per process.

    Example:
        >>> load_encoding("o200k_base").encode("hello world")
        [24912, 2375]
    """
    spec = _SPECS.get(name)
    if spec is None:
        raise TokenizerError(f"unknown encoding {name!r}; available: {sorted(_SPECS)}")
    raw = _read_ranks(name, data_dir)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != spec.sha256:
        raise TokenizerError(
            f"encoding file for {name!r} is corrupted: sha256 {digest} != expected "
            f"{spec.sha256}; reinstall langgraph-stm or pass a correct data_dir"
        )
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return tiktoken.Encoding(
        name=name,
        pat_str=spec.pat_str,
        mergeable_ranks=ranks,
        special_tokens=dict(spec.special_tokens),
    )


def _encoding_for_model(model: str) -> str:
    bare = model.split(":", 1)[1] if ":" in model else model
    try:
        name = encoding_name_for_model(bare)
    except KeyError:
        raise TokenizerError(
            f"no known tiktoken encoding for model {model!r}; "
            f"pass encoding= one of {sorted(_SPECS)}"
        ) from None
    if name not in _SPECS:
        raise TokenizerError(
            f"model {model!r} uses encoding {name!r}, which langgraph-stm does not ship; "
            f"available: {sorted(_SPECS)}"
        )
    return name


_ROLES: dict[type[BaseMessage], str] = {
    HumanMessage: "user",
    AIMessage: "assistant",
    SystemMessage: "system",
    ToolMessage: "tool",
    FunctionMessage: "function",
}


def message_role(message: BaseMessage) -> str:
    """Return the OpenAI chat role of a LangChain message (``user``, ``assistant``...).

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> message_role(AIMessage("hi"))
        'assistant'
    """
    if isinstance(message, ChatMessage):
        return message.role
    for cls in type(message).__mro__:
        role = _ROLES.get(cls)
        if role is not None:
            return role
    return message.type


# json.dumps(value, ensure_ascii=False, default=str), without re-reading the options
# on every call. The output is the same byte for byte.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
_encode_str: Callable[[str], str] = json.encoder.encode_basestring

# Work items of _deep_json: a value to write, text to copy, a container left.
_VALUE, _TEXT, _LEAVE = 0, 1, 2


def _float_json(value: float) -> str:
    if value != value:
        return "NaN"
    if value == math.inf:
        return "Infinity"
    if value == -math.inf:
        return "-Infinity"
    return float.__repr__(value)


def _key_json(key: object) -> str:
    """Return a dict key as JSON writes it (before quoting), like ``json.dumps``."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return _float_json(key)
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return int.__repr__(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _deep_json(value: Any) -> str:
    """Return ``json.dumps(value, ensure_ascii=False, default=str)``, at any depth.

    An explicit stack replaces the recursion of ``json``'s encoder; the type checks,
    their order and the separators are the encoder's, so the output is identical.
    Raises ``TypeError`` for an unsupported key, ``ValueError`` for a circular reference
    (the messages are ``json``'s).
    """
    parts: list[str] = []
    stack: list[tuple[int, Any]] = [(_VALUE, value)]
    open_ids: set[int] = set()  # containers being written, to detect circular references
    while stack:
        op, item = stack.pop()
        if op == _TEXT:
            parts.append(item)
        elif op == _LEAVE:
            open_ids.discard(item)
        elif item is None:
            parts.append("null")
        elif item is True:
            parts.append("true")
        elif item is False:
            parts.append("false")
        elif isinstance(item, str):
            parts.append(_encode_str(item))
        elif isinstance(item, int):
            parts.append(int.__repr__(item))
        elif isinstance(item, float):
            parts.append(_float_json(item))
        elif isinstance(item, list | tuple | dict):
            if not item:
                parts.append("{}" if isinstance(item, dict) else "[]")
                continue
            if id(item) in open_ids:
                raise ValueError("Circular reference detected")
            open_ids.add(id(item))
            stack.append((_LEAVE, id(item)))
            if isinstance(item, dict):
                parts.append("{")
                stack.append((_TEXT, "}"))
                entries = [(_encode_str(_key_json(k)) + ": ", v) for k, v in item.items()]
                for index in range(len(entries) - 1, -1, -1):
                    key, member = entries[index]
                    stack.append((_VALUE, member))
                    stack.append((_TEXT, ", " + key if index else key))
            else:
                parts.append("[")
                stack.append((_TEXT, "]"))
                members = list(item)
                for index in range(len(members) - 1, 0, -1):
                    stack.append((_VALUE, members[index]))
                    stack.append((_TEXT, ", "))
                stack.append((_VALUE, members[0]))
        else:
            parts.append(_encode_str(str(item)))
    return "".join(parts)


def _dumps(value: Any) -> str:
    """Return the JSON a provider receives for ``value`` (see the module docstring)."""
    try:
        return _ENCODER.encode(value)
    except RecursionError:  # deeper than the C encoder goes: same output, no limit
        return _deep_json(value)


def _to_json(value: Any, message: BaseMessage, what: str) -> str:
    """Return :func:`_dumps` of ``value``; InvalidMessageError if it is not JSON."""
    try:
        return _dumps(value)
    except (TypeError, ValueError) as exc:
        raise InvalidMessageError(
            f"message id={message.id!r}: {what} cannot be written as JSON ({exc}); use str, "
            "int, float, bool or None dict keys and no circular references"
        ) from exc


def _content_key(message: BaseMessage) -> Any:
    content = message.content
    if isinstance(content, str):
        return content
    return _to_json(content, message, "the content")


def _tool_calls_key(message: BaseMessage) -> tuple[tuple[str, str], ...]:
    if not isinstance(message, AIMessage) or not message.tool_calls:
        return ()
    return tuple(
        (
            call["name"],
            _to_json(
                call["args"],
                message,
                f"the arguments of tool call id={call.get('id')!r} ({call['name']!r})",
            ),
        )
        for call in message.tool_calls
    )


@dataclass(frozen=True)
class CacheInfo:
    """Cache statistics of a :class:`TokenCounter`."""

    hits: int
    """Messages whose count came from the cache."""
    misses: int
    """Messages that had to be tokenized."""
    size: int
    """Messages currently cached."""
    max_size: int
    """Capacity of the cache (least recently used entries are evicted)."""


class TokenCounter:
    """Count tokens of LangChain messages exactly, with a per-message cache.

    Pass a ``model`` name (``"gpt-4o"``, ``"openai:gpt-4.1"``) or an ``encoding``
    (``"cl100k_base"``, ``"o200k_base"``); the default is ``o200k_base``. An instance
    is a ``Callable[[list[BaseMessage]], int]``, so it plugs in wherever LangChain or
    LangGraph accept a token counter. It is safe to share between threads.

    Raises :class:`InvalidArgumentError` for both ``model`` and ``encoding``, a name
    that is not a str or a ``cache_size`` that is not an int ``>= 0``;
    :class:`TokenizerError` for an unknown model or encoding.

    Example:
        >>> from langchain_core.messages import AIMessage, ToolMessage
        >>> counter = TokenCounter(model="gpt-4o")
        >>> call = AIMessage("", id="a1", tool_calls=[
        ...     {"name": "search", "args": {"q": "weather"}, "id": "c1"}])
        >>> result = ToolMessage("sunny", tool_call_id="c1", id="t1")
        >>> per_message = counter.count_message(call) + counter.count_message(result)
        >>> counter([call, result]) == 3 + per_message
        True
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        encoding: str | None = None,
        cache_size: int = 100_000,
        data_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if model is not None and encoding is not None:
            raise InvalidArgumentError(
                f"pass either model= or encoding=, not both (got model={model!r}, "
                f"encoding={encoding!r})"
            )
        for argument, value in (("model", model), ("encoding", encoding)):
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentError(
                    f"{argument} must be a str such as 'gpt-4o' or 'o200k_base', got {value!r}"
                )
        if not isinstance(cache_size, int) or isinstance(cache_size, bool) or cache_size < 0:
            raise InvalidArgumentError(
                f"cache_size must be an int >= 0 (0 disables the cache), got {cache_size!r}"
            )
        name = _encoding_for_model(model) if model is not None else encoding or DEFAULT_ENCODING
        self.model = model
        self.encoding_name = name
        self.encoding = load_encoding(name, None if data_dir is None else Path(data_dir))
        self._cache: OrderedDict[tuple[Any, ...], int] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def __repr__(self) -> str:
        return f"TokenCounter(encoding={self.encoding_name!r})"

    def __call__(self, messages: Sequence[BaseMessage]) -> int:
        """Return the tokens of ``messages`` as one chat request (with reply priming)."""
        return REPLY_PRIMING + sum(self.count_message(m) for m in messages)

    def count_text(self, text: str) -> int:
        """Return the exact number of tokens of ``text`` (special tokens count as text)."""
        return len(self.encoding.encode_ordinary(text))

    def count_message(self, message: BaseMessage) -> int:
        """Return the tokens of one message, framing included (cached).

        Raises :class:`InvalidMessageError` for a value that is not a message, and for
        content or tool-call arguments that cannot be written as JSON (see the module
        docstring), naming the message id.
        """
        if not isinstance(message, BaseMessage):
            raise InvalidMessageError(
                f"expected a LangChain BaseMessage, got {type(message).__name__}: {message!r:.80}"
            )
        key = (
            message.id,
            type(message),
            message_role(message),
            _content_key(message),
            message.name,
            _tool_calls_key(message),
        )
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                self._hits += 1
                return cached
        try:
            count = self._count_uncached(key[2], message.content, message.name, key[5])
        except TypeError as exc:  # a field mutated past LangChain's validation
            raise InvalidMessageError(
                f"message id={message.id!r} is malformed ({exc}); build it again with "
                "LangChain's constructor instead of assigning its fields"
            ) from exc
        with self._lock:
            self._misses += 1
            if self._cache_size:
                self._cache[key] = count
                if len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return count

    def cache_info(self) -> CacheInfo:
        """Return hit/miss statistics of the per-message cache."""
        with self._lock:
            return CacheInfo(self._hits, self._misses, len(self._cache), self._cache_size)

    def cache_clear(self) -> None:
        """Empty the per-message cache and reset its statistics."""
        with self._lock:
            self._cache.clear()
            self._hits = self._misses = 0

    def _count_uncached(
        self,
        role: str,
        content: Any,
        name: str | None,
        tool_calls: tuple[tuple[str, str], ...],
    ) -> int:
        total = TOKENS_PER_MESSAGE + self.count_text(role) + self._count_content(content)
        if name:
            total += TOKENS_PER_NAME + self.count_text(name)
        for call_name, arguments in tool_calls:
            total += TOKENS_PER_TOOL_CALL + self.count_text(call_name) + self.count_text(arguments)
        return total

    def _count_content(self, content: Any) -> int:
        if isinstance(content, str):
            return self.count_text(content)
        total = 0
        for block in content:
            if isinstance(block, str):
                total += self.count_text(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                total += self.count_text(str(block.get("text", "")))
            elif isinstance(block, dict) and block.get("type") in ("image", "image_url"):
                total += IMAGE_TOKENS
            else:
                total += self.count_text(_dumps(block))
        return total


TokenCounterLike = Callable[[list[BaseMessage]], int]
"""Anything that counts the tokens of a list of messages: a TokenCounter, ``len``..."""


@cache
def default_token_counter() -> TokenCounter:
    """Return the process-wide default counter (``o200k_base``), shared so its cache is.

    Example:
        >>> default_token_counter() is default_token_counter()
        True
    """
    return TokenCounter()
