"""A scripted 300-turn, tool-heavy agent conversation with gold facts.

Every turn is: a user message, an assistant message calling 1-3 tools in parallel, the
tool results (about 40-120 tokens each), and an assistant reply. Some turns carry the
facts a good short-term memory must keep: the goal, three constraints, plan status
changes, four decisions and four error recoveries. The conversation ends with a
``send_email`` call waiting for approval (a pending tool call).

The structured state a langgraph-stm agent would record along the way (goal, plan,
constraints) is given per turn in :attr:`Turn.state_update`; baselines that have no
structured state only see the messages, where the same facts are stated in words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

TURNS = 300
GOAL = "migrate billing to v2"

CONSTRAINTS = {
    3: ("c1", "Never email external domains."),
    70: ("c2", "Keep v1 read-only until cutover."),
    140: ("c3", "Do not run migrations between 09:00 and 18:00 CET."),
}
PLAN_TASKS = {"s1": "export invoices", "s2": "map fields", "s3": "switch traffic"}
PLAN_CHANGES = {
    10: ("s1", "in_progress"),
    100: ("s1", "done"),
    105: ("s2", "in_progress"),
    200: ("s2", "done"),
    240: ("s3", "in_progress"),
}
DECISIONS = {
    20: "We decided to use UUID invoice ids in the v2 schema.",
    90: "We agreed on a batch size of 500 for the export.",
    160: "We decided to keep the legacy webhook for 30 days.",
    230: "We will switch traffic with the EU region first.",
}
FAILURES = {
    50: ("billing_api", "HTTP 503 Service Unavailable", "I will retry with exponential backoff."),
    120: (
        "billing_api",
        "Error: 401 token expired",
        "I rotated the expired API token and retried.",
    ),
    190: ("bulk_update", "Error: payload too large", "I split the batch into chunks of 100."),
    260: ("ledger_db", "Error: primary timed out", "I fell back to the read replica."),
}
PENDING_CALL_ID = "mail-approval"


@dataclass(frozen=True)
class GoldFact:
    """One fact the model input must contain, with how to recognize it."""

    kind: str
    """goal, constraint, plan, pending, decision or recovery."""
    name: str
    """What it is, for the report."""
    pattern: str
    """Case-insensitive regex searched in each line of the rendered model input."""

    @property
    def structured(self) -> bool:
        """Facts that live in the structured state (the 100% target)."""
        return self.kind in {"goal", "constraint", "plan", "pending"}


def _status_words(status: str) -> str:
    return status.replace("_", "[ _]")


GOLD: tuple[GoldFact, ...] = (
    GoldFact("goal", "goal", re.escape(GOAL)),
    *(
        GoldFact("constraint", cid, re.escape(text.rstrip(".")))
        for cid, text in CONSTRAINTS.values()
    ),
    GoldFact("plan", "s1 done", rf"{PLAN_TASKS['s1']}.*\bdone\b|\bdone\b.*{PLAN_TASKS['s1']}"),
    GoldFact("plan", "s2 done", rf"{PLAN_TASKS['s2']}.*\bdone\b|\bdone\b.*{PLAN_TASKS['s2']}"),
    GoldFact(
        "plan",
        "s3 in_progress",
        rf"{PLAN_TASKS['s3']}.*in[ _]progress|in[ _]progress.*{PLAN_TASKS['s3']}",
    ),
    GoldFact("pending", "send_email awaiting approval", rf"\bcall {PENDING_CALL_ID}\b"),
    GoldFact("decision", "UUID ids", r"UUID invoice ids"),
    GoldFact("decision", "batch 500", r"batch size of 500"),
    GoldFact("decision", "legacy webhook", r"legacy webhook for 30 days"),
    GoldFact("decision", "EU first", r"EU region first"),
    GoldFact("recovery", "backoff", r"exponential backoff"),
    GoldFact("recovery", "token rotated", r"rotated the expired API token"),
    GoldFact("recovery", "chunks", r"chunks of 100"),
    GoldFact("recovery", "read replica", r"read replica"),
)


@dataclass
class Turn:
    """The messages of one turn and the structured state update an STM agent records."""

    messages: list[BaseMessage]
    state_update: dict[str, Any] = field(default_factory=dict)


def _record(i: int, k: int) -> str:
    fields = ", ".join(
        f"line{j}: sku-{(i * 7 + k * 3 + j) % 997} qty {(i + j) % 13} amount {(i * j) % 500}.{k}0"
        for j in range(2 + (i + k) % 5)
    )
    return f"Invoice batch {i} part {k}: {fields}."


def turns() -> Iterator[Turn]:
    """Yield the 300 turns in order (deterministic)."""
    for i in range(TURNS):
        update: dict[str, Any] = {}
        words = [f"Please process invoice batch {i} for account ACME-{i % 17}."]
        if i == 0:
            words = [f"Our goal is to {GOAL}. Start with the plan."]
            update["goal"] = GOAL
            update["plan"] = [{"id": s, "task": t} for s, t in PLAN_TASKS.items()]
        if i in CONSTRAINTS:
            cid, text = CONSTRAINTS[i]
            words.append(f"Important: {text}")
            update["constraints"] = [
                {"id": cid, "text": text.rstrip("."), "source_message_id": f"h{i}"}
            ]
        messages: list[BaseMessage] = [HumanMessage(" ".join(words), id=f"h{i}")]
        if i == TURNS - 1:
            call = {"name": "send_email", "args": {"to": "cfo@acme.example"}, "id": PENDING_CALL_ID}
            messages.append(
                AIMessage("I need approval to email the CFO.", id=f"a{i}c", tool_calls=[call])
            )
            yield Turn(messages, update)
            return
        failure = FAILURES.get(i)
        n_calls = 1 + i % 3
        names = (
            [failure[0]] if failure else ["fetch_invoices", "map_fields", "post_ledger"][:n_calls]
        )
        calls = [
            {"name": name, "args": {"batch": i, "part": k}, "id": f"c{i}-{k}"}
            for k, name in enumerate(names)
        ]
        messages.append(AIMessage("", id=f"a{i}c", tool_calls=calls))
        for k, call in enumerate(calls):
            if failure:
                messages.append(
                    ToolMessage(failure[1], tool_call_id=call["id"], id=f"t{i}-{k}", status="error")
                )
            else:
                messages.append(ToolMessage(_record(i, k), tool_call_id=call["id"], id=f"t{i}-{k}"))
        reply = [f"Batch {i} processed."]
        if failure:
            reply = [f"The {failure[0]} call failed ({failure[1]}).", failure[2]]
        if i in DECISIONS:
            reply.append(DECISIONS[i])
        if i in PLAN_CHANGES:
            step, status = PLAN_CHANGES[i]
            reply.append(f"Plan update: step {step} ({PLAN_TASKS[step]}) is now {status}.")
            update["plan"] = [{"id": step, "status": status}]
        messages.append(AIMessage(" ".join(reply), id=f"a{i}r"))
        yield Turn(messages, update)


def render(messages: Sequence[BaseMessage]) -> str:
    """The model input as text: each message, its tool calls (``call ID name``) included."""
    lines: list[str] = []
    for message in messages:
        lines.extend(str(message.text).splitlines() or [""])
        if isinstance(message, AIMessage):
            lines.extend(f"call {c['id']} {c['name']} {c['args']}" for c in message.tool_calls)
    return "\n".join(lines)


def retained(messages: Sequence[BaseMessage], facts: Sequence[GoldFact] = GOLD) -> list[GoldFact]:
    """The gold facts present in the model input ``messages``."""
    lines = render(messages).splitlines()
    return [
        fact
        for fact in facts
        if any(re.search(fact.pattern, line, re.IGNORECASE) for line in lines)
    ]
