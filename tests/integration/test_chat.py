"""``langgraph-stm chat``: the REPL driven through stdin, on a real SQLite file.

Each test feeds lines to ``main(["chat", ...], inp=StringIO(...))`` (once through a
real subprocess) and checks what it printed against the database it wrote.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from pydantic import Field

from langgraph_stm import STMSaver, STMState, TokenCounter
from langgraph_stm.cli import main
from langgraph_stm.cli._agent import (
    Ledger,
    build_agent_graph,
    ledger_path,
    model_input,
)
from langgraph_stm.cli._chat import StagedSaver
from langgraph_stm.cli._model import ScriptedChatModel

REPO = Path(__file__).resolve().parents[2]


def chat(db: Path, *lines: str, model: str | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    argv = ["chat", "--db", str(db)] + ([] if model is None else ["--model", model])
    code = main(argv, out=out, err=err, inp=io.StringIO("".join(f"{line}\n" for line in lines)))
    return code, out.getvalue(), err.getvalue()


def snapshot(db: Path, thread: str = "chat") -> tuple[list[Any], list[Any]]:
    """The thread's checkpoint ids and its messages (id, content), from a fresh saver."""
    config: Any = {"configurable": {"thread_id": thread}}
    with STMSaver.from_sqlite(db) as saver:
        saver.setup()
        checkpoints = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config)]
        latest = saver.get_tuple(config)
        messages = [] if latest is None else latest.checkpoint["channel_values"]["messages"]
        return checkpoints, [(m.id, m.content) for m in messages]


class FlakyModel(ScriptedChatModel):
    """The scripted model, except that the model calls numbered in ``fail_on`` raise."""

    fail_on: frozenset[int] = frozenset()
    calls: list[int] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(len(self.calls) + 1)
        if len(self.calls) in self.fail_on:
            raise RuntimeError("model unavailable (HTTP 503)")
        return super()._generate(messages, stop, run_manager, **kwargs)


def use_model(monkeypatch: pytest.MonkeyPatch, model: Any) -> list[str]:
    """Make ``init_chat_model`` return ``model``; return the specs it was asked for."""
    import langchain.chat_models

    asked: list[str] = []

    def init_chat_model(spec: str, **_: Any) -> Any:
        asked.append(spec)
        return model

    monkeypatch.setattr(langchain.chat_models, "init_chat_model", init_chat_model)
    return asked


class TestChatCommands:
    """The slash commands, read from stdin."""

    def test_a_turn_then_memory_shows_goal_plan_and_constraints(self, sqlite_path: Path) -> None:
        """/memory prints the thread's structured state as the saver stores it."""
        code, out, _ = chat(
            sqlite_path,
            "Goal: refund the damaged order 1042.",
            "Never email external domains.",
            "/memory",
            "/quit",
        )
        assert code == 0
        assert "goal: refund the damaged order 1042." in out
        assert "  [pending] refund: refund the damaged shipment" in out
        assert "  [confirmed] Never email external domains" in out
        with STMSaver.from_sqlite(sqlite_path) as saver:
            state = saver.get_thread_state("chat")
        assert state is not None
        assert f"thread 'chat': {state.message_count} messages" in out
        assert [c["text"] for c in state.constraints] == ["Never email external domains"]

    def test_context_prints_exactly_the_model_input_and_its_tokens(self, sqlite_path: Path) -> None:
        """/context lists the messages build_context gives, with their exact count."""
        code, out, _ = chat(
            sqlite_path, "Look up orders 1042 and 1043.", "Check stock for SKU-1.", "/context"
        )
        assert code == 0
        context_part = out[out.rindex("chat> --- ") :]
        with STMSaver.from_sqlite(sqlite_path) as saver:
            graph = build_agent_graph(ScriptedChatModel(), saver, Ledger())
            values = graph.get_state({"configurable": {"thread_id": "chat"}}).values
        expected = model_input(values, TokenCounter())
        shown = re.findall(r"^(?:chat> )?--- \w+ (\S+)$", context_part, flags=re.M)
        assert shown == [m.id for m in expected.messages]
        assert f"=== {expected.tokens} tokens (budget 1600)" in context_part

    def test_threads_switch_and_reset(self, sqlite_path: Path) -> None:
        """/thread switches, /threads lists, /reset deletes only the current thread."""
        code, out, _ = chat(
            sqlite_path,
            "/thread alpha",
            "Check stock for SKU-1.",
            "/thread beta",
            "hello",
            "/threads",
            "/reset",
            "/threads",
            "/quit",
        )
        assert code == 0
        listing = out.split("beta> ")
        assert re.search(r"^\* beta  2 messages", listing[2], flags=re.M)
        assert re.search(r"^  alpha  \d+ messages", listing[2], flags=re.M)
        assert "deleted thread 'beta'" in out
        assert "beta" not in listing[-2].replace("beta> ", "")
        with STMSaver.from_sqlite(sqlite_path) as saver:
            assert {t.thread_id for t in saver.list_threads()} == {"alpha"}

    def test_unknown_command_and_help(self, sqlite_path: Path) -> None:
        """An unknown command says so and points at /help; /help lists every command."""
        code, out, _ = chat(sqlite_path, "/frobnicate", "/help")
        assert code == 0
        assert "unknown command /frobnicate; /help lists them" in out
        for command in ("/thread ID", "/threads", "/memory", "/context", "/reset", "/quit"):
            assert command in out

    def test_end_of_input_quits(self, sqlite_path: Path) -> None:
        """Without /quit, the end of input ends the session normally."""
        code, out, _ = chat(sqlite_path, "Check stock for SKU-3.")
        assert code == 0
        assert "SKU-3: " in out


