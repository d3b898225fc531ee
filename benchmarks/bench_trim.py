"""Benchmark: trim_history (cached exact counter) vs langchain_core trim_messages.

The steady state of an agent loop: a thread of N mixed messages (about 100 tokens
each: user turns, assistant tool calls, tool results, assistant answers), one new
message per model call, and the history trimmed to a 4,000-token budget before each
call. Compared in the same process, on the same inputs:

- ours: ``trim_history(..., token_counter=TokenCounter())`` (per-message cache);
- (a) ``trim_messages`` with an exact tiktoken counter (the same formula, no cache);
- (b) ``trim_messages`` with ``count_tokens_approximately``.

All three use ``strategy="last"``-style trimming that keeps the system message and
starts the window at a human message (``start_on="human"``); ours is also shown with
``start_on="any"``. Budget use is the exact token count of the result divided by the
budget. "broken" counts results that fail ``validate_history`` (a cut tool pair).

Run: ``python benchmarks/bench_trim.py`` (``--quick`` for a smoke run, ``--json PATH`` to
also write every figure as JSON).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.messages.utils import count_tokens_approximately

from langgraph_stm import TokenCounter, trim_history, validate_history

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_json import write_json

BUDGET = 4_000
SIZES = (1_000, 10_000)
"""History lengths (messages) trimmed in the steady state."""
OURS = "trim_history (cached exact)"
TIKTOKEN = "trim_messages + tiktoken"
APPROXIMATE = "trim_messages + approximate"
WORDS = (
    "invoice customer refund ledger migration schema batch export region cutover webhook "
    "payment account retry timeout token replica traffic monitor report deadline policy "
    "the a of to and for with on in by from is was will be please check confirm update"
).split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def message_stream(seed: int = 7) -> Callable[[], BaseMessage]:
    """Return a function producing the next message of an endless valid conversation.

    The cycle is: user turn, assistant tool call, tool result, assistant answer (about
    100 tokens each; the tool call carries its text in content and arguments).
    """
    rng = random.Random(seed)
    counter = [0]
    last_call = [""]

    def next_message() -> BaseMessage:
        n = counter[0]
        counter[0] = n + 1
        phase = n % 4
        if phase == 0:
            return HumanMessage(_text(rng, 92), id=f"m{n}")
        if phase == 1:
            call_id = f"call-{n}"
            last_call[0] = call_id
            args = {"query": _text(rng, 30)}
            return AIMessage(
                _text(rng, 55),
                id=f"m{n}",
                tool_calls=[{"name": "search_ledger", "args": args, "id": call_id}],
            )
        if phase == 2:
            return ToolMessage(_text(rng, 94), tool_call_id=last_call[0], id=f"m{n}")
        return AIMessage(_text(rng, 94), id=f"m{n}")

    return next_message


def make_history(size: int) -> tuple[list[BaseMessage], Callable[[], BaseMessage]]:
    """A system message plus ``size - 1`` messages, and the stream that continues it."""
    stream = message_stream()
    history: list[BaseMessage] = [SystemMessage("You are a billing migration agent.", id="sys")]
    while len(history) < size:
        history.append(stream())
    return history, stream


@dataclass
class Row:
    """Timings and budget use of one method at one history size."""

    name: str
    seconds: list[float]
    used: list[int]
    broken: int

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.seconds) * 1000

    @property
    def use(self) -> float:
        return statistics.fmean(self.used) / BUDGET


def run(
    name: str,
    trim: Callable[[list[BaseMessage]], Sequence[BaseMessage]],
    size: int,
    calls: int,
    exact: TokenCounter,
) -> Row:
    """Time ``calls`` steady-state trims (one new message appended before each)."""
    history, stream = make_history(size)
    seconds: list[float] = []
    used: list[int] = []
    broken = 0
    for _ in range(calls):
        history.append(stream())
        start = time.perf_counter()
        kept = trim(history)
        seconds.append(time.perf_counter() - start)
        used.append(exact(list(kept)))
        broken += bool(validate_history(kept))
    return Row(name, seconds, used, broken)


def measure(quick: bool = False, sizes: Sequence[int] = SIZES) -> dict[str, Any]:
    """Every figure of the run, as plain data (what ``--json`` writes)."""
    exact = TokenCounter(encoding="o200k_base")  # measuring stick, cache warm
    uncached = TokenCounter(encoding="o200k_base", cache_size=0)  # (a): tiktoken, no cache
    sample, _ = make_history(1_000)
    data: dict[str, Any] = {
        "budget": BUDGET,
        "tokens_per_message": (exact(sample) - 3) / len(sample),
        "quick": quick,
        "sizes": [],
    }
    for size in sizes:
        ours_counter = TokenCounter(encoding="o200k_base")
        cold_history, _ = make_history(size)
        start = time.perf_counter()
        trim_history(cold_history, max_tokens=BUDGET, token_counter=ours_counter)
        cold_ms = (time.perf_counter() - start) * 1000

        def ours(h: list[BaseMessage], counter: TokenCounter = ours_counter) -> list[BaseMessage]:
            return trim_history(h, max_tokens=BUDGET, token_counter=counter).messages

        def ours_any(
            h: list[BaseMessage], counter: TokenCounter = ours_counter
        ) -> list[BaseMessage]:
            return trim_history(
                h, max_tokens=BUDGET, token_counter=counter, start_on="any"
            ).messages

        def lc(counter: Callable[[list[BaseMessage]], int]) -> Callable[..., list[BaseMessage]]:
            def trim(h: list[BaseMessage]) -> list[BaseMessage]:
                return trim_messages(
                    h,
                    max_tokens=BUDGET,
                    token_counter=counter,
                    strategy="last",
                    include_system=True,
                    start_on="human",
                )

            return trim

        slow_calls = 2 if quick else (5 if size > 1_000 else 20)
        fast_calls = 20 if quick else 200
        rows = [
            run(OURS, ours, size, fast_calls, exact),
            run("trim_history start_on=any", ours_any, size, fast_calls, exact),
            run(TIKTOKEN, lc(uncached), size, slow_calls, exact),
            run(APPROXIMATE, lc(count_tokens_approximately), size, fast_calls, exact),
        ]
        base = rows[0].mean_ms
        data["sizes"].append(
            {
                "messages": size,
                "cold_ms": cold_ms,
                "methods": {
                    row.name: {
                        "calls": len(row.seconds),
                        "ms_per_call": row.mean_ms,
                        "vs_ours": row.mean_ms / base,
                        "budget_use": row.use,
                        "broken": row.broken,
                    }
                    for row in rows
                },
            }
        )
    return data


def report(data: dict[str, Any]) -> None:
    """Print the figures of :func:`measure` for a reader."""
    print(
        f"messages average {data['tokens_per_message']:.1f} tokens (o200k_base); "
        f"budget {data['budget']} tokens"
    )
    for point in data["sizes"]:
        print(
            f"\n{point['messages']:,} messages "
            f"(first, cold-cache trim_history call: {point['cold_ms']:.1f} ms)"
        )
        print(
            f"{'method':32} {'calls':>5} {'ms/call':>10} {'vs ours':>9} {'budget use':>10} broken"
        )
        for name, row in point["methods"].items():
            print(
                f"{name:32} {row['calls']:5d} {row['ms_per_call']:10.2f} {row['vs_ours']:8.1f}x "
                f"{row['budget_use']:9.1%} {row['broken']:6d}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, for a smoke run")
    parser.add_argument(
        "--json", metavar="PATH", help="also write every figure as JSON to PATH ('-': stdout only)"
    )
    args = parser.parse_args()
    write_json(measure(args.quick), args.json, report)


if __name__ == "__main__":
    main()
