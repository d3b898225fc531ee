"""langgraph-stm: production-grade short-term memory for LangGraph agents.

The public API is re-exported here; the ``_modules`` behind it are private.

Example:
    >>> import langgraph_stm
    >>> "STMState" in langgraph_stm.__all__
    True
"""

from langgraph_stm._context import (
    ContextHook,
    ContextResult,
    build_context,
    plan_context,
    render_state_block,
)
from langgraph_stm._errors import (
    BudgetExceededError,
    InvalidArgumentError,
    InvalidMessageError,
    StateUpdateError,
    STMError,
    StorageError,
    SummarizationError,
    TokenizerError,
    ToolPairError,
)
from langgraph_stm._state import (
    REMOVE_ALL,
    Artifact,
    Constraint,
    ConstraintStatus,
    ErrorRecord,
    PlanStatus,
    PlanStep,
    STMState,
    Summary,
    SummaryCoverage,
    merge_artifacts,
    merge_constraints,
    merge_plan,
    remove_record,
    set_last_error,
    update_summary,
)
from langgraph_stm._summarize import (
    SummarizeNode,
    SummarizeResult,
    asummarize_history,
    summarize_history,
)
from langgraph_stm._summarizers import (
    ChatModelSummarizer,
    ExtractiveSummarizer,
    Summarizer,
    SummaryDraft,
    SummaryRequest,
)
from langgraph_stm._tokens import CacheInfo, TokenCounter, load_encoding, message_role
from langgraph_stm._trim import (
    OnInvalid,
    OnOverflow,
    StartOn,
    TrimNode,
    TrimResult,
    plan_trim,
    trim_history,
)
from langgraph_stm._units import (
    HistoryProblem,
    HistoryProblemKind,
    Unit,
    group_units,
    repair_history,
    synthetic_result_id,
    validate_history,
)
from langgraph_stm.checkpoint import STMSaver, ThreadState

__version__ = "0.1.0"

__all__ = [
    "REMOVE_ALL",
    "Artifact",
    "BudgetExceededError",
    "CacheInfo",
    "ChatModelSummarizer",
    "Constraint",
    "ConstraintStatus",
    "ContextHook",
    "ContextResult",
    "ErrorRecord",
    "ExtractiveSummarizer",
    "HistoryProblem",
    "HistoryProblemKind",
    "InvalidArgumentError",
    "InvalidMessageError",
    "OnInvalid",
    "OnOverflow",
    "PlanStatus",
    "PlanStep",
    "STMError",
    "STMSaver",
    "STMState",
    "StartOn",
    "StateUpdateError",
    "StorageError",
    "SummarizationError",
    "SummarizeNode",
    "SummarizeResult",
    "Summarizer",
    "Summary",
    "SummaryCoverage",
    "SummaryDraft",
    "SummaryRequest",
    "ThreadState",
    "TokenCounter",
    "TokenizerError",
    "ToolPairError",
    "TrimNode",
    "TrimResult",
    "Unit",
    "__version__",
    "asummarize_history",
    "build_context",
    "group_units",
    "load_encoding",
    "merge_artifacts",
    "merge_constraints",
    "merge_plan",
    "message_role",
    "plan_context",
    "plan_trim",
    "remove_record",
    "render_state_block",
    "repair_history",
    "set_last_error",
    "summarize_history",
    "synthetic_result_id",
    "trim_history",
    "update_summary",
    "validate_history",
]
