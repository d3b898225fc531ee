"""Scripted chat models for tests: no network, sync and async, every call recorded."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr


def summary_json(text: str, **fields: Any) -> str:
    """Return a valid JSON answer for ChatModelSummarizer with ``text`` and ``fields``."""
    answer: dict[str, Any] = {
        "text": text,
        "goal": None,
        "constraints": [],
        "completed_steps": [],
        "open_questions": [],
        "errors": [],
    }
    answer.update(fields)
    return json.dumps(answer)


class ScriptedChatModel(BaseChatModel):
    """Answers from a script: each entry is a string, or an exception to raise.

    When the script runs out, ``respond(prompt)`` is used (or the last string is
    repeated). ``prompts`` records every call, sync or async, in order; ``options``
    the keyword options of each call (``tools``, ``tool_choice`` once bound).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: list[Any] = Field(default_factory=list)
    respond: Callable[[list[BaseMessage]], str] | None = None
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    options: list[dict[str, Any]] = Field(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _position: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> int:
        """How many times the model was called."""
        return len(self.prompts)

    def _next(
        self, messages: Sequence[BaseMessage], options: Mapping[str, Any] | None = None
    ) -> ChatResult:
        with self._lock:
            self.prompts.append(list(messages))
            self.options.append(dict(options or {}))
            position = self._position
            self._position += 1
        if position < len(self.script):
            item = self.script[position]
        elif self.respond is not None:
            item = self.respond(list(messages))
        elif self.script:
            item = self.script[-1]
        else:
            raise RuntimeError("ScriptedChatModel has no answer left")
        if isinstance(item, BaseException):
            raise item
        return ChatResult(generations=[ChatGeneration(message=self._message(item, position))])

    def _message(self, item: Any, position: int) -> AIMessage:
        return AIMessage(content=str(item))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._next(messages, kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._next(messages, kwargs)


class AsyncOnlyChatModel(ScriptedChatModel):
    """A scripted model whose sync path fails: proves the async path never blocks on it."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise AssertionError("the sync path of an async-only model was used")


class ToolCallingChatModel(ScriptedChatModel):
    """A scripted model with tool calling, so ``with_structured_output`` works on it.

    A ``dict`` in the script is answered as a call of the bound tool (the first one),
    with the dict as its args; an ``AIMessage`` is answered as is; anything else as
    plain text. ``options`` shows what was bound (``tools``, ``tool_choice``).
    """

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def _message(self, item: Any, position: int) -> AIMessage:
        if isinstance(item, AIMessage):
            return item
        if not isinstance(item, dict):
            return super()._message(item, position)
        tools = self.options[position].get("tools") or [{"function": {"name": "unbound"}}]
        name = tools[0]["function"]["name"]
        return AIMessage("", tool_calls=[{"name": name, "args": item, "id": f"call-{position}"}])
