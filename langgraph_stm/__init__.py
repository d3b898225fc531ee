"""langgraph-stm: production-grade short-term memory for LangGraph agents.

The top level holds what agents use: the state, the saver, the token counter, a
function, its result and a node for trim, summarize and context, the approval tools
node, and ``validate_history`` / ``repair_history`` (whose repair every node also
applies with ``on_invalid="repair"``). Records and reducers are in :mod:`langgraph_stm.state`,
summarizers in :mod:`langgraph_stm.summarizers`, approval decisions and the offload
of large tool outputs in :mod:`langgraph_stm.tools`, errors in :mod:`langgraph_stm.errors`
and type aliases in :mod:`langgraph_stm.typing`. The ``_modules`` are private.

Example:
    >>> import langgraph_stm
    >>> "STMState" in langgraph_stm.__all__
    True
"""

from langgraph_stm._approval import ApprovalToolNode
from langgraph_stm._context import ContextNode, ContextResult, build_context
from langgraph_stm._errors import STMError
from langgraph_stm._state import STMState
from langgraph_stm._summarize import (
    SummarizeNode,
    SummarizeResult,
    asummarize_history,
    summarize_history,
)
from langgraph_stm._tokens import TokenCounter
from langgraph_stm._trim import TrimNode, TrimResult, trim_history
from langgraph_stm._units import RepairResult, repair_history, validate_history
from langgraph_stm._version import __version__
from langgraph_stm.checkpoint import STMSaver, ThreadState

__all__ = [
    "ApprovalToolNode",
    "ContextNode",
    "ContextResult",
    "RepairResult",
    "STMError",
    "STMSaver",
    "STMState",
    "SummarizeNode",
    "SummarizeResult",
    "ThreadState",
    "TokenCounter",
    "TrimNode",
    "TrimResult",
    "__version__",
    "asummarize_history",
    "build_context",
    "repair_history",
    "summarize_history",
    "trim_history",
    "validate_history",
]
