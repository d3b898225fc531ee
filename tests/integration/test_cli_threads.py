"""``langgraph-stm threads`` and ``gc`` against a real SQLite file and a real PostgreSQL
database.

The threads are written by running a compiled ``StateGraph`` over ``STMState`` with
``STMSaver``: a planner sets the goal, plan and constraints, a worker records an
artifact and an error, ``SummarizeNode`` folds the oldest messages into a summary, and
an ``ApprovalToolNode`` pauses on an email waiting for approval. Every number the CLI
prints is checked against what the saver and the graph read. Every error path exits
non-zero with exactly one line on stderr and no traceback.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langgraph_stm import (
    ApprovalToolNode,
    STMSaver,
    STMState,
    SummarizeNode,
    TokenCounter,
    build_context,
)
from langgraph_stm.cli import main

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
REPO = Path(__file__).resolve().parents[2]
MAIN = "t-main"
"""The thread paused on an approval, with every structured field set."""
OLD = "t-old"
"""A thread last written in 2020 (by a saver with a clock in the past)."""
PAST = datetime(2020, 1, 1, tzinfo=UTC)


# -- the graph ------------------------------------------------------------------------------
@tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return f"sent to {to}"


def planner(state: STMState) -> dict[str, Any]:
    return {
        "goal": "migrate billing to v2",
        "plan": [
            {"id": "export", "task": "export v1 invoices"},
            {"id": "map", "task": "map fields to the v2 schema"},
            {"id": "notify", "task": "email the team"},
        ],
        "constraints": [
            {
                "id": "internal-only",
                "text": "never email external domains",
                "source_message_id": "h-0",
            }
        ],
        "messages": [AIMessage("Plan: export, map, notify.", id="ai-plan")],
    }


def work(state: STMState) -> dict[str, Any]:
    return {
        "plan": [{"id": "export", "status": "done"}, {"id": "map", "status": "blocked"}],
        "artifacts": [
            {
                "id": "export-csv",
                "kind": "file",
                "summary": "1,204 v1 invoices as CSV",
                "uri": "s3://billing/export.csv",
                "source_message_id": "ai-work-1",
                "tokens": 5400,
            }
        ],
        "last_error": {
            "message": "HTTP 503 from the schema service",
            "recovery": "retry in 5 minutes",
            "step_id": "map",
        },
        "messages": [
            AIMessage("Exported 1,204 invoices to s3://billing/export.csv.", id="ai-work-1"),
            HumanMessage("Good, now map the fields.", id="h-2"),
            AIMessage("The schema service answered 503; mapping is blocked.", id="ai-work-2"),
            HumanMessage("Then email the team about it.", id="h-3"),
        ],
    }


def notify(state: STMState) -> dict[str, Any]:
    call = {
        "name": "send_email",
        "args": {"to": "team@corp.example", "body": "mapping is blocked by a 503"},
        "id": "call-email",
    }
    return {"messages": [AIMessage("", id="ai-notify", tool_calls=[call])]}


def full_graph(saver: STMSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    """planner -> work -> summarize -> notify -> tools (pauses on the email)."""
    builder = StateGraph(STMState)
    builder.add_node("planner", planner)
    builder.add_node("work", work)
    builder.add_node("summarize", SummarizeNode(trigger_tokens=6, keep_tokens=3, token_counter=len))
    builder.add_node("notify", notify)
    builder.add_node("tools", ApprovalToolNode([send_email], interrupt_on={"send_email": True}))
    builder.add_edge(START, "planner")
    builder.add_edge("planner", "work")
    builder.add_edge("work", "summarize")
    builder.add_edge("summarize", "notify")
    builder.add_edge("notify", "tools")
    builder.add_edge("tools", END)
    return builder.compile(checkpointer=saver)


def reply(state: STMState) -> dict[str, Any]:
    return {"goal": "say hi", "messages": [AIMessage("hi", id=f"ai-{len(state['messages'])}")]}


def small_graph(saver: STMSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    return StateGraph(STMState).add_node(reply).add_edge(START, "reply").compile(checkpointer=saver)


def cfg(thread: str, tenant: str | None = None) -> Any:
    configurable: dict[str, Any] = {"thread_id": thread}
    if tenant is not None:
        configurable["tenant_id"] = tenant
    return {"configurable": configurable}


FIRST = [
    HumanMessage("Migrate billing to v2. Never email external domains.", id="h-0"),
    AIMessage("Sure, where do we start?", id="ai-0"),
    HumanMessage("Start with the export.", id="h-1"),
]


# -- the databases ------------------------------------------------------------------------
@dataclass
class Db:
    """One database: how the CLI names it and how the test opens it."""

    kind: str
    target: str

    def args(self) -> list[str]:
        return ["--db", self.target] if self.kind == "sqlite" else ["--postgres", self.target]

    @contextmanager
    def saver(self, **options: Any) -> Iterator[STMSaver]:
        if self.kind == "sqlite":
            with STMSaver.from_sqlite(self.target, **options) as saver:
                saver.setup()
                yield saver
        else:
            with STMSaver.from_postgres(self.target, **options) as saver:
                saver.setup()
                yield saver

    def drop_old_checkpoints(self, thread: str) -> None:
        """Delete every root checkpoint of ``thread`` but the latest, behind the saver's
        back (as an inner saver's own pruning does), leaving our rows unreferenced."""
        sql = (
            "DELETE FROM checkpoints WHERE thread_id = {p} AND checkpoint_ns = '' AND "
            "checkpoint_id <> (SELECT MAX(checkpoint_id) FROM checkpoints "
            "WHERE thread_id = {p} AND checkpoint_ns = '')"
        )
        if self.kind == "sqlite":
            with sqlite3.connect(self.target) as conn:
                conn.execute(sql.format(p="?"), (thread, thread))
            return
        import psycopg

        with psycopg.connect(self.target, autocommit=True) as conn:
            conn.execute(sql.format(p="%s"), (thread, thread))


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest) -> Db:
    if request.param == "sqlite":
        return Db("sqlite", str(request.getfixturevalue("sqlite_path")))
    return Db("postgres", request.getfixturevalue("postgres_uri"))


