"""``langgraph-stm demo``: the scripted agent on ``STMSaver`` over a SQLite file.

The agent of :mod:`langgraph_stm.cli._agent` (the offline :class:`ScriptedChatModel`
driving real nodes and tools that write to a ledger) works through a realistic task,
one user turn at a time: a goal and a plan that advances, user constraints, parallel
tool calls, a large tool output kept as an artifact, an error and its recovery, the
context trimmed to its budget and several summaries, and a refund gated by human
approval. At the approval the run stops and every connection is closed; a new saver
and a new graph then open the same file (as after a restart), check that the paused
thread reads back identical, answer the approval (automatically, or at a prompt with
``--interactive``) and finish the task.

Then the same turns, with the same decision, run through a plain agent (LangGraph's
``SqliteSaver``, ``add_messages`` keeping every message, no summary, no offload) into
``<db>.plain.sqlite``, and the report compares: the tokens the model saw against the
tokens of the full history at each call, and the two file sizes after a WAL
checkpoint. ``--json`` prints the report as JSON. Files: ``--db`` (default
``stm-demo.sqlite``), ``<db>-ledger.jsonl`` (one line per tool run) and
``<db>.plain.sqlite``; a file left by an earlier demo is replaced, any other refused.

Example:
    >>> import io, json, tempfile, pathlib
    >>> from langgraph_stm.cli import main
    >>> out = io.StringIO()
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     code = main(["demo", "--db", str(pathlib.Path(tmp) / "d.sqlite"), "--turns", "7",
    ...                  "--json"], out=out, err=io.StringIO())
    >>> report = json.loads(out.getvalue())
    >>> code, report["approval"]["decision"], report["ledger"]["approved_call_runs"]
    (0, 'approve', 1)
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Interrupt
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from langgraph_stm._context import ContextResult
from langgraph_stm._state import STM_FIELDS
from langgraph_stm._tokens import TokenCounter
from langgraph_stm.checkpoint import STMSaver
from langgraph_stm.cli._agent import Ledger, build_agent_graph, ledger_path
from langgraph_stm.cli._common import IO, CLIError
from langgraph_stm.cli._model import ScriptedChatModel

__all__ = ["DEMO_THREAD", "MIN_TURNS", "demo_script", "register", "run_demo"]

DEMO_THREAD = "demo"
"""The thread the demo writes."""

MIN_TURNS = 7
"""The fixed turns: goal, constraints, lookups, report, conversion, refund, wrap-up."""

_OPENING = (
    "Goal: reconcile the November orders of ACME GmbH and refund the damaged shipment.",
    "From now on: never email external domains, and keep every refund under 200 EUR.",
    "Look up orders 1042, 1043 and 1044.",
    "Pull the inventory report for WH-2.",
    "Convert the refund of 180 euro to dollars.",
)
_FILLER = (
    "What is the status of order {n}?",
    "Check stock for SKU-{a} and SKU-{b}.",
    "Look up order {n} and order {m}.",
)
_APPROVAL = "Refund 180 EUR on order 1042."
_CLOSING = "Wrap up: mark the report step done."

_METHOD = (
    "the same turns and decision through LangGraph's SqliteSaver with add_messages "
    "(every message kept, no summary, no offload); both files' sizes after PRAGMA "
    "wal_checkpoint(TRUNCATE), with every connection closed"
)

Decide = Callable[[Interrupt], dict[str, Any]]


def demo_script(turns: int) -> list[tuple[str, str]]:
    """Return the demo's user turns as ``(message id, text)``; the refund is second to last.

    Example:
        >>> for message_id, text in demo_script(8)[5:]:
        ...     print(message_id, text)
        u06 What is the status of order 1045?
        u07 Refund 180 EUR on order 1042.
        u08 Wrap up: mark the report step done.
    """
    if turns < MIN_TURNS:
        raise CLIError(f"--turns must be at least {MIN_TURNS} (got {turns})", code=2)
    filler = []
    for i in range(turns - MIN_TURNS):
        template = _FILLER[i % len(_FILLER)]
        n = 1045 + 2 * i
        filler.append(template.format(n=n, m=n + 1, a=2000 + 3 * i, b=2001 + 3 * i))
    texts = [*_OPENING, *filler, _APPROVAL, _CLOSING]
    return [(f"u{i + 1:02d}", text) for i, text in enumerate(texts)]


# -- files --------------------------------------------------------------------------------
def _companions(db: Path) -> tuple[Path, Path]:
    return ledger_path(db), Path(f"{db}.plain.sqlite")


def _sqlite_files(path: Path) -> list[Path]:
    return [path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")]


def _prepare(db: Path) -> None:
    """Remove the files of an earlier demo at ``db``; refuse a file that is not one."""
    if db.is_dir():
        raise CLIError(f"{db} is a directory; pass a file path to --db")
    if db.exists():
        try:
            with sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True) as conn:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
                threads = (
                    {r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}
                    if "checkpoints" in tables
                    else set()
                )
            conn.close()
        except sqlite3.Error as exc:
            raise CLIError(f"{db} is not a SQLite file ({exc}); pass another --db") from None
        if (tables and "checkpoints" not in tables) or threads - {DEMO_THREAD}:
            raise CLIError(
                f"{db} holds threads that are not the demo's; the demo replaces its file, "
                "so pass another --db"
            )
    if not db.parent.is_dir():
        raise CLIError(f"cannot create {db}: directory {db.parent} does not exist")
    ledger, plain = _companions(db)
    for path in [*_sqlite_files(db), ledger, *_sqlite_files(plain)]:
        path.unlink(missing_ok=True)


def _checkpoint_wal(path: Path) -> int:
    """Fold the WAL into ``path`` and return the file's size in bytes."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return os.path.getsize(path)


