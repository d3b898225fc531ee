"""The official langgraph-checkpoint-conformance suite, run against STMSaver on every backend.

Each async saver is validated through its own async methods. The suite only calls async
methods, so each sync saver (SqliteSaver, PostgresSaver, and InMemorySaver once more) is
validated through ``SyncDriven``: a test-only adapter whose async methods call the
STMSaver's *sync* methods, exposing exactly the capabilities those sync methods have.

Every base capability must pass, and STMSaver must expose (and pass) ``prune`` on every
backend plus exactly the other extended capabilities of the saver it wraps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import (
    BASE_CAPABILITIES,
    DetectedCapabilities,
)
from langgraph.checkpoint.conformance.report import CapabilityReport
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_stm.checkpoint import STMSaver

_SYNC_TO_ASYNC = {
    "delete_for_runs": "adelete_for_runs",
    "copy_thread": "acopy_thread",
    "prune": "aprune",
}


class SyncDriven(BaseCheckpointSaver[Any]):
    """Test adapter: async methods that call a saver's sync methods (blocking is fine here)."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        super().__init__(serde=saver.serde)
        self.saver = saver

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.saver.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for tup in self.saver.list(config, filter=filter, before=before, limit=limit):
            yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.saver.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.saver.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.saver.delete_thread(thread_id)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.saver.get_next_version(current, channel)


async def _aprune(
    self: SyncDriven, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
) -> None:
    self.saver.prune(thread_ids, strategy=strategy)


async def _adelete_for_runs(self: SyncDriven, run_ids: Sequence[str]) -> None:
    self.saver.delete_for_runs(run_ids)


async def _acopy_thread(self: SyncDriven, source: str, target: str) -> None:
    self.saver.copy_thread(source, target)


_ADAPTER_METHODS: dict[str, Callable[..., Any]] = {
    "aprune": _aprune,
    "adelete_for_runs": _adelete_for_runs,
    "acopy_thread": _acopy_thread,
}


def sync_driven(saver: BaseCheckpointSaver[Any]) -> SyncDriven:
    """Wrap ``saver`` in a SyncDriven class exposing the async twins of its sync capabilities."""
    base = BaseCheckpointSaver
    extra = {
        a: _ADAPTER_METHODS[a]
        for s, a in _SYNC_TO_ASYNC.items()
        if getattr(type(saver), s) is not getattr(base, s)
    }
    return type("SyncDriven", (SyncDriven,), extra)(saver)


def sync_capabilities(saver: BaseCheckpointSaver[Any]) -> set[str]:
    """Extended capabilities a sync saver implements, by the names the suite uses."""
    return {
        s for s in _SYNC_TO_ASYNC if getattr(type(saver), s) is not getattr(BaseCheckpointSaver, s)
    }


def _check(report: CapabilityReport, inner_caps: set[str]) -> None:
    failures = {
        name: result.failures for name, result in report.results.items() if result.passed is False
    }
    assert not failures, failures
    for cap in BASE_CAPABILITIES:
        assert report.results[cap.value].passed is True, cap.value
    extended = {
        name
        for name, result in report.results.items()
        if result.detected and name not in {c.value for c in BASE_CAPABILITIES}
    }
    assert extended == inner_caps | {"prune"}
    for name in extended:
        assert report.results[name].passed is True, name


async def _validate(
    name: str, make: Callable[[], AbstractAsyncContextManager[BaseCheckpointSaver[Any]]]
) -> CapabilityReport:
    async def factory() -> AsyncIterator[BaseCheckpointSaver[Any]]:
        async with make() as saver:
            yield saver

    return await validate(checkpointer_test(name=name)(factory))


def _async_caps(saver: BaseCheckpointSaver[Any]) -> set[str]:
    detected = DetectedCapabilities.from_instance(saver).detected
    return {c.value for c in detected} - {c.value for c in BASE_CAPABILITIES}


