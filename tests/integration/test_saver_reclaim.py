"""STMSaver reclaims what a thread no longer holds: loads, prune + vacuum, and the race.

Acceptance tests of the storage rebuild, on a SQLite file and a fresh PostgreSQL
database:

- a load reads the live messages of the checkpoint, not the thread's history: a thread
  of 2,000 messages trimmed to 20 by one update is loaded by a fresh saver through a
  connection that counts the bytes of every row it returns;
- ``prune(..., strategy="keep_latest")`` and ``vacuum()`` shrink our rows of the thread to
  about its live messages, and the thread still resumes from its ``interrupt()``;
- ``vacuum()`` (and ``prune``) in a loop while another process appends to the thread
  loses no body: every remaining checkpoint loads, the final state is what the writer
  expects, and one more ``vacuum()`` removes nothing a checkpoint references.

Counting through the connection is ``benchmarks/byte_meter.py`` (benchmark tooling,
loaded here by path): SQLite connections cannot be patched, so the saver gets a stand-in
for ``sqlite3.Connection`` (``CountingSqlite``) forwarding every attribute to a real
connection and wrapping its cursors. psycopg connections take a ``cursor_factory``:
``counting_cursor_class`` makes a ``psycopg.Cursor`` subclass that counts the rows it
hands out. A row's size is the sum of its values' sizes (bytes and UTF-8 strings by
length); a statement's rows are "ours" when its SQL names a table starting with
``stm_``, and count for each table of ours it names.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import takewhile
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from langgraph_stm import STMSaver, STMState
from tests.support import reclaim_worker
from tests.support.reclaim_worker import config, human, open_saver, reply_to, text

# -- our tables: the only names this file relies on (see /work/contract_for_helpers.md) ----
OURS = "stm_"
"""Every table of ours starts with it; rows of statements naming one are ours."""
BODIES = "stm_bodies"
"""One row per distinct message body of a thread."""

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
REPO = Path(__file__).resolve().parents[2]
THREAD = "long"
HISTORY = 2_000
"""Messages the long thread grows to."""
LIVE = 20
"""Messages left after the trim."""
HUMANS_PER_TURN = 10
"""HumanMessages per growth invoke (the node answers each): 100 invokes, 300 checkpoints."""
BODY_SLACK = 4
"""Extra body rows tolerated after prune + vacuum."""
ROUNDS = int(os.environ.get("STM_STRESS_ROUNDS", "200"))
"""Turns the writer of the race appends (CI may lower it)."""
PRUNE_EVERY = 20
"""Vacuum loops between two prunes in the race."""
UNPRUNED_TAIL = min(20, ROUNDS // 4)
"""The writer's last turns are raced by vacuum alone, so several checkpoints remain."""
RACE_DEADLINE = 300.0


@pytest.fixture
def target(backend: str, request: pytest.FixtureRequest) -> str:
    """Where the backend's database lives: a SQLite file path or a PostgreSQL URI."""
    if backend == "sqlite":
        return str(request.getfixturevalue("sqlite_path"))
    return str(request.getfixturevalue("postgres_uri"))


# -- counting the bytes our load reads: benchmarks/byte_meter.py -------------------------
def _load_byte_meter() -> ModuleType:
    path = REPO / "benchmarks" / "byte_meter.py"
    spec = importlib.util.spec_from_file_location("byte_meter", path)
    assert spec is not None, path
    assert spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # before exec: its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


byte_meter = _load_byte_meter()
ByteMeter = byte_meter.ByteMeter


