"""The optional capabilities ``copy_thread`` and ``delete_for_runs``, by explicit factory.

LangGraph and its conformance suite detect an optional capability by an override on
the saver's class, so a wrapper can only mirror the inner saver's with a class per
capability set. :meth:`STMSaver.wrap` picks it; ``STMSaver(inner)`` is always plain.
After ``delete_for_runs`` our rows that only deleted checkpoints referenced are
reclaimed; ``copy_thread`` copies our rows with the checkpoints.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

__all__ = ["capability_class"]

_OPTIONAL = ("delete_for_runs", "adelete_for_runs", "copy_thread", "acopy_thread")
_LOCK = threading.Lock()
_CLASSES: dict[tuple[type, tuple[str, ...]], type] = {}


def _delete_for_runs(self: Any, run_ids: Sequence[str]) -> None:
    """Forward to the inner saver, then reclaim rows only deleted checkpoints used."""
    self.inner.delete_for_runs(run_ids)
    self.vacuum()


async def _adelete_for_runs(self: Any, run_ids: Sequence[str]) -> None:
    """Async twin of ``delete_for_runs``."""
    await self.inner.adelete_for_runs(run_ids)
    await self.avacuum()


def _copy_thread(self: Any, source_thread_id: str, target_thread_id: str) -> None:
    """Copy the checkpoints (inner saver) and our rows to ``target_thread_id``."""
    from langgraph_stm.checkpoint._tables import copy_plan

    self._sync_driver().write(copy_plan(self._tables.dialect, source_thread_id, target_thread_id))
    self.inner.copy_thread(source_thread_id, target_thread_id)


async def _acopy_thread(self: Any, source_thread_id: str, target_thread_id: str) -> None:
    """Async twin of ``copy_thread``."""
    from langgraph_stm.checkpoint._tables import copy_plan

    await self._awrite(copy_plan(self._tables.dialect, source_thread_id, target_thread_id))
    await self.inner.acopy_thread(source_thread_id, target_thread_id)


_METHODS: dict[str, Any] = {
    "delete_for_runs": _delete_for_runs,
    "adelete_for_runs": _adelete_for_runs,
    "copy_thread": _copy_thread,
    "acopy_thread": _acopy_thread,
}


def capability_class(base: type, inner: type) -> type:
    """``base``, or a subclass of it with the optional methods ``inner`` overrides."""
    caps = tuple(
        name
        for name in _OPTIONAL
        if getattr(inner, name, None) is not getattr(BaseCheckpointSaver, name, None)
        and getattr(base, name, None) is getattr(BaseCheckpointSaver, name, None)
    )
    if not caps:
        return base
    with _LOCK:
        klass = _CLASSES.get((base, caps))
        if klass is None:
            name = f"{base.__name__}_{'_'.join(caps)}_{len(_CLASSES)}"
            namespace: dict[str, Any] = {n: _METHODS[n] for n in caps}
            namespace.update(__doc__=base.__doc__, __module__=__name__, __qualname__=name)
            klass = type(name, (base,), namespace)
            globals()[name] = klass  # so pickle finds the class by its qualified name
            _CLASSES[(base, caps)] = klass
        return klass
