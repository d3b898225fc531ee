"""Run every benchmark in one go and write the report: docs/benchmarks.md and its plots.

Each benchmark script runs in a subprocess of its own with ``--json PATH``: it prints
its usual report (kept in ``<raw>/<name>.txt``) and writes every figure as JSON
(``<raw>/<name>.json``). This script reads only those JSON files, never the printed
text, and writes from them:

- ``<out>/benchmarks.md``: a section per benchmark with a table of workload, ours,
  the baseline and baseline / ours, each section headed by the machine (CPU model,
  cores, RAM), Python and package versions, the date and the exact commands;
- ``<out>/img/storage_vs_turns.png``: bytes on disk against turns, ``STMSaver`` vs the
  plain SQLite and PostgreSQL savers and ``DeltaChannel`` (``bench_storage_series.py``);
- ``<out>/img/turn_cost_vs_turns.png``: wall time of a turn against thread length
  (``bench_turns.py``);
- the throughput of worker processes on one database, ``STMSaver`` vs the bare saver
  (``bench_load.py``), in the tables;
- ``<raw>/cells.json``: where every number of every table comes from (a JSON path in a
  script's output, or the ratio of two), so a test can check the tables against the
  scripts' own output of the same run.

Run: ``python benchmarks/run_all.py`` (full sizes, several minutes: writes docs/), or
``python benchmarks/run_all.py --quick --out /tmp/report`` (small sizes, for the test);
``--raw DIR`` keeps the scripts' JSON and printed output (default: a temporary
directory, deleted); ``--skip-postgres`` without a server (``STM_TEST_POSTGRES_URI``
names it; the storage benchmark creates and drops databases of its own there).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PACKAGES = (
    "langgraph-stm",
    "langgraph",
    "langchain-core",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "tiktoken",
    "langmem",
    "langchain",
    "psycopg",
)
FULL_TURNS = 300
"""Thread length of the full run's storage and turn benchmarks (about 10 minutes in all on
an idle 2-core machine; the scripts' own defaults, 400 and 800 turns, take longer)."""
STORAGE_IMG = "img/storage_vs_turns.png"
TURNS_IMG = "img/turn_cost_vs_turns.png"

Path_ = tuple[str | int, ...]
"""A JSON path into one script's output: keys and list indexes."""


@dataclass(frozen=True)
class Source:
    """Where a value comes from: a JSON path in a script's output, or a ratio of two."""

    script: str
    path: Path_
    over: tuple[str, Path_] | None = None
    """When set, the value is the number at ``path`` divided by this ``(script, path)``."""

    def resolve(self, raw: dict[str, Any]) -> Any:
        value = lookup(raw[self.script], self.path)
        if self.over is not None:
            value = float(value) / float(lookup(raw[self.over[0]], self.over[1]))
        return value

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"script": self.script, "path": list(self.path)}
        if self.over is not None:
            data["over"] = {"script": self.over[0], "path": list(self.over[1])}
        return data


def lookup(data: Any, path: Path_) -> Any:
    """The value at ``path`` in ``data`` (nested dicts and lists)."""
    for key in path:
        data = data[key]
    return data


@dataclass(frozen=True)
class Value:
    """A value of a table cell: its source and its ``format`` spec (``s``: a name as is)."""

    source: Source
    spec: str
    suffix: str = ""
    scale: float = 1.0
    """A number is multiplied by it before formatting (bytes -> MB: 1e-6)."""

    def text(self, raw: dict[str, Any]) -> str:
        value = self.source.resolve(raw)
        if self.spec == "s":
            return f"{value}{self.suffix}"
        return number_text(float(value) * self.scale, self.spec) + self.suffix


def number_text(value: float, spec: str) -> str:
    """``value`` formatted with ``spec`` (an integer spec such as ``,d`` rounds first)."""
    return format(round(value) if spec.endswith("d") else value, spec)