@pytest.fixture
def written(db: Db) -> Db:
    """``db`` with the paused main thread, a tenant's thread and a thread from 2020."""
    with db.saver() as saver:
        full_graph(saver).invoke({"messages": list(FIRST)}, cfg(MAIN))
    with db.saver(clock=lambda: PAST) as saver:
        small_graph(saver).invoke({"messages": [("user", "hello")]}, cfg(OLD))
    with db.saver(tenant_key="tenant_id") as saver:
        small_graph(saver).invoke({"messages": [("user", "hi")]}, cfg("t-acme", "acme"))
    with db.saver(tenant_key="tenant_id", clock=lambda: PAST) as saver:
        small_graph(saver).invoke({"messages": [("user", "hi")]}, cfg("t-acme-old", "acme"))
    return db


# -- running the command ------------------------------------------------------------------
@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def cli(*argv: str, inp: str = "") -> Run:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err, inp=io.StringIO(inp))
    return Run(code, out.getvalue(), err.getvalue())


def assert_one_line_error(run: Run, *needles: str) -> None:
    """Non-zero exit, exactly one line on stderr naming what is wrong, no traceback."""
    assert run.code != 0
    assert run.err.count("\n") == 1, run.err
    assert run.err.endswith("\n")
    assert run.err.startswith("langgraph-stm: ")
    assert "Traceback" not in run.err + run.out
    for needle in needles:
        assert needle in run.err


