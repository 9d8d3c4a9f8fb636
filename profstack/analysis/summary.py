"""The analysis summary as typed structures: the one contract of rules, report, CLI, Lambda and fan-out merge.

A summary is plain JSON (dicts and lists), so these are TypedDicts: they cost nothing at run time and the
bytes written are exactly the dicts built. ``summary.schema.json`` (next to this file) is the published JSON
Schema of the same structure; ``tests/unit/analysis/test_summary_types.py`` fails when a field is added to,
removed from or made optional in one and not the other.

Layout (top down): :class:`Summary` -> ``ranks`` (:class:`RankSummary`, one section per analyzer in
``profstack/analysis/analyzers/``) -> ``cross_rank`` (:class:`CrossRank`) -> ``findings`` (:class:`Finding`).
Also here: the schema version, the one severity order, and the "UnreadableTraceFiles" finding that both the
engine and the fan-out merge add when an input could not be read completely.
"""

# No `from __future__ import annotations`: TypedDict needs real annotations to see NotRequired (3.11).
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any, Literal, NotRequired, TypedDict

from profstack.analysis.errors import NOT_RECORDED

SUMMARY_SCHEMA_VERSION = "1.8"

Severity = Literal["critical", "warning", "info"]
#: The one severity order (most severe first): engine, merge, report, CLI and notifications sort by it.
SEVERITIES: tuple[Severity, ...] = ("critical", "warning", "info")
SEVERITY_ORDER: Mapping[str, int] = {s: i for i, s in enumerate(SEVERITIES)}


def severity_rank(severity: object) -> int:
    """Sort key of a severity: 0 for critical ... and after every known one for anything else."""
    return SEVERITY_ORDER.get(str(severity), 9)


@cache
def _schema_text() -> str:
    return resources.files("profstack.analysis").joinpath("summary.schema.json").read_text(encoding="utf-8")


def summary_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) every summary validates against."""
    schema: dict[str, Any] = json.loads(_schema_text())
    return schema


# ------------------------------------------------------------------------------------------ shared pieces


class Histogram(TypedDict):
    edges_us: list[float]
    counts: list[int]


class NameStat(TypedDict):
    name: str
    count: int
    total_us: float


class AnnotationStat(TypedDict):
    name: str
    count: int
    total_us: float
    mean_us: float
    max_us: float
    histogram: Histogram
    #: schema 1.2: equal-width bins from this annotation's shortest to its longest duration (n + 1 edges)
    durations_histogram: NotRequired[Histogram]


class KernelStat(TypedDict):
    name: str
    kernel_type: str
    precision: str
    count: int
    total_us: float
    mean_us: float
    min_us: float
    max_us: float
    std_us: float
    pct_of_gpu_op_time: float
    #: schema 1.6: where ``precision`` was read: the kernel's argument types, its name only (a fallback), neither;
    #: schema 1.7: ``op_types``: the input types of the operators that launched it (record_shapes); schema 1.8:
    #: ``context``: a name that says only "16-bit float", decided by the rank's typed 16-bit kernels
    precision_source: NotRequired[Literal["types", "op_types", "name", "context", "none", "n/a"]]


class ErrorEntry(TypedDict):
    source: str
    error_type: str
    message: str
    fatal: bool


class Finding(TypedDict):
    rule_id: str
    severity: Severity
    message: str
    evidence: dict[str, Any]
    recommendation: str
    ranks: list[int]


# ------------------------------------------------------------------------------------------ one rank


class Device(TypedDict):
    name: str
    total_global_mem_bytes: int | None
    num_sms: int | None
    compute_capability: str | None


class Distributed(TypedDict):
    world_size: int | None
    backend: str | None


class Counts(TypedDict):
    events: int
    gpu_kernels: int
    gpu_memcpy: int
    gpu_memset: int
    gpu_ops_analyzed: int
    cpu_ops: int
    runtime_calls: int
    invalid_events: int


class Window(TypedDict):
    start_us: float | None
    end_us: float | None
    duration_us: float
    steps: list[int]
    last_step_dropped: bool


class TemporalBreakdown(TypedDict):
    gpu_span_us: float
    idle_time_us: float
    compute_time_us: float
    non_compute_time_us: float
    idle_pct: float
    compute_pct: float
    non_compute_pct: float


class StreamIdle(TypedDict):
    stream: int
    host_wait_us: float
    kernel_wait_us: float
    other_us: float


class IdleCauses(TypedDict):
    """Schema 1.8: the GPU's idle time split by what the host did meanwhile (analyzers/host_side.py): in a CPU
    collective, in the DataLoader, blocked in a synchronisation call, launching too slowly, or neither (sleeping or
    computing), or the GPU side (the next op was already queued). The parts add up to ``idle_time_us``. Where the
    host's part cannot be split (no launch call of the launch-delay set) it is ``host_unexplained_us``."""

    idle_time_us: float
    collective_wait_us: float
    data_wait_us: float
    sync_wait_us: float
    late_launch_us: float | None
    host_busy_us: float | None  # the host sleeping or computing: no launch issued
    host_unexplained_us: float | None
    gpu_side_us: float | None  # the next op was already queued: a dependency or the GPU's own launch latency
    collective_wait_pct: float | None
    data_wait_pct: float | None
    sync_wait_pct: float | None
    late_launch_pct: float | None
    host_busy_pct: float | None
    gpu_side_pct: float | None
    resolution_us: float  # the time bins late launches and host busy time were told apart on


