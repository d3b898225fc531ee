"""The child process of the crash-recovery harness: drives a real graph to its end and
kills itself with SIGKILL at the N-th boundary it crosses.

The graph (:func:`build_crash_graph`) is agent -> summarize -> trim -> approval tools ->
agent, over ``STMState``: a scripted agent that also writes goal, plan, constraints,
artifacts and last_error; ``SummarizeNode`` (the offline extractive summarizer) and
``TrimNode``; ``ApprovalToolNode`` whose tools append one line per execution to a ledger
file. :data:`TURNS` is the script of human turns and :data:`DECISIONS` the reviewer's
answer to each gated call. :func:`drive` reads the thread and does the next thing
(answer the pending interrupts, continue an unfinished run, or send the next turn) until
every turn is done, so the same loop starts a thread and resumes one left anywhere by a
crash.

A **boundary** is one of (in the order the process crosses them):

- every SQL statement, before and after it runs: SQLite through
  ``sqlite3.Connection.set_trace_callback`` (before only: the callback fires as the
  statement starts), psycopg by a cursor class that wraps ``execute``/``executemany``;
- the saver's driver transaction of a checkpoint write (``writing``): entered, our rows
  written (still uncommitted on SQLite, committed on PostgreSQL), the inner ``put``
  returned, left;
- the inner saver's ``put`` and ``put_writes``, entered and returned;
- a tool's ledger line written.

Each boundary is labelled ``phase|kind|detail`` where ``phase`` is ``ours`` inside our
driver's write before the inner ``put`` starts, ``inner`` inside the inner ``put`` (on
PostgreSQL, after our commit: the window between our commit and the inner saver's),
``outside`` elsewhere. Everything is wrapped on instances inside this process only;
the package is not changed.

Usage: ``python -m tests.support.crash_child BACKEND TARGET WORKDIR [KILL_AT]`` with
``BACKEND`` ``sqlite`` (``TARGET`` a file) or ``postgres`` (a URI). Without ``KILL_AT``
the run records every boundary label in ``WORKDIR/events.json``. With it, the process
writes ``WORKDIR/killed.json`` (``at``, ``label``, ``in_flight``: the calls whose tool
ran in this process but whose result was not saved yet, which a resume must run again)
and kills itself at boundary ``KILL_AT`` (1-based). The ledger is ``WORKDIR/ledger.jsonl``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from langgraph_stm import ApprovalToolNode, STMSaver, STMState, SummarizeNode, TrimNode
from langgraph_stm.state import remove_record
from tests.support.approval_graphs import POLICY, Ledger, call_id, config, make_tools

THREAD = "crash"
"""The thread every crash run drives."""

ERROR_AT = "2026-01-01T00:00:00+00:00"
"""The fixed time the agent stamps on ``last_error`` (a reference run must compare equal)."""

TURNS: list[tuple[str, list[tuple[str, dict[str, Any]]], dict[str, Any]]] = [
    (
        "h1",
        [("send_email", {"to": "ann@example.com", "body": "kickoff"})],
        {
            "goal": "ship the release",
            "constraints": [
                {
                    "id": "c-tone",
                    "text": "be polite",
                    "source_message_id": "h1",
                    "status": "confirmed",
                }
            ],
        },
    ),
    ("h2", [("lookup", {"key": "version"})], {}),
    (
        "h3",
        [("delete_file", {"path": "/var/log/old.log"})],
        {
            "constraints": [
                {
                    "id": "c-logs",
                    "text": "never delete logs",
                    "source_message_id": "h3",
                    "status": "pending",
                }
            ]
        },
    ),
    ("h4", [("big_report", {"rows": 30})], {}),
    (
        "h5",
        [("send_email", {"to": "bob@example.com", "body": "draft"})],
        {"goal": "ship the release and tell bob"},
    ),
    (
        "h6",
        [("send_email", {"to": "cy@example.com", "body": "ping"})],
        {"constraints": [remove_record("c-logs")]},
    ),
    ("h7", [], {}),
    ("h8", [("send_email", {"to": "ann@example.com", "body": "shipped"})], {}),
]
"""The human turns: id, the calls the agent makes for it, structured fields sent with it."""

DECISIONS: dict[str, dict[str, Any]] = {
    call_id("h1", 0): {"type": "approve"},
    call_id("h3", 0): {"type": "reject", "message": "logs stay"},
    call_id("h5", 0): {
        "type": "edit",
        "edited_action": {"name": "send_email", "args": {"to": "bob@example.com", "body": "final"}},
    },
    call_id("h6", 0): {"type": "respond", "message": "cy is away, skipped"},
    call_id("h8", 0): {"type": "approve"},
}
"""The reviewer's answer to each gated call."""

APPROVED = [call_id("h1", 0), call_id("h5", 0), call_id("h8", 0)]
"""The gated calls the reviewer lets run (approve, or edit)."""


def step_id(human_id: str) -> str:
    """The plan step of turn ``human_id``."""
    return f"step-{human_id}"


