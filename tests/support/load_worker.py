"""A worker process of the concurrency and load runs (tests/stress, benchmarks).

Each worker drives turns of a small agent graph (``STMState``: messages and a goal)
through its own saver over one shared database: its **own** threads, which no other
worker touches, and the **hot** threads, which every worker continues at once. Turns
of a worker run on a few threads of its own (a thread pool), so a PostgreSQL saver's
connection pool serves several turns at a time; SQLite serializes them per process
and WAL lets the processes interleave.

Every message says which thread, worker and turn wrote it, so a reader can tell a
lost, duplicated or leaked message from the right ones. :func:`run` returns the
outcome of every attempted turn: ``"ok"`` or ``"conflict"`` (``CheckpointConflict``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph

from langgraph_stm import STMSaver, STMState
from langgraph_stm.errors import CheckpointConflict


@dataclass(frozen=True)
class Load:
    """What one worker runs."""

    backend: str
    """``sqlite`` (``target`` a file) or ``postgres`` (a URI)."""
    target: str
    worker: int
    own: Sequence[str]
    hot: Sequence[str]
    turns: int
    stm: bool = True
    """``STMSaver`` over the inner saver, or the bare inner saver."""
    exclusive: bool = True
    """``STMSaver(exclusive_runs=...)``."""
    pool_size: int = 10
    """Connections of the PostgreSQL pool: a checkpoint write holds one of ours while
    the inner saver's write takes another, so at least twice the turns in flight."""
    concurrency: int = 3
    """Turns in flight at once in this worker."""


def human_id(thread: str, worker: int, turn: int) -> str:
    return f"{thread}|w{worker}|t{turn}|h"


def reply(state: STMState) -> dict[str, Any]:
    """The agent: answer the latest human message, naming what it answers."""
    last = state["messages"][-1]
    answer = AIMessage(f"re: {last.content}", id=str(last.id)[:-1] + "a")
    return {"messages": [answer], "goal": str(last.content)}


def build(saver: Any) -> Any:
    return StateGraph(STMState).add_node(reply).add_edge(START, "reply").compile(checkpointer=saver)


def prepare(backend: str, target: str) -> None:
    """Create the tables once, before the workers start (the inner savers' own setups
    do not expect to race; ``STMSaver.setup`` sets up both)."""
    with open_saver(Load(backend, target, -1, [], [], 0)) as saver:
        saver.setup()


@contextmanager
def open_saver(load: Load) -> Iterator[Any]:
    """The saver of ``load``, over tables :func:`prepare` made: a SQLite file, or a
    PostgreSQL connection pool."""
    if load.backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(load.target) as inner:
            yield STMSaver(inner, exclusive_runs=load.exclusive) if load.stm else inner
        return
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(load.target, max_size=load.pool_size, kwargs=kwargs) as pool:
        inner = PostgresSaver(pool)  # type: ignore[arg-type]
        yield STMSaver(inner, exclusive_runs=load.exclusive) if load.stm else inner


def run(load: Load) -> dict[str, Any]:
    """Run every turn of ``load``; return ``{"outcomes": [(thread, turn, outcome)],
    "seconds": wall time of the turns}``."""
    with open_saver(load) as saver:
        graph = build(saver)

        def turn(thread: str, index: int) -> tuple[str, int, str]:
            message = HumanMessage(
                f"{thread} from worker {load.worker}, turn {index}",
                id=human_id(thread, load.worker, index),
            )
            config = {"configurable": {"thread_id": thread}}
            try:
                graph.invoke({"messages": [message]}, config)
            except CheckpointConflict:
                return (thread, index, "conflict")
            return (thread, index, "ok")

        started = time.perf_counter()
        outcomes: list[tuple[str, int, str]] = []
        with ThreadPoolExecutor(max_workers=load.concurrency) as pool:
            for index in range(load.turns):
                threads = [*load.own, *load.hot]
                outcomes.extend(pool.map(lambda t, i=index: turn(t, i), threads))
        return {"outcomes": outcomes, "seconds": time.perf_counter() - started}


def work(load: Load, barrier: Any, results: Any) -> None:
    """Process entry point: wait for the others, run, report."""
    barrier.wait()
    try:
        results.put((load.worker, run(load)))
    except BaseException as exc:  # reported, so the parent shows what went wrong
        results.put((load.worker, {"error": f"{type(exc).__name__}: {exc}"}))
