"""Running tool calls: the approval node's decision and request shapes, and the
offload of large tool outputs to LangGraph's store.

:class:`ApprovalToolNode` (also at the top level) runs an AI message's tool calls,
gating the ones its policy names behind ``interrupt()``; the reviewer answers with the
:data:`Decision` shapes LangChain's ``HumanInTheLoopMiddleware`` users know.
:class:`Offloader` keeps long tool text out of short-term memory: the full text goes
to the store, the ToolMessage keeps a summary and a reference.

Example:
    >>> from langgraph_stm.tools import offload_uri, parse_offload_uri
    >>> parse_offload_uri(offload_uri("thread-1", "tool-msg-7"))
    ('thread-1', 'tool-msg-7')
"""

from langgraph_stm._approval import (
    Action,
    ActionRequest,
    ApprovalRequest,
    ApprovalToolNode,
    ApproveDecision,
    BatchedApprovalRequest,
    Decision,
    DecisionType,
    EditDecision,
    HandleToolErrors,
    InterruptMode,
    InterruptOnConfig,
    RejectDecision,
    RespondDecision,
    ReviewConfig,
    tool_result_id,
)
from langgraph_stm._offload import (
    OFFLOAD_NAMESPACE,
    Offloaded,
    Offloader,
    StoreFunction,
    offload_namespace,
    offload_uri,
    parse_offload_uri,
)

__all__ = [
    "OFFLOAD_NAMESPACE",
    "Action",
    "ActionRequest",
    "ApprovalRequest",
    "ApprovalToolNode",
    "ApproveDecision",
    "BatchedApprovalRequest",
    "Decision",
    "DecisionType",
    "EditDecision",
    "HandleToolErrors",
    "InterruptMode",
    "InterruptOnConfig",
    "Offloaded",
    "Offloader",
    "RejectDecision",
    "RespondDecision",
    "ReviewConfig",
    "StoreFunction",
    "offload_namespace",
    "offload_uri",
    "parse_offload_uri",
    "tool_result_id",
]