@dataclass
class Cell:
    """A table cell: a template whose ``{}`` are filled with its values, in order."""

    template: str
    values: list[Value] = field(default_factory=list)

    def text(self, raw: dict[str, Any]) -> str:
        return self.template.format(*(v.text(raw) for v in self.values))


CellLike = Cell | str


@dataclass
class Table:
    """A markdown table of cells."""

    header: list[str]
    rows: list[list[CellLike]] = field(default_factory=list)

    def render(self, raw: dict[str, Any], manifest: list[dict[str, Any]], name: str) -> str:
        lines = [
            "| " + " | ".join(self.header) + " |",
            "|" + "|".join("---" for _ in self.header) + "|",
        ]
        for r, row in enumerate(self.rows):
            texts = []
            for c, cell in enumerate(row):
                cell = Cell(cell) if isinstance(cell, str) else cell
                text = cell.text(raw)
                texts.append(text)
                manifest.append(
                    {
                        "table": name,
                        "row": r,
                        "column": c,
                        "text": text,
                        "values": [
                            {
                                **v.source.to_json(),
                                "spec": v.spec,
                                "suffix": v.suffix,
                                "scale": v.scale,
                            }
                            for v in cell.values
                        ],
                    }
                )
            lines.append("| " + " | ".join(texts) + " |")
        return "\n".join(lines)


@dataclass
class Step:
    """One benchmark script run: its name (the raw files' stem) and its arguments."""

    name: str
    script: str
    args: list[str]

    def argv(self, raw: Path) -> list[str]:
        return [
            sys.executable,
            str(HERE / self.script),
            *self.args,
            "--json",
            str(raw / f"{self.name}.json"),
        ]

    def shown(self) -> str:
        """The command as a reader types it from the repository root."""
        command = shlex.join(["python", f"benchmarks/{self.script}", *self.args])
        return f"{command} --json $RAW/{self.name}.json"


def steps(quick: bool, postgres: bool) -> list[Step]:
    """The benchmark runs of a quick or a full report."""
    storage = (
        ["--turns", "8", "--every", "2", "--reloads", "5"]
        if quick
        else ["--turns", str(FULL_TURNS), "--every", "50"]
    )
    load = ["--workers", "2", "--threads", "2", "--turns", "3"] if quick else []
    if not postgres:
        storage.append("--skip-postgres")
        load.append("--skip-postgres")
    turns = (
        ["--turns", "12", "--points", "4,8,12"]
        if quick
        else [
            "--turns",
            str(FULL_TURNS),
            "--points",
            ",".join(str(t) for t in range(50, FULL_TURNS + 1, 50)),
        ]
    )
    return [
        Step("bench_tokens", "bench_tokens.py", ["--messages", "1000" if quick else "10000"]),
        Step("bench_trim", "bench_trim.py", ["--quick"] if quick else []),
        Step("bench_summarize", "bench_summarize.py", []),
        Step("bench_turns", "bench_turns.py", turns),
        Step("bench_storage_series", "bench_storage_series.py", storage),
        Step("bench_load", "bench_load.py", load),
    ]


def environment(command: str) -> dict[str, Any]:
    """The machine, Python and package versions, the date and the command of the run."""
    cpu = "unknown CPU"
    with contextlib.suppress(OSError, ValueError):  # no /proc: unknown
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram = "unknown"
    with contextlib.suppress(OSError, ValueError):  # no /proc: unknown
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = f"{int(line.split()[1]) / 1024**2:.1f} GiB"
                break
    load = "unknown"
    with contextlib.suppress(OSError, ValueError, IndexError):
        load = Path("/proc/loadavg").read_text().split()[0]
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return {
        "cpu": cpu,
        "cores": os.cpu_count() or 0,
        "ram": ram,
        "os": f"{platform.system()} {platform.release()}",
        "load": load,
        "python": platform.python_version(),
        "versions": versions,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
    }


