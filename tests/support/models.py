"""Scripted chat models for tests: no network, sync and async, every call recorded."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
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
    repeated). ``prompts`` records every call, sync or async, in order.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: list[Any] = Field(default_factory=list)
    respond: Callable[[list[BaseMessage]], str] | None = None
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _position: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> int:
        """How many times the model was called."""
        return len(self.prompts)

    def _next(self, messages: Sequence[BaseMessage]) -> ChatResult:
        with self._lock:
            self.prompts.append(list(messages))
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
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=str(item)))])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._next(messages)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._next(messages)


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
