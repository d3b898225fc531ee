"""Summarizers for :func:`~langgraph_stm.summarize_history` and
:class:`~langgraph_stm.SummarizeNode`: the offline default and the chat-model one.

Example:
    >>> from langgraph_stm.summarizers import ExtractiveSummarizer, Summarizer
    >>> isinstance(ExtractiveSummarizer(), Summarizer)
    True
"""

from langgraph_stm._model_summarizer import ChatModelSummarizer
from langgraph_stm._summarizers import (
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