@contextmanager
def open_counted(backend: str, target: str, meter: ByteMeter) -> Iterator[STMSaver]:
    """A set-up STMSaver on a new connection whose fetched rows are metered."""
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(target, check_same_thread=False)
        try:
            saver = STMSaver(SqliteSaver(byte_meter.CountingSqlite(conn, meter)))  # type: ignore[arg-type]
            saver.setup()
            yield saver
        finally:
            conn.close()
    else:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        # As PostgresSaver.from_conn_string connects, plus the metering cursors.
        with psycopg.Connection.connect(
            target, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as pg:
            pg.cursor_factory = byte_meter.counting_cursor_class(meter)
            saver = STMSaver(PostgresSaver(pg))
            saver.setup()
            yield saver


# -- our rows of a thread -----------------------------------------------------------------
class Rows(NamedTuple):
    rows: int
    bytes: int


def thread_rows(backend: str, target: str, thread_id: str) -> dict[str, Rows]:
    """Rows and stored bytes of ``thread_id`` in each table of ours with a thread_id."""
    if backend == "sqlite":
        conn = sqlite3.connect(target)
        try:
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ? "
                    "ESCAPE '\\' ORDER BY name",
                    (OURS.replace("_", "\\_") + "%",),
                )
            ]
            out = {}
            for name in names:
                columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')]
                if "thread_id" not in columns:
                    continue
                size = " + ".join(f'COALESCE(SUM(LENGTH("{c}")), 0)' for c in columns)
                sql = f'SELECT COUNT(*), {size} FROM "{name}" WHERE thread_id = ?'
                n, b = conn.execute(sql, (thread_id,)).fetchone()
                out[name] = Rows(n, b)
            return out
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(target, autocommit=True) as pg:
        names = [
            r[0]
            for r in pg.execute(
                "SELECT table_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND column_name = 'thread_id' "
                "AND table_name LIKE %s ORDER BY table_name",
                (OURS.replace("_", "\\_") + "%",),
            )
        ]
        out = {}
        for name in names:
            sql = (
                f'SELECT COUNT(*), COALESCE(SUM(pg_column_size(t.*)), 0) FROM "{name}" AS t '
                "WHERE thread_id = %s"
            )
            row = pg.execute(sql, (thread_id,)).fetchone()
            assert row is not None
            out[name] = Rows(int(row[0]), int(row[1]))
        return out


def serialized_bytes(saver: BaseCheckpointSaver[Any], messages: Sequence[BaseMessage]) -> int:
    """What the saver's serializer makes of each message, summed."""
    return sum(len(saver.serde.dumps_typed(m)[1]) for m in messages)


# -- the long thread: 2,000 messages, trimmed to 20, paused for approval -------------------
def approval(answer: str) -> AIMessage:
    return AIMessage(id="approval", content=f"trim approved: {answer}")


