"""Where :class:`STMSaver` keeps its own rows: the base store and the in-memory store.

A store holds three things per thread: message bodies (loose, and in packs), message
list records (see ``_codec``) and the structured-state projection. Each backend module (``sqlite``,
``postgres``) provides stores over the inner saver's own connection; this module has
the shared interface and the in-memory store used with ``InMemorySaver`` (and with any
saver we have no database access for).

Database stores share :func:`write_plan`: new loose bodies, the pack that moves
loose bodies into one row once there are ``PACK_SIZE`` of them, list records and the
projection. The in-memory store keeps every body loose (there is no I/O to save).

Writes are shaped as context managers around the inner saver's call, so each backend
decides how it makes them safe: SQLite and PostgreSQL both commit our rows (bodies,
lists, projection) in one transaction just before the checkpoint, and delete a
thread's checkpoints and our rows in one transaction before the inner saver's own
``delete_thread`` runs (it then finds nothing left). A projection is trusted only while its
checkpoint id is the thread's latest, so a failed or interrupted checkpoint write is
repaired on the next read.
"""

from __future__ import annotations

import threading
from collections.abc import (
    AsyncIterator,
    Callable,
    Collection,
    Generator,
    Iterable,
    Iterator,
    Sequence,
)
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
)
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from langgraph_stm.checkpoint._codec import (
    DIGEST_SIZE,
    PACK_SIZE,
    BodyRow,
    BodySet,
    Expanded,
    ListRow,
    chunk_refs,
    expand_all,
    make_pack,
)
from langgraph_stm.checkpoint._projection import ProjectionRow

__all__ = ["MemoryStore", "Plan", "Store", "ThreadQuery", "WriteSQL", "write_plan"]


# Dialect-independent statements shared by the SQLite and Postgres stores.
SELECT_STALE = """
    SELECT c.thread_id FROM (
        SELECT thread_id, MAX(checkpoint_id) AS latest FROM checkpoints
        WHERE checkpoint_ns = '' GROUP BY thread_id
    ) AS c LEFT JOIN stm_threads AS p ON p.thread_id = c.thread_id
    WHERE p.checkpoint_id IS NULL OR p.checkpoint_id <> c.latest
"""
"""Root threads whose projection row is missing or not at their latest checkpoint."""

DELETE_ORPHAN_PROJECTIONS = """
    DELETE FROM stm_threads WHERE NOT EXISTS (
        SELECT 1 FROM checkpoints AS c
        WHERE c.thread_id = stm_threads.thread_id AND c.checkpoint_ns = ''
    )
"""
"""Projection rows of threads that no longer have a root checkpoint."""

Plan = Generator[tuple[str, Any, bool], "list[Any] | None", None]
"""Statements of a write as ``(sql, params, many)``. The rows a single statement
returns are sent back into the generator, which decides what runs next."""


@dataclass(frozen=True, slots=True)
class WriteSQL:
    """The statements :func:`write_plan` runs, in a backend's dialect."""

    select_digests: str
    """Digests of every body segment of ``(thread_id, checkpoint_ns)``."""
    insert_body: str
    """Insert a segment ``(thread_id, ns, packed, digest, digests, ends, types, body)``."""
    select_loose_if_full: str
    """Loose ``(digest, types, body)`` of ``(thread_id, ns, thread_id, ns, minimum)``,
    none unless there are at least ``minimum``."""
    delete_loose: str
    """Delete the loose body ``(thread_id, ns, digest)``."""
    insert_list: str
    upsert_projection: str


def loaded_rows(fetched: Iterable[Any], lists: Collection[bytes]) -> tuple[Expanded, BodySet]:
    """Sort the rows of a load query (``kind, a, b, length, data, types``: a body segment
    when ``kind`` is true, else a list record) and expand the lists ``lists``."""
    rows: dict[bytes, ListRow] = {}
    bodies = BodySet()
    for kind, a, b, length, data, types in fetched:
        if kind:
            bodies.add(a, b, types, data)
        else:
            rows[a] = ListRow(a, b, length, data)
    expanded, _ = expand_all(rows, lists, collect=False)
    return expanded, bodies


