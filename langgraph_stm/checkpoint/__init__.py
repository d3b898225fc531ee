"""STMSaver: a checkpointer wrapper with structured-state projection and linear storage.

Backend-specific code lives in :mod:`langgraph_stm.checkpoint.sqlite` and
:mod:`langgraph_stm.checkpoint.postgres`, imported only when a saver of that kind is
wrapped, so importing this package never imports sqlite, aiosqlite or psycopg code.

Example:
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> from langgraph_stm.checkpoint import STMSaver
    >>> isinstance(STMSaver(InMemorySaver()), STMSaver)
    True
"""

from langgraph_stm.checkpoint._projection import ThreadState
from langgraph_stm.checkpoint._saver import STMSaver

__all__ = ["STMSaver", "ThreadState"]
