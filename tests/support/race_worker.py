"""A worker process for the racing-workers test: resume the same interrupt as another.

Two of these run at once (``multiprocessing`` with the spawn start method: separate
interpreters, separate savers, one database). Round ``i``: both wait at a barrier,
then resume thread ``race-<i>``, paused on an approval of ``send_email``, with
``Command(resume=approve)``. The tool records its run in the ledger file, then waits
until the other worker has finished its own attempt of the round, so the winner's run
is still going on when the loser's starts: a loser that got through would run the tool
too (two ledger lines), and both would wait for each other until the timeout.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langgraph.types import Command

from langgraph_stm.checkpoint import STMSaver
from langgraph_stm.errors import CheckpointConflict
from tests.support.approval_graphs import Ledger, build_graph, config

APPROVE = {"type": "approve"}
_WAIT = 20.0


def done_flag(signals: Path, round_: int, worker: int) -> Path:
    return signals / f"{round_}-{worker}.done"


class _WaitingLedger(Ledger):
    """Records a run, then waits for the other worker to finish its attempt."""

    def __init__(self, path: Path, signals: Path, worker: int) -> None:
        super().__init__(path)
        self.signals, self.worker, self.round = signals, worker, 0

    def record(self, name: str, call_id: str, args: Mapping[str, Any]) -> None:
        super().record(name, call_id, args)
        other = done_flag(self.signals, self.round, 1 - self.worker)
        deadline = time.monotonic() + _WAIT
        while not other.exists() and time.monotonic() < deadline:
            time.sleep(0.01)


def open_saver(backend: str, target: str) -> Any:
    if backend == "sqlite":
        return STMSaver.from_sqlite(target, exclusive_runs=True)
    return STMSaver.from_postgres(target, exclusive_runs=True)


def work(
    backend: str,
    target: str,
    worker: int,
    rounds: int,
    ledger: str,
    signals: str,
    barrier: Any,
    results: Any,
) -> None:
    """Resume ``race-0`` .. ``race-<rounds-1>``, reporting ``(round, worker, outcome)``."""
    signal_dir = Path(signals)
    waiting = _WaitingLedger(Path(ledger), signal_dir, worker)
    with open_saver(backend, target) as saver:
        saver.setup()
        graph = build_graph(saver, waiting)
        for round_ in range(rounds):
            waiting.round = round_
            barrier.wait()
            try:
                graph.invoke(Command(resume=APPROVE), config(f"race-{round_}"))
                outcome = "ok"
            except CheckpointConflict:
                outcome = "conflict"
            except Exception as exc:  # reported, so the test shows what went wrong
                outcome = f"error: {type(exc).__name__}: {exc}"
            done_flag(signal_dir, round_, worker).touch()
            results.put((round_, worker, outcome))
