"""The review half of :class:`~langgraph_stm._approval.ApprovalToolNode`: the policy
(which tools are gated, which decisions they allow), the requests a reviewer sees, and
the check of an answer.

An answer is checked inside ``interrupt(response_schema=...)``, before LangGraph saves
it: the schema is a ``dict`` annotated with an ``AfterValidator`` running
:func:`check_decision` (which raises :class:`InvalidArgumentError`, a ``ValueError``,
so pydantic turns it into the ``ValidationError`` ``invoke`` raises), and with the
JSON schema clients are shown (``WithJsonSchema``). An edit's ``args`` are checked
against the tool's own argument schema (``tool_call_schema``, what the model sees), and
that schema is part of the published one, as LangChain's ``HumanInTheLoopMiddleware``
does.

Example:
    >>> gate = Gate(("approve", "reject"), None)
    >>> asked = Asked("c1", "refund", gate.allowed, None)
    >>> check_decision({"type": "approve"}, asked)
    {'type': 'approve'}
    >>> try:
    ...     check_decision({"type": "edit"}, asked)
    ... except InvalidArgumentError as refused:
    ...     print(str(refused).split("; ")[1])
    allowed: ['approve', 'reject']
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, cast

from langchain_core.messages import AIMessage, ToolCall
from langchain_core.tools import BaseTool
from langgraph.errors import GraphInterrupt
from langgraph.types import Interrupt
from pydantic import AfterValidator, BaseModel, ValidationError, WithJsonSchema

from langgraph_stm._approval_types import (
    ALL_DECISIONS,
    Action,
    ActionRequest,
    ApprovalRequest,
    ApproveDecision,
    BatchedApprovalRequest,
    Decision,
    DecisionType,
    EditDecision,
    InterruptOnConfig,
    RejectDecision,
    RespondDecision,
    ReviewConfig,
)
from langgraph_stm._errors import InvalidArgumentError
from langgraph_stm._policy import check_choice

__all__ = [
    "ArgsSchema",
    "Asked",
    "Gate",
    "approval_request",
    "batch_schema",
    "batched_request",
    "check_decision",
    "collect",
    "decision_schema",
    "resolve_policy",
]

ArgsSchema = type[BaseModel] | dict[str, Any] | None
"""A tool's argument schema as the model sees it (``BaseTool.tool_call_schema``): a
pydantic model, a JSON schema (a tool defined by one), or ``None`` (unknown)."""


# -- the policy ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Gate:
    """The resolved review policy of one tool."""

    allowed: tuple[DecisionType, ...]
    description: str | Callable[[ToolCall], str] | None


def _gate(name: str, value: object) -> Gate | None:
    if value is True:
        return Gate(ALL_DECISIONS, None)
    if value is False:
        return None
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"interrupt_on[{name!r}] must be True, False or a dict with 'allowed_decisions', "
            f"got {value!r}"
        )
    allowed = value.get("allowed_decisions")
    if isinstance(allowed, str) or not isinstance(allowed, Sequence) or not allowed:
        raise InvalidArgumentError(
            f"interrupt_on[{name!r}]['allowed_decisions'] must be a non-empty list of "
            f"{list(ALL_DECISIONS)}, got {allowed!r}"
        )
    for decision in allowed:
        check_choice(f"interrupt_on[{name!r}]['allowed_decisions'] item", decision, ALL_DECISIONS)
    description = value.get("description")
    if description is not None and not isinstance(description, str) and not callable(description):
        raise InvalidArgumentError(
            f"interrupt_on[{name!r}]['description'] must be a str or a function of the "
            f"tool call, got {description!r}"
        )
    return Gate(tuple(dict.fromkeys(allowed)), description)


def resolve_policy(
    interrupt_on: Mapping[str, bool | InterruptOnConfig] | None, tools: Mapping[str, BaseTool]
) -> dict[str, Gate]:
    """Return the gate of each gated tool; ``None`` gates every tool."""
    if interrupt_on is None:
        return {name: Gate(ALL_DECISIONS, None) for name in tools}
    if not isinstance(interrupt_on, Mapping):
        raise InvalidArgumentError(
            f"interrupt_on must be a dict of tool name -> policy, got {interrupt_on!r}"
        )
    unknown = sorted(set(interrupt_on) - set(tools))
    if unknown:
        raise InvalidArgumentError(
            f"interrupt_on names {unknown}, which are not among the tools {sorted(tools)}; "
            "a misspelled name would leave its tool ungated"
        )
    gates = {name: _gate(name, value) for name, value in interrupt_on.items()}
    return {name: gate for name, gate in gates.items() if gate is not None}


# -- the requests -------------------------------------------------------------------------
def _describe(call: ToolCall, gate: Gate) -> str:
    if callable(gate.description):
        return gate.description(call)
    if gate.description is not None:
        return gate.description
    arguments = json.dumps(call["args"], default=str, ensure_ascii=False)
    return f"The model wants to call {call['name']!r} with {arguments}. Run it?"


def approval_request(ai: AIMessage, call: ToolCall, gate: Gate) -> ApprovalRequest:
    """The value of the ``"per_call"`` interrupt asking about ``call``."""
    return ApprovalRequest(
        type="tool_approval",
        tool_call_id=call["id"] or "",
        ai_message_id=ai.id or "",
        name=call["name"],
        args=call["args"],
        description=_describe(call, gate),
        allowed_decisions=list(gate.allowed),
    )


def batched_request(ai: AIMessage, gated: Sequence[tuple[ToolCall, Gate]]) -> Any:
    """The value of the ``"batched"`` interrupt asking about every gated call."""
    return BatchedApprovalRequest(
        action_requests=[
            ActionRequest(name=c["name"], args=c["args"], description=_describe(c, g))
            for c, g in gated
        ],
        review_configs=[
            ReviewConfig(action_name=c["name"], allowed_decisions=list(g.allowed)) for c, g in gated
        ],
        ai_message_id=ai.id or "",
        tool_call_ids=[c["id"] or "" for c, _ in gated],
    )


# -- checking an answer (inside interrupt(), before LangGraph saves it) -------------------
@dataclass(frozen=True)
class Asked:
    """What an answer is checked against: the call, the decisions it allows and the
    tool's argument schema (``None``: edited args are only checked to be a dict)."""

    call_id: str
    name: str
    allowed: tuple[DecisionType, ...]
    args_schema: ArgsSchema

    @classmethod
    def of(cls, call: ToolCall, gate: Gate, args_schema: ArgsSchema) -> Asked:
        return cls(call["id"] or "", call["name"], gate.allowed, args_schema)


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, error['loc'])) or '(args)'}: {error['msg']}" for error in exc.errors()
    )


