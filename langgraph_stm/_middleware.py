"""The ``create_agent`` middleware: :class:`STMMiddleware` and its state :class:`STMAgentState`.

LangChain's ``create_agent`` runs ``before_model`` hooks as graph nodes before each
model call and ``wrap_model_call`` around the call itself. The middleware uses both,
and nothing else, so it composes with the middleware that gate tools
(``HumanInTheLoopMiddleware`` pauses in ``after_model`` and resumes in the tools node):

- **State.** :class:`STMAgentState` is LangChain's ``AgentState`` plus the structured
  fields of :class:`~langgraph_stm.STMState` with their reducers (goal, plan,
  constraints, artifacts, last error, summary); ``create_agent`` merges it into the
  agent's state, so ``agent.invoke({"messages": [...], "goal": ...})`` works and a
  tool returning ``Command(update={"plan": ...})`` merges by id.
- **Before the model** (a graph node): :func:`~langgraph_stm.summarize_history` folds
  the oldest whole units into the running summary when the messages count more than
  ``summarize_over`` (the summarizer call is a checkpointed LangGraph task, so a
  resumed run never calls it again), then :func:`~langgraph_stm.trim_history` drops
  the oldest whole units beyond ``trim_tokens``. Both return reducer updates
  (``RemoveMessage`` by id, the new ``Summary``): kept messages keep their ids and
  order, and the protected set of those functions (leading system message, pending
  tool-call unit, latest human message) is never evicted.
- **Around the model call**: :func:`~langgraph_stm.build_context` builds the request
  from the state within ``max_tokens``: one system message (the agent's
  ``system_prompt`` merged with a leading ``SystemMessage`` of the state), the
  structured state as a user-role block, then whole units, newest first. The request
  is replaced with ``request.override(system_message=..., messages=...)``; the state
  keeps every message.

The rules (units, what is protected, budgets, option checks) are those of the
functions and nodes; this module only wires them to the hooks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage, SystemMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from langgraph_stm._context import ContextNode, ContextResult, build_context
from langgraph_stm._errors import InvalidArgumentError
from langgraph_stm._policy import OnInvalid, OnOverflow, StartOn, check_positive
from langgraph_stm._state import STMState
from langgraph_stm._summarize import SummarizeNode, SummarizeResult, SummarizerLike
from langgraph_stm._summarizers import DEFAULT_MAX_SUMMARY_TOKENS
from langgraph_stm._tokens import TokenCounterLike
from langgraph_stm._trim import TrimNode, trim_history
from langgraph_stm._units import RepairCause

__all__ = ["STMAgentState", "STMMiddleware"]


class STMAgentState(AgentState[Any], STMState):
    """The agent state of ``create_agent`` with the structured fields of :class:`STMState`.

    ``messages`` (and LangChain's own keys) come from ``AgentState``; ``goal``,
    ``plan``, ``constraints``, ``artifacts``, ``last_error`` and ``summary`` come with
    their reducers from :class:`~langgraph_stm.STMState`. Subclass it to add keys, and
    set the subclass as ``state_schema`` of a middleware of your own.
    """


class STMMiddleware(AgentMiddleware[STMAgentState, Any, Any]):
    """Short-term memory for ``create_agent``: structured state, summaries, budgeted requests.

    Args:
        max_tokens: the token budget of each model request (its messages, the system
            message included; tool schemas are not counted). Raises like
            :func:`~langgraph_stm.build_context` when the mandatory part alone
            (system prompt, structured state, pending unit, latest human message) is
            over it, unless ``on_overflow="keep_mandatory"``.
        summarize_over: when the state's messages count more than this before a model
            call, the oldest whole units are folded into ``state["summary"]`` (off
            when ``None``).
        keep_tokens: what summarizing keeps (default ``summarize_over // 2``).
        trim_tokens: when set, the state's messages are then trimmed to this many
            tokens (oldest whole units removed from the live state; they stay in
            checkpoint history, and are not in the summary). The protected messages
            stay even when they alone are over it: the request's budget is
            ``max_tokens``.
        summarizer: a :class:`~langgraph_stm.summarizers.Summarizer` or a chat model;
            default the offline :class:`~langgraph_stm.summarizers.ExtractiveSummarizer`.
        token_counter: counts a list of messages (default
            :class:`~langgraph_stm.TokenCounter`).
        recent_units: how many of the newest units outrank artifact summaries in the
            request (see :func:`~langgraph_stm.build_context`).
        start_on: ``"human"`` (default) or ``"any"``: where a trimmed window may start.
        on_invalid: ``"repair"`` answers a call left without a result (a thread paused
            at an approval that got a new message instead) with a synthetic result, in
            the request and, when summarizing or trimming, in the state; ``"raise"``
            (default) raises :class:`~langgraph_stm.errors.ToolPairError`.
        repair_cause: what such a synthetic result says happened to the call.
        on_overflow: ``"raise"`` (default) or ``"keep_mandatory"`` (send the mandatory
            part alone) when it is over ``max_tokens``.
        max_summary_tokens: bound of the summary text.

    Options are checked when the middleware is built (:class:`InvalidArgumentError`).
    It composes with ``HumanInTheLoopMiddleware`` (``middleware=[STMMiddleware(...),
    HumanInTheLoopMiddleware(...)]``): a tool call waiting for approval is the pending
    unit, which neither summarizing nor trimming ever touches, and the approved call
    reaches the next request whole, with its result.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage
        >>> model = GenericFakeChatModel(messages=iter([AIMessage("Refund sent.")]))
        >>> agent = create_agent(model, middleware=[STMMiddleware(max_tokens=500)],
        ...                      system_prompt="You are a billing agent.")
        >>> out = agent.invoke({"messages": [{"role": "user", "content": "Refund order 42"}],
        ...                     "goal": "refund order 42",
        ...                     "plan": [{"id": "s1", "task": "check the order"}]})
        >>> out["goal"], out["plan"][0]["status"], out["messages"][-1].content
        ('refund order 42', 'pending', 'Refund sent.')
    """

    state_schema = STMAgentState

    def __init__(
        self,
        *,
        max_tokens: int,
        summarize_over: int | None = None,
        keep_tokens: int | None = None,
        trim_tokens: int | None = None,
        summarizer: SummarizerLike | None = None,
        token_counter: TokenCounterLike | None = None,
        recent_units: int = 6,
        start_on: StartOn = "human",
        on_invalid: OnInvalid = "raise",
        repair_cause: RepairCause = "superseded",
        on_overflow: OnOverflow = "raise",
        max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
    ) -> None:
        super().__init__()
        # The nodes check every option; the middleware only holds them.
        self.context = ContextNode(
            max_tokens=max_tokens,
            token_counter=token_counter,
            recent_units=recent_units,
            start_on=start_on,
            on_invalid=on_invalid,
            repair_cause=repair_cause,
            on_overflow=on_overflow,
        )
        counter = self.context.token_counter
        self.summarize: SummarizeNode | None = None
        if summarize_over is not None:
            trigger = check_positive("summarize_over", summarize_over)
            try:
                self.summarize = SummarizeNode(
                    trigger_tokens=trigger,
                    keep_tokens=max(trigger // 2, 1) if keep_tokens is None else keep_tokens,
                    summarizer=summarizer,
                    token_counter=counter,
                    max_summary_tokens=max_summary_tokens,
                    on_invalid=on_invalid,
                    repair_cause=repair_cause,
                )
            except InvalidArgumentError as exc:
                raise InvalidArgumentError(
                    f"STMMiddleware: {exc} (trigger_tokens is summarize_over here)"
                ) from None
        elif summarizer is not None or keep_tokens is not None:
            raise InvalidArgumentError(
                "summarizer and keep_tokens take effect only with summarize_over: pass "
                "summarize_over=<tokens> to summarize, or drop them"
            )
        self.trim: TrimNode | None = None
        if trim_tokens is not None:
            check_positive("trim_tokens", trim_tokens)
            self.trim = TrimNode(
                max_tokens=trim_tokens,
                token_counter=counter,
                start_on=start_on,
                on_invalid=on_invalid,
                repair_cause=repair_cause,
                on_overflow="keep_mandatory",
            )

    def __repr__(self) -> str:
        return (
            f"STMMiddleware(max_tokens={self.context.max_tokens}, "
            f"summarize={self.summarize!r}, trim={self.trim!r})"
        )

    # -- before the model: reducer updates of the state --------------------------------

    def before_model(self, state: STMAgentState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Summarize, then trim, the state's messages; return the reducer update or ``None``."""
        summarized = self.summarize.result(state) if self.summarize is not None else None
        return self._update(state, summarized)

    async def abefore_model(
        self, state: STMAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of :meth:`before_model`: the summarizer's ``asummarize`` is awaited."""
        summarized = await self.summarize.aresult(state) if self.summarize is not None else None
        return self._update(state, summarized)

    def _update(
        self, state: STMAgentState, summarized: SummarizeResult | None
    ) -> dict[str, Any] | None:
        """Combine the summarize result with a trim of what it kept into one update."""
        if self.trim is None:
            return (summarized.update() or None) if summarized is not None else None
        if summarized is None:
            return self.trim.run(state, None) or None
        trimmed = trim_history(
            summarized.messages,
            max_tokens=self.trim.max_tokens,
            token_counter=self.trim.token_counter,
            start_on=self.trim.start_on,
            on_overflow=self.trim.on_overflow,
        )  # summarized.messages is already repaired: nothing left to repair
        update = summarized.update()
        if not trimmed.removed_ids:
            return update or None
        removals: list[BaseMessage] = list(update.get("messages", []))
        if removals and removals[0].id == REMOVE_ALL_MESSAGES:
            update["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *trimmed.messages]
        else:
            removals.extend(RemoveMessage(id=message_id) for message_id in trimmed.removed_ids)
            update["messages"] = removals
        return update

    # -- around the model call: the request from build_context -------------------------

    def context_for(self, request: ModelRequest[Any]) -> ContextResult:
        """Return the :class:`~langgraph_stm.ContextResult` the model gets for ``request``.

        The request's messages (the state's, as ``create_agent`` and outer middleware
        passed them) and the state's structured fields, with the request's system
        message as ``system_prompt``.
        """
        options = self.context
        return build_context(
            {**request.state, "messages": request.messages},
            max_tokens=options.max_tokens,
            system_prompt=request.system_message,
            token_counter=options.token_counter,
            recent_units=options.recent_units,
            start_on=options.start_on,
            on_invalid=options.on_invalid,
            repair_cause=options.repair_cause,
            on_overflow=options.on_overflow,
        )

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        messages = self.context_for(request).messages
        system: SystemMessage | None = None
        if messages and isinstance(messages[0], SystemMessage):
            system, messages = messages[0], messages[1:]
        return request.override(system_message=system, messages=cast("list[AnyMessage]", messages))

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        """Call the model with the budgeted context of the state instead of its messages."""
        return handler(self._request(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        """Async twin of :meth:`wrap_model_call`."""
        return await handler(self._request(request))