def machine_line(env: dict[str, Any]) -> str:
    """CPU model, cores, RAM, OS and the load average when the run started."""
    return (
        f"{env['cpu']}, {env['cores']} cores, {env['ram']} RAM, {env['os']}; "
        f"load average {env['load']} at the start"
    )


def versions_line(env: dict[str, Any]) -> str:
    """Python and every package the benchmarks exercise, with their versions."""
    packages = ", ".join(f"{name} {version}" for name, version in env["versions"].items())
    return f"Python {env['python']}; {packages}"


def section_header(env: dict[str, Any], step: Step, seconds: float) -> str:
    """The lines under each section title: machine, versions, date and the commands."""
    return "\n".join(
        [
            f"- Machine: {machine_line(env)}",
            f"- Versions: {versions_line(env)}",
            f"- Date: {env['date']}; this script took {seconds:.0f} s",
            f"- Command: `{step.shown()}`, run by `{env['command']}`",
        ]
    )


def v(
    script: str, *path: str | int, spec: str = ".1f", suffix: str = "", scale: float = 1.0
) -> Value:
    """The number at ``path`` of ``script``'s output, formatted with ``spec``."""
    return Value(Source(script, path), spec, suffix, scale)


def ratio(script: str, top: Path_, bottom: Path_, spec: str = ".1f") -> Value:
    """``top / bottom`` of ``script``'s output, shown as ``N.Nx``."""
    return Value(Source(script, top, (script, bottom)), spec, "x")


def name(script: str, *path: str | int) -> Value:
    """A name taken as is from ``script``'s output (a system or method)."""
    return Value(Source(script, path), "s")


HEADER = ["workload", "ours", "baseline", "baseline / ours"]


def tokens_table(raw: dict[str, Any]) -> Table:
    s = "bench_tokens"
    table = Table(HEADER)
    for encoding in raw[s]["encodings"]:
        e: Path_ = ("encodings", encoding)
        table.rows.append(
            [
                Cell(
                    f"count a {{}}-message history exactly ({encoding}), ms",
                    [v(s, "messages", spec=",d")],
                ),
                Cell("{} (`TokenCounter`, per-message cache warm)", [v(s, *e, "warm_ms")]),
                Cell("{} (the same counter, cache empty)", [v(s, *e, "cold_ms")]),
                Cell("{}", [ratio(s, (*e, "cold_ms"), (*e, "warm_ms"))]),
            ]
        )
    e = ("encodings", "o200k_base")
    table.rows.append(
        [
            Cell(
                "count a {}-message history again after one new message, ms",
                [v(s, "messages", spec=",d")],
            ),
            Cell("{} (`TokenCounter`, exact, o200k_base)", [v(s, *e, "step_ms")]),
            Cell(
                "{} (`count_tokens_approximately`, an estimate: {} the exact count)",
                [
                    v(s, "approximate", "ms"),
                    v(s, "approximate", "over_exact", spec=".2f", suffix="x"),
                ],
            ),
            Cell("{}", [ratio(s, ("approximate", "ms"), (*e, "step_ms"), spec=".2f")]),
        ]
    )
    return table


TRIM_OURS = "trim_history (cached exact)"
TRIM_BASELINES = {
    "trim_messages + tiktoken": "`trim_messages`, exact tiktoken counter, no cache",
    "trim_messages + approximate": "`trim_messages`, `count_tokens_approximately`",
}


