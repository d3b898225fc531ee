"""Spec of summarize_history / asummarize_history / SummarizeNode (issue 4)."""

from __future__ import annotations

import copy
from typing import Annotated, Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import add_messages
from pydantic import BaseModel

from langgraph_stm import SummarizeNode, TokenCounter, asummarize_history, summarize_history
from langgraph_stm.errors import (
    InvalidArgumentError,
    InvalidMessageError,
    SummarizationError,
    ToolPairError,
)
from langgraph_stm.state import update_summary
from langgraph_stm.summarizers import SummaryDraft, SummaryRequest
from tests.support.models import AsyncOnlyChatModel, ScriptedChatModel, summary_json


class PydanticState(BaseModel):
    """A graph state schema as a pydantic model."""

    messages: Annotated[list[AnyMessage], add_messages]
    goal: str | None = None
    summary: dict[str, Any] | None = None


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
        assert result.update() == {}

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
        assert second.summary["coverage"]["last_message_id"] == "a7"

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
        assert set(result.update()) == {"messages", "summary"}

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

    def test_outside_a_graph_run_every_call_reaches_the_summarizer(self) -> None:
        """No hidden memo: a direct re-run is a deliberate retry, deciding the same removals."""
        summarizer = RecordingSummarizer()
        kwargs: dict[str, Any] = {"trigger_tokens": 4, "keep_tokens": 2, "token_counter": len}
        first = summarize_history(chat(6), summarizer=summarizer, **kwargs)
        again = summarize_history(chat(6), summarizer=summarizer, **kwargs)
        assert len(summarizer.requests) == 2
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

    def test_run_twice_on_the_same_state_gives_the_same_update(self) -> None:
        """Same removals and version; the summary reducer keeps the first one applied."""
        model = ScriptedChatModel(script=[summary_json("first 9 turns"), summary_json("again")])
        node = SummarizeNode(summarizer=model, trigger_tokens=8, keep_tokens=4, token_counter=len)
        state = self.state()
        first, second = node(state), node(state)
        assert [m.id for m in first["messages"]] == [m.id for m in second["messages"]]
        assert first["summary"]["version"] == second["summary"]["version"] == 1
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
        node = SummarizeNode(summarizer=model, trigger_tokens=8, keep_tokens=4, token_counter=len)
        state = self.state()
        before = dump(state["messages"])
        with pytest.raises(SummarizationError) as caught:
            node(state)
        assert isinstance(caught.value.__cause__, ConnectionError)
        assert dump(state["messages"]) == before
        assert "summary" not in state

    async def test_ainvoke_uses_the_async_model_path(self) -> None:
        """In an async graph the node awaits the model (the sync path is never used)."""
        model = AsyncOnlyChatModel(script=[summary_json("summary")])
        node = SummarizeNode(summarizer=model, trigger_tokens=8, keep_tokens=4, token_counter=len)
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

        from langgraph_stm._node import PREGEL_CALL_KEY as _PREGEL_CALL_KEY

        assert CONFIG_KEY_CALL == _PREGEL_CALL_KEY

    def test_sync_graph_summarize_and_interrupt_in_one_node(self) -> None:
        """invoke + interrupt() + resume: the model is called once, one version applied."""
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import START, StateGraph
        from langgraph.types import Command, interrupt

        from langgraph_stm import STMState

        model = ScriptedChatModel(script=[summary_json("nine turns"), AssertionError("twice")])
        node = SummarizeNode(summarizer=model, trigger_tokens=8, keep_tokens=4, token_counter=len)

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
        """In an async node of an async run the sync function calls the summarizer directly."""
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
            return result.update()

        graph = StateGraph(STMState).add_node(summarize).add_edge(START, "summarize").compile()
        values = await graph.ainvoke({"messages": chat(6)})
        assert ids(values["messages"]) == ["h4", "a5"]
        assert len(summarizer.requests) == 1

    @pytest.mark.parametrize("with_model", [True, False])
    def test_every_summarizer_answer_is_a_checkpointed_task(self, with_model: bool) -> None:
        """One mechanism: inside a graph run any summarizer's answer is the stm_summarizer task."""
        from langgraph.graph import START, StateGraph

        from langgraph_stm import STMState

        model = ScriptedChatModel(script=[summary_json("nine turns")]) if with_model else None
        node = SummarizeNode(summarizer=model, trigger_tokens=8, keep_tokens=4, token_counter=len)
        graph = StateGraph(STMState).add_node(node).add_edge(START, "summarize").compile()
        chunks = list(graph.stream({"messages": chat(12)}, stream_mode="updates"))
        assert [name for chunk in chunks for name in chunk if name != "summarize"] == [
            "stm_summarizer"
        ]
        assert chunks[-1]["summarize"]["summary"]["version"] == 1

    def test_async_runs_are_told_apart_by_their_callback_manager(self) -> None:
        """Fails loudly if LangGraph stops giving async runs an AsyncCallbackManager."""
        import asyncio

        from langgraph.graph import START, StateGraph

        from langgraph_stm import STMState
        from langgraph_stm._summarize import _graph_run

        seen: list[str | None] = []

        def sync_node(state: STMState) -> dict[str, Any]:
            seen.append(_graph_run())
            return {}

        async def async_node(state: STMState) -> dict[str, Any]:
            seen.append(_graph_run())
            return {}

        sync_graph = StateGraph(STMState).add_node(sync_node).add_edge(START, "sync_node")
        async_graph = StateGraph(STMState).add_node(async_node).add_edge(START, "async_node")
        sync_graph.compile().invoke({"messages": []})
        asyncio.run(sync_graph.compile().ainvoke({"messages": []}))
        asyncio.run(async_graph.compile().ainvoke({"messages": []}))
        assert seen == ["sync", "async-thread", "async-loop"]
        assert _graph_run() is None

    def test_sync_graph_on_an_event_loop_thread_survives_a_rebuild(self) -> None:
        """graph.invoke called from a coroutine (Jupyter, an async handler): after an
        interrupt, a rebuilt graph with a new model object resumes without calling it."""
        import asyncio

        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import START, StateGraph
        from langgraph.types import Command, interrupt

        from langgraph_stm import STMState

        saver = InMemorySaver()
        config: Any = {"configurable": {"thread_id": "jupyter"}}

        def build(model: ScriptedChatModel) -> Any:
            node = SummarizeNode(
                summarizer=model, trigger_tokens=8, keep_tokens=4, token_counter=len
            )

            def summarize_then_ask(state: STMState) -> dict[str, Any]:
                update = node(state)
                interrupt("continue?")
                return update

            return (
                StateGraph(STMState)
                .add_node(summarize_then_ask)
                .add_edge(START, "summarize_then_ask")
                .compile(checkpointer=saver)
            )

        first = ScriptedChatModel(script=[summary_json("nine turns")])
        rebuilt = ScriptedChatModel(script=[AssertionError("the model was called again")])

        async def cell_one() -> None:
            build(first).invoke({"messages": chat(12, system=True)}, config)

        async def cell_two() -> dict[str, Any]:
            values: dict[str, Any] = build(rebuilt).invoke(Command(resume=True), config)
            return values

        asyncio.run(cell_one())
        values = asyncio.run(cell_two())
        assert (first.calls, rebuilt.calls) == (1, 0)
        assert values["summary"]["text"] == "nine turns"
        assert ids(values["messages"]) == ["s", "a9", "h10", "a11"]

    def test_a_failing_model_inside_a_sync_graph_is_a_summarization_error(self) -> None:
        """The task path keeps the error contract: SummarizationError chained to the cause."""
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import START, StateGraph

        from langgraph_stm import STMState

        model = ScriptedChatModel(script=[ConnectionError("HTTP 502"), summary_json("ok")])
        node = SummarizeNode(summarizer=model, trigger_tokens=8, keep_tokens=4, token_counter=len)
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


