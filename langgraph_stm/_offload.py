"""Offloading large tool outputs: the full text goes to a store, the message keeps a summary.

Long tool text never enters short-term memory whole. :class:`Offloader` checks a
``ToolMessage``; when its exact token count is over the limit it writes the full
content to a store and returns :class:`Offloaded`: the same message (same id,
``tool_call_id``, name and status) whose content is a short extractive summary plus
a reference line, and an :class:`~langgraph_stm.Artifact` record for the
``artifacts`` field of the state.

Where the full content goes, per thread:

- namespace :func:`offload_namespace` = ``("langgraph_stm", "offload", thread_id)``,
  the thread id taken from ``config["configurable"]["thread_id"]``;
- key: the ToolMessage id;
- value: ``{"content", "tool_call_id", "name", "tokens"}``;
- reference: :func:`offload_uri` = ``store://langgraph_stm/offload/{thread_id}/{key}``,
  read back with :func:`parse_offload_uri`.

``STMSaver(inner, store=store)`` deletes a thread's offloaded outputs with the thread
(:func:`delete_offloaded` / :func:`adelete_offloaded`).

Example:
    >>> from langchain_core.messages import ToolMessage
    >>> from langgraph.store.memory import InMemoryStore
    >>> store = InMemoryStore()
    >>> offloader = Offloader(100, store=store, summary_tokens=12)
    >>> config = {"configurable": {"thread_id": "t1"}}
    >>> rows = "\\n".join(f"row {i}: ok" for i in range(200))
    >>> done = offloader.offload(ToolMessage(rows, tool_call_id="c1", id="m1"), config=config)
    >>> print(done.message.content)
    row 0: ok
    row 1: ok ...
    <BLANKLINE>
    [Full tool output offloaded (1203 tokens): store://langgraph_stm/offload/t1/m1]
    >>> done.artifact["uri"] == offload_uri("t1", "m1")
    True
    >>> store.get(offload_namespace("t1"), "m1").value["content"] == rows
    True
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias
from urllib.parse import quote, unquote

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config, get_store
from langgraph.store.base import BaseStore

from langgraph_stm._errors import InvalidArgumentError, InvalidMessageError
from langgraph_stm._policy import Meter, check_positive
from langgraph_stm._state import Artifact
from langgraph_stm._tokens import TokenCounter, TokenCounterLike, default_token_counter

__all__ = [
    "OFFLOAD_NAMESPACE",
    "Offloaded",
    "Offloader",
    "StoreFunction",
    "adelete_offloaded",
    "artifact_id",
    "delete_offloaded",
    "extract_summary",
    "offload_namespace",
    "offload_uri",
    "parse_offload_uri",
]

OFFLOAD_NAMESPACE: tuple[str, str] = ("langgraph_stm", "offload")
"""The namespace prefix under which every thread's offloaded outputs live."""

StoreFunction: TypeAlias = Callable[
    [tuple[str, ...], str, dict[str, Any]], "str | Awaitable[str | None] | None"
]
"""A user store: ``(namespace, key, value) -> uri | None`` (awaitable for ``aoffload``)."""

_URI_PREFIX = "store://langgraph_stm/offload/"
_ELLIPSIS = " ..."
_SENTENCE_END = re.compile(r"[.!?](?=\s)")
_PAGE = 100


# -- where the full content lives ---------------------------------------------------------
def _label(thread_id: str) -> str:
    """``thread_id`` as a store namespace label (which cannot hold ``.`` or NUL)."""
    return thread_id.replace("%", "%25").replace(".", "%2E").replace("\x00", "%00")


def offload_namespace(thread_id: str) -> tuple[str, str, str]:
    """Return the store namespace of the outputs offloaded in ``thread_id``.

    The thread id is the last label as is; only ``%``, ``.`` and NUL, which LangGraph
    store labels cannot hold, are percent-encoded.

    Example:
        >>> offload_namespace("t1")
        ('langgraph_stm', 'offload', 't1')
        >>> offload_namespace("user.42")
        ('langgraph_stm', 'offload', 'user%2E42')
    """
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidArgumentError(f"thread_id must be a non-empty str, got {thread_id!r}")
    return (*OFFLOAD_NAMESPACE, _label(thread_id))


def offload_uri(thread_id: str, key: str) -> str:
    """Return the reference to the output stored under ``key`` in ``thread_id``.

    Both parts are percent-encoded (a ``/`` inside them stays unambiguous); plain ids
    such as ``t1`` or a UUID read as they are.

    Example:
        >>> offload_uri("t1", "tool-7")
        'store://langgraph_stm/offload/t1/tool-7'
    """
    return f"{_URI_PREFIX}{quote(thread_id, safe='')}/{quote(key, safe='')}"


