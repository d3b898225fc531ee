"""Spec of the two shipped summarizers: the offline extractive one and the chat-model one."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.exceptions import ModelAPIError, ModelRateLimitError
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables.retry import ExponentialJitterParams

from langgraph_stm import SummarizeNode, TokenCounter
from langgraph_stm._model_summarizer import EXPECTED_KEYS, parse_draft
from langgraph_stm.errors import InvalidArgumentError, SummarizationError
from langgraph_stm.summarizers import (
    ChatModelSummarizer,
    ExtractiveSummarizer,
    Summarizer,
    SummaryRequest,
)
from tests.support.models import ScriptedChatModel, ToolCallingChatModel, summary_json

COUNT = TokenCounter().count_text


def call(call_id: str, name: str, **args: object) -> AIMessage:
    return AIMessage(
        "", id=f"a-{call_id}", tool_calls=[{"name": name, "args": args, "id": call_id}]
    )


def result(call_id: str, text: str, *, error: bool = False) -> ToolMessage:
    status = "error" if error else "success"
    return ToolMessage(text, tool_call_id=call_id, id=f"t-{call_id}", status=status)


def conversation() -> tuple[BaseMessage, ...]:
    return (
        HumanMessage("Migrate billing to v2. Never email external domains.", id="h1"),
        AIMessage("We decided to export invoices first.", id="a1"),
        call("c1", "export_invoices", month="2024-05"),
        result("c1", "exported 1,204 invoices"),
        call("c2", "billing_api", op="switch"),
        result("c2", "HTTP 503 Service Unavailable", error=True),
        AIMessage("The API is down; I will retry with backoff.", id="a2"),
        call("c3", "billing_api", op="switch"),
        result("c3", "switched"),
        AIMessage("Step 2 is completed. Should I notify the finance team?", id="a3"),
    )


class TestExtractiveSummarizer:
    def test_is_a_summarizer(self) -> None:
        """It satisfies the Summarizer protocol (sync and async)."""
        assert isinstance(ExtractiveSummarizer(), Summarizer)

    def test_extracts_requests_constraints_decisions_tools_and_recoveries(self) -> None:
        """One tagged line per fact; constraints verbatim; errors carry their recovery."""
        draft = ExtractiveSummarizer().summarize(SummaryRequest(conversation()))
        lines = draft.text.splitlines()
        assert lines[0] == "Summary of the earlier conversation:"
        assert "- [constraint] Never email external domains." in lines
        assert "- [request] Migrate billing to v2." in lines
        assert "- [decision] We decided to export invoices first." in lines
        assert '- [tool] export_invoices(month="2024-05") -> exported 1,204 invoices' in lines
        assert draft.constraints == ("Never email external domains.",)
        assert draft.errors == (
            "billing_api failed: HTTP 503 Service Unavailable; recovery: "
            "The API is down; I will retry with backoff.",
        )
        assert draft.completed_steps == ("Step 2 is completed.",)
        assert draft.open_questions == ("Should I notify the finance team?",)
        assert draft.goal == "Migrate billing to v2."

    def test_a_retry_that_succeeds_is_the_recovery(self) -> None:
        """With no words from the assistant, the successful retry is recorded."""
        messages = (
            call("c1", "fetch", url="x"),
            result("c1", "timed out", error=True),
            call("c2", "fetch", url="x"),
            result("c2", "200 OK"),
        )
        draft = ExtractiveSummarizer().summarize(SummaryRequest(messages))
        assert draft.errors == (
            'fetch failed: timed out; recovery: retried fetch(url="x") -> 200 OK',
        )

    def test_an_unrecovered_error_is_said_so(self) -> None:
        """An error at the end of the covered span has no recovery yet."""
        draft = ExtractiveSummarizer().summarize(
            SummaryRequest((call("c1", "deploy"), result("c1", "Error: quota exceeded")))
        )
        assert draft.errors == ("deploy failed: Error: quota exceeded; no recovery yet",)

    def test_the_goal_from_state_wins(self) -> None:
        """The structured goal is the summary's goal when the state has one."""
        draft = ExtractiveSummarizer().summarize(
            SummaryRequest(conversation(), goal="migrate billing to v2")
        )
        assert draft.goal == "migrate billing to v2"

    def test_previous_lines_and_fields_are_carried_forward(self) -> None:
        """Incremental: the new text starts from the previous one, without duplicates."""
        summarizer = ExtractiveSummarizer()
        first = summarizer.summarize(SummaryRequest(conversation()[:4]))
        previous = {
            "text": first.text,
            "version": 1,
            "constraints": list(first.constraints),
            "errors": [],
        }
        second = summarizer.summarize(SummaryRequest(conversation()[4:], previous=previous))  # type: ignore[arg-type]
        assert second.text.startswith(first.text)
        assert second.text.count("Never email external domains.") == 1
        assert second.constraints == ("Never email external domains.",)
        assert len(second.errors) == 1

    def test_foreign_summary_text_is_kept_as_earlier_lines(self) -> None:
        """A previous text in another format is carried forward, not lost."""
        previous = {"text": "The user is Ana from ACME.", "version": 4}
        draft = ExtractiveSummarizer().summarize(
            SummaryRequest((HumanMessage("Hi again", id="h9"),), previous=previous)  # type: ignore[arg-type]
        )
        assert "- [earlier] The user is Ana from ACME." in draft.text

    def test_the_bound_drops_tool_lines_first_and_constraints_last(self) -> None:
        """Over the bound, the least important and oldest lines go first."""
        messages: list[BaseMessage] = [
            HumanMessage("Never deploy on Fridays.", id="h0"),
            AIMessage("We decided to use blue-green deploys.", id="a0"),
        ]
        for i in range(40):
            messages += [call(f"c{i}", "probe", n=i), result(f"c{i}", f"probe {i} fine")]
        draft = ExtractiveSummarizer().summarize(
            SummaryRequest(tuple(messages), max_summary_tokens=80, count_text=COUNT)
        )
        assert COUNT(draft.text) <= 80
        assert "Never deploy on Fridays." in draft.text
        assert "blue-green" in draft.text
        assert "probe 39 fine" in draft.text  # newest tool lines survive
        assert "probe 0 fine" not in draft.text

    def test_a_tiny_bound_is_still_respected(self) -> None:
        """Even a bound smaller than one line gives a text within it."""
        draft = ExtractiveSummarizer().summarize(
            SummaryRequest(conversation(), max_summary_tokens=5, count_text=COUNT)
        )
        assert 0 < COUNT(draft.text) <= 5

    def test_is_deterministic(self) -> None:
        """Same request, same draft."""
        request = SummaryRequest(conversation())
        assert ExtractiveSummarizer().summarize(request) == ExtractiveSummarizer().summarize(
            request
        )

    async def test_async_twin(self) -> None:
        """asummarize gives the same draft."""
        request = SummaryRequest(conversation())
        assert await ExtractiveSummarizer().asummarize(request) == ExtractiveSummarizer().summarize(
            request
        )