class TestApprovalAtThePrompt:
    """Refunds and emails wait for the user's answer."""

    def test_approve_runs_the_refund_once(self, sqlite_path: Path) -> None:
        """An approved refund runs exactly once."""
        code, out, _ = chat(sqlite_path, "Refund 50 EUR on order 1042.", "a", "/quit")
        assert code == 0
        assert 'approval needed: issue_refund({"order_id": "1042"' in out
        assert "refunded 50.00 EUR on order 1042" in out
        refunds = [
            e for e in Ledger(ledger_path(sqlite_path)).entries() if e["tool"] == "issue_refund"
        ]
        assert len(refunds) == 1

    def test_reject_runs_nothing_and_says_why(self, sqlite_path: Path) -> None:
        """A rejected refund never runs; its result carries the reviewer's reason."""
        code, _, _ = chat(sqlite_path, "Refund 50 EUR on order 1042.", "r", "too much", "/quit")
        assert code == 0
        assert not Ledger(ledger_path(sqlite_path)).entries()
        _, messages = snapshot(sqlite_path)
        assert any("too much" in str(content) for _, content in messages)

    def test_edit_runs_the_edited_call(self, sqlite_path: Path) -> None:
        """Edited arguments are the ones that run."""
        code, _, _ = chat(
            sqlite_path,
            "Refund 50 EUR on order 1042.",
            "e",
            '{"order_id": "1042", "amount": 20, "currency": "EUR"}',
            "/quit",
        )
        assert code == 0
        (refund,) = Ledger(ledger_path(sqlite_path)).entries()
        assert refund["args"]["amount"] == 20

    def test_a_paused_thread_is_asked_again_in_the_next_session(self, sqlite_path: Path) -> None:
        """Input ending at the prompt leaves the thread paused; the next session asks first."""
        code, out, _ = chat(sqlite_path, "Refund 50 EUR on order 1042.")
        assert code == 0
        assert "thread 'chat' stays paused at the approval" in out
        assert not Ledger(ledger_path(sqlite_path)).entries()
        code, out, _ = chat(sqlite_path, "a", "/quit")
        assert code == 0
        assert out.index("approval needed") < out.index("chat> ")
        assert [e["tool"] for e in Ledger(ledger_path(sqlite_path)).entries()] == ["issue_refund"]