class TestContiguousCoverage:
    """The summary covers one contiguous run of the oldest messages, nothing after a live one."""

    def test_the_summary_never_covers_messages_after_a_live_message(self) -> None:
        """Eviction stops at the latest user turn: nothing after it is folded (reviewer's B2)."""
        history: list[BaseMessage] = [
            HumanMessage("start", id="h0"),
            AIMessage("ok", id="a0"),
            HumanMessage("latest request", id="h1"),
            *(AIMessage(f"step {i}", id=f"a{i}") for i in range(1, 7)),
        ]
        result = summarize_history(history, trigger_tokens=5, keep_tokens=3, token_counter=len)
        assert result.summarized_ids == ("h0", "a0")
        assert ids(result.messages) == ["h1", "a1", "a2", "a3", "a4", "a5", "a6"]
        assert result.fits is False  # the protected latest turn blocks further eviction
        assert result.summary is not None
        assert result.summary["coverage"]["last_message_id"] == "a0"
        assert result.summary["coverage"] == {
            "first_message_id": "h0",
            "last_message_id": "a0",
            "message_count": 2,
        }

    def test_a_tool_loop_after_the_only_user_turn_is_reported_not_fitting(self) -> None:
        """Nothing before the protected turn to fold: no summary, fits=False, state unchanged."""
        history: list[BaseMessage] = [HumanMessage("migrate billing", id="h0")]
        for i in range(6):
            history += [
                AIMessage("", id=f"a{i}", tool_calls=[{"name": "step", "args": {}, "id": f"c{i}"}]),
                ToolMessage(f"ok {i}", tool_call_id=f"c{i}", id=f"t{i}"),
            ]
        result = summarize_history(history, trigger_tokens=6, keep_tokens=5, token_counter=len)
        assert not result.summarized
        assert result.messages == history
        assert result.fits is False
        assert result.update() == {}

    def test_coverage_stays_contiguous_across_summarizations(self) -> None:
        """Each new version extends the covered run right after covered_until_message_id."""
        full = chat(30, system=True)
        live: list[BaseMessage] = []
        summary = None
        removed: list[str] = []
        for message in full:
            live.append(message)
            result = summarize_history(
                live, running_summary=summary, trigger_tokens=8, keep_tokens=4, token_counter=len
            )
            removed += result.summarized_ids
            live, summary = result.messages, result.summary
        assert summary is not None
        assert removed == ids(full[1 : 1 + len(removed)])
        assert live == [full[0], *full[1 + len(removed) :]]
        assert summary["coverage"] == {
            "first_message_id": "h0",
            "last_message_id": removed[-1],
            "message_count": len(removed),
        }
        assert summary["coverage"]["last_message_id"] == removed[-1]


