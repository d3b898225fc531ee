"""Encryption at rest for :class:`~langgraph_stm.STMSaver`: keys and key rings.

``STMSaver(inner, encryption_key=...)`` seals what the saver stores with AES-256-GCM
(the optional extra ``pip install 'langgraph-stm[encryption]'``). What is sealed, what
stays in plaintext and why, rotation and the cost are described in
``docs/encryption.md``; the format in :mod:`langgraph_stm.checkpoint._crypto`.

- :func:`generate_key` returns a new key (URL-safe base64 text of 32 random bytes);
  keep it in a secret store, never in the database it protects.
- :class:`Keyring` holds the primary key (seals new writes) and old keys (still open
  old rows); :meth:`STMSaver.reencrypt` rewrites old rows with the primary key, after
  which the old keys can be dropped.
- :func:`key_id` names a key (the id stored with each sealed value).
- :class:`~langgraph_stm.errors.EncryptionKeyError` is raised for a wrong, missing or
  dropped key, naming the thread.

Example:
    >>> from langgraph.checkpoint.memory import InMemorySaver
    >>> from langgraph.graph import START, StateGraph
    >>> from langgraph_stm import STMSaver, STMState
    >>> from langgraph_stm.encryption import Keyring, generate_key
    >>> key = generate_key()
    >>> saver = STMSaver(InMemorySaver(), encryption_key=key)
    >>> def answer(state: STMState) -> dict:
    ...     return {"goal": "ship v2", "messages": [("ai", "on it")]}
    >>> graph = StateGraph(STMState).add_node(answer).add_edge(START, "answer")
    >>> graph = graph.compile(checkpointer=saver)
    >>> config = {"configurable": {"thread_id": "t1"}}
    >>> _ = graph.invoke({"messages": [("user", "the launch code is 0000")]}, config)
    >>> graph.get_state(config).values["goal"]
    'ship v2'
    >>> rotated = STMSaver(saver.inner, encryption_key=Keyring(generate_key(), old=[key]))
    >>> rotated.reencrypt()  # doctest: +ELLIPSIS
    ReencryptReport(...)
"""

from langgraph_stm.checkpoint._crypto import (
    PLAIN_METADATA,
    Keyring,
    KeySource,
    generate_key,
    key_id,
)
from langgraph_stm.checkpoint._encryption import ReencryptReport

__all__ = ["PLAIN_METADATA", "KeySource", "Keyring", "ReencryptReport", "generate_key", "key_id"]