class IdleBreakdown(TypedDict):
    host_wait_us: float
    kernel_wait_us: float
    other_us: float
    host_wait_pct: float
    kernel_wait_pct: float
    other_pct: float
    consecutive_kernel_delay_us: float
    per_stream: list[StreamIdle]
    causes: NotRequired[IdleCauses | None]  # schema 1.8


class GpuActivity(TypedDict):
    kernel_time_us: float
    memcpy_time_us: float
    memset_time_us: float
    sync_time_us: float
    kernel_pct: float
    memcpy_pct: float
    memset_pct: float
    sync_pct: float  # GPU-side sync rows only (schema 1.6; before, host sync calls where no GPU row was recorded)
    host_sync_time_us: float  # schema 1.6: host sync calls' CPU time, shown apart and in none of the shares


class KernelTypeShare(TypedDict):
    kernel_type: str
    time_us: float
    pct: float


class PrecisionShare(TypedDict):
    precision: str
    count: int
    time_us: float
    pct: float


class MathPrecisionShare(PrecisionShare):
    #: schema 1.6: of ``time_us``, the time whose class was read from kernel names only (no argument types)
    from_name_time_us: NotRequired[float]
    #: schema 1.7: of ``time_us``, the time whose class was read from the launching operators' input types
    from_op_types_time_us: NotRequired[float]
    #: schema 1.8: of ``time_us``, the time of kernels whose names say only "16-bit float" (cuDNN's ``..._f16_...``),
    #: decided by the rank's own typed 16-bit kernels (its operators did not say)
    from_context_time_us: NotRequired[float]


class ConversionKernels(TypedDict):
    """Schema 1.2: quantise / dequantise / cast / convert kernels, kept out of ``precision`` (math)."""

    count: int
    time_us: float
    pct_of_computation: float | None  # of all computation-kernel time
    by_precision: list[PrecisionShare]  # the precision named in the kernel (e.g. fp8 for an FP8 cast)


class CutoffCount(TypedDict):
    cutoff_us: float
    count: int
    pct: float


class LaunchDelay(TypedDict):
    count: int
    mean_us: float | None
    p50_us: float | None
    p95_us: float | None
    p99_us: float | None
    max_us: float | None
    quantiles: NotRequired[str]
    over_cutoffs: list[CutoffCount]
    histogram: Histogram
    cpu_launch_mean_us: float | None
    negative_raw_count: NotRequired[int]  # raw delays below zero (clipped when clipped_at_zero)
    clipped_at_zero: NotRequired[bool]
    launch_calls: NotRequired[Literal["hta", "all"]]
    #: schema 1.6: why no delay was computed although GPU ops were analysed (absent otherwise)
    unavailable_reason: NotRequired[str]