# -- threads list ---------------------------------------------------------------------------
class TestList:
    def test_list_json_shows_every_live_thread_as_the_saver_indexes_it(self, written: Db) -> None:
        """Each row carries the index's message count, goal, plan progress and error."""
        run = cli("threads", "list", *written.args(), "--json")
        assert run.code == 0
        assert run.err == ""
        rows = {r["thread_id"]: r for r in run.json()}
        with written.saver() as saver:
            states = {s.thread_id: s for s in saver.list_threads()}
        assert set(rows) == set(states) == {MAIN, OLD, "t-acme", "t-acme-old"}
        main_row, state = rows[MAIN], states[MAIN]
        assert main_row["message_count"] == state.message_count
        assert main_row["goal"] == "migrate billing to v2"
        assert (main_row["plan_done"], main_row["plan_steps"]) == (1, 3)
        assert main_row["last_error"] == "HTTP 503 from the schema service"
        assert main_row["summary_version"] == 1
        assert main_row["checkpoint_id"] == state.checkpoint_id

    def test_list_table_names_threads_and_counts(self, written: Db) -> None:
        """The table for people shows each thread id and its message count."""
        run = cli("threads", "list", *written.args())
        assert run.code == 0
        with written.saver() as saver:
            state = saver.get_thread_state(MAIN)
        assert state is not None
        line = next(line for line in run.out.splitlines() if MAIN in line)
        assert f" {state.message_count} " in line
        assert "1/3" in line
        assert "4 threads" in run.out

    def test_list_with_ttl_leaves_expired_threads_out(self, written: Db) -> None:
        """Under the app's TTL, the thread written in 2020 is expired and not listed."""
        run = cli("threads", "list", *written.args(), "--ttl", "1d", "--json")
        rows = {r["thread_id"]: r for r in run.json()}
        assert set(rows) == {MAIN, "t-acme"}
        assert rows[MAIN]["ttl_seconds"] == 86400.0
        assert rows[MAIN]["expires_at"] is not None

    def test_list_with_tenant_shows_only_that_owners_threads(self, written: Db) -> None:
        """--tenant scopes the listing to the owner's threads; another owner sees none."""
        acme = cli("threads", "list", *written.args(), "--tenant", "acme", "--json")
        assert {r["thread_id"] for r in acme.json()} == {"t-acme", "t-acme-old"}
        other = cli("threads", "list", *written.args(), "--tenant", "globex", "--json")
        assert other.code == 0
        assert other.json() == []

    def test_list_limit_pages_the_threads(self, written: Db) -> None:
        """--limit N shows the N most recently updated threads."""
        run = cli("threads", "list", *written.args(), "--limit", "2", "--json")
        assert len(run.json()) == 2