def trim_table(raw: dict[str, Any]) -> Table:
    s = "bench_trim"
    table = Table(HEADER)
    for i in range(len(raw[s]["sizes"])):
        mine: Path_ = ("sizes", i, "methods", TRIM_OURS)
        for baseline, label in TRIM_BASELINES.items():
            theirs: Path_ = ("sizes", i, "methods", baseline)
            table.rows.append(
                [
                    Cell(
                        "trim a {}-message history to {} tokens before each call, one new "
                        "message per call: ms/call; budget use",
                        [v(s, "sizes", i, "messages", spec=",d"), v(s, "budget", spec=",d")],
                    ),
                    Cell(
                        "{} ms; {} (`trim_history`, `TokenCounter`)",
                        [
                            v(s, *mine, "ms_per_call", spec=".2f"),
                            v(s, *mine, "budget_use", spec=".1%"),
                        ],
                    ),
                    Cell(
                        f"{{}} ms; {{}} ({label})",
                        [
                            v(s, *theirs, "ms_per_call", spec=".2f"),
                            v(s, *theirs, "budget_use", spec=".1%"),
                        ],
                    ),
                    Cell("{}", [ratio(s, (*theirs, "ms_per_call"), (*mine, "ms_per_call"))]),
                ]
            )
    return table


SUMMARY_METRICS = (
    ("mean_in", "mean model-input tokens per turn", ".0f"),
    ("gold", "share of the gold facts in the final model input", ".1%"),
    ("structured", "share of the structured facts (goal, constraints, plan, pending call)", ".1%"),
)


def summarize_table(raw: dict[str, Any]) -> Table:
    s = "bench_summarize"
    table = Table(HEADER)
    for i, part in enumerate(raw[s]["sections"]):
        systems = part["systems"]
        ours = next(
            j
            for j, row in enumerate(systems)
            if row["name"].startswith("langgraph-stm") and "offline" not in row["name"]
        )
        model = (
            Cell("faithful summary model")
            if i == 0
            else Cell(
                "terse summary model (at most {} tokens)",
                [v(s, "budgets", "terse", spec="d")],
            )
        )
        for j, row in enumerate(systems):
            if j == 0 or row["name"].startswith("langgraph-stm") or "error" in row:
                continue
            mine: Path_ = ("sections", i, "systems", ours)
            theirs: Path_ = ("sections", i, "systems", j)
            for key, what, spec in SUMMARY_METRICS:
                table.rows.append(
                    [
                        Cell(
                            f"{{}}-turn conversation, {model.template}: {what}",
                            [v(s, "turns", spec="d"), *model.values],
                        ),
                        Cell("{} ({})", [v(s, *mine, key, spec=spec), name(s, *mine, "name")]),
                        Cell("{} ({})", [v(s, *theirs, key, spec=spec), name(s, *theirs, "name")]),
                        Cell("{}", [ratio(s, (*theirs, key), (*mine, key), spec=".2f")]),
                    ]
                )
    return table


TURN_LABELS = {
    "plain": "plain `add_messages` on `SqliteSaver`, `trim_messages` input",
    "delta": "`DeltaChannel` on `SqliteSaver`, `trim_messages` input",
    "ours_keep": "`STMSaver(SqliteSaver)`, everything kept, `build_context`",
    "ours_summary": "`STMSaver(SqliteSaver)` + `SummarizeNode`, `build_context`",
}
TURN_METRICS = (
    ("wall_ms", "wall ms of one agent turn", ".1f", 1.0),
    ("cpu_ms", "CPU ms of one agent turn", ".1f", 1.0),
    ("file_bytes", "SQLite file", ".2f", 1e-6),
)


def turns_table(raw: dict[str, Any]) -> Table:
    s = "bench_turns"
    table = Table(HEADER)
    variants = raw[s]["variants"]
    last = str(raw[s]["points"][-1])
    for ours in ("ours_summary", "ours_keep"):
        for baseline in ("plain", "delta"):
            if ours not in variants or baseline not in variants:
                continue
            for key, what, spec, scale in TURN_METRICS:
                mine: Path_ = ("variants", ours, "points", last, key)
                theirs: Path_ = ("variants", baseline, "points", last, key)
                when = (
                    "after turn {}, MB"
                    if key == "file_bytes"
                    else "at turn {} (median of the {} turns ending there)"
                )
                table.rows.append(
                    [
                        Cell(
                            f"{what} {when}",
                            [v(s, "points", -1, spec="d")]
                            + ([] if key == "file_bytes" else [v(s, "window", spec="d")]),
                        ),
                        Cell(f"{{}} ({TURN_LABELS[ours]})", [v(s, *mine, spec=spec, scale=scale)]),
                        Cell(
                            f"{{}} ({TURN_LABELS[baseline]})",
                            [v(s, *theirs, spec=spec, scale=scale)],
                        ),
                        Cell("{}", [ratio(s, theirs, mine)]),
                    ]
                )
    return table


