"""The benchmark scripts still run end to end (smoke runs, no figure judged), and the
report ``benchmarks/run_all.py`` writes holds exactly the figures the scripts output.

The figures themselves come from ``python benchmarks/run_all.py`` (docs/benchmarks.md),
``python benchmarks/bench_storage.py`` (400 turns) and ``python benchmarks/bench_turns.py``
(800 turns); these only guard the scripts against rot, with a few turns each.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

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


# --- benchmarks/run_all.py: the report is the scripts' own figures -------------------

RAW_STEMS = (
    "bench_tokens",
    "bench_trim",
    "bench_summarize",
    "bench_turns",
    "bench_storage_series",
    "bench_load",
)
NUMBER = re.compile(r"(?<![\w.,])\d+(?:,\d{3})*(?:\.\d+)?")
"""A number as the report writes one (``1,000``, ``0.92``; ``o200k`` is not one)."""


def _numbers(text: str) -> list[str]:
    return NUMBER.findall(text)


def _expected_text(value: dict[str, Any], raw: dict[str, Any]) -> str:
    """A value of the report, formatted again from the script's own JSON output."""

    def at(script: str, path: list[str | int]) -> Any:
        data = raw[script]
        for key in path:
            data = data[key]
        return data

    found = at(value["script"], value["path"])
    if value["spec"] == "s":
        return f"{found}{value['suffix']}"
    number = float(found)
    if "over" in value:
        number /= float(at(value["over"]["script"], value["over"]["path"]))
    number *= value["scale"]
    if value["spec"].endswith("d"):
        return format(round(number), value["spec"]) + value["suffix"]
    return format(number, value["spec"]) + value["suffix"]


def _table_cells(markdown: str) -> list[str]:
    """The body cells of every markdown table, in order (header and rule rows left out)."""
    lines = markdown.splitlines()
    cells: list[str] = []
    for i, line in enumerate(lines):
        if not line.startswith("| "):
            continue
        if i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            continue  # a header row
        cells += [cell.strip() for cell in line.strip("|").split(" | ")]
    return cells


def _png_chunks(data: bytes) -> list[bytes]:
    """The chunk types of a PNG file, each chunk's CRC checked (``AssertionError`` if bad)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = [], 8
    while offset < len(data):
        length = int.from_bytes(data[offset : offset + 4], "big")
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        crc = int.from_bytes(data[offset + 8 + length : offset + 12 + length], "big")
        assert zlib.crc32(kind + body) == crc, kind
        chunks.append(kind)
        offset += 12 + length
    return chunks


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One ``run_all.py --quick`` run: its markdown, plots, the scripts' JSON and output."""
    if (
        importlib.util.find_spec("matplotlib") is None
        or importlib.util.find_spec("langmem") is None
    ):
        missing = (
            "the benchmark requirements are not installed: "
            "pip install -r benchmarks/requirements.txt (make .venv/.dev-installed does)"
        )
        if os.environ.get("STM_REQUIRE_BENCHMARKS") == "1":  # set by .ci/run
            pytest.fail(missing)
        pytest.skip(missing)
    base = tmp_path_factory.mktemp("report")
    out, raw = base / "out", base / "raw"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run_all.py"),
            "--quick",
            "--out",
            str(out),
            "--raw",
            str(raw),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    return {
        "markdown": (out / "benchmarks.md").read_text(),
        "out": out,
        "raw": {stem: json.loads((raw / f"{stem}.json").read_text()) for stem in RAW_STEMS},
        "printed": {stem: (raw / f"{stem}.txt").read_text() for stem in RAW_STEMS},
        "cells": json.loads((raw / "cells.json").read_text()),
    }


