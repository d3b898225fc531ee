"""``langgraph-stm threads``: list, show, export and delete the threads of a database.

``list`` reads the thread index (``STMSaver.list_threads``); ``show`` adds what only the
latest checkpoint knows: the checkpoint count, the exact token size of the context
``build_context`` would assemble from the state (with ``--model``'s encoding and
``--max-tokens`` as the budget, no system prompt), and the pending approvals (the
unanswered tool calls of the last AI message, with the interrupt waiting on each, and
any other interrupt of the latest checkpoint). ``export`` prints the thread's JSON
document (``STMSaver.export_thread``); ``delete`` asks first unless ``--yes``. An
unknown thread (or one deleted or expired) is one line on stderr and exit code 1.

Example:
    >>> import io, json, pathlib, tempfile
    >>> from langgraph.graph import START, StateGraph
    >>> from langgraph_stm import STMSaver, STMState
    >>> from langgraph_stm.cli import main
    >>> def plan(state: STMState) -> dict:
    ...     return {"goal": "ship v2", "messages": [("ai", "on it")]}
    >>> tmp = tempfile.TemporaryDirectory()
    >>> db = str(pathlib.Path(tmp.name) / "threads.sqlite")
    >>> with STMSaver.from_sqlite(db) as saver:
    ...     graph = StateGraph(STMState).add_node(plan).add_edge(START, "plan")
    ...     graph = graph.compile(checkpointer=saver)
    ...     _ = graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})
    >>> out = io.StringIO()
    >>> main(["threads", "list", "--db", db, "--json"], out=out)
    0
    >>> [(t["thread_id"], t["goal"], t["message_count"]) for t in json.loads(out.getvalue())]
    [('t1', 'ship v2', 2)]
    >>> main(["threads", "show", "t2", "--db", db], err=io.StringIO())
    1
    >>> tmp.cleanup()
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.base import CheckpointTuple

from langgraph_stm._context import build_context
from langgraph_stm._errors import STMError
from langgraph_stm._tokens import TokenCounter
from langgraph_stm._units import group_units
from langgraph_stm.checkpoint import STMSaver, ThreadState
from langgraph_stm.cli._common import IO, CLIError, positive_int
from langgraph_stm.cli._render import as_json_text, show
from langgraph_stm.cli._store import add_database_options, open_saver, thread_config

__all__ = ["register"]

INTERRUPT_CHANNEL = "__interrupt__"
"""The pending-write channel LangGraph stores a task's interrupts in (``Interrupt``
objects). LangGraph exports no public name for it; ``test_cli_threads.py`` fails if
it changes (a paused thread would show no interrupt)."""

DEFAULT_MODEL = "gpt-4o"
DEFAULT_MAX_TOKENS = 128_000


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _json(value: Any) -> Any:
    """``value`` as JSON data (a value JSON cannot hold becomes its ``str``)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    return str(value)


def _ttl_seconds(state: ThreadState) -> float | None:
    return None if state.ttl is None else state.ttl.total_seconds()


def _row(state: ThreadState) -> dict[str, Any]:
    """One thread of ``threads list``."""
    error = state.last_error
    return {
        "thread_id": state.thread_id,
        "checkpoint_id": state.checkpoint_id,
        "updated_at": _iso(state.updated_at),
        "message_count": state.message_count,
        "goal": state.goal,
        "plan_steps": len(state.plan),
        "plan_done": sum(1 for s in state.plan if s.get("status") == "done"),
        "constraints": len(state.constraints),
        "artifacts": len(state.artifacts),
        "last_error": None if error is None else error.get("message"),
        "summary_version": None if state.summary is None else state.summary.get("version"),
        "ttl_seconds": _ttl_seconds(state),
        "expires_at": _iso(state.expires_at),
    }


def _where(args: argparse.Namespace) -> str:
    return str(args.db) if args.postgres is None else "the PostgreSQL database"