def _check_args(args: Mapping[str, Any], asked: Asked, where: str) -> None:
    """Raise InvalidArgumentError unless ``args`` fit the tool's argument schema.

    A pydantic schema validates them (types, required arguments) and refuses names it
    does not declare (unless the model allows extras): the tool would drop them, while
    the edited AI message would show them as run. A JSON schema is checked for its
    required names and, with ``additionalProperties: false``, unknown ones.
    """
    schema = asked.args_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        known = set(schema.model_fields)
        known |= {f.alias for f in schema.model_fields.values() if f.alias}
        unknown = sorted(set(args) - known)
        if unknown and schema.model_config.get("extra") != "allow":
            raise InvalidArgumentError(
                f"{where}: the edited args {unknown} are not arguments of {asked.name!r}; "
                f"its arguments are {sorted(schema.model_fields)}"
            )
        try:
            schema.model_validate(dict(args))
        except ValidationError as exc:
            raise InvalidArgumentError(
                f"{where}: the edited args do not fit the arguments of {asked.name!r}: "
                f"{_problems(exc)}"
            ) from None
    elif isinstance(schema, dict):
        missing = sorted(set(schema.get("required", ())) - set(args))
        properties = schema.get("properties")
        closed = schema.get("additionalProperties") is False
        unknown = (
            sorted(set(args) - set(properties)) if closed and isinstance(properties, dict) else []
        )
        if missing or unknown:
            raise InvalidArgumentError(
                f"{where}: the edited args do not fit the arguments of {asked.name!r}: "
                f"missing {missing}, unknown {unknown}"
            )


def check_decision(value: object, asked: Asked) -> Decision:
    """Return ``value`` as a :data:`Decision` for the call, or raise InvalidArgumentError."""
    where = f"tool call {asked.call_id!r} ({asked.name})"
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"{where}: expected a decision dict such as {{'type': 'approve'}}, got {value!r}"
        )
    kind = value.get("type")
    if kind not in asked.allowed:
        raise InvalidArgumentError(
            f"{where}: the decision type {kind!r} is not allowed here; allowed: "
            f"{list(asked.allowed)}"
        )
    if kind == "edit":
        action = value.get("edited_action")
        args = action.get("args") if isinstance(action, Mapping) else None
        name = action.get("name", asked.name) if isinstance(action, Mapping) else None
        if not isinstance(args, Mapping) or name != asked.name:
            raise InvalidArgumentError(
                f"{where}: an edit needs 'edited_action': {{'name': {asked.name!r}, "
                f"'args': {{...}}}} (the tool cannot change), got {value!r}"
            )
        _check_args(args, asked, where)
        return EditDecision(type="edit", edited_action=Action(name=name, args=dict(args)))
    message = value.get("message")
    if (kind == "respond" or message is not None) and not isinstance(message, str):
        raise InvalidArgumentError(f"{where}: {kind!r} needs a string 'message', got {value!r}")
    if kind == "respond":
        return RespondDecision(type="respond", message=cast(str, message))
    if kind == "reject":
        return RejectDecision(type="reject", message=message) if message else {"type": "reject"}
    return ApproveDecision(type="approve")