# -- threads show ---------------------------------------------------------------------------
class TestShow:
    def test_show_json_matches_the_saver_and_the_graph(self, written: Db) -> None:
        """Structured fields, counts, exact context size and the pending approval are what
        the saver and the graph read."""
        run = cli("threads", "show", MAIN, *written.args(), "--json")
        assert run.code == 0
        assert run.err == ""
        shown = run.json()
        with written.saver() as saver:
            state = saver.get_thread_state(MAIN)
            assert state is not None
            snapshot = full_graph(saver).get_state(cfg(MAIN))
            checkpoints = list(saver.list(cfg(MAIN)))
        assert shown["goal"] == state.goal == "migrate billing to v2"
        assert shown["plan"] == state.plan
        assert [s["status"] for s in shown["plan"]] == ["done", "blocked", "pending"]
        assert shown["constraints"] == state.constraints
        assert shown["artifacts"] == state.artifacts
        assert shown["last_error"] == state.last_error
        assert shown["last_error"]["message"] == "HTTP 503 from the schema service"
        assert shown["summary"] == state.summary
        assert shown["summary"]["version"] == 1
        assert shown["summary"]["coverage"]["message_count"] > 0
        values = snapshot.values
        assert shown["message_count"] == state.message_count == len(values["messages"])
        assert shown["checkpoint_count"] == len(checkpoints) > 1
        counter = TokenCounter(model="gpt-4o")
        context = build_context(values, max_tokens=128_000, token_counter=counter)
        assert shown["context"]["tokens"] == context.tokens
        assert shown["context"]["history_tokens"] == counter(values["messages"])
        assert shown["context"]["encoding"] == "o200k_base"
        assert shown["context"]["over_budget"] is False
        [interrupt] = snapshot.interrupts
        [pending] = shown["pending_approvals"]
        assert pending["interrupt_id"] == interrupt.id
        assert pending["tool_call_id"] == "call-email" == interrupt.value["tool_call_id"]
        assert pending["ai_message_id"] == "ai-notify"
        assert pending["name"] == "send_email"
        assert pending["args"] == {"to": "team@corp.example", "body": "mapping is blocked by a 503"}
        assert shown["ttl_seconds"] is None
        assert shown["expires_at"] is None

    def test_show_counts_with_the_encoding_of_the_model_asked(self, written: Db) -> None:
        """--model gpt-4 counts with cl100k_base; --max-tokens is the budget reported."""
        run = cli(
            "threads", "show", MAIN, *written.args(), "--model", "gpt-4", "--max-tokens", "50"
        )
        assert run.code == 0
        data = cli(
            "threads",
            "show",
            MAIN,
            *written.args(),
            "--model",
            "gpt-4",
            "--max-tokens",
            "50",
            "--json",
        ).json()
        with written.saver() as saver:
            values = full_graph(saver).get_state(cfg(MAIN)).values
        context = build_context(
            values,
            max_tokens=50,
            token_counter=TokenCounter(model="gpt-4"),
            on_overflow="keep_mandatory",
        )
        assert data["context"]["encoding"] == "cl100k_base"
        assert data["context"]["tokens"] == context.tokens
        assert data["context"]["over_budget"] is context.over_budget is True
        assert f"{context.tokens} tokens exactly (gpt-4, cl100k_base; budget 50, OVER BUDGET" in (
            run.out
        )

    def test_show_table_lists_plan_statuses_and_the_approval(self, written: Db) -> None:
        """The view for people has the numbers and the records."""
        run = cli("threads", "show", MAIN, *written.args())
        assert run.code == 0
        assert run.err == ""
        data = cli("threads", "show", MAIN, *written.args(), "--json").json()
        out = run.out
        assert f"{data['context']['tokens']} tokens exactly (gpt-4o, o200k_base" in out
        for needle in (
            "migrate billing to v2",
            "HTTP 503 from the schema service",
            "never email external domains",
            "s3://billing/export.csv",
            "send_email",
            "call-email",
            "blocked",
            "v1, covers",
            "none (never expires)",
        ):
            assert needle in out
        assert any(
            line.split()[:2] == ["checkpoints", str(data["checkpoint_count"])]
            for line in out.splitlines()
        )

    def test_show_a_thread_without_pending_work_has_no_approvals(self, written: Db) -> None:
        """A finished thread shows no pending approval."""
        data = cli("threads", "show", "t-acme", *written.args(), "--json").json()
        assert data["pending_approvals"] == []
        assert data["goal"] == "say hi"

    def test_show_ttl_of_a_thread_under_the_apps_ttl(self, written: Db) -> None:
        """--ttl gives the thread its expiry; the expired thread is not found."""
        data = cli("threads", "show", MAIN, *written.args(), "--ttl", "7d", "--json").json()
        assert data["ttl_seconds"] == 7 * 86400
        assert data["expires_at"] is not None
        gone = cli("threads", "show", OLD, *written.args(), "--ttl", "7d")
        assert_one_line_error(gone, repr(OLD), "not found")

    def test_show_with_the_owners_tenant(self, written: Db) -> None:
        """The owner sees its thread."""
        run = cli("threads", "show", "t-acme", *written.args(), "--tenant", "acme", "--json")
        assert run.code == 0
        assert run.json()["thread_id"] == "t-acme"


# -- threads export -------------------------------------------------------------------------
class TestExport:
    def test_export_prints_the_saver_document(self, written: Db) -> None:
        """stdout is the JSON document export_thread returns (exported_at aside)."""
        run = cli("threads", "export", MAIN, *written.args())
        assert run.code == 0
        assert run.err == ""
        document = run.json()
        with written.saver() as saver:
            expected = json.loads(json.dumps(saver.export_thread(MAIN)))
        assert document["schema"] == "langgraph-stm.thread"
        assert {**document, "exported_at": None} == {**expected, "exported_at": None}

    def test_export_to_a_file(self, written: Db, tmp_path: Path) -> None:
        """-o FILE writes the document there and says so on stdout."""
        target = tmp_path / "main.json"
        run = cli("threads", "export", MAIN, *written.args(), "-o", str(target))
        assert run.code == 0
        assert str(target) in run.out
        document = json.loads(target.read_text())
        assert document["thread_id"] == MAIN
        assert document["values"]["goal"] == "migrate billing to v2"

    def test_export_of_another_owners_thread_is_refused(self, written: Db) -> None:
        run = cli("threads", "export", "t-acme", *written.args(), "--tenant", "globex")
        assert_one_line_error(run, "ThreadScopeError", "'t-acme'")
        assert run.out == ""


