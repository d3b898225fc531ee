"""The public surface and the one shape every feature follows (issue: one API shape).

A change to the public names must be deliberate: this file lists them. Every feature is
a function returning a result with ``.messages`` and ``.update()`` plus one
:class:`StateNode`; the three history nodes accept the same ``on_invalid`` option and
raise the same error for the same broken history.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from langgraph.graph.message import add_messages

import langgraph_stm
from langgraph_stm import (
    ContextNode,
    SummarizeNode,
    TrimNode,
    build_context,
    repair_history,
    summarize_history,
    trim_history,
    validate_history,
)
from langgraph_stm._node import StateNode
from langgraph_stm.errors import InvalidArgumentError, STMError, ToolPairError

TOP_LEVEL = [
    "ApprovalToolNode",
    "ContextNode",
    "ContextResult",
    "RepairResult",
    "STMError",
    "STMSaver",
    "STMState",
    "SummarizeNode",
    "SummarizeResult",
    "ThreadState",
    "TokenCounter",
    "TrimNode",
    "TrimResult",
    "__version__",
    "asummarize_history",
    "build_context",
    "repair_history",
    "summarize_history",
    "trim_history",
    "validate_history",
]

SUBMODULES = {
    "langgraph_stm.state": {"STMState", "PlanStep", "Summary", "merge_plan", "remove_record"},
    "langgraph_stm.summarizers": {"ChatModelSummarizer", "ExtractiveSummarizer", "Summarizer"},
    "langgraph_stm.encryption": {"Keyring", "generate_key", "key_id", "ReencryptReport"},
    "langgraph_stm.errors": {"STMError", "ToolPairError", "StorageError"},
    "langgraph_stm.middleware": {"STMAgentState", "STMMiddleware"},
    "langgraph_stm.tools": {"ApprovalToolNode", "Decision", "Offloader", "tool_result_id"},
    "langgraph_stm.typing": {"TokenCounterLike", "SummarizerLike", "OnInvalid", "RepairCause"},
}

PAUSED_THEN_NEW_MESSAGE: list[BaseMessage] = [
    HumanMessage("book the 9:00 flight", id="h1"),
    AIMessage("", id="a1", tool_calls=[{"name": "book", "args": {"at": "9:00"}, "id": "c1"}]),
    HumanMessage("never mind", id="h2"),
]
"""The history of a thread paused at an approval when the user sends a new message."""


def history_nodes(on_invalid: str) -> list[Any]:
    return [
        TrimNode(max_tokens=10_000, token_counter=len, on_invalid=on_invalid),  # type: ignore[arg-type]
        SummarizeNode(
            trigger_tokens=10_000,
            keep_tokens=5_000,
            token_counter=len,
            on_invalid=on_invalid,  # type: ignore[arg-type]
        ),
        ContextNode(max_tokens=10_000, token_counter=len, on_invalid=on_invalid),  # type: ignore[arg-type]
    ]


class TestPublicSurface:
    """What users import is a short, deliberate list."""

    def test_top_level_names_are_the_listed_ones(self) -> None:
        """langgraph_stm.__all__ is exactly TOP_LEVEL, sorted, each name importable."""
        assert sorted(langgraph_stm.__all__) == sorted(TOP_LEVEL)
        assert langgraph_stm.__all__ == sorted(langgraph_stm.__all__)
        for name in TOP_LEVEL:
            assert getattr(langgraph_stm, name) is not None

    @pytest.mark.parametrize("module", sorted(SUBMODULES))
    def test_public_submodules_export_records_summarizers_errors_and_aliases(
        self, module: str
    ) -> None:
        """Records, summarizers, errors and typing aliases live in public submodules."""
        imported = __import__(module, fromlist=["__all__"])
        assert SUBMODULES[module] <= set(imported.__all__)
        for name in imported.__all__:
            assert getattr(imported, name) is not None

    def test_every_error_raised_on_purpose_is_in_the_errors_module(self) -> None:
        """Every class in langgraph_stm.errors derives from STMError."""
        import langgraph_stm.errors as errors

        for name in errors.__all__:
            assert issubclass(getattr(errors, name), STMError)

    def test_the_version_has_one_source(self) -> None:
        """__version__ is the one in _version.py, which pyproject reads."""
        from langgraph_stm._version import __version__

        assert langgraph_stm.__version__ == __version__


class TestOneNodeShape:
    """Every node is a named StateNode, sync and async, keyword options checked when built."""

    @pytest.mark.parametrize(
        ("node", "name"),
        [
            (TrimNode(max_tokens=10), "trim"),
            (SummarizeNode(trigger_tokens=10, keep_tokens=5), "summarize"),
            (ContextNode(max_tokens=10), "context"),
        ],
    )
    def test_nodes_are_named_runnables(self, node: StateNode, name: str) -> None:
        """add_node(node) uses the node's name; invoke and ainvoke take a config."""
        assert isinstance(node, StateNode)
        assert isinstance(node, Runnable)
        assert node.name == name
        for method in (node.invoke, node.ainvoke):
            assert "config" in inspect.signature(method).parameters

    @pytest.mark.parametrize("cls", [TrimNode, SummarizeNode, ContextNode])
    def test_options_are_keyword_only(self, cls: type[StateNode]) -> None:
        """No positional budget or model: every option is named."""
        params = inspect.signature(cls).parameters.values()
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)

    @pytest.mark.parametrize(
        "build",
        [
            lambda: ContextNode(max_tokens=100, recent_units=-5),
            lambda: ContextNode(max_tokens=100, on_invalid="fix"),
            lambda: TrimNode(max_tokens=0),
            lambda: TrimNode(max_tokens=10, start_on="ai"),
            lambda: SummarizeNode(trigger_tokens=10, keep_tokens=20),
            lambda: SummarizeNode(trigger_tokens=10, keep_tokens=5, on_invalid="fix"),
            lambda: TrimNode(max_tokens=10, token_counter="tiktoken"),
            lambda: TrimNode(max_tokens=10, name=""),
        ],
    )
    def test_bad_options_fail_when_the_node_is_built(self, build: Any) -> None:
        """A node with a bad option never gets into a graph."""
        with pytest.raises(InvalidArgumentError):
            build()

    @pytest.mark.parametrize(
        "result",
        [
            trim_history(PAUSED_THEN_NEW_MESSAGE[:2], max_tokens=100, token_counter=len),
            summarize_history(
                PAUSED_THEN_NEW_MESSAGE[:2], trigger_tokens=100, keep_tokens=50, token_counter=len
            ),
            build_context({"messages": PAUSED_THEN_NEW_MESSAGE[:2]}, max_tokens=100),
            repair_history(PAUSED_THEN_NEW_MESSAGE),
        ],
    )
    def test_every_result_has_messages_and_update(self, result: Any) -> None:
        """Results carry .messages (a list) and .update() (a dict a node returns)."""
        assert isinstance(result.messages, list)
        assert isinstance(result.update(), dict)

    def test_sync_and_async_calls_give_the_same_update(self) -> None:
        """node(state), node.invoke(state) and await node.ainvoke(state) agree."""
        history = [HumanMessage(f"q{i}", id=f"h{i}") for i in range(6)]
        for node in (
            TrimNode(max_tokens=3, token_counter=len),
            SummarizeNode(trigger_tokens=3, keep_tokens=2, token_counter=len),
            ContextNode(max_tokens=4, token_counter=len),
        ):
            state = {"messages": history}
            expected = node(state)
            assert node.invoke(state, {"configurable": {}}) == expected
            assert asyncio.run(node.ainvoke(state)) == expected