class TestLeadingSystemMessage:
    """Only a SystemMessage first in the input is the leading one (invariant 8)."""

    def history(self) -> list[BaseMessage]:
        return [
            HumanMessage("start", id="h0"),
            AIMessage("ok", id="a0"),
            SystemMessage("Note: the tenant switched to EU billing.", id="note"),
            HumanMessage("continue", id="h1"),
            AIMessage("working", id="a1"),
            HumanMessage("and then?", id="h2"),
            AIMessage("done", id="a2"),
            HumanMessage("thanks", id="h3"),
        ]

    def test_a_mid_history_system_note_never_becomes_leading(self) -> None:
        """A cut right before a system note folds the note too: it is never left first."""
        result = summarize_history(
            self.history(), trigger_tokens=7, keep_tokens=6, token_counter=len
        )
        assert result.summarized_ids == ("h0", "a0", "note")
        assert not isinstance(result.messages[0], SystemMessage)

    def test_a_system_note_is_summarized_as_data(self) -> None:
        """The note's content reaches the summary text like any other unit."""
        history = [SystemMessage("You are a billing agent.", id="s"), *self.history()]
        result = summarize_history(history, trigger_tokens=6, keep_tokens=3, token_counter=len)
        assert result.messages[0] is history[0]
        assert "note" in result.summarized_ids
        assert result.summary is not None
        assert "system note: Note: the tenant switched to EU billing." in result.summary["text"]
        assert not any(isinstance(m, SystemMessage) for m in result.messages[1:])

    def test_a_note_added_after_a_tool_only_history_never_becomes_first(self) -> None:
        """Without a HumanMessage the newest unit stays, so a later note is never first."""
        check = AIMessage("", id="a9", tool_calls=[{"name": "check", "args": {}, "id": "c9"}])
        history: list[BaseMessage] = [
            *parallel_calls(2),
            check,
            ToolMessage("all fine", tool_call_id="c9", id="t9"),
        ]
        result = summarize_history(history, trigger_tokens=2, keep_tokens=1, token_counter=len)
        assert result.summarized_ids == ("fan", "t0", "t1")
        assert ids(result.messages) == ["a9", "t9"]
        assert result.fits is False
        note = SystemMessage("Note: quota reset.", id="note")
        grown = [*result.messages, note, AIMessage("next", id="a10")]
        again = summarize_history(
            grown,
            running_summary=result.summary,
            trigger_tokens=2,
            keep_tokens=1,
            token_counter=len,
        )
        assert again.summarized_ids == ("a9", "t9", "note")
        assert ids(again.messages) == ["a10"]

    def test_a_second_system_message_at_the_start_is_not_leading(self) -> None:
        """[S, S2, ...]: S stays first; S2 is an ordinary unit, folded oldest first."""
        history = [
            SystemMessage("You are a billing agent.", id="s"),
            SystemMessage("Extra note.", id="s2"),
            *chat(6),
        ]
        result = summarize_history(history, trigger_tokens=5, keep_tokens=3, token_counter=len)
        assert result.messages[0] is history[0]
        assert result.summarized_ids[0] == "s2"


BAD: Any = "not-what-is-expected"


