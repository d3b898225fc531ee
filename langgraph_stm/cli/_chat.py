"""``langgraph-stm chat``: an interactive session with the agent, on one SQLite file.

The agent is the demo's (:mod:`langgraph_stm.cli._agent`): the offline
:class:`~langgraph_stm.cli._agent.ScriptedChatModel` by default (no key, no network),
or any LangChain chat model that supports tool calling with ``--model provider:name``
(through ``langchain.chat_models.init_chat_model``, the ``agents`` extra; the
provider's package and key are the user's). Threads live in ``--db`` (default
``stm-chat.sqlite``) through :class:`~langgraph_stm.STMSaver`, offloaded outputs in a
``SqliteStore`` in the same file, tool runs in ``<db>-ledger.jsonl``.

Commands: ``/thread ID`` (switch), ``/threads``, ``/memory`` (the structured state and
the running summary), ``/context`` (exactly what the model would see now, with its
token count), ``/reset`` (delete the current thread), ``/help``, ``/quit`` (or end of
input). A refund or an email waits for the user's decision at a prompt.

**A turn is stored only when it succeeded.** LangGraph saves a run's checkpoints as it
goes (the input one before the first node runs, and on an error the failed step), so
each run goes through a :class:`StagedSaver`: it holds the run's writes in memory and
hands them to the real saver, in order, only when the run returned (finished, or paused
at an approval). A model call that raises discards them: the thread's messages and
checkpoints stay as they were, and the REPL says why. Tools that already ran in that
turn keep their effects (the ledger shows them).

Example:
    >>> import io, tempfile, pathlib
    >>> from langgraph_stm.cli import main
    >>> out = io.StringIO()
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     code = main(["chat", "--db", str(pathlib.Path(tmp) / "c.sqlite")], out=out,
    ...                 inp=io.StringIO("Check stock for SKU-7.\\n/quit\\n"))
    >>> code, "SKU-7: 49 units in stock" in out.getvalue()
    (0, True)
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Interrupt

from langgraph_stm._errors import TokenizerError
from langgraph_stm._tokens import (
    TokenCounter,
    TokenCounterLike,
    default_token_counter,
    message_role,
)
from langgraph_stm.checkpoint import STMSaver
from langgraph_stm.cli._agent import (
    CONTEXT_TOKENS,
    Ledger,
    build_agent_graph,
    ledger_path,
    model_input,
)
from langgraph_stm.cli._common import IO, CLIError
from langgraph_stm.cli._model import ScriptedChatModel

__all__ = ["StagedSaver", "register"]

_HELP = """commands:
  /thread ID   switch to thread ID (created by its first message)
  /threads     list the threads of this file
  /memory      the structured state and the running summary of this thread
  /context     exactly what the model would see now, with its token count
  /reset       delete this thread (checkpoints, our rows, offloaded outputs)
  /help        this list
  /quit        leave (end of input does the same)"""


class StagedSaver(BaseCheckpointSaver[Any]):
    """A checkpointer that holds one run's writes until :meth:`commit`.

    Reads go to ``target``; ``put`` and ``put_writes`` are recorded and replayed on
    ``target``, in order, by :meth:`commit`; :meth:`discard` drops them. Reads while
    writes are held raise, since they would not see them (a graph run reads its
    checkpoint once, before it writes). Sync methods only.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from langgraph.graph import START, StateGraph
        >>> from langgraph_stm import STMState
        >>> inner = InMemorySaver()
        >>> staged = StagedSaver(inner)
        >>> graph = (StateGraph(STMState).add_node("a", lambda s: {"messages": [AIMessage("hi")]})
        ...          .add_edge(START, "a").compile(checkpointer=staged))
        >>> config = {"configurable": {"thread_id": "t"}}
        >>> _ = graph.invoke({"messages": []}, config)
        >>> inner.get_tuple(config) is None, staged.held > 0
        (True, True)
        >>> staged.commit()
        >>> len(inner.get_tuple(config).checkpoint["channel_values"]["messages"])
        1
    """

    def __init__(self, target: BaseCheckpointSaver[Any]) -> None:
        super().__init__(serde=target.serde)
        self.target = target
        self._held: list[tuple[str, tuple[Any, ...]]] = []

    @property
    def held(self) -> int:
        """How many writes are held."""
        return len(self._held)

    def _readable(self) -> None:
        if self._held:
            raise RuntimeError(
                "StagedSaver holds writes that a read would not see: commit() or discard() first"
            )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Read from the target saver."""
        self._readable()
        return self.target.get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """List from the target saver."""
        self._readable()
        return self.target.list(config, filter=filter, before=before, limit=limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Hold the checkpoint; return the config the target saver would return."""
        self._held.append(("put", (config, checkpoint, metadata, new_versions)))
        configurable = config["configurable"]
        return {
            "configurable": {
                "thread_id": configurable["thread_id"],
                "checkpoint_ns": configurable.get("checkpoint_ns", ""),
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Hold a task's writes."""
        self._held.append(("put_writes", (config, list(writes), task_id, task_path)))

    def get_next_version(self, current: Any, channel: None) -> Any:
        """The target saver's versioning."""
        return self.target.get_next_version(current, channel)

    def delete_thread(self, thread_id: str) -> None:
        """Delete on the target saver (held writes are dropped)."""
        self._held.clear()
        self.target.delete_thread(thread_id)

    def commit(self) -> None:
        """Replay the held writes on the target saver, in order."""
        held, self._held = self._held, []
        for method, args in held:
            getattr(self.target, method)(*args)

    def discard(self) -> None:
        """Drop the held writes."""
        self._held.clear()


def load_model(spec: str) -> BaseChatModel:
    """Return the chat model ``provider:name`` through LangChain's ``init_chat_model``."""
    try:
        from langchain import chat_models
    except ImportError:
        raise CLIError(
            f"--model {spec} needs LangChain: pip install 'langgraph-stm[agents]'"
        ) from None
    try:
        model = chat_models.init_chat_model(spec)
    except Exception as exc:  # a missing provider package, key or unknown provider
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CLIError(f"cannot load --model {spec}: {reason}") from None
    if not isinstance(model, BaseChatModel):
        raise CLIError(f"--model {spec} did not give a chat model ({type(model).__name__})")
    return model


def _counter_for(spec: str | None) -> TokenCounterLike:
    if spec is None:
        return default_token_counter()
    try:
        return TokenCounter(model=spec)
    except TokenizerError:  # not an OpenAI model: o200k_base is a close estimate
        return default_token_counter()


def _show(message: BaseMessage) -> str:
    text = message.content if isinstance(message.content, str) else message.text
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = ", ".join(f"{c['name']}({json.dumps(c['args'])})" for c in message.tool_calls)
        return f"{text} -> calls {calls}".strip()
    return text


class Session:
    """One REPL: the file, the current thread, the agent graph over a staged saver."""

    def __init__(
        self,
        saver: STMSaver,
        store: Any,
        model: BaseChatModel,
        ledger: Ledger,
        thread: str,
        counter: TokenCounterLike,
        io: IO,
    ) -> None:
        self.saver = saver
        self.staged = StagedSaver(saver)
        self.counter = counter
        self.graph: CompiledStateGraph[Any, Any, Any, Any] = build_agent_graph(
            model, self.staged, ledger, store=store, token_counter=counter
        )
        self.thread = thread
        self.io = io

    @property
    def config(self) -> Any:
        return {"configurable": {"thread_id": self.thread}}

    def say(self, text: str = "") -> None:
        print(text, file=self.io.out, flush=True)

    def read(self, prompt: str) -> str | None:
        print(prompt, end="", file=self.io.out, flush=True)
        line = self.io.inp.readline()
        return None if not line else line.rstrip("\n")

    # -- turns ----------------------------------------------------------------------------
    def _run(self, payload: Any) -> bool:
        """Run the graph once; keep its writes only if it returned."""
        try:
            self.graph.invoke(payload, self.config, durability="sync")
        except KeyboardInterrupt:
            self.staged.discard()
            self.say("turn cancelled: nothing was stored")
            return False
        except Exception as exc:
            self.staged.discard()
            reason = (str(exc).strip().splitlines() or [""])[0]
            self.say(
                f"turn not stored: {type(exc).__name__}: {reason} "
                f"(thread {self.thread!r} is as it was before this message)"
            )
            return False
        try:
            self.staged.commit()
        except Exception as exc:  # the database refused a write: a step was not stored
            reason = (str(exc).strip().splitlines() or [""])[0]
            self.say(
                f"turn only partly stored: {type(exc).__name__}: {reason} (thread "
                f"{self.thread!r} is at the last step that was written)"
            )
            return False
        return True

    def turn(self, text: str) -> None:
        """Send one user message; answer approvals; print what the agent did."""
        human = HumanMessage(text, id=f"h-{uuid.uuid4().hex[:12]}")
        if self._run({"messages": [human]}) and self.settle():
            self._print_since(str(human.id))

    def settle(self) -> bool:
        """Ask for the pending approvals of the thread, resume, until none is left."""
        while True:
            interrupts = self.graph.get_state(self.config).interrupts
            if not interrupts:
                return True
            answers = {}
            for request in interrupts:
                decision = self._decide(request)
                if decision is None:
                    self.say(f"thread {self.thread!r} stays paused at the approval")
                    return False
                answers[request.id] = decision
            if not self._run(Command(resume=answers)):
                return False

    def _decide(self, request: Interrupt) -> dict[str, Any] | None:
        value = request.value
        self.say(f"approval needed: {value['name']}({json.dumps(value['args'])})")
        while True:
            choice = self.read("[a]pprove, [e]dit, [r]eject? ")
            if choice is None:
                return None
            choice = choice.strip().lower()
            if choice in ("a", "approve", "y", "yes"):
                return {"type": "approve"}
            if choice in ("r", "reject", "n", "no"):
                reason = self.read("reason: ")
                return {"type": "reject", "message": (reason or "").strip() or "rejected"}
            if choice in ("e", "edit"):
                raw = self.read("new arguments (JSON): ")
                try:
                    args = json.loads(raw or "")
                except ValueError:
                    self.say("not JSON")
                    continue
                if not isinstance(args, dict):
                    self.say("the arguments are a JSON object")
                    continue
                return {"type": "edit", "edited_action": {"name": value["name"], "args": args}}
            self.say("answer a, e or r")

    def _print_since(self, human_id: str) -> None:
        messages = self.graph.get_state(self.config).values.get("messages", [])
        ids = [m.id for m in messages]
        start = ids.index(human_id) + 1 if human_id in ids else len(messages)
        for message in messages[start:]:
            if isinstance(message, ToolMessage):
                mark = "error" if message.status == "error" else "tool"
                self.say(f"  [{mark}] {_show(message).splitlines()[0][:200]}")
            elif isinstance(message, AIMessage) and message.tool_calls:
                self.say(f"  {_show(message)}")
            elif isinstance(message, AIMessage):
                self.say(f"agent: {_show(message)}")

    # -- commands -------------------------------------------------------------------------
    def command(self, line: str) -> bool:
        """Run a ``/command``; return False for ``/quit``."""
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        if name in ("/quit", "/exit"):
            return False
        if name == "/help":
            self.say(_HELP)
        elif name == "/thread":
            if not rest:
                self.say(f"on thread {self.thread!r}; /thread ID switches")
            else:
                self.thread = rest
                count = len(self.graph.get_state(self.config).values.get("messages", []))
                self.say(f"thread {self.thread!r} ({count} messages)")
                self.settle()
        elif name == "/threads":
            self._threads()
        elif name == "/memory":
            self._memory()
        elif name == "/context":
            self._context()
        elif name == "/reset":
            report = self.saver.delete_thread(self.thread)
            rows = sum(report.rows.values())
            self.say(
                f"deleted thread {self.thread!r}: {rows} rows, {report.store_items} offloaded "
                "outputs"
            )
        else:
            self.say(f"unknown command {name}; /help lists them")
        return True

    def _threads(self) -> None:
        threads = self.saver.list_threads(limit=100)
        if not threads:
            self.say("no threads yet")
        for t in threads:
            mark = "*" if t.thread_id == self.thread else " "
            stamp = t.updated_at.isoformat(timespec="seconds") if t.updated_at else "-"
            goal = f"  goal: {t.goal}" if t.goal else ""
            self.say(f"{mark} {t.thread_id}  {t.message_count} messages  {stamp}{goal}")

    def _memory(self) -> None:
        state = self.saver.get_thread_state(self.thread)
        if state is None:
            self.say(f"thread {self.thread!r} has no state yet")
            return
        self.say(f"thread {self.thread!r}: {state.message_count} messages")
        self.say(f"goal: {state.goal or '-'}")
        self.say("plan:" + ("" if state.plan else " -"))
        for step in state.plan:
            self.say(f"  [{step['status']}] {step['id']}: {step['task']}")
        self.say("constraints:" + ("" if state.constraints else " -"))
        for c in state.constraints:
            self.say(f"  [{c['status']}] {c['text']}")
        self.say("artifacts:" + ("" if state.artifacts else " -"))
        for a in state.artifacts:
            self.say(f"  {a['id']} ({a['tokens']} tokens): {a['uri']}")
        error = state.last_error
        self.say(f"last error: {error['message'] if error else '-'}")
        summary = state.summary
        if summary is None:
            self.say("summary: -")
        else:
            coverage: dict[str, Any] = dict(summary.get("coverage") or {})
            self.say(
                f"summary (version {summary['version']}, covers "
                f"{coverage.get('message_count', 0)} messages):"
            )
            self.say(summary["text"])

    def _context(self) -> None:
        values = self.graph.get_state(self.config).values
        if not values.get("messages"):
            self.say(f"thread {self.thread!r} is empty: the model has seen nothing yet")
            return
        result = model_input(values, self.counter)
        for message in result.messages:
            self.say(f"--- {message_role(message)} {message.id}")
            self.say(_show(message))
        self.say(
            f"=== {result.tokens} tokens (budget {CONTEXT_TOKENS}); "
            f"{len(result.omitted_message_ids)} state messages left out"
        )

    def loop(self) -> None:
        """Read lines until ``/quit`` or end of input."""
        self.settle()
        while True:
            line = self.read(f"{self.thread}> ")
            if line is None:
                self.say()
                return
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if not self.command(line):
                    return
            else:
                self.turn(line)


@contextmanager
def _open(db: Path) -> Iterator[tuple[STMSaver, Any]]:
    try:
        from langgraph.store.sqlite import SqliteStore
    except ImportError:
        raise CLIError("chat needs the sqlite extra: pip install 'langgraph-stm[sqlite]'") from None
    if not db.parent.is_dir():
        raise CLIError(f"cannot open {db}: directory {db.parent} does not exist")
    with ExitStack() as stack:
        store = stack.enter_context(SqliteStore.from_conn_string(str(db)))
        store.setup()
        saver = stack.enter_context(STMSaver.from_sqlite(db, store=store))
        saver.setup()
        yield saver, store


def _run(args: Any, io: IO) -> int:
    model = ScriptedChatModel() if args.model is None else load_model(args.model)
    counter = _counter_for(args.model)
    if isinstance(model, ScriptedChatModel):
        model.token_counter = counter
    db = Path(args.db)
    with _open(db) as (saver, store):
        try:
            session = Session(
                saver, store, model, Ledger(ledger_path(db)), args.thread, counter, io
            )
        except NotImplementedError:
            raise CLIError(
                f"--model {args.model} does not support tool calling (bind_tools); "
                "pick a model that does"
            ) from None
        name = args.model or "the scripted offline model"
        print(
            f"langgraph-stm chat on {db}, thread {args.thread!r}, {name}; /help for commands",
            file=io.out,
        )
        session.loop()
    return 0


def register(commands: Any) -> None:
    """Add ``chat`` to the command line."""
    chat = commands.add_parser(
        "chat",
        help="chat with the agent on a SQLite file",
        description="An interactive session with the demo's agent (or --model) on STMSaver.",
    )
    chat.add_argument(
        "--db",
        type=Path,
        default=Path("stm-chat.sqlite"),
        metavar="PATH",
        help="SQLite file (default stm-chat.sqlite; created when missing)",
    )
    chat.add_argument(
        "--thread", default="chat", metavar="ID", help="thread to start on (default: chat)"
    )
    chat.add_argument(
        "--model",
        default=None,
        metavar="PROVIDER:NAME",
        help="a LangChain chat model, e.g. openai:gpt-4o (needs langgraph-stm[agents])",
    )
    chat.set_defaults(run=_run)
