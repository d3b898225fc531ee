"""Encoding load time and message-counting throughput of TokenCounter.

Run: python benchmarks/bench_tokens.py [--messages 10000]

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

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from langgraph_stm import TokenCounter

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    msgs = history(args.messages)
    print(f"history: {len(msgs)} messages")
    for name in ("cl100k_base", "o200k_base"):
        print(
            f"\n[{name}] encoding load (fresh process, median of 3): {load_time(name) * 1e3:.0f} ms"
        )
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
        print(f"  tokens in history: {total:,}")
        print(f"  cold  : {cold * 1e3:8.1f} ms  {total / cold:14,.0f} tokens/s")
        speedup = cold / warm
        print(
            f"  warm  : {warm * 1e3:8.1f} ms  {total / warm:14,.0f} tokens/s  ({speedup:.0f}x cold)"
        )
        print(f"  +1 msg: {step * 1e3:8.1f} ms  (recount after one new message)")
    t = time.perf_counter()
    approx = count_tokens_approximately(msgs)
    elapsed = time.perf_counter() - t
    print(
        f"\n[count_tokens_approximately] {elapsed * 1e3:.1f} ms, estimate {approx:,} tokens "
        f"({approx / TokenCounter(encoding='o200k_base')(msgs):.2f}x the exact o200k count)"
    )


if __name__ == "__main__":
    main()
