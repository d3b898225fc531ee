"""Export a thread as a JSON document and import it into an empty thread of any backend.

:class:`ThreadExport` adds ``export_thread`` / ``aexport_thread`` and ``import_thread`` /
``aimport_thread`` to :class:`~langgraph_stm.checkpoint.STMSaver`; what the document
holds, what is left out by design and how an import is checked are described in
:mod:`._document`.
Example:
    >>> import json
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> from langgraph.graph import START, StateGraph
    >>> from langgraph_stm import STMState
    >>> from langgraph_stm.checkpoint import STMSaver
    >>> Saver = STMSaver
    >>> def work(state: STMState) -> dict:
    ...     return {"goal": "ship v2", "messages": [("ai", "on it")]}
    >>> builder = StateGraph(STMState).add_node(work).add_edge(START, "work")
    >>> source = builder.compile(checkpointer=Saver(InMemorySaver()))
    >>> _ = source.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})
    >>> text = json.dumps(source.checkpointer.export_thread("t1"))
    >>> target = Saver(InMemorySaver())
    >>> config = target.import_thread(json.loads(text), thread_id="copy")
    >>> state = builder.compile(checkpointer=target).get_state(config)
    >>> state.values["goal"], [m.content for m in state.values["messages"]], state.next
    ('ship v2', ['hi', 'on it'], ())
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
)

from langgraph_stm._errors import InvalidArgumentError, StateUpdateError
from langgraph_stm._state import check_state_values

if TYPE_CHECKING:
    pass

from langgraph_stm.checkpoint._document import (
    ThreadDocument,
    build_document,
    decode_values,
    document_error,
    expiry_of,
    import_checkpoint,
    import_metadata,
    stored_ttl,
    validate_document,
)

__all__ = ["ThreadExport"]


class _Projection(Protocol):
    def get_thread_state(self, thread_id: str) -> object: ...

    async def aget_thread_state(self, thread_id: str) -> object: ...


def _root(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def _thread(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def _unknown(thread_id: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"export_thread: thread {thread_id!r} has no checkpoint (unknown, deleted or expired)"
    )


def _not_empty(thread_id: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"import_thread: thread {thread_id!r} already has checkpoints; import into an "
        "empty thread (pass another thread_id=, or delete_thread it first)"
    )


def _target(document: ThreadDocument, thread_id: str | None) -> str:
    if thread_id is None:
        return document["thread_id"]
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidArgumentError(
            f"import_thread: thread_id must be a non-empty string or None, got {thread_id!r}"
        )
    return thread_id


class ThreadExport(BaseCheckpointSaver[Any]):
    """``export_thread`` / ``import_thread`` and their async twins, for :class:`STMSaver`.

    A mixin over the saver's public methods (``get_tuple``, ``put``, their async twins,
    ``get_next_version``, ``get_thread_state``), its ``inner`` saver (for the list of
    checkpoints, read without values), the thread's TTL from ``get_thread_state`` and
    the saver's clock. Synchronous methods over an asynchronous inner
    saver work from any thread but its event loop's, as the saver's own do.
    """

    inner: BaseCheckpointSaver[Any]

    # -- helpers -------------------------------------------------------------------------
    def _validated_values(self, document: object) -> tuple[ThreadDocument, dict[str, Any]]:
        doc = validate_document(document)
        values = decode_values(doc)
        if getattr(self, "validate_writes", True):
            try:
                check_state_values(values)
            except StateUpdateError as exc:
                raise document_error("document['values']", f"has a malformed field: {exc}") from exc
        return doc, values

    def _now(self) -> datetime:
        """The saver's clock (``STMSaver(clock=...)``), else the current UTC time."""
        life = getattr(self, "_life", None)
        return datetime.now(UTC) if life is None else datetime.fromtimestamp(life.now(), UTC)

    # -- export --------------------------------------------------------------------------
    def export_thread(self, thread_id: str) -> ThreadDocument:
        """Return the whole thread as a JSON-serializable :class:`ThreadDocument`.

        Raises :class:`~langgraph_stm.errors.InvalidArgumentError` for a thread without
        checkpoints. See the module doc for what the document holds and what it leaves
        out (pending interrupts and tasks, earlier values, subgraph values).

        Example:
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph_stm.checkpoint import STMSaver
            >>> STMSaver(InMemorySaver()).export_thread("nobody")
            Traceback (most recent call last):
            ...
            langgraph_stm._errors.InvalidArgumentError: export_thread: thread 'nobody' has no checkpoint (unknown, deleted or expired)
        """  # noqa: E501
        tid = str(thread_id)
        latest = self.get_tuple(_root(tid))
        if latest is None:
            raise _unknown(tid)
        checkpoints = list(self.inner.list(_thread(tid)))
        state = cast(_Projection, self).get_thread_state(tid)
        ttl = stored_ttl(getattr(state, "ttl", None))
        return build_document(
            tid,
            latest,
            checkpoints,
            exported_at=self._now(),
            ttl=ttl,
            expires_at=expiry_of(state, ttl, latest.checkpoint.get("ts")),
        )

    async def aexport_thread(self, thread_id: str) -> ThreadDocument:
        """Async twin of :meth:`export_thread`."""
        tid = str(thread_id)
        latest = await self.aget_tuple(_root(tid))
        if latest is None:
            raise _unknown(tid)
        checkpoints = [t async for t in self.inner.alist(_thread(tid))]
        state = await cast(_Projection, self).aget_thread_state(tid)
        ttl = stored_ttl(getattr(state, "ttl", None))
        return build_document(
            tid,
            latest,
            checkpoints,
            exported_at=self._now(),
            ttl=ttl,
            expires_at=expiry_of(state, ttl, latest.checkpoint.get("ts")),
        )

    # -- import --------------------------------------------------------------------------
    def import_thread(
        self, document: Mapping[str, Any], *, thread_id: str | None = None
    ) -> RunnableConfig:
        """Restore an exported thread into an empty thread; return the config of the one
        checkpoint written (``thread_id``, ``checkpoint_ns``, ``checkpoint_id``).

        ``thread_id`` defaults to the document's. Raises
        :class:`~langgraph_stm.errors.InvalidArgumentError` for an invalid document or a
        target thread that already has checkpoints. The imported thread is at rest (no
        pending interrupt or task); the next run starts from ``START``.

        Example:
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> from langgraph_stm.checkpoint import STMSaver
            >>> STMSaver(InMemorySaver()).import_thread({"schema": "something else"})
            Traceback (most recent call last):
            ...
            langgraph_stm._errors.InvalidArgumentError: import_thread: invalid thread document: document['schema'] must be 'langgraph-stm.thread', got 'something else'
        """  # noqa: E501
        doc, values = self._validated_values(document)
        target = _target(doc, thread_id)
        # The saver's own list: an expired thread not swept yet is empty to every read,
        # and the put below deletes it first.
        if list(self.list(_thread(target), limit=1)):
            raise _not_empty(target)
        checkpoint, versions = import_checkpoint(values, self.get_next_version)
        return self.put(_root(target), checkpoint, import_metadata(doc), versions)

    async def aimport_thread(
        self, document: Mapping[str, Any], *, thread_id: str | None = None
    ) -> RunnableConfig:
        """Async twin of :meth:`import_thread`."""
        doc, values = self._validated_values(document)
        target = _target(doc, thread_id)
        if [t async for t in self.alist(_thread(target), limit=1)]:
            raise _not_empty(target)
        checkpoint, versions = import_checkpoint(values, self.get_next_version)
        return await self.aput(_root(target), checkpoint, import_metadata(doc), versions)