def _state(saver: STMSaver, args: argparse.Namespace) -> ThreadState:
    """The thread the command names, in the caller's scope, or a one-line error."""
    state = saver.get_thread_state(args.thread_id, owner=args.tenant)
    if state is None:
        raise CLIError(
            f"thread {args.thread_id!r} not found in {_where(args)} (unknown, deleted or "
            "expired; `langgraph-stm threads list` shows the threads)"
        )
    return state


def _pending(messages: Sequence[BaseMessage], tup: CheckpointTuple) -> list[dict[str, Any]]:
    """The unanswered tool calls of the last unit, each with the interrupt waiting on
    it, then the other interrupts of the checkpoint's pending writes."""
    interrupts: dict[str, Any] = {}
    for _task, channel, value in tup.pending_writes or ():
        if channel == INTERRUPT_CHANNEL:
            for item in value if isinstance(value, list | tuple) else [value]:
                interrupts.setdefault(str(getattr(item, "id", "")), getattr(item, "value", item))
    by_call = {
        v["tool_call_id"]: i
        for i, v in interrupts.items()
        if isinstance(v, Mapping) and isinstance(v.get("tool_call_id"), str)
    }
    pending: list[dict[str, Any]] = []
    try:
        units = group_units(messages)
    except STMError:  # a broken history has no well-defined pending unit
        units = []
    if units and units[-1].pending and isinstance(units[-1].head, AIMessage):
        head = units[-1].head
        waiting = set(units[-1].unanswered)
        for call in head.tool_calls:
            if call["id"] in waiting:
                interrupt_id = by_call.get(call["id"])
                pending.append(
                    {
                        "interrupt_id": interrupt_id,
                        "ai_message_id": head.id,
                        "tool_call_id": call["id"],
                        "name": call["name"],
                        "args": _json(call["args"]),
                        "request": None
                        if interrupt_id is None
                        else _json(interrupts[interrupt_id]),
                    }
                )
    shown = {p["interrupt_id"] for p in pending}
    for interrupt_id, value in interrupts.items():
        if interrupt_id not in shown:
            tool = value if isinstance(value, Mapping) else {}
            pending.append(
                {
                    "interrupt_id": interrupt_id,
                    "ai_message_id": tool.get("ai_message_id"),
                    "tool_call_id": tool.get("tool_call_id"),
                    "name": tool.get("name"),
                    "args": _json(tool.get("args")),
                    "request": _json(value),
                }
            )
    return pending


def _detail(saver: STMSaver, args: argparse.Namespace) -> dict[str, Any]:
    """Everything ``threads show`` prints, as JSON data."""
    state = _state(saver, args)
    config = thread_config(args.thread_id, args.tenant)
    tup = saver.get_tuple(config)
    if tup is None:  # deleted or expired between the two reads
        raise CLIError(f"thread {args.thread_id!r} was deleted or expired while being read")
    values = tup.checkpoint["channel_values"]
    messages = list(values.get("messages") or [])
    counter = TokenCounter(model=args.model)
    context = build_context(
        values,
        max_tokens=args.max_tokens,
        token_counter=counter,
        on_invalid="repair",
        on_overflow="keep_mandatory",
    )
    # The thread is in scope (checked above), so its checkpoints can be counted on the
    # inner saver: every namespace, without loading any checkpoint's messages.
    checkpoints = sum(1 for _ in saver.inner.list({"configurable": {"thread_id": args.thread_id}}))
    return {
        "thread_id": state.thread_id,
        "checkpoint_id": state.checkpoint_id,
        "updated_at": _iso(state.updated_at),
        "goal": state.goal,
        "plan": _json(state.plan),
        "constraints": _json(state.constraints),
        "artifacts": _json(state.artifacts),
        "last_error": _json(state.last_error),
        "summary": _json(state.summary),
        "message_count": state.message_count,
        "checkpoint_count": checkpoints,
        "context": {
            "tokens": context.tokens,
            "model": args.model,
            "encoding": counter.encoding_name,
            "max_tokens": args.max_tokens,
            "over_budget": context.over_budget,
            "messages": len(context.messages),
            "omitted_messages": len(context.omitted_message_ids),
            "history_tokens": counter(messages) if messages else 0,
        },
        "pending_approvals": _pending(messages, tup),
        "ttl_seconds": _ttl_seconds(state),
        "expires_at": _iso(state.expires_at),
    }


