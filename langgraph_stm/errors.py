"""Every error langgraph-stm raises on purpose: one ``except STMError`` catches them all.

The hierarchy is described in one place, the docstring of :mod:`langgraph_stm._errors`.

Example:
    >>> from langgraph_stm.errors import STMError, ToolPairError
    >>> issubclass(ToolPairError, STMError)
    True
"""

from langgraph_stm._errors import (
    BudgetExceededError,
    CheckpointConflict,
    EncryptionKeyError,
    InvalidArgumentError,
    InvalidMessageError,
    StateUpdateError,
    STMError,
    StorageError,
    SummarizationError,
    ThreadDeletedError,
    ThreadScopeError,
    TokenizerError,
    ToolPairError,
)

__all__ = [
    "BudgetExceededError",
    "CheckpointConflict",
    "EncryptionKeyError",
    "InvalidArgumentError",
    "InvalidMessageError",
    "STMError",
    "StateUpdateError",
    "StorageError",
    "SummarizationError",
    "ThreadDeletedError",
    "ThreadScopeError",
    "TokenizerError",
    "ToolPairError",
]