STORAGE_LABELS = {
    "plain": "plain `add_messages`",
    "delta": "`DeltaChannel` (beta)",
    "stm": "`STMSaver`",
    "stm_enc": "`STMSaver`, encrypted at rest",
    "stm_trim": "`STMSaver`, history trimmed",
}


def storage_index(raw: dict[str, Any]) -> dict[str, int]:
    """Position of each ``backend/variant`` result in the storage output."""
    return {r["name"]: i for i, r in enumerate(raw["bench_storage_series"]["results"])}


def storage_table(raw: dict[str, Any]) -> Table:
    s = "bench_storage_series"
    data = raw[s]
    index = storage_index(raw)
    last = str(data["turns"])
    table = Table(HEADER)
    for backend in data["backends"]:
        for ours in ("stm", "stm_trim"):  # stm_enc: its write time below, its bytes plotted
            label = (
                Cell("{} (`STMSaver`, history trimmed to {} tokens)")
                if ours == "stm_trim"
                else Cell(f"{{}} ({STORAGE_LABELS[ours]})")
            )
            for baseline in ("plain", "delta"):
                a, b = index.get(f"{backend}/{ours}"), index.get(f"{backend}/{baseline}")
                if a is None or b is None:
                    continue
                mine: Path_ = ("results", a, "sizes", last)
                theirs: Path_ = ("results", b, "sizes", last)
                extra = [v(s, "trim_tokens", spec=",d")] if ours == "stm_trim" else []
                table.rows.append(
                    [
                        Cell(
                            f"{backend}: bytes on disk after {{}} turns, MB",
                            [v(s, "turns", spec="d")],
                        ),
                        Cell(label.template, [v(s, *mine, spec=".2f", scale=1e-6), *extra]),
                        Cell(
                            f"{{}} ({STORAGE_LABELS[baseline]})",
                            [v(s, *theirs, spec=".2f", scale=1e-6)],
                        ),
                        Cell("{}", [ratio(s, theirs, mine)]),
                    ]
                )
        a, b = index.get(f"{backend}/stm_enc"), index.get(f"{backend}/stm")
        if a is not None and b is not None:  # the cost of encryption: ours against ours
            mine, theirs = ("results", a, "write_ms", last), ("results", b, "write_ms", last)
            table.rows.append(
                [
                    Cell(
                        f"{backend}: time in the saver's writes of turn {{}}, ms (median of "
                        "the {} turns ending there)",
                        [v(s, "turns", spec="d"), v(s, "window", spec="d")],
                    ),
                    Cell("{} (`STMSaver`, encrypted at rest)", [v(s, *mine)]),
                    Cell("{} (`STMSaver`, not encrypted)", [v(s, *theirs)]),
                    Cell("{}", [ratio(s, theirs, mine, spec=".2f")]),
                ]
            )
        a, b = index.get(f"{backend}/stm"), index.get(f"{backend}/plain")
        if a is not None and b is not None:
            table.rows.append(
                [
                    Cell(
                        f"{backend}: reload the {{}}-turn thread from a fresh saver, ms (median)",
                        [v(s, "turns", spec="d")],
                    ),
                    Cell("{} (`STMSaver`)", [v(s, "results", a, "reload_ms")]),
                    Cell("{} (plain `add_messages`)", [v(s, "results", b, "reload_ms")]),
                    Cell(
                        "{}", [ratio(s, ("results", b, "reload_ms"), ("results", a, "reload_ms"))]
                    ),
                ]
            )
    return table


