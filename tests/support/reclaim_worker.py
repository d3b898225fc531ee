"""The writer process of the reclaim race in ``tests/integration/test_saver_reclaim.py``.

``python -m tests.support.reclaim_worker BACKEND TARGET THREAD ROUNDS OUT PROGRESS``
opens an STMSaver on a SQLite file (``sqlite PATH``) or a PostgreSQL database
(``postgres URI``) and appends ROUNDS turns to THREAD: each turn one ``invoke`` adding a
HumanMessage, to which the graph replies with an AIMessage; every :data:`REMOVE_EVERY`
turns the input also removes the :data:`REMOVE_OLDEST` oldest messages, so unreferenced
rows accrue. After each turn it replaces PROGRESS with the number of turns done. It
then writes ``{"expected": [...], "seen": [...]}`` to OUT: the message ids it believes
the thread holds, and the ids its own last ``get_state`` returned.
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langgraph_stm import STMSaver, STMState

REMOVE_EVERY = 10
REMOVE_OLDEST = 4
MESSAGE_CHARS = 300
_WORDS = (
    "invoice ledger schema export batch webhook tenant retry queue shard index "
    "cursor backfill migration audit refund payout currency rounding report"
).split()


def text(message_id: str, chars: int = MESSAGE_CHARS) -> str:
    """About ``chars`` characters of words, fixed by the message id (little redundancy)."""
    rng = random.Random(message_id)
    words = [message_id]
    while sum(len(w) + 1 for w in words) < chars:
        words.append(f"{rng.choice(_WORDS)}{rng.randrange(10_000)}")
    return " ".join(words)[:chars]


def human(i: int) -> HumanMessage:
    return HumanMessage(id=f"h-{i}", content=text(f"h-{i}"))


def reply_to(message: BaseMessage) -> AIMessage:
    """The AIMessage answering ``h-N``: ``a-N``."""
    message_id = f"a-{str(message.id).removeprefix('h-')}"
    return AIMessage(id=message_id, content=text(message_id))


def config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def build_graph(saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """One node answering the latest HumanMessage."""

    def reply(state: STMState) -> dict[str, Any]:
        return {"messages": [reply_to(state["messages"][-1])]}

    return StateGraph(STMState).add_node(reply).add_edge(START, "reply").compile(checkpointer=saver)


@contextmanager
def open_saver(backend: str, target: str) -> Iterator[STMSaver]:
    """A set-up STMSaver over SqliteSaver (``target`` a path) or PostgresSaver (a URI)."""
    if backend == "sqlite":
        with STMSaver.from_sqlite(target) as saver:
            saver.setup()
            yield saver
    else:
        with STMSaver.from_postgres(target) as saver:
            saver.setup()
            yield saver


def rounds_done(progress: Path) -> int:
    """The number of turns the writer reported done in ``progress`` (0 before the first)."""
    try:
        return int(progress.read_text())
    except FileNotFoundError:
        return 0


def write(
    backend: str, target: str, thread_id: str, rounds: int, progress: Path
) -> dict[str, list[str]]:
    """Append ``rounds`` turns; returns the ids expected and the ids last seen."""
    expected: list[str] = []
    with open_saver(backend, target) as saver:
        graph = build_graph(saver)
        for i in range(rounds):
            removed: list[BaseMessage] = []
            if i % REMOVE_EVERY == REMOVE_EVERY - 1:
                oldest, expected = expected[:REMOVE_OLDEST], expected[REMOVE_OLDEST:]
                removed = [RemoveMessage(id=m) for m in oldest]
            graph.invoke({"messages": [*removed, human(i)]}, config(thread_id))
            expected += [f"h-{i}", f"a-{i}"]
            Path(f"{progress}.tmp").write_text(str(i + 1))
            os.replace(f"{progress}.tmp", progress)  # never read half-written
        seen = [str(m.id) for m in graph.get_state(config(thread_id)).values["messages"]]
    return {"expected": expected, "seen": seen}


def main(argv: list[str]) -> int:
    backend, target, thread_id, rounds, out, progress = argv
    result = write(backend, target, thread_id, int(rounds), Path(progress))
    Path(out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
