"""Streaming analysis of PyTorch profiler (Kineto) traces. Pure Python: no AWS imports here.

from profstack.analysis import analyze, discover_sources
result = analyze(discover_sources(["traces/"]))
result.summary  # JSON-serialisable, validates against summary_schema()
"""

from profstack.analysis.engine import (
    SUMMARY_SCHEMA_VERSION,
    AnalysisResult,
    FileError,
    analyze,
    summary_schema,
)
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
from profstack.analysis.options import DEFAULT_THRESHOLDS, AnalysisOptions
from profstack.analysis.sources import BytesTraceSource, FileTraceSource, TraceSource, discover_sources
from profstack.analysis.trim import trim_trace

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
    "StepWindowError",
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