VALID = summary_json(
    "Billing export done; API switch retried after a 503.",
    goal="migrate billing to v2",
    constraints=["Never email external domains."],
    errors=["billing_api 503; retried with backoff"],
)


class TestChatModelSummarizer:
    def request(self) -> SummaryRequest:
        return SummaryRequest(
            conversation(),
            goal="migrate billing to v2",
            plan=({"id": "s1", "task": "export invoices", "status": "done"},),
            constraints=(
                {
                    "id": "c1",
                    "text": "never email external domains",
                    "source_message_id": "h1",
                    "status": "confirmed",
                },
            ),
            max_summary_tokens=100,
        )

    def test_a_valid_json_answer_becomes_the_draft(self) -> None:
        """The structured fields are parsed and validated."""
        model = ScriptedChatModel(script=[VALID])
        draft = ChatModelSummarizer(model).summarize(self.request())
        assert draft.text == "Billing export done; API switch retried after a 503."
        assert draft.goal == "migrate billing to v2"
        assert draft.constraints == ("Never email external domains.",)
        assert model.calls == 1

    def test_a_fenced_answer_is_accepted(self) -> None:
        """Models often wrap JSON in a code fence."""
        model = ScriptedChatModel(script=[f"```json\n{VALID}\n```"])
        assert ChatModelSummarizer(model).summarize(self.request()).goal == "migrate billing to v2"

    def test_the_prompt_carries_state_previous_summary_and_a_transcript(self) -> None:
        """The structured state is context; tool results are quoted data, not tool messages."""
        model = ScriptedChatModel(script=[VALID])
        ChatModelSummarizer(model).summarize(self.request())
        prompt = model.prompts[0]
        assert not any(isinstance(m, ToolMessage) for m in prompt)
        body = prompt[-1].text
        assert "goal: migrate billing to v2" in body
        assert "plan step s1 [done]: export invoices" in body
        assert "constraint [confirmed]: never email external domains" in body
        assert "[tool result billing_api (error)] HTTP 503 Service Unavailable" in body
        assert '[assistant] calls: billing_api({"op": "switch"})' in body
        assert "at most 100 tokens" in prompt[0].text

    def test_an_invalid_answer_is_sent_back_with_the_problem(self) -> None:
        """A bounded retry names what was wrong."""
        model = ScriptedChatModel(script=["Sure! Here is the summary.", VALID])
        draft = ChatModelSummarizer(model, max_retries=1).summarize(self.request())
        assert draft.goal == "migrate billing to v2"
        assert model.calls == 2
        assert "no JSON object" in model.prompts[1][-1].text

    @pytest.mark.parametrize(
        "answer",
        [
            "[1, 2]",
            '{"text": 3}',
            '{"text": "ok", "constraints": "not a list"}',
            '{"text": "ok", "goal": 7}',
            json.dumps({"text": "word " * 300}),
        ],
    )
    def test_an_answer_that_stays_invalid_raises(self, answer: str) -> None:
        """After max_retries + 1 attempts: SummarizationError, and no more calls."""
        model = ScriptedChatModel(script=[answer])
        with pytest.raises(SummarizationError, match="no valid answer in 3 attempts"):
            ChatModelSummarizer(model, max_retries=2).summarize(self.request())
        assert model.calls == 3

    def test_a_raising_model_is_wrapped_at_once(self) -> None:
        """A model exception is not retried here; it is chained into SummarizationError."""
        boom = TimeoutError("read timed out")
        model = ScriptedChatModel(script=[boom, VALID])
        with pytest.raises(SummarizationError) as caught:
            ChatModelSummarizer(model).summarize(self.request())
        assert caught.value.__cause__ is boom
        assert model.calls == 1

    async def test_async_path_retries_too(self) -> None:
        """asummarize validates and retries like summarize."""
        model = ScriptedChatModel(script=["nope", VALID])
        draft = await ChatModelSummarizer(model).asummarize(self.request())
        assert draft.goal == "migrate billing to v2"
        assert model.calls == 2

    @pytest.mark.parametrize("retries", [-1, True, 1.5, "2"])
    def test_bad_retries_are_an_invalid_argument(self, retries: object) -> None:
        """max_retries counts extra attempts: an int >= 0, else InvalidArgumentError."""
        with pytest.raises(InvalidArgumentError, match="max_retries"):
            ChatModelSummarizer(ScriptedChatModel(), max_retries=retries)  # type: ignore[arg-type]

    def test_instructions_with_stray_braces_are_refused_early(self) -> None:
        """Instructions are a format string with {max_tokens}; other braces must be doubled."""
        with pytest.raises(InvalidArgumentError, match="instructions"):
            ChatModelSummarizer(ScriptedChatModel(), instructions='Answer {"text": ...}')
        ok = ChatModelSummarizer(
            ScriptedChatModel(), instructions='At most {max_tokens}; {{"text"}}'
        )
        assert ok.prompt(SummaryRequest(conversation()))[0].text.startswith("At most 600;")

    @pytest.mark.parametrize(
        "missing", ["goal", "constraints", "completed_steps", "open_questions", "errors"]
    )
    def test_an_answer_missing_a_key_is_sent_back(self, missing: str) -> None:
        """Every expected key must be present (null allowed): the problem names the key."""
        answer = json.loads(VALID)
        del answer[missing]
        model = ScriptedChatModel(script=[json.dumps(answer), VALID])
        draft = ChatModelSummarizer(model, max_retries=1).summarize(self.request())
        assert draft.goal == "migrate billing to v2"
        assert model.calls == 2
        assert f"missing key(s): {missing!r}" in model.prompts[1][-1].text

    def test_parse_draft_rejects_missing_keys(self) -> None:
        """parse_draft itself refuses an answer without the expected keys."""
        with pytest.raises(ValueError, match="missing key"):
            parse_draft('{"text": "user wants a refund", "goal": null}', 50, len)
        draft = parse_draft(
            '{"text": "t", "goal": null, "constraints": null, "completed_steps": [],'
            ' "open_questions": [], "errors": [], "extra": 1}',
            50,
            len,
        )
        assert (draft.text, draft.constraints) == ("t", ())


