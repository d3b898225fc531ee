"""``langgraph-stm demo``: every number of its report, checked against the files it left.

The demo runs once (16 turns) for the module; each test reads the SQLite file (through
a fresh ``STMSaver`` and the agent graph's checkpoint history), the store rows of the
offloaded output, the ledger file and the plain ``add_messages`` file on its own, and
compares with the JSON report.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore

from langgraph_stm import STMSaver, TokenCounter, build_context
from langgraph_stm.cli import main
from langgraph_stm.cli._agent import (
    CONTEXT_TOKENS,
    SYSTEM_PROMPT,
    Ledger,
    build_agent_graph,
    ledger_path,
)
from langgraph_stm.cli._model import ScriptedChatModel
from langgraph_stm.tools import offload_namespace

TURNS = 16
CONFIG: Any = {"configurable": {"thread_id": "demo"}}


def run(*argv: str, inp: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["demo", *argv], out=out, err=err, inp=io.StringIO(inp))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    db = tmp_path_factory.mktemp("demo") / "demo.sqlite"
    code, out, err = run("--db", str(db), "--turns", str(TURNS), "--json")
    assert code == 0, err
    return db, json.loads(out)


@pytest.fixture(scope="module")
def history(demo: tuple[Path, dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The thread as the database holds it: snapshots oldest first, store, thread state."""
    db, _ = demo
    with (
        SqliteStore.from_conn_string(str(db)) as store,
        STMSaver.from_sqlite(db, store=store) as saver,
    ):
        graph = build_agent_graph(ScriptedChatModel(), saver, Ledger(), store=store)
        snapshots = list(reversed(list(graph.get_state_history(CONFIG))))
        offloaded = {item.key: item.value for item in store.search(offload_namespace("demo"))}
        yield {
            "snapshots": snapshots,
            "offloaded": offloaded,
            "thread": saver.get_thread_state("demo"),
            "final": graph.get_state(CONFIG).values,
        }


def model_inputs(snapshots: list[Any]) -> list[dict[str, Any]]:
    """The state each model call started from: the snapshots about to run ``agent``."""
    return [s.values for s in snapshots if s.next == ("agent",)]


def full_histories(snapshots: list[Any], offloaded: dict[str, Any]) -> list[list[BaseMessage]]:
    """At each model call, every message the thread had so far (removed ones included,
    offloaded outputs with their full text): what plain add_messages would have kept."""
    seen: dict[str | None, BaseMessage] = {}
    histories = []
    for snapshot in snapshots:
        for message in snapshot.values.get("messages", []):
            if isinstance(message, ToolMessage) and message.id in offloaded:
                message = message.model_copy(update={"content": offloaded[message.id]["content"]})
            seen[message.id] = message
        if snapshot.next == ("agent",):
            histories.append([SystemMessage(SYSTEM_PROMPT), *seen.values()])
    return histories


