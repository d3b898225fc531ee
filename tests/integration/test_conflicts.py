"""Exclusive runs: a second run continuing the same checkpoint is refused before it runs.

``STMSaver(exclusive_runs=True)`` on the in-memory, SQLite and PostgreSQL savers, sync
and async; two real processes racing on one interrupt; explicit forks still work.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_stm import STMState
from langgraph_stm.checkpoint import STMSaver
from langgraph_stm.checkpoint._tables import Stmt
from langgraph_stm.errors import CheckpointConflict, InvalidArgumentError
from tests.support import race_worker
from tests.support.approval_graphs import Ledger, ask, build_graph

SYNC_BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
ASYNC_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
PROCESS_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
APPROVE = {"type": "approve"}


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@contextmanager
def open_sync(backend: str, request: pytest.FixtureRequest, **options: Any) -> Iterator[STMSaver]:
    if backend == "memory":
        yield STMSaver(InMemorySaver(), exclusive_runs=True, **options)
    elif backend == "sqlite":
        path = request.getfixturevalue("sqlite_path")
        with STMSaver.from_sqlite(path, exclusive_runs=True, **options) as saver:
            saver.setup()
            yield saver
    else:
        uri = request.getfixturevalue("postgres_uri")
        with STMSaver.from_postgres(uri, exclusive_runs=True, **options) as saver:
            saver.setup()
            yield saver


@asynccontextmanager
async def open_async(backend: str, request: pytest.FixtureRequest) -> AsyncIterator[STMSaver]:
    if backend == "sqlite":
        path = request.getfixturevalue("sqlite_path")
        async with STMSaver.from_async_sqlite(path, exclusive_runs=True) as saver:
            await saver.asetup()
            yield saver
    else:
        uri = request.getfixturevalue("postgres_uri")
        async with STMSaver.from_async_postgres(uri, exclusive_runs=True) as saver:
            await saver.asetup()
            yield saver


def cfg(thread: str = "t1") -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


class Gate:
    """A tool step that records each run and blocks until the test opens it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.runs: list[str] = []

    def node(self, state: STMState) -> dict[str, Any]:
        approved = interrupt("approve the transfer?")
        self.runs.append(str(approved))
        self.entered.set()
        assert self.release.wait(30), "the test never opened the gate"
        return {"goal": f"transferred ({approved})"}


def gated_graph(saver: STMSaver, gate: Gate) -> Any:
    builder = StateGraph(STMState).add_node("transfer", gate.node)
    return builder.add_edge(START, "transfer").compile(checkpointer=saver)


def paused(saver: STMSaver, gate: Gate, thread: str = "t1") -> Any:
    graph = gated_graph(saver, gate)
    graph.invoke({"messages": [("user", "send the money")]}, cfg(thread))
    assert graph.get_state(cfg(thread)).interrupts
    return graph