LINE_STYLES: dict[str, dict[str, Any]] = {
    "plain": {"marker": "o", "color": "tab:blue"},
    "delta": {"marker": "s", "color": "tab:orange"},
    "stm": {"marker": "^", "color": "tab:green"},
    "stm_trim": {"marker": "v", "color": "tab:red", "linestyle": "--"},
    "stm_enc": {"marker": "D", "color": "tab:purple", "linestyle": ":"},
    "ours_keep": {"marker": "^", "color": "tab:green"},
    "ours_summary": {"marker": "v", "color": "tab:red", "linestyle": "--"},
}
"""The same variant kind draws alike in both plots (ours: green and red)."""


def footer(env: dict[str, Any], step: Step) -> str:
    """The text under a plot: machine, versions and the command."""
    keep = (
        "langgraph-stm",
        "langgraph",
        "langgraph-checkpoint-sqlite",
        "langgraph-checkpoint-postgres",
    )
    versions = ", ".join(f"{p} {env['versions'][p]}" for p in keep)
    return (
        f"{machine_line(env)}\nPython {env['python']}; {versions}; {env['date']}\n"
        f"{step.shown()} (run by {env['command']})"
    )


def plot_storage(raw: dict[str, Any], env: dict[str, Any], step: Step, path: Path) -> None:
    """Bytes on disk against turns, one panel per backend, one line per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    data = raw["bench_storage_series"]
    index = storage_index(raw)
    width = max(11.0, 6.0 * len(data["backends"]))
    fig, axes = plt.subplots(1, len(data["backends"]), figsize=(width, 5.2))
    axes = list(axes) if len(data["backends"]) > 1 else [axes]
    turns = data["checkpoints"]
    for ax, backend in zip(axes, data["backends"], strict=True):
        for variant in data["variants"]:
            i = index.get(f"{backend}/{variant}")
            if i is None:
                continue
            sizes = [data["results"][i]["sizes"][str(t)] / 1e6 for t in turns]
            label = STORAGE_LABELS.get(variant, variant).replace("`", "")
            style = LINE_STYLES.get(variant, {})
            ax.plot(turns, sizes, label=label, **style)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_locator(ticker.LogLocator(subs=(2.0, 5.0)))
        ax.yaxis.set_minor_formatter(ticker.FuncFormatter(lambda y, _: f"{y:g}"))
        ax.set_title({"sqlite": "SqliteSaver", "postgres": "PostgresSaver"}.get(backend, backend))
        ax.set_xlabel("turns (one human + one AI message of ~200 tokens each)")
        ax.set_ylabel("bytes on disk (MB, log scale)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Checkpoint storage vs thread length")
    fig.text(0.01, 0.01, footer(env, step), fontsize=6.5, va="bottom", family="monospace")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


def plot_turns(raw: dict[str, Any], env: dict[str, Any], step: Step, path: Path) -> None:
    """Wall time of one agent turn against thread length, one line per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = raw["bench_turns"]
    fig, ax = plt.subplots(figsize=(11, 5.5))
    points = data["points"]
    for variant, figures in data["variants"].items():
        wall = [figures["points"][str(p)]["wall_ms"] for p in points]
        label = TURN_LABELS.get(variant, variant).replace("`", "")
        ax.plot(points, wall, label=label, **LINE_STYLES.get(variant, {}))
    ax.set_xlabel("turn (thread length)")
    ax.set_ylabel(f"wall ms per turn (median of the {data['window']} turns ending there)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Cost of one agent turn vs thread length (SQLite, durability=sync)")
    fig.text(0.01, 0.01, footer(env, step), fontsize=6.5, va="bottom", family="monospace")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


LOAD_VARIANTS = {
    "stm": "`STMSaver`",
    "stm_exclusive": "`STMSaver(exclusive_runs=True)`",
}


