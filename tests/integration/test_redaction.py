"""Redaction before write end to end: a compiled StateGraph over STMState whose nodes
plant a secret of every detector kind in every place redaction covers (a user message,
AI message content blocks, tool-call args, additional_kwargs, a tool result and its
artifact, goal, plan, constraints, artifacts, last_error, summary, an ``interrupt()``
value and the ``Command(resume=...)`` value), run to the interrupt and resumed.

- SQLite file (WAL mode): no planted secret in the raw bytes of the database and its WAL,
  before and after ``PRAGMA wal_checkpoint(TRUNCATE)``, nor in any zlib-compressed blob
  of any table; the markers are there. The same run without redaction leaves every
  secret findable, which shows the scan sees them.
- PostgreSQL: no secret in any column of any table cast to text, nor in any bytea value
  (raw and decompressed); markers present.
- InMemorySaver: what is read back holds markers and no secret.

Everywhere: the objects the nodes returned are unchanged, the live run saw the secret
and the resumed run sees the markers.
"""

from __future__ import annotations

import asyncio
import copy
import sqlite3
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_stm import STMSaver, STMState

_Saver = STMSaver


# -- planted secrets (assembled at run time: no literal a secret scanner flags) ------------
ALNUM = "Qw3rTy7uIo9pAs1dFg5hJk2lZx4cVb6nM8"


