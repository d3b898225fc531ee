"""The offline chat model of ``langgraph-stm demo`` and ``chat``: :class:`ScriptedChatModel`.

A deterministic ``BaseChatModel`` that reads only the messages it is given, as a real
model would: the latest user message picks its tool calls (:func:`plan_turn`: the
plan, the rules the user states, lookups, refunds, emails; parallel calls where the
request names several orders), and the tool results that follow it in the context
decide the next step (retry a call the tool refused, mark the plan step, reply). It
supports ``bind_tools``, so the agent of :mod:`._agent` runs the same with any chat
model that does.

Example:
    >>> [name for name, _ in plan_turn("Look up orders 1042 and 1043.").calls]
    ['lookup_order', 'lookup_order']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from langgraph_stm._tokens import TokenCounterLike, default_token_counter
from langgraph_stm.cli._agent import MEMORY_TOOLS, text_of, tool_calls_of

__all__ = ["ScriptedChatModel", "TurnPlan", "plan_turn"]


_CURRENCY_WORDS = {
    "euro": "EUR",
    "euros": "EUR",
    "eur": "EUR",
    "dollar": "USD",
    "dollars": "USD",
    "usd": "USD",
    "pound": "GBP",
    "pounds": "GBP",
    "gbp": "GBP",
    "franc": "CHF",
    "francs": "CHF",
    "chf": "CHF",
    "yen": "JPY",
    "jpy": "JPY",
}
_DEMO_PLAN = (
    ("lookup", "look up the customer's orders"),
    ("inventory", "check the warehouse inventory"),
    ("convert", "convert the refund amount to USD"),
    ("refund", "refund the damaged shipment"),
    ("report", "report back to the user"),
)
_GENERIC_PLAN = (
    ("understand", "understand what is needed"),
    ("act", "do the work with the tools"),
    ("report", "report back to the user"),
)
_HELP = (
    "I can look up orders ('status of order 1042'), check stock ('stock for SKU-1001'), "
    "pull an inventory report, convert amounts ('convert 180 euro to dollars'), issue "
    "refunds ('refund 50 EUR on order 1042') and send emails ('email ops@example.com'); "
    "say 'goal: ...' to set a goal, or 'never ...' to give me a rule."
)


@dataclass(frozen=True)
class TurnPlan:
    """What the scripted model does for one user message.

    ``calls`` are the first step's tool calls as ``(name, args)``, ``step`` the plan
    step the turn works on (marked in progress with the calls, done after them), and
    ``note`` the reply when there is nothing to call.
    """

    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    step: tuple[str, str] | None = None
    note: str = ""


_RULE_START = r"(?:never|always|do not|don't|keep|only)\b"


def _rules(text: str) -> list[str]:
    """The rules a user message gives (sentences or clauses starting with never, keep...)."""
    body = re.sub(r"^\s*(?:from now on|rules?|constraints?)\s*:\s*", "", text, flags=re.I)
    pieces = re.split(rf"(?<=[.!;])\s+|,?\s+and\s+(?={_RULE_START})", body.strip(), flags=re.I)
    return [
        piece.strip().rstrip(".!;")
        for piece in pieces
        if re.match(_RULE_START, piece.strip(), flags=re.I)
    ]


def plan_turn(text: str) -> TurnPlan:
    """Return what the scripted model does for the user message ``text``.

    Example:
        >>> plan_turn("Look up orders 1042 and 1043.").calls
        (('lookup_order', {'order_id': '1042'}), ('lookup_order', {'order_id': '1043'}))
        >>> plan_turn("hello").note.startswith("I can look up orders")
        True
    """
    lowered = text.lower().strip()
    goal = re.match(r"goal:\s*(.+)", text.strip(), flags=re.I | re.S)
    if goal:
        steps = _DEMO_PLAN if "refund" in lowered else _GENERIC_PLAN
        calls: list[tuple[str, dict[str, Any]]] = [("set_goal", {"goal": goal.group(1).strip()})]
        calls += [("plan_step", {"id": i, "task": t, "status": "pending"}) for i, t in steps]
        return TurnPlan(tuple(calls))
    rules = _rules(text)
    if rules:
        return TurnPlan(tuple(("add_constraint", {"text": rule}) for rule in rules))
    if "wrap up" in lowered:
        return TurnPlan(step=("report", "report back to the user"))
    if "inventory report" in lowered:
        warehouse = re.search(r"\bwh-\d+\b", lowered)
        name = warehouse.group(0).upper() if warehouse else "WH-1"
        return TurnPlan(
            (("inventory_report", {"warehouse": name}),), ("inventory", _DEMO_PLAN[1][1])
        )
    convert = re.search(r"convert\D*?(\d+(?:\.\d+)?)\s*([a-z]+)\s+(?:to|into)\s+([a-z]+)", lowered)
    if convert:
        amount, source, target = convert.groups()
        args = {"amount": float(amount), "currency": source.upper(), "to": target.upper()}
        return TurnPlan((("convert_amount", args),), ("convert", _DEMO_PLAN[2][1]))
    refund = re.search(r"refund\s+(\d+(?:\.\d+)?)\s*([a-z]{3})\s+on\s+order\s+(\w+)", lowered)
    if refund:
        amount, currency, order = refund.groups()
        args = {"order_id": order, "amount": float(amount), "currency": currency.upper()}
        return TurnPlan((("issue_refund", args),), ("refund", _DEMO_PLAN[3][1]))
    email = re.search(r"email\s+(\S+@[\w.-]+\w)", text, flags=re.I)
    if email:
        body = text[email.end() :].strip(" :,.") or "An update on your request."
        args = {"to": email.group(1), "subject": "Update from the order desk", "body": body}
        return TurnPlan((("send_email", args),))
    skus = re.findall(r"\bsku-\d+\b", lowered)
    if skus and "stock" in lowered:
        return TurnPlan(tuple(("check_stock", {"sku": sku.upper()}) for sku in skus))
    orders = re.findall(r"\b\d{4,}\b", lowered) if "order" in lowered else []
    if orders:
        step = ("lookup", _DEMO_PLAN[0][1]) if "look up orders" in lowered else None
        return TurnPlan(tuple(("lookup_order", {"order_id": o}) for o in orders), step)
    return TurnPlan(note=_HELP)


def _fix(call: ToolCall) -> dict[str, Any] | None:
    """The corrected arguments of a failed call, when the model knows a fix."""
    if call["name"] != "convert_amount":
        return None
    args = dict(call["args"])
    fixed = {
        **args,
        "currency": _CURRENCY_WORDS.get(str(args["currency"]).lower(), args["currency"]),
        "to": _CURRENCY_WORDS.get(str(args["to"]).lower(), args["to"]),
    }
    return None if fixed == args else fixed


class ScriptedChatModel(BaseChatModel):
    """An offline, deterministic tool-calling chat model (see the module docstring).

    It reads only its input messages: the latest ``HumanMessage`` picks the turn
    (:func:`plan_turn`), the messages after it the step. It reports ``usage_metadata``
    with the exact ``o200k_base`` count of its input, as a provider reports usage, and
    gives its messages deterministic ids (``<user message id>-ai<n>``).

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> from langgraph_stm.cli._agent import Ledger, make_tools
        >>> model = ScriptedChatModel().bind_tools(make_tools(Ledger()))
        >>> reply = model.invoke([HumanMessage("Check stock for SKU-7 and SKU-9.", id="u1")])
        >>> [(c["name"], c["id"]) for c in reply.tool_calls]
        [('check_stock', 'u1-ai1-c0'), ('check_stock', 'u1-ai1-c1')]
    """

    token_counter: Any = None
    """The counter of ``usage_metadata`` (default: the shared ``o200k_base`` counter)."""

    @property
    def _llm_type(self) -> str:
        return "langgraph-stm-scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind ``tools``: the model calls only tools bound here."""
        names = [convert_to_openai_tool(t)["function"]["name"] for t in tools]
        return self.bind(tools=names, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        bound = set(kwargs.get("tools") or ())
        reply = self._reply(messages, bound)
        counter: TokenCounterLike = self.token_counter or default_token_counter()
        prompt = counter(messages)
        answer = counter([reply]) - counter([])
        reply.usage_metadata = {
            "input_tokens": prompt,
            "output_tokens": answer,
            "total_tokens": prompt + answer,
        }
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def _reply(self, messages: list[BaseMessage], bound: set[str]) -> AIMessage:
        position = next(
            (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], HumanMessage)),
            None,
        )
        if position is None:
            return AIMessage("Hello! " + _HELP)
        human = messages[position]
        after = messages[position + 1 :]
        ai_id = f"{human.id}-ai{1 + sum(isinstance(m, AIMessage) for m in after)}"
        turn = plan_turn(text_of(human))

        def say(text: str) -> AIMessage:
            return AIMessage(text, id=ai_id)

        def call(*wanted: tuple[str, dict[str, Any]]) -> AIMessage:
            missing = sorted({name for name, _ in wanted} - bound)
            if missing:
                return say(f"I have no tool for that ({', '.join(missing)}).")
            calls = [
                ToolCall(name=name, args=args, id=f"{ai_id}-c{i}", type="tool_call")
                for i, (name, args) in enumerate(wanted)
            ]
            return AIMessage("", id=ai_id, tool_calls=calls)

        def step(status: str) -> tuple[str, dict[str, Any]]:
            assert turn.step is not None
            return ("plan_step", {"id": turn.step[0], "task": turn.step[1], "status": status})

        if not after:
            if turn.calls:
                first = [*turn.calls, step("in_progress")] if turn.step else list(turn.calls)
                return call(*first)
            if turn.step:
                return call(step("done"))
            return say(turn.note)
        last_ai = next((m for m in reversed(after) if tool_calls_of(m)), None)
        if last_ai is None or not isinstance(after[-1], ToolMessage):
            return say(turn.note or "Done.")
        results = {m.tool_call_id: m for m in after if isinstance(m, ToolMessage)}
        calls = tool_calls_of(last_ai)
        names = {c["name"] for c in calls}
        failed = [
            c
            for c in calls
            if (result := results.get(c["id"] or "")) is not None
            and result.status == "error"
            and c["name"] not in MEMORY_TOOLS
        ]
        if failed:
            retries = [(c["name"], fixed) for c in failed if (fixed := _fix(c)) is not None]
            if retries:
                return call(*retries)
            if turn.step:
                return call(step("blocked"))
        if names <= MEMORY_TOOLS:
            return say(self._summary(after, results, turn))
        if turn.step:
            return call(step("done"))
        return say(self._summary(after, results, turn))

    @staticmethod
    def _summary(
        after: Sequence[BaseMessage], results: Mapping[str, ToolMessage], turn: TurnPlan
    ) -> str:
        done: list[str] = []
        failed: list[str] = []
        noted: list[str] = []
        for message in after:
            for c in tool_calls_of(message):
                result = results.get(c["id"] or "")
                if result is None:
                    continue
                text = (text_of(result).splitlines() or [""])[0][:160]
                if c["name"] in MEMORY_TOOLS:
                    noted.append(text)
                else:
                    (failed if result.status == "error" else done).append(text)
        if failed and not done:
            return "That did not work: " + "; ".join(failed)
        if not done:
            return "Noted. " + "; ".join(noted) if noted else turn.note or "Done."
        fixed = f" (after an error: {failed[-1]})" if failed else ""
        return "Done. " + "; ".join(done) + fixed
