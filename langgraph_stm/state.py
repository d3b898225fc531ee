"""The structured thread state: :class:`STMState`, its record types and reducers.

Nodes return *updates* that these reducers apply (see :mod:`langgraph_stm._state`
for the rules of each field).

Example:
    >>> from langgraph_stm.state import merge_plan
    >>> merge_plan([{"id": "s1", "task": "read", "status": "pending"}],
    ...            {"id": "s1", "status": "done"})
    [{'id': 's1', 'task': 'read', 'status': 'done'}]
"""

from langgraph_stm._state import (
    REMOVE_ALL,
    STM_FIELDS,
    SUMMARY_CONTENT_FIELDS,
    Artifact,
    ArtifactUpdate,
    Constraint,
    ConstraintStatus,
    ConstraintUpdate,
    ErrorRecord,
    PlanStatus,
    PlanStep,
    PlanStepUpdate,
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

__all__ = [
    "REMOVE_ALL",
    "STM_FIELDS",
    "SUMMARY_CONTENT_FIELDS",
    "Artifact",
    "ArtifactUpdate",
    "Constraint",
    "ConstraintStatus",
    "ConstraintUpdate",
    "ErrorRecord",
    "PlanStatus",
    "PlanStep",
    "PlanStepUpdate",
    "STMState",
    "Summary",
    "SummaryCoverage",
    "merge_artifacts",
    "merge_constraints",
    "merge_plan",
    "remove_record",
    "set_last_error",
    "update_summary",
]