class TestFailedTurns:
    """A turn whose model call raises is not stored."""

    def test_a_model_error_mid_turn_leaves_the_thread_as_it_was(
        self, sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Messages and checkpoints are unchanged after a turn whose second call raised."""
        assert chat(sqlite_path, "Check stock for SKU-1.", "/quit")[0] == 0
        before = snapshot(sqlite_path)
        # the next turn: call 1 asks for a lookup (it runs), call 2 raises
        asked = use_model(monkeypatch, FlakyModel(fail_on=frozenset({2})))
        code, out, _ = chat(sqlite_path, "Look up order 1042.", "/quit", model="fake:flaky")
        assert code == 0
        assert asked == ["fake:flaky"]
        assert (
            "turn not stored: RuntimeError: model unavailable (HTTP 503) "
            "(thread 'chat' is as it was before this message)"
        ) in out
        assert snapshot(sqlite_path) == before
        tools = [e["tool"] for e in Ledger(ledger_path(sqlite_path)).entries()]
        assert tools == ["check_stock", "lookup_order"]  # the tool that ran keeps its effect

    def test_the_session_goes_on_after_a_failed_turn(
        self, sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """After a failed first turn nothing is stored; the next turn is stored normally."""
        use_model(monkeypatch, FlakyModel(fail_on=frozenset({1})))
        code, out, _ = chat(
            sqlite_path, "Check stock for SKU-1.", "Check stock for SKU-2.", model="fake:x"
        )
        assert code == 0
        assert out.count("turn not stored") == 1
        _, messages = snapshot(sqlite_path)
        humans = [content for _, content in messages if content.startswith("Check stock")]
        assert humans == ["Check stock for SKU-2."]

    def test_a_failed_resume_leaves_the_thread_paused(
        self, sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A model error after an approved call leaves the thread at its approval."""
        use_model(monkeypatch, FlakyModel(fail_on=frozenset({2})))
        code, out, _ = chat(sqlite_path, "Refund 50 EUR on order 1042.", "a", model="fake:x")
        assert code == 0
        assert "turn not stored" in out
        with STMSaver.from_sqlite(sqlite_path) as saver:
            graph = build_agent_graph(ScriptedChatModel(), saver, Ledger())
            state = graph.get_state({"configurable": {"thread_id": "chat"}})
        assert state.next == ("tools",)
        assert state.interrupts


class TestModelOption:
    """``--model provider:name`` goes through LangChain's init_chat_model."""

    def test_the_named_model_drives_the_agent(
        self, sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The model init_chat_model returns is the one that answers."""
        asked = use_model(monkeypatch, FlakyModel())
        code, out, _ = chat(sqlite_path, "Check stock for SKU-5.", "/quit", model="acme:m-1")
        assert code == 0
        assert asked == ["acme:m-1"]
        assert "acme:m-1" in out.splitlines()[0]
        assert "SKU-5: " in out

    def test_an_unknown_provider_is_one_error_line(self, sqlite_path: Path) -> None:
        """LangChain's refusal becomes one stderr line naming the model."""
        code, _, err = chat(sqlite_path, "/quit", model="nosuchprovider:model")
        assert code == 1
        assert err.count("\n") == 1
        assert err.startswith("langgraph-stm: cannot load --model nosuchprovider:model:")

    def test_a_model_without_tool_calling_is_one_error_line(
        self, sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A chat model that cannot bind tools is refused before the session starts."""
        use_model(monkeypatch, GenericFakeChatModel(messages=iter([])))
        code, out, err = chat(sqlite_path, "hello", model="fake:plain")
        assert code == 1
        assert err == (
            "langgraph-stm: --model fake:plain does not support tool calling (bind_tools); "
            "pick a model that does\n"
        )
        assert out == ""

    def test_without_the_agents_extra_the_line_names_the_extra(
        self, sqlite_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """No LangChain installed: one line saying which extra to install."""
        monkeypatch.setitem(sys.modules, "langchain", None)
        code, _, err = chat(sqlite_path, "/quit", model="openai:gpt-4o")
        assert code == 1
        assert err == (
            "langgraph-stm: --model openai:gpt-4o needs LangChain: "
            "pip install 'langgraph-stm[agents]'\n"
        )


class TestStagedSaver:
    """The checkpointer that holds a run's writes until commit."""

    def test_discard_leaves_the_target_untouched_and_reads_while_holding_raise(self) -> None:
        """Held writes never reach the target after discard; a read while holding refuses."""
        inner = InMemorySaver()
        staged = StagedSaver(inner)

        def agent(state: STMState) -> dict[str, Any]:
            return {"messages": [AIMessage("hi", id="a1")]}

        graph = StateGraph(STMState).add_node("agent", agent).add_edge(START, "agent")
        app = graph.compile(checkpointer=staged)
        config: Any = {"configurable": {"thread_id": "t"}}
        app.invoke({"messages": [HumanMessage("x", id="h1")]}, config)
        with pytest.raises(RuntimeError, match="commit"):
            staged.get_tuple(config)
        staged.discard()
        assert inner.get_tuple(config) is None
        app.invoke({"messages": [HumanMessage("x", id="h1")]}, config)
        staged.commit()
        assert [m.id for m in app.get_state(config).values["messages"]] == ["h1", "a1"]


def test_chat_runs_as_a_subprocess_reading_stdin(tmp_path: Path) -> None:
    """``python -m langgraph_stm chat`` reads its lines from a real stdin pipe."""
    db = tmp_path / "c.sqlite"
    result = subprocess.run(
        [sys.executable, "-m", "langgraph_stm", "chat", "--db", str(db), "--thread", "t1"],
        input="Look up order 1042.\n/memory\n/quit\n",
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "order 1042: Globex Ltd" in result.stdout
    assert "thread 't1': 4 messages" in result.stdout
    assert snapshot(db, "t1")[1][0][1] == "Look up order 1042."