class TestDemoReport:
    """The JSON report's numbers are those of the database the demo left."""

    def test_model_calls_and_tokens_the_model_saw_are_the_saved_contexts(
        self, demo: tuple[Path, dict[str, Any]], history: dict[str, Any]
    ) -> None:
        """Rebuilding each call's context from its saved state gives the reported tokens."""
        _, report = demo
        counter = TokenCounter()
        contexts = [
            build_context(
                values,
                max_tokens=CONTEXT_TOKENS,
                system_prompt=SYSTEM_PROMPT,
                token_counter=counter,
                on_overflow="keep_mandatory",
            )
            for values in model_inputs(history["snapshots"])
        ]
        assert len(contexts) == report["model_calls"]
        assert sum(c.tokens for c in contexts) == report["tokens"]["model_saw"]
        assert contexts[-1].tokens == report["tokens"]["last_call_model_saw"]
        assert (
            sum(bool(c.omitted_message_ids) for c in contexts)
            == report["context_trimmed_calls"]
            > 0
        )
        assert all(c.tokens <= CONTEXT_TOKENS for c in contexts)

    def test_each_reply_reports_the_tokens_of_its_context(self, history: dict[str, Any]) -> None:
        """The model's usage_metadata (saved with its message) is its context's count."""
        counter = TokenCounter()
        snapshots = history["snapshots"]
        for before, after in pairwise(snapshots):
            if before.next != ("agent",):
                continue
            reply = after.values["messages"][-1]
            context = build_context(
                before.values,
                max_tokens=CONTEXT_TOKENS,
                system_prompt=SYSTEM_PROMPT,
                token_counter=counter,
                on_overflow="keep_mandatory",
            )
            assert reply.usage_metadata["input_tokens"] == context.tokens

    def test_full_history_tokens_are_every_message_so_far(
        self, demo: tuple[Path, dict[str, Any]], history: dict[str, Any]
    ) -> None:
        """The full-history figure counts, per call, every message the thread ever had."""
        _, report = demo
        counter = TokenCounter()
        full = full_histories(history["snapshots"], history["offloaded"])
        assert len(full) == report["model_calls"]
        assert sum(counter(h) for h in full) == report["tokens"]["full_history"]
        assert counter(full[-1]) == report["tokens"]["last_call_full_history"]
        assert report["tokens"]["model_saw"] < report["tokens"]["full_history"]

    def test_summaries_are_the_saved_summary_version(
        self, demo: tuple[Path, dict[str, Any]], history: dict[str, Any]
    ) -> None:
        """Several summaries were made, one version each, and the report counts them."""
        _, report = demo
        summary = history["thread"].summary
        assert summary["version"] == report["summaries"] >= 2
        assert summary["coverage"]["message_count"] == report["summary_covers_messages"]
        versions = {
            s.values["summary"]["version"] for s in history["snapshots"] if s.values.get("summary")
        }
        assert versions == set(range(1, report["summaries"] + 1))

    def test_structured_state_is_the_thread_projection(
        self, demo: tuple[Path, dict[str, Any]], history: dict[str, Any]
    ) -> None:
        """Goal, plan, constraints and artifacts in the report are the saver's projection."""
        _, report = demo
        thread = history["thread"]
        assert report["goal"] == thread.goal
        assert report["plan"] == [{"id": s["id"], "status": s["status"]} for s in thread.plan]
        assert all(step["status"] == "done" for step in report["plan"])
        assert report["constraints"] == [c["text"] for c in thread.constraints]
        assert "never email external domains" in report["constraints"]
        assert thread.last_error is None
        assert report["errors_recovered"]
        (artifact,) = thread.artifacts
        assert report["artifacts"] == [
            {"id": artifact["id"], "uri": artifact["uri"], "tokens": artifact["tokens"]}
        ]
        assert len(history["offloaded"]) == 1
        assert report["messages"]["in_state"] == len(history["final"]["messages"])

    def test_ledger_has_every_run_and_the_approved_call_once(
        self, demo: tuple[Path, dict[str, Any]], history: dict[str, Any]
    ) -> None:
        """The ledger file's lines are the reported runs; the approved refund ran once."""
        db, report = demo
        lines = Path(report["ledger"]["path"]).read_text().splitlines()
        assert Path(report["ledger"]["path"]) == ledger_path(db)
        entries = [json.loads(line) for line in lines]
        assert len(entries) == report["ledger"]["entries"]
        approved = report["approval"]["tool_call_id"]
        assert [e["tool"] for e in entries if e["call_id"] == approved] == ["issue_refund"]
        assert report["ledger"]["approved_call_runs"] == 1
        assert report["ledger"]["plain_run_same_calls"] is True
        results = [
            m for m in history["final"]["messages"] if getattr(m, "tool_call_id", None) == approved
        ]
        assert [r.content for r in results] == ["refunded 180.00 EUR on order 1042"]

    def test_approval_paused_and_resumed_from_a_new_saver(
        self, demo: tuple[Path, dict[str, Any]], history: dict[str, Any]
    ) -> None:
        """The history holds the paused refund, and the run went on after it."""
        _, report = demo
        assert report["reloaded_identical"] is True
        assert report["approval"]["decision"] == "approve"
        paused = [s for s in history["snapshots"] if s.interrupts]
        assert [s.interrupts[0].value["name"] for s in paused] == ["issue_refund"]
        assert (
            paused[0].values["messages"][-1].tool_calls[0]["id"]
            == (report["approval"]["tool_call_id"])
        )

    def test_db_sizes_are_the_files_and_plain_kept_every_message(
        self, demo: tuple[Path, dict[str, Any]], history: dict[str, Any]
    ) -> None:
        """Both sizes are the files' sizes; the plain file's thread holds the full history."""
        db, report = demo
        storage = report["storage"]
        plain = Path(storage["plain_path"])
        assert os.path.getsize(db) == storage["db_bytes"]
        assert os.path.getsize(plain) == storage["plain_bytes"] > storage["db_bytes"]
        full = full_histories(history["snapshots"], history["offloaded"])[-1][1:]
        with SqliteSaver.from_conn_string(str(plain)) as saver:
            values = saver.get_tuple(CONFIG).checkpoint["channel_values"]
        assert [m.id for m in values["messages"]][: len(full)] == [m.id for m in full]
        assert len(values["messages"]) == report["messages"]["plain_state"]

    def test_inspect_command_reads_the_demo_file(
        self, demo: tuple[Path, dict[str, Any]], history: dict[str, Any]
    ) -> None:
        """The command the report ends with shows the demo's thread from its file."""
        db, report = demo
        assert report["inspect"] == f"langgraph-stm threads show demo --db {db}"
        out, err = io.StringIO(), io.StringIO()
        argv = [*report["inspect"].split()[1:], "--json"]
        assert main(argv, out=out, err=err) == 0, err.getvalue()
        shown = json.loads(out.getvalue())
        assert shown["goal"] == report["goal"]
        assert shown["message_count"] == report["messages"]["in_state"]
        assert shown["summary"]["version"] == report["summaries"]
        assert shown["pending_approvals"] == []


