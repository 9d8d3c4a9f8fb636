"""Analysis options and rule thresholds."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType

from profstack.analysis.errors import AnalysisOptionsError, UnknownThresholdError

GIB = 1 << 30


@dataclass(frozen=True, kw_only=True, slots=True)
class RuleThresholds:
    """The rule thresholds, typed, with their defaults (Debugger's defaults where one exists,
    docs/platform-facts.md A9). Field order is the order ``summary.options.rule_thresholds`` lists them.

    Build one from user overrides with :meth:`from_overrides` (one-line errors for unknown names and bad
    values); read a value as an attribute (``th.step_outlier_sigma``), so a typo is a mypy error."""

    #: LowGPUUtilization: GPU busy share of the GPU span below this (Debugger: p95 < 70 %)
    low_gpu_util_busy_pct: float = 70.0
    #: ... critical below this
    low_gpu_util_critical_busy_pct: float = 10.0
    #: CPUBound: host_wait share of GPU idle time above this, while GPU idle above min_idle_pct
    cpu_bound_host_wait_pct: float = 50.0
    cpu_bound_min_idle_pct: float = 20.0
    #: CommunicationBound: exposed communication (no computation kernel running) above this share of step
    #: time (of the GPU span without steps); it then takes precedence over CPUBound for the rank
    comm_bound_exposed_pct: float = 20.0
    #: DataloaderBottleneck: DataLoader share of step time above this
    dataloader_share_pct: float = 10.0
    #: StepOutlier: step longer than mean + k * sigma (Debugger: 3)
    step_outlier_sigma: float = 3.0
    #: LoadBalancing: (max - min) / mean of per-rank GPU compute time above this
    load_balance_spread_pct: float = 20.0
    #: Straggler: rank whose step time exceeds the median of ranks by more than this
    straggler_pct: float = 10.0
    #: LaunchOverheadBound: share of kernels shorter than tiny_kernel_us above tiny_kernel_share_pct
    tiny_kernel_us: float = 10.0
    tiny_kernel_share_pct: float = 50.0
    launch_overhead_min_idle_pct: float = 10.0
    #: ExcessiveSync: host sync time, and the GPU idle time during it, as shares of the analysed window above this
    sync_time_pct: float = 5.0
    #: MemcpyHeavy: memcpy time as a share of GPU span above this
    memcpy_time_pct: float = 10.0
    #: AMP / Tensor Cores: fp32 share of compute kernel time above this
    fp32_share_pct: float = 80.0
    #: BatchSize: GPU busy below this while the host is not the bottleneck
    batch_size_busy_pct: float = 50.0
    #: GPUMemoryIncrease: a GPU's peak allocated memory rises by more than this from the first analysed step
    #: to the last (Debugger: a moving-average rise of 5-10 %)
    gpu_memory_increase_pct: float = 5.0
    #: HTA idle breakdown: gaps shorter than this (µs) with the launch already queued are kernel_wait
    consecutive_kernel_delay_us: float = 30.0

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, object]) -> RuleThresholds:
        """Defaults, with ``overrides`` applied. Raises UnknownThresholdError (a name that is no rule
        threshold) or AnalysisOptionsError (a value that is not a finite, non-negative number); both are
        one line. This is the check `profstack analyze --threshold`, the config file
        (``processing.rule_thresholds``) and the Lambda's AnalysisOptions all go through."""
        valid = cls.names()
        unknown = sorted(set(overrides) - set(valid))
        if unknown:
            # the closest names first: a one-line message may be cut before the end of the list
            close = [m for u in unknown for m in difflib.get_close_matches(u, valid, n=3, cutoff=0.5)]
            ordered = [*dict.fromkeys(close), *sorted(set(valid) - set(close))]
            raise UnknownThresholdError(f"unknown rule threshold(s) {', '.join(unknown)}; valid: {', '.join(ordered)}")
        values: dict[str, float] = {}
        for key, value in overrides.items():
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise AnalysisOptionsError(f"rule threshold {key} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise AnalysisOptionsError(f"rule threshold {key} must be a finite number >= 0, got {value!r}")
            values[key] = float(value)
        return cls(**values)

    def as_dict(self) -> dict[str, float]:
        """Name -> value in field order (what the summary's ``options.rule_thresholds`` holds)."""
        return {name: float(getattr(self, name)) for name in self.names()}


#: Rule thresholds and their defaults, by name (read-only; :class:`RuleThresholds` is the typed form).
DEFAULT_THRESHOLDS: Mapping[str, float] = MappingProxyType(RuleThresholds().as_dict())

LAUNCH_DELAY_CUTOFFS_US = (10.0, 50.0, 100.0, 1000.0)
LAUNCH_CALL_SETS = ("hta", "all")
#: HTA drops the last ProfilerStep by default (``include_last_profiler_step=False``); so does ProfStack
DEFAULT_INCLUDE_LAST_STEP = False


@dataclass(frozen=True)
class AnalysisOptions:
    """What to analyse and how.

    top_k: rows in the top-kernel / top-CPU-op tables.
    steps: ``(a, b)`` analyses ProfilerStep#a..#b only (inclusive); ``include_last_step`` is then ignored.
    rule_thresholds: overrides of :data:`DEFAULT_THRESHOLDS` (unknown names raise UnknownThresholdError).
    limits: the resolved thresholds (defaults + ``rule_thresholds``), typed: what the analyzers and rules read.
    merge_rank_files: merge several files of one rank (schedule cycles) into one rank entry.
    max_decompressed_bytes: decompressed-size budget per file (gzip bomb guard).
    include_last_step: keep the last ProfilerStep (HTA's ``include_last_profiler_step``); False, HTA's default,
        drops it (the last step of a profiling window is often cut short by the profiler stopping).
    max_event_bytes: largest single JSON value accepted (one event, or one top-level value).
    launch_calls: ``"hta"`` (default): launch delays over HTA's launch calls (cudaLaunchKernel,
        cudaLaunchKernelExC, cudaMemcpyAsync, cudaMemsetAsync, MTIA runFunction); ``"all"``: every runtime or
        driver call that can launch GPU work (cuLaunchKernel, hipLaunchKernel, cudaGraphLaunch, ...).
    clip_launch_delay: clip negative launch delays at zero like HTA (the count of negative raw delays is
        reported either way); False keeps the raw values.
    count_sync: count ``cuda_sync`` rows as GPU time in the temporal breakdown like HTA (False: kernels,
        memcpy and memset only, ProfStack before 0.x).
    steps_keep_unlaunched: with ``steps``, also keep GPU ops no launch can be correlated with, by their own
        start (False, like HTA: only ops joined to a launch in the window).
    max_cycle_gap_s: largest gap between two files of one rank that are merged as schedule cycles of one run.
    op_types: read the precision of kernels whose names carry no types from the input types of the operators
        that launched them (``record_shapes``; profstack.analysis.op_types: collected by the one read of the file,
        used where such kernels take 5 % of computation time or more). False: names only.
    hta_compat: HTA's time model: every GPU op rounded to whole µs (start up, end down, so an op inside one µs
        counts 0) and launch delays and the last-step rule on whole µs, as HolisticTraceAnalysis computes them.
        False (the default): intervals exact at the trace's own resolution (integer ns; profstack.analysis.gpu).
    """

    top_k: int = 15
    steps: tuple[int, int] | None = None
    rule_thresholds: Mapping[str, float] = field(default_factory=dict)
    merge_rank_files: bool = True
    max_decompressed_bytes: int = 20 * GIB
    include_last_step: bool = DEFAULT_INCLUDE_LAST_STEP
    #: largest single JSON value (one event, or one non-event top-level value)
    max_event_bytes: int = 256 << 20
    launch_calls: str = "hta"
    clip_launch_delay: bool = True
    count_sync: bool = True
    steps_keep_unlaunched: bool = False
    max_cycle_gap_s: float = 1800.0
    op_types: bool = True
    hta_compat: bool = False

    #: the resolved, typed thresholds (set from ``rule_thresholds`` in ``__post_init__``)
    limits: RuleThresholds = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "limits", RuleThresholds.from_overrides(self.rule_thresholds))
        if self.top_k < 1:
            raise AnalysisOptionsError(f"top_k must be >= 1, got {self.top_k}")
        if self.steps is not None:
            a, b = self.steps
            if a > b:
                raise AnalysisOptionsError(f"step window {a}:{b} is empty")
        if self.max_decompressed_bytes <= 0 or self.max_event_bytes <= 0:
            raise AnalysisOptionsError("size limits must be positive")
        if self.launch_calls not in LAUNCH_CALL_SETS:
            raise AnalysisOptionsError(
                f"launch_calls must be one of {', '.join(LAUNCH_CALL_SETS)}, got {self.launch_calls!r}"
            )
        if not self.max_cycle_gap_s >= 0:
            raise AnalysisOptionsError(f"max_cycle_gap_s must be >= 0, got {self.max_cycle_gap_s}")

    def thresholds(self) -> dict[str, float]:
        """``limits`` as a name -> value dict (the GPU pass in gpu.py reads this form)."""
        return self.limits.as_dict()
