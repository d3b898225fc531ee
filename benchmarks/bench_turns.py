"""Benchmark: one full agent turn on a long thread, plain LangGraph vs langgraph-stm.

A turn is ``graph.invoke`` of one ~100-200-token HumanMessage on an existing thread:
LangGraph loads the thread from SQLite, the model node builds the model input within a
4,000-token budget and calls a scripted fake model (deterministic, no network), and
every checkpoint is saved (``durability="sync"``, so no write overlaps the next step
and each turn is billed its own writes). Every third turn the model first calls a
tool, a tools node answers with a ~100-token ToolMessage, and the model then answers.
Four variants, one SQLite file and one thread each, run interleaved turn by turn in
one process (turn t of each, then turn t+1, each from a collected heap):

- ``plain``: ``messages: Annotated[list, add_messages]`` on ``SqliteSaver``; the model
  input is ``trim_messages(strategy="last", start_on="human", include_system=True)``
  with an exact ``TokenCounter`` (uncached with ``--plain-uncached``);
- ``delta``: the same graph with ``messages`` as a ``DeltaChannel`` (beta) with an
  ``add_messages`` batch reducer, on ``SqliteSaver``;
- ``ours_keep``: ``STMState`` on ``STMSaver(SqliteSaver)``, every message kept, the
  model input from ``build_context(state, max_tokens=4000)``;
- ``ours_summary``: ``ours_keep`` plus a ``SummarizeNode`` before the model node
  (offline ``ExtractiveSummarizer``; trigger 6,000 tokens, keep 3,000).

Each variant has its own ``TokenCounter`` (no cache shared between variants).

Measured per turn: CPU time (``time.process_time``, all threads) and wall time
(``time.perf_counter``) around the ``invoke``, and the SQLite commits of the turn.
Commits are counted on the connection handed to ``SqliteSaver``: its trace callback
sees every statement SQLite runs, including the ``COMMIT`` that Python's sqlite3
issues on ``conn.commit()`` (only when a transaction is open); a write statement run
outside a transaction (autocommit mode, its own implicit transaction) counts as one
commit too. Reported at turns 50, 200, 500 and 800 (or ``--points``; those <=
``--turns``, plus ``--turns`` itself when not listed): the median CPU and wall time of
the 10 turns ending there, the mean commits per turn of those turns, and the file
size (pages in use after ``PRAGMA wal_checkpoint(TRUNCATE)``); then derived ratios and
the issue's targets as PASS/FAIL lines.

Run: ``python benchmarks/bench_turns.py`` (800 turns, many minutes: plain slows down;
``--turns 6`` for a smoke run, ``--variants plain,ours_summary``, ``--points 100,300``
for other report points, ``--json`` for all figures as JSON instead of the report
(``--json PATH``: the report, and the JSON written to PATH), ``--seed``; ``--profile
200`` prints a CPU-time cProfile of turn 200 of each variant, all threads merged, on
stderr: that turn then runs slower, one sample of its window).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import Field
from typing_extensions import TypedDict

from langgraph_stm import STMSaver, STMState, SummarizeNode, TokenCounter, build_context

VARIANTS = ("plain", "delta", "ours_keep", "ours_summary")
REPORT_AT = (50, 200, 500, 800)
WINDOW = 10
"""Turns per report point (the medians are of the WINDOW turns ending there)."""
BUDGET = 4_000
TRIGGER, KEEP = 6_000, 3_000
"""SummarizeNode settings of ours_summary: live history stays around the budget."""
TOOL_EVERY = 3
SYSTEM = "You are a billing migration agent. Answer briefly and cite the ledger."
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "DROP", "ALTER")


def vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    """Pseudo-words, so messages compress about as well as prose (as in bench_storage)."""
    consonants, vowels = "bcdfghklmnprstvwz", "aeiou"
    words: set[str] = set()
    while len(words) < size:
        syllables = rng.randint(1, 4)
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables)))
    return sorted(words)


@dataclass
class Script:
    """Every text of the run, drawn up front from one seeded RNG (same for all variants)."""

    humans: list[str]
    answers: list[str]
    calls: dict[int, tuple[str, str]]
    """Turn -> (AI preamble, tool query) for the turns with a tool call."""
    results: dict[int, str]

    @classmethod
    def draw(cls, turns: int, seed: int) -> Script:
        rng = random.Random(seed)
        words = vocabulary(rng)
        counter = TokenCounter()

        def text(tokens: int) -> str:
            out: list[str] = []
            while counter.count_text(" ".join(out)) < tokens:
                out.extend(rng.choice(words) for _ in range(5))
            return " ".join(out)

        tool_turns = [t for t in range(1, turns + 1) if t % TOOL_EVERY == 0]
        return cls(
            humans=[text(rng.randint(100, 200)) for _ in range(turns)],
            answers=[text(rng.randint(100, 200)) for _ in range(turns)],
            calls={t: (text(30), text(20)) for t in tool_turns},
            results={t: text(100) for t in tool_turns},
        )

    def replies(self, turns: int) -> list[tuple[str, str, list[dict[str, Any]]]]:
        """The fake model's answers in call order: (id, content, tool_calls)."""
        out: list[tuple[str, str, list[dict[str, Any]]]] = []
        for t in range(1, turns + 1):
            if t in self.calls:
                preamble, query = self.calls[t]
                call = {"name": "search_ledger", "args": {"query": query}, "id": f"call-{t}"}
                out.append((f"ai-{t}-call", preamble, [call]))
            out.append((f"ai-{t}", self.answers[t - 1], []))
        return out


