"""Spec of summarize_history / asummarize_history / SummarizeNode (issue 4)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import add_messages

from langgraph_stm import (
    InvalidArgumentError,
    InvalidMessageError,
    SummarizationError,
    SummarizeNode,
    SummaryDraft,
    SummaryRequest,
    TokenCounter,
    ToolPairError,
    asummarize_history,
    summarize_history,
    update_summary,
)
from tests.support.models import AsyncOnlyChatModel, ScriptedChatModel, summary_json


class RecordingSummarizer:
    """A summarizer that records its requests and answers a numbered text."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.requests: list[SummaryRequest] = []
        self.fail = fail

    def summarize(self, request: SummaryRequest) -> SummaryDraft:
        self.requests.append(request)
        if self.fail is not None:
            raise self.fail
        ids = ",".join(m.id or "" for m in request.messages)
        prior = request.previous["text"] + " | " if request.previous else ""
        return SummaryDraft(text=f"{prior}covered {ids}", goal=request.goal)

    async def asummarize(self, request: SummaryRequest) -> SummaryDraft:
        return self.summarize(request)


def chat(n: int, *, system: bool = False) -> list[BaseMessage]:
    """H0, A1, H2, A3, ... (n messages), optionally after a system message."""
    history: list[BaseMessage] = [SystemMessage("You are helpful.", id="s")] if system else []
    for i in range(n):
        history.append(
            HumanMessage(f"user turn {i}", id=f"h{i}")
            if i % 2 == 0
            else AIMessage(f"reply {i}", id=f"a{i}")
        )
    return history


def parallel_calls(n: int) -> list[BaseMessage]:
    calls = [{"name": "lookup", "args": {"k": i}, "id": f"c{i}"} for i in range(n)]
    return [
        AIMessage("", id="fan", tool_calls=calls),
        *(ToolMessage(f"value {i}", tool_call_id=f"c{i}", id=f"t{i}") for i in range(n)),
    ]


def ids(messages: list[BaseMessage]) -> list[str]:
    return [m.id or "" for m in messages]