def load_table(raw: dict[str, Any]) -> Table:
    s = "bench_load"
    table = Table(HEADER)
    for i in range(len(raw[s]["rows"])):
        for variant, label in LOAD_VARIANTS.items():
            ms: Path_ = ("rows", i, "ms_per_turn")
            table.rows.append(
                [
                    Cell(
                        "{} worker processes x {} threads x {} turns, {}, wall ms per turn",
                        [
                            v(s, "workers", spec="d"),
                            v(s, "threads", spec="d"),
                            v(s, "turns", spec="d"),
                            name(s, "rows", i, "backend"),
                        ],
                    ),
                    Cell(f"{{}} ({label})", [v(s, *ms, variant, spec=".2f")]),
                    Cell("{} (the bare inner saver)", [v(s, *ms, "plain", spec=".2f")]),
                    Cell("{}", [ratio(s, (*ms, "plain"), (*ms, variant), spec=".2f")]),
                ]
            )
    return table


SECTIONS: tuple[tuple[str, str, str, Callable[[dict[str, Any]], Table], str | None], ...] = (
    (
        "bench_storage_series",
        "Storage vs thread length",
        "Every turn one ~200-token HumanMessage goes in and the graph's single node answers "
        'with one ~200-token AIMessage (three checkpoints a turn, `durability="sync"`); the '
        "variants of `bench_storage.py` run side by side, each on a database of its own. Bytes "
        "on disk: SQLite pages in use after a WAL checkpoint; PostgreSQL total relation size "
        "of every table after `VACUUM`. `bench_storage.py`'s own report of the run follows "
        "the table.",
        storage_table,
        STORAGE_IMG,
    ),
    (
        "bench_turns",
        "Turn cost vs thread length",
        "One full agent turn (`graph.invoke` of a 100-200-token HumanMessage) on a growing "
        "SQLite thread: load, build the model input within 4,000 tokens, call a scripted "
        "model, save every checkpoint; every third turn also calls a tool. The four variants "
        "run interleaved turn by turn in one process.",
        turns_table,
        TURNS_IMG,
    ),
    (
        "bench_trim",
        "Trimming: `trim_history` vs `trim_messages`",
        "The steady state of an agent loop: a thread of N mixed messages (~100 tokens each), "
        "one new message per call, the history trimmed to the budget before each call, "
        "keeping the system message and starting at a human message. Budget use: exact "
        "tokens of the result / budget.",
        trim_table,
        None,
    ),
    (
        "bench_summarize",
        "Summarization: `SummarizeNode` vs langmem and `SummarizationMiddleware`",
        "A scripted 300-turn tool-heavy conversation with 16 gold facts (goal, constraints, "
        "plan status, a pending approval, decisions, error recoveries); every library gets "
        "the same scripted summary model and the same budgets (trigger 6,000, keep 2,000, "
        "context 4,000 tokens). Ours: `SummarizeNode` + `build_context` with the scripted "
        "model; langmem: `SummarizationNode` (over `summarize_messages`).",
        summarize_table,
        None,
    ),
    (
        "bench_load",
        "Throughput under load: `STMSaver` vs the bare saver",
        "Worker processes (spawn), each with several turns in flight on threads of its own, "
        "on one database: a SQLite file in WAL mode, and PostgreSQL through a connection "
        "pool per worker. Each turn is a run of a small `STMState` agent "
        "(`tests/support/load_worker.py`, the workers the concurrency suite checks for lost "
        "and leaked writes). The same load runs on the bare `SqliteSaver`/`PostgresSaver`, "
        "on `STMSaver` over it, and with exclusive runs on; wall time of all turns over all "
        "workers, per turn.",
        load_table,
        None,
    ),
    (
        "bench_tokens",
        "Token counting: `TokenCounter`",
        "Exact counts (tiktoken, the OpenAI chat format) of a mixed history, with the "
        "per-message cache warm and empty, and LangChain's `count_tokens_approximately` "
        "on the same history.",
        tokens_table,
        None,
    ),
)