class Sync(TypedDict):
    """Host waits (``calls``, ``time_us``, ``by_name``: runtime sync calls, CPU time) and GPU-side sync rows
    (``gpu_events``, ``gpu_time_us``), apart. Schema 1.6: what the GPU did while the host waited (null where no GPU
    row was recorded: unknown, not idle)."""

    calls: int
    time_us: float
    gpu_events: int
    gpu_time_us: float
    by_name: list[NameStat]
    host_wait_union_us: float | None
    host_wait_gpu_busy_us: float | None
    host_wait_gpu_idle_us: float | None
    host_wait_gpu_busy_pct: float | None
    gpu_timeline_resolution_us: float | None


class MemcpyDirection(TypedDict):
    direction: str
    count: int
    bytes: int
    time_us: float
    bandwidth_gbps: float | None


class Memset(TypedDict):
    count: int
    bytes: int
    time_us: float
    bandwidth_gbps: float | None


class MemoryOps(TypedDict):
    memcpy: list[MemcpyDirection]
    memset: Memset


class StepOutlier(TypedDict):
    step: int
    duration_us: float


class StepDuration(TypedDict):
    step: int
    start_us: float
    duration_us: float


class Steps(TypedDict):
    count: int
    mean_us: float | None
    p50_us: float | None
    p95_us: float | None
    max_us: float | None
    min_us: float | None
    std_us: float | None
    outlier_sigma: float
    outlier_threshold_us: float | None
    outliers: list[StepOutlier]
    durations: list[StepDuration]
    histogram: Histogram


class DataLoader(TypedDict):
    time_us: float
    step_time_us: float
    share_pct: float | None
    events: int


class Annotations(TypedDict):
    cpu: list[AnnotationStat]
    gpu: list[AnnotationStat]


class HostCollectives(TypedDict):
    """Schema 1.8: collectives that run on the CPU (gloo, MPI, UCC: ``gloo:all_reduce`` spans on the process group's
    worker threads), within the analysed steps: the host's communication, waits for peers included."""

    calls: int
    time_us: float  # union of the spans
    exposed_time_us: float  # of it, the time no GPU op ran (all of it on a CPU-only rank)
    pct_of_step: float | None
    backend: str | None  # distributedInfo.backend
    by_name: list[NameStat]


class Communication(TypedDict):
    kernel_count: int
    comm_time_us: float
    compute_time_us: float
    overlap_time_us: float
    overlap_pct_of_comm: float | None
    comm_pct_of_span: float | None
    #: schema 1.2: communication during which no computation kernel runs (comm_time_us - overlap_time_us)
    exposed_time_us: NotRequired[float]
    exposed_pct_of_span: NotRequired[float | None]
    step_time_us: NotRequired[float | None]  # the analysed steps' total (ProfilerStep durations)
    #: exposed GPU communication and (schema 1.8) exposed CPU collective time, over the step time
    exposed_pct_of_step: NotRequired[float | None]
    host_collectives: NotRequired[HostCollectives | None]  # schema 1.8


class Occupancy(TypedDict):
    kernels_with_occupancy: int
    weighted_mean_occupancy_pct: float | None
    tensor_core_time_us: float
    tensor_core_pct_of_compute: float | None


class ActivityTimeline(TypedDict):
    """Schema 1.2: activity over the analysed window in ``bins`` equal time bins from ``start_us``."""

    start_us: float
    bin_us: float
    bins: int
    gpu_busy_pct: list[float]  # share of the bin during which any GPU op runs
    computation_pct: list[float]  # ... a computation kernel runs
    communication_pct: list[float]
    memory_pct: list[float]
    launches_per_ms: list[float]  # kernel launches (runtime calls joined to GPU ops) per ms
    launch_time_pct: list[float]  # share of the bin the host spends in those launch calls
    cpu_ops_per_ms: list[float]  # CPU operators started per ms (whole trace, not only the window's steps)
    dataloader_pct: list[float]
    sync_pct: list[float]  # host synchronisation calls


