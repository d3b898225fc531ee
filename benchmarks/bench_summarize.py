"""Benchmark: model-input tokens and gold-fact retention over a 300-turn conversation.

Compares, on the scripted conversation of ``benchmarks/conversation.py`` and the same
budgets:

- the full history (no memory management);
- langgraph-stm: ``SummarizeNode`` each turn + ``build_context``, with the offline
  extractive summarizer and with a scripted fake chat model;
- langmem's ``SummarizationNode`` with the same fake model;
- LangChain's ``SummarizationMiddleware`` with the same fake model.

The fake model is the same for every library: it reads the whole prompt it is given
and answers with the sentences that look like facts (constraints, decisions,
recoveries, status changes), newest first within the summary bound; as JSON when the
prompt asks for JSON (ours), as plain text otherwise. Tokens are counted exactly
(o200k_base) on what the model would receive before each turn's reply.

Run it in its own venv (langmem and langchain are not dependencies of langgraph-stm)::

    python3 -m venv /tmp/benchvenv
    /tmp/benchvenv/bin/pip install -e . -r benchmarks/requirements.txt
    /tmp/benchvenv/bin/python benchmarks/bench_summarize.py
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph.message import add_messages

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_json import write_json
from conversation import GOLD, TURNS, retained, turns

from langgraph_stm import SummarizeNode, TokenCounter, build_context
from langgraph_stm.state import merge_constraints, merge_plan, update_summary
from langgraph_stm.summarizers import ExtractiveSummarizer

SYSTEM = "You are a billing migration agent."
TRIGGER = 6000
KEEP = 2000
CONTEXT = 4000
SUMMARY_TOKENS = 600
TERSE = 120

COUNTER = TokenCounter()
FACTLIKE = re.compile(
    r"\b(goal|never|always|must|do not|keep|decided|agreed|we will|retry|retried|rotated|"
    r"split|fell back|recovery|plan update|is now|in_progress|done)\b",
    re.IGNORECASE,
)


def _fact_sentences() -> list[str]:
    """The fact-like sentences of the whole conversation (what a faithful model keeps)."""
    found: list[str] = []
    for turn in turns():
        for message in turn.messages:
            for piece in re.split(r"(?<=[.!?])\s+", str(message.text)):
                piece = piece.strip()
                if piece and FACTLIKE.search(piece) and piece not in found:
                    found.append(piece)
    return found


FACT_SENTENCES = _fact_sentences()


class FactModel(BaseChatModel):
    """A scripted summarizer model: keeps the conversation facts visible in its prompt.

    It answers with every fact-like sentence of the conversation that appears in its
    prompt (in the messages to summarize or in a previous summary), newest first within
    the summary bound, in prompt order. It never repeats the library's instructions, so
    every library gets the same faithful, bounded summarizer.
    """

    calls: int = 0
    cap: int | None = None
    """If set, the summary never exceeds this many tokens (a terse, lossy model)."""

    @property
    def _llm_type(self) -> str:
        return "fact-extracting-fake"

    def _answer(self, messages: list[BaseMessage], bound: int) -> str:
        text = "\n".join(str(m.text) for m in messages)
        wants_json = '"completed_steps"' in text
        if wants_json:  # ours states its bound in the instructions
            match = re.search(r"at most (\d+) tokens", text)
            bound = int(match.group(1)) if match else bound
        if self.cap is not None:
            bound = min(bound, self.cap)
        visible = sorted(
            (text.rfind(sentence), sentence) for sentence in FACT_SENTENCES if sentence in text
        )
        kept: list[tuple[int, str]] = []
        used = 0
        for position, sentence in reversed(visible):  # newest first within the bound
            cost = COUNTER.count_text(sentence) + 1
            if used + cost > bound - 20:
                continue
            kept.append((position, sentence))
            used += cost
        summary = "\n".join(sentence for _, sentence in sorted(kept)) or "No notable facts."
        if not wants_json:
            return summary
        return json.dumps(
            {
                "text": summary,
                "goal": None,
                "constraints": [],
                "completed_steps": [],
                "open_questions": [],
                "errors": [],
            }
        )

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.calls += 1
        bound = int(kwargs.get("max_tokens") or SUMMARY_TOKENS)
        answer = AIMessage(self._answer(messages, bound))
        return ChatResult(generations=[ChatGeneration(message=answer)])


@dataclass
class Run:
    """Measurements of one system over the conversation."""

    name: str
    tokens: list[int] = field(default_factory=list)
    final_input: list[BaseMessage] = field(default_factory=list)
    model_calls: int = 0
    seconds: float = 0.0
    error: str | None = None


def run_ours(name: str, node: SummarizeNode, model: FactModel | None) -> Run:
    run = Run(name)
    state: dict[str, Any] = {"messages": [SystemMessage(SYSTEM, id="system")]}
    started = time.perf_counter()
    for turn in turns():
        state["messages"] = add_messages(state["messages"], turn.messages)
        if "goal" in turn.state_update:
            state["goal"] = turn.state_update["goal"]
        if "plan" in turn.state_update:
            state["plan"] = merge_plan(state.get("plan"), turn.state_update["plan"])
        if "constraints" in turn.state_update:
            state["constraints"] = merge_constraints(
                state.get("constraints"), turn.state_update["constraints"]
            )
        update = node(state)
        if update:
            state["messages"] = add_messages(state["messages"], update["messages"])
            state["summary"] = update_summary(state.get("summary"), update["summary"])
        context = build_context(state, max_tokens=CONTEXT, token_counter=COUNTER).messages
        run.tokens.append(COUNTER(context))
        run.final_input = context
    run.seconds = time.perf_counter() - started
    run.model_calls = model.calls if model else (state.get("summary") or {}).get("version", 0)
    return run


def run_langmem(
    model: FactModel, *, max_tokens: int = CONTEXT, trigger: int = TRIGGER, label: str = ""
) -> Run:
    run = Run(f"langmem SummarizationNode{label}")
    try:
        from langmem.short_term import SummarizationNode
    except ImportError as exc:  # pragma: no cover - depends on the bench venv
        run.error = f"langmem not installed ({exc})"
        return run
    node = SummarizationNode(
        model=model,
        max_tokens=max_tokens,
        max_tokens_before_summary=trigger,
        max_summary_tokens=SUMMARY_TOKENS,
        token_counter=COUNTER,
    )
    messages: list[BaseMessage] = [SystemMessage(SYSTEM, id="system")]
    context: dict[str, Any] = {}
    started = time.perf_counter()
    for turn in turns():
        messages = add_messages(messages, turn.messages)
        out = node.invoke({"messages": messages, "context": context})
        context = out.get("context", context)
        model_input = out["summarized_messages"]
        run.tokens.append(COUNTER(model_input))
        run.final_input = model_input
    run.seconds = time.perf_counter() - started
    run.model_calls = model.calls
    return run


def run_middleware(model: FactModel, *, trim: int | None = 4000, label: str = "") -> Run:
    run = Run(f"LangChain SummarizationMiddleware{label}")
    try:
        from langchain.agents.middleware import SummarizationMiddleware
    except ImportError as exc:  # pragma: no cover - depends on the bench venv
        run.error = f"langchain not installed ({exc})"
        return run
    middleware = SummarizationMiddleware(
        model=model,
        trigger=("tokens", TRIGGER),
        keep=("tokens", KEEP),
        token_counter=COUNTER,
        trim_tokens_to_summarize=trim,
    )
    messages: list[BaseMessage] = [SystemMessage(SYSTEM, id="system")]
    started = time.perf_counter()
    for turn in turns():
        messages = add_messages(messages, turn.messages)
        update = middleware.before_model({"messages": messages}, None)  # type: ignore[arg-type]
        if update:
            messages = add_messages(messages, update["messages"])
        run.tokens.append(COUNTER(messages))
        run.final_input = list(messages)
    run.seconds = time.perf_counter() - started
    run.model_calls = model.calls
    return run


def full_history() -> Run:
    run = Run("full history")
    messages: list[BaseMessage] = [SystemMessage(SYSTEM, id="system")]
    for turn in turns():
        messages = add_messages(messages, turn.messages)
        run.tokens.append(COUNTER(messages))
    run.final_input = messages
    return run


def mid_system(messages: list[BaseMessage]) -> str:
    """``yes`` when a SystemMessage appears after the first position (invariant 8)."""
    return "yes" if any(isinstance(m, SystemMessage) for m in messages[1:]) else "no"


def section(title: str, runs: list[Run], full: Run) -> dict[str, Any]:
    """One comparison as plain data: a row per system (the full history first)."""
    structured = [f for f in GOLD if f.structured]
    total_full = sum(full.tokens)
    rows: list[dict[str, Any]] = []
    for run in [full, *runs]:
        if run.error:
            rows.append({"name": run.name, "error": run.error})
            continue
        kept = retained(run.final_input)
        kept_structured = [f for f in kept if f.structured]
        rows.append(
            {
                "name": run.name,
                "final_in": run.tokens[-1],
                "mean_in": sum(run.tokens) / len(run.tokens),
                "saved": 1 - sum(run.tokens) / total_full,
                "gold": len(kept) / len(GOLD),
                "structured": len(kept_structured) / len(structured),
                "model_calls": run.model_calls,
                "seconds": run.seconds,
                "mid_system": mid_system(run.final_input),
                "missing": [f.name for f in GOLD if f not in kept],
            }
        )
    return {"title": title, "systems": rows}


def report_section(data: dict[str, Any], out: Callable[[str], None] = print) -> None:
    """Print one :func:`section` for a reader."""
    n_structured = sum(f.structured for f in GOLD)
    out(
        f"conversation: {TURNS} turns; budgets: trigger={TRIGGER} keep={KEEP} "
        f"context={CONTEXT} summary<={SUMMARY_TOKENS} tokens (o200k_base, exact)"
    )
    out(
        f"gold facts: {len(GOLD)} ({n_structured} structured: goal, constraints, plan, "
        f"pending approval; {len(GOLD) - n_structured} unstructured: decisions, error recoveries)"
    )
    out("")
    header = (
        f"{'system':<50} {'final in':>8} {'mean in':>8} {'saved':>6} "
        f"{'gold':>6} {'struct':>6} {'calls':>5} {'secs':>6} {'mid-sys':>7}"
    )
    out(header)
    out("-" * len(header))
    for row in data["systems"]:
        if "error" in row:
            out(f"{row['name']:<50} skipped: {row['error']}")
            continue
        out(
            f"{row['name']:<50} {row['final_in']:>8} {row['mean_in']:>8.0f} "
            f"{row['saved']:>6.1%} {row['gold']:>6.1%} {row['structured']:>6.1%} "
            f"{row['model_calls']:>5} {row['seconds']:>6.2f} {row['mid_system']:>7}"
        )
    out("")
    out(
        "final in / mean in: tokens of the model input at the last turn / averaged over all "
        "turns; saved: 1 - sum(model input tokens) / sum(full-history tokens) over all turns;"
    )
    out(
        "gold / struct: share of all / structured gold facts present in the final model input; "
        "calls: summarizer model calls (ours offline: summaries made);"
    )
    out("mid-sys: a SystemMessage after index 0 in the final model input (invariant 8).")
    out("")
    for row in data["systems"][1:]:
        if "error" not in row:
            out(f"{row['name']}: missing {row['missing'] or 'nothing'}")


def report(data: dict[str, Any]) -> None:
    """Print every section of :func:`measure` for a reader."""
    for i, part in enumerate(data["sections"]):
        if i:
            print()
            print(f"--- {part['title']} ---")
        report_section(part)


def measure() -> dict[str, Any]:
    """Every figure of the run, as plain data (what ``--json`` writes)."""
    full = full_history()
    offline = SummarizeNode(
        summarizer=ExtractiveSummarizer(),
        trigger_tokens=TRIGGER,
        keep_tokens=KEEP,
        token_counter=COUNTER,
        max_summary_tokens=SUMMARY_TOKENS,
    )
    scripted_model = FactModel()
    scripted = SummarizeNode(
        summarizer=scripted_model,
        trigger_tokens=TRIGGER,
        keep_tokens=KEEP,
        token_counter=COUNTER,
        max_summary_tokens=SUMMARY_TOKENS,
    )
    runs = [
        run_ours("langgraph-stm (offline extractive)", offline, None),
        run_ours("langgraph-stm (scripted model)", scripted, scripted_model),
        run_langmem(FactModel()),
        run_langmem(FactModel(), trigger=CONTEXT, label=" [trigger=max_tokens=4000]"),
        run_middleware(FactModel()),
        run_middleware(FactModel(), trim=None, label=" [no trim]"),
    ]
    faithful = section("a faithful summary model", runs, full)
    terse_model = FactModel(cap=TERSE)
    terse = SummarizeNode(
        summarizer=terse_model,
        trigger_tokens=TRIGGER,
        keep_tokens=KEEP,
        token_counter=COUNTER,
        max_summary_tokens=SUMMARY_TOKENS,
    )
    lossy = section(
        f"the same with a terse, lossy summary model (summaries capped at {TERSE} tokens)",
        [
            run_ours("langgraph-stm (terse model)", terse, terse_model),
            run_langmem(FactModel(cap=TERSE), trigger=CONTEXT, label=" [trigger=4000, terse]"),
            run_middleware(FactModel(cap=TERSE), trim=None, label=" [no trim, terse]"),
        ],
        full,
    )
    return {
        "turns": TURNS,
        "budgets": {
            "trigger": TRIGGER,
            "keep": KEEP,
            "context": CONTEXT,
            "summary": SUMMARY_TOKENS,
            "terse": TERSE,
        },
        "gold_facts": len(GOLD),
        "sections": [faithful, lossy],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--json", metavar="PATH", help="also write every figure as JSON to PATH ('-': stdout only)"
    )
    args = parser.parse_args()
    write_json(measure(), args.json, report)


if __name__ == "__main__":
    main()
