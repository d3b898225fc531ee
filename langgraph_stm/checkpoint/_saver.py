"""STMSaver: forwards every call to the inner saver and runs the storage pipeline.

write (``put``): encode (references, content-addressed rows) -> our rows and the
projection, in the transaction rules of the backend (:mod:`._sqlite`, :mod:`._postgres`)
-> the inner saver's ``put``.
read (``get_tuple``/``list``): the inner saver -> only the rows its references name
(cached bodies skipped) -> decode.

One hook lets the concerns above this class join a checkpoint write's transaction:
:meth:`SaverCore._around_write` wraps the plan of the checkpoint's rows (the retention
guard and the lifecycle row, :mod:`._retention`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from langgraph_stm.checkpoint._backend import tables_for
from langgraph_stm.checkpoint._encoder import Encoder
from langgraph_stm.checkpoint._format import FormatError
from langgraph_stm.checkpoint._inner import inspect_inner
from langgraph_stm.checkpoint._pipeline import Pipeline, ids, seed_tuple, storage_error, with_seeds
from langgraph_stm.checkpoint._tables import Plan
from langgraph_stm.checkpoint._writes import checked_writes

__all__ = ["SaverCore", "bridged"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def bridged(
    async_name: str,
) -> Callable[[Callable[Concatenate[Any, _P], _R]], Callable[Concatenate[Any, _P], _R]]:
    """Serve a sync method through its async twin on the inner saver's event loop when
    the inner saver is asynchronous, as those savers serve their own sync methods."""

    def decorate(method: Callable[Concatenate[Any, _P], _R]) -> Callable[Concatenate[Any, _P], _R]:
        @functools.wraps(method)
        def run(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            loop = self._loop
            if loop is None:
                return method(self, *args, **kwargs)
            try:
                running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                raise asyncio.InvalidStateError(
                    f"Synchronous calls to STMSaver({type(self.inner).__name__}) are only "
                    "allowed from a different thread. From the event loop's thread, use the "
                    "async interface (await saver.aget_tuple(...), await graph.ainvoke(...))."
                )

            async def call() -> Any:
                result = getattr(self, async_name)(*args, **kwargs)
                if inspect.isasyncgen(result):
                    return iter([item async for item in result])
                return await result

            return cast(_R, asyncio.run_coroutine_threadsafe(call(), loop).result())

        return run

    return decorate


class SaverCore(BaseCheckpointSaver[Any]):
    """The forwarding half of :class:`STMSaver` (see there)."""

    def __init__(
        self,
        inner: BaseCheckpointSaver[Any],
        /,
        *,
        validate_writes: bool = True,
        delta_limit: int = 24,
        linear_messages: bool | None = None,
    ) -> None:
        super().__init__(serde=inner.serde)
        self.inner = inner
        self.serde = inner.serde
        self._inner = inspect_inner(inner)
        self._tables = tables_for(self._inner)
        self.linear_messages = (
            self._inner.kind is not None if linear_messages is None else linear_messages
        )
        self.validate_writes = validate_writes
        self._encoder = Encoder(
            inner.serde, delta_limit=delta_limit, full_values=self._inner.full_values
        )
        self._loop = self._inner.loop
        self._pipeline = Pipeline(self._inner, self._tables, self._encoder, self.linear_messages)

    # -- plumbing ------------------------------------------------------------------------
    @property
    def config_specs(self) -> list[Any]:
        return self.inner.config_specs

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)

    def with_allowlist(self, extra_allowlist: Any) -> Any:
        inner = self.inner.with_allowlist(extra_allowlist)
        if inner is self.inner:
            return self
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.inner = inner
        # An encrypted saver's inner serde seals; our rows are encoded with the plain one.
        plain = inner.serde.serde if isinstance(inner.serde, EncryptedSerializer) else inner.serde
        clone.serde = plain
        clone._encoder = Encoder(
            plain,
            delta_limit=self._encoder.delta_limit,
            full_values=self._encoder.full_values,
            messages=self._encoder.messages,
        )
        clone._pipeline = Pipeline(
            clone._inner, clone._tables, clone._encoder, clone.linear_messages
        )
        clone._pipeline.crypt = self._pipeline.crypt
        return clone

    def _sync_driver(self) -> Any:
        driver = self._tables.sync
        if driver is None:
            raise NotImplementedError(
                f"{type(self.inner).__name__} is asynchronous: use the async methods"
            )
        return driver

    def _async_driver(self) -> Any:
        return self._tables.aio

    async def _aread(self, plan: Plan) -> Any:
        driver = self._async_driver()
        return self._tables.sync.read(plan) if driver is None else await driver.read(plan)

    async def _awrite(self, plan: Plan) -> Any:
        driver = self._async_driver()
        return self._tables.sync.write(plan) if driver is None else await driver.write(plan)

    # -- hook of the write path (see the module doc) --------------------------------------
    def _around_write(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        plan: Plan,
    ) -> Plan:
        """The plan a checkpoint write runs, given the plan of its own rows (the
        retention guard and lifecycle row, the audit entry wrap it)."""
        return plan

    def _to_inner(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[RunnableConfig, Checkpoint, CheckpointMetadata, ChannelVersions]:
        """The arguments of the inner ``put``, given our encoded checkpoint (encryption
        seals the metadata values and boxes inline values, :mod:`._crypto`)."""
        return config, checkpoint, metadata, new_versions

    # -- reads through the pipeline ---------------------------------------------------
    def _load(self, tup: CheckpointTuple, *, remember: bool) -> CheckpointTuple:
        plan = self._pipeline.load_plan(tup)
        if plan is None:
            return self._pipeline.decoded(tup, None, remember=remember)
        try:
            loaded = self._sync_driver().read(plan)
        except FormatError as exc:
            raise storage_error(tup.config, exc) from exc
        return self._pipeline.decoded(tup, loaded, remember=remember)

    async def _aload(self, tup: CheckpointTuple, *, remember: bool) -> CheckpointTuple:
        plan = self._pipeline.load_plan(tup)
        if plan is None:
            return self._pipeline.decoded(tup, None, remember=remember)
        try:
            loaded = await self._aread(plan)
        except FormatError as exc:
            raise storage_error(tup.config, exc) from exc
        return self._pipeline.decoded(tup, loaded, remember=remember)

    # -- BaseCheckpointSaver: sync -------------------------------------------------------
    @bridged("aget_tuple")
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Fetch a checkpoint tuple from the inner saver, with stored values restored."""
        tup = self.inner.get_tuple(config)
        return None if tup is None else self._load(tup, remember=True)

    @bridged("alist")
    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """List checkpoint tuples from the inner saver, with stored values restored."""
        # The inner saver may hold its lock while it yields: read its page first.
        page = list(self.inner.list(config, filter=filter, before=before, limit=limit))
        for tup in page:
            yield self._load(tup, remember=False)

    @bridged("aput")
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store our rows of the checkpoint, then the checkpoint (see the module doc)."""
        stored, write, plan = self._pipeline.prepare(config, checkpoint, new_versions)
        plan = self._around_write(config, checkpoint, metadata, plan)
        inner_config, stored, metadata, versions = self._to_inner(
            config, stored, metadata, new_versions
        )
        with self._sync_driver().writing(plan, ids(config)[0]):
            result = self.inner.put(inner_config, stored, metadata, versions)
        if write is not None:
            self._encoder.installed(write)
        return result

    @bridged("aput_writes")
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Forward pending writes, validated, with stable ids for id-less messages."""
        self.inner.put_writes(
            config,
            checked_writes(config, writes, task_id, validate=self.validate_writes),
            task_id,
            task_path,
        )

    @bridged("aget_delta_channel_history")
    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Forward to the inner saver; seeds that are our references are restored."""
        history = self.inner.get_delta_channel_history(config=config, channels=channels)
        seeds = seed_tuple(config, history)
        if seeds is None:
            return history
        return with_seeds(history, self._load(seeds, remember=False))

    # -- BaseCheckpointSaver: async ------------------------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async twin of :meth:`get_tuple`."""
        tup = await self.inner.aget_tuple(config)
        return None if tup is None else await self._aload(tup, remember=True)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async twin of :meth:`list`."""
        page = [
            t async for t in self.inner.alist(config, filter=filter, before=before, limit=limit)
        ]
        for tup in page:
            yield await self._aload(tup, remember=False)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async twin of :meth:`put`."""
        stored, write, plan = self._pipeline.prepare(config, checkpoint, new_versions)
        plan = self._around_write(config, checkpoint, metadata, plan)
        inner_config, stored, metadata, versions = self._to_inner(
            config, stored, metadata, new_versions
        )
        driver = self._async_driver()
        if driver is None:
            with self._tables.sync.writing(plan, ids(config)[0]):
                result = await self.inner.aput(inner_config, stored, metadata, versions)
        else:
            async with driver.writing(plan, ids(config)[0]):
                result = await self.inner.aput(inner_config, stored, metadata, versions)
        if write is not None:
            self._encoder.installed(write)
        return result

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async twin of :meth:`put_writes`."""
        checked = checked_writes(config, writes, task_id, validate=self.validate_writes)
        await self.inner.aput_writes(config, checked, task_id, task_path)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Async twin of :meth:`get_delta_channel_history`."""
        history = await self.inner.aget_delta_channel_history(config=config, channels=channels)
        seeds = seed_tuple(config, history)
        if seeds is None:
            return history
        return with_seeds(history, await self._aload(seeds, remember=False))