def parse_offload_uri(uri: str) -> tuple[str, str]:
    """Return ``(thread_id, key)`` of a reference built by :func:`offload_uri`.

    The item is at ``store.get(offload_namespace(thread_id), key)``.

    Example:
        >>> parse_offload_uri("store://langgraph_stm/offload/t1/tool-7")
        ('t1', 'tool-7')
    """
    parts = uri[len(_URI_PREFIX) :].split("/") if isinstance(uri, str) else []
    if not isinstance(uri, str) or not uri.startswith(_URI_PREFIX) or len(parts) != 2:
        raise InvalidArgumentError(
            f"not an offload reference: {uri!r}; expected '{_URI_PREFIX}<thread_id>/<key>'"
        )
    thread_id, key = (unquote(p) for p in parts)
    if not thread_id or not key:
        raise InvalidArgumentError(f"offload reference {uri!r} lacks a thread id or a key")
    return thread_id, key


def artifact_id(message_id: str) -> str:
    """Return the deterministic artifact id of the offloaded message ``message_id``.

    Example:
        >>> artifact_id("tool-7")
        'stm-offload:tool-7'
    """
    return f"stm-offload:{message_id}"


# -- the summary --------------------------------------------------------------------------
def _describe(block: object) -> tuple[str, str]:
    """``(kind, description)`` of a non-text content block."""
    kind = str(block.get("type") or "unknown") if isinstance(block, dict) else type(block).__name__
    details: list[str] = []
    if isinstance(block, dict):
        details = [block[k] for k in ("filename", "mime_type") if isinstance(block.get(k), str)]
    return kind, f"[{kind} block{': ' + ', '.join(details) if details else ''}]"


def _text_of(content: str | list[str | dict[Any, Any]]) -> tuple[str, list[str]]:
    """The text of ``content`` (blocks in order, non-text ones described) and the kinds
    of its non-text blocks."""
    parts: list[str] = []
    kinds: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    else:
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            else:
                kind, description = _describe(block)
                kinds.append(kind)
                parts.append(description)
    lines = (line.rstrip() for part in parts for line in part.splitlines())
    return "\n".join(line for line in lines if line.strip()), kinds