# -- the published JSON schema ------------------------------------------------------------
def _args_json(schema: ArgsSchema) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, self-contained: ``$defs`` references are
    inlined (pydantic resolves ``#/$defs/...`` against its own definitions, so an
    embedded schema cannot keep them); a recursive one stops at ``{"type": "object"}``."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        shown = schema.model_json_schema()
    elif isinstance(schema, dict):
        shown = schema
    else:
        return {"type": "object"}
    defs = shown.get("$defs")
    top = {key: value for key, value in shown.items() if key != "$defs"}
    return cast(dict[str, Any], _inline(top, defs if isinstance(defs, dict) else {}, ()))


def _inline(node: object, defs: Mapping[str, Any], seen: tuple[str, ...]) -> object:
    if isinstance(node, list):
        return [_inline(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in seen or name not in defs:
            return {"type": "object"}
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return _inline({**defs[name], **rest}, defs, (*seen, name))
    return {key: _inline(value, defs, seen) for key, value in node.items()}


def _decision_json(asked: Asked) -> dict[str, Any]:
    """The JSON schema of the answers accepted for the call (published to clients)."""
    kinds: dict[str, dict[str, Any]] = {
        "approve": {},
        "reject": {"message": {"type": "string"}},
        "respond": {"message": {"type": "string"}},
    }
    if "edit" in asked.allowed:
        kinds["edit"] = {
            "edited_action": {
                "type": "object",
                "properties": {
                    "name": {"const": asked.name},
                    "args": _args_json(asked.args_schema),
                },
                "required": ["args"],
            }
        }
    required = {"edit": ["edited_action"], "respond": ["message"]}
    return {
        "oneOf": [
            {
                "type": "object",
                "properties": {"type": {"const": kind}, **kinds[kind]},
                "required": ["type", *required.get(kind, [])],
            }
            for kind in asked.allowed
        ]
    }


def decision_schema(asked: Asked) -> Any:
    """The ``response_schema`` of a per-call interrupt."""

    def check(value: dict[str, Any]) -> Decision:
        return check_decision(value, asked)

    shown = _decision_json(asked)
    return Annotated[dict[str, Any], AfterValidator(check), WithJsonSchema(shown)]


def batch_schema(asked: Sequence[Asked]) -> Any:
    """The ``response_schema`` of a batched interrupt: ``{"decisions": [...]}`` in order."""

    def check(value: dict[str, Any]) -> dict[str, list[Decision]]:
        decisions = value.get("decisions")
        if not isinstance(decisions, list) or len(decisions) != len(asked):
            raise InvalidArgumentError(
                f"expected {{'decisions': [...]}} with {len(asked)} decision(s), one per gated "
                f"call {[a.call_id for a in asked]}, got {value!r}"
            )
        return {"decisions": [check_decision(d, a) for d, a in zip(decisions, asked, strict=True)]}

    items = [_decision_json(a) for a in asked]
    shown = {
        "type": "object",
        "properties": {
            "decisions": {
                "type": "array",
                "prefixItems": items,
                "minItems": len(items),
                "maxItems": len(items),
            }
        },
        "required": ["decisions"],
    }
    return Annotated[dict[str, Any], AfterValidator(check), WithJsonSchema(shown)]


# -- combining the outcomes of tasks ------------------------------------------------------
def collect(outcomes: Sequence[object]) -> list[Any]:
    """The results of tasks that all ran, or raise what they raised.

    A task that failed outright wins (its exception is raised); otherwise every
    interrupt surfaces at once, combined into one ``GraphInterrupt`` as LangGraph's
    runner combines the interrupts of parallel tasks
    (``langgraph.pregel._runner._panic_or_proceed``), so none is lost.
    """
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    failure = next((e for e in errors if not isinstance(e, GraphInterrupt)), None)
    if failure is not None:
        raise failure
    if errors:
        interrupts: list[Interrupt] = [i for e in errors for i in e.args[0]]
        raise GraphInterrupt(tuple(interrupts))
    return list(outcomes)