def dump(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    return [m.model_dump() for m in messages]


class TestSummarizeHistory:
    def test_below_the_trigger_nothing_changes(self) -> None:
        """Under trigger_tokens the messages and the running summary come back as they were."""
        history = chat(4)
        previous = {"text": "old", "version": 3}
        result = summarize_history(
            history, running_summary=previous, trigger_tokens=4, keep_tokens=2, token_counter=len
        )
        assert result.messages == history
        assert result.summary is previous
        assert not result.summarized
        assert result.state_update() == {}

    def test_oldest_units_are_folded_until_the_rest_fits_keep_tokens(self) -> None:
        """Eviction goes oldest first and stops as soon as the remainder fits."""
        history = chat(10)
        result = summarize_history(history, trigger_tokens=8, keep_tokens=5, token_counter=len)
        assert ids(result.messages) == ["a5", "h6", "a7", "h8", "a9"]
        assert result.summarized_ids == ("h0", "a1", "h2", "a3", "h4")
        assert all(kept is history[5 + i] for i, kept in enumerate(result.messages))
        assert (result.tokens_before, result.tokens_after, result.fits) == (10, 5, True)

    def test_system_first_and_latest_human_verbatim(self) -> None:
        """[S, H1..H20]: S stays first and unchanged, the latest H is kept verbatim."""
        system = SystemMessage("You are a billing agent.", id="s")
        humans = [HumanMessage(f"request number {i}", id=f"h{i}") for i in range(1, 21)]
        before = dump([system, *humans])
        result = summarize_history(
            [system, *humans], trigger_tokens=10, keep_tokens=4, token_counter=len
        )
        assert result.messages[0] is system
        assert result.messages[-1] is humans[-1]
        assert dump([system, *humans]) == before
        assert not any(isinstance(m, SystemMessage) for m in result.messages[1:])
        assert result.summarized_ids == tuple(f"h{i}" for i in range(1, 18))

    @pytest.mark.parametrize("keep", range(2, 16))
    def test_ten_parallel_tool_calls_are_summarized_or_kept_together(self, keep: int) -> None:
        """An AI message with 10 parallel calls and its 10 results move as one unit."""
        history = [
            *chat(4),
            *parallel_calls(10),
            AIMessage("done", id="a9"),
            HumanMessage("ok", id="hz"),
        ]
        result = summarize_history(history, trigger_tokens=16, keep_tokens=keep, token_counter=len)
        unit = {"fan", *(f"t{i}" for i in range(10))}
        summarized = set(result.summarized_ids)
        assert unit <= summarized or not unit & summarized
        assert unit <= set(ids(result.messages)) or not unit & set(ids(result.messages))

    def test_pending_tool_calls_are_never_summarized(self) -> None:
        """An AI message waiting for approval (unanswered call) stays, with its results."""
        pending = AIMessage(
            "", id="ask", tool_calls=[{"name": "send_email", "args": {"to": "x"}, "id": "c1"}]
        )
        history = [*chat(8), pending]
        result = summarize_history(history, trigger_tokens=3, keep_tokens=1, token_counter=len)
        assert "ask" in ids(result.messages)
        assert "ask" not in result.summarized_ids
        assert result.fits is False  # the latest human and the pending call must stay

    def test_latest_human_stays_in_place_while_later_units_are_folded(self) -> None:
        """A long tool loop after the last user turn is summarized around that turn."""
        history: list[BaseMessage] = [HumanMessage("migrate billing", id="h0")]
        for i in range(6):
            history += [
                AIMessage("", id=f"a{i}", tool_calls=[{"name": "step", "args": {}, "id": f"c{i}"}]),
                ToolMessage(f"ok {i}", tool_call_id=f"c{i}", id=f"t{i}"),
            ]
        result = summarize_history(history, trigger_tokens=6, keep_tokens=5, token_counter=len)
        assert ids(result.messages) == ["h0", "a4", "t4", "a5", "t5"]
        assert result.summarized_ids[:2] == ("a0", "t0")

    def test_summary_version_and_coverage_accumulate(self) -> None:
        """Each summarization adds one version and extends the bounded coverage record."""
        first = summarize_history(chat(6), trigger_tokens=4, keep_tokens=2, token_counter=len)
        assert first.summary is not None
        history = [*first.messages, *chat(10)[6:]]
        second = summarize_history(
            history,
            running_summary=first.summary,
            trigger_tokens=4,
            keep_tokens=2,
            token_counter=len,
        )
        assert second.summary is not None
        assert second.summary["version"] == 2
        assert second.summary["coverage"] == {
            "first_message_id": "h0",
            "last_message_id": "a7",
            "message_count": 8,
        }
        assert second.summary["covered_until_message_id"] == "a7"

    def test_incremental_the_summarizer_sees_previous_summary_and_new_units_only(self) -> None:
        """The second call gets the first summary and only the newly evicted messages."""
        summarizer = RecordingSummarizer()
        first = summarize_history(
            chat(6), summarizer=summarizer, trigger_tokens=4, keep_tokens=2, token_counter=len
        )
        history = [*first.messages, *chat(10)[6:]]
        summarize_history(
            history,
            running_summary=first.summary,
            summarizer=summarizer,
            trigger_tokens=4,
            keep_tokens=2,
            token_counter=len,
        )
        second = summarizer.requests[1]
        assert second.previous == first.summary
        assert [m.id for m in second.messages] == ["h4", "a5", "h6", "a7"]

    def test_structured_state_is_context_and_stays_in_its_fields(self) -> None:
        """Goal, plan and constraints reach the summarizer; the result never touches them."""
        summarizer = RecordingSummarizer()
        state = {
            "goal": "migrate billing to v2",
            "plan": [{"id": "s1", "task": "export", "status": "done"}],
            "constraints": [
                {
                    "id": "c1",
                    "text": "never email external domains",
                    "source_message_id": None,
                    "status": "confirmed",
                }
            ],
        }
        snapshot = copy.deepcopy(state)
        result = summarize_history(
            chat(6),
            summarizer=summarizer,
            state=state,
            trigger_tokens=4,
            keep_tokens=2,
            token_counter=len,
        )
        request = summarizer.requests[0]
        assert request.goal == "migrate billing to v2"
        assert request.plan[0]["status"] == "done"
        assert request.constraints[0]["text"] == "never email external domains"
        assert state == snapshot
        assert set(result.state_update()) == {"messages", "summary"}

    def test_summary_text_is_bounded(self) -> None:
        """The stored text never exceeds max_summary_tokens, whatever the summarizer says."""

        class Verbose(RecordingSummarizer):
            def summarize(self, request: SummaryRequest) -> SummaryDraft:
                return SummaryDraft(text="word " * 5000)

        result = summarize_history(
            chat(6),
            summarizer=Verbose(),
            trigger_tokens=4,
            keep_tokens=2,
            token_counter=len,
            max_summary_tokens=50,
        )
        assert result.summary is not None
        assert TokenCounter().count_text(result.summary["text"]) <= 50

    def test_a_raising_summarizer_leaves_everything_untouched(self) -> None:
        """The caller gets SummarizationError chained to the cause; inputs are unchanged."""
        history = chat(6)
        previous = {"text": "user wants a refund", "version": 2}
        before = (dump(history), copy.deepcopy(previous))
        boom = RuntimeError("upstream 500: secret-token-123")
        with pytest.raises(SummarizationError) as caught:
            summarize_history(
                history,
                running_summary=previous,
                summarizer=RecordingSummarizer(fail=boom),
                trigger_tokens=4,
                keep_tokens=2,
                token_counter=len,
            )
        assert caught.value.__cause__ is boom
        assert "secret-token-123" not in str(caught.value)
        assert (dump(history), previous) == before

    def test_a_summarizer_returning_garbage_is_a_summarization_error(self) -> None:
        """Anything but a SummaryDraft with non-empty text is rejected."""

        class Garbage(RecordingSummarizer):
            def summarize(self, request: SummaryRequest) -> Any:
                return {"text": "not a draft"}

        with pytest.raises(SummarizationError, match="not a SummaryDraft"):
            summarize_history(
                chat(6), summarizer=Garbage(), trigger_tokens=4, keep_tokens=2, token_counter=len
            )

    def test_same_input_twice_calls_the_summarizer_once(self) -> None:
        """A re-run on the same input reuses the memoized answer: same ids, same version."""
        summarizer = RecordingSummarizer()
        kwargs: dict[str, Any] = {"trigger_tokens": 4, "keep_tokens": 2, "token_counter": len}
        first = summarize_history(chat(6), summarizer=summarizer, **kwargs)
        again = summarize_history(chat(6), summarizer=summarizer, **kwargs)
        assert len(summarizer.requests) == 1
        assert again.summarized_ids == first.summarized_ids
        assert again.summary == first.summary

    def test_running_again_on_its_own_output_changes_nothing(self) -> None:
        """Idempotence: the produced state is under the trigger, so nothing happens."""
        summarizer = RecordingSummarizer()
        kwargs: dict[str, Any] = {"trigger_tokens": 4, "keep_tokens": 2, "token_counter": len}
        first = summarize_history(chat(9, system=True), summarizer=summarizer, **kwargs)
        again = summarize_history(
            first.messages, running_summary=first.summary, summarizer=summarizer, **kwargs
        )
        assert again.messages == first.messages
        assert again.summary is first.summary
        assert len(summarizer.requests) == 1

    def test_a_broken_history_is_refused(self) -> None:
        """Orphan tool results and messages without ids get a clear STMError."""
        orphan = [HumanMessage("hi", id="h"), ToolMessage("x", tool_call_id="zz", id="t")]
        with pytest.raises(ToolPairError):
            summarize_history(orphan, trigger_tokens=1, keep_tokens=1, token_counter=len)
        with pytest.raises(InvalidMessageError):
            summarize_history([HumanMessage("hi")], trigger_tokens=1, keep_tokens=1)

    @pytest.mark.parametrize(
        ("trigger", "keep", "bound"), [(0, 1, 10), (10, 0, 10), (10, 11, 10), (10, 5, 0)]
    )
    def test_bad_budgets_are_refused(self, trigger: int, keep: int, bound: int) -> None:
        """trigger_tokens > 0, 0 < keep_tokens <= trigger_tokens, max_summary_tokens > 0."""
        with pytest.raises(InvalidArgumentError):
            summarize_history(
                chat(2), trigger_tokens=trigger, keep_tokens=keep, max_summary_tokens=bound
            )

    def test_default_counter_and_summarizer_work_offline(self) -> None:
        """With no counter and no summarizer: exact tiktoken counts, extractive summary."""
        history = chat(40, system=True)
        result = summarize_history(history, trigger_tokens=200, keep_tokens=100)
        assert result.summarized
        assert result.tokens_after <= 100 < result.tokens_before
        assert result.summary is not None
        assert "[request] user turn 0" in result.summary["text"]

    async def test_the_async_twin_gives_the_same_result(self) -> None:
        """asummarize_history awaits the summarizer and decides exactly like the sync one."""
        history = [*chat(6), *parallel_calls(3), HumanMessage("next", id="hz")]
        sync = summarize_history(history, trigger_tokens=6, keep_tokens=4, token_counter=len)
        result = await asummarize_history(
            history, trigger_tokens=6, keep_tokens=4, token_counter=len
        )
        assert result == sync

    async def test_the_async_twin_uses_the_async_model_path(self) -> None:
        """With a chat model, only ainvoke is used under asummarize_history."""
        model = AsyncOnlyChatModel(script=[summary_json("the user chatted")])
        result = await asummarize_history(
            chat(6), summarizer=model, trigger_tokens=4, keep_tokens=2, token_counter=len
        )
        assert result.summary is not None
        assert result.summary["text"] == "the user chatted"


class TestSummarizeNode:
    def state(self) -> dict[str, Any]:
        return {"messages": chat(12, system=True), "goal": "migrate billing to v2"}

    def test_returns_removals_and_the_new_summary(self) -> None:
        """The update is RemoveMessage by id for evicted messages plus the Summary."""
        node = SummarizeNode(trigger_tokens=8, keep_tokens=4, token_counter=len)
        update = node(self.state())
        assert all(isinstance(m, RemoveMessage) for m in update["messages"])
        assert [m.id for m in update["messages"]] == [
            f"{'h' if i % 2 == 0 else 'a'}{i}" for i in range(9)
        ]
        assert update["summary"]["version"] == 1
        assert set(update) == {"messages", "summary"}

    def test_no_update_below_the_trigger(self) -> None:
        """Under the trigger the node returns an empty update."""
        node = SummarizeNode(trigger_tokens=100, keep_tokens=50, token_counter=len)
        assert node(self.state()) == {}

    def test_run_twice_on_the_same_state_calls_the_model_once(self) -> None:
        """As on an interrupt() resume: same removals, same version, one model call."""
        model = ScriptedChatModel(script=[summary_json("first 9 turns"), summary_json("again")])
        node = SummarizeNode(model, trigger_tokens=8, keep_tokens=4, token_counter=len)
        state = self.state()
        first, second = node(state), node(state)
        assert model.calls == 1
        assert [m.id for m in first["messages"]] == [m.id for m in second["messages"]]
        assert first["summary"] == second["summary"]
        messages = add_messages(state["messages"], first["messages"])
        summary = update_summary(update_summary(None, first["summary"]), second["summary"])
        assert summary == first["summary"]
        assert node({**state, "messages": messages, "summary": summary}) == {}

    def test_removals_only_name_ids_in_state(self) -> None:
        """Applying the update through add_messages never hits a missing id."""
        node = SummarizeNode(trigger_tokens=8, keep_tokens=4, token_counter=len)
        state = self.state()
        update = node(state)
        present = {m.id for m in state["messages"]}
        assert {m.id for m in update["messages"]} <= present
        add_messages(state["messages"], update["messages"])

    def test_a_failing_model_raises_and_updates_nothing(self) -> None:
        """The model's exception reaches the caller as SummarizationError; no update."""
        model = ScriptedChatModel(script=[ConnectionError("HTTP 502 from provider")])
        node = SummarizeNode(model, trigger_tokens=8, keep_tokens=4, token_counter=len)
        state = self.state()
        before = dump(state["messages"])
        with pytest.raises(SummarizationError) as caught:
            node(state)
        assert isinstance(caught.value.__cause__, ConnectionError)
        assert dump(state["messages"]) == before
        assert "summary" not in state

    def test_model_and_summarizer_are_exclusive(self) -> None:
        """One source of summaries: a model or a summarizer."""
        with pytest.raises(InvalidArgumentError):
            SummarizeNode(
                ScriptedChatModel(),
                summarizer=RecordingSummarizer(),
                trigger_tokens=2,
                keep_tokens=1,
            )

    async def test_ainvoke_uses_the_async_model_path(self) -> None:
        """In an async graph the node awaits the model (the sync path is never used)."""
        model = AsyncOnlyChatModel(script=[summary_json("summary")])
        node = SummarizeNode(model, trigger_tokens=8, keep_tokens=4, token_counter=len)
        update = await node.ainvoke(self.state())
        assert update["summary"]["text"] == "summary"
        assert model.calls == 1

    def test_custom_keys(self) -> None:
        """messages_key and summary_key address other state keys."""
        node = SummarizeNode(
            trigger_tokens=8,
            keep_tokens=4,
            token_counter=len,
            messages_key="chat",
            summary_key="memo",
        )
        update = node({"chat": chat(12)})
        assert set(update) == {"chat", "memo"}


class TestInsideGraphRuns:
    """Inside a LangGraph run, the summarizer call is a checkpointed task."""

    def test_the_call_hook_key_we_detect_is_langgraphs(self) -> None:
        """Fails loudly if LangGraph renames the private key we use to detect a graph run."""
        from langgraph._internal._constants import CONFIG_KEY_CALL

        from langgraph_stm._summarize import _PREGEL_CALL_KEY

        assert CONFIG_KEY_CALL == _PREGEL_CALL_KEY

    def test_sync_graph_summarize_and_interrupt_in_one_node(self) -> None:
        """invoke + interrupt() + resume: the model is called once, one version applied."""
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import START, StateGraph
        from langgraph.types import Command, interrupt

        from langgraph_stm import STMState

        model = ScriptedChatModel(script=[summary_json("nine turns"), AssertionError("twice")])
        node = SummarizeNode(model, trigger_tokens=8, keep_tokens=4, token_counter=len)

        def summarize_then_ask(state: STMState) -> dict[str, Any]:
            update = node(state)
            interrupt("continue?")
            return update

        graph = (
            StateGraph(STMState)
            .add_node(summarize_then_ask)
            .add_edge(START, "summarize_then_ask")
            .compile(checkpointer=InMemorySaver())
        )
        config: Any = {"configurable": {"thread_id": "t"}}
        graph.invoke({"messages": chat(12, system=True)}, config)
        values = graph.invoke(Command(resume=True), config)
        assert model.calls == 1
        assert values["summary"]["text"] == "nine turns"
        assert ids(values["messages"]) == ["s", "a9", "h10", "a11"]

    async def test_the_sync_function_inside_an_async_node_does_not_block(self) -> None:
        """On an event-loop thread the sync function skips the task and uses the memo."""
        from langgraph.graph import START, StateGraph

        from langgraph_stm import STMState

        summarizer = RecordingSummarizer()

        async def summarize(state: STMState) -> dict[str, Any]:
            result = summarize_history(
                state["messages"],
                summarizer=summarizer,
                trigger_tokens=4,
                keep_tokens=2,
                token_counter=len,
            )
            return result.state_update()

        graph = StateGraph(STMState).add_node(summarize).add_edge(START, "summarize").compile()
        values = await graph.ainvoke({"messages": chat(6)})
        assert ids(values["messages"]) == ["h4", "a5"]
        assert len(summarizer.requests) == 1

    @pytest.mark.parametrize(("with_model", "tasks"), [(True, ["stm_summarizer"]), (False, [])])
    def test_only_model_answers_are_checkpointed_as_a_task(
        self, with_model: bool, tasks: list[str]
    ) -> None:
        """A model's answer is a checkpointed task; the deterministic default is not."""
        from langgraph.graph import START, StateGraph

        from langgraph_stm import STMState

        model = ScriptedChatModel(script=[summary_json("nine turns")]) if with_model else None
        node = SummarizeNode(model, trigger_tokens=8, keep_tokens=4, token_counter=len)
        graph = StateGraph(STMState).add_node(node).add_edge(START, "summarize").compile()
        chunks = list(graph.stream({"messages": chat(12)}, stream_mode="updates"))
        assert [name for chunk in chunks for name in chunk if name != "summarize"] == tasks
        assert chunks[-1]["summarize"]["summary"]["version"] == 1

    def test_a_failing_model_inside_a_sync_graph_is_a_summarization_error(self) -> None:
        """The task path keeps the error contract: SummarizationError chained to the cause."""
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import START, StateGraph

        from langgraph_stm import STMState

        model = ScriptedChatModel(script=[ConnectionError("HTTP 502"), summary_json("ok")])
        node = SummarizeNode(model, trigger_tokens=8, keep_tokens=4, token_counter=len)
        graph = (
            StateGraph(STMState)
            .add_node(node)
            .add_edge(START, "summarize")
            .compile(checkpointer=InMemorySaver())
        )
        config: Any = {"configurable": {"thread_id": "t"}}
        with pytest.raises(SummarizationError) as caught:
            graph.invoke({"messages": chat(12)}, config)
        assert isinstance(caught.value.__cause__, ConnectionError)
        assert graph.get_state(config).values.get("summary") is None
        values = graph.invoke(None, config)  # retry: the failure was not checkpointed
        assert values["summary"]["text"] == "ok"
        assert model.calls == 2