def _boundary(text: str, end: int) -> int:
    """The end of the last whole line, else sentence, else word within ``text[:end]``,
    if it keeps at least half of it; else ``end``."""
    if end >= len(text) or text[end] == "\n":
        return end
    floor = max(end // 2, 1)
    line = text.rfind("\n", 0, end)
    if line >= floor:
        return line
    sentences = [m.end() for m in _SENTENCE_END.finditer(text, 0, end + 1) if m.end() >= floor]
    if sentences:
        return sentences[-1]
    for i in range(end, floor - 1, -1):
        if text[i].isspace():
            return i
    return end


def extract_summary(text: str, max_tokens: int, count_text: Callable[[str], int]) -> str:
    """Return the first lines/sentences of ``text`` within ``max_tokens``.

    A cut text ends with ``" ..."`` (counted in the budget); it is cut at a line end,
    else a sentence end, else a word end, else mid-word.

    Example:
        >>> extract_summary("One. Two. Three.", 5, lambda s: len(s.split()))
        'One. Two. Three.'
        >>> extract_summary("One. Two. Three.", 3, lambda s: len(s.split()))
        'One. Two. ...'
    """
    if count_text(text) <= max_tokens:
        return text

    def fits(end: int) -> bool:
        return count_text(text[:end].rstrip() + _ELLIPSIS) <= max_tokens

    if not fits(0):
        return ""
    good, bad = 0, len(text)  # text[:good] fits; text[:bad] is not known to
    probe = max_tokens * 4  # grow from a guess, then bisect
    while probe < bad:
        if not fits(probe):
            bad = probe
            break
        good, probe = probe, probe * 2
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    end = _boundary(text, good)
    if not fits(end):
        end = good
    cut = text[:end].rstrip()
    return cut + _ELLIPSIS if cut else ""


def _text_counter(counter: TokenCounterLike) -> Callable[[str], int]:
    if isinstance(counter, TokenCounter):
        return counter.count_text
    return default_token_counter().count_text


# -- the offloader ------------------------------------------------------------------------
@dataclass(frozen=True)
class Offloaded:
    """A tool output moved out of short-term memory."""

    message: ToolMessage
    """The input message (same id, tool_call_id, name, status) with the summary and a
    reference line as its content."""
    artifact: Artifact
    """The record for the state's ``artifacts`` field (merged by its deterministic id)."""


@dataclass(frozen=True)
class _Pending:
    """What one offload writes and returns, before any I/O."""

    message: ToolMessage
    thread_id: str
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    summary: str
    tokens: int
    kinds: tuple[str, ...]

    def finish(self, uri: object) -> Offloaded:
        if uri is None:
            uri = offload_uri(self.thread_id, self.key)
        if not isinstance(uri, str):
            raise InvalidArgumentError(
                f"the store callable must return the uri (a str) or None, got {uri!r}"
            )
        blocks = f", non-text blocks: {', '.join(self.kinds)}" if self.kinds else ""
        reference = f"[Full tool output offloaded ({self.tokens} tokens{blocks}): {uri}]"
        content = f"{self.summary}\n\n{reference}" if self.summary else reference
        artifact: Artifact = {
            "id": artifact_id(self.key),
            "kind": "tool_output",
            "summary": self.summary or reference,
            "uri": uri,
            "source_message_id": self.key,
            "tokens": self.tokens,
        }
        return Offloaded(self.message.model_copy(update={"content": content}), artifact)


def _thread_id(config: RunnableConfig | None) -> str:
    if config is None:
        try:
            config = get_config()
        except RuntimeError:
            raise InvalidArgumentError(
                "offload needs the thread id: pass config= (the node's RunnableConfig), "
                "or call it inside a graph node"
            ) from None
    thread_id = (config.get("configurable") or {}).get("thread_id")
    if thread_id is None or thread_id == "":
        raise InvalidArgumentError(
            "offload needs config['configurable']['thread_id'] to choose the store "
            "namespace; invoke the graph with {'configurable': {'thread_id': ...}}"
        )
    return str(thread_id)


class Offloader:
    """Move tool outputs over ``over_tokens`` into a store, keeping a summary in state.

    Args:
        over_tokens: a ToolMessage whose exact token count is greater is offloaded.
        token_counter: counts a list of messages; default :class:`TokenCounter`. The
            summary is bounded with its ``count_text`` (the default encoding's for
            any other counter).
        store: where the full content goes: a LangGraph ``BaseStore`` (written with
            ``put``/``aput``, ``index=False`` so no embedding is computed), or a
            callable ``(namespace, key, value) -> uri | None`` (``None``: the standard
            :func:`offload_uri`; for :meth:`aoffload` it may return an awaitable).
            ``None`` uses the store of the running graph (``graph.compile(store=...)``).
        summary_tokens: the most tokens of the summary text kept in the message.

    The message needs an id (the store key) and the config a thread id; both are
    checked only for a message that is offloaded. Re-running on the same message
    writes the same item and returns the same artifact id. Only ``content`` is
    replaced: the message's ``artifact`` and metadata are kept as they are.

    Example:
        >>> from langchain_core.messages import ToolMessage
        >>> written = {}
        >>> def keep(namespace, key, value):
        ...     written[key] = value
        ...     return f"mem://{key}"
        >>> def chars(messages):
        ...     return sum(len(m.text) for m in messages)
        >>> offloader = Offloader(50, store=keep, token_counter=chars)
        >>> config = {"configurable": {"thread_id": "t1"}}
        >>> offloader.offload(ToolMessage("short", tool_call_id="c1", id="m1"), config=config)
        >>> done = offloader.offload(ToolMessage("x " * 60, tool_call_id="c2", id="m2"),
        ...                          config=config)
        >>> done.artifact["id"], done.artifact["uri"], written["m2"]["tokens"]
        ('stm-offload:m2', 'mem://m2', 120)
    """

    def __init__(
        self,
        over_tokens: int,
        *,
        token_counter: TokenCounterLike | None = None,
        store: BaseStore | StoreFunction | None = None,
        summary_tokens: int = 200,
    ) -> None:
        self.over_tokens = check_positive("over_tokens", over_tokens)
        self.summary_tokens = check_positive("summary_tokens", summary_tokens)
        self._meter = Meter(token_counter)
        self.token_counter = self._meter.counter
        self._count_text = _text_counter(self.token_counter)
        if store is not None and not isinstance(store, BaseStore) and not callable(store):
            raise InvalidArgumentError(
                "store must be a LangGraph BaseStore, a callable (namespace, key, value) "
                f"-> uri, or None for the graph's store; got {type(store).__name__}"
            )
        self.store = store

    def __repr__(self) -> str:
        return f"Offloader(over_tokens={self.over_tokens}, summary_tokens={self.summary_tokens})"

    # -- IO-free halves ----------------------------------------------------------------
    def _prepare(self, message: ToolMessage, config: RunnableConfig | None) -> _Pending | None:
        checked: object = message
        if not isinstance(checked, ToolMessage):
            kind = type(checked).__name__
            raise InvalidMessageError(f"offload takes a ToolMessage, got {kind}")
        tokens = self._meter.cost([message])
        if tokens <= self.over_tokens:
            return None
        if not message.id:
            raise InvalidMessageError(
                f"the ToolMessage answering {message.tool_call_id!r} has no id, which "
                "offload uses as the store key; create it with ToolMessage(..., id=...)"
            )
        thread_id = _thread_id(config)
        text, kinds = _text_of(message.content)
        return _Pending(
            message=message,
            thread_id=thread_id,
            namespace=offload_namespace(thread_id),
            key=message.id,
            value={
                "content": message.content,
                "tool_call_id": message.tool_call_id,
                "name": message.name,
                "tokens": tokens,
            },
            summary=extract_summary(text, self.summary_tokens, self._count_text),
            tokens=tokens,
            kinds=tuple(kinds),
        )

    def _target(self) -> BaseStore | StoreFunction:
        if self.store is not None:
            return self.store
        try:
            store: BaseStore | None = get_store()
        except (RuntimeError, KeyError, AttributeError):
            store = None
        if store is None:
            raise InvalidArgumentError(
                "Offloader has no store for the full tool output: compile the graph with "
                "a store (graph.compile(store=InMemoryStore())) or pass "
                "Offloader(..., store=...) a BaseStore or a callable (namespace, key, value)"
            )
        return store

    # -- sync and async ----------------------------------------------------------------
    def offload(self, message: ToolMessage, *, config: RunnableConfig | None) -> Offloaded | None:
        """Offload ``message`` if it is over the limit; ``None`` if it is not.

        ``config`` gives the thread id (``None``: the running node's config).
        """
        pending = self._prepare(message, config)
        if pending is None:
            return None
        target = self._target()
        if isinstance(target, BaseStore):
            target.put(pending.namespace, pending.key, pending.value, index=False)
            return pending.finish(None)
        uri = target(pending.namespace, pending.key, pending.value)
        if inspect.isawaitable(uri):
            if inspect.iscoroutine(uri):
                uri.close()
            raise InvalidArgumentError(
                "the store callable returned an awaitable: use await offloader.aoffload(...)"
            )
        return pending.finish(uri)

    async def aoffload(
        self, message: ToolMessage, *, config: RunnableConfig | None
    ) -> Offloaded | None:
        """Async twin of :meth:`offload` (``aput``; a store callable may be async)."""
        pending = self._prepare(message, config)
        if pending is None:
            return None
        target = self._target()
        if isinstance(target, BaseStore):
            await target.aput(pending.namespace, pending.key, pending.value, index=False)
            return pending.finish(None)
        uri = target(pending.namespace, pending.key, pending.value)
        if inspect.isawaitable(uri):
            uri = await uri
        return pending.finish(uri)


# -- deletion with the thread -------------------------------------------------------------
def delete_offloaded(store: BaseStore, thread_id: str) -> int:
    """Delete every item offloaded in ``thread_id``; return how many.

    Pages through ``store.search`` until a page is empty, then deletes what it found.

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> store = InMemoryStore()
        >>> store.put(offload_namespace("t1"), "m1", {"content": "..."})
        >>> delete_offloaded(store, "t1"), delete_offloaded(store, "t1")
        (1, 0)
    """
    if not thread_id:
        return 0
    prefix = offload_namespace(thread_id)
    found: list[tuple[tuple[str, ...], str]] = []
    while page := store.search(prefix, limit=_PAGE, offset=len(found), refresh_ttl=False):
        found.extend((item.namespace, item.key) for item in page)
    for namespace, key in found:
        store.delete(namespace, key)
    return len(found)


async def adelete_offloaded(store: BaseStore, thread_id: str) -> int:
    """Async twin of :func:`delete_offloaded`."""
    if not thread_id:
        return 0
    prefix = offload_namespace(thread_id)
    found: list[tuple[tuple[str, ...], str]] = []
    while page := await store.asearch(prefix, limit=_PAGE, offset=len(found), refresh_ttl=False):
        found.extend((item.namespace, item.key) for item in page)
    for namespace, key in found:
        await store.adelete(namespace, key)
    return len(found)