class TestDemoCommand:
    """Options, prompts and the files the command accepts."""

    def test_text_report_shows_the_figures(self, tmp_path: Path) -> None:
        """Without --json the report is a table plus the reload check and the command."""
        code, out, _ = run("--db", str(tmp_path / "d.sqlite"), "--turns", "7")
        assert code == 0
        assert "reloaded from disk: identical" in out
        assert "never email external domains" in out
        assert f"langgraph-stm threads show demo --db {tmp_path / 'd.sqlite'}" in out

    def test_interactive_edit_runs_the_edited_refund_once(self, tmp_path: Path) -> None:
        """--interactive asks at the approval; an edited amount is what the ledger shows."""
        db = tmp_path / "d.sqlite"
        code, out, err = run("--db", str(db), "--turns", "7", "--interactive", inp="e\n150\n")
        assert code == 0, err
        assert 'approval needed: issue_refund({"order_id": "1042"' in out
        refunds = [e for e in Ledger(ledger_path(db)).entries() if e["tool"] == "issue_refund"]
        assert [e["args"]["amount"] for e in refunds] == [150.0]

    def test_interactive_reject_runs_no_refund(self, tmp_path: Path) -> None:
        """A rejected refund never runs, and the plan step is blocked."""
        db = tmp_path / "d.sqlite"
        code, out, err = run(
            "--db", str(db), "--turns", "7", "--interactive", "--json", inp="r\ntoo much\n"
        )
        assert code == 0, err
        assert "approval needed: issue_refund" in err
        report = json.loads(out)
        assert report["approval"]["decision"] == "reject"
        assert report["ledger"]["approved_call_runs"] == 0
        assert {"id": "refund", "status": "blocked"} in report["plan"]

    def test_closed_input_at_the_prompt_is_one_error_line(self, tmp_path: Path) -> None:
        """--interactive with no answer stops with one line and leaves the thread paused."""
        db = tmp_path / "d.sqlite"
        code, _, err = run("--db", str(db), "--turns", "7", "--interactive")
        assert code == 1
        assert err.count("\n") == 1
        assert "stays paused" in err
        with STMSaver.from_sqlite(db) as saver:
            graph = build_agent_graph(ScriptedChatModel(), saver, Ledger())
            assert graph.get_state(CONFIG).next == ("tools",)

    def test_a_second_run_replaces_the_first(self, tmp_path: Path) -> None:
        """Running the demo again on its own file starts over: the ledger is not doubled."""
        db = tmp_path / "d.sqlite"
        first = json.loads(run("--db", str(db), "--turns", "7", "--json")[1])
        second = json.loads(run("--db", str(db), "--turns", "7", "--json")[1])
        assert second["ledger"]["entries"] == first["ledger"]["entries"]
        assert len(ledger_path(db).read_text().splitlines()) == first["ledger"]["entries"]

    def test_a_database_with_other_threads_is_refused(self, tmp_path: Path) -> None:
        """The demo never replaces a file holding threads that are not its own."""
        db = tmp_path / "app.sqlite"
        with SqliteSaver.from_conn_string(str(db)) as saver:
            saver.setup()
            graph = build_agent_graph(ScriptedChatModel(), saver, Ledger())
            graph.invoke({"messages": [("user", "hello")]}, {"configurable": {"thread_id": "t1"}})
        before = db.read_bytes()
        code, _, err = run("--db", str(db), "--turns", "7")
        assert code == 1
        assert err.count("\n") == 1
        assert "not the demo's" in err
        assert db.read_bytes() == before

    def test_a_file_that_is_not_sqlite_is_refused(self, tmp_path: Path) -> None:
        """A non-SQLite file at --db is left alone."""
        db = tmp_path / "notes.txt"
        db.write_text("my notes, not a database\n" * 100)
        code, _, err = run("--db", str(db), "--turns", "7")
        assert code == 1
        assert "not a SQLite file" in err
        assert db.read_text().startswith("my notes")
        with pytest.raises(sqlite3.DatabaseError):
            sqlite3.connect(db).execute("SELECT 1 FROM sqlite_master").fetchall()

    def test_too_few_turns_is_a_usage_error(self, tmp_path: Path) -> None:
        """--turns below the fixed script is refused before anything is written."""
        code, _, err = run("--db", str(tmp_path / "d.sqlite"), "--turns", "3")
        assert code == 2
        assert "at least 7" in err
        assert not (tmp_path / "d.sqlite").exists()