@contextmanager
def _open_stm(db: Path) -> Iterator[tuple[STMSaver, Any]]:
    """A set-up ``STMSaver`` over ``db`` and a ``SqliteStore`` in the same file."""
    try:
        from langgraph.store.sqlite import SqliteStore
    except ImportError:
        raise CLIError(
            "the demo needs the sqlite extra: pip install 'langgraph-stm[sqlite]'"
        ) from None
    with ExitStack() as stack:
        store = stack.enter_context(SqliteStore.from_conn_string(str(db)))
        store.setup()
        saver = stack.enter_context(STMSaver.from_sqlite(db, store=store))
        saver.setup()
        yield saver, store


@contextmanager
def _open_plain(path: Path) -> Iterator[Any]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string(str(path)) as saver:
        yield saver


# -- running turns ------------------------------------------------------------------------
@dataclass
class _Calls:
    """Per model call: the tokens of the model input, and whether the context was trimmed."""

    tokens: list[int] = field(default_factory=list)
    trimmed: list[bool] = field(default_factory=list)

    def hook(self, result: ContextResult | None, messages: Sequence[BaseMessage], n: int) -> None:
        self.tokens.append(n)
        self.trimmed.append(bool(result and result.omitted_message_ids))


class _Runner:
    """Runs turns on one graph, updating the progress display."""

    def __init__(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        progress: Progress | None,
        task: Any,
        label: str,
    ) -> None:
        self.graph = graph
        self.progress = progress
        self.task = task
        self.label = label
        self.config: Any = {"configurable": {"thread_id": DEMO_THREAD}}
        self.errors: list[str] = []

    def _run(self, payload: Any, turn: int, total: int) -> tuple[Interrupt, ...]:
        for chunk in self.graph.stream(payload, self.config, stream_mode="updates"):
            for node, update in chunk.items():
                if isinstance(update, dict) and update.get("last_error"):
                    self.errors.append(str(update["last_error"]["message"]))
                step = "waiting for approval" if node == "__interrupt__" else node
                self._show(f"{self.label}: turn {turn}/{total}, {step}")
        return tuple(self.graph.get_state(self.config).interrupts)

    def _show(self, description: str) -> None:
        if self.progress is not None:
            self.progress.update(self.task, description=description)

    def turns(
        self, script: Sequence[tuple[str, str]], start: int, total: int
    ) -> tuple[Interrupt, ...]:
        """Run ``script`` (turn numbers from ``start``); stop at the first interrupt."""
        for offset, (message_id, text) in enumerate(script):
            interrupts = self._run(
                {"messages": [HumanMessage(text, id=message_id)]}, start + offset, total
            )
            if self.progress is not None:
                self.progress.advance(self.task)
            if interrupts:
                return interrupts
        return ()

    def resume(self, answers: dict[str, Any], turn: int, total: int) -> tuple[Interrupt, ...]:
        """Resume the paused turn with ``Command(resume=answers)``."""
        return self._run(Command(resume=answers), turn, total)


