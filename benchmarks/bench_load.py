"""Benchmark: throughput under load, STMSaver vs the bare inner saver (issue 14, item 2).

Several worker processes (spawn) each run turns of a small ``STMState`` agent on
threads of their own, several turns in flight per worker, on one database: a SQLite
file in WAL mode, and PostgreSQL through a connection pool per worker. The same load
runs three times per backend: on the bare inner saver (``SqliteSaver`` /
``PostgresSaver``), on ``STMSaver(inner)`` and on ``STMSaver(inner,
exclusive_runs=True)``; printed are the turns per second of each (all turns of all
workers over the wall time from the workers' start barrier to the last one's end) and
the ratios to the bare saver. The workers are
``tests/support/load_worker.py``, the same ones the concurrency suite checks for lost
and leaked writes (``tests/stress/test_concurrency_load.py``).

    python benchmarks/bench_load.py [--workers 3] [--threads 8] [--turns 40]
                                    [--skip-postgres] [--json PATH]

Also reported as wall milliseconds per turn (the inverse), so that in
``docs/benchmarks.md`` a baseline / ours ratio below 1 means ours is slower.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_json import write_json

from tests.support import load_worker
from tests.support.load_worker import Load

ADMIN_URI = os.environ.get("STM_TEST_POSTGRES_URI", "postgresql://postgres@127.0.0.1:5432/postgres")


VARIANTS = {"plain": (False, False), "stm": (True, False), "stm_exclusive": (True, True)}
"""Variant -> (wrapped in STMSaver, exclusive_runs)."""


def _throughput(
    backend: str, target: str, variant: str, workers: int, threads: int, turns: int
) -> float:
    load_worker.prepare(backend, target)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(workers + 1), context.Queue()
    stm, exclusive = VARIANTS[variant]
    names = [[f"{variant}-{w}-{t}" for t in range(threads)] for w in range(workers)]
    loads = [
        Load(backend, target, w, names[w], [], turns, stm=stm, exclusive=exclusive)
        for w in range(workers)
    ]
    processes = [
        context.Process(target=load_worker.work, args=(load, barrier, results)) for load in loads
    ]
    for process in processes:
        process.start()
    barrier.wait()
    started = time.perf_counter()
    reports = [results.get(timeout=1800) for _ in processes]
    elapsed = time.perf_counter() - started
    for process in processes:
        process.join(60)
    done = 0
    for worker, report in reports:
        if "error" in report:
            raise SystemExit(f"worker {worker} failed: {report['error']}")
        done += sum(1 for *_, outcome in report["outcomes"] if outcome == "ok")
    return done / elapsed


def _postgres_database() -> tuple[str, Any]:
    import psycopg

    name = f"stm_bench_load_{uuid.uuid4().hex[:8]}"
    admin = psycopg.connect(ADMIN_URI, autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    base = ADMIN_URI.rpartition("/")[0]

    def drop() -> None:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()

    return f"{base}/{name}", drop


def run(workers: int, threads: int, turns: int, postgres: bool = True) -> list[dict[str, Any]]:
    """Rows ``{backend, plain, stm, stm_exclusive, stm_ratio, stm_exclusive_ratio,
    ms_per_turn: {variant: ms}}`` (speeds in turns per second; ratios to ``plain``)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("sqlite", "postgres") if postgres else ("sqlite",):
            row: dict[str, Any] = {"backend": backend}
            for variant in VARIANTS:
                if backend == "sqlite":
                    target, drop = str(Path(tmp) / f"load-{variant}.sqlite"), None
                else:
                    target, drop = _postgres_database()
                try:
                    row[variant] = _throughput(backend, target, variant, workers, threads, turns)
                finally:
                    if drop is not None:
                        drop()
            row["stm_ratio"] = row["stm"] / row["plain"]
            row["stm_exclusive_ratio"] = row["stm_exclusive"] / row["plain"]
            row["ms_per_turn"] = {variant: 1000.0 / row[variant] for variant in VARIANTS}
            rows.append(row)
    return rows


def report(data: dict[str, Any]) -> None:
    """Print the rows of :func:`run` for a reader."""
    total = data["workers"] * data["threads"] * data["turns"]
    print(
        f"{data['workers']} workers x {data['threads']} threads x {data['turns']} turns "
        f"= {total} turns per variant"
    )
    print("turns/s      bare saver   STMSaver (ratio)   STMSaver exclusive_runs (ratio)")
    for row in data["rows"]:
        print(
            f"{row['backend']:<10}{row['plain']:>13.1f}{row['stm']:>11.1f} "
            f"({row['stm_ratio']:.2f}){row['stm_exclusive']:>22.1f} "
            f"({row['stm_exclusive_ratio']:.2f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8, help="threads per worker")
    parser.add_argument("--turns", type=int, default=40, help="turns per thread")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--json", default=None, help="also write the figures here (-: stdout)")
    args = parser.parse_args()
    rows = run(args.workers, args.threads, args.turns, postgres=not args.skip_postgres)
    data = {"workers": args.workers, "threads": args.threads, "turns": args.turns, "rows": rows}
    write_json(data, args.json, report)


if __name__ == "__main__":
    main()
