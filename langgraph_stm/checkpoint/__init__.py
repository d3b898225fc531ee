"""STMSaver: a checkpointer wrapper with structured-state projection and linear storage.

How it is built, one module per concern:

- :mod:`._stm` the public :class:`STMSaver` (constructors, setup) on top of
  :mod:`._index` (thread queries), :mod:`._maintenance` (delete, prune, vacuum),
  :mod:`._retention` (TTL, sweep, tombstones, complete deletion) and
  :mod:`._saver` (forwarding each call to the inner saver), which runs
  :mod:`._pipeline` (what a write stores and a read rebuilds, without I/O);
- :mod:`._format` the pure storage format, :mod:`._encoder` values to rows and back;
- :mod:`._tables` our tables as statement plans, run by one sync and one async driver
  per backend: :mod:`._sqlite`, :mod:`._postgres` (each with its ``MIGRATIONS``);
- :mod:`._backend` which tables and drivers serve an inner saver, :mod:`._inner` every
  fact about LangGraph's savers, :mod:`._threads` the projection rows,
  :mod:`._capabilities` the optional ``copy_thread`` / ``delete_for_runs``,
  :mod:`._writes` the checks and stable ids of pending writes.

Backend drivers are imported only when a saver of that kind is wrapped, so importing
this package never imports aiosqlite or psycopg.

Example:
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> from langgraph_stm.checkpoint import STMSaver
    >>> type(STMSaver(InMemorySaver())) is STMSaver
    True
"""

from langgraph_stm.checkpoint._retention import DeletionReport
from langgraph_stm.checkpoint._stm import STMSaver
from langgraph_stm.checkpoint._threads import ThreadState

__all__ = ["DeletionReport", "STMSaver", "ThreadState"]
