"""``langgraph-stm gc``: sweep the expired threads, then vacuum unreferenced rows.

The sweep is ``STMSaver.sweep`` (expired threads deleted completely, in batches of
``--batch-size``), the vacuum ``STMSaver.vacuum`` (rows no remaining checkpoint
references). With ``--tenant`` only that owner's expired threads are swept and only
its threads vacuumed. ``--dry-run`` only reads: it lists the threads the sweep would
delete (``STMSaver.expired_threads``) and counts the rows the vacuum would remove
(``vacuum(dry_run=True)``, counted before the sweep, so rows the sweep would delete
with their expired thread are counted too). Which threads are expired depends on
``--ttl``, the ``ttl=`` the application gives its saver; threads with a TTL of their
own expire by it either way.

Example:
    >>> import io, json, pathlib, tempfile
    >>> from datetime import UTC, datetime
    >>> from langgraph.graph import START, StateGraph
    >>> from langgraph_stm import STMSaver, STMState
    >>> from langgraph_stm.cli import main
    >>> def answer(state: STMState) -> dict:
    ...     return {"messages": [("ai", "hi")]}
    >>> tmp = tempfile.TemporaryDirectory()
    >>> db = str(pathlib.Path(tmp.name) / "threads.sqlite")
    >>> with STMSaver.from_sqlite(db, clock=lambda: datetime(2020, 1, 1, tzinfo=UTC)) as saver:
    ...     graph = StateGraph(STMState).add_node(answer).add_edge(START, "answer")
    ...     graph = graph.compile(checkpointer=saver)
    ...     _ = graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "old"}})
    >>> out = io.StringIO()
    >>> main(["gc", "--db", db, "--ttl", "30d", "--dry-run"], out=out)
    0
    >>> print(out.getvalue().strip())
    dry run: would sweep 1 expired thread (old) and vacuum 0 unreferenced rows
    >>> main(["gc", "--db", db, "--ttl", "30d", "--json"], out=(out := io.StringIO()))
    0
    >>> json.loads(out.getvalue())["swept"]
    1
    >>> tmp.cleanup()
"""

from __future__ import annotations

import argparse
from typing import Any

from langgraph_stm.cli._common import IO, positive_int
from langgraph_stm.cli._render import show
from langgraph_stm.cli._store import add_database_options, open_saver

__all__ = ["register"]


def _gc(args: argparse.Namespace, io: IO) -> int:
    with open_saver(args) as saver:
        expired = saver.expired_threads(owner=args.tenant)
        scope = (
            None
            if args.tenant is None
            else [s.thread_id for s in saver.list_threads(owner=args.tenant)]
        )
        if args.dry_run:
            swept = len(expired)
            rows = saver.vacuum(scope, dry_run=True)
        else:
            swept = saver.sweep(batch_size=args.batch_size, owner=args.tenant)
            if scope is not None:  # the owner's threads left after the sweep
                scope = [s.thread_id for s in saver.list_threads(owner=args.tenant)]
            rows = saver.vacuum(scope)
    data = {"dry_run": args.dry_run, "expired": expired, "swept": swept, "vacuumed_rows": rows}
    show(io, "gc", data, as_json=args.json)
    return 0


def register(commands: Any) -> None:
    """Add ``gc`` to the command line."""
    gc = commands.add_parser("gc", help="sweep expired threads and vacuum unreferenced rows")
    add_database_options(gc)
    gc.add_argument("--dry-run", action="store_true", help="only report what would be removed")
    gc.add_argument(
        "--batch-size",
        type=positive_int,
        default=500,
        metavar="N",
        help="threads deleted per transaction (default 500)",
    )
    gc.add_argument("--json", action="store_true", help="print JSON (for scripts)")
    gc.set_defaults(run=_gc)