def turn_input(position: int) -> dict[str, Any]:
    """The input of turn ``position``: its human message, its plan step, its fields."""
    human_id, calls, fields = TURNS[position]
    content = json.dumps([{"name": n, "args": a} for n, a in calls]) if calls else "thanks"
    step = {"id": step_id(human_id), "task": f"handle {human_id}", "status": "pending"}
    return {"messages": [HumanMessage(content, id=human_id)], "plan": [step], **fields}


def agent(state: STMState) -> dict[str, Any]:
    """The scripted model: the turn's calls first, then a reply with the plan step done,
    ``last_error`` set from an error result (cleared otherwise), an artifact for a report."""
    messages = state["messages"]
    human = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
    hid = str(human.id)
    calls = next(c for h, c, _ in TURNS if h == hid)
    if messages[-1] is human and calls:
        tool_calls = [
            {"name": name, "args": args, "id": call_id(hid, i)}
            for i, (name, args) in enumerate(calls)
        ]
        return {
            "messages": [AIMessage("", id=f"ai-{hid}", tool_calls=tool_calls)],
            "plan": [{"id": step_id(hid), "status": "in_progress"}],
        }
    update: dict[str, Any] = {
        "messages": [AIMessage(f"done with {hid}", id=f"reply-{hid}")],
        "plan": [{"id": step_id(hid), "status": "done"}],
    }
    results = [m for m in messages if isinstance(m, ToolMessage)]
    answered = [r for r in results if str(r.tool_call_id).startswith(f"{hid}-")]
    failed = [r for r in answered if r.status == "error"]
    if failed:
        update["last_error"] = {
            "message": f"{failed[0].name} failed: {str(failed[0].content)[:80]}",
            "recovery": "ask the user",
            "step_id": step_id(hid),
            "at": ERROR_AT,
        }
    elif state.get("last_error") is not None:
        update["last_error"] = None
    reports = [r for r in answered if r.name == "big_report"]
    if reports:
        update["artifacts"] = [
            {
                "id": f"art-{hid}",
                "kind": "report",
                "summary": str(reports[0].content).splitlines()[0],
                "uri": None,
                "source_message_id": reports[0].id,
                "tokens": len(str(reports[0].content)),
            }
        ]
    return update


def characters(messages: list[BaseMessage]) -> int:
    """The trim budget's counter: characters of content, one more per message."""
    return sum(len(str(m.content)) + 1 for m in messages)


