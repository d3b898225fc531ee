"""The one node shape every feature uses, and the one way a node reads a graph state.

A node is a :class:`~langchain_core.runnables.Runnable`: ``graph.add_node(node)``
names it by :attr:`StateNode.name`; LangGraph calls ``invoke`` in sync runs and
``ainvoke`` in async runs, passing the run's ``config`` through (callbacks reach a
chat model, ``interrupt()`` finds its run). ``node(state)`` works too, outside a graph.

Example:
    >>> from typing import Any
    >>> class Count(StateNode):
    ...     def run(self, state: Any, config: Any) -> dict[str, Any]:
    ...         return {"count": len(read_state(state, self.name)["messages"])}
    >>> Count(name="count")({"messages": [1, 2]})
    {'count': 2}
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManager
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.config import get_config

from langgraph_stm._errors import InvalidArgumentError
from langgraph_stm._policy import read_state

__all__ = ["GraphRun", "StateNode", "graph_run", "read_state"]

# LangGraph has no public "is this code running inside a graph run?" predicate. A task
# (langgraph.func.task) needs the run's call hook, which LangGraph keeps under this
# configurable key (langgraph._internal._constants.CONFIG_KEY_CALL); a unit test fails
# loudly if LangGraph renames it.
PREGEL_CALL_KEY = "__pregel_call"

GraphRun = Literal["sync", "async-thread", "async-loop"]


def graph_run() -> GraphRun | None:
    """How the calling code runs, which decides the task that can make a call durable.

    ``None`` outside a graph run; ``"sync"`` in a sync run (``invoke``/``stream``, even
    on a thread whose event loop is running); ``"async-thread"`` in a sync node of an
    async run (a worker thread: a sync task can be waited for); ``"async-loop"`` in an
    async node of an async run (only an async task can be awaited there). LangGraph's
    async runs give nodes an ``AsyncCallbackManager`` (a unit test pins this), and its
    async call hook returns an awaitable future exactly when called from a coroutine.
    This is the one place the package decides it (summarize, approval, offload).

    Example:
        >>> graph_run() is None  # not inside a graph run
        True
    """
    try:
        config = get_config()
    except RuntimeError:
        return None
    if PREGEL_CALL_KEY not in config.get("configurable", {}):
        return None
    if not isinstance(config.get("callbacks"), AsyncCallbackManager):
        return "sync"
    try:
        in_coroutine = asyncio.current_task() is not None
    except RuntimeError:
        in_coroutine = False
    return "async-loop" if in_coroutine else "async-thread"


class StateNode(Runnable[Any, dict[str, Any]], ABC):
    """Base of the package's graph nodes: state in, reducer update out (sync and async).

    Subclasses implement :meth:`run` and, when they may wait on I/O (a model, a tool),
    :meth:`arun`; options are checked in ``__init__``, so a bad node fails when built.
    """

    def __init__(self, *, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"name must be a non-empty string, got {name!r}")
        self.name = name

    @abstractmethod
    def run(self, state: Any, config: RunnableConfig | None) -> dict[str, Any]:
        """Return the state update for ``state``."""

    async def arun(self, state: Any, config: RunnableConfig | None) -> dict[str, Any]:
        """Async twin of :meth:`run` (the same work unless a subclass awaits I/O)."""
        return self.run(state, config)

    def __call__(self, state: Any, config: RunnableConfig | None = None) -> dict[str, Any]:
        """Return the state update for ``state`` (``config`` is optional)."""
        return self.run(state, config)

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Runnable entry point used by LangGraph's ``invoke``/``stream``."""
        return self.run(input, config)

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """Runnable entry point used by LangGraph's ``ainvoke``/``astream``."""
        return await self.arun(input, config)
