"""Exclusive runs: one live run continues a thread at a time (``exclusive_runs=True``).

Two workers that resume the same interrupt both load the same checkpoint, both run the
approved tool, and both write children of that checkpoint: the chain forks and the tool
ran twice. LangGraph writes nothing before a resumed run's first task starts (its
writes are saved in the background, after the task ran), so a claim taken at the first
write comes too late. The claim is taken where every run starts: at the **read**.

- A run's read of its thread's latest root checkpoint (LangGraph's loop reads with
  ``config["configurable"][CONFIG_KEY_RUNTIME]`` set; ``get_state`` does not) claims the
  thread, atomically: ``stm_claims (thread_id, checkpoint_id, token, expires_at)``. The
  token goes back in the tuple's config, so every later write of that run carries it.
- A read while another run's claim is live raises :class:`CheckpointConflict` before
  the run has done anything; retried, the run starts from the thread's new head.
- The claim follows its run's checkpoints and lapses ``run_lease`` after the run's last
  write (every write renews it). It is released as soon as the run ends: its last
  checkpoint triggers no node, or it wrote an interrupt or an error.
- A write whose parent is the checkpoint another live run holds (``update_state`` on
  the head, a run on a new thread started twice) is refused the same way. A write from
  an older checkpoint is an explicit fork (``update_state`` or a replay addressed at a
  past ``checkpoint_id``) and never conflicts.

A run that stops without any of those signs (its process was killed, it failed before
its first write, a static ``interrupt_before``) holds the thread until its lease
lapses, or until :meth:`Conflicts.release_run` frees it.

Example:
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> from langgraph.graph import START, StateGraph
    >>> from langgraph.types import Command, interrupt
    >>> from langgraph_stm import STMSaver, STMState
    >>> def ask(state: STMState) -> dict:
    ...     return {"goal": interrupt("approve?")}
    >>> saver = STMSaver(InMemorySaver(), exclusive_runs=True)
    >>> graph = StateGraph(STMState).add_node(ask).add_edge(START, "ask")
    >>> graph = graph.compile(checkpointer=saver)
    >>> config = {"configurable": {"thread_id": "t1"}}
    >>> _ = graph.invoke({"messages": [("user", "go")]}, config)
    >>> graph.invoke(Command(resume="ship it"), config)["goal"]
    'ship it'
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from langgraph_stm._errors import CheckpointConflict, InvalidArgumentError
from langgraph_stm.checkpoint._inner import (
    RUN_ENDING_CHANNELS,
    RUNTIME_KEY,
    is_run_read,
    latest_in_memory,
    triggers_a_node,
)
from langgraph_stm.checkpoint._lifecycle import Lifecycle
from langgraph_stm.checkpoint._pipeline import ids
from langgraph_stm.checkpoint._saver import SaverCore, bridged
from langgraph_stm.checkpoint._tables import Dialect, Plan, Stmt, lock_plan

__all__ = ["RUN_KEY", "Claim", "Conflicts"]

RUN_KEY = "__stm_run__"
"""The ``configurable`` key carrying a run's claim token from its read to its writes
(a ``__`` key: LangGraph copies no such key into checkpoint metadata)."""
_ANONYMOUS = ""
"""The token of a claim taken at a new thread's first write (its run read nothing)."""


@dataclass(frozen=True, slots=True)
class Claim:
    """The live claim on a thread."""

    token: str
    checkpoint_id: str
    expires_at: float
    ended_at: str | None = None
    """The checkpoint whose pending writes ended the run (an interrupt, an error), when
    they arrived before the checkpoint itself (LangGraph saves both in the background):
    that checkpoint's write then releases the claim instead of moving it."""


def _conflict(thread_id: str, claim: Claim, what: str) -> CheckpointConflict:
    until = datetime.fromtimestamp(claim.expires_at, UTC)
    return CheckpointConflict(
        f"thread {thread_id!r}: {what} checkpoint {claim.checkpoint_id}, which another "
        "live run is continuing; nothing of this run was executed or stored. Retry when "
        f"that run is done (its claim lapses at {until.isoformat()} if it stops writing), "
        "or address a past checkpoint_id to fork on purpose",
        thread_id=thread_id,
        checkpoint_id=claim.checkpoint_id,
        held_until=until,
    )


def _live(d: Dialect, thread_id: str, now: float) -> Plan:
    """The thread's claim if it is live (``None`` otherwise), under the thread's lock
    (PostgreSQL: every plan below reads and then writes the row; SQLite's immediate
    transactions serialize them already)."""
    yield from lock_plan(d, [thread_id])
    sql = (
        "SELECT token, checkpoint_id, expires_at, ended_at FROM stm_claims "
        f"WHERE thread_id = {d.param}"
    )
    rows = (yield Stmt(sql, [thread_id])) or []
    if not rows or float(rows[0][2]) <= now:
        return None
    token, checkpoint_id, expires_at, ended_at = rows[0]
    ended = None if ended_at is None else str(ended_at)
    return Claim(str(token), str(checkpoint_id), float(expires_at), ended)