def _fingerprint(values: dict[str, Any]) -> str:
    messages = [
        (m.type, m.id, m.content, getattr(m, "tool_calls", None)) for m in values["messages"]
    ]
    fields = {key: values.get(key) for key in STM_FIELDS}
    return json.dumps([messages, fields], sort_keys=True, default=str)


def _ask(io: IO, *, json_output: bool = False) -> Decide:
    """The ``--interactive`` reviewer: asks on ``io.out`` (``io.err`` when stdout is the
    JSON report) and reads ``io.inp``."""
    screen = io.err if json_output else io.out

    def read(prompt: str) -> str:
        print(prompt, end="", file=screen, flush=True)
        line = io.inp.readline()
        if not line:
            raise CLIError(
                f"no answer at the approval prompt (input closed); thread {DEMO_THREAD!r} "
                "stays paused"
            )
        return line.strip()

    def decide(request: Interrupt) -> dict[str, Any]:
        value = request.value
        print(f"\napproval needed: {value['name']}({json.dumps(value['args'])})", file=screen)
        while True:
            choice = read("[a]pprove, [e]dit the amount, [r]eject? ").lower()
            if choice in ("a", "approve", "y", "yes"):
                return {"type": "approve"}
            if choice in ("r", "reject", "n", "no"):
                reason = read("reason: ") or "rejected by the reviewer"
                return {"type": "reject", "message": reason}
            if choice in ("e", "edit"):
                try:
                    amount = float(read("new amount: "))
                except ValueError:
                    print("not a number", file=screen)
                    continue
                args = {**value["args"], "amount": amount}
                return {"type": "edit", "edited_action": {"name": value["name"], "args": args}}
            print("answer a, e or r", file=screen)

    return decide


# -- the report ---------------------------------------------------------------------------
@dataclass
class DemoReport:
    """What the demo did; every number can be checked against the files it left."""

    db: str
    thread_id: str
    turns: int
    model_calls: int
    tokens: dict[str, int]
    summaries: int
    summary_covers_messages: int
    messages: dict[str, int]
    context_trimmed_calls: int
    goal: str | None
    plan: list[dict[str, Any]]
    constraints: list[str]
    artifacts: list[dict[str, Any]]
    errors_recovered: list[str]
    approval: dict[str, Any]
    ledger: dict[str, Any]
    storage: dict[str, Any]
    reloaded_identical: bool
    inspect: str


def _stm_phase(
    db: Path,
    script: list[tuple[str, str]],
    ledger: Ledger,
    decide: Decide,
    calls: _Calls,
    progress: Progress | None,
    task: Any,
) -> dict[str, Any]:
    total = len(script)
    paused_at = total - 1
    counter = TokenCounter()
    model = ScriptedChatModel(token_counter=counter)

    def graph_on(saver: STMSaver, store: Any) -> CompiledStateGraph[Any, Any, Any, Any]:
        return build_agent_graph(
            model, saver, ledger, store=store, token_counter=counter, on_model_input=calls.hook
        )

    with _open_stm(db) as (saver, store):
        runner = _Runner(graph_on(saver, store), progress, task, "STMSaver")
        interrupts = runner.turns(script[:paused_at], 1, total)
        if len(interrupts) != 1:
            raise RuntimeError(f"the demo expected one approval, got {len(interrupts)}")
        before = _fingerprint(runner.graph.get_state(runner.config).values)
    # every connection is closed: a new saver and a new graph on the same file
    with _open_stm(db) as (saver, store):
        resumed = _Runner(graph_on(saver, store), progress, task, "STMSaver (reopened)")
        paused = resumed.graph.get_state(resumed.config)
        identical = _fingerprint(paused.values) == before and [i.id for i in paused.interrupts] == [
            i.id for i in interrupts
        ]
        (request,) = paused.interrupts
        decision = decide(request)
        if resumed.resume({request.id: decision}, paused_at, total):
            raise RuntimeError("the demo expected the refund turn to finish")
        resumed.turns(script[paused_at:], paused_at + 1, total)
        state = saver.get_thread_state(DEMO_THREAD)
        assert state is not None
        values = resumed.graph.get_state(resumed.config).values
    return {
        "state": state,
        "values": values,
        "request": request.value,
        "decision": decision,
        "identical": identical,
        "errors": runner.errors + resumed.errors,
    }