class CudaGraph(TypedDict):
    graph: str  # "graph 1", ... by GPU time
    launches: int
    kernels_per_launch: int
    gpu_time_us: float
    mean_launch_us: float
    first_kernel: str | None


class CudaGraphs(TypedDict):
    """Schema 1.2: launches that ran several GPU ops (CUDA graphs), grouped by their sequence of ops."""

    launch_apis: list[str]  # e.g. cudaGraphLaunch
    graph_launches: int
    kernels: int
    gpu_time_us: float
    distinct_graphs: int
    graphs: list[CudaGraph]
    complete: bool  # false: some launch's first op or launches beyond the bound were not tracked


class MemoryTimeline(TypedDict):
    start_us: float
    bin_us: float
    max_allocated_bytes: list[int]
    max_reserved_bytes: list[int]


class StepPeak(TypedDict):
    step: int
    peak_allocated_bytes: int


class MemoryDevice(TypedDict):
    device: str  # cuda:0, cpu
    events: int
    allocations: int
    frees: int
    allocated_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int | None
    start_allocated_bytes: int
    end_allocated_bytes: int
    step_peaks: list[StepPeak]
    increase_pct: float | None  # last analysed step's peak over the first's (GPUMemoryIncrease)
    timeline: MemoryTimeline


class MemoryOperator(TypedDict):
    name: str
    device: str
    allocations: int
    bytes: int


class MemorySection(TypedDict):
    """Schema 1.2: profile_memory's [memory] events in the analysed window (events 0: none recorded)."""

    events: int
    complete: bool
    attributed: bool
    devices: list[MemoryDevice]
    top_operators: list[MemoryOperator]
    #: schema 1.6: the trace header says profile_memory was on (events 0 then means none was written, not "off")
    header_profile_memory: NotRequired[bool]


class GpuAnalysis(TypedDict):
    mode: str
    reason: str | None


class SectionCompleteness(TypedDict):
    """schema 1.8: one section of a rank's results: complete, or the error types (in ``errors[]`` / ``warnings[]``)
    that leave it incomplete. Only a gap that can move a headline number makes the run partial
    (``profstack.analysis.completeness``)."""

    complete: bool
    gaps: list[str]


class Completeness(TypedDict):
    """schema 1.8: ``ranks[].completeness``, per section (``completeness.SECTIONS``)."""

    gpu_time: SectionCompleteness
    launches: SectionCompleteness
    cpu_ops: SectionCompleteness
    steps: SectionCompleteness
    memory: SectionCompleteness


class RankSummary(TypedDict):
    """``$defs/rank``: one rank (or one file of a rank whose files were analysed apart)."""

    rank: int
    label: str
    run: NotRequired[str]  # runs[].id of the run this entry belongs to
    sources: list[str]
    complete: bool
    gpu_analysis: NotRequired[GpuAnalysis]
    has_gpu: bool
    device: Device | None
    distributed: Distributed | None
    counts: Counts
    window: Window
    temporal_breakdown: TemporalBreakdown
    idle_breakdown: IdleBreakdown
    gpu_activity: GpuActivity
    kernel_types: list[KernelTypeShare]
    top_kernels_by_time: list[KernelStat]
    top_kernels_by_count: list[KernelStat]
    distinct_kernels: int
    precision: list[MathPrecisionShare]
    conversion_kernels: NotRequired[ConversionKernels]
    launch_delay: LaunchDelay
    sync: Sync
    memory_ops: MemoryOps
    steps: Steps
    dataloader: DataLoader
    annotations: Annotations
    communication: Communication
    occupancy: Occupancy
    top_cpu_ops: list[NameStat]
    timeline: NotRequired[ActivityTimeline | None]
    memory: NotRequired[MemorySection]
    cuda_graphs: NotRequired[CudaGraphs | None]
    #: schema 1.8: what each section's numbers rest on (memory can be incomplete while GPU time is complete)
    completeness: NotRequired[Completeness]
    #: schema 1.8: the resolution of the rank's GPU times in ns (1000: whole µs, HTA's model or a whole-µs trace;
    #: ~1: ns since baseTimeNanoseconds; 250: an absolute epoch-µs clock); None without GPU ops
    time_resolution_ns: NotRequired[float | None]