def render(
    raw: dict[str, Any],
    env: dict[str, Any],
    plan: Sequence[Step],
    seconds: dict[str, float],
    manifest: list[dict[str, Any]],
) -> str:
    """docs/benchmarks.md from the scripts' outputs (``manifest`` gets every cell's source)."""
    by_name = {step.name: step for step in plan}
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by benchmarks/run_all.py from the benchmark scripts' JSON output; "
        "do not edit by hand. -->",
        "",
        f"Generated by `{env['command']}` on {env['date']} in {sum(seconds.values()):.0f} s. "
        "Every table compares langgraph-stm (*ours*) with a LangGraph or LangChain built-in "
        "or langmem (*baseline*) on the same workload in the same process; *baseline / ours* "
        "above 1 means the baseline needs more (time, bytes, tokens) or, for the shares of "
        "facts kept, keeps more. Each section names the script and the exact command; "
        "`$RAW` is the directory of the scripts' JSON output (`--raw`).",
        "",
    ]
    for name, title, about, make, image in SECTIONS:
        step = by_name[name]
        lines += [f"## {title}", "", section_header(env, step, seconds[name]), "", about, ""]
        if image is not None:
            lines += [f"![{title}]({image})", ""]
        lines += [make(raw).render(raw, manifest, name), ""]
        if name == "bench_storage_series":
            lines += ["```text", raw[name]["report"].rstrip("\n"), "```", ""]
    return "\n".join(lines)


def run_step(step: Step, raw: Path) -> float:
    """Run one script (its printed output kept in ``<raw>/<name>.txt``); its seconds."""
    print(f"[run_all] {step.shown()}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    with (raw / f"{step.name}.txt").open("w") as out, (raw / f"{step.name}.err").open("w") as err:
        done = subprocess.run(step.argv(raw), stdout=out, stderr=err, cwd=ROOT, check=False)
    seconds = time.perf_counter() - start
    if done.returncode:
        tail = (raw / f"{step.name}.err").read_text()[-3000:]
        raise SystemExit(f"{step.script} failed (exit {done.returncode}):\n{tail}")
    print(f"[run_all]   done in {seconds:.0f} s", file=sys.stderr, flush=True)
    return seconds


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (for the test)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs", help="where benchmarks.md and img/ go"
    )
    parser.add_argument("--raw", type=Path, help="keep the scripts' JSON and output here")
    parser.add_argument("--skip-postgres", action="store_true")
    args = parser.parse_args(argv)
    shown = [a for a in (sys.argv[1:] if argv is None else argv)]
    env = environment(shlex.join(["python", "benchmarks/run_all.py", *shown]))
    plan = steps(args.quick, postgres=not args.skip_postgres)
    with contextlib.ExitStack() as stack:
        raw = args.raw or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        raw.mkdir(parents=True, exist_ok=True)
        seconds = {step.name: run_step(step, raw) for step in plan}
        outputs = {step.name: json.loads((raw / f"{step.name}.json").read_text()) for step in plan}
        manifest: list[dict[str, Any]] = []
        markdown = render(outputs, env, plan, seconds, manifest)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "benchmarks.md").write_text(markdown, encoding="utf-8")
        by_name = {step.name: step for step in plan}
        plot_storage(outputs, env, by_name["bench_storage_series"], args.out / STORAGE_IMG)
        plot_turns(outputs, env, by_name["bench_turns"], args.out / TURNS_IMG)
        (raw / "cells.json").write_text(json.dumps(manifest, indent=2) + "\n")
        (raw / "environment.json").write_text(json.dumps(env, indent=2) + "\n")
    print(
        f"[run_all] wrote {args.out / 'benchmarks.md'} and {args.out / 'img'} "
        f"in {sum(seconds.values()):.0f} s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