def long_graph(saver: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """``chat`` answers the trailing HumanMessages; ``{"goal": "trim"}`` runs ``trim``
    (removes all but the last LIVE messages) and then ``approve``, which interrupts."""

    def chat(state: STMState) -> dict[str, Any]:
        pending = takewhile(lambda m: isinstance(m, HumanMessage), reversed(state["messages"]))
        return {"messages": [reply_to(m) for m in reversed(list(pending))]}

    def trim(state: STMState) -> dict[str, Any]:
        old = state["messages"][:-LIVE]
        return {"messages": [RemoveMessage(id=str(m.id)) for m in old], "goal": "approve"}

    def approve(state: STMState) -> dict[str, Any]:
        answer = interrupt(f"keep only the last {LIVE} messages?")
        return {"messages": [approval(str(answer))], "goal": "done"}

    def route(state: STMState) -> str:
        return "trim" if state.get("goal") == "trim" else "chat"

    builder = StateGraph(STMState).add_node(chat).add_node(trim).add_node(approve)
    builder.add_conditional_edges(START, route, ["chat", "trim"])
    builder.add_edge("trim", "approve")
    return builder.compile(checkpointer=saver)


def growth_turn(turn: int) -> list[BaseMessage]:
    """The messages a growth invoke adds: HUMANS_PER_TURN questions, then their answers."""
    humans = [human(turn * HUMANS_PER_TURN + k) for k in range(HUMANS_PER_TURN)]
    return [*humans, *(reply_to(h) for h in humans)]


def build_long_thread(saver: STMSaver) -> list[BaseMessage]:
    """Grow THREAD to HISTORY messages, trim it with one update, pause at the approval;
    returns the HISTORY messages the thread had before the trim."""
    graph = long_graph(saver)
    history: list[BaseMessage] = []
    for turn in range(HISTORY // (2 * HUMANS_PER_TURN)):
        added = growth_turn(turn)
        graph.invoke({"messages": added[:HUMANS_PER_TURN]}, config(THREAD))
        history += added
    assert graph.get_state(config(THREAD)).values["messages"] == history
    graph.invoke({"goal": "trim"}, config(THREAD))
    paused = graph.get_state(config(THREAD))
    assert paused.next == ("approve",)
    assert paused.values["messages"] == history[-LIVE:]
    return history


def loaded_messages(saver: STMSaver) -> list[BaseMessage]:
    tup = saver.get_tuple(config(THREAD))
    assert tup is not None
    return list(tup.checkpoint["channel_values"]["messages"])


@pytest.mark.parametrize("backend", BACKENDS)
class TestLoadsFollowTheLiveState:
    """Loading a checkpoint reads its live messages, not every body the thread ever had."""

    def test_load_of_a_trimmed_thread_reads_about_its_live_messages(
        self, backend: str, target: str
    ) -> None:
        """2,000 messages trimmed to 20: one load by a fresh saver reads ~the 20 bodies."""
        with open_saver(backend, target) as saver:
            history = build_long_thread(saver)
            live = serialized_bytes(saver, history[-LIVE:])
            full = serialized_bytes(saver, history)
        meter = ByteMeter()
        with open_counted(backend, target, meter) as fresh:
            meter.reset()
            restored = loaded_messages(fresh)
        ours, bodies = meter.ours, meter.tables[BODIES]
        report = (
            f"[{backend}] the {LIVE} live messages serialize to {live} bytes, all {HISTORY} "
            f"to {full} bytes; the load {meter.report()}"
        )
        print("\n" + report)
        assert restored == history[-LIVE:]
        assert ours < 0.10 * full, f"our rows are not well under 10% of the history\n{report}"
        assert bodies > 0, f"the load read no row of {BODIES} through the connection\n{report}"
        assert bodies <= 2 * live, f"bodies read are over twice the live messages\n{report}"


@pytest.mark.parametrize("backend", BACKENDS)
class TestPruneAndVacuum:
    """prune keeps the latest checkpoint; vacuum then drops every row of ours it does not use."""

    def test_prune_and_vacuum_shrink_the_thread_and_it_still_resumes(
        self, backend: str, target: str
    ) -> None:
        """After prune + vacuum our rows hold ~the 20 live messages; the interrupt resumes."""
        with open_saver(backend, target) as saver:
            vacuum, prune = saver.vacuum, saver.prune  # type: ignore[attr-defined]
            history = build_long_thread(saver)
            live = serialized_bytes(saver, history[-LIVE:])
            full = serialized_bytes(saver, history)
            before = thread_rows(backend, target, THREAD)
            prune([THREAD], strategy="keep_latest")
            removed = vacuum()
        after = thread_rows(backend, target, THREAD)
        report = (
            f"[{backend}] the {LIVE} live messages serialize to {live} bytes; vacuum removed "
            f"{removed} rows\nbefore: {before}\nafter:  {after}"
        )
        print("\n" + report)
        assert BODIES in after, f"no table {BODIES} among ours\n{report}"
        assert after[BODIES].rows <= LIVE + BODY_SLACK, report
        assert after[BODIES].bytes < 2 * live, report
        assert all(rows.rows <= before[t].rows for t, rows in after.items()), report
        assert sum(r.bytes for r in after.values()) < 0.10 * full, report

        with open_saver(backend, target) as fresh:
            graph = long_graph(fresh)
            graph.invoke(Command(resume="yes"), config(THREAD))
            state = graph.get_state(config(THREAD))
        assert state.next == ()
        assert state.values["messages"] == [*history[-LIVE:], approval("yes")]
        assert state.values["goal"] == "done"


# -- the reclaim race ---------------------------------------------------------------------
RACE_THREAD = "race"


def load_everything(saver: STMSaver) -> dict[str, list[tuple[str, str]]]:
    """Every checkpoint of RACE_THREAD, by id: its messages as (id, content), loaded by
    ``list``, by ``get_tuple`` of the listed config and by ``get_state`` (all must agree)."""
    graph = reclaim_worker.build_graph(saver)
    loaded = {}
    for listed in saver.list(config(RACE_THREAD)):
        tup = saver.get_tuple(listed.config)
        assert tup is not None
        messages = tup.checkpoint["channel_values"].get("messages", [])
        assert listed.checkpoint["channel_values"].get("messages", []) == messages
        assert graph.get_state(listed.config).values.get("messages", []) == messages
        loaded[tup.config["configurable"]["checkpoint_id"]] = [
            (str(m.id), str(m.content)) for m in messages
        ]
    return loaded


def load_latest(backend: str, target: str) -> None:
    """A fresh saver (nothing cached) loads RACE_THREAD's latest checkpoint."""
    with open_saver(backend, target) as reader:
        reader.get_tuple(config(RACE_THREAD))


def try_prune(prune: Any) -> bool:
    """Prune RACE_THREAD; False if PostgresSaver's keep_latest refused it because a
    concurrent transaction changed the thread (retrying later is documented as safe)."""
    try:
        prune([RACE_THREAD], strategy="keep_latest")
    except Exception as exc:
        chain: BaseException | None = exc
        while chain is not None:
            if type(chain).__name__ in {"SerializationFailure", "DeadlockDetected"}:
                return False
            chain = chain.__cause__
        raise
    return True


@pytest.mark.parametrize("backend", BACKENDS)
class TestReclaimRace:
    """vacuum (and prune) while another process appends to the thread lose nothing."""

    def test_vacuum_while_another_process_writes_keeps_every_checkpoint_loadable(
        self, backend: str, target: str, tmp_path: Path
    ) -> None:
        """A writer process appends ROUNDS turns while this one vacuums (and prunes) in a loop."""
        out, log, progress = (tmp_path / f"writer.{x}" for x in ("json", "log", "round"))
        started = time.monotonic()
        loops = prunes = conflicts = removed = 0
        with open_saver(backend, target) as saver:  # the schema exists before the writer runs
            vacuum, prune = saver.vacuum, saver.prune  # type: ignore[attr-defined]
            with log.open("w") as stderr:
                writer = subprocess.Popen(
                    [sys.executable, "-m", "tests.support.reclaim_worker", backend, target,
                     RACE_THREAD, str(ROUNDS), str(out), str(progress)],
                    cwd=REPO,
                    env={**os.environ, "PYTHONPATH": str(REPO)},
                    stdout=stderr,
                    stderr=stderr,
                )  # fmt: skip
                try:
                    while writer.poll() is None:
                        assert time.monotonic() - started < RACE_DEADLINE, "writer too slow"
                        removed += vacuum()
                        loops += 1
                        if loops % PRUNE_EVERY == 0:
                            load_latest(backend, target)
                            if reclaim_worker.rounds_done(progress) < ROUNDS - UNPRUNED_TAIL:
                                pruned = try_prune(prune)
                                prunes, conflicts = prunes + pruned, conflicts + (not pruned)
                        time.sleep(0.005)
                finally:
                    if writer.poll() is None:
                        writer.kill()
                    writer.wait()
            assert writer.returncode == 0, log.read_text()[-3000:]
            removed += vacuum()
        raced = time.monotonic() - started
        result = json.loads(out.read_text())

        with open_saver(backend, target) as fresh:
            first = load_everything(fresh)
            final = reclaim_worker.build_graph(fresh).get_state(config(RACE_THREAD))
            ids = [str(m.id) for m in final.values["messages"]]
            again = fresh.vacuum()  # type: ignore[attr-defined]
        with open_saver(backend, target) as fresh:  # nothing cached from before the vacuum
            assert load_everything(fresh) == first
        print(
            f"\n[{backend}] {ROUNDS} rounds in {raced:.1f}s: {loops} vacuums removed "
            f"{removed} rows, {prunes} prunes ({conflicts} refused), {len(first)} "
            f"checkpoints left; the last vacuum removed {again}"
        )
        assert result["seen"] == result["expected"]
        assert ids == result["expected"]
        assert [m.content for m in final.values["messages"]] == [text(i) for i in ids]
        assert len(first) > 1 or not UNPRUNED_TAIL, "one checkpoint left: no tail was raced"
