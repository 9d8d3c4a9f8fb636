"""What a trace did not record (#34 item 2): each gap becomes a specific warning that says what is missing, what it
leaves unknown, and how to record it. Each leaves sections of the results incomplete; it makes the run partial only
where a reported number is at stake (``profstack.analysis.completeness``, #43 item 2).

Checked per file from what the parse counted (``parse.FileData``), and per rank from the launch join:

* GPU rows without the CPU activity under them: no runtime/driver call (the launches) makes launch delays, the
  host-wait share of idle time and step selection by launch unknown (at stake: the idle split would say no host
  wait); no ``cpu_op`` with the launches there (nor any record_function / ProfilerStep range: no CPU activity at all)
  leaves the CPU-op table, the steps and memory attribution empty (those sections are incomplete; GPU time, launch
  delays and the idle split are complete);
* neither CPU operators nor GPU activity, where the trace shows it meant to record them (runtime calls such as
  syncs, GPUs listed, ``profile_memory`` on): an empty profile (written before an active step), never called
  CPU-only, and where its header says ``profile_memory`` was on and no ``[memory]`` event was written, said so;
* GPUs listed in ``deviceProperties`` and no GPU activity at all (no GPU row, no launch call): a CPU workload or a
  profile without ``ProfilerActivity.CUDA`` (which records the launches too), which the trace cannot tell apart.
  Devices listed beside active ones are not reported: every rank of a job lists every GPU it can see;
* ``[memory]`` events without the allocator's totals (``Total Allocated``): peaks and memory over time unknown
  (the section's ``-1``, which the report shows as unknown), allocations and bytes exact: the memory section is
  incomplete, no other number depends on it (the run stays complete);
* launches without a GPU row (``launch_gaps``): a kernel, graph or MTIA-function launch whose correlation no GPU row
  carries lost its row (CUPTI / roctracer buffers dropped records). Matched by correlation id in the launch join
  (``gpu.LaunchJoin.gaps``), not counted from ``ac2g`` flows: a flow also starts at calls that launch nothing
  (``cudaStreamSynchronize``, ``cudaStreamWaitEvent``, whose ``cuda_sync`` row is optional), and at copies and
  memsets of 0 bytes (CUDA returns without GPU work and CUPTI writes no row: 235 of the 380 ``cudaMemsetAsync``
  calls in HTA's ns_resolution sample, each 0.3 µs on the host against 7.6 µs for those with a row). Kernel
  launches after the last launch whose op was recorded were still queued or running when the profiler stopped:
  expected at the end of every window, not a gap. The rest is at stake when its estimated GPU time (count times the
  rank's mean kernel duration) passes the tolerances.

Launches with no GPU row at all are ``GpuActivityNotRecordedError`` (``parse``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from profstack.analysis.completeness import TOLERANCE_BUSY_PP, TOLERANCE_TOTAL_PCT, launch_gap_at_stake, mark
from profstack.analysis.errors import (
    CpuActivityNotRecordedError,
    DevicesWithoutActivityError,
    FlowsToNowhereError,
    MemoryAllocatorUnknownError,
    NothingRecordedError,
    TraceError,
)

if TYPE_CHECKING:
    from array import array

    from profstack.analysis.memory import MemoryEvents


class FileData(Protocol):
    """What this module reads of a parsed file (parse.FileData: a Protocol, so parse and this module do not
    import each other)."""

    meta: dict[str, Any]
    cpu_ops: int
    runtime_calls: int
    n_kernels: int
    n_memcpy: int
    n_memset: int
    n_launch_records: int
    a_gpu: array[int]
    st_num: array[int]
    flow_starts: int
    flow_finishes: int
    memory: MemoryEvents


#: how to record both sides (messages are cut at 300 characters: errors._MAX_MESSAGE)
RECORD = "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] (CUDA on ROCm too)"


def _header_profile_memory(meta: dict[str, Any]) -> bool:
    return meta.get("profile_memory") in (1, True)


def _devices(meta: dict[str, Any]) -> int:
    devices = meta.get("deviceProperties")
    return len(devices) if isinstance(devices, list) else 0


def _no_cpu_activity(fd: FileData, source: str) -> list[TraceError]:
    gpu_rows = fd.n_kernels + fd.n_memcpy + fd.n_memset
    # ProfilerActivity.CPU records operators, record_function ranges and the ProfilerStep#N ranges: none of them
    cpu_activity = fd.cpu_ops or len(fd.st_num) or any(g == 0 for g in fd.a_gpu)
    if gpu_rows and fd.runtime_calls and not cpu_activity:
        # GPU time, launch delays and the idle split stand: the CPU-side sections are empty, and say so
        err = CpuActivityNotRecordedError(
            f"{gpu_rows:,} GPU row(s) and their launches, but no CPU activity (operators, record_function or "
            f"ProfilerStep ranges) was recorded: the CPU-op table, the steps and memory attribution are empty (GPU "
            f"time, launch delays and the idle split are complete); record {RECORD}",
            source=source,
        )
        return [mark(err, at_stake=False, sections=("cpu_ops", "steps", "memory"))]
    return []


def file_warnings(fd: FileData, source: str) -> list[TraceError]:
    """The file's not-recorded warnings (empty for a file that holds what it should)."""
    out: list[TraceError] = [*_no_cpu_activity(fd, source), *_memory_without_allocator(fd, source)]
    gpu_rows = fd.n_kernels + fd.n_memcpy + fd.n_memset
    launches = fd.n_launch_records
    if gpu_rows and not fd.runtime_calls:
        no_ops = "; no CPU operator either" if not fd.cpu_ops else ""
        # the idle split has no host-wait share without launches: a reported number is wrong, not unknown
        err = CpuActivityNotRecordedError(
            f"{gpu_rows:,} GPU row(s) but no launch call (runtime/driver) was recorded{no_ops}: launch delays, "
            f"the host-wait share of GPU idle time and step selection by launch are unknown; record {RECORD}",
            source=source,
        )
        out.append(mark(err, at_stake=True, sections=("launches", "cpu_ops", "steps", "memory")))
    # an empty profile: no op, no GPU row, no launch, where the trace shows it meant to record more (host runtime
    # calls such as syncs, GPUs listed, profile_memory on); a trace of annotations alone shows nothing either way
    meant = fd.runtime_calls or _devices(fd.meta) or _header_profile_memory(fd.meta)
    if not gpu_rows and not launches and not fd.cpu_ops and meant:
        memory = (
            "; the header says profile_memory was on, yet no [memory] event was written"
            if _header_profile_memory(fd.meta) and not fd.memory.seen
            else ""
        )
        out.append(
            NothingRecordedError(
                f"neither CPU operators nor GPU activity were recorded{memory}: an empty profile, not a CPU-only "
                f"run (written before an active step?); call prof.step() every step and record {RECORD}",
                source=source,
            )
        )
    elif not gpu_rows and not launches and _devices(fd.meta):
        out.append(
            DevicesWithoutActivityError(
                f"{_devices(fd.meta)} GPU device(s) are listed in deviceProperties, but no GPU row or launch was "
                "recorded: a CPU-only run or unrecorded GPU activity (the trace cannot tell); if it used a GPU, "
                f"record {RECORD}",
                source=source,
            )
        )
    return out