# ------------------------------------------------------------------------------------------ across ranks


class CrossRankRow(TypedDict):
    rank: int
    label: str
    run: NotRequired[str]
    step_mean_us: float | None
    gpu_busy_pct: float | None
    idle_pct: float | None
    compute_time_us: float
    comm_time_us: float
    gpu_span_us: float
    exposed_comm_pct_of_step: NotRequired[float | None]  # schema 1.2


class Straggler(TypedDict):
    rank: int
    label: str
    metric: str
    value: float
    median: float
    deviation_pct: float


class LoadBalance(TypedDict):
    metric: str
    min: float | None
    max: float | None
    mean: float | None
    spread_pct: float | None
    cv: float | None


class CrossRankResult(TypedDict):
    """What ``rules.cross_rank`` computes from the table."""

    stragglers: list[Straggler]
    load_balance: LoadBalance


class CrossRank(TypedDict):
    rank_count: int
    run: NotRequired[str]  # the run whose stragglers / load balance are shown (the one with most ranks)
    table: list[CrossRankRow]
    stragglers: list[Straggler]
    load_balance: LoadBalance


class RunCrossRank(TypedDict):
    rank_count: int
    stragglers: list[Straggler]
    load_balance: LoadBalance


class Run(TypedDict):
    """``runs[]``: files of one job run (successive cycles of one process merged, anything else apart)."""

    id: str
    label: str
    files: list[str]
    ranks: list[str]
    start_us: float | None
    duration_us: float | None
    cross_rank: RunCrossRank


# ------------------------------------------------------------------------------------------ the summary


class Generator(TypedDict):
    name: str
    version: str
    #: schema 1.4: which engine read the traces ("c": the C reader and loops; "python": the Python loop, the same
    #: results, slower), and, for "python", why (not built, import error, PROFSTACK_ACCEL=python)
    engine: NotRequired[str]
    engine_reason: NotRequired[str]


class Options(TypedDict):
    top_k: int
    steps: list[int] | None
    include_last_step: bool
    merge_rank_files: bool
    rule_thresholds: dict[str, float]
    include_last_step_default: NotRequired[bool]
    max_cycle_gap_s: NotRequired[float]
    launch_calls: NotRequired[Literal["hta", "all"]]
    clip_launch_delay: NotRequired[bool]
    count_sync: NotRequired[bool]
    steps_keep_unlaunched: NotRequired[bool]
    #: schema 1.7: untyped kernels' precision read from their operators' input types (op_types)
    op_types: NotRequired[bool]
    #: schema 1.8: HTA's time model (whole µs) instead of the exact one (``time_model``)
    hta_compat: NotRequired[bool]


class InputEntry(TypedDict):
    name: str
    #: None only for a fan-out file whose partial never arrived (the schema says integer)
    rank: int | None
    rank_source: str
    size_bytes: int | None
    status: Literal["ok", "partial", "failed"]
    events: int
    error: ErrorEntry | None


CostCause = Literal["host", "input_pipeline", "exposed_communication", "other_idle"]


class CostShare(TypedDict):
    """One cause of lost GPU time, priced (``profstack.history.cost``)."""

    cause: CostCause
    label: str
    #: share of the job's GPU time (mean over the profiled GPU ranks)
    share_pct: float
    gpu_hours: float | None
    usd: float | None


class CostPrice(TypedDict):
    """Where the price came from: the pinned table (``profstack/history/prices.json``) or the config."""

    region: str
    as_of: str
    source: str
    verified: bool
    overridden: bool