class TestOnInvalidParity:
    """The three history nodes agree on a broken history."""

    def test_raise_gives_the_same_tool_pair_error_from_every_node(self) -> None:
        """A new message after a paused call: one ToolPairError text, under the trigger too."""
        messages = []
        for node in history_nodes("raise"):
            with pytest.raises(ToolPairError) as caught:
                node({"messages": PAUSED_THEN_NEW_MESSAGE})
            assert caught.value.message_ids == ("a1",)
            messages.append(str(caught.value))
        assert len(set(messages)) == 1

    def test_the_error_names_only_options_that_exist(self) -> None:
        """Every option the error suggests is accepted by every function and node."""
        with pytest.raises(ToolPairError) as caught:
            trim_history(PAUSED_THEN_NEW_MESSAGE, max_tokens=100, token_counter=len)
        suggested = set(re.findall(r"pass (\w+)='(\w+)'", str(caught.value)))
        assert suggested == {("on_invalid", "repair")}
        for target in (
            trim_history,
            summarize_history,
            build_context,
            TrimNode,
            SummarizeNode,
            ContextNode,
        ):
            for option, _ in suggested:
                assert option in inspect.signature(target).parameters, target

    def test_repair_makes_the_history_valid_in_every_node(self) -> None:
        """on_invalid='repair': a valid history whose synthetic result names the cause."""
        trim, summarize, context = history_nodes("repair")
        state = {"messages": PAUSED_THEN_NEW_MESSAGE}
        for update in (trim(state), summarize(state)):
            repaired = add_messages(list(PAUSED_THEN_NEW_MESSAGE), update["messages"])
            assert validate_history(repaired) == []
            assert [m.id for m in repaired] == ["h1", "a1", "stm-repair:a1:c1", "h2"]
            assert "a new message arrived" in str(repaired[2].content)
            assert "It may have started" in str(repaired[2].content)
        shown = context(state)["llm_input_messages"]
        assert validate_history(shown) == []
        assert [m.id for m in shown] == ["h1", "a1", "stm-repair:a1:c1", "h2"]

    def test_repair_never_claims_a_call_was_lost_before_it_ran(self) -> None:
        """The default text does not say the call never ran (it may have)."""
        text = str(repair_history(PAUSED_THEN_NEW_MESSAGE).messages[2].content)
        assert "lost before it ran" not in text
        assert "never returned" not in text

    @pytest.mark.parametrize(
        ("cause", "phrase"),
        [
            ("not_approved", "before it was approved"),
            ("rejected", "rejected by the reviewer"),
            ("result_discarded", "its result was discarded"),
        ],
    )
    def test_a_known_cause_is_told_to_the_model(self, cause: Any, phrase: str) -> None:
        """causes= names what really happened to a call."""
        result = repair_history(PAUSED_THEN_NEW_MESSAGE, causes={"c1": cause})
        assert phrase in str(result.messages[2].content)
        assert result.messages[2].response_metadata == {"stm_repair": cause}

    def test_an_unknown_cause_is_refused(self) -> None:
        """causes= values are checked."""
        with pytest.raises(InvalidArgumentError, match="causes"):
            repair_history(PAUSED_THEN_NEW_MESSAGE, causes={"c1": "gone"})  # type: ignore[dict-item]


