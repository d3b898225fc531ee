"""Encoding load time and message-counting throughput of TokenCounter.

Run: python benchmarks/bench_tokens.py [--messages 10000] [--json PATH]

Prints, for cl100k_base and o200k_base:
- the time to build the encoding from the shipped files (fresh process, median of 3);
- tokens/s counting a 10,000-message history cold (empty cache) and warm (cached),
  and the warm recount after one new message (the steady state of an agent loop);
- for reference, LangChain's count_tokens_approximately on the same history.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from langgraph_stm import TokenCounter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_json import write_json

WORDS = [
    *"invoice billing migrate schema field customer export retry error tool".split(),
    *"search result table row column value constraint plan step status done".split(),
    *"pending the a of to and in for with on is was will be 42 3.14".split(),
    *["Zürich", "计费", "🚀", "{json}", "[list]"],
]


def history(n: int, seed: int = 7) -> list[BaseMessage]:
    """A mixed history: human turns, AI tool calls with results, AI answers."""
    rng = random.Random(seed)
    out: list[BaseMessage] = []
    i = 0
    while len(out) < n:
        text = " ".join(rng.choice(WORDS) for _ in range(60))
        kind = i % 4
        if kind == 0:
            out.append(HumanMessage(text, id=f"h{i}"))
        elif kind == 1:
            call = {"name": "search", "args": {"q": text[:80], "limit": 5}, "id": f"c{i}"}
            out.append(AIMessage("", id=f"a{i}", tool_calls=[call]))
            out.append(ToolMessage(text, tool_call_id=f"c{i}", id=f"t{i}"))
        else:
            out.append(AIMessage(text, id=f"a{i}"))
        i += 1
    return out[:n]


def load_time(name: str) -> float:
    code = (
        "import time; t=time.perf_counter(); from langgraph_stm._tokens import load_encoding; "
        f"import langgraph_stm; t=time.perf_counter(); load_encoding({name!r}); "
        "print(time.perf_counter()-t)"
    )
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(3)
    ]
    return statistics.median(runs)


def measure(messages: int) -> dict[str, Any]:
    """Every figure of the run, as plain data (what ``--json`` writes)."""
    msgs = history(messages)
    data: dict[str, Any] = {"messages": len(msgs), "encodings": {}}
    for name in ("cl100k_base", "o200k_base"):
        load = load_time(name)
        counter = TokenCounter(encoding=name)
        t = time.perf_counter()
        total = counter(msgs)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        assert counter(msgs) == total
        warm = time.perf_counter() - t
        msgs.append(HumanMessage("one more question about the invoices", id="new"))
        t = time.perf_counter()
        counter(msgs)
        step = time.perf_counter() - t
        msgs.pop()
        data["encodings"][name] = {
            "load_ms": load * 1e3,
            "tokens": total,
            "cold_ms": cold * 1e3,
            "cold_tokens_per_s": total / cold,
            "warm_ms": warm * 1e3,
            "warm_tokens_per_s": total / warm,
            "warm_speedup": cold / warm,
            "step_ms": step * 1e3,
        }
    t = time.perf_counter()
    approx = count_tokens_approximately(msgs)
    elapsed = time.perf_counter() - t
    exact = TokenCounter(encoding="o200k_base")(msgs)
    data["approximate"] = {
        "ms": elapsed * 1e3,
        "estimate": approx,
        "exact_o200k": exact,
        "over_exact": approx / exact,
    }
    return data


def report(data: dict[str, Any]) -> None:
    """Print the figures of :func:`measure` for a reader."""
    print(f"history: {data['messages']} messages")
    for name, e in data["encodings"].items():
        print(f"\n[{name}] encoding load (fresh process, median of 3): {e['load_ms']:.0f} ms")
        print(f"  tokens in history: {e['tokens']:,}")
        print(f"  cold  : {e['cold_ms']:8.1f} ms  {e['cold_tokens_per_s']:14,.0f} tokens/s")
        print(
            f"  warm  : {e['warm_ms']:8.1f} ms  {e['warm_tokens_per_s']:14,.0f} tokens/s  "
            f"({e['warm_speedup']:.0f}x cold)"
        )
        print(f"  +1 msg: {e['step_ms']:8.1f} ms  (recount after one new message)")
    a = data["approximate"]
    print(
        f"\n[count_tokens_approximately] {a['ms']:.1f} ms, estimate {a['estimate']:,} tokens "
        f"({a['over_exact']:.2f}x the exact o200k count)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument(
        "--json", metavar="PATH", help="also write every figure as JSON to PATH ('-': stdout only)"
    )
    args = parser.parse_args()
    data = measure(args.messages)
    write_json(data, args.json, report)


if __name__ == "__main__":
    main()
