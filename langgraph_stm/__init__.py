"""langgraph-stm: production-grade short-term memory for LangGraph agents.

The public API is re-exported here; the ``_modules`` behind it are private.

Example:
    >>> import langgraph_stm
    >>> "STMState" in langgraph_stm.__all__
    True
"""

from langgraph_stm._errors import (
    BudgetExceededError,
    InvalidMessageError,
    StateUpdateError,
    STMError,
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
from langgraph_stm._tokens import CacheInfo, TokenCounter, load_encoding, message_role

__version__ = "0.1.0"

__all__ = [
    "REMOVE_ALL",
    "Artifact",
    "BudgetExceededError",
    "CacheInfo",
    "Constraint",
    "ConstraintStatus",
    "ErrorRecord",
    "InvalidMessageError",
    "PlanStatus",
    "PlanStep",
    "STMError",
    "STMState",
    "StateUpdateError",
    "SummarizationError",
    "Summary",
    "SummaryCoverage",
    "TokenCounter",
    "TokenizerError",
    "ToolPairError",
    "__version__",
    "load_encoding",
    "merge_artifacts",
    "merge_constraints",
    "merge_plan",
    "message_role",
    "remove_record",
    "set_last_error",
    "update_summary",
]