# -- threads delete -------------------------------------------------------------------------
class TestDelete:
    def test_delete_asks_and_keeps_the_thread_when_the_answer_is_no(self, written: Db) -> None:
        run = cli("threads", "delete", MAIN, *written.args(), inp="n\n")
        assert_one_line_error(run, "not deleted", "--yes")
        assert "[y/N]" in run.out
        with written.saver() as saver:
            assert saver.get_thread_state(MAIN) is not None

    def test_delete_without_an_answer_deletes_nothing(self, written: Db) -> None:
        """End of input (no terminal) counts as no."""
        run = cli("threads", "delete", MAIN, *written.args(), inp="")
        assert_one_line_error(run, "not deleted")
        with written.saver() as saver:
            assert saver.get_thread_state(MAIN) is not None

    def test_delete_after_yes_removes_the_thread_and_reports_rows(self, written: Db) -> None:
        with written.saver() as saver:
            checkpoints = len(list(saver.list(cfg(MAIN))))
        run = cli("threads", "delete", MAIN, *written.args(), inp="y\n")
        assert run.code == 0
        assert run.err == ""
        assert f"deleted thread {MAIN}" in run.out
        with written.saver() as saver:
            assert saver.get_thread_state(MAIN) is None
            assert list(saver.list(cfg(MAIN))) == []
        again = cli("threads", "show", MAIN, *written.args())
        assert_one_line_error(again, "not found")
        assert checkpoints > 0

    def test_delete_yes_json_reports_the_rows_of_each_table(self, written: Db) -> None:
        with written.saver() as saver:
            checkpoints = len(list(saver.inner.list(cfg(MAIN))))
        run = cli("threads", "delete", MAIN, *written.args(), "--yes", "--json")
        assert run.code == 0
        assert run.err == ""
        report = run.json()
        assert report["thread_id"] == MAIN
        assert report["rows"]["checkpoints"] == checkpoints
        assert report["rows"]["stm_bodies"] > 0
        with written.saver() as saver:
            assert saver.get_thread_state(MAIN) is None
            assert {s.thread_id for s in saver.list_threads()} == {OLD, "t-acme", "t-acme-old"}

    def test_delete_of_another_owners_thread_deletes_nothing(self, written: Db) -> None:
        run = cli("threads", "delete", "t-acme", *written.args(), "--tenant", "globex", "--yes")
        assert_one_line_error(run, "ThreadScopeError")
        with written.saver() as saver:
            assert saver.get_thread_state("t-acme") is not None