class Cost(TypedDict):
    """``cost`` (1.2): what the job's GPUs cost and what the idle causes cost, added by the processor."""

    instance_type: str | None
    instance_count: int | None
    gpus_per_instance: int | None
    gpu_count: int | None
    duration_s: float | None
    billable_s: float | None
    gpu_hours: float | None
    usd_per_instance_hour: float | None
    total_usd: float | None
    #: sum of ``attribution[].usd``: GPU time lost to the causes below
    lost_usd: float | None
    price: CostPrice
    basis: str
    attribution: list[CostShare]
    notes: list[str]


class TimelineFile(TypedDict):
    """One trimmed timeline (Perfetto / HTA) written next to the summary (``profstack analyze``)."""

    file: str  # relative to the summary's folder, e.g. perfetto/rank-0.trace.json.gz
    source: str
    rank: int
    window: str  # median | slowest | all | A:B
    steps: list[int]
    events: int
    max_events: int | None
    dropped: dict[str, int]  # tier -> events the cap dropped (profstack.analysis.trim.TIERS)
    moved_to_overlap_tracks: int


SystemStatus = Literal["ok", "partial", "no_data", "unavailable"]


class SystemSection(TypedDict):
    """``system`` (1.3, trace processor only): the job's CloudWatch instance metrics, stored in ``system.json``
    next to the summary, and what became of reading them (``lambdas/trace_processor/system_view.py``)."""

    status: SystemStatus
    reason: str | None
    file: str | None
    hosts: int
    period_s: int | None
    start_s: float | None
    end_s: float | None
    complete: bool
    downsampled: bool


class Summary(TypedDict):
    """The whole ``summary.json`` (schema ``summary.schema.json``)."""

    schema_version: str
    generator: Generator
    complete: bool
    options: Options
    inputs: list[InputEntry]
    errors: list[ErrorEntry]
    warnings: NotRequired[list[ErrorEntry]]
    #: schema 1.8: the time model every number was computed in: "exact" (integer ns, the trace's own resolution) or
    #: "hta" (--hta-compat: every GPU op rounded to whole µs, start up and end down, as HTA does)
    time_model: NotRequired[Literal["exact", "hta"]]
    rank_files_merged: bool
    runs: NotRequired[list[Run]]
    ranks: list[RankSummary]
    cross_rank: CrossRank
    findings: list[Finding]
    cost: NotRequired[Cost]
    #: schema 1.2: the trimmed timelines written with this summary (absent: the writer did not say)
    timelines: NotRequired[list[TimelineFile]]
    #: schema 1.3: the job's CloudWatch instance metrics (the trace processor adds it)
    system: NotRequired[SystemSection]
    #: schema 1.5 (lambdas/live_analysis): true for the report of a job that still ran, and when and from what it
    #: was made; absent from the final report, which replaces it
    in_progress: NotRequired[bool]
    live: NotRequired[dict[str, Any]]
    #: schema 1.5: the actions rules took on the job (profstack/actions.py: notify, or stop), live or final
    actions: NotRequired[list[dict[str, Any]]]


# ------------------------------------------------------------------------------------------ assembly helpers


def cross_rank_row(r: RankSummary, run_id: str) -> CrossRankRow:
    """One rank's row of the cross-rank table (rows of one run are compared with each other only)."""
    tb = r["temporal_breakdown"]
    return {
        "rank": r["rank"],
        "label": r["label"],
        "run": run_id,
        "step_mean_us": r["steps"]["mean_us"],
        "gpu_busy_pct": round(100.0 - tb["idle_pct"], 3) if tb["gpu_span_us"] else None,
        "idle_pct": tb["idle_pct"] if tb["gpu_span_us"] else None,
        "compute_time_us": tb["compute_time_us"],
        "comm_time_us": r["communication"]["comm_time_us"],
        "gpu_span_us": tb["gpu_span_us"],
        "exposed_comm_pct_of_step": r["communication"].get("exposed_pct_of_step"),
    }


def cross_rank_section(rows: list[CrossRankRow], result: CrossRankResult, run: str | None = None) -> CrossRank:
    section: CrossRank = {
        "rank_count": len({row["rank"] for row in rows}),
        "table": rows,
        "stragglers": result["stragglers"],
        "load_balance": result["load_balance"],
    }
    if run is not None:
        section["run"] = run
    return section