class TestOneSourceForFieldLists:
    """Field lists are derived from the TypedDicts, not written out again."""

    def test_structured_fields_come_from_stm_state(self) -> None:
        """STM_FIELDS is STMState's keys but messages; the saver's projection uses it."""
        from langgraph_stm.checkpoint import _threads
        from langgraph_stm.state import STM_FIELDS, STMState

        assert tuple(k for k in STMState.__annotations__ if k != "messages") == STM_FIELDS
        assert _threads._FIELDS is STM_FIELDS

    def test_summary_content_fields_match_the_draft(self) -> None:
        """A SummaryDraft carries exactly what a Summary stores besides version/coverage."""
        import dataclasses

        from langgraph_stm.state import SUMMARY_CONTENT_FIELDS, Summary
        from langgraph_stm.summarizers import SummaryDraft

        assert tuple(f.name for f in dataclasses.fields(SummaryDraft)) == SUMMARY_CONTENT_FIELDS
        assert "covered_until_message_id" not in Summary.__annotations__


class TestSameErrorsForTheSameInput:
    """Options and inputs are checked the same way by every feature."""

    @pytest.mark.parametrize(
        "node",
        [
            lambda cause: TrimNode(
                max_tokens=1000, token_counter=len, on_invalid="repair", repair_cause=cause
            ),
            lambda cause: SummarizeNode(
                trigger_tokens=1000,
                keep_tokens=500,
                token_counter=len,
                on_invalid="repair",
                repair_cause=cause,
            ),
        ],
    )
    def test_repair_cause_is_told_by_every_node(self, node: Any) -> None:
        """A graph whose tools run in an ApprovalToolNode says the call never ran."""
        update = node("not_approved")({"messages": PAUSED_THEN_NEW_MESSAGE})
        repaired = add_messages(list(PAUSED_THEN_NEW_MESSAGE), update["messages"])
        assert "cancelled before it was approved" in str(repaired[2].content)
        assert "It did not run" in str(repaired[2].content)
        context = ContextNode(
            max_tokens=1000, token_counter=len, on_invalid="repair", repair_cause="not_approved"
        )({"messages": PAUSED_THEN_NEW_MESSAGE})["llm_input_messages"]
        assert "cancelled before it was approved" in str(context[2].content)

    @pytest.mark.parametrize(
        "build",
        [
            lambda: TrimNode(max_tokens=10, repair_cause="lost"),
            lambda: SummarizeNode(trigger_tokens=10, keep_tokens=5, repair_cause="lost"),
            lambda: ContextNode(max_tokens=10, repair_cause="lost"),
            lambda: ContextNode(max_tokens=10, system_prompt=5),
            lambda: ContextNode(max_tokens=10, output_key=None),
            lambda: TrimNode(max_tokens=10, messages_key=""),
            lambda: SummarizeNode(trigger_tokens=10, keep_tokens=5, summary_key=3),
        ],
    )
    def test_bad_options_are_invalid_arguments(self, build: Any) -> None:
        """Every option is checked when the node is built."""
        with pytest.raises(InvalidArgumentError):
            build()

    def test_a_string_instead_of_messages_is_the_same_error_everywhere(self) -> None:
        """trim, summarize, context and repair refuse a str with InvalidMessageError."""
        from langgraph_stm.errors import InvalidMessageError

        with pytest.raises(InvalidMessageError):
            trim_history("hello", max_tokens=10)  # type: ignore[arg-type]
        with pytest.raises(InvalidMessageError):
            summarize_history("hello", trigger_tokens=10, keep_tokens=5)  # type: ignore[arg-type]
        with pytest.raises(InvalidMessageError):
            build_context({"messages": "hello"}, max_tokens=10)
        with pytest.raises(InvalidMessageError):
            repair_history(None)  # type: ignore[arg-type]

    def test_a_counter_returning_garbage_is_refused_by_summarize_as_by_trim(self) -> None:
        """A counter that returns None is an InvalidArgumentError, not a TypeError."""
        history = [HumanMessage(f"q{i}", id=f"h{i}") for i in range(4)]
        with pytest.raises(InvalidArgumentError, match="non-negative int"):
            trim_history(history, max_tokens=10, token_counter=lambda m: None)  # type: ignore[arg-type,return-value]
        with pytest.raises(InvalidArgumentError, match="non-negative int"):
            summarize_history(
                history,
                trigger_tokens=3,
                keep_tokens=1,
                token_counter=lambda m: None,  # type: ignore[arg-type,return-value]
            )

    def test_summarize_checks_the_state_fields_it_reads(self) -> None:
        """A malformed plan in state is a StateUpdateError, never blamed on the model."""
        from langgraph_stm.errors import StateUpdateError

        history = [HumanMessage(f"q{i}", id=f"h{i}") for i in range(4)]
        with pytest.raises(StateUpdateError) as caught:
            summarize_history(
                history, trigger_tokens=3, keep_tokens=1, token_counter=len, state={"plan": "x"}
            )
        assert caught.value.field == "plan"