DRAFT: dict[str, Any] = json.loads(VALID)
NO_WAIT: ExponentialJitterParams = {"max": 0.0, "jitter": 0.0}


def bad_draft(**fields: Any) -> dict[str, Any]:
    return {**DRAFT, **fields}


def request() -> SummaryRequest:
    return TestChatModelSummarizer().request()


class TestStructuredOutputPath:
    def test_a_tool_calling_model_is_asked_for_the_schema(self) -> None:
        """With tool calling, the model gets the SummaryDraft tool, not a JSON prompt."""
        model = ToolCallingChatModel(script=[DRAFT])
        summarizer = ChatModelSummarizer(model)
        draft = summarizer.summarize(request())
        assert summarizer.structured
        assert draft.text == DRAFT["text"]
        assert draft.constraints == ("Never email external domains.",)
        (tool,) = model.options[0]["tools"]
        assert tool["function"]["name"] == "SummaryDraft"
        assert tool["function"]["parameters"]["required"] == list(EXPECTED_KEYS)
        assert model.options[0]["tool_choice"] == "any"
        system, body = model.prompts[0]
        assert "JSON" not in system.text
        assert "at most 100 tokens" in system.text
        assert body.text.endswith("Answer with the SummaryDraft structure only.")
        assert model.calls == 1

    def test_a_json_text_answer_is_not_parsed_there(self) -> None:
        """A valid JSON text without the tool call is invalid: structured output is the path."""
        model = ToolCallingChatModel(script=[VALID, bad_draft(text="from the tool call")])
        draft = ChatModelSummarizer(model).summarize(request())
        assert draft.text == "from the tool call"
        assert model.calls == 2

    def test_a_bad_structured_answer_is_asked_again_then_accepted(self) -> None:
        """LangChain's retry replays the same request until the answer is valid."""
        model = ToolCallingChatModel(script=[bad_draft(text=3), bad_draft(goal=7), DRAFT])
        draft = ChatModelSummarizer(model, max_retries=2).summarize(request())
        assert draft.goal == "migrate billing to v2"
        assert model.calls == 3
        assert model.prompts[0] == model.prompts[1] == model.prompts[2]
        assert all(options["tools"] for options in model.options)

    @pytest.mark.parametrize(
        ("answer", "problem"),
        [
            ({"text": "ok", "goal": None}, "missing key(s): 'constraints'"),
            (bad_draft(text="word " * 300), "more than the bound of 100"),
            (bad_draft(constraints="not a list"), "'constraints' must be a list of strings"),
            ("Sure! Here is the summary.", "did not fill the SummaryDraft structure"),
            (
                AIMessage("", tool_calls=[{"name": "other", "args": DRAFT, "id": "x"}]),
                "did not fill the SummaryDraft structure",
            ),
            (
                AIMessage(
                    "",
                    additional_kwargs={
                        "tool_calls": [
                            {
                                "id": "x",
                                "type": "function",
                                "function": {"name": "SummaryDraft", "arguments": "{not json"},
                            }
                        ]
                    },
                ),
                "could not be parsed (OutputParserException)",
            ),
        ],
    )
    def test_an_answer_that_stays_invalid_raises(self, answer: object, problem: str) -> None:
        """After max_retries + 1 attempts: SummarizationError naming the last problem."""
        model = ToolCallingChatModel(script=[answer])
        with pytest.raises(SummarizationError, match="no valid answer in 3 attempts") as caught:
            ChatModelSummarizer(model, max_retries=2).summarize(request())
        assert problem in str(caught.value)
        assert "unchanged" in str(caught.value)
        assert model.calls == 3

    def test_a_raising_model_is_wrapped_at_once(self) -> None:
        """An exception that is not transient is not retried; it is the error's cause."""
        boom = TimeoutError("read timed out")
        model = ToolCallingChatModel(script=[boom, DRAFT])
        with pytest.raises(SummarizationError, match="raised TimeoutError") as caught:
            ChatModelSummarizer(model).summarize(request())
        assert caught.value.__cause__ is boom
        assert model.calls == 1

    async def test_async_path_retries_and_gives_up_too(self) -> None:
        """asummarize takes the structured path, retries, and raises after the attempts."""
        model = ToolCallingChatModel(script=["nope", DRAFT])
        draft = await ChatModelSummarizer(model).asummarize(request())
        assert (draft.goal, model.calls) == ("migrate billing to v2", 2)
        stuck = ToolCallingChatModel(script=["nope"])
        with pytest.raises(SummarizationError, match="no valid answer in 2 attempts"):
            await ChatModelSummarizer(stuck, max_retries=1).asummarize(request())
        assert stuck.calls == 2

    def test_a_failure_in_a_node_changes_nothing(self) -> None:
        """Invalid structured answers end in SummarizationError and no state update."""
        model = ToolCallingChatModel(script=["I cannot summarize this."])
        node = SummarizeNode(
            summarizer=ChatModelSummarizer(model),
            trigger_tokens=8,
            keep_tokens=4,
            token_counter=len,
        )
        turns = [
            (HumanMessage(f"ask {i}", id=f"h{i}"), AIMessage(f"done {i}", id=f"a{i}"))
            for i in range(6)
        ]
        state: dict[str, Any] = {"messages": [m for turn in turns for m in turn]}
        before = [m.model_dump() for m in state["messages"]]
        with pytest.raises(SummarizationError):
            node(state)
        assert [m.model_dump() for m in state["messages"]] == before
        assert "summary" not in state
        assert model.calls == 3

    def test_structured_false_keeps_the_json_prompt(self) -> None:
        """structured=False asks a tool-calling model for JSON text, with no tools bound."""
        model = ToolCallingChatModel(script=[VALID])
        summarizer = ChatModelSummarizer(model, structured=False)
        assert not summarizer.structured
        assert summarizer.summarize(request()).goal == "migrate billing to v2"
        assert "tools" not in model.options[0]
        assert "ONE JSON object" in model.prompts[0][0].text

    def test_structured_true_requires_tool_calling(self) -> None:
        """structured=True with a model without with_structured_output is refused early."""
        with pytest.raises(InvalidArgumentError, match="with_structured_output"):
            ChatModelSummarizer(ScriptedChatModel(), structured=True)
        assert ChatModelSummarizer(ToolCallingChatModel(), structured=True).structured

    @pytest.mark.parametrize("options", [{"structured": "yes"}, {"retry_on": (ValueError, 3)}])
    def test_bad_options_are_an_invalid_argument(self, options: dict[str, Any]) -> None:
        """structured is None/True/False; retry_on a tuple of Exception subclasses."""
        with pytest.raises(InvalidArgumentError, match=next(iter(options))):
            ChatModelSummarizer(ToolCallingChatModel(), **options)


