"""The storage benchmark script still runs end to end (a smoke run, nothing timed).

The figures themselves come from ``python benchmarks/bench_storage.py`` (400 turns);
this only guards the script against rot, with a few turns on both backends.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.postgres
def test_storage_benchmark_smoke_run(postgres_uri: str) -> None:
    """Four turns on SQLite and PostgreSQL: the table, the checks and the breakdown print.

    ``postgres_uri`` makes the server required (as for every Postgres test); the script
    creates and drops databases of its own on the same server.
    """
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_storage.py"),
            "--turns",
            "4",
            "--breakdown",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    for variant in ("sqlite/plain", "sqlite/delta", "sqlite/stm", "postgres/stm"):
        assert f"\n{variant} " in out
    assert "postgres/stm:\n" in out  # the breakdown of our tables
    assert "stm_message_bodies" in out
    assert "message payload in pending writes" in out
    assert out.count("size vs plain") == 2