def list_threads_sql(
    query: ThreadQuery, *, param: str, state: str, no_limit: Any
) -> tuple[str, list[Any]]:
    """The projection query of :class:`ThreadQuery` in a dialect: its parameter marker,
    how to select ``state`` as text, and the LIMIT value that means "all"."""
    sql = f"SELECT thread_id, checkpoint_id, updated_at, message_count, {state} FROM stm_threads"
    where: list[str] = []
    params: list[Any] = []
    if query.updated_after is not None:
        where.append(f"updated_at > {param}")
        params.append(query.updated_after)
    if query.updated_before is not None:
        where.append(f"updated_at < {param}")
        params.append(query.updated_before)
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY updated_at DESC, thread_id DESC LIMIT {param} OFFSET {param}"
    params += [no_limit if query.limit is None else query.limit, query.offset]
    return sql, params


def projection_params(p: ProjectionRow) -> tuple[Any, ...]:
    return (p.thread_id, p.checkpoint_id, p.updated_at, p.message_count, p.state)


def write_plan(
    sql: WriteSQL,
    thread_id: str,
    ns: str,
    bodies: Sequence[BodyRow],
    lists: Sequence[ListRow],
    projection: ProjectionRow | None,
    order: Sequence[bytes],
    cold: bool,
) -> Plan:
    """Our part of a checkpoint write: new loose bodies (those already stored dropped
    first when ``cold``), a pack of the loose bodies once there are ``PACK_SIZE`` of them,
    the list records and the projection. Run in one transaction."""
    if bodies and cold:
        stored = yield (sql.select_digests, (thread_id, ns), False)
        known = {
            bytes(d[i : i + DIGEST_SIZE])
            for (d,) in stored or ()
            for i in range(0, len(d), DIGEST_SIZE)
        }
        bodies = [b for b in bodies if b.digest not in known]
    if bodies:
        loose_rows: list[tuple[Any, ...]] = [
            (thread_id, ns, 0, b.digest, b.digest, None, b.type, b.data) for b in bodies
        ]
        yield (sql.insert_body, loose_rows, True)
        loose = yield (
            sql.select_loose_if_full,
            (thread_id, ns, thread_id, ns, PACK_SIZE),
            False,
        )
        if loose:
            found = [(bytes(d), t, bytes(b)) for d, t, b in loose]
            pack = make_pack(found, order)
            row = (thread_id, ns, 1, pack.digest, pack.digests, pack.ends, pack.types, pack.data)
            yield (sql.insert_body, [row], True)
            # In key order, so that two writers packing at once lock rows in the same order.
            done = sorted(d for d, _, _ in found)
            yield (sql.delete_loose, [(thread_id, ns, d) for d in done], True)
    if lists:
        params = [(thread_id, ns, r.digest, r.base, r.length, r.ops) for r in lists]
        yield (sql.insert_list, params, True)
    if projection is not None:
        yield (sql.upsert_projection, projection_params(projection), False)


def delete_plan(statements: Sequence[str], thread_ids: Sequence[str]) -> Plan:
    """Delete our rows of ``thread_ids`` (each statement takes one thread id)."""
    for statement in statements:
        yield (statement, [(t,) for t in thread_ids], True)


@dataclass(frozen=True, slots=True)
class ThreadQuery:
    """Filters and paging of :meth:`STMSaver.list_threads`."""

    updated_after: str | None = None
    """Only threads updated strictly after this formatted timestamp."""
    updated_before: str | None = None
    """Only threads updated strictly before this formatted timestamp."""
    limit: int | None = None
    """At most this many threads."""
    offset: int = 0
    """Skip this many threads first (newest first order)."""