class TestArgumentErrors:
    """Every error raised on purpose is an STMError naming what is wrong."""

    @pytest.mark.parametrize(
        ("trigger", "keep", "bound"),
        [
            ("10", 5, 10),
            (10, "5", 10),
            (10, 5, "9"),
            (True, 1, 10),
            (10, True, 10),
            (10.0, 5, 10),
            (10, 5.5, 10),
            (10, 5, 1.5),
            (-1, 1, 10),
            (10, -1, 10),
            (10, 5, -3),
        ],
    )
    def test_budgets_must_be_positive_ints(self, trigger: Any, keep: Any, bound: Any) -> None:
        """Strings, bools, floats and non-positive values are InvalidArgumentError."""
        with pytest.raises(InvalidArgumentError):
            summarize_history(
                chat(2), trigger_tokens=trigger, keep_tokens=keep, max_summary_tokens=bound
            )
        with pytest.raises(InvalidArgumentError):
            SummarizeNode(trigger_tokens=trigger, keep_tokens=keep, max_summary_tokens=bound)

    def test_an_unknown_summarizer_is_an_invalid_argument(self) -> None:
        """A summarizer that is neither a Summarizer nor a chat model is refused clearly."""
        with pytest.raises(InvalidArgumentError, match="summarizer must be"):
            summarize_history(
                chat(6), summarizer=BAD, trigger_tokens=4, keep_tokens=2, token_counter=len
            )
        with pytest.raises(InvalidArgumentError, match="summarizer must be"):
            SummarizeNode(summarizer=BAD, trigger_tokens=4, keep_tokens=2)

    def test_a_token_counter_must_be_callable(self) -> None:
        """A non-callable counter is refused before any work."""
        with pytest.raises(InvalidArgumentError, match="token_counter"):
            summarize_history(chat(6), trigger_tokens=4, keep_tokens=2, token_counter=BAD)

    def test_a_malformed_running_summary_or_state_is_refused(self) -> None:
        """running_summary must be a Summary dict with a version; state a mapping."""
        with pytest.raises(InvalidArgumentError, match="running_summary"):
            summarize_history(
                chat(6), running_summary=BAD, trigger_tokens=4, keep_tokens=2, token_counter=len
            )
        with pytest.raises(InvalidArgumentError, match="state"):
            summarize_history(
                chat(6), state=BAD, trigger_tokens=4, keep_tokens=2, token_counter=len
            )

    def test_a_missing_messages_key_names_the_key_and_the_node(self) -> None:
        """The node says which key is missing and which node it is, as an STMError."""
        node = SummarizeNode(trigger_tokens=4, keep_tokens=2, token_counter=len, name="compact")
        for call in (node, node.invoke):
            with pytest.raises(InvalidArgumentError) as caught:
                call({"chat": chat(6)})
            assert "'messages'" in str(caught.value)
            assert "'compact'" in str(caught.value)

    async def test_a_missing_messages_key_in_the_async_path(self) -> None:
        """acall/ainvoke report the missing key the same way."""
        node = SummarizeNode(trigger_tokens=4, keep_tokens=2, token_counter=len)
        with pytest.raises(InvalidArgumentError, match="'messages'"):
            await node.ainvoke({"chat": chat(6)})

    def test_a_state_that_is_neither_mapping_nor_model_is_refused(self) -> None:
        """A list or a string is not a state."""
        node = SummarizeNode(trigger_tokens=4, keep_tokens=2, token_counter=len)
        with pytest.raises(InvalidArgumentError, match="state"):
            node(chat(6))  # type: ignore[arg-type]

    def test_any_mapping_is_a_state(self) -> None:
        """A read-only mapping works like a dict."""
        from types import MappingProxyType

        node = SummarizeNode(trigger_tokens=8, keep_tokens=4, token_counter=len)
        update = node(MappingProxyType({"messages": chat(12), "goal": "g"}))
        assert update["summary"]["version"] == 1

    def test_a_pydantic_state_is_read_by_attribute(self) -> None:
        """In a graph whose state schema is a pydantic model, the node reads attributes."""
        from langgraph.graph import START, StateGraph

        summarizer = RecordingSummarizer()
        node = SummarizeNode(
            summarizer=summarizer, trigger_tokens=8, keep_tokens=4, token_counter=len
        )
        graph = StateGraph(PydanticState).add_node(node).add_edge(START, "summarize").compile()
        start: Any = {"messages": chat(12), "goal": "migrate billing"}
        values = graph.invoke(start)
        assert ids(values["messages"]) == ["h8", "a9", "h10", "a11"]
        assert values["summary"]["version"] == 1
        assert summarizer.requests[0].goal == "migrate billing"
