"""Typed errors of the analysis engine. Every one renders as a single line (no newlines, bounded length)."""

from __future__ import annotations

_MAX_MESSAGE = 300


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_MESSAGE else flat[: _MAX_MESSAGE - 3] + "..."


class TraceError(Exception):
    """Base of every error the engine raises or records. ``str()`` is one line."""

    #: True when results parsed before the error are still meaningful (partial results).
    partial_ok: bool = False
    #: set on an instance where its own size decides (profstack.analysis.completeness): whether it can move a
    #: reported headline number beyond the tolerances, and the result sections it leaves incomplete; None: the
    #: type's default there
    at_stake: bool | None = None
    sections: tuple[str, ...] | None = None

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        self.detail = _one_line(message)
        super().__init__(self.detail)

    def __str__(self) -> str:
        return f"{self.source}: {self.detail}" if self.source else self.detail

    def with_source(self, source: str) -> TraceError:
        if self.source is None:
            self.source = source
        return self


class TruncatedTraceError(TraceError):
    """The JSON (or the gzip stream around it) ends before the trace is complete."""

    partial_ok = True


class MalformedJsonError(TraceError):
    """The bytes are not valid JSON at the top level (outside single events)."""

    partial_ok = True


class CorruptGzipError(TraceError):
    """The gzip stream is corrupt (bad header, CRC or deflate data)."""

    partial_ok = True


class DecompressionBombError(TraceError):
    """The decompressed size exceeded the configured budget."""


class NotKinetoError(TraceError):
    """Valid JSON, but not a PyTorch profiler (Kineto) trace."""


class EmptyTraceError(TraceError):
    """A Kineto trace without any duration ('X') events."""


class GiantEventError(TraceError):
    """A single JSON value is larger than the per-event limit."""

    partial_ok = True


class InvalidEventError(TraceError):
    """Events with missing or ill-typed fields were skipped (recorded, not fatal)."""

    partial_ok = True


class NegativeDurationError(InvalidEventError):
    """Events with negative durations were skipped (recorded, not fatal)."""


class TraceSourceError(TraceError):
    """The input could not be opened or read."""


class AnalysisOptionsError(TraceError):
    """Invalid analysis options."""


class UnknownThresholdError(AnalysisOptionsError):
    """``rule_thresholds`` names a threshold that does not exist."""


class InternalAnalysisError(TraceError):
    """An unexpected failure while analysing one input (a bug): recorded so other inputs still count."""


class StepWindowError(TraceError):
    """The requested step window matches no ProfilerStep in the trace."""


class OverlappingRankFilesError(TraceError):
    """Files given the same rank overlap in time (likely different runs or jobs): analysed apart."""

    partial_ok = True


class SeparateRunsError(TraceError):
    """Files given the same rank are not successive cycles of one run (another process, or far apart): kept apart."""

    partial_ok = True


class ImplausibleResultError(TraceError):
    """A result failed a plausibility check (e.g. a GPU span far beyond the steps): reported, marked incomplete."""

    partial_ok = True


class GpuActivityNotRecordedError(TraceError):
    """The trace launched GPU work (kernel launches, device memcpys) but holds no GPU rows: the GPU was used and not
    recorded, which is not a CPU-only run. Reported, marked incomplete, with how to record it."""

    partial_ok = True


class UnknownDeviceCategoryError(TraceError):
    """Rows that look like device activity carry a category the parser does not know: not analysed as GPU ops."""

    partial_ok = True


class RoundingLossError(TraceError):
    """HTA's whole-µs rounding removed a material share of the analysed GPU op time (recorded; from half of it
    on, also marked incomplete)."""

    partial_ok = True


class DuplicateEventsError(TraceError):
    """GPU ops written twice (same launch, stream and start): counts include the copies (recorded, incomplete)."""

    partial_ok = True


class StreamsFoldedError(TraceError):
    """GPU ops on more distinct streams than ProfStack keeps share one idle-breakdown row (recorded, incomplete)."""

    partial_ok = True


class HostSpansCutError(TraceError):
    """Host synchronisation calls, annotations or DataLoader spans beyond the host-span columns' bound were left
    out: the results built on them cover the file up to there (recorded, incomplete)."""

    partial_ok = True


class MemoryEventsCutError(TraceError):
    """``[memory]`` events beyond the memory section's bound, or without a time or a byte count, were left out:
    its peaks, timeline and operators cover the rest only (recorded, incomplete)."""

    partial_ok = True


class MultipleDevicesError(TraceError):
    """One file holds GPU ops of several devices: its GPU span, busy and idle time are their union (recorded)."""

    partial_ok = True


class FlowsToNowhereError(TraceError):
    """Kernel launches whose GPU row is missing (matched by correlation id: their ``ac2g`` flows reach no row): GPU
    records were lost (CUPTI / roctracer buffers). Launches at the stop and calls that may enqueue nothing are not
    counted. Recorded with the estimated GPU time missing; at stake (incomplete) beyond the tolerances
    (``profstack.analysis.completeness``)."""

    partial_ok = True


class DevicesWithoutActivityError(TraceError):
    """``deviceProperties`` lists GPUs, and no GPU activity (rows or launch calls) was recorded: a CPU workload, or
    a profile without ProfilerActivity.CUDA; the trace cannot tell which (recorded, incomplete)."""

    partial_ok = True


class MemoryAllocatorUnknownError(TraceError):
    """``[memory]`` events without the allocator's totals (``Total Allocated`` / ``Total Reserved``): peaks and memory
    over time are unknown for them (shown as unknown, the rest of the results stand; recorded, incomplete)."""

    partial_ok = True


class CpuActivityNotRecordedError(TraceError):
    """GPU rows without the CPU side (operators, or the launch calls): CPU ops, launch delays and the host-wait
    share of idle time are unknown (recorded, incomplete)."""

    partial_ok = True


class NothingRecordedError(TraceError):
    """Neither CPU operators nor GPU activity were recorded: not a CPU-only run, an empty profile (recorded,
    incomplete)."""

    partial_ok = True


#: warnings that say something was not recorded (rather than unreadable): the CLI and the report show them as such
NOT_RECORDED = frozenset(
    {
        "GpuActivityNotRecordedError",
        "FlowsToNowhereError",
        "DevicesWithoutActivityError",
        "MemoryAllocatorUnknownError",
        "CpuActivityNotRecordedError",
        "NothingRecordedError",
    }
)