class Store:
    """Interface of a backend store. Methods a backend cannot serve raise ``NotImplementedError``.

    ``stores_full_values`` is true when the inner saver stores every channel value with
    every checkpoint (SQLite) rather than only the channels in ``new_versions``.
    """

    stores_full_values: bool = True
    has_sync: bool = True
    """False for a store over an async-only connection (``STMSaver`` then serves its sync
    methods on the inner saver's event loop, as that saver does)."""
    sync_error = "this store has no synchronous interface"
    async_error = "this store has no asynchronous interface"

    # -- sync ------------------------------------------------------------------------
    def setup(self) -> None:
        raise NotImplementedError(self.sync_error)

    def setup_guard(self) -> AbstractContextManager[None]:
        """Serialize the inner saver's setup and ours with other processes doing it."""
        return nullcontext()

    def writing(
        self,
        thread_id: str,
        checkpoint_ns: str,
        bodies: Sequence[BodyRow],
        lists: Sequence[ListRow],
        projection: ProjectionRow | None,
        *,
        order: Sequence[bytes] = (),
        cold: bool = False,
    ) -> AbstractContextManager[None]:
        """Store our rows around the inner saver's write (the ``with`` body).

        ``order`` is the written lists' body digests (the order to pack bodies in);
        ``cold`` asks to drop bodies that are already stored (see ``Encoded.cold``).
        """
        raise NotImplementedError(self.sync_error)

    def deleting(self, thread_ids: Sequence[str]) -> AbstractContextManager[None]:
        """Delete our rows of ``thread_ids`` around the inner saver's deletion (database
        stores: together with the thread's checkpoints, in one transaction, before it)."""
        raise NotImplementedError(self.sync_error)

    def load(
        self, thread_id: str, checkpoint_ns: str, lists: Collection[bytes]
    ) -> tuple[Expanded, BodySet]:
        """Return the list records for ``lists`` (and their snapshots) and the bodies."""
        raise NotImplementedError(self.sync_error)

    def get_projection(self, thread_id: str) -> tuple[ProjectionRow | None, str | None]:
        """Return the stored projection and the id of the thread's latest root checkpoint."""
        raise NotImplementedError(self.sync_error)

    def stale_threads(self) -> list[str]:
        """Threads whose projection is missing or older than their latest root checkpoint.

        Also forgets projections of threads that no longer have checkpoints.
        """
        raise NotImplementedError(self.sync_error)

    def list_projections(self, query: ThreadQuery) -> list[ProjectionRow]:
        raise NotImplementedError(self.sync_error)

    def save_projection(self, row: ProjectionRow, *, force: bool = False) -> None:
        """Upsert a projection; unless ``force``, never replace a newer checkpoint's."""
        raise NotImplementedError(self.sync_error)

    def delete_projection(self, thread_id: str) -> None:
        raise NotImplementedError(self.sync_error)

    def copy_rows(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy message bodies and list records of one thread to another."""
        raise NotImplementedError(self.sync_error)

    # -- async -----------------------------------------------------------------------
    async def asetup(self) -> None:
        raise NotImplementedError(self.async_error)

    def asetup_guard(self) -> AbstractAsyncContextManager[None]:
        """Async twin of :meth:`setup_guard`."""
        return nullcontext()

    async def acopy_rows(self, source_thread_id: str, target_thread_id: str) -> None:
        raise NotImplementedError(self.async_error)

    def awriting(
        self,
        thread_id: str,
        checkpoint_ns: str,
        bodies: Sequence[BodyRow],
        lists: Sequence[ListRow],
        projection: ProjectionRow | None,
        *,
        order: Sequence[bytes] = (),
        cold: bool = False,
    ) -> AbstractAsyncContextManager[None]:
        raise NotImplementedError(self.async_error)

    def adeleting(self, thread_ids: Sequence[str]) -> AbstractAsyncContextManager[None]:
        raise NotImplementedError(self.async_error)

    async def aload(
        self, thread_id: str, checkpoint_ns: str, lists: Collection[bytes]
    ) -> tuple[Expanded, BodySet]:
        raise NotImplementedError(self.async_error)

    async def aget_projection(self, thread_id: str) -> tuple[ProjectionRow | None, str | None]:
        raise NotImplementedError(self.async_error)

    async def astale_threads(self) -> list[str]:
        raise NotImplementedError(self.async_error)

    async def alist_projections(self, query: ThreadQuery) -> list[ProjectionRow]:
        raise NotImplementedError(self.async_error)

    async def asave_projection(self, row: ProjectionRow, *, force: bool = False) -> None:
        raise NotImplementedError(self.async_error)

    async def adelete_projection(self, thread_id: str) -> None:
        raise NotImplementedError(self.async_error)


def filter_rows(rows: Sequence[ProjectionRow], query: ThreadQuery) -> list[ProjectionRow]:
    """Apply a :class:`ThreadQuery` to rows in memory, newest first."""
    selected = [
        r
        for r in rows
        if (query.updated_after is None or r.updated_at > query.updated_after)
        and (query.updated_before is None or r.updated_at < query.updated_before)
    ]
    selected.sort(key=lambda r: (r.updated_at, r.thread_id), reverse=True)
    end = None if query.limit is None else query.offset + query.limit
    return selected[query.offset : end]


class MemoryStore(Store):
    """Keeps our rows in process memory; used with ``InMemorySaver`` and unknown savers.

    ``latest`` returns a thread's latest root checkpoint id; for ``InMemorySaver`` it
    reads the saver's public ``storage`` mapping, otherwise it asks the saver.
    """

    stores_full_values = False

    def __init__(self, inner: BaseCheckpointSaver[Any]) -> None:
        self.inner = inner
        self.lock = threading.RLock()
        self.bodies: dict[tuple[str, str, bytes], tuple[str, bytes]] = {}
        self.lists: dict[tuple[str, str, bytes], ListRow] = {}
        self.projections: dict[str, ProjectionRow] = {}
        storage = getattr(inner, "storage", None)
        self.latest: Callable[[str], str | None]
        if isinstance(storage, dict):
            self.stores_full_values = False

            def latest(thread_id: str) -> str | None:
                root = storage.get(thread_id, {}).get("")
                return max(root) if root else None

            def threads() -> list[str]:
                return [t for t, by_ns in list(storage.items()) if by_ns.get("")]

        else:
            self.stores_full_values = True

            def latest(thread_id: str) -> str | None:
                config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
                tup = inner.get_tuple(config)  # type: ignore[arg-type]
                return None if tup is None else str(tup.checkpoint["id"])

            def threads() -> list[str]:
                return list(self.projections)

        self.latest = latest
        self.threads = threads

    def setup(self) -> None:
        return None

    @contextmanager
    def writing(
        self,
        thread_id: str,
        checkpoint_ns: str,
        bodies: Sequence[BodyRow],
        lists: Sequence[ListRow],
        projection: ProjectionRow | None,
        *,
        order: Sequence[bytes] = (),
        cold: bool = False,
    ) -> Iterator[None]:
        self.put_rows(thread_id, checkpoint_ns, bodies, lists)
        yield
        if projection is not None:
            self.save_projection(projection)

    @contextmanager
    def deleting(self, thread_ids: Sequence[str]) -> Iterator[None]:
        yield
        self.delete_rows(thread_ids)

    @asynccontextmanager
    async def awriting(
        self,
        thread_id: str,
        checkpoint_ns: str,
        bodies: Sequence[BodyRow],
        lists: Sequence[ListRow],
        projection: ProjectionRow | None,
        *,
        order: Sequence[bytes] = (),
        cold: bool = False,
    ) -> AsyncIterator[None]:
        self.put_rows(thread_id, checkpoint_ns, bodies, lists)
        yield
        if projection is not None:
            self.save_projection(projection)

    @asynccontextmanager
    async def adeleting(self, thread_ids: Sequence[str]) -> AsyncIterator[None]:
        yield
        self.delete_rows(thread_ids)

    def put_rows(
        self,
        thread_id: str,
        checkpoint_ns: str,
        bodies: Sequence[BodyRow],
        lists: Sequence[ListRow],
    ) -> None:
        with self.lock:
            for b in bodies:
                self.bodies.setdefault((thread_id, checkpoint_ns, b.digest), (b.type, b.data))
            for row in lists:
                key = (thread_id, checkpoint_ns, row.digest)
                current = self.lists.get(key)
                # A snapshot replaces a delta of the same list, never the reverse.
                if current is None or (row.base is None and current.base is not None):
                    self.lists[key] = row

    def copy_rows(self, source_thread_id: str, target_thread_id: str) -> None:
        with self.lock:
            for (t, ns, d), body in list(self.bodies.items()):
                if t == source_thread_id:
                    self.bodies[(target_thread_id, ns, d)] = body
            for (t, ns, d), row in list(self.lists.items()):
                if t == source_thread_id:
                    self.lists[(target_thread_id, ns, d)] = row

    async def acopy_rows(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_rows(source_thread_id, target_thread_id)

    def save_projection(self, row: ProjectionRow, *, force: bool = False) -> None:
        with self.lock:
            current = self.projections.get(row.thread_id)
            if force or current is None or row.checkpoint_id >= current.checkpoint_id:
                self.projections[row.thread_id] = row

    def delete_rows(self, thread_ids: Sequence[str]) -> None:
        wanted = set(thread_ids)
        with self.lock:
            for key in [k for k in self.bodies if k[0] in wanted]:
                del self.bodies[key]
            for lkey in [k for k in self.lists if k[0] in wanted]:
                del self.lists[lkey]
            for t in wanted:
                self.projections.pop(t, None)

    def load(
        self, thread_id: str, checkpoint_ns: str, lists: Collection[bytes]
    ) -> tuple[Expanded, BodySet]:
        with self.lock:
            rows: dict[bytes, ListRow] = {}
            for d in lists:
                row = self.lists.get((thread_id, checkpoint_ns, d))
                if row is not None:
                    rows[d] = row
                    if row.base is not None:
                        base = self.lists.get((thread_id, checkpoint_ns, row.base))
                        if base is not None:
                            rows[row.base] = base
                            row = base
                    for ref in chunk_refs(row) if row.base is None else ():
                        chunk = self.lists.get((thread_id, checkpoint_ns, ref))
                        if chunk is not None:
                            rows[ref] = chunk
            expanded, wanted = expand_all(rows, lists)
            bodies = BodySet()
            for d in wanted:
                body = self.bodies.get((thread_id, checkpoint_ns, d))
                if body is not None:
                    bodies.add(d, None, body[0], body[1])
        return expanded, bodies

    def get_projection(self, thread_id: str) -> tuple[ProjectionRow | None, str | None]:
        with self.lock:
            return self.projections.get(thread_id), self.latest(thread_id)

    def stale_threads(self) -> list[str]:
        with self.lock:
            stale = []
            for thread_id in self.threads():
                row = self.projections.get(thread_id)
                if row is None or row.checkpoint_id != self.latest(thread_id):
                    stale.append(thread_id)
            for thread_id in list(self.projections):
                if self.latest(thread_id) is None:
                    del self.projections[thread_id]
            return stale

    def list_projections(self, query: ThreadQuery) -> list[ProjectionRow]:
        with self.lock:
            rows = list(self.projections.values())
        return filter_rows(rows, query)

    def delete_projection(self, thread_id: str) -> None:
        with self.lock:
            self.projections.pop(thread_id, None)

    # The in-memory store does no I/O, so its async methods are its sync methods.
    async def asetup(self) -> None:
        return None

    async def aload(
        self, thread_id: str, checkpoint_ns: str, lists: Collection[bytes]
    ) -> tuple[Expanded, BodySet]:
        return self.load(thread_id, checkpoint_ns, lists)

    async def aget_projection(self, thread_id: str) -> tuple[ProjectionRow | None, str | None]:
        return self.get_projection(thread_id)

    async def astale_threads(self) -> list[str]:
        return self.stale_threads()

    async def alist_projections(self, query: ThreadQuery) -> list[ProjectionRow]:
        return self.list_projections(query)

    async def asave_projection(self, row: ProjectionRow, *, force: bool = False) -> None:
        self.save_projection(row, force=force)

    async def adelete_projection(self, thread_id: str) -> None:
        self.delete_projection(thread_id)