class TestConformance:
    """STMSaver passes the official conformance suite over every supported saver."""

    async def test_in_memory_async(self) -> None:
        """Over InMemorySaver, through the async methods."""

        @asynccontextmanager
        async def make() -> AsyncIterator[BaseCheckpointSaver[Any]]:
            yield STMSaver(InMemorySaver())

        _check(await _validate("stm-memory-async", make), _async_caps(InMemorySaver()))

    async def test_in_memory_sync(self) -> None:
        """Over InMemorySaver, through the sync methods."""

        @asynccontextmanager
        async def make() -> AsyncIterator[BaseCheckpointSaver[Any]]:
            yield sync_driven(STMSaver(InMemorySaver()))

        _check(await _validate("stm-memory-sync", make), sync_capabilities(InMemorySaver()))

    async def test_sqlite_sync(self, tmp_path: Path) -> None:
        """Over SqliteSaver (a fresh file per capability), through the sync methods."""
        counter = iter(range(100))

        @asynccontextmanager
        async def make() -> AsyncIterator[BaseCheckpointSaver[Any]]:
            with STMSaver.from_sqlite(tmp_path / f"db{next(counter)}.sqlite") as saver:
                saver.setup()
                yield sync_driven(saver)

        from langgraph.checkpoint.sqlite import SqliteSaver

        caps = sync_capabilities(SqliteSaver.__new__(SqliteSaver))
        _check(await _validate("stm-sqlite-sync", make), caps)

    async def test_sqlite_async(self, tmp_path: Path) -> None:
        """Over AsyncSqliteSaver (a fresh file per capability), through the async methods."""
        counter = iter(range(100))

        @asynccontextmanager
        async def make() -> AsyncIterator[BaseCheckpointSaver[Any]]:
            async with STMSaver.from_async_sqlite(tmp_path / f"db{next(counter)}.sqlite") as s:
                await s.asetup()
                yield s

        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        caps = _async_caps(AsyncSqliteSaver.__new__(AsyncSqliteSaver))
        _check(await _validate("stm-sqlite-async", make), caps)

    @pytest.mark.postgres
    async def test_postgres_sync(self, postgres_uri: str) -> None:
        """Over PostgresSaver, through the sync methods; prune is exposed and passes."""

        @asynccontextmanager
        async def make() -> AsyncIterator[BaseCheckpointSaver[Any]]:
            with STMSaver.from_postgres(postgres_uri) as saver:
                saver.setup()
                yield sync_driven(saver)

        from langgraph.checkpoint.postgres import PostgresSaver

        caps = sync_capabilities(PostgresSaver.__new__(PostgresSaver))
        _check(await _validate("stm-postgres-sync", make), caps)

    @pytest.mark.postgres
    async def test_postgres_async(self, postgres_uri: str) -> None:
        """Over AsyncPostgresSaver, through the async methods; prune is exposed and passes."""

        @asynccontextmanager
        async def make() -> AsyncIterator[BaseCheckpointSaver[Any]]:
            async with STMSaver.from_async_postgres(postgres_uri) as saver:
                await saver.asetup()
                yield saver

        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        caps = _async_caps(AsyncPostgresSaver.__new__(AsyncPostgresSaver))
        _check(await _validate("stm-postgres-async", make), caps)


def test_sync_driven_exposes_only_what_the_saver_has() -> None:
    """The adapter itself does not invent capabilities (STMSaver has only ``prune``)."""
    assert _async_caps(sync_driven(STMSaver(InMemorySaver()))) == {"prune"}


def test_stm_saver_prunes_everywhere_and_wrap_mirrors_the_other_capabilities() -> None:
    """``prune`` is ours on every backend; ``STMSaver.wrap`` adds the inner saver's
    ``copy_thread`` / ``delete_for_runs``, and ``STMSaver(...)`` stays one class."""

    class Copying(InMemorySaver):
        async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
            return None

    assert _async_caps(STMSaver(InMemorySaver())) == {"prune"}
    assert _async_caps(STMSaver(Copying())) == {"prune"}
    assert _async_caps(STMSaver.wrap(Copying())) == {"prune", "copy_thread"}
    assert type(STMSaver(Copying())) is STMSaver
    assert isinstance(STMSaver.wrap(Copying()), STMSaver)
