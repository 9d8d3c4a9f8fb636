"""What a trace did not record (#34 item 2): each gap becomes a specific warning that says what is missing, what it
leaves unknown, and how to record it. A file with such a warning is not complete.

Checked per file from what the parse counted (``parse.FileData``), and per rank from the launch join:

* GPU rows without the CPU activity under them: no runtime/driver call (the launches) makes launch delays, the
  host-wait share of idle time and step selection by launch unknown; no ``cpu_op`` with the launches there (nor
  any record_function / ProfilerStep range: no CPU activity at all) leaves the CPU-op table, the steps and memory
  attribution empty. Both are warnings (the issue: "the same holds for CPU activity missing under GPU rows");
* neither CPU operators nor GPU activity, where the trace shows it meant to record them (runtime calls such as
  syncs, GPUs listed, ``profile_memory`` on): an empty profile (written before an active step), never called
  CPU-only, and where its header says ``profile_memory`` was on and no ``[memory]`` event was written, said so;
* GPUs listed in ``deviceProperties`` and no GPU activity at all (no GPU row, no launch call): a CPU workload or a
  profile without ``ProfilerActivity.CUDA`` (which records the launches too), which the trace cannot tell apart.
  Devices listed beside active ones are not reported: every rank of a job lists every GPU it can see;
* ``[memory]`` events without the allocator's totals (``Total Allocated``): peaks and memory over time unknown
  (the section's ``-1``, which the report shows as unknown), allocations and bytes exact: a warning, since the
  memory panel the user sees lacks its peaks (the file is not complete, so it is no regression baseline either);
* flows to nowhere: Kineto links a launch to its GPU row by an ``ac2g`` flow (a start ``"s"`` at the launch, a
  finish ``"f"`` at the GPU row, one id: the correlation). More starts than finishes means at least that many
  launches whose GPU row is missing (records dropped, or kernels still running when the profiler stopped). Counted,
  not matched by id (a lower bound: the parser keeps no per-flow state); finishes without a start are common (Kineto
  writes them on other links too) and say nothing. Launch calls without a GPU row are not counted instead: CUPTI
  writes no row for some ``cudaMemsetAsync`` calls (380 calls, 145 rows in HTA's ns_resolution sample), which would
  read as lost records.

Launches with no GPU row at all are ``GpuActivityNotRecordedError`` (``parse``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

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
        return [
            CpuActivityNotRecordedError(
                f"{gpu_rows:,} GPU row(s) and their launches, but no CPU activity (operators, record_function or "
                f"ProfilerStep ranges) was recorded: the CPU-op table and memory attribution are empty; "
                f"record {RECORD}",
                source=source,
            )
        ]
    return []


def file_warnings(fd: FileData, source: str) -> list[TraceError]:
    """The file's not-recorded warnings (empty for a file that holds what it should)."""
    out: list[TraceError] = [*_no_cpu_activity(fd, source), *_memory_without_allocator(fd, source)]
    gpu_rows = fd.n_kernels + fd.n_memcpy + fd.n_memset
    launches = fd.n_launch_records
    if gpu_rows and not fd.runtime_calls:
        no_ops = "; no CPU operator either" if not fd.cpu_ops else ""
        out.append(
            CpuActivityNotRecordedError(
                f"{gpu_rows:,} GPU row(s) but no launch call (runtime/driver) was recorded{no_ops}: launch delays, "
                f"the host-wait share of GPU idle time and step selection by launch are unknown; record {RECORD}",
                source=source,
            )
        )
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
    nowhere = fd.flow_starts - fd.flow_finishes
    if gpu_rows and nowhere > 0:  # without any GPU row, GpuActivityNotRecordedError says it
        out.append(
            FlowsToNowhereError(
                f"{nowhere:,} launch flow(s) start without a finish ({fd.flow_starts:,} ac2g flow starts, "
                f"{fd.flow_finishes:,} finishes): that many launches or more have no GPU row, their GPU time is "
                "missing (records dropped, or still running at the stop); synchronize before stopping the profiler",
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