def _plain_phase(
    path: Path,
    script: list[tuple[str, str]],
    decision: dict[str, Any],
    calls: _Calls,
    progress: Progress | None,
    task: Any,
) -> dict[str, Any]:
    ledger = Ledger()
    counter = TokenCounter()
    model = ScriptedChatModel(token_counter=counter)
    total = len(script)
    with _open_plain(path) as saver:
        graph = build_agent_graph(
            model, saver, ledger, memory=False, token_counter=counter, on_model_input=calls.hook
        )
        runner = _Runner(graph, progress, task, "plain add_messages")
        interrupts = runner.turns(script[:-1], 1, total)
    with _open_plain(path) as saver:
        graph = build_agent_graph(
            model, saver, ledger, memory=False, token_counter=counter, on_model_input=calls.hook
        )
        runner = _Runner(graph, progress, task, "plain add_messages (reopened)")
        runner.resume({i.id: decision for i in interrupts}, total - 1, total)
        runner.turns(script[-1:], total, total)
        values = graph.get_state(runner.config).values
    return {"ledger": ledger.entries(DEMO_THREAD), "messages": len(values["messages"])}


def run_demo(
    db: Path, turns: int, *, decide: Decide | None = None, progress: Progress | None = None
) -> DemoReport:
    """Run the demo into ``db`` and return its report (see the module docstring)."""
    script = demo_script(turns)
    db = db.resolve()
    _prepare(db)
    ledger_path, plain_path = _companions(db)
    ledger = Ledger(ledger_path)
    stm_calls, plain_calls = _Calls(), _Calls()
    task: Any = None
    if progress is not None:
        task = progress.add_task("starting", total=2 * len(script))
    stm = _stm_phase(
        db, script, ledger, decide or (lambda _: {"type": "approve"}), stm_calls, progress, task
    )
    plain = _plain_phase(plain_path, script, stm["decision"], plain_calls, progress, task)
    if len(plain_calls.tokens) != len(stm_calls.tokens):
        raise RuntimeError(
            f"the plain run made {len(plain_calls.tokens)} model calls, the STMSaver run "
            f"{len(stm_calls.tokens)}: the comparison would not be like for like"
        )
    db_bytes, plain_bytes = _checkpoint_wal(db), _checkpoint_wal(plain_path)
    state = stm["state"]
    entries = ledger.entries(DEMO_THREAD)
    approved_call = str(stm["request"]["tool_call_id"])
    summary = state.summary or {}
    coverage = summary.get("coverage") or {}
    return DemoReport(
        db=str(db),
        thread_id=DEMO_THREAD,
        turns=len(script),
        model_calls=len(stm_calls.tokens),
        tokens={
            "model_saw": sum(stm_calls.tokens),
            "full_history": sum(plain_calls.tokens),
            "last_call_model_saw": stm_calls.tokens[-1],
            "last_call_full_history": plain_calls.tokens[-1],
        },
        summaries=int(summary.get("version", 0)),
        summary_covers_messages=int(coverage.get("message_count", 0)),
        messages={
            "in_state": len(stm["values"]["messages"]),
            "plain_state": plain["messages"],
        },
        context_trimmed_calls=sum(stm_calls.trimmed),
        goal=state.goal,
        plan=[{"id": s["id"], "status": s["status"]} for s in state.plan],
        constraints=[c["text"] for c in state.constraints],
        artifacts=[
            {"id": a["id"], "uri": a["uri"], "tokens": a["tokens"]} for a in state.artifacts
        ],
        errors_recovered=stm["errors"],
        approval={
            "tool": stm["request"]["name"],
            "args": stm["request"]["args"],
            "tool_call_id": approved_call,
            "decision": stm["decision"]["type"],
            "resumed_with_new_saver": True,
        },
        ledger={
            "path": str(ledger_path),
            "entries": len(entries),
            "approved_call_runs": sum(e["call_id"] == approved_call for e in entries),
            "plain_run_same_calls": _runs(entries) == _runs(plain["ledger"]),
            "runs": [f"{e['tool']}({json.dumps(e['args'], sort_keys=True)})" for e in entries],
        },
        storage={
            "db_bytes": db_bytes,
            "plain_bytes": plain_bytes,
            "plain_path": str(plain_path),
            "method": _METHOD,
        },
        reloaded_identical=stm["identical"],
        inspect=f"langgraph-stm threads show {DEMO_THREAD} --db {db}",
    )


