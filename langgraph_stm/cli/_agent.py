"""The agent that ``langgraph-stm demo`` and ``langgraph-stm chat`` run.

An order-operations assistant as a real ``StateGraph`` over
:class:`~langgraph_stm.STMState`::

    START -> summarize -> agent -> tools -> record -> summarize -> agent ... -> END

- ``summarize`` is a :class:`~langgraph_stm.SummarizeNode` (offline extractive
  summarizer) that folds the oldest units into the running summary;
- ``agent`` builds the model input with :func:`~langgraph_stm.build_context` (system
  prompt, the working-memory block, the newest units that fit :data:`CONTEXT_TOKENS`)
  and calls the chat model, bound to the tools with ``bind_tools``;
- ``tools`` is an :class:`~langgraph_stm.ApprovalToolNode`: ``issue_refund`` and
  ``send_email`` wait for a human decision (``interrupt()``), and a result over
  :data:`OFFLOAD_TOKENS` goes whole to the graph's store, the state keeping a summary,
  a reference and an ``artifacts`` record;
- ``record`` turns the answered calls of the memory tools (``set_goal``,
  ``plan_step``, ``add_constraint``) into structured-state updates, and a failed
  business call into ``last_error`` (cleared by the next call that succeeds).

The business tools work on a small fixed data set and write one JSON line per run to
a :class:`Ledger`, so every side effect can be counted. :class:`ScriptedChatModel` is
an offline, deterministic chat model that reads only the messages it is given, as a
real one would: the latest user message picks its tool calls (:func:`plan_turn`),
and the results that follow it in the context decide the next step (retry after an
error, mark the plan step, reply). The same graph takes any LangChain chat model that
supports ``bind_tools``.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> from langgraph_stm.cli._model import ScriptedChatModel
    >>> ledger = Ledger()
    >>> graph = build_agent_graph(ScriptedChatModel(), InMemorySaver(), ledger)
    >>> config = {"configurable": {"thread_id": "doc"}}
    >>> out = graph.invoke({"messages": [HumanMessage("Look up orders 1042 and 1043.",
    ...                                              id="u1")]}, config)
    >>> [entry["tool"] for entry in ledger.entries()]
    ['lookup_order', 'lookup_order']
    >>> [(step["id"], step["status"]) for step in out["plan"]]
    [('lookup', 'done')]
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from langgraph_stm._approval import ApprovalToolNode
from langgraph_stm._context import ContextResult, build_context
from langgraph_stm._state import STMState
from langgraph_stm._summarize import SummarizeNode
from langgraph_stm._tokens import TokenCounterLike, default_token_counter

__all__ = [
    "CONTEXT_TOKENS",
    "GATED_TOOLS",
    "MEMORY_TOOLS",
    "OFFLOAD_TOKENS",
    "SUMMARY_KEEP_TOKENS",
    "SUMMARY_MAX_TOKENS",
    "SUMMARY_TRIGGER_TOKENS",
    "SYSTEM_PROMPT",
    "Ledger",
    "ModelInputHook",
    "build_agent_graph",
    "ledger_path",
    "make_tools",
    "model_input",
    "record",
    "text_of",
    "tool_calls_of",
]

SYSTEM_PROMPT = (
    "You are an order-operations assistant for a small online shop. Use the tools to look "
    "up orders, check stock, convert amounts, issue refunds and email people. Record the "
    "user's goal with set_goal, the plan with plan_step and every rule the user gives you "
    "with add_constraint. Refunds and emails wait for a human's approval."
)
"""The system prompt of every model call."""

CONTEXT_TOKENS = 1600
"""The budget of one model input (exact ``o200k_base`` tokens, messages only)."""

SUMMARY_TRIGGER_TOKENS = 1200
"""``SummarizeNode(trigger_tokens=...)``: summarize once the messages count more."""

SUMMARY_KEEP_TOKENS = 400
"""``SummarizeNode(keep_tokens=...)``: what stays as messages after a summary."""

OFFLOAD_TOKENS = 400
"""Tool results over this many tokens go to the store (``offload_over_tokens``)."""

SUMMARY_MAX_TOKENS = 300
"""``SummarizeNode(max_summary_tokens=...)``: the running summary's size limit."""

GATED_TOOLS: dict[str, bool] = {"issue_refund": True, "send_email": True}
"""The calls that wait for a human decision (``ApprovalToolNode(interrupt_on=...)``)."""

MEMORY_TOOLS = frozenset({"set_goal", "plan_step", "add_constraint"})
"""Tools whose answered calls the ``record`` node writes into the structured state."""

