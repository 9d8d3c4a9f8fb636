"""Streaming analysis of PyTorch profiler (Kineto) traces. Pure Python: no AWS imports here.

from profstack.analysis import analyze, discover_sources
result = analyze(discover_sources(["traces/"]))
result.summary  # a summary.Summary (JSON-serialisable), validates against summary_schema()

The names below load on first use (PEP 562), so importing a light submodule (``summary``, ``options``,
``perfetto_plan``: what the CLI, the config model and the Lambda need up front) does not load the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profstack.analysis.engine import AnalysisResult, FileError, analyze
    from profstack.analysis.errors import (
        AnalysisOptionsError,
        CorruptGzipError,
        DecompressionBombError,
        EmptyTraceError,
        GiantEventError,
        InternalAnalysisError,
        InvalidEventError,
        MalformedJsonError,
        NegativeDurationError,
        NotKinetoError,
        StepWindowError,
        TraceError,
        TraceSourceError,
        TruncatedTraceError,
        UnknownThresholdError,
    )
    from profstack.analysis.options import DEFAULT_THRESHOLDS, AnalysisOptions, RuleThresholds
    from profstack.analysis.sources import BytesTraceSource, FileTraceSource, TraceSource, discover_sources
    from profstack.analysis.summary import SUMMARY_SCHEMA_VERSION, Summary, summary_schema
    from profstack.analysis.trim import trim_trace

_WHERE = {
    "AnalysisResult": "engine",
    "FileError": "engine",
    "analyze": "engine",
    **dict.fromkeys(
        (
            "AnalysisOptionsError",
            "CorruptGzipError",
            "DecompressionBombError",
            "EmptyTraceError",
            "GiantEventError",
            "InternalAnalysisError",
            "InvalidEventError",
            "MalformedJsonError",
            "NegativeDurationError",
            "NotKinetoError",
            "StepWindowError",
            "TraceError",
            "TraceSourceError",
            "TruncatedTraceError",
            "UnknownThresholdError",
        ),
        "errors",
    ),
    "DEFAULT_THRESHOLDS": "options",
    "AnalysisOptions": "options",
    "RuleThresholds": "options",
    "BytesTraceSource": "sources",
    "FileTraceSource": "sources",
    "TraceSource": "sources",
    "discover_sources": "sources",
    "SUMMARY_SCHEMA_VERSION": "summary",
    "Summary": "summary",
    "summary_schema": "summary",
    "trim_trace": "trim",
}

__all__ = [
    "DEFAULT_THRESHOLDS",
    "SUMMARY_SCHEMA_VERSION",
    "AnalysisOptions",
    "AnalysisOptionsError",
    "AnalysisResult",
    "BytesTraceSource",
    "CorruptGzipError",
    "DecompressionBombError",
    "EmptyTraceError",
    "FileError",
    "FileTraceSource",
    "GiantEventError",
    "InternalAnalysisError",
    "InvalidEventError",
    "MalformedJsonError",
    "NegativeDurationError",
    "NotKinetoError",
    "RuleThresholds",
    "StepWindowError",
    "Summary",
    "TraceError",
    "TraceSource",
    "TraceSourceError",
    "TruncatedTraceError",
    "UnknownThresholdError",
    "analyze",
    "discover_sources",
    "summary_schema",
    "trim_trace",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
