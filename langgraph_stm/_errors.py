"""The exception hierarchy of langgraph-stm.

Every error the package raises on purpose derives from :class:`STMError`, so one
``except STMError`` catches them all:

- :class:`STMError` - base class; never raised directly.
- :class:`StateUpdateError` - a state update is malformed (a plan step without
  ``id``, an unknown status, a record that is not a dict). Also a ``ValueError``.
- :class:`InvalidMessageError` - a value that should be a LangChain message is not
  one, or a message is malformed. Also a ``TypeError``.
- :class:`TokenizerError` - an encoding is unknown, or its shipped data file is
  missing or corrupted.
- :class:`ToolPairError` - a history breaks tool-call/tool-result integrity (orphan
  ToolMessage, result not right after its call, duplicate result, dangling call).
- :class:`BudgetExceededError` - the mandatory part of a context alone exceeds the
  token budget, so nothing can be dropped to fit without cutting a unit.
- :class:`SummarizationError` - a summarizer raised or kept answering invalidly; the
  state is left exactly as it was.
- :class:`InvalidArgumentError` - an argument is out of range or unknown
  (``max_tokens <= 0``, an unknown option value). Also a ``ValueError``.
- :class:`StorageError` - rows that ``STMSaver`` stored are missing or corrupt (a
  table dropped or edited by hand, a thread deleted while a run was writing it);
  the driver's own error, if any, is chained as ``__cause__``.
- :class:`ThreadDeletedError` - a write carries a checkpoint of a thread that was
  deleted (``delete_thread``, or expired and swept): a late worker's write is refused
  instead of recreating half a thread; a fresh run on the same id starts a new thread.
- :class:`ThreadScopeError` - with tenant scoping on (``STMSaver(tenant_key=...)``), a
  read, write, listing, export or deletion of a thread bound to another owner (or of
  a thread written without one, by a caller with one): refused, no data returned.
- :class:`CheckpointConflict` - with exclusive runs on (``STMSaver(exclusive_runs=True)``),
  a run tried to continue a thread from a checkpoint another live run is already
  continuing (two workers resuming one interrupt): refused before any of its tasks ran;
  retry on the thread's new head.
- :class:`EncryptionKeyError` - with encryption at rest (``STMSaver(encryption_key=...)``),
  stored data cannot be opened: its key is not in the saver's keyring (dropped before
  ``reencrypt()``, or a wrong key), the saver has no key, or the data was altered or
  moved from another thread. Nothing is decrypted to garbage.

Every module adds its error classes here, so the whole hierarchy stays readable in
one file.
"""

from __future__ import annotations

from datetime import datetime

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


class STMError(Exception):
    """Base class of every error raised by langgraph-stm."""


class StateUpdateError(STMError, ValueError):
    """A state update for one of the structured fields is malformed.

    The message names the field (``plan``, ``constraints``...) and, where it has
    one, the record id at fault.
    """

    def __init__(self, field: str, problem: str, *, record_id: str | None = None) -> None:
        self.field = field
        self.record_id = record_id
        where = f"{field}[id={record_id!r}]" if record_id is not None else field
        super().__init__(f"invalid update for {where}: {problem}")


class TokenizerError(STMError):
    """An encoding cannot be built: unknown name, or missing/corrupted data file."""


class InvalidMessageError(STMError, TypeError):
    """A value that should be a LangChain message is not one, or is malformed."""


class ToolPairError(STMError, ValueError):
    """A history breaks tool-call/tool-result integrity.

    ``message_ids`` lists the ids of the messages at fault.
    """

    def __init__(self, message: str, *, message_ids: tuple[str, ...] = ()) -> None:
        self.message_ids = message_ids
        super().__init__(message)


class BudgetExceededError(STMError):
    """The mandatory part of a context alone exceeds the token budget.

    ``required`` is the token count of the mandatory part, ``max_tokens`` the budget.
    """

    def __init__(self, message: str, *, required: int, max_tokens: int) -> None:
        self.required = required
        self.max_tokens = max_tokens
        super().__init__(message)


class SummarizationError(STMError):
    """A summarizer raised or kept answering invalidly; the state was left untouched."""


