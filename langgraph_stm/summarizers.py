"""Summarizers for :func:`~langgraph_stm.summarize_history` and
:class:`~langgraph_stm.SummarizeNode`: the offline default and the chat-model one.

Example:
    >>> from langgraph_stm.summarizers import ExtractiveSummarizer, Summarizer
    >>> isinstance(ExtractiveSummarizer(), Summarizer)
    True
"""

from langgraph_stm._summarizers import (
    ChatModelSummarizer,
    ExtractiveSummarizer,
    Summarizer,
    SummaryDraft,
    SummaryRequest,
)

__all__ = [
    "ChatModelSummarizer",
    "ExtractiveSummarizer",
    "Summarizer",
    "SummaryDraft",
    "SummaryRequest",
]