class ScriptedModel(BaseChatModel):
    """A deterministic fake chat model: answers its script in order, whatever the input.

    The script is the same for every variant, so all threads get the same messages;
    the last prompt is kept so its size can be checked outside the measured time.
    """

    script: list[tuple[str, str, list[dict[str, Any]]]]
    position: int = 0
    last_prompt: list[BaseMessage] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "bench-scripted"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.last_prompt = list(messages)
        msg_id, content, calls = self.script[self.position]
        self.position += 1
        message = AIMessage(content, id=msg_id, tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=message)])


class CommitCounter:
    """Counts the commits of one sqlite3 connection through its trace callback."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.count = 0
        conn.set_trace_callback(self._trace)

    def _trace(self, statement: str) -> None:
        head = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
        if head in ("COMMIT", "END") or (head in WRITES and not self.conn.in_transaction):
            self.count += 1


class PlainState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def add_messages_batch(current: list[AnyMessage], batches: Sequence[Any]) -> list[AnyMessage]:
    """DeltaChannel reducer: ``add_messages`` folded over a batch of writes."""
    result = current
    for batch in batches:
        result = add_messages(result, batch)  # type: ignore[assignment]
    return result


class DeltaState(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(add_messages_batch)]


def build(
    variant: str,
    saver: Any,
    model: ScriptedModel,
    counter: TokenCounter,
    results: dict[int, str],
) -> Any:
    """The agent graph of one variant: [summarize ->] model <-> tools."""
    if variant in ("plain", "delta"):

        def model_input(state: Any) -> list[BaseMessage]:
            return trim_messages(
                state["messages"],
                max_tokens=BUDGET,
                token_counter=counter,
                strategy="last",
                start_on="human",
                include_system=True,
            )
    else:

        def model_input(state: Any) -> list[BaseMessage]:
            return build_context(state, max_tokens=BUDGET, token_counter=counter).messages

    def agent(state: Any) -> dict[str, Any]:
        return {"messages": [model.invoke(model_input(state))]}

    def tools(state: Any) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        turn = int(call["id"].removeprefix("call-"))
        answer = ToolMessage(results[turn], tool_call_id=call["id"], id=f"tool-{turn}")
        return {"messages": [answer]}

    def route(state: Any) -> str:
        return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

    state = {"plain": PlainState, "delta": DeltaState}.get(variant, STMState)
    builder = StateGraph(state).add_node("agent", agent).add_node("tools", tools)
    if variant == "ours_summary":
        summarize = SummarizeNode(trigger_tokens=TRIGGER, keep_tokens=KEEP, token_counter=counter)
        builder.add_node(summarize).add_edge(START, summarize.name)
        builder.add_edge(summarize.name, "agent")
    else:
        builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END]).add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


class AllThreadsProfile:
    """CPU-time cProfile of the calling thread and of every thread started meanwhile.

    LangGraph runs nodes and checkpoint writes on worker threads (started per
    ``invoke``), where a plain ``cProfile`` of the caller sees only lock waits.
    """

    def __init__(self, active: bool) -> None:
        self.active = active
        self.profiles: list[cProfile.Profile] = []

    def _start_in_thread(self, *_: Any) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile(time.thread_time)  # CPU time, not waits
        self.profiles.append(profile)
        profile.enable()

    def __enter__(self) -> AllThreadsProfile:
        if self.active:
            threading.setprofile(self._start_in_thread)
            self._start_in_thread()
        return self

    def __exit__(self, *_: object) -> None:
        if self.active:
            threading.setprofile(None)  # type: ignore[arg-type]
            self.profiles[0].disable()

    def print(self, top: int) -> None:
        stats = pstats.Stats(*self.profiles, stream=sys.stderr)
        stats.sort_stats("cumulative").print_stats(top)


def file_size(path: Path) -> int:
    """Bytes of the pages in use, after folding the WAL into the file."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        page = conn.execute("PRAGMA page_size").fetchone()[0]
    return int((pages - free) * page)


