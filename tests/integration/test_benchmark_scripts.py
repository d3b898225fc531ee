"""The benchmark scripts still run end to end (smoke runs, no figure judged).

The figures themselves come from ``python benchmarks/bench_storage.py`` (400 turns)
and ``python benchmarks/bench_turns.py`` (800 turns); these only guard the scripts
against rot, with a few turns each.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.postgres
def test_storage_benchmark_smoke_run(postgres_uri: str) -> None:
    """Four turns on SQLite and PostgreSQL: the table, the checks and the breakdown print.

    ``stm_trim`` runs with a 1,000-token window, so four turns (eight ~200-token
    messages) are trimmed; its load bytes and those of ``stm`` are counted after the
    last turn on both backends.

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
            "--trim-tokens",
            "1000",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    for variant in (
        "sqlite/plain",
        "sqlite/delta",
        "sqlite/stm",
        "sqlite/stm_trim",
        "postgres/stm",
        "postgres/stm_trim",
    ):
        assert f"\n{variant} " in out
    assert "postgres/stm:\n" in out  # the breakdown of our tables
    assert "postgres/stm_trim:\n" in out
    assert "stm_bodies" in out
    assert "message payload in pending writes" in out
    assert out.count("size vs plain") == 2

    # The load table: one point (@4), bytes of our rows, last/first ratio, messages.
    assert "\nload bytes: rows of stm_* statements" in out
    loads = {
        m["name"]: (int(m["bytes"].replace(",", "")), int(m["msgs"]))
        for m in re.finditer(
            r"^(?P<name>(?:sqlite|postgres)/stm(?:_trim)?) +(?P<bytes>[\d,]+) +1\.00x +"
            r"(?P<msgs>\d+)$",
            out,
            re.MULTILINE,
        )
    }
    assert set(loads) == {f"{b}/{v}" for b in ("sqlite", "postgres") for v in ("stm", "stm_trim")}
    for backend in ("sqlite", "postgres"):
        (kept_bytes, kept_msgs), (trim_bytes, trim_msgs) = (
            loads[f"{backend}/{v}"] for v in ("stm", "stm_trim")
        )
        assert kept_msgs == 8, out  # 4 x (human, answer)
        assert 0 < trim_msgs < kept_msgs, out  # trimmed...
        assert trim_msgs % 2 == 0, out  # ...to whole (human, answer) pairs
        assert 0 < trim_bytes < kept_bytes, out
    flat = r"^(?:sqlite|postgres) +(?:PASS|FAIL)  stm_trim load bytes flat: @4 [\d,]+ B "
    assert len(re.findall(flat, out, re.MULTILINE)) == 2, out


def test_turns_benchmark_smoke_run() -> None:
    """Six turns of every variant on SQLite: real timings, file sizes and commit counts.

    Turns 3 and 6 call a tool, so both kinds of turn are counted. No figure is judged
    against the issue's targets here (six turns say nothing about growth).
    """
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_turns.py"), "--turns", "6", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    data = json.loads(out)
    assert data["turns"] == 6
    assert data["points"] == [6]  # no listed report point <= 6: the last turn is reported
    assert set(data["variants"]) == {"plain", "delta", "ours_keep", "ours_summary"}
    for name, variant in data["variants"].items():
        point = variant["points"]["6"]
        assert point["cpu_ms"] > 0, name
        assert point["wall_ms"] > 0, name
        assert point["file_bytes"] >= 4096, name  # at least one SQLite page in use
        assert point["messages"] == 17, name  # system + 6 x (human, answer) + 2 x (call, result)
        assert point["commits_per_turn"] >= 1, name
        kinds = variant["commits_by_kind"]
        # a durable checkpoint per step: a tool turn has two more steps than a chat turn
        assert kinds["chat"] >= 3, name
        assert kinds["tool"] > kinds["chat"], name
        assert 0 < variant["max_input_tokens"] <= 4000, name
    # the plain saver commits once per put and once per put_writes
    assert data["variants"]["plain"]["commits_by_kind"] == {"chat": 5.0, "tool": 9.0}
    assert {t["target"].split()[0] for t in data["targets"]} >= {"ours_keep", "ours_summary"}
    assert all(isinstance(t["pass"], bool) for t in data["targets"])
