"""Analyzers: pure functions from models to results (no file access, no Click)."""

from .heartrate import heart_rate
from .summary import summarize_threads, thread_endings

__all__ = ["heart_rate", "summarize_threads", "thread_endings"]
