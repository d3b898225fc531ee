""":class:`STMSaver`, the public checkpointer: constructors and setup on top of the
pipeline (:mod:`._saver`), the thread lifecycle (:mod:`._retention`), removal
(:mod:`._maintenance`) and the thread index (:mod:`._index`)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from langgraph_stm._errors import InvalidArgumentError
from langgraph_stm.checkpoint._audit import AuditLog
from langgraph_stm.checkpoint._conflicts import Conflicts
from langgraph_stm.checkpoint._encryption import Encryption
from langgraph_stm.checkpoint._export import ThreadExport
from langgraph_stm.checkpoint._index import ThreadIndex
from langgraph_stm.checkpoint._redact import Redaction
from langgraph_stm.checkpoint._scope_threads import Scope

__all__ = ["STMSaver"]


class STMSaver(Scope, Conflicts, Redaction, Encryption, AuditLog, ThreadIndex, ThreadExport):
    """Wrap a checkpointer to add a per-thread structured-state projection and linear storage.

    Every sync method forwards to the inner saver's sync method and every async method
    to its async method (over ``AsyncSqliteSaver``/``AsyncPostgresSaver``, sync methods
    run on the saver's event loop, from any thread but the loop's, as theirs do). On top:

    - **Linear storage**: every channel value that is a list of LangChain messages is
      stored as message bodies, each once per thread, plus a compact list record; on
      SQLite, other large values (a summary, a plan) are stored once per distinct value.
      ``get_tuple``/``list`` return what the inner saver would have returned without
      the wrapper, reading only the rows the checkpoint references.
    - **Projection**: the latest goal, plan, constraints, artifacts, last_error,
      summary and message count of every thread, readable with :meth:`get_thread_state`
      / :meth:`list_threads` without loading a checkpoint.
    - **Reclaim**: :meth:`prune` on every backend, and :meth:`vacuum`, remove rows no
      remaining checkpoint references, safely against concurrent writers.
    - **Validation**: a node's malformed update of an ``STMState`` field raises
      :class:`~langgraph_stm.StateUpdateError` before anything is stored
      (``validate_writes=False`` turns it off for graphs that use these channel names
      for other shapes); messages written without an id get a stable one.
    - **Offloaded outputs**: a checkpointer never sees the graph's store, so the saver
      is told of it: ``STMSaver(inner, store=store)`` (or ``STMSaver.from_sqlite(path,
      store=store)``, any constructor), with the same LangGraph ``BaseStore`` passed to
      ``graph.compile(store=store)``. :meth:`delete_thread` and
      ``prune(..., strategy="delete")`` then also delete the tool outputs
      :class:`~langgraph_stm._offload.Offloader` put in the thread's namespace.
    - **TTL**: ``ttl=timedelta(...)`` expires a thread that long after its last root
      checkpoint write; a thread's own TTL (``config["configurable"]["ttl"]`` at its
      first write, or :meth:`set_ttl`) wins over it. An expired thread reads as if it
      did not exist until :meth:`sweep` deletes it (in bounded batches). The clock is
      injectable (``clock=``, a callable returning an aware UTC datetime).
    - **Deletion that stays deleted**: :meth:`delete_thread` removes every row of the
      thread (the inner saver's, ours, every namespace, the store's offloaded outputs)
      and returns a :class:`~langgraph_stm.checkpoint.DeletionReport`; for at least
      ``deleted_grace`` (default one day) a late write carrying the deleted thread's
      checkpoint raises :class:`~langgraph_stm.errors.ThreadDeletedError`, while a
      fresh run on the same id starts a new thread.
    - **Export**: :meth:`export_thread` returns a versioned JSON document of the thread
      (latest values, checkpoint ids and timestamps, TTL); :meth:`import_thread`
      restores it into an empty thread of any backend.
    - **Redaction** (``redact=True`` for the built-in detectors, or
      ``redact=Redactor(...)``, see :mod:`langgraph_stm.redaction`): API keys, tokens,
      JWTs, passwords, private keys and Luhn-valid card numbers in messages, tool calls,
      tool results, structured fields, metadata and pending writes are replaced by typed
      markers (``[REDACTED:api_key]``) before anything reaches the database; the live
      run is not altered, a resumed run sees the markers. With ``secret_ttl=`` a thread
      in which a secret was found expires that long after its last write (or sooner, if
      its own TTL is shorter).
    - **Encryption at rest** (``encryption_key=`` a key, a
      :class:`~langgraph_stm.encryption.Keyring` or a callable owner -> key): checkpoint
      blobs, pending writes, metadata values, message bodies, the projection and audit
      entries are sealed with AES-256-GCM after redaction; :meth:`reencrypt` rotates
      (see ``docs/encryption.md``).
    - **Tenant scoping** (``tenant_key="tenant_id"``): a thread is bound at its first
      write to ``config["configurable"]["tenant_id"]``; reads, writes, listing, export
      and deletion under another owner (or none) raise
      :class:`~langgraph_stm.errors.ThreadScopeError`; the thread methods take
      ``owner=``.
    - **Exclusive runs** (``exclusive_runs=True``): a run claims its thread when it
      reads the latest checkpoint; a second run continuing the same checkpoint (two
      workers resuming one interrupt) raises
      :class:`~langgraph_stm.errors.CheckpointConflict` before any of its tasks ran.
      The claim lapses ``run_lease`` (default 30 s) after the run's last write;
      :meth:`release_run` frees a thread whose worker died. Forks from past
      checkpoints never conflict.
    - **Audit trail** (``audit=True``): one entry per run, written with its checkpoints:
      the checkpoint it resumed from, the owner, and which sections ``build_context``
      injected (ids and counts, never text); :meth:`audit_log` reads them.

    Supported inner savers: ``InMemorySaver``, ``SqliteSaver``, ``AsyncSqliteSaver``,
    ``PostgresSaver`` and ``AsyncPostgresSaver``. Any other saver is wrapped with the
    projection kept in memory and message lists passed through unchanged. Wrapping a
    saver that has ``copy_thread`` or ``delete_for_runs`` exposes them only through
    :meth:`wrap`.

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from langgraph.graph import START, StateGraph
        >>> from langgraph_stm import STMState
        >>> def plan(state: STMState) -> dict:
        ...     return {"goal": "ship v2", "messages": [("ai", "on it")]}
        >>> saver = STMSaver(InMemorySaver())
        >>> graph = StateGraph(STMState).add_node(plan).add_edge(START, "plan")
        >>> graph = graph.compile(checkpointer=saver)
        >>> config = {"configurable": {"thread_id": "t1"}}
        >>> _ = graph.invoke({"messages": [("user", "hi")]}, config)
        >>> state = saver.get_thread_state("t1")
        >>> state.goal, state.message_count
        ('ship v2', 2)
    """

    def __init__(
        self, inner: BaseCheckpointSaver[Any], /, *, store: BaseStore | None = None, **options: Any
    ) -> None:
        if store is not None and not isinstance(store, BaseStore):
            raise InvalidArgumentError(
                "STMSaver(store=...) takes the LangGraph BaseStore the graph is compiled "
                f"with, got {type(store).__name__}"
            )
        super().__init__(inner, **options)
        if self._secret_ttl is not None and self.redactor is None:
            raise InvalidArgumentError(
                "STMSaver(secret_ttl=...) shortens the TTL of threads in which redaction "
                "found a secret: it needs redact=True (or a Redactor)"
            )
        self.store = store

    @classmethod
    def wrap(cls, inner: BaseCheckpointSaver[Any], /, **options: Any) -> STMSaver:
        """Wrap ``inner``, also exposing the optional ``copy_thread`` / ``delete_for_runs``
        (and async twins) that ``inner`` implements.

        The conformance suite and LangGraph detect an optional capability by an override
        on the class, so these need a class of their own; ``STMSaver(inner)`` never has
        them (LangGraph's own savers implement neither).

        Example:
            >>> from langgraph.checkpoint.memory import InMemorySaver
            >>> type(STMSaver.wrap(InMemorySaver())) is STMSaver
            True
        """
        from langgraph_stm.checkpoint._capabilities import capability_class

        saver: STMSaver = capability_class(cls, type(inner))(inner, **options)
        return saver

    # -- convenience constructors -------------------------------------------------------
    @classmethod
    @contextmanager
    def from_sqlite(cls, path: str | Path, **kwargs: Any) -> Iterator[STMSaver]:
        """Open a SQLite file (or ``":memory:"``) with a ``SqliteSaver`` inside.

        Example:
            >>> with STMSaver.from_sqlite(":memory:") as saver:
            ...     saver.setup()
            ...     saver.list_threads()
            []
        """
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver
        except ImportError:
            raise ImportError(
                "STMSaver.from_sqlite needs langgraph-checkpoint-sqlite: "
                "pip install 'langgraph-stm[sqlite]'"
            ) from None
        with SqliteSaver.from_conn_string(str(path)) as inner:
            yield cls(inner, **kwargs)

    @classmethod
    @asynccontextmanager
    async def from_async_sqlite(cls, path: str | Path, **kwargs: Any) -> AsyncIterator[STMSaver]:
        """Open a SQLite file with an ``AsyncSqliteSaver`` inside (async methods only)."""
        try:
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
        except ImportError:
            raise ImportError(
                "STMSaver.from_async_sqlite needs langgraph-checkpoint-sqlite and aiosqlite: "
                "pip install 'langgraph-stm[sqlite]'"
            ) from None
        async with AsyncSqliteSaver.from_conn_string(str(path)) as inner:
            yield cls(inner, **kwargs)

    @classmethod
    @contextmanager
    def from_postgres(
        cls, conn_string: str, *, pipeline: bool = False, **kwargs: Any
    ) -> Iterator[STMSaver]:
        """Connect to PostgreSQL with a ``PostgresSaver`` inside. Call :meth:`setup` once."""
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            raise ImportError(
                "STMSaver.from_postgres needs langgraph-checkpoint-postgres and psycopg: "
                "pip install 'langgraph-stm[postgres]'"
            ) from None
        with PostgresSaver.from_conn_string(conn_string, pipeline=pipeline) as inner:
            yield cls(inner, **kwargs)

    @classmethod
    @asynccontextmanager
    async def from_async_postgres(
        cls, conn_string: str, *, pipeline: bool = False, **kwargs: Any
    ) -> AsyncIterator[STMSaver]:
        """Connect to PostgreSQL with an ``AsyncPostgresSaver`` inside. Await :meth:`asetup`."""
        try:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        except ImportError:
            raise ImportError(
                "STMSaver.from_async_postgres needs langgraph-checkpoint-postgres and psycopg: "
                "pip install 'langgraph-stm[postgres]'"
            ) from None
        async with AsyncPostgresSaver.from_conn_string(conn_string, pipeline=pipeline) as inner:
            yield cls(inner, **kwargs)

    # -- setup ---------------------------------------------------------------------------
    def setup(self) -> None:
        """Create the inner saver's tables (if it has a sync ``setup``) and ours."""
        inner_setup = getattr(self.inner, "setup", None)
        if inner_setup is not None and inspect.iscoroutinefunction(inner_setup):
            raise NotImplementedError(
                f"{type(self.inner).__name__} sets up asynchronously: await saver.asetup()"
            )
        driver = self._sync_driver()
        guard = getattr(driver, "setup_guard", None)
        with guard() if guard is not None else nullcontext():
            if inner_setup is not None and self._inner.kind != "sqlite":
                inner_setup()
            driver.setup()

    async def asetup(self) -> None:
        """Async twin of :meth:`setup`."""
        driver = self._async_driver()
        if driver is None:
            inner_setup = getattr(self.inner, "setup", None)
            if inner_setup is not None and not inspect.iscoroutinefunction(inner_setup):
                raise NotImplementedError(
                    f"{type(self.inner).__name__} sets up synchronously: call saver.setup()"
                )
            self._sync_driver().setup()
            return
        guard = getattr(driver, "setup_guard", None)
        if guard is not None:
            async with guard():
                await self.inner.setup()  # type: ignore[attr-defined]
                await driver.setup()
        else:
            await driver.setup()
