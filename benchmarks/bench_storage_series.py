"""Storage vs thread length: ``bench_storage.py``'s workload sized at several turns, as JSON.

The same run as ``bench_storage.py`` (the same variants, backends, messages, turns and
measurements, through its own functions), with the bytes on disk taken every
``--every`` turns instead of only at half and full length, so storage can be plotted
against thread length. It prints ``bench_storage.py``'s own report, load table and
checks, and with ``--json PATH`` writes every figure to PATH.

Run: ``python benchmarks/bench_storage_series.py --turns 400 --every 50 --json out.json``
(``--skip-postgres`` without a server; ``STM_TEST_POSTGRES_URI`` names it: each variant
gets a database of its own, created and dropped by the run).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_storage
from bench_json import write_json

VARIANTS = (
    ("plain", "delta", "stm", "stm_enc", "stm_trim")
    if hasattr(bench_storage, "report_encryption")
    else ("plain", "delta", "stm", "stm_trim")
)
"""Every variant ``bench_storage.py`` runs by default (``stm_enc`` once it has one)."""
WINDOW = 20
"""Turns per timing median, as ``bench_storage.py``'s report takes them."""


def checkpoints_of(turns: int, every: int) -> list[int]:
    """The turns after which the bytes on disk are taken: every ``every``, half and full."""
    return sorted({*range(every, turns + 1, every), turns // 2, turns} - {0})


def result_data(r: Any, turns: int) -> dict[str, Any]:
    """One ``bench_storage.Result`` as plain data, its timing windows as its report takes them."""
    early = min(50, turns)
    return {
        "name": r.name,
        "messages": r.messages,
        "sizes": {str(t): n for t, n in sorted(r.sizes.items())},
        "load_bytes": {str(t): n for t, n in sorted(r.load_bytes.items())},
        "load_messages": {str(t): n for t, n in sorted(r.load_messages.items())},
        "reload_ms": r.reload_ms,
        "write_ms": {
            str(early): r.window(early, WINDOW, "write"),
            str(turns): r.window(turns, WINDOW, "write"),
        },
        "turn_ms": {str(early): r.window(early, WINDOW), str(turns): r.window(turns, WINDOW)},
    }


def measure(
    turns: int,
    every: int,
    postgres: bool = True,
    variants: Sequence[str] = VARIANTS,
    trim_tokens: int = bench_storage.TRIM_TOKENS,
) -> dict[str, Any]:
    """Run ``bench_storage``'s workload on SQLite (and PostgreSQL) and return every figure."""
    checkpoints = checkpoints_of(turns, every)
    points = bench_storage.load_points_of(turns)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        backends = {v: bench_storage.sqlite_backend(Path(tmp) / f"{v}.sqlite") for v in variants}
        results += bench_storage.run_backend(backends, turns, checkpoints, points, trim_tokens)
    if postgres:
        with ExitStack() as stack:
            uris = {v: stack.enter_context(bench_storage.postgres_database()) for v in variants}
            results += bench_storage.run_backend(
                {v: bench_storage.postgres_backend(u) for v, u in uris.items()},
                turns,
                checkpoints,
                points,
                trim_tokens,
            )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        bench_storage.report(results, turns)
        bench_storage.report_loads(results, points)
        if hasattr(bench_storage, "report_encryption"):
            bench_storage.report_encryption(results, turns)
        bench_storage.targets(results, turns, points)
    return {
        "turns": turns,
        "checkpoints": checkpoints,
        "load_points": points,
        "trim_tokens": trim_tokens,
        "reloads": bench_storage.RELOADS,
        "window": WINDOW,
        "backends": ["sqlite", "postgres"] if postgres else ["sqlite"],
        "variants": list(variants),
        "results": [result_data(r, turns) for r in results],
        "report": printed.getvalue(),
    }


def report(data: dict[str, Any]) -> None:
    """Print ``bench_storage.py``'s report of the run, then the sizes at every checkpoint."""
    print(data["report"], end="")
    print()
    print("bytes on disk after each turn listed (MB)")
    header = f"{'variant':<18}" + "".join(f"{f'@{t}':>10}" for t in data["checkpoints"])
    print(header)
    print("-" * len(header))
    for r in data["results"]:
        sizes = "".join(f"{r['sizes'][str(t)] / 1e6:>10.2f}" for t in data["checkpoints"])
        print(f"{r['name']:<18}{sizes}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument(
        "--every", type=int, default=50, help="take the bytes on disk every N turns"
    )
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--trim-tokens", type=int, default=bench_storage.TRIM_TOKENS)
    parser.add_argument(
        "--reloads",
        type=int,
        default=bench_storage.RELOADS,
        help=f"fresh-saver reloads per variant, median reported (default {bench_storage.RELOADS})",
    )
    parser.add_argument(
        "--json", metavar="PATH", help="also write every figure as JSON to PATH ('-': stdout only)"
    )
    args = parser.parse_args()
    if args.turns < 2 or args.every < 1 or args.reloads < 1:
        parser.error("--turns must be >= 2, --every and --reloads >= 1")
    bench_storage.RELOADS = args.reloads  # read by run_backend when it reloads
    data = measure(
        args.turns,
        args.every,
        not args.skip_postgres,
        [v for v in args.variants.split(",") if v],
        args.trim_tokens,
    )
    write_json(data, args.json, report)


if __name__ == "__main__":
    main()