def _memory_without_allocator(fd: FileData, source: str) -> list[TraceError]:
    mem = fd.memory
    unknown = mem.alloc.count(-1) if len(mem) else 0
    if not unknown:
        return []
    # the section's peaks are null for them and the report says why; allocations and bytes stand
    return [
        MemoryAllocatorUnknownError(
            f"{unknown:,} of {len(mem):,} [memory] event(s) carry no allocator totals (Total Allocated / Total "
            "Reserved): peak and over-time memory are unknown (allocations and bytes are counted); newer PyTorch "
            "releases write them with profile_memory=True",
            source=source,
        )
    ]


def file_notices(fd: FileData, source: str) -> list[TraceError]:
    """Gaps that lose no result the user sees (none today: every gap above changes a result, so it is a warning).
    Kept as the place for such notices."""
    del fd, source
    return []


def launch_gaps(
    kernels: int, at_stop: int, maybe_empty: int, *, source: str, span_us: float, kernel_us: float, n_kernels: int
) -> TraceError | None:
    """The warning for kernel launches without their GPU row (``gpu.LaunchGaps``), with its size and whether it is
    at stake; None when there are none (calls at the stop and those that may enqueue nothing are not gaps)."""
    if kernels <= 0:
        return None
    mean = kernel_us / n_kernels if n_kernels else 0.0
    missing = kernels * mean
    stake = launch_gap_at_stake(missing, span_us, kernel_us)
    size = (
        f"~{missing:,.1f} µs of GPU time ({kernels:,} x {mean:,.2f} µs mean kernel) = "
        f"{100.0 * missing / span_us:.2f} pp of the GPU span"
        if span_us > 0 and n_kernels
        else "GPU time unknown"
    )
    tolerance = f"the {TOLERANCE_BUSY_PP} pp / {TOLERANCE_TOTAL_PCT:g} % tolerance"
    aside = [f"{at_stop:,} at the stop"] if at_stop else []
    aside += [f"{maybe_empty:,} copy/memset calls"] if maybe_empty else []
    err = FlowsToNowhereError(
        f"{kernels:,} kernel launch(es) without a GPU row (records dropped): {size}, "
        f"{'beyond' if stake else 'within'} {tolerance}"
        + (f" (not counted: {', '.join(aside)} without a row)" if aside else ""),
        source=source,
    )
    return mark(err, at_stake=stake, sections=("gpu_time",))