class TestTransientErrors:
    @pytest.mark.parametrize("structured", [True, False])
    def test_a_transient_error_is_retried_with_langchains_retry(self, structured: bool) -> None:
        """Rate limits and 5xx from the provider are retried, on both paths."""
        answer: object = DRAFT if structured else VALID
        model = ToolCallingChatModel(script=[ModelRateLimitError("429"), answer])
        summarizer = ChatModelSummarizer(model, structured=structured, backoff=NO_WAIT)
        assert summarizer.summarize(request()).goal == "migrate billing to v2"
        assert model.calls == 2

    async def test_transient_errors_that_persist_raise(self) -> None:
        """After max_retries + 1 tries the last transient error is the cause."""
        last = ModelAPIError("HTTP 502")
        model = ToolCallingChatModel(script=[ModelAPIError("HTTP 500"), last])
        summarizer = ChatModelSummarizer(model, max_retries=1, backoff=NO_WAIT)
        with pytest.raises(SummarizationError, match="raised ModelAPIError") as caught:
            await summarizer.asummarize(request())
        assert caught.value.__cause__ is last
        assert model.calls == 2

    def test_retry_on_names_the_transient_errors(self) -> None:
        """retry_on replaces the default set; () turns transient retries off."""
        model = ScriptedChatModel(script=[TimeoutError("slow"), VALID])
        summarizer = ChatModelSummarizer(model, retry_on=(TimeoutError,), backoff=NO_WAIT)
        assert summarizer.summarize(request()).goal == "migrate billing to v2"
        off = ToolCallingChatModel(script=[ModelRateLimitError("429"), DRAFT])
        with pytest.raises(SummarizationError, match="raised ModelRateLimitError"):
            ChatModelSummarizer(off, retry_on=()).summarize(request())
        assert off.calls == 1