# -- gc -------------------------------------------------------------------------------------
class TestGc:
    def test_gc_dry_run_lists_expired_threads_and_deletes_nothing(self, written: Db) -> None:
        run = cli("gc", *written.args(), "--ttl", "1d", "--dry-run", "--json")
        assert run.code == 0
        assert run.err == ""
        report = run.json()
        assert report["dry_run"] is True
        assert sorted(report["expired"]) == sorted([OLD, "t-acme-old"])
        assert report["swept"] == 2
        with written.saver() as saver:
            assert saver.get_thread_state(OLD) is not None
            assert saver.get_thread_state("t-acme-old") is not None
        human = cli("gc", *written.args(), "--ttl", "1d", "--dry-run")
        assert human.out.startswith("dry run: would sweep 2 expired threads (")

    def test_gc_sweeps_the_expired_threads_only(self, written: Db) -> None:
        run = cli("gc", *written.args(), "--ttl", "1d", "--json")
        assert run.code == 0
        assert run.err == ""
        report = run.json()
        assert report["dry_run"] is False
        assert report["swept"] == 2
        with written.saver() as saver:
            assert {s.thread_id for s in saver.list_threads()} == {MAIN, "t-acme"}
        assert cli("gc", *written.args(), "--ttl", "1d", "--json").json()["swept"] == 0

    def test_gc_without_ttl_sweeps_nothing(self, written: Db) -> None:
        """Without the app's TTL, no thread here has a TTL of its own: none expires."""
        report = cli("gc", *written.args(), "--json").json()
        assert report["swept"] == 0
        assert report["expired"] == []

    def test_gc_with_tenant_sweeps_only_that_owners_threads(self, written: Db) -> None:
        report = cli("gc", *written.args(), "--ttl", "1d", "--tenant", "acme", "--json").json()
        assert report["expired"] == ["t-acme-old"]
        assert report["swept"] == 1
        with written.saver() as saver:
            assert saver.get_thread_state(OLD) is not None
            assert saver.get_thread_state("t-acme-old") is None

    def test_gc_dry_run_counts_exactly_the_rows_vacuum_removes(self, written: Db) -> None:
        """With old checkpoints gone behind the saver's back, the dry run counts the
        unreferenced rows, the real run removes that many, and the thread still reads."""
        written.drop_old_checkpoints(MAIN)
        dry = cli("gc", *written.args(), "--dry-run", "--json").json()
        assert dry["vacuumed_rows"] > 0
        assert cli("gc", *written.args(), "--dry-run", "--json").json() == dry
        real = cli("gc", *written.args(), "--json").json()
        assert real["vacuumed_rows"] == dry["vacuumed_rows"]
        assert cli("gc", *written.args(), "--dry-run", "--json").json()["vacuumed_rows"] == 0
        shown = cli("threads", "show", MAIN, *written.args(), "--json").json()
        assert shown["goal"] == "migrate billing to v2"
        assert shown["checkpoint_count"] == 1
        with written.saver() as saver:
            assert (
                len(full_graph(saver).get_state(cfg(MAIN)).values["messages"])
                == (shown["message_count"])
            )


# -- error paths ----------------------------------------------------------------------------
COMMANDS = [
    ["threads", "list"],
    ["threads", "show", MAIN],
    ["threads", "export", MAIN],
    ["threads", "delete", MAIN, "--yes"],
    ["gc"],
]

ACTION_FLAGS = {"show": ["--json"], "export": [], "delete": ["--yes"]}
"""What each thread action is run with in the error tests (delete would ask otherwise)."""


class TestErrors:
    @pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
    def test_a_missing_sqlite_file_is_one_line_and_is_not_created(
        self, command: list[str], tmp_path: Path
    ) -> None:
        missing = tmp_path / "nope" / "x.sqlite"
        run = cli(*command, "--db", str(missing))
        assert_one_line_error(run, str(missing))
        assert run.code == 2
        assert not missing.exists()
        assert not missing.parent.exists()

    def test_a_file_that_is_not_sqlite_is_refused(self, tmp_path: Path) -> None:
        text = tmp_path / "notes.txt"
        text.write_text("hello\n")
        run = cli("threads", "list", "--db", str(text))
        assert_one_line_error(run, "not a SQLite database")
        assert text.read_text() == "hello\n"

    def test_a_directory_is_refused(self, tmp_path: Path) -> None:
        assert_one_line_error(cli("gc", "--db", str(tmp_path)), "not a file")

    @pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
    def test_a_malformed_postgres_url_is_one_line(self, command: list[str]) -> None:
        run = cli(*command, "--postgres", "not a url")
        assert_one_line_error(run, "not a PostgreSQL URL")
        assert run.code == 2

    def test_an_unreachable_postgres_fails_with_one_line(self) -> None:
        run = cli("threads", "list", "--postgres", "postgresql://postgres:s3cret@127.0.0.1:1/x")
        assert_one_line_error(run, "cannot connect to PostgreSQL", "127.0.0.1")
        assert "s3cret" not in run.err
        assert run.code == 2

    @pytest.mark.postgres
    def test_a_missing_postgres_database_fails_with_one_line(self, postgres_uri: str) -> None:
        base, _, _ = postgres_uri.rpartition("/")
        run = cli("threads", "list", "--postgres", f"{base}/stm_no_such_database")
        assert_one_line_error(run, "cannot connect", "stm_no_such_database")

    @pytest.mark.parametrize("action", sorted(ACTION_FLAGS))
    def test_an_unknown_thread_is_one_line(self, written: Db, action: str) -> None:
        run = cli(
            "threads",
            action,
            "t-nobody",
            *written.args(),
            *ACTION_FLAGS[action],
        )
        assert_one_line_error(run, "'t-nobody'", "not found")
        assert run.code == 1
        assert run.out == ""

    @pytest.mark.parametrize("action", sorted(ACTION_FLAGS))
    def test_a_wrong_tenant_is_one_line(self, written: Db, action: str) -> None:
        """Another owner's thread, and a thread written without an owner, are refused."""
        for thread in ("t-acme", MAIN):
            run = cli(
                "threads",
                action,
                thread,
                *written.args(),
                "--tenant",
                "globex",
                *ACTION_FLAGS[action],
            )
            assert_one_line_error(run, "ThreadScopeError", repr(thread))
        with written.saver() as saver:
            assert saver.get_thread_state("t-acme") is not None
            assert saver.get_thread_state(MAIN) is not None