def _set(d: Dialect, thread_id: str, claim: Claim) -> Plan:
    p = d.param
    sql = (
        "INSERT INTO stm_claims (thread_id, checkpoint_id, token, expires_at, ended_at) "
        f"VALUES ({p}, {p}, {p}, {p}, {p}) ON CONFLICT (thread_id) DO UPDATE SET "
        "checkpoint_id = excluded.checkpoint_id, token = excluded.token, "
        "expires_at = excluded.expires_at, ended_at = excluded.ended_at"
    )
    row = (thread_id, claim.checkpoint_id, claim.token, claim.expires_at, claim.ended_at)
    yield Stmt(sql, [row], many=True)
    return None


def _release(d: Dialect, thread_id: str) -> Plan:
    yield Stmt(f"DELETE FROM stm_claims WHERE thread_id = {d.param}", [(thread_id,)], many=True)
    return None


def claim_plan(d: Dialect, thread_id: str, claim: Claim, now: float, latest: Plan) -> Plan:
    """Claim the thread at a run's read, or raise :class:`CheckpointConflict` if a
    live claim holds it, or if the checkpoint read is no longer the latest (``latest``
    reads the thread's latest root checkpoint id): a run that ended between this
    run's read and its claim released the thread, but this run read the state before
    that run's last checkpoint. The thread's lock, held by every checkpoint write
    until the inner saver stored it, lets one of two racing readers through."""
    held = yield from _live(d, thread_id, now)
    if held is not None:
        raise _conflict(thread_id, held, "this run read")
    head = yield from latest
    if head is not None and head != claim.checkpoint_id:
        moved = Claim(claim.token, str(head), now)
        raise _conflict(thread_id, moved, f"this run read {claim.checkpoint_id}, older than")
    return (yield from _set(d, thread_id, claim))


def put_plan(
    d: Dialect,
    thread_id: str,
    parent: str | None,
    token: str | None,
    by_run: bool,
    after: Claim | None,
    now: float,
    plan: Plan,
) -> Plan:
    """Check a root checkpoint write against the thread's claim, then run ``plan`` and
    move the claim to the new checkpoint (``after``; ``None``: the run ended). Only a
    run (``by_run``) claims a new thread at its first write; ``update_state``, imports
    and copies never claim."""
    held = yield from _live(d, thread_id, now)
    if token is not None:  # a run that claimed the thread at its read
        if held is not None and held.token != token:
            raise _conflict(thread_id, held, "this run writes on top of")
        mine = True
    elif held is None:  # nobody holds it: only a run's first write of a new thread claims
        mine = parent is None and by_run
    elif by_run and held.token == _ANONYMOUS and held.checkpoint_id == parent:
        mine = True  # the run that started the thread goes on
    elif parent is None or held.checkpoint_id == parent:
        raise _conflict(thread_id, held, "this write continues")
    else:  # an explicit fork from an older checkpoint
        mine = False
    result = yield from plan
    if mine:
        ended_at = None if held is None else held.ended_at
        if after is None or ended_at == after.checkpoint_id:
            yield from _release(d, thread_id)
        else:  # writes may run ahead of their checkpoint by more than one step
            yield from _set(d, thread_id, dataclasses.replace(after, ended_at=ended_at))
    return result


def writes_plan(
    d: Dialect,
    thread_id: str,
    checkpoint_id: str | None,
    token: str | None,
    ends: bool,
    now: float,
    renewed: float,
) -> Plan:
    """Check pending writes of a run against the claim; renew it, or release it when the
    writes end the run (an interrupt, an error)."""
    held = yield from _live(d, thread_id, now)
    if held is None:
        return None
    if held.token != (token or _ANONYMOUS):
        if token is not None and held.checkpoint_id == checkpoint_id:
            raise _conflict(thread_id, held, "this run's task writes belong to")
        return None
    if ends and held.checkpoint_id == checkpoint_id:
        return (yield from _release(d, thread_id))
    if ends:  # the writes overtook their checkpoint: its write will release the claim
        held = dataclasses.replace(held, ended_at=checkpoint_id)
    return (yield from _set(d, thread_id, dataclasses.replace(held, expires_at=renewed)))