class InvalidArgumentError(STMError, ValueError):
    """An argument is out of range or unknown (``max_tokens <= 0``, an unknown option).

    The message names the argument and the accepted values.
    """


class StorageError(STMError):
    """Rows ``STMSaver`` stored for a thread are missing or corrupt.

    ``thread_id`` and ``checkpoint_ns`` name the thread and namespace at fault; the
    message says what is missing and what to do (usually: delete the thread).
    """

    def __init__(
        self, message: str, *, thread_id: str | None = None, checkpoint_ns: str = ""
    ) -> None:
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        super().__init__(message)


class ThreadDeletedError(STMError):
    """A write carries a checkpoint of a thread that was deleted, so it was refused.

    Raised by ``STMSaver.put`` / ``put_writes`` (and their async twins) when the write's
    config names a checkpoint (``checkpoint_id``, or a parent's in ``checkpoint_map``)
    no newer than the last checkpoint the thread had when it was deleted: a worker that
    still holds the old config would otherwise recreate half a thread. Nothing is
    written. A fresh run (a config without ``checkpoint_id``) on the same thread id
    starts a new, empty thread.

    ``thread_id`` names the thread, ``checkpoint_id`` the old checkpoint the write
    carried, ``deleted_at`` when the thread was deleted (an aware UTC datetime; for a
    thread that expired, when it was removed).
    """

    def __init__(
        self,
        message: str,
        *,
        thread_id: str = "",
        checkpoint_id: str | None = None,
        deleted_at: datetime | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.deleted_at = deleted_at
        super().__init__(message)


class ThreadScopeError(STMError):
    """A call under one owner touched a thread bound to another, so it was refused.

    Raised with tenant scoping on (``STMSaver(tenant_key="tenant_id")``) by reads
    (``get_tuple``, ``list``, ``get_thread_state``...), writes (``put``, ``put_writes``),
    ``export_thread`` and ``delete_thread`` when the caller's owner
    (``config["configurable"][tenant_key]``, or the ``owner=`` argument) is not the
    owner the thread was bound to at its first root write; a thread written without an
    owner is open only to callers without one. Nothing is read, written or deleted.

    ``thread_id`` names the thread, ``owner`` the caller's owner (``None``: none). The
    message never names the thread's own owner.
    """

    def __init__(self, message: str, *, thread_id: str = "", owner: str | None = None) -> None:
        self.thread_id = thread_id
        self.owner = owner
        super().__init__(message)


class CheckpointConflict(STMError):
    """Another live run is already continuing the checkpoint this run started from.

    Raised with ``STMSaver(exclusive_runs=True)`` when a run reads the thread's latest
    checkpoint while another run holds it (it read it first and has not finished,
    interrupted or failed since), or when a write's parent checkpoint is held by another
    run. Nothing of the refused run was executed or written: retry it, and it starts
    from the thread's new head. Runs addressed at a checkpoint id (replay, forks,
    ``update_state`` on a past checkpoint) never conflict.

    ``thread_id`` and ``checkpoint_id`` name the contested checkpoint; ``held_until``
    is when the other run's claim lapses if that run stops writing (an aware UTC
    datetime).
    """

    def __init__(
        self,
        message: str,
        *,
        thread_id: str = "",
        checkpoint_id: str | None = None,
        held_until: datetime | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.held_until = held_until
        super().__init__(message)


class EncryptionKeyError(STMError):
    """Stored data of a thread cannot be opened with the saver's keys.

    Raised by reads of an encrypted saver (``STMSaver(encryption_key=...)``) when a
    sealed value names a key id the keyring does not hold, does not authenticate under
    the key of that id (a wrong key, an altered row), was sealed for another thread, or
    when a saver without ``encryption_key`` meets sealed data. Pass the key that wrote
    the data (``Keyring(primary, old=[...])`` during a rotation, until ``reencrypt()``
    has run).

    ``thread_id`` names the thread, ``key_id`` the key id the data names (``None`` when
    unreadable).
    """

    def __init__(self, message: str, *, thread_id: str = "", key_id: str | None = None) -> None:
        self.thread_id = thread_id
        self.key_id = key_id
        super().__init__(message)
