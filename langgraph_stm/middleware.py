"""Short-term memory for LangChain's ``create_agent``: :class:`STMMiddleware`.

Needs the ``agents`` extra (``langchain >= 1.0``); importing :mod:`langgraph_stm`
itself never imports langchain. See :mod:`langgraph_stm._middleware` for what each
hook does, and ``docs/middleware.md`` for a walk-through with an approval.

Example:
    >>> from langchain.agents import create_agent
    >>> from langchain.agents.middleware import HumanInTheLoopMiddleware
    >>> from langchain_core.language_models import GenericFakeChatModel
    >>> from langchain_core.messages import AIMessage
    >>> from langgraph_stm.middleware import STMMiddleware
    >>> agent = create_agent(
    ...     GenericFakeChatModel(messages=iter([AIMessage("Hello!")])),
    ...     middleware=[STMMiddleware(max_tokens=400, summarize_over=2_000),
    ...                 HumanInTheLoopMiddleware(interrupt_on={})])
    >>> agent.invoke({"messages": [{"role": "user", "content": "hi"}]})["messages"][-1].content
    'Hello!'
"""

try:
    import langchain.agents.middleware  # noqa: F401  (the extra's marker: langchain >= 1.0)
except ImportError:
    raise ImportError(
        "langgraph_stm.middleware needs langchain >= 1.0 (create_agent and its middleware): "
        "pip install 'langgraph-stm[agents]'"
    ) from None

from langgraph_stm._middleware import STMAgentState, STMMiddleware

__all__ = ["STMAgentState", "STMMiddleware"]