def _fake(prefix: str, length: int) -> str:
    return prefix + (ALNUM * (length // len(ALNUM) + 1))[:length]


SECRETS: dict[str, str] = {
    "openai": _fake("sk-" + "proj-", 56),
    "aws": "AKIA" + "Z7QW3ERT5YUI8OPA",
    "github": _fake("ghp" + "_", 36),
    "github_pat": _fake("github" + "_pat_", 50),
    "slack": "xox" + "p-" + "998877665544-" + _fake("", 26),
    "jwt": "eyJ"
    + "hbGciOiJSUzI1NiJ9.eyJ"
    + "zdWIiOiJyZWRhY3Rpb24tdGVzdCJ9.kX9fPq2Lm7Ns4Vb8Wc1Rt6Yh3Jg5Df0S",
    "bearer": "Zb8Lk2Pq9Wm4Xn7Rv1Tc6",
    "password": "Hunter2-Plaintext",
    "passwd": "Walrus!Tusk99",
    "pem_body": "MIIEowIBAAKCAQEAredactionTestBodyLineZZ09qwertyuiopasdfghjkl",
    "visa": "4539 1488 0343 6467",
    "visa_bare": "4916338506082832",
    "amex": "3714-496353-98431",
    "resume_secret": "Falcon-Resume-77",
}
PEM = (
    "-----BEGIN OPENSSH " + "PRIVATE KEY-----\n"
    f"{SECRETS['pem_body']}\n"
    "b3BlbnNzaC1rZXktdjEAAAAA\n"
    "-----END OPENSSH " + "PRIVATE KEY-----"
)
KINDS = ("api_key", "jwt", "bearer_token", "password", "private_key", "card_number")


def needles() -> list[bytes]:
    """What must never be stored: every planted secret."""
    return [s.encode() for s in SECRETS.values()]


# -- the graph -----------------------------------------------------------------------------
@dataclass
class Seen:
    returned: list[tuple[Any, Any]] = field(default_factory=list)
    """(object a node returned, a deep copy taken then)."""
    approve_args: list[str] = field(default_factory=list)
    """The tool-call args the approve node saw, run by run."""
    tool_args: list[str] = field(default_factory=list)

    def keep(self, update: dict[str, Any]) -> dict[str, Any]:
        self.returned.append((update, copy.deepcopy(update)))
        return update


def build_graph(saver: Any, seen: Seen) -> Any:
    """agent (tool call, structured fields) -> approve [interrupt] -> tool -> agent -> END."""

    def agent(state: STMState) -> dict[str, Any]:
        if any(isinstance(m, ToolMessage) for m in state["messages"]):
            return seen.keep({"messages": [AIMessage("all done", id="ai-final")]})
        call = {
            "name": "deploy",
            "args": {
                "auth": {"header": f"Authorization: Bearer {SECRETS['bearer']}"},
                "db": [f"passwd: {SECRETS['passwd']}"],
                "card": SECRETS["visa_bare"],
            },
            "id": "call-1",
        }
        message = AIMessage(
            content=[
                {"type": "text", "text": f"I will use {SECRETS['openai']} and {SECRETS['jwt']}"},
                {"type": "text", "text": f"key:\n{PEM}"},
            ],
            id="ai-1",
            tool_calls=[call],
            additional_kwargs={
                "function_call": {
                    "name": "deploy",
                    "arguments": f'{{"token": "{SECRETS["github"]}"}}',
                }
            },
        )
        return seen.keep(
            {
                "messages": [message],
                "goal": f"deploy with {SECRETS['aws']}",
                "plan": [
                    {"id": "s1", "task": f"post to slack {SECRETS['slack']}", "status": "pending"}
                ],
                "constraints": [
                    {
                        "id": "c1",
                        "text": f"use password={SECRETS['password']} only",
                        "source_message_id": None,
                        "status": "confirmed",
                    }
                ],
                "artifacts": [
                    {
                        "id": "a1",
                        "kind": "file",
                        "summary": f"token {SECRETS['github_pat']}",
                        "uri": None,
                        "source_message_id": None,
                        "tokens": 10,
                    }
                ],
                "last_error": {
                    "message": f"card {SECRETS['amex']} declined",
                    "recovery": None,
                    "step_id": None,
                    "at": None,
                },
                "summary": {"text": f"user pasted {SECRETS['openai']}", "version": 1},
            }
        )

    def approve(state: STMState) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        seen.approve_args.append(repr(last.tool_calls[0]["args"]))
        answer = interrupt({"ask": f"deploy with Bearer {SECRETS['bearer']}?"})
        return {"last_error": None, "goal": f"approved: {answer['note']}"}

    def tool(state: STMState) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        seen.tool_args.append(repr(last.tool_calls[0]["args"]))
        result = ToolMessage(
            f"deployed; new key {SECRETS['openai']}",
            tool_call_id="call-1",
            id="tm-1",
            artifact={"log": [f"password={SECRETS['password']}", SECRETS["visa"]]},
        )
        return seen.keep({"messages": [result]})

    def route(state: STMState) -> str:
        last = state["messages"][-1]
        return "approve" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(STMState)
    graph.add_node("agent", agent)
    graph.add_node("approve", approve)
    graph.add_node("tool", tool)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["approve", END])
    graph.add_edge("approve", "tool")
    graph.add_edge("tool", "agent")
    return graph.compile(checkpointer=saver)


def run_graph(saver: Any, thread: str = "t-redact") -> tuple[Any, Seen, RunnableConfig]:
    """Run to the interrupt, resume with a secret in the resume value, finish."""
    seen = Seen()
    graph = build_graph(saver, seen)
    config: RunnableConfig = {"configurable": {"thread_id": thread}}
    user = HumanMessage(f"my key is {SECRETS['openai']}", id="h-1")
    user_copy = user.model_copy(deep=True)
    first = graph.invoke({"messages": [user]}, config)
    assert "__interrupt__" in first
    resume = {"approved": True, "note": f"password={SECRETS['resume_secret']}"}
    graph.invoke(Command(resume=resume), config)
    assert user == user_copy
    assert resume["note"] == f"password={SECRETS['resume_secret']}"
    return graph, seen, config


def assert_run_redacted(graph: Any, seen: Seen, config: RunnableConfig) -> None:
    """Live objects unchanged; live run saw the secret, the resumed run the markers;
    the state read back holds markers only."""
    for returned, snapshot in seen.returned:
        assert returned == snapshot
    # The approve node ran live (first run) with the secret, then again on resume from
    # the stored state, as did the tool node: markers.
    assert SECRETS["passwd"] in seen.approve_args[0]
    assert SECRETS["passwd"] not in seen.approve_args[-1]
    assert "[REDACTED:password]" in seen.approve_args[-1]
    assert all("[REDACTED:bearer_token]" in args for args in seen.tool_args)
    assert all(SECRETS["visa_bare"] not in args for args in seen.tool_args)
    state = graph.get_state(config)
    text = repr(state.values)
    assert_clean(text.encode())
    for kind in KINDS:
        assert f"[REDACTED:{kind}]" in text, kind
    assert state.values["goal"] == "approved: password=[REDACTED:password]"
    history = repr([s.values for s in graph.get_state_history(config)])
    assert_clean(history.encode())


def assert_clean(data: bytes, where: str = "") -> None:
    for needle in needles():
        assert needle not in data, f"{needle!r} stored {where}"


def inflated(value: bytes) -> bytes:
    """``value`` and, when it is zlib data (our compressed bodies), its inflated bytes."""
    try:
        return value + zlib.decompress(value)
    except zlib.error:
        return value


# -- InMemorySaver ----------------------------------------------------------------------------
def test_memory() -> None:
    saver = _Saver(InMemorySaver(), redact=True)
    graph, seen, config = run_graph(saver)
    assert_run_redacted(graph, seen, config)
    stored = repr([(t.checkpoint, t.metadata, t.pending_writes) for t in saver.list(config)])
    assert_clean(stored.encode())
    assert "[REDACTED:api_key]" in stored
    assert saver.redaction_count("t-redact") >= len(KINDS)
    row = saver.get_thread_state("t-redact")
    assert row is not None
    assert row.goal == "approved: password=[REDACTED:password]"
    assert_clean(repr(row).encode())


# -- SQLite file --------------------------------------------------------------------------------
@contextmanager
def sqlite_saver(path: Path, *, redact: bool) -> Iterator[_Saver]:
    with _Saver.from_sqlite(path, redact=redact) as saver:
        assert isinstance(saver, _Saver)
        saver.inner.conn.execute("PRAGMA journal_mode=WAL")  # type: ignore[attr-defined]
        saver.setup()
        yield saver


def sqlite_storage(path: Path) -> bytes:
    """Raw bytes of the database and its WAL, plus every blob inflated."""
    data = path.read_bytes()
    wal = Path(f"{path}-wal")
    if wal.exists():
        data += wal.read_bytes()
    with sqlite3.connect(path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, bytes):
                        data += inflated(value)
                    elif isinstance(value, str):
                        data += value.encode()
    return data


def wal_checkpoint(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def test_sqlite_file(sqlite_path: Path) -> None:
    with sqlite_saver(sqlite_path, redact=True) as saver:
        graph, seen, config = run_graph(saver)
        assert_run_redacted(graph, seen, config)
        assert saver.redaction_count("t-redact") >= len(KINDS)
        before = sqlite_storage(sqlite_path)  # the WAL still holds the pages
        assert Path(f"{sqlite_path}-wal").exists()
        assert_clean(before, "(before the WAL checkpoint)")
    wal_checkpoint(sqlite_path)
    assert Path(f"{sqlite_path}-wal").stat().st_size == 0
    raw = sqlite_path.read_bytes()
    assert_clean(raw, "in the database file")
    assert_clean(sqlite_storage(sqlite_path), "in a table")
    for kind in KINDS:
        assert f"[REDACTED:{kind}]".encode() in sqlite_storage(sqlite_path), kind


def test_sqlite_scan_finds_unredacted_secrets(tmp_path: Path) -> None:
    """Control: without redaction the same scan finds every planted secret."""
    path = tmp_path / "plain.sqlite"
    with sqlite_saver(path, redact=False) as saver:
        run_graph(saver)
    wal_checkpoint(path)
    storage = sqlite_storage(path)
    missing = [n for n in needles() if n not in storage]
    assert not missing


def test_sqlite_resume_in_new_saver(sqlite_path: Path) -> None:
    """A run resumed by another saver on the file sees the stored, redacted state."""
    seen = Seen()
    config: RunnableConfig = {"configurable": {"thread_id": "t-new"}}
    with sqlite_saver(sqlite_path, redact=True) as saver:
        build_graph(saver, seen).invoke({"messages": [("user", "hi")]}, config)
    with sqlite_saver(sqlite_path, redact=True) as saver:
        graph = build_graph(saver, seen)
        graph.invoke(Command(resume={"note": "ok"}), config)
        last = graph.get_state(config).values["messages"][1]
        assert isinstance(last, BaseMessage)
        assert "[REDACTED:api_key]" in repr(last.content)
    assert SECRETS["passwd"] in seen.approve_args[0]
    assert "[REDACTED:password]" in seen.approve_args[1]


async def test_async_sqlite(sqlite_path: Path) -> None:
    async with _Saver.from_async_sqlite(sqlite_path, redact=True) as saver:
        assert isinstance(saver, _Saver)
        await saver.asetup()
        seen = Seen()
        graph = build_graph(saver, seen)
        config: RunnableConfig = {"configurable": {"thread_id": "t-async"}}
        await graph.ainvoke({"messages": [("user", f"key {SECRETS['aws']}")]}, config)
        await graph.ainvoke(Command(resume={"note": f"secret={SECRETS['resume_secret']}"}), config)
        assert await saver.aredaction_count("t-async") >= len(KINDS)
        state = await graph.aget_state(config)
        assert_clean(repr(state.values).encode())
        # Sync methods over the async saver (from another thread) redact once, too.
        other: RunnableConfig = {"configurable": {"thread_id": "t-sync-over-async"}}
        await asyncio.to_thread(graph.invoke, {"messages": [("user", SECRETS["slack"])]}, other)
        await asyncio.to_thread(graph.invoke, Command(resume={"note": "ok"}), other)
        count = await asyncio.to_thread(saver.redaction_count, "t-sync-over-async")
        assert count == await saver.aredaction_count("t-sync-over-async")
        assert count >= len(KINDS)
    wal_checkpoint(sqlite_path)
    assert_clean(sqlite_storage(sqlite_path))


# -- PostgreSQL -------------------------------------------------------------------------------
def postgres_storage(uri: str) -> tuple[str, bytes]:
    """Every row of every table cast to text; and every bytea value, raw and inflated."""
    import psycopg

    texts: list[str] = []
    blobs: list[bytes] = []
    with psycopg.connect(uri) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
            )
        ]
        assert "checkpoints" in tables
        assert "stm_bodies" in tables
        for table in tables:
            for (text,) in conn.execute(f'SELECT t::text FROM "{table}" t'):
                texts.append(text)
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, bytes | memoryview):
                        blobs.append(inflated(bytes(value)))
                    elif value is not None:
                        texts.append(str(value))
    return "\n".join(texts), b"".join(blobs)


@pytest.mark.postgres
def test_postgres(postgres_uri: str) -> None:
    with _Saver.from_postgres(postgres_uri, redact=True) as saver:
        assert isinstance(saver, _Saver)
        saver.setup()
        graph, seen, config = run_graph(saver)
        assert_run_redacted(graph, seen, config)
        assert saver.redaction_count("t-redact") >= len(KINDS)
    text, blobs = postgres_storage(postgres_uri)
    assert_clean(text.encode(), "in a column cast to text")
    assert_clean(blobs, "in a bytea value")
    everything = text.encode() + blobs
    for kind in KINDS:
        assert f"[REDACTED:{kind}]".encode() in everything, kind


@pytest.mark.postgres
def test_postgres_scan_finds_unredacted_secrets(postgres_uri: str) -> None:
    with _Saver.from_postgres(postgres_uri) as saver:
        saver.setup()
        run_graph(saver)
    text, blobs = postgres_storage(postgres_uri)
    everything = text.encode() + blobs
    assert not [n for n in needles() if n not in everything]