@dataclass
class Run:
    """Per-turn measurements of one variant."""

    name: str
    cpu_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    commits: list[int] = field(default_factory=list)
    sizes: dict[int, int] = field(default_factory=dict)
    live: dict[int, int] = field(default_factory=dict)
    """Messages in the thread's state at each report point."""
    max_input_tokens: int = 0

    def point(self, turn: int) -> dict[str, float]:
        lo = max(0, turn - WINDOW)
        return {
            "cpu_ms": statistics.median(self.cpu_ms[lo:turn]),
            "wall_ms": statistics.median(self.wall_ms[lo:turn]),
            "commits_per_turn": statistics.fmean(self.commits[lo:turn]),
            "file_bytes": self.sizes[turn],
            "messages": self.live[turn],
        }

    def commits_by_kind(self) -> dict[str, float]:
        """Mean commits of a chat turn and of a tool turn (over every turn run)."""
        kinds: dict[str, list[int]] = {"chat": [], "tool": []}
        for turn, n in enumerate(self.commits, 1):
            kinds["tool" if turn % TOOL_EVERY == 0 else "chat"].append(n)
        return {k: statistics.fmean(v) for k, v in kinds.items() if v}


def run(
    variants: Sequence[str],
    turns: int,
    seed: int,
    points: Sequence[int],
    profile: int = 0,
    plain_uncached: bool = False,
) -> dict[str, Run]:
    """Run every variant in lockstep and return its measurements."""
    script = Script.draw(turns, seed)
    replies = script.replies(turns)
    measure = TokenCounter()
    runs = {v: Run(v) for v in variants}
    config = {"configurable": {"thread_id": "bench"}}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        setups: dict[str, tuple[Any, ScriptedModel, CommitCounter, Path]] = {}
        for variant in variants:
            path = Path(tmp) / f"{variant}.sqlite"
            conn = stack.enter_context(closing(sqlite3.connect(path, check_same_thread=False)))
            commits = CommitCounter(conn)
            saver: Any = SqliteSaver(conn)
            if variant.startswith("ours"):
                saver = STMSaver(saver)
            saver.setup()
            model = ScriptedModel(script=replies)
            uncached = plain_uncached and not variant.startswith("ours")
            counter = TokenCounter(cache_size=0) if uncached else TokenCounter()
            graph = build(variant, saver, model, counter, script.results)
            setups[variant] = (graph, model, commits, path)
        for turn in range(1, turns + 1):
            for variant, (graph, model, commits, path) in setups.items():
                human = HumanMessage(script.humans[turn - 1], id=f"h-{turn}")
                messages = [SystemMessage(SYSTEM, id="sys"), human] if turn == 1 else [human]
                # Each turn starts from a collected heap: a collection that another
                # variant's garbage makes due is not billed to this one.
                gc.collect()
                before = commits.count
                cpu, wall = time.process_time(), time.perf_counter()
                with AllThreadsProfile(turn == profile) as profiler:
                    state = graph.invoke({"messages": messages}, config, durability="sync")
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                r = runs[variant]
                r.cpu_ms.append(cpu * 1000)
                r.wall_ms.append(wall * 1000)
                r.commits.append(commits.count - before)
                r.max_input_tokens = max(r.max_input_tokens, measure(model.last_prompt))
                if turn in points:
                    r.sizes[turn] = file_size(path)
                    r.live[turn] = len(state["messages"])
                if turn == profile:
                    print(f"\n== cProfile, all threads: {variant}, turn {turn} ==", file=sys.stderr)
                    profiler.print(15)
            if turn % 50 == 0:
                print(f"turn {turn}/{turns}", file=sys.stderr, flush=True)
    return runs


