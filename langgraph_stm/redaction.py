"""Redaction before write: the detectors and :class:`Redactor` behind
``STMSaver(..., redact=True)`` / ``STMSaver(..., redact=Redactor(...))``.

What is redacted where, what a resumed run sees and how redactions are counted is
described in :mod:`langgraph_stm.checkpoint._redact`.

Example:
    >>> from langgraph_stm.redaction import Redactor
    >>> Redactor().redact("Authorization: Bearer abcdefgh12345678")
    'Authorization: Bearer [REDACTED:bearer_token]'
"""

from langgraph_stm.checkpoint._redact import (
    API_KEY,
    BEARER_TOKEN,
    CARD_NUMBER,
    DEFAULT_DETECTORS,
    DEFAULT_MARKER,
    JWT,
    METADATA_KEY,
    PASSWORD,
    PRIVATE_KEY,
    Detector,
    Redactor,
    luhn_valid,
)

__all__ = [
    "API_KEY",
    "BEARER_TOKEN",
    "CARD_NUMBER",
    "DEFAULT_DETECTORS",
    "DEFAULT_MARKER",
    "JWT",
    "METADATA_KEY",
    "PASSWORD",
    "PRIVATE_KEY",
    "Detector",
    "Redactor",
    "luhn_valid",
]