@pytest.mark.postgres
class TestRunAllReport:
    """``run_all.py --quick`` writes docs/benchmarks.md and its plots from the scripts' output."""

    @pytest.fixture(autouse=True)
    def _server(self, postgres_uri: str) -> None:
        """The storage benchmark needs the server (it makes and drops databases of its own)."""

    def test_every_table_cell_is_a_figure_of_the_scripts_json(
        self, quick_report: dict[str, Any]
    ) -> None:
        """Each table cell's numbers are, in order, the values its source names in the JSON
        a script wrote in that run, formatted again here; no other number is in a cell."""
        cells = _table_cells(quick_report["markdown"])
        sources = quick_report["cells"]
        assert [c["text"] for c in sources] == cells
        assert len(cells) > 100
        for cell in sources:
            expected = [_expected_text(value, quick_report["raw"]) for value in cell["values"]]
            assert _numbers(cell["text"]) == [n for text in expected for n in _numbers(text)], cell
            position = 0
            for text in expected:  # each value is in the cell, in order
                position = cell["text"].index(text, position) + len(text)

    def test_the_headline_figures_are_the_ones_the_scripts_print(
        self, quick_report: dict[str, Any]
    ) -> None:
        """Spot checks against each script's own figures and printed report, reading the
        JSON without the report's source map."""
        markdown, raw, printed = (
            quick_report["markdown"],
            quick_report["raw"],
            quick_report["printed"],
        )
        rows = [line for line in markdown.splitlines() if line.startswith("| ")]

        trim = raw["bench_trim"]["sizes"][-1]
        ours_ms = trim["methods"]["trim_history (cached exact)"]["ms_per_call"]
        slow_ms = trim["methods"]["trim_messages + tiktoken"]["ms_per_call"]
        row = next(
            r for r in rows if f"{trim['messages']:,}-message history" in r and "tiktoken" in r
        )
        assert f"| {ours_ms:.2f} ms;" in row
        assert f"| {slow_ms:.2f} ms;" in row
        assert f"| {slow_ms / ours_ms:.1f}x |" in row
        assert f"{ours_ms:10.2f}" in printed["bench_trim"]  # the script printed the same

        storage = {r["name"]: r for r in raw["bench_storage_series"]["results"]}
        turns = raw["bench_storage_series"]["turns"]
        for backend in ("sqlite", "postgres"):
            stm, plain = storage[f"{backend}/stm"], storage[f"{backend}/plain"]
            mine, theirs = stm["sizes"][str(turns)], plain["sizes"][str(turns)]
            row = next(
                r
                for r in rows
                if r.startswith(f"| {backend}: bytes") and "(`STMSaver`)" in r and "plain" in r
            )
            assert f"| {mine / 1e6:.2f} (`STMSaver`)" in row
            assert f"| {theirs / 1e6:.2f} (plain" in row
            assert f"{backend}/stm " in printed["bench_storage_series"]
            assert f"{theirs / 1e6:>10.2f}" in printed["bench_storage_series"]

        # bench_storage.py's own report of the run is quoted whole
        report = raw["bench_storage_series"]["report"]
        assert report.rstrip("\n") in markdown
        assert printed["bench_storage_series"].startswith(report)

        turn = raw["bench_turns"]
        last = str(turn["points"][-1])
        wall = turn["variants"]["ours_summary"]["points"][last]["wall_ms"]
        row = next(r for r in rows if r.startswith(f"| wall ms of one agent turn at turn {last} "))
        assert f"| {wall:.1f} (`STMSaver(SqliteSaver)` + `SummarizeNode`" in row
        assert f"{wall:>9.1f}" in printed["bench_turns"]

        summary = raw["bench_summarize"]["sections"][0]["systems"]
        langmem = next(s for s in summary if s["name"] == "langmem SummarizationNode")
        assert f"| {langmem['gold']:.1%} (langmem SummarizationNode) |" in markdown
        assert f"{langmem['gold']:>6.1%}" in printed["bench_summarize"]

        tokens = raw["bench_tokens"]["encodings"]["o200k_base"]
        assert f"| {tokens['warm_ms']:.1f} (`TokenCounter`" in markdown
        assert f"{tokens['warm_ms']:8.1f} ms" in printed["bench_tokens"]

        load = raw["bench_load"]["rows"][0]
        ms = load["ms_per_turn"]["stm_exclusive"]
        assert f"| {ms:.2f} (`STMSaver(exclusive_runs=True)`) |" in markdown
        assert f"{load['stm_exclusive']:>22.1f}" in printed["bench_load"]

    def test_each_section_states_the_machine_versions_date_and_command(
        self, quick_report: dict[str, Any]
    ) -> None:
        """Every section names the CPU, the Python and package versions and its commands."""
        markdown = quick_report["markdown"]
        sections = markdown.split("\n## ")[1:]
        assert len(sections) == len(RAW_STEMS)
        cpu = next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            "unknown CPU",
        )
        for section in sections:
            assert f"- Machine: {cpu}, {os.cpu_count()} cores, " in section
            assert f"Python {platform.python_version()}; " in section
            for package in (
                "langgraph",
                "langchain-core",
                "langgraph-checkpoint-sqlite",
                "tiktoken",
                "langmem",
            ):
                assert f" {package} {importlib.metadata.version(package)}" in section
            assert re.search(r"- Date: \d{4}-\d\d-\d\d \d\d:\d\d UTC", section)
            command = r"- Command: `python benchmarks/bench_\w+\.py .*`, run by `python "
            assert re.search(command + r"benchmarks/run_all\.py --quick", section)

    def test_the_plots_are_valid_png_files_the_report_shows(
        self, quick_report: dict[str, Any]
    ) -> None:
        """Both plots exist, are well-formed PNGs (every chunk's CRC) and are linked."""
        for name in ("storage_vs_turns.png", "turn_cost_vs_turns.png"):
            chunks = _png_chunks((quick_report["out"] / "img" / name).read_bytes())
            assert chunks[0] == b"IHDR"
            assert b"IDAT" in chunks
            assert chunks[-1] == b"IEND"
            assert f"](img/{name})" in quick_report["markdown"]
