"""Concurrency and load: worker processes on one database, threads of their own and
threads they all continue at once (issue 14, item 2).

Three worker processes (spawn: separate interpreters) each run turns on eight threads
of their own and on two hot threads every worker continues, through
``STMSaver(exclusive_runs=True)`` over a PostgreSQL connection pool and over a SQLite
file in WAL mode. Afterwards, from a fresh saver:

- an own thread holds every turn of its worker, in order, and nothing else (no lost
  write, no message of another thread), and it never saw a conflict;
- a hot thread holds exactly the turns that succeeded, each once and whole, and none
  of the refused ones; its checkpoints form one chain;
- ``get_thread_state`` agrees with each thread's latest checkpoint.

The CI count is 40 turns per worker and thread (2,400 attempted turns over the two
backends); ``STM_STRESS_FULL=1`` runs 150.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.stress.conftest import FULL
from tests.support import load_worker
from tests.support.load_worker import Load, human_id

WORKERS = 3
OWN = 8
HOT = 2
TURNS = 150 if FULL else 40


def _drive(backend: str, target: str) -> dict[int, dict[str, Any]]:
    load_worker.prepare(backend, target)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(WORKERS), context.Queue()
    hot = [f"hot-{h}" for h in range(HOT)]
    loads = [
        Load(backend, target, w, [f"own-{w}-{t}" for t in range(OWN)], hot, TURNS)
        for w in range(WORKERS)
    ]
    processes = [
        context.Process(target=load_worker.work, args=(load, barrier, results)) for load in loads
    ]
    for process in processes:
        process.start()
    reports = dict(results.get(timeout=900) for _ in processes)
    for process in processes:
        process.join(60)
    for worker, report in reports.items():
        assert "error" not in report, (worker, report)
    return reports


def _check(backend: str, target: str, reports: dict[int, dict[str, Any]]) -> None:
    outcomes = Counter()
    succeeded: dict[str, set[str]] = {}
    for worker, report in reports.items():
        for thread, turn, outcome in report["outcomes"]:
            outcomes[(thread.startswith("hot"), outcome)] += 1
            if outcome == "ok":
                succeeded.setdefault(thread, set()).add(human_id(thread, worker, turn))
    assert outcomes[(False, "conflict")] == 0, "a thread no one else touched was refused"
    assert outcomes[(False, "ok")] == WORKERS * OWN * TURNS
    assert outcomes[(True, "ok")] + outcomes[(True, "conflict")] == WORKERS * HOT * TURNS
    assert outcomes[(True, "ok")] >= TURNS  # every hot turn round let at least one through

    with load_worker.open_saver(Load(backend, target, -1, [], [], 0)) as saver:
        graph = load_worker.build(saver)
        for thread, wanted in succeeded.items():
            config = {"configurable": {"thread_id": thread}}
            state = graph.get_state(config)
            messages = state.values["messages"]
            humans = [m.id for m in messages if m.type == "human"]
            assert sorted(humans) == sorted(wanted), f"{thread}: lost or foreign writes"
            assert len(humans) == len(set(humans)), f"{thread}: a turn stored twice"
            for human, answer in zip(messages[::2], messages[1::2], strict=True):
                assert answer.id == str(human.id)[:-1] + "a", f"{thread}: a turn cut apart"
                assert str(human.content).startswith(thread)
            if thread.startswith("own"):
                worker = int(thread.split("-")[1])
                assert humans == [human_id(thread, worker, t) for t in range(TURNS)]
            history = list(graph.get_state_history(config))
            parents = [s.parent_config["configurable"]["checkpoint_id"] for s in history[:-1]]
            assert len(parents) == len(set(parents)), f"{thread}: the chain forked"
            projected = saver.get_thread_state(thread)
            assert projected is not None
            assert projected.message_count == len(messages)
            assert projected.goal == state.values["goal"]


@pytest.mark.postgres
def test_worker_processes_on_a_postgres_pool_lose_and_leak_nothing(postgres_uri: str) -> None:
    """Three processes, each with a connection pool, 40+ turns on 10 threads each."""
    _check("postgres", postgres_uri, _drive("postgres", postgres_uri))


def test_worker_processes_on_one_sqlite_file_lose_and_leak_nothing(tmp_path: Path) -> None:
    """Three processes on one WAL-mode SQLite file, 40+ turns on 10 threads each."""
    target = str(tmp_path / "load.sqlite")
    _check("sqlite", target, _drive("sqlite", target))