def figures(runs: dict[str, Run], points: Sequence[int]) -> dict[str, Any]:
    """Every figure of the run, as plain data (what ``--json`` prints)."""
    first, last = points[0], points[-1]
    variants: dict[str, Any] = {}
    for name, r in runs.items():
        at = {p: r.point(p) for p in points}
        variants[name] = {
            "points": {str(p): v for p, v in at.items()},
            "cpu_growth": at[last]["cpu_ms"] / at[first]["cpu_ms"],
            "commits_per_turn": statistics.fmean(r.commits),
            "commits_by_kind": r.commits_by_kind(),
            "max_input_tokens": r.max_input_tokens,
        }
    ratios: dict[str, Any] = {}
    if "plain" in runs and "ours_summary" in runs:
        plain, ours = runs["plain"].point(last), runs["ours_summary"].point(last)
        ratios["plain_over_summary_wall"] = plain["wall_ms"] / ours["wall_ms"]
        ratios["plain_over_summary_cpu"] = plain["cpu_ms"] / ours["cpu_ms"]
    if "ours_keep" in runs and "ours_summary" in runs:
        ratios["summary_over_keep_size"] = {
            str(p): runs["ours_summary"].sizes[p] / runs["ours_keep"].sizes[p] for p in points
        }
    return {"points": list(points), "variants": variants, "ratios": ratios}


def targets(data: dict[str, Any]) -> list[tuple[str, bool]]:
    """The issue's targets that the variants run allow checking: (text, passed)."""
    v, ratios = data["variants"], data["ratios"]
    first, last = data["points"][0], data["points"][-1]
    growth = f"CPU/turn @{last} / @{first}"
    checks: list[tuple[str, bool]] = []
    if "ours_keep" in v:
        g = v["ours_keep"]["cpu_growth"]
        checks.append((f"ours_keep {growth}: {g:.2f}x (<= 2x)", g <= 2))
    if "ours_summary" in v:
        g = v["ours_summary"]["cpu_growth"]
        checks.append((f"ours_summary {growth}: {g:.2f}x (<= 1.2x)", g <= 1.2))
    if "plain_over_summary_wall" in ratios:
        x = ratios["plain_over_summary_wall"]
        checks.append((f"ours_summary vs plain, wall @{last}: {x:.1f}x faster (>= 15x)", x >= 15))
    if "summary_over_keep_size" in ratios:
        sizes = ratios["summary_over_keep_size"]
        worst = max(sizes.values())
        checks.append(
            (f"ours_summary file / ours_keep file, worst point: {worst:.2f}x (<= 1)", worst <= 1)
        )
    for ours in ("ours_keep", "ours_summary"):
        if ours not in v or "plain" not in v:
            continue
        mine, theirs = v[ours]["commits_by_kind"], v["plain"]["commits_by_kind"]
        shown = ", ".join(f"{k} {mine[k]:.2f} vs {theirs[k]:.2f}" for k in mine)
        ok = all(mine[k] <= theirs[k] + 1 for k in mine)
        checks.append((f"{ours} commits/turn vs plain: {shown} (<= plain + 1)", ok))
    return checks