# -- a real process -------------------------------------------------------------------------
def _python(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "langgraph_stm", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
        check=False,
    )


def test_python_m_langgraph_stm_threads_list(sqlite_path: Path) -> None:
    """The installed entry point lists the threads as JSON, and fails in one line."""
    db = Db("sqlite", str(sqlite_path))
    with db.saver() as saver:
        full_graph(saver).invoke({"messages": list(FIRST)}, cfg(MAIN))
        state = saver.get_thread_state(MAIN)
    assert state is not None
    done = _python("threads", "list", "--db", str(sqlite_path), "--json")
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)
    assert row["thread_id"] == MAIN
    assert row["message_count"] == state.message_count
    failed = _python("threads", "show", MAIN, "--db", str(sqlite_path.with_name("missing.db")))
    assert failed.returncode == 2
    assert failed.stderr.count("\n") == 1
    assert "Traceback" not in failed.stderr


def test_expired_threads_of_a_saver_with_a_past_clock(sqlite_path: Path) -> None:
    """STMSaver.expired_threads lists what sweep would delete, and deletes nothing."""
    db = Db("sqlite", str(sqlite_path))
    with db.saver(clock=lambda: PAST) as saver:
        small_graph(saver).invoke({"messages": [("user", "hi")]}, cfg(OLD))
    with db.saver(ttl=timedelta(days=1)) as saver:
        assert saver.expired_threads() == [OLD]
        assert saver.expired_threads() == [OLD]
        assert saver.sweep() == 1
        assert saver.expired_threads() == []


async def test_async_twins_of_the_read_only_gc_methods(sqlite_path: Path) -> None:
    """aexpired_threads and avacuum(dry_run=True) read what sweep and vacuum would remove."""
    async with STMSaver.from_async_sqlite(
        sqlite_path, clock=lambda: PAST, tenant_key="tenant_id"
    ) as saver:
        await saver.asetup()
        await full_graph(saver).ainvoke({"messages": list(FIRST)}, cfg(OLD, "acme"))
    Db("sqlite", str(sqlite_path)).drop_old_checkpoints(OLD)
    async with STMSaver.from_async_sqlite(
        sqlite_path, ttl=timedelta(days=1), tenant_key="tenant_id"
    ) as saver:
        assert await saver.aexpired_threads() == [OLD]
        assert await saver.aexpired_threads(owner="acme") == [OLD]
        assert await saver.aexpired_threads(owner="globex") == []
        would = await saver.avacuum(dry_run=True)
        assert would > 0
        assert await saver.avacuum(dry_run=True) == would
        assert await saver.avacuum() == would
        assert await saver.avacuum(dry_run=True) == 0
        assert await saver.aexpired_threads() == [OLD]
