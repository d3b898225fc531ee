"""The tools of :class:`~langgraph_stm._approval.ApprovalToolNode`: which ones it can run
(checked when the node is built) and how one call's output becomes its result.

The node passes a tool its arguments, the call's id (``InjectedToolCallId``) and the
run's config (a ``RunnableConfig`` parameter), and nothing else. Any other parameter
the model does not see (LangChain's ``InjectedToolArg`` family: LangGraph's
``InjectedState``, ``InjectedStore``, ``ToolRuntime``...) would be left unfilled, so a
tool with one is refused when the node is built. They are found from public schemas,
as LangGraph's ``ToolNode`` does: every field of ``tool.get_input_schema()`` that
``tool.tool_call_schema`` (what the model sees) hides is injected, and only those
annotated ``InjectedToolCallId`` are filled (``RunnableConfig`` parameters are in
neither schema).

A tool declared to return a ``Command`` (its function's return annotation names one) is
refused too: the node returns results only, it does not apply updates or routing. A tool
that returns a ``Command`` without declaring it has already run when the node sees it,
so the node does not fail (a failed node would run it again): the call gets an error
result saying the ``Command`` was not applied, and the graph goes on.

Example:
    >>> from langchain_core.tools import tool
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add.'''
    ...     return a + b
    >>> sorted(as_tools([add]))
    ['add']
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Sequence
from typing import Any, get_args, get_origin

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId
from langchain_core.tools import tool as as_tool
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from langgraph_stm._approval_review import ArgsSchema
from langgraph_stm._approval_types import HandleToolErrors, tool_result_id
from langgraph_stm._errors import InvalidArgumentError

__all__ = ["answer", "args_schema", "as_result", "as_tools", "error_result", "tool_input"]


def as_tools(tools: Sequence[BaseTool | Callable[..., Any]]) -> dict[str, BaseTool]:
    """The tools by name, functions converted; refuse what the node cannot run."""
    given: object = tools
    if not isinstance(given, Sequence) or isinstance(given, str) or not given:
        raise InvalidArgumentError(
            f"tools must be a non-empty list of tools or functions, got {tools!r}"
        )
    by_name: dict[str, BaseTool] = {}
    for item in tools:
        if not isinstance(item, BaseTool) and not callable(item):
            raise InvalidArgumentError(f"tools: {item!r} is neither a BaseTool nor a function")
        converted = item if isinstance(item, BaseTool) else as_tool(item)
        if converted.name in by_name:
            raise InvalidArgumentError(f"tools: two tools are named {converted.name!r}")
        _check_runnable(converted)
        by_name[converted.name] = converted
    return by_name


def _marks(annotation: object) -> list[object]:
    """``annotation`` and everything nested in it (``Annotated`` metadata, union members)."""
    found = [annotation]
    origin = get_origin(annotation)
    if origin is not None:
        found.append(origin)
    for arg in get_args(annotation):
        found += _marks(arg)
    return found


def _is_call_id(mark: object) -> bool:
    return isinstance(mark, InjectedToolCallId) or (
        isinstance(mark, type) and issubclass(mark, InjectedToolCallId)
    )


def _label(field: FieldInfo) -> str:
    """How a hidden parameter is injected: its marker (``InjectedState``...) or type."""
    for mark in [*field.metadata, get_origin(field.annotation), field.annotation]:
        if isinstance(mark, type):
            return mark.__name__
        if mark is not None:
            return type(mark).__name__
    return "injected"


def _injected(tool: BaseTool) -> dict[str, str]:
    """Parameter -> how it is injected, for the hidden parameters the node cannot fill."""
    try:
        full = tool.get_input_schema()
        seen = tool.tool_call_schema
    except Exception:  # a schema that cannot be built is the tool's own error, at run time
        return {}
    if not (isinstance(seen, type) and issubclass(seen, BaseModel)):
        return {}
    if not issubclass(full, BaseModel):  # a pydantic.v1 model: no injected parameters known
        return {}
    hints = _hints(tool)
    refused: dict[str, str] = {}
    for name, field in full.model_fields.items():
        if name in seen.model_fields:
            continue
        marks = [*_marks(field.annotation), *field.metadata, *_marks(hints.get(name))]
        if not any(_is_call_id(mark) for mark in marks):
            refused[name] = _label(field)
    return refused


def _functions(tool: BaseTool) -> list[Callable[..., Any]]:
    own = [getattr(tool, "func", None), getattr(tool, "coroutine", None)]
    found = [f for f in own if callable(f)]
    if found:
        return found
    return [
        getattr(type(tool), method)
        for method in ("_run", "_arun")
        if getattr(type(tool), method, None) is not getattr(BaseTool, method, None)
    ]


def _hints(tool: BaseTool) -> dict[str, Any]:
    hints: dict[str, Any] = {}
    for function in _functions(tool):
        try:
            hints.update(typing.get_type_hints(function, include_extras=True))
        except Exception:  # unresolvable annotations: nothing to learn from them
            continue
    return hints


def _returns_command(tool: BaseTool) -> bool:
    for function in _functions(tool):
        try:
            returned = typing.get_type_hints(function).get("return")
        except Exception:
            continue
        if any(m is Command for m in _marks(returned)):
            return True
    return False


def _check_runnable(tool: BaseTool) -> None:
    refused = _injected(tool)
    if refused:
        shown = ", ".join(f"{name!r} ({kind})" for name, kind in sorted(refused.items()))
        raise InvalidArgumentError(
            f"tools: {tool.name!r} has parameters ApprovalToolNode does not fill: {shown}. "
            "It passes a tool its arguments, the call id (InjectedToolCallId) and the run's "
            "config (a RunnableConfig parameter) only; read the state or the store in a "
            "node before it, or run such a tool in LangGraph's ToolNode"
        )
    if _returns_command(tool):
        raise InvalidArgumentError(
            f"tools: {tool.name!r} is declared to return a Command; ApprovalToolNode takes "
            "results only (a string, content blocks or a ToolMessage) and applies no "
            "state update or routing"
        )


# -- one call's result --------------------------------------------------------------------
def answer(ai_id: str, call: ToolCall, content: str, *, error: bool) -> ToolMessage:
    """A result the node writes itself (a rejection, a response, an error)."""
    return ToolMessage(
        content=content,
        tool_call_id=call["id"] or "",
        name=call["name"],
        status="error" if error else "success",
        id=tool_result_id(ai_id, call["id"] or ""),
    )


def as_result(output: object, ai_id: str, call: ToolCall) -> ToolMessage:
    """The tool's output as the call's result, with the deterministic id.

    A ``Command`` (a tool that did not declare it) is not applied: the call gets an
    error result saying so. The tool has run, so raising would only run it again.
    """
    if isinstance(output, Command):
        text = (
            f"Error: the tool {call['name']!r} returned a Command, which ApprovalToolNode "
            "does not apply (no state update, no routing); the tool ran, its Command was "
            "dropped. Return a string, content blocks or a ToolMessage."
        )
        return answer(ai_id, call, text, error=True)
    if not isinstance(output, ToolMessage):
        content = output if isinstance(output, str | list) else json.dumps(output, default=str)
        output = ToolMessage(content=content, tool_call_id=call["id"] or "")
    return output.model_copy(
        update={
            "id": tool_result_id(ai_id, call["id"] or ""),
            "tool_call_id": call["id"] or "",
            "name": call["name"],
        }
    )


def error_result(
    exc: Exception, handler: HandleToolErrors, ai_id: str, call: ToolCall
) -> ToolMessage:
    """The result of a call whose tool raised ``exc``, or raise it (``handler=False``,
    and always for LangGraph's control flow: interrupts, parent commands)."""
    if handler is False or isinstance(exc, GraphBubbleUp):
        raise exc
    if isinstance(handler, str):
        content = handler
    elif callable(handler):
        content = handler(exc)
    else:
        content = f"Error: the tool {call['name']!r} raised {type(exc).__name__}: {exc}"
    return answer(ai_id, call, content, error=True)


def tool_input(call: ToolCall) -> dict[str, Any]:
    """The input that makes a tool fill ``InjectedToolCallId`` and return a ToolMessage."""
    return {**call, "type": "tool_call"}


def args_schema(tool: BaseTool) -> ArgsSchema:
    """The tool's argument schema as the model sees it, or ``None`` if it cannot be built."""
    try:
        schema = tool.tool_call_schema
    except Exception:
        return None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema
    return dict(schema) if isinstance(schema, dict) else None