class Conflicts(SaverCore):
    """Exclusive runs for :class:`STMSaver` (see the module doc)."""

    _life: Lifecycle

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        /,
        *,
        exclusive_runs: bool = False,
        run_lease: timedelta | float = timedelta(seconds=30),
        **options: Any,
    ) -> None:
        if not isinstance(exclusive_runs, bool):
            raise InvalidArgumentError(
                f"STMSaver(exclusive_runs=...) must be True or False, got {exclusive_runs!r}"
            )
        lease = run_lease.total_seconds() if isinstance(run_lease, timedelta) else run_lease
        if isinstance(lease, bool) or not isinstance(lease, int | float) or not lease > 0:
            raise InvalidArgumentError(
                "STMSaver(run_lease=...) must be a positive timedelta or number of seconds, "
                f"got {run_lease!r}"
            )
        super().__init__(inner, **options)
        self.exclusive_runs = exclusive_runs
        self._lease = float(lease)

    @property
    def run_lease(self) -> timedelta:
        """How long a run's claim outlives its last write (see the module doc)."""
        return timedelta(seconds=self._lease)

    # -- the read: a run claims the thread ------------------------------------------------
    def _claim_for(self, config: RunnableConfig, tup: CheckpointTuple | None) -> Claim | None:
        """The claim a read should take (``None``: this read takes none)."""
        _, ns, checkpoint_id = ids(config)
        if not self.exclusive_runs or tup is None or ns or checkpoint_id is not None:
            return None
        if not is_run_read(config):
            return None
        now = self._life.now()
        return Claim(uuid.uuid4().hex, str(ids(tup.config)[2]), now + self._lease)

    def _latest_plan(self, thread_id: str) -> Plan:
        """The id of the thread's latest root checkpoint, read in the claim's
        transaction (from the inner saver's own rows when they share our database)."""
        if self._tables.in_database:
            rows = yield Stmt(self._tables.latest_root_sql(), [thread_id])
            return None if not rows or rows[0][0] is None else str(rows[0][0])
        return latest_in_memory(self.inner, thread_id)

    @staticmethod
    def _tokened(tup: CheckpointTuple, claim: Claim) -> CheckpointTuple:
        configurable = {**tup.config.get("configurable", {}), RUN_KEY: claim.token}
        return tup._replace(config={**tup.config, "configurable": configurable})

    @bridged("aget_tuple")
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Fetch a checkpoint tuple (see :meth:`SaverCore.get_tuple`); a run's read of the
        latest checkpoint claims the thread."""
        tup = super().get_tuple(config)
        claim = self._claim_for(config, tup)
        if tup is None or claim is None:
            return tup
        thread_id = ids(config)[0]
        latest = self._latest_plan(thread_id)
        plan = claim_plan(self._tables.dialect, thread_id, claim, self._life.now(), latest)
        self._sync_driver().write(plan)
        return self._tokened(tup, claim)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async twin of :meth:`get_tuple`."""
        tup = await super().aget_tuple(config)
        claim = self._claim_for(config, tup)
        if tup is None or claim is None:
            return tup
        thread_id = ids(config)[0]
        latest = self._latest_plan(thread_id)
        plan = claim_plan(self._tables.dialect, thread_id, claim, self._life.now(), latest)
        await self._awrite(plan)
        return self._tokened(tup, claim)

    # -- the writes -----------------------------------------------------------------------
    def _around_write(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        plan: Plan,
    ) -> Plan:
        plan = super()._around_write(config, checkpoint, metadata, plan)
        thread_id, ns, parent = ids(config)
        if not self.exclusive_runs or ns:
            return plan
        token = config.get("configurable", {}).get(RUN_KEY)
        now = self._life.now()
        after = None
        if triggers_a_node(checkpoint):
            after = Claim(token or _ANONYMOUS, str(checkpoint["id"]), now + self._lease)
        by_run = RUNTIME_KEY in config.get("configurable", {})
        d = self._tables.dialect
        return put_plan(d, thread_id, parent, token, by_run, after, now, plan)

    def _writes_plan(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]]) -> Plan:
        thread_id, _, checkpoint_id = ids(config)
        token = config.get("configurable", {}).get(RUN_KEY)
        ends = any(channel in RUN_ENDING_CHANNELS for channel, _ in writes)
        now = self._life.now()
        d = self._tables.dialect
        return writes_plan(d, thread_id, checkpoint_id, token, ends, now, now + self._lease)

    def _checks_writes(self, config: RunnableConfig) -> bool:
        return self.exclusive_runs and not ids(config)[1]

    @bridged("aput_writes")
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store pending writes (see :meth:`SaverCore.put_writes`) of the run holding the
        thread, renewing its claim."""
        if self._checks_writes(config):
            self._sync_driver().write(self._writes_plan(config, writes))
        super().put_writes(config, writes, task_id, task_path)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of :meth:`put_writes`."""
        if self._checks_writes(config):
            await self._awrite(self._writes_plan(config, writes))
        await super().aput_writes(config, writes, task_id, task_path)

    # -- operators ------------------------------------------------------------------------
    def release_run(self, thread_id: str) -> bool:
        """Free a thread held by a run that will not come back (its worker was killed);
        return whether it was held. A run still alive is refused at its next write."""
        return bool(self._sync_driver().write(self._release_plan(str(thread_id))))

    async def arelease_run(self, thread_id: str) -> bool:
        """Async twin of :meth:`release_run`."""
        return bool(await self._awrite(self._release_plan(str(thread_id))))

    def _release_plan(self, thread_id: str) -> Plan:
        d = self._tables.dialect
        held = yield from _live(d, thread_id, self._life.now())
        yield from _release(d, thread_id)
        return held is not None