def _route(state: STMState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def build_crash_graph(
    checkpointer: BaseCheckpointSaver[Any] | None, ledger: Ledger
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """agent -> summarize (over 10 messages, keep 5) -> trim (1200 characters) -> tools."""
    builder = StateGraph(STMState)
    builder.add_node("agent", agent)
    builder.add_node(SummarizeNode(trigger_tokens=10, keep_tokens=5, token_counter=len))
    builder.add_node(TrimNode(max_tokens=1200, token_counter=characters))
    builder.add_node(ApprovalToolNode(make_tools(ledger), interrupt_on=POLICY))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "summarize")
    builder.add_edge("summarize", "trim")
    builder.add_conditional_edges("trim", _route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def drive(graph: CompiledStateGraph[Any, Any, Any, Any], thread: str = THREAD) -> int:
    """Do the next thing on ``thread`` until every turn is done; return the steps taken.

    Each step is one ``invoke`` with ``durability="sync"`` (a checkpoint is saved before
    the next step starts) and ``max_concurrency=1`` (one worker for LangGraph's
    background writes, so they run in the order they were submitted): the boundaries
    come in the same order on every run.

    A run is unfinished while its checkpoint has tasks. ``snap.next`` is not the test:
    when a process dies after a task's writes were saved but before the next checkpoint,
    ``get_state`` shows those writes applied and leaves the task out of ``next``, and a
    new input would start from the checkpoint without them (LangGraph drops them); the
    task is still in ``snap.tasks`` (with its result) and ``invoke(None)`` applies them.
    """
    cfg: Any = {**config(thread), "max_concurrency": 1}
    for steps in range(200):
        snap = graph.get_state(cfg)
        if snap.interrupts:
            answers = {i.id: DECISIONS[i.value["tool_call_id"]] for i in snap.interrupts}
            graph.invoke(Command(resume=answers), cfg, durability="sync")
        elif snap.tasks:  # not `snap.next`: see the docstring
            graph.invoke(None, cfg, durability="sync")
        else:
            done = len(snap.values.get("plan", []))
            if done >= len(TURNS):
                return steps
            graph.invoke(turn_input(done), cfg, durability="sync")
    raise RuntimeError(f"thread {thread!r} did not finish in 200 steps")


# -- boundaries --------------------------------------------------------------------------
class Probe:
    """Counts boundaries; records their labels, or kills the process at one of them."""

    def __init__(self, workdir: Path, kill_at: int | None) -> None:
        self.workdir = workdir
        self.kill_at = kill_at
        self.count = 0
        self._local = threading.local()
        self.labels: list[str] = []
        self.in_flight: set[str] = set()
        self._lock = threading.RLock()

    @property
    def phase(self) -> str:
        """Where the calling thread is: ``ours``, ``inner`` or ``outside``."""
        return str(getattr(self._local, "phase", "outside"))

    @phase.setter
    def phase(self, value: str) -> None:
        self._local.phase = value

    def hit(self, kind: str, detail: str = "") -> None:
        with self._lock:
            self.count += 1
            label = f"{self.phase}|{kind}|{detail}"
            if self.kill_at is None:
                self.labels.append(label)
                return
            if self.count == self.kill_at:
                killed = {"at": self.count, "label": label, "in_flight": sorted(self.in_flight)}
                (self.workdir / "killed.json").write_text(json.dumps(killed))
                os.kill(os.getpid(), signal.SIGKILL)

    def tool_ran(self, call: str) -> None:
        with self._lock:
            self.in_flight.add(call)
        self.hit("tool.ran", call)

    def saved(self, writes: Any) -> None:
        with self._lock:
            for message in _tool_messages(writes):
                self.in_flight.discard(str(message.tool_call_id))


def _tool_messages(value: Any) -> Iterator[ToolMessage]:
    if isinstance(value, ToolMessage):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _tool_messages(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _tool_messages(item)
    elif isinstance(value, Command):
        yield from _tool_messages(value.update)


def statement(sql: Any) -> str:
    """A statement's label: its first three words (parameters never included)."""
    text = sql.decode() if isinstance(sql, bytes) else str(sql)
    return " ".join(text.split()[:3])


class WatchedLedger(Ledger):
    """A ledger that reports each line it writes to the probe."""

    def __init__(self, path: Path, probe: Probe) -> None:
        super().__init__(path)
        self.probe = probe

    def record(self, name: str, call_id: str, args: Mapping[str, Any]) -> None:
        super().record(name, call_id, args)
        self.probe.tool_ran(call_id)


def instrument(saver: STMSaver, backend: str, probe: Probe) -> None:
    """Wrap the statements, the driver's write transaction and the inner saver's writes
    of ``saver`` (this process only) so that each boundary reports to ``probe``."""
    inner: Any = saver.inner
    if backend == "sqlite":
        inner.conn.set_trace_callback(lambda sql: probe.hit("sql", statement(sql)))
    else:
        import psycopg

        class CountingCursor(psycopg.Cursor[Any]):
            def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
                probe.hit("sql", statement(query))
                result = super().execute(query, params, **kwargs)
                probe.hit("sql.done", statement(query))
                return result

            def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
                probe.hit("sql", statement(query))
                super().executemany(query, params_seq, **kwargs)
                probe.hit("sql.done", statement(query))

        inner.conn.cursor_factory = CountingCursor

    driver: Any = saver._tables.sync
    writing = driver.writing

    @contextmanager
    def watched_writing(plan: Any, thread_id: str = "") -> Iterator[None]:
        probe.hit("writing.enter")
        probe.phase = "ours"
        with writing(plan, thread_id):
            probe.hit("writing.rows")
            yield
            probe.hit("writing.inner-returned")
        probe.phase = "outside"
        probe.hit("writing.exit")

    driver.writing = watched_writing
    put, put_writes = inner.put, inner.put_writes

    def watched_put(*args: Any, **kwargs: Any) -> Any:
        before = probe.phase
        probe.phase = "inner"
        probe.hit("inner.put.enter")
        result = put(*args, **kwargs)
        probe.hit("inner.put.exit")
        probe.phase = before
        return result

    def watched_put_writes(config: Any, writes: Any, *args: Any, **kwargs: Any) -> Any:
        probe.hit("inner.put_writes.enter")
        result = put_writes(config, writes, *args, **kwargs)
        probe.saved(writes)
        probe.hit("inner.put_writes.exit")
        return result

    inner.put, inner.put_writes = watched_put, watched_put_writes


@contextmanager
def opened(backend: str, target: str) -> Iterator[STMSaver]:
    """An STMSaver over the SQLite file or PostgreSQL database ``target`` (not set up)."""
    if backend == "sqlite":
        with STMSaver.from_sqlite(target) as saver:
            yield saver
    elif backend == "postgres":
        with STMSaver.from_postgres(target) as saver:
            yield saver
    else:
        raise SystemExit(f"unknown backend {backend!r}: sqlite or postgres")


def main(argv: list[str]) -> int:
    backend, target, workdir_name, *rest = argv
    workdir = Path(workdir_name)
    probe = Probe(workdir, int(rest[0]) if rest else None)
    with opened(backend, target) as saver:
        instrument(saver, backend, probe)
        saver.setup()
        drive(build_crash_graph(saver, WatchedLedger(workdir / "ledger.jsonl", probe)))
    if probe.kill_at is None:
        (workdir / "events.json").write_text(json.dumps(probe.labels))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