def in_background(call: Any) -> tuple[threading.Thread, list[Any]]:
    """Run ``call`` in a thread; its result or exception lands in the list."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def claims(saver: STMSaver) -> list[tuple[Any, ...]]:
    """The rows of ``stm_claims``."""

    def plan() -> Any:
        return (yield Stmt("SELECT thread_id, checkpoint_id, token FROM stm_claims", []))

    return [tuple(row) for row in saver._sync_driver().read(plan()) or []]


@pytest.mark.parametrize("backend", SYNC_BACKENDS)
class TestExclusiveRuns:
    """One live run per thread; everything sequential works as without the option."""

    def test_a_second_resume_of_the_same_interrupt_is_refused_before_it_runs(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """While the first resume runs its tool, a second gets CheckpointConflict, and
        its tool never ran; the first finishes and the thread holds one result."""
        gate = Gate()
        with open_sync(backend, request) as saver:
            graph = paused(saver, gate)
            head = graph.get_state(cfg()).config["configurable"]["checkpoint_id"]
            first, outcome = in_background(lambda: graph.invoke(Command(resume="w1"), cfg()))
            assert gate.entered.wait(30)
            with pytest.raises(CheckpointConflict) as refused:
                graph.invoke(Command(resume="w2"), cfg())
            assert refused.value.thread_id == "t1"
            assert refused.value.checkpoint_id == head
            assert refused.value.held_until is not None
            assert "'t1'" in str(refused.value)
            assert "Retry" in str(refused.value)
            assert gate.runs == ["w1"]
            gate.release.set()
            first.join(30)
            assert len(outcome) == 1
            assert not isinstance(outcome[0], BaseException), outcome
            assert graph.get_state(cfg()).values["goal"] == "transferred (w1)"
            assert gate.runs == ["w1"]
            assert claims(saver) == []

    def test_the_refused_run_retried_starts_from_the_new_head(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """After the first run is done, the refused caller retries with new input and
        runs on top of the finished thread."""
        gate = Gate()
        with open_sync(backend, request) as saver:
            graph = paused(saver, gate)
            first, _ = in_background(lambda: graph.invoke(Command(resume="w1"), cfg()))
            assert gate.entered.wait(30)
            with pytest.raises(CheckpointConflict):
                graph.invoke({"messages": [("user", "me too")]}, cfg())
            gate.release.set()
            first.join(30)
            graph.invoke({"messages": [("user", "me too")]}, cfg())
            graph.invoke(Command(resume="w2"), cfg())
            assert gate.runs == ["w1", "w2"]
            texts = [m.content for m in graph.get_state(cfg()).values["messages"]]
            assert texts == ["send the money", "me too"]

    def test_sequential_turns_interrupts_and_failures_never_conflict(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """Runs that end (done, interrupted, failed) release the thread at once: the
        next call, right after, is never refused."""
        attempts: list[int] = []

        def flaky(state: STMState) -> dict[str, Any]:
            attempts.append(1)
            if len(attempts) == 1:
                raise RuntimeError("the API timed out")
            return {"goal": interrupt("confirm?")}

        with open_sync(backend, request) as saver:
            graph = StateGraph(STMState).add_node(flaky).add_edge(START, "flaky")
            graph = graph.compile(checkpointer=saver)
            with pytest.raises(RuntimeError, match="timed out"):
                graph.invoke({"messages": [("user", "go")]}, cfg())
            graph.invoke(None, cfg())  # retry the failed step at once
            assert graph.get_state(cfg()).interrupts
            graph.invoke(Command(resume="yes"), cfg())
            for i in range(3):
                graph.invoke({"messages": [("user", f"turn {i}")]}, cfg())
                graph.invoke(Command(resume=f"ok {i}"), cfg())
            assert graph.get_state(cfg()).values["goal"] == "ok 2"
            assert claims(saver) == []

    def test_update_state_on_the_held_head_conflicts_but_a_past_checkpoint_forks(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """While a run holds the head, update_state on it is refused; on an older
        checkpoint it is an explicit fork and succeeds."""
        gate = Gate()
        with open_sync(backend, request) as saver:
            graph = paused(saver, gate)
            history = list(graph.get_state_history(cfg()))
            past = history[-1].config
            first, _ = in_background(lambda: graph.invoke(Command(resume="w1"), cfg()))
            assert gate.entered.wait(30)
            with pytest.raises(CheckpointConflict):
                graph.update_state(cfg(), {"goal": "hijacked"})
            forked = graph.update_state(past, {"goal": "a fork"})
            gate.release.set()
            first.join(30)
            assert graph.get_state(forked).values["goal"] == "a fork"
            assert gate.runs == ["w1"]

    def test_replay_from_a_past_checkpoint_id_still_runs(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """A run addressed at a past checkpoint id replays from there (a fork; its
        interrupt fires again), then the fork's head resumes as any head: no conflict."""
        gate = Gate()
        gate.release.set()
        with open_sync(backend, request) as saver:
            graph = paused(saver, gate)
            graph.invoke(Command(resume="w1"), cfg())
            history = list(graph.get_state_history(cfg()))
            past = next(s for s in history if s.next == ("transfer",)).config
            graph.invoke(None, past)
            assert graph.get_state(cfg()).interrupts
            graph.invoke(Command(resume="w2"), cfg())
            assert gate.runs == ["w1", "w2"]
            assert graph.get_state(cfg()).values["goal"] == "transferred (w2)"
            assert len(list(graph.get_state_history(cfg()))) > len(history)

    def test_a_dead_run_holds_the_thread_until_its_lease_lapses_or_release(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """A run that stops without a sign (here: its read, then nothing) holds the
        thread for ``run_lease``; ``release_run`` frees it at once."""
        clock = Clock()
        gate = Gate()
        gate.release.set()
        with open_sync(backend, request, clock=clock, run_lease=timedelta(seconds=60)) as saver:
            graph = paused(saver, gate)
            dead = {**cfg(), "configurable": {**cfg()["configurable"], "__pregel_runtime": 1}}
            assert saver.get_tuple(dead) is not None  # a run read, then its worker died
            with pytest.raises(CheckpointConflict):
                graph.invoke(Command(resume="w1"), cfg())
            clock.now += timedelta(seconds=61)
            graph.invoke(Command(resume="w1"), cfg())
            assert gate.runs == ["w1"]
            graph.invoke({"messages": [("user", "again")]}, cfg())
            assert saver.get_tuple(dead) is not None
            assert saver.release_run("t1") is True
            assert saver.release_run("t1") is False
            graph.invoke(Command(resume="w2"), cfg())
            assert gate.runs == ["w1", "w2"]

    def test_deleting_a_thread_removes_its_claim(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        """A held thread deleted: its claim goes with it, a fresh run starts clean."""
        gate = Gate()
        gate.release.set()
        with open_sync(backend, request) as saver:
            paused(saver, gate)
            dead = {**cfg(), "configurable": {**cfg()["configurable"], "__pregel_runtime": 1}}
            saver.get_tuple(dead)
            assert len(claims(saver)) == 1
            report = saver.delete_thread("t1")
            assert report.rows["stm_claims"] == 1
            assert claims(saver) == []
            paused(saver, gate)


class TestWritersThatAreNotRuns:
    """update_state, import_thread: they never claim a thread, so a run right after
    them is never refused."""

    @pytest.mark.parametrize("backend", SYNC_BACKENDS)
    def test_an_imported_thread_runs_at_once(
        self, backend: str, request: pytest.FixtureRequest
    ) -> None:
        gate = Gate()
        gate.release.set()
        source = STMSaver(InMemorySaver())
        paused(source, gate, thread="src")
        document = source.export_thread("src")
        with open_sync(backend, request) as saver:
            saver.import_thread(document, thread_id="t1")
            assert claims(saver) == []
            graph = gated_graph(saver, gate)
            graph.update_state(cfg(), {"goal": "set by an operator"})
            assert claims(saver) == []
            graph.invoke(Command(resume="w1"), cfg())
            assert gate.runs == ["w1"]
            assert claims(saver) == []


class TestOptions:
    def test_off_by_default_no_claim_is_taken(self) -> None:
        """Without the option two resumes both run: the behaviour LangGraph has."""
        gate = Gate()
        gate.release.set()
        saver = STMSaver(InMemorySaver())
        graph = paused(saver, gate)
        graph.invoke(Command(resume="w1"), cfg())
        assert saver.exclusive_runs is False
        assert claims(saver) == []

    @pytest.mark.parametrize(
        ("options", "match"),
        [
            ({"exclusive_runs": "yes"}, "exclusive_runs"),
            ({"run_lease": 0}, "run_lease"),
            ({"run_lease": -5.0}, "run_lease"),
            ({"run_lease": "30s"}, "run_lease"),
        ],
    )
    def test_bad_options_are_refused(self, options: dict[str, Any], match: str) -> None:
        """Each bad option names itself."""
        with pytest.raises(InvalidArgumentError, match=match):
            STMSaver(InMemorySaver(), **options)

    def test_the_lease_is_exposed(self) -> None:
        saver = STMSaver(InMemorySaver(), exclusive_runs=True, run_lease=5)
        assert saver.run_lease == timedelta(seconds=5)


@pytest.mark.parametrize("backend", ASYNC_BACKENDS)
async def test_async_second_resume_is_refused_before_it_runs(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """ainvoke twins: the second resume of one interrupt gets CheckpointConflict."""
    runs: list[str] = []
    entered, release = asyncio.Event(), asyncio.Event()

    async def transfer(state: STMState) -> dict[str, Any]:
        approved = interrupt("approve?")
        runs.append(str(approved))
        entered.set()
        await asyncio.wait_for(release.wait(), 30)
        return {"goal": str(approved)}

    async with open_async(backend, request) as saver:
        builder = StateGraph(STMState).add_node("transfer", transfer)
        graph = builder.add_edge(START, "transfer").compile(checkpointer=saver)
        await graph.ainvoke({"messages": [("user", "go")]}, cfg())
        first = asyncio.create_task(graph.ainvoke(Command(resume="w1"), cfg()))
        await asyncio.wait_for(entered.wait(), 30)
        with pytest.raises(CheckpointConflict):
            await graph.ainvoke(Command(resume="w2"), cfg())
        release.set()
        await first
        assert runs == ["w1"]
        assert (await graph.aget_state(cfg())).values["goal"] == "w1"
        assert await saver.arelease_run("t1") is False


@pytest.mark.parametrize("backend", PROCESS_BACKENDS)
def test_two_processes_resuming_one_interrupt_run_the_tool_once(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """50 rounds, two worker processes resume the same paused thread at the same moment:
    every round one succeeds and the other gets CheckpointConflict, the approved tool
    ran once (ledger file), and the thread's checkpoints form one chain (no fork).
    Afterwards update_state on a past checkpoint and a replay still succeed."""
    rounds = 50
    target = (
        str(request.getfixturevalue("sqlite_path"))
        if backend == "sqlite"
        else request.getfixturevalue("postgres_uri")
    )
    ledger_path = tmp_path / "ledger.jsonl"
    signals = tmp_path / "signals"
    signals.mkdir()
    with race_worker.open_saver(backend, target) as saver:
        saver.setup()
        graph = build_graph(saver, Ledger(ledger_path))
        for i in range(rounds):
            thread = f"race-{i}"
            graph.invoke(
                {"messages": [ask(f"h{i}", ("send_email", {"to": "a@b.c", "body": "hi"}))]},
                cfg(thread),
            )
            assert graph.get_state(cfg(thread)).interrupts
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    workers = [
        context.Process(
            target=race_worker.work,
            args=(backend, target, w, rounds, str(ledger_path), str(signals), barrier, results),
        )
        for w in (0, 1)
    ]
    for worker in workers:
        worker.start()
    outcomes: dict[int, list[str]] = {}
    for _ in range(2 * rounds):
        round_, _, outcome = results.get(timeout=120)
        outcomes.setdefault(round_, []).append(outcome)
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    for round_, got in sorted(outcomes.items()):
        assert sorted(got) == ["conflict", "ok"], (round_, got)
    ledger = Ledger(ledger_path)
    for i in range(rounds):
        assert ledger.count(f"h{i}-c0") == 1, ledger.entries()
    with race_worker.open_saver(backend, target) as saver:
        graph = build_graph(saver, Ledger(ledger_path))
        for i in range(rounds):
            history = list(graph.get_state_history(cfg(f"race-{i}")))
            parents = [
                s.parent_config["configurable"]["checkpoint_id"] for s in history if s.parent_config
            ]
            assert len(parents) == len(set(parents)), f"race-{i} forked"
            assert len(parents) == len(history) - 1
        past = list(graph.get_state_history(cfg("race-0")))[-2].config
        graph.update_state(past, {"goal": "forked on purpose"})
        assert graph.get_state(cfg("race-0")).values["goal"] == "forked on purpose"
        replay = next(
            s for s in graph.get_state_history(cfg("race-1")) if s.next == ("tools",)
        ).config
        graph.invoke(Command(resume=APPROVE), replay)