def fake(answers: list[str]) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter(answers))


class TestJsonPromptFallback:
    def test_a_model_without_tool_calling_gets_the_json_prompt(self) -> None:
        """GenericFakeChatModel has no bind_tools: the own JSON parser is used."""
        summarizer = ChatModelSummarizer(fake([VALID]))
        assert not summarizer.structured
        assert "ONE JSON object" in summarizer.prompt(request())[0].text
        assert summarizer.summarize(request()).goal == "migrate billing to v2"

    async def test_invalid_answers_are_sent_back_sync_and_async(self) -> None:
        """The fallback retries with the problem, on both drivers, then gives up."""
        answers = ["Sure!", '{"text": "ok"}', VALID]
        sync = ChatModelSummarizer(fake(answers)).summarize(request())
        asynchronous = await ChatModelSummarizer(fake(answers)).asummarize(request())
        assert sync == asynchronous
        assert sync.goal == "migrate billing to v2"
        with pytest.raises(SummarizationError, match="no valid answer in 2 attempts"):
            await ChatModelSummarizer(fake(["a", "b"]), max_retries=1).asummarize(request())


MODELS: dict[str, Callable[[], BaseChatModel]] = {
    "structured": lambda: ToolCallingChatModel(script=["nope", bad_draft(text=""), DRAFT]),
    "json prompt": lambda: ScriptedChatModel(script=["nope", '{"text": ""}', VALID]),
    "generic fake": lambda: fake(["nope", '{"text": ""}', VALID]),
}


class TestOneLogicForSyncAndAsync:
    @pytest.mark.parametrize("kind", list(MODELS))
    async def test_sync_and_async_give_identical_drafts(self, kind: str) -> None:
        """The same script gives the same draft after the same attempts, on both paths."""
        sync_model, async_model = MODELS[kind](), MODELS[kind]()
        sync = ChatModelSummarizer(sync_model).summarize(request())
        asynchronous = await ChatModelSummarizer(async_model).asummarize(request())
        assert sync == asynchronous
        assert sync.errors == ("billing_api 503; retried with backoff",)
        if isinstance(sync_model, ScriptedChatModel) and isinstance(async_model, ScriptedChatModel):
            texts = [[m.text for m in prompt] for prompt in sync_model.prompts]
            assert texts == [[m.text for m in prompt] for prompt in async_model.prompts]
            assert sync_model.calls == 3