ModelInputHook = Callable[[ContextResult | None, Sequence[BaseMessage], int], None]
"""Called before each model call with the context result (``None`` without memory),
the exact model input and its token count."""


# -- the ledger ---------------------------------------------------------------------------
def ledger_path(db: Path | str) -> Path:
    """Return where the commands keep the ledger of the SQLite file ``db``.

    Next to it, named like SQLite's own companions (so ``*.sqlite-*`` globs match it).

    Example:
        >>> ledger_path("stm-demo.sqlite").name
        'stm-demo.sqlite-ledger.jsonl'
    """
    return Path(f"{db}-ledger.jsonl")


class Ledger:
    """The tools' run log: one JSON line per tool run, in a file or in memory.

    Example:
        >>> ledger = Ledger()
        >>> ledger.record("t1", "lookup_order", "c1", {"order_id": "1042"}, "ok")
        >>> ledger.entries("t1")[0]["call_id"]
        'c1'
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = None if path is None else Path(path)
        self._memory: list[dict[str, Any]] = []

    def record(
        self, thread_id: str, tool_name: str, call_id: str, args: Mapping[str, Any], outcome: str
    ) -> None:
        """Append one run: the thread, the tool, its call id and arguments, the outcome."""
        entry = {
            "thread_id": thread_id,
            "tool": tool_name,
            "call_id": call_id,
            "args": dict(args),
            "outcome": outcome,
        }
        if self.path is None:
            self._memory.append(entry)
            return
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, sort_keys=True) + "\n")

    def entries(self, thread_id: str | None = None) -> list[dict[str, Any]]:
        """Return the runs, oldest first (of ``thread_id`` only, when given)."""
        if self.path is None:
            rows = list(self._memory)
        elif self.path.exists():
            lines = self.path.read_text(encoding="utf-8").splitlines()
            rows = [json.loads(line) for line in lines if line]
        else:
            rows = []
        return [row for row in rows if thread_id is None or row["thread_id"] == thread_id]


# -- the tools ----------------------------------------------------------------------------
RATES: dict[str, float] = {"EUR": 1.0, "USD": 1.08, "GBP": 0.86, "CHF": 0.95, "JPY": 162.0}
"""Units of each currency per euro (a fixed table: the tools run offline)."""

_STATUSES = ("shipped", "delivered", "damaged in transit", "awaiting stock", "returned")


def _order(order_id: str) -> dict[str, Any]:
    number = int(order_id) if order_id.isdigit() else sum(map(ord, order_id))
    return {
        "order_id": order_id,
        "customer": ("ACME GmbH", "Globex Ltd", "Initech SA")[number % 3],
        "items": 1 + number % 4,
        "total_eur": round(20 + (number * 37) % 400 + 0.5 * (number % 2), 2),
        "status": _STATUSES[number % len(_STATUSES)],
    }


def _thread_of(config: RunnableConfig) -> str:
    return str(config.get("configurable", {}).get("thread_id", ""))


def make_tools(ledger: Ledger) -> list[BaseTool]:
    """Return the agent's tools: six business tools (ledgered) and the memory tools.

    Example:
        >>> [t.name for t in make_tools(Ledger())][:3]
        ['lookup_order', 'check_stock', 'inventory_report']
    """

    @tool
    def lookup_order(
        order_id: str, tool_call_id: Annotated[str, InjectedToolCallId], config: RunnableConfig
    ) -> str:
        """Look up an order by its number: customer, items, total and status."""
        order = _order(order_id)
        ledger.record(
            _thread_of(config), "lookup_order", tool_call_id, {"order_id": order_id}, "ok"
        )
        return (
            f"order {order_id}: {order['customer']}, {order['items']} items, "
            f"{order['total_eur']:.2f} EUR, {order['status']}"
        )

    @tool
    def check_stock(
        sku: str, tool_call_id: Annotated[str, InjectedToolCallId], config: RunnableConfig
    ) -> str:
        """Return how many units of a SKU are in stock."""
        units = sum(map(ord, sku.upper())) * 13 % 90
        ledger.record(_thread_of(config), "check_stock", tool_call_id, {"sku": sku}, "ok")
        return f"{sku.upper()}: {units} units in stock"

    @tool
    def inventory_report(
        warehouse: str, tool_call_id: Annotated[str, InjectedToolCallId], config: RunnableConfig
    ) -> str:
        """Return the full inventory report of a warehouse (one line per SKU; long)."""
        ledger.record(
            _thread_of(config), "inventory_report", tool_call_id, {"warehouse": warehouse}, "ok"
        )
        lines = [f"Inventory report for {warehouse.upper()}, 120 SKUs."]
        for i in range(120):
            units = (i * 29) % 97
            lines.append(
                f"SKU-{1000 + i}: {units} units, bin {chr(65 + i % 6)}{i % 40:02d}, "
                f"reorder {'yes' if units < 12 else 'no'}"
            )
        return "\n".join(lines)

    @tool
    def convert_amount(
        amount: float,
        currency: str,
        to: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        config: RunnableConfig,
    ) -> str:
        """Convert an amount between ISO 4217 currency codes (EUR, USD, GBP, CHF, JPY)."""
        args = {"amount": amount, "currency": currency, "to": to}
        unknown = [code for code in (currency, to) if code not in RATES]
        if unknown:
            ledger.record(_thread_of(config), "convert_amount", tool_call_id, args, "error")
            raise ValueError(
                f"unknown currency {unknown[0]!r}: use a three-letter ISO 4217 code such as EUR"
            )
        ledger.record(_thread_of(config), "convert_amount", tool_call_id, args, "ok")
        converted = amount / RATES[currency] * RATES[to]
        return f"{amount:.2f} {currency} = {converted:.2f} {to}"

    @tool
    def issue_refund(
        order_id: str,
        amount: float,
        currency: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        config: RunnableConfig,
    ) -> str:
        """Refund an amount on an order (needs a human's approval)."""
        args = {"order_id": order_id, "amount": amount, "currency": currency}
        ledger.record(_thread_of(config), "issue_refund", tool_call_id, args, "ok")
        return f"refunded {amount:.2f} {currency} on order {order_id}"

    @tool
    def send_email(
        to: str,
        subject: str,
        body: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        config: RunnableConfig,
    ) -> str:
        """Send an email (needs a human's approval)."""
        args = {"to": to, "subject": subject, "body": body}
        ledger.record(_thread_of(config), "send_email", tool_call_id, args, "ok")
        return f"sent to {to}: {subject}"

    @tool
    def set_goal(goal: str) -> str:
        """Record the user's goal for this thread."""
        return f"goal recorded: {goal}"

    @tool
    def plan_step(
        id: str, task: str, status: Literal["pending", "in_progress", "done", "blocked"]
    ) -> str:
        """Add a plan step or change its status (pending, in_progress, done, blocked)."""
        return f"plan step {id} ({task}): {status}"

    @tool
    def add_constraint(text: str) -> str:
        """Record a rule the user gave, to keep for the rest of the thread."""
        return f"constraint recorded: {text}"

    return [
        lookup_order,
        check_stock,
        inventory_report,
        convert_amount,
        issue_refund,
        send_email,
        set_goal,
        plan_step,
        add_constraint,
    ]


# -- the record node ----------------------------------------------------------------------
def constraint_id(text: str) -> str:
    """Return the id of the constraint ``text`` (the same text gets the same id).

    Example:
        >>> constraint_id("Never email external domains.") == constraint_id("never email external")
        False
        >>> constraint_id("Keep refunds small.") == constraint_id("keep refunds small")
        True
    """
    key = re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()
    return "c-" + hashlib.blake2b(key.encode(), digest_size=4).hexdigest()


def record(state: STMState) -> dict[str, Any]:
    """Turn the last unit's answered calls into structured-state updates.

    Memory tools set the goal, plan steps and constraints; a failed business call sets
    ``last_error``, and a unit whose business calls all succeeded clears it.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        >>> call = {"name": "set_goal", "args": {"goal": "refund 1042"}, "id": "c1"}
        >>> record({"messages": [HumanMessage("go", id="h"),
        ...     AIMessage("", id="a", tool_calls=[call]),
        ...     ToolMessage("goal recorded", tool_call_id="c1", id="t")]})
        {'goal': 'refund 1042'}
    """
    messages = list(state["messages"])
    index = next(
        (i for i in range(len(messages) - 1, -1, -1) if tool_calls_of(messages[i])),
        None,
    )
    if index is None:
        return {}
    ai = messages[index]
    assert isinstance(ai, AIMessage)
    results = {m.tool_call_id: m for m in messages[index + 1 :] if isinstance(m, ToolMessage)}
    human = next((m for m in reversed(messages[:index]) if isinstance(m, HumanMessage)), None)
    update: dict[str, Any] = {}
    plan: list[dict[str, Any]] = []
    constraints: list[dict[str, Any]] = []
    errors: list[str] = []
    business = False
    for call in ai.tool_calls:
        result = results.get(call["id"] or "")
        if result is None:
            continue
        ok = result.status != "error"
        args = call["args"]
        if call["name"] == "set_goal" and ok:
            update["goal"] = str(args["goal"])
        elif call["name"] == "plan_step" and ok:
            plan.append({"id": args["id"], "task": args["task"], "status": args["status"]})
        elif call["name"] == "add_constraint" and ok:
            text = str(args["text"])
            constraints.append(
                {
                    "id": constraint_id(text),
                    "text": text,
                    "source_message_id": None if human is None else human.id,
                    "status": "confirmed",
                }
            )
        elif call["name"] not in MEMORY_TOOLS:
            business = True
            if not ok:
                errors.append(f"{call['name']}: {text_of(result)}")
    if plan:
        update["plan"] = plan
    if constraints:
        update["constraints"] = constraints
    if errors:
        active = [s["id"] for s in state.get("plan") or [] if s["status"] == "in_progress"]
        update["last_error"] = {
            "message": "; ".join(errors)[:400],
            "recovery": "retry with corrected arguments, or tell the user",
            "step_id": active[-1] if active else None,
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
    elif business and state.get("last_error") is not None:
        update["last_error"] = None
    return update


def tool_calls_of(message: BaseMessage) -> list[ToolCall]:
    return list(message.tool_calls) if isinstance(message, AIMessage) else []


def text_of(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else message.text


# -- the graph ----------------------------------------------------------------------------
def model_input(
    state: Mapping[str, Any], token_counter: TokenCounterLike | None = None
) -> ContextResult:
    """Return what the agent's model sees for ``state``: the budgeted context.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> result = model_input({"messages": [HumanMessage("hi", id="h1")], "goal": "greet"})
        >>> [m.id for m in result.messages]
        ['stm-system', 'stm-context', 'h1']
    """
    return build_context(
        state,
        max_tokens=CONTEXT_TOKENS,
        system_prompt=SYSTEM_PROMPT,
        token_counter=token_counter,
        on_overflow="keep_mandatory",
    )


def _route(state: STMState) -> str:
    messages = state["messages"]
    return "tools" if messages and tool_calls_of(messages[-1]) else END


def build_agent_graph(
    model: BaseChatModel,
    checkpointer: BaseCheckpointSaver[Any] | None,
    ledger: Ledger,
    *,
    store: BaseStore | None = None,
    memory: bool = True,
    token_counter: TokenCounterLike | None = None,
    on_model_input: ModelInputHook | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the agent graph (see the module docstring) around ``model``.

    With ``memory=False`` it is the plain agent the demo compares against: no summary,
    no offload, and the model sees the system prompt plus every message.
    """
    counter: TokenCounterLike = token_counter or default_token_counter()
    tools = make_tools(ledger)
    bound = model.bind_tools(tools)

    def agent(state: STMState) -> dict[str, Any]:
        result: ContextResult | None = None
        if memory:
            result = model_input(state, counter)
            messages: list[BaseMessage] = list(result.messages)
        else:
            messages = [SystemMessage(SYSTEM_PROMPT), *state["messages"]]
        if on_model_input is not None:
            on_model_input(result, messages, result.tokens if result else counter(messages))
        reply = bound.invoke(messages)
        return {"messages": [reply]}

    node = ApprovalToolNode(
        tools,
        interrupt_on=GATED_TOOLS,
        offload_over_tokens=OFFLOAD_TOKENS if memory else None,
        token_counter=counter if memory else None,
    )
    builder = StateGraph(STMState)
    builder.add_node("agent", agent)
    builder.add_node(node)
    builder.add_node("record", record)
    builder.add_conditional_edges("agent", _route, ["tools", END])
    builder.add_edge("tools", "record")
    if memory:
        summarize = SummarizeNode(
            trigger_tokens=SUMMARY_TRIGGER_TOKENS,
            keep_tokens=SUMMARY_KEEP_TOKENS,
            max_summary_tokens=SUMMARY_MAX_TOKENS,
            token_counter=counter,
        )
        builder.add_node(summarize)
        builder.add_edge(START, "summarize")
        builder.add_edge("summarize", "agent")
        builder.add_edge("record", "summarize")
    else:
        builder.add_edge(START, "agent")
        builder.add_edge("record", "agent")
    return builder.compile(checkpointer=checkpointer, store=store)