def _runs(entries: list[dict[str, Any]]) -> list[str]:
    """The runs as sorted text (parallel calls run concurrently, in any order)."""
    return sorted(f"{e['tool']}({json.dumps(e['args'], sort_keys=True)})" for e in entries)


def _kib(n: int) -> str:
    return f"{n / 1024:,.1f} KiB"


def _print_report(report: DemoReport, console: Console) -> None:
    tokens, storage = report.tokens, report.storage
    table = Table(title=f"langgraph-stm demo: thread {report.thread_id!r}", show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    saw, full = tokens["model_saw"], tokens["full_history"]
    table.add_row("turns", f"{report.turns} user turns, {report.model_calls} model calls")
    table.add_row(
        "tokens the model saw",
        f"{saw:,} in all vs {full:,} for the full history ({saw / full:.0%}); "
        f"last call {tokens['last_call_model_saw']:,} vs {tokens['last_call_full_history']:,}",
    )
    table.add_row(
        "memory",
        f"{report.summaries} summaries covering {report.summary_covers_messages} messages; "
        f"{report.messages['in_state']} messages in state (plain: "
        f"{report.messages['plain_state']}); context trimmed on "
        f"{report.context_trimmed_calls} calls",
    )
    table.add_row(
        "artifacts",
        "; ".join(f"{a['id']} ({a['tokens']:,} tokens) -> {a['uri']}" for a in report.artifacts)
        or "none",
    )
    table.add_row("error recovered", "; ".join(report.errors_recovered) or "none")
    approval = report.approval
    table.add_row(
        "approval",
        f"{approval['tool']}({json.dumps(approval['args'], sort_keys=True)}): "
        f"{approval['decision']}, resumed by a new saver and graph on the same file",
    )
    ledger = report.ledger
    table.add_row(
        "tool ledger",
        f"{ledger['entries']} runs; the approved call ran {ledger['approved_call_runs']} time(s) "
        f"({ledger['path']})",
    )
    table.add_row(
        "database size",
        f"{_kib(storage['db_bytes'])} vs {_kib(storage['plain_bytes'])} with plain "
        f"add_messages ({storage['plain_bytes'] / storage['db_bytes']:.1f}x)",
    )
    console.print(table)
    console.print(f"size measured: {storage['method']}.", soft_wrap=True)
    console.print(f"goal: {report.goal}", soft_wrap=True, markup=False)
    console.print(
        "constraints kept: " + "; ".join(report.constraints), soft_wrap=True, markup=False
    )
    console.print(
        "plan: " + ", ".join(f"{s['id']} {s['status']}" for s in report.plan),
        soft_wrap=True,
        markup=False,
    )
    console.print(
        f"reloaded from disk: {'identical' if report.reloaded_identical else 'DIFFERENT'}",
        soft_wrap=True,
    )
    console.print(f"inspect the thread: {report.inspect}", soft_wrap=True, markup=False)


def _run(args: Any, io: IO) -> int:
    if args.interactive:  # the prompt and a live display would fight over the terminal
        report = run_demo(args.db, args.turns, decide=_ask(io, json_output=args.json))
    else:
        progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(file=io.err if args.json else io.out),
            transient=True,
        )
        with progress:
            report = run_demo(args.db, args.turns, progress=progress)
    if args.json:
        print(json.dumps(asdict(report), indent=2), file=io.out)
    else:
        _print_report(report, Console(file=io.out))
    return 0 if report.reloaded_identical else 1


def register(commands: Any) -> None:
    """Add ``demo`` to the command line."""
    demo = commands.add_parser(
        "demo",
        help="run the offline demo agent on a SQLite file",
        description="Run the scripted agent on STMSaver over a SQLite file and report.",
    )
    demo.add_argument(
        "--db",
        type=Path,
        default=Path("stm-demo.sqlite"),
        metavar="PATH",
        help="SQLite file (default stm-demo.sqlite; an earlier demo's file is replaced)",
    )
    demo.add_argument(
        "--turns",
        type=int,
        default=24,
        metavar="N",
        help=f"user turns (at least {MIN_TURNS}; default 24)",
    )
    demo.add_argument("--interactive", action="store_true", help="ask for the approval at a prompt")
    demo.add_argument("--json", action="store_true", help="print the report as JSON")
    demo.set_defaults(run=_run)
