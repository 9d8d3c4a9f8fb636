"""Completeness per section, and "partial" only where a reported number is at stake (issue #43 item 2).

Every gap a trace has (what ``errors.py`` types: a file cut off, launches without their GPU row, memory events
without allocator totals, ...) leaves one or more *sections* of a rank's results incomplete. It makes the run
*partial* (``complete: false``, the CLI's exit status 1, the report's banner, the e-mail's "incomplete") only when it
can move a headline number (GPU busy time and its idle split, GPU op totals, step time) by more than a stated
tolerance, or leaves one unknowable. A gap that leaves a number unknown and shown as unknown (memory peaks without
allocator totals), or that touches only a secondary table (the CPU-op table of a trace without CPU operators), makes
its section incomplete and is listed in ``warnings[]``; the run stays complete.

Tolerances: ``TOLERANCE_BUSY_PP`` percentage points of GPU busy time (of the GPU span), and ``TOLERANCE_TOTAL_PCT``
of a GPU time total (kernel time). A gap whose size is estimated (launches without a GPU row: their count times the
rank's mean kernel duration) is at stake when the estimate passes either; one whose size is unknown always is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from profstack.analysis.errors import TraceError
from profstack.analysis.summary import Completeness, SectionCompleteness

#: the sections of a rank's results whose completeness the summary states (``ranks[].completeness``)
SECTIONS = ("gpu_time", "launches", "cpu_ops", "steps", "memory")
#: a gap moves GPU busy time by at most this many percentage points of the GPU span, or ...
TOLERANCE_BUSY_PP = 0.5
#: ... a GPU time total by at most this share (%), and the run stays complete
TOLERANCE_TOTAL_PCT = 1.0

_ALL = SECTIONS
#: error type -> (the sections it leaves incomplete, whether it is at stake unless the instance says otherwise)
_BY_TYPE: Mapping[str, tuple[tuple[str, ...], bool]] = {
    # the file could not be read to its end, or not at all: anything after the cut is missing
    "TruncatedTraceError": (_ALL, True),
    "MalformedJsonError": (_ALL, True),
    "CorruptGzipError": (_ALL, True),
    "DecompressionBombError": (_ALL, True),
    "GiantEventError": (_ALL, True),
    "NotKinetoError": (_ALL, True),
    "EmptyTraceError": (_ALL, True),
    "TraceSourceError": (_ALL, True),
    "InternalAnalysisError": (_ALL, True),
    "StepWindowError": (_ALL, True),
    "ImplausibleResultError": (_ALL, True),
    # events skipped or read without their args: which numbers they belong to is unknown
    "InvalidEventError": (("gpu_time", "launches", "cpu_ops", "steps"), True),
    "NegativeDurationError": (("gpu_time", "launches", "cpu_ops", "steps"), True),
    # the GPU side unknown, or not one device's
    "GpuActivityNotRecordedError": (("gpu_time", "launches"), True),
    "NothingRecordedError": (_ALL, True),
    "DevicesWithoutActivityError": (("gpu_time",), True),
    "UnknownDeviceCategoryError": (("gpu_time",), True),
    "MultipleDevicesError": (("gpu_time",), True),
    "DuplicateEventsError": (("gpu_time",), True),
    "StreamsFoldedError": (("gpu_time",), True),
    "RoundingLossError": (("gpu_time",), True),  # the instance says (from half the op time lost on)
    # launches without a GPU row: the instance says (their estimated GPU time against the tolerances)
    "FlowsToNowhereError": (("gpu_time",), True),
    # the CPU side: without launch calls the idle split (host wait) is wrong; the instance says
    "CpuActivityNotRecordedError": (("launches", "cpu_ops", "steps", "memory"), True),
    # DataLoader spans and sync calls cut: the DataLoader share of step time is a headline
    "HostSpansCutError": (("cpu_ops", "steps"), True),
    # memory: peaks shown as unknown, or over the events kept; no other number depends on them
    "MemoryAllocatorUnknownError": (("memory",), False),
    "MemoryEventsCutError": (("memory",), False),
    "NamesFoldedError": (("gpu_time", "cpu_ops"), True),
}


def sections_of(err: TraceError) -> tuple[str, ...]:
    """The sections ``err`` leaves incomplete (every section for a type this module does not know)."""
    if err.sections is not None:
        return err.sections
    return _BY_TYPE.get(type(err).__name__, (_ALL, True))[0]


def at_stake(err: TraceError) -> bool:
    """Whether ``err`` can move a reported headline number beyond the tolerances (the run is then partial)."""
    if err.at_stake is not None:
        return err.at_stake
    return _BY_TYPE.get(type(err).__name__, (_ALL, True))[1]


def mark(err: TraceError, *, at_stake: bool | None = None, sections: Iterable[str] | None = None) -> TraceError:
    """Set what this instance leaves incomplete and whether it is at stake (beside its type's defaults)."""
    if at_stake is not None:
        err.at_stake = at_stake
    if sections is not None:
        err.sections = tuple(sections)
    return err


def section_state(gaps: Iterable[TraceError]) -> Completeness:
    """``ranks[].completeness``: per section, complete or not and the error types that leave it incomplete."""
    out: dict[str, SectionCompleteness] = {s: {"complete": True, "gaps": []} for s in SECTIONS}
    for err in gaps:
        name = type(err).__name__
        for s in sections_of(err):
            entry = out[s]
            entry["complete"] = False
            if name not in entry["gaps"]:
                entry["gaps"].append(name)
    return {
        "gpu_time": out["gpu_time"],
        "launches": out["launches"],
        "cpu_ops": out["cpu_ops"],
        "steps": out["steps"],
        "memory": out["memory"],
    }


def launch_gap_at_stake(missing_us: float, span_us: float, kernel_us: float) -> bool:
    """Whether GPU time ``missing_us`` (an estimate) can move busy time or kernel time beyond the tolerances."""
    if missing_us <= 0:
        return False
    if span_us <= 0 or kernel_us <= 0:
        return True
    return 100.0 * missing_us / span_us > TOLERANCE_BUSY_PP or 100.0 * missing_us / kernel_us > TOLERANCE_TOTAL_PCT