def gpu_side_unknown(summary: Mapping[str, Any], rank: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """For a rank without GPU rows: the errors and warnings that leave its GPU side unknown (a file cut off before its
    GPU rows, GPU activity not recorded, ...): such a rank is never "CPU-only". Empty for a rank with GPU rows, and
    for a CPU-only one (its ``completeness.gpu_time`` complete, or a summary before schema 1.8 without it)."""
    if rank.get("has_gpu"):
        return []
    section = (rank.get("completeness") or {}).get("gpu_time") or {}
    types = set(section.get("gaps") or []) if section.get("complete") is False else set()
    if not types:
        return []
    sources = {str(x) for x in rank.get("sources") or []} | {str(rank.get("label"))}
    return [
        e
        for e in [*(summary.get("errors") or []), *(summary.get("warnings") or [])]
        if isinstance(e, Mapping) and e.get("error_type") in types and str(e.get("source")) in sources
    ]


UNREADABLE_RULE_ID = "UnreadableTraceFiles"
_UNREADABLE = frozenset({"failed", "partial"})


def unreadable_inputs(inputs: Iterable[Mapping[str, Any]]) -> list[str]:
    """Names of the inputs that could not be read (failed) or were read only in part (partial)."""
    return [str(i.get("name")) for i in inputs if i.get("status") in _UNREADABLE]


def add_findings(
    summary: dict[str, Any], found: Iterable[Mapping[str, Any]], *, replace: Callable[[Mapping[str, Any]], bool]
) -> None:
    """The one way findings join a finished summary (in place): the findings ``replace`` selects go (those of an
    earlier delivery of the same job), ``found`` is added, and the list is kept in the one severity order with an
    ``UnreadableTraceFiles`` warning first, as the engine and the fan-out merge put it. Used for the processor's
    Regression finding (``profstack.history``) and its system findings (``profstack.jobs.instance_rules``)."""
    kept = [f for f in summary.get("findings") or [] if isinstance(f, Mapping) and not replace(f)]
    head = [f for f in kept if f.get("rule_id") == UNREADABLE_RULE_ID]
    rest = [f for f in kept if f.get("rule_id") != UNREADABLE_RULE_ID] + [dict(f) for f in found]
    rest.sort(key=lambda f: severity_rank(f.get("severity")))  # stable: each source keeps its own order
    summary["findings"] = head + rest


def unreadable_finding(inputs: Sequence[Mapping[str, Any]]) -> Finding | None:
    """The "UnreadableTraceFiles" finding for these inputs, or None when every input was read whole.

    It goes first in ``findings`` (whatever its severity): the report must say up front that it covers only
    what could be read. Both the engine (``analyze``) and the fan-out merge (``merge_partials``) add it."""
    bad = [i for i in inputs if i.get("status") in _UNREADABLE]
    if not bad:
        return None
    reasons = {str(i.get("name")): str((i.get("error") or {}).get("message", i.get("status"))) for i in bad}
    if all(i.get("status") == "partial" and (i.get("error") or {}).get("error_type") in NOT_RECORDED for i in bad):
        # read whole, but the profiler did not record everything (schema 1.6: errors.NOT_RECORDED)
        return {
            "rule_id": UNREADABLE_RULE_ID,
            "severity": "warning",
            "message": f"{len(bad)} of {len(inputs)} trace files did not record everything the results need; "
            "the report covers what they hold",
            "evidence": {"files": reasons},
            "recommendation": "Record what each warning names (it says how), then re-run `profstack analyze`.",
            "ranks": [],
        }
    return {
        "rule_id": UNREADABLE_RULE_ID,
        "severity": "warning",
        "message": f"{len(bad)} of {len(inputs)} trace files could not be read completely; "
        "the report covers what could be read",
        "evidence": {"files": reasons},
        "recommendation": "Check that the profiler finished writing these files (a job stopped "
        "mid-write leaves truncated JSON), then re-run `profstack analyze` on them.",
        "ranks": [],
    }
