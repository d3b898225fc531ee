"""Type aliases and records that appear in langgraph-stm's public signatures.

Example:
    >>> from langgraph_stm.typing import OnInvalid
    >>> from typing import get_args
    >>> get_args(OnInvalid)
    ('raise', 'repair')
"""

from langgraph_stm._policy import OnInvalid, OnOverflow, StartOn
from langgraph_stm._summarize import SummarizerLike
from langgraph_stm._tokens import CacheInfo, TokenCounterLike
from langgraph_stm._units import HistoryProblem, HistoryProblemKind, RepairCause, Unit

__all__ = [
    "CacheInfo",
    "HistoryProblem",
    "HistoryProblemKind",
    "OnInvalid",
    "OnOverflow",
    "RepairCause",
    "StartOn",
    "SummarizerLike",
    "TokenCounterLike",
    "Unit",
]