def _list(args: argparse.Namespace, io: IO) -> int:
    with open_saver(args) as saver:
        states = saver.list_threads(limit=args.limit, owner=args.tenant)
        show(io, "threads", [_row(s) for s in states], as_json=args.json)
    return 0


def _show(args: argparse.Namespace, io: IO) -> int:
    with open_saver(args) as saver:
        show(io, "thread", _detail(saver, args), as_json=args.json)
    return 0


def _export(args: argparse.Namespace, io: IO) -> int:
    with open_saver(args) as saver:
        _state(saver, args)
        document = saver.export_thread(args.thread_id, owner=args.tenant)
    if args.output is None:
        show(io, "export", document, as_json=True)
        return 0
    target: Path = args.output
    try:
        target.write_text(as_json_text(document), encoding="utf-8")
    except OSError as exc:
        raise CLIError(f"cannot write {target}: {exc.strerror or exc}") from None
    print(f"exported thread {args.thread_id} to {target}", file=io.out)
    return 0


def _confirm(io: IO, question: str, prompt_to_err: bool) -> bool:
    stream = io.err if prompt_to_err else io.out
    stream.write(f"{question} [y/N] ")
    stream.flush()
    answer = io.inp.readline()
    if not io.inp.isatty():  # a terminal echoes the answer and its newline; a pipe does not
        stream.write("\n")
    return answer.strip().lower() in ("y", "yes")


def _delete(args: argparse.Namespace, io: IO) -> int:
    with open_saver(args) as saver:
        state = _state(saver, args)
        if not args.yes:
            messages = "?" if state.message_count is None else state.message_count
            question = (
                f"Delete thread {args.thread_id!r} ({messages} messages) and every "
                "checkpoint of it, for good?"
            )
            if not _confirm(io, question, prompt_to_err=args.json):
                raise CLIError(f"thread {args.thread_id!r} not deleted (answer y, or pass --yes)")
        report = saver.delete_thread(args.thread_id, owner=args.tenant)
    data = {
        "thread_id": report.thread_id,
        "rows": dict(report.rows),
        "store_items": report.store_items,
        "seconds": report.seconds,
    }
    show(io, "deleted", data, as_json=args.json)
    return 0


def _model(text: str) -> str:
    try:
        TokenCounter(model=text)
    except STMError as exc:
        raise argparse.ArgumentTypeError(str(exc).splitlines()[0]) from None
    return text


def register(commands: Any) -> None:
    """Add ``threads`` (``list``, ``show``, ``export``, ``delete``) to the command line."""
    threads = commands.add_parser("threads", help="list, show, export or delete threads")
    actions = threads.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(
        name: str, help: str, run: Any, *, thread: bool = True, as_json: bool = True
    ) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=help)
        if thread:
            parser.add_argument("thread_id", metavar="THREAD_ID", help="the thread")
        add_database_options(parser)
        if as_json:
            parser.add_argument("--json", action="store_true", help="print JSON (for scripts)")
        parser.set_defaults(run=run)
        return parser

    listing = action("list", "list the threads, most recently updated first", _list, thread=False)
    listing.add_argument("--limit", type=positive_int, metavar="N", help="at most N threads")
    detail = action("show", "show one thread's state, context size and approvals", _show)
    detail.add_argument(
        "--model",
        type=_model,
        default=DEFAULT_MODEL,
        help=f"model whose encoding counts the context (default {DEFAULT_MODEL})",
    )
    detail.add_argument(
        "--max-tokens",
        type=positive_int,
        default=DEFAULT_MAX_TOKENS,
        metavar="N",
        help=f"context budget to assemble within (default {DEFAULT_MAX_TOKENS})",
    )
    export = action("export", "print the thread as a JSON document", _export, as_json=False)
    export.add_argument("-o", "--output", type=Path, metavar="FILE", help="write it to FILE")
    delete = action("delete", "delete a thread completely (asks first)", _delete)
    delete.add_argument("-y", "--yes", action="store_true", help="do not ask")