def report(data: dict[str, Any]) -> None:
    header = (
        f"{'turn':>5}  {'variant':<13}{'msgs':>6}{'cpu ms':>9}{'wall ms':>9}"
        f"{'commits':>9}{'file MB':>9}"
    )
    print(header)
    print("-" * len(header))
    for p in data["points"]:
        for name, v in data["variants"].items():
            f = v["points"][str(p)]
            print(
                f"{p:>5}  {name:<13}{f['messages']:>6}{f['cpu_ms']:>9.1f}{f['wall_ms']:>9.1f}"
                f"{f['commits_per_turn']:>9.2f}{f['file_bytes'] / 1e6:>9.2f}"
            )
    first, last = data["points"][0], data["points"][-1]
    print(f"\n(median of the {WINDOW} turns ending at each point; commits: their mean)")
    print(f"\n{'variant':<13}{'CPU growth':>11}{'commits chat/tool':>19}{'max input tok':>15}")
    for name, v in data["variants"].items():
        kinds = v["commits_by_kind"]
        split = "/".join(f"{kinds[k]:.2f}" for k in ("chat", "tool") if k in kinds)
        print(
            f"{name:<13}{v['cpu_growth']:>10.2f}x{split:>19}{v['max_input_tokens']:>15}"
            f"   (CPU @{last} / @{first})"
        )
    ratios = data["ratios"]
    if "plain_over_summary_wall" in ratios:
        print(
            f"\nplain / ours_summary @{last}: wall {ratios['plain_over_summary_wall']:.1f}x, "
            f"CPU {ratios['plain_over_summary_cpu']:.1f}x"
        )
    if "summary_over_keep_size" in ratios:
        sizes = ", ".join(f"@{p} {x:.2f}x" for p, x in ratios["summary_over_keep_size"].items())
        print(f"ours_summary file / ours_keep file: {sizes}")
    print()
    for text, ok in data["targets"]:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=800)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="print every figure as JSON instead of the report; with PATH, print the report "
        "and write the JSON to PATH",
    )
    parser.add_argument(
        "--points",
        default="",
        metavar="T1,T2,...",
        help=f"turns to report at (default {','.join(map(str, REPORT_AT))} up to --turns)",
    )
    parser.add_argument(
        "--profile", type=int, default=0, metavar="TURN", help="cProfile TURN, on stderr"
    )
    parser.add_argument(
        "--plain-uncached",
        action="store_true",
        help="plain/delta count tokens with TokenCounter(cache_size=0) (no per-message cache)",
    )
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or not variants or args.turns < 1:
        parser.error(f"--turns must be >= 1 and --variants a subset of {','.join(VARIANTS)}")
    try:
        listed = [int(p) for p in args.points.split(",") if p] or list(REPORT_AT)
    except ValueError:
        parser.error("--points must be turn numbers separated by commas, e.g. 50,100,200")
    points = sorted({p for p in listed if 1 <= p <= args.turns} | {args.turns})
    runs = run(variants, args.turns, args.seed, points, args.profile, args.plain_uncached)
    data = figures(runs, points)
    data["targets"] = targets(data)
    data.update(
        turns=args.turns,
        seed=args.seed,
        budget=BUDGET,
        window=WINDOW,
        durability="sync",
        plain_counter="uncached" if args.plain_uncached else "cached",
    )
    if args.json != "-":
        report(data)
    if args.json:
        data["targets"] = [{"target": t, "pass": ok} for t, ok in data["targets"]]
        if args.json == "-":
            print(json.dumps(data, indent=2))
        else:
            Path(args.json).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
