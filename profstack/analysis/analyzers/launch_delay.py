"""Launch delay: from the CPU launch call to the kernel's start on the GPU (p50 / p95 / p99, cutoffs)."""

from __future__ import annotations

from profstack.analysis.analyzers.view import RankView
from profstack.analysis.options import LAUNCH_DELAY_CUTOFFS_US
from profstack.analysis.parse import JOIN_MAYBE_EMPTY
from profstack.analysis.stats import HIST_EDGES_US, pct, r2
from profstack.analysis.summary import LaunchDelay


def launch_delay(v: RankView) -> LaunchDelay:
    """The delays were collected during the GPU pass (``gpu.GpuAccumulator.delays``, a bounded
    ``sketch.DelayDistribution``); this reads their summary: exact quantiles up to 65,536 launches, a
    sketch with a stated error bound above."""
    acc = v.acc
    ld = acc.delays.summary()
    out: LaunchDelay = {
        "count": ld.count,
        "mean_us": r2(ld.mean),
        "p50_us": r2(ld.p50),
        "p95_us": r2(ld.p95),
        "p99_us": r2(ld.p99),
        "max_us": r2(ld.max),
        "quantiles": ld.method,
        "over_cutoffs": [
            {"cutoff_us": c, "count": k, "pct": pct(k, ld.count)}
            for c, k in zip(LAUNCH_DELAY_CUTOFFS_US, ld.over, strict=True)
        ],
        "histogram": {"edges_us": [float(e) for e in HIST_EDGES_US], "counts": ld.hist},
        "cpu_launch_mean_us": r2(acc.launch_cpu_sum / acc.launch_cpu_n) if acc.launch_cpu_n else None,
        "negative_raw_count": acc.n_negative_delays,
        "clipped_at_zero": acc.clip_delays,
        "launch_calls": "all" if acc.all_launch_calls else "hta",
    }
    why = _unavailable(v) if not ld.count and acc.kstats else None
    if why is not None:
        out["unavailable_reason"] = why
    return out


def _unavailable(v: RankView) -> str:
    """Why GPU ops were analysed and no launch delay computed."""
    others = sorted(name for name, (_sync, _nid, klass) in v.d.rt_agg.items() if klass in (1, 1 + JOIN_MAYBE_EMPTY))
    if others and not v.acc.all_launch_calls:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        return (
            f"these GPU ops were launched by {shown}, outside HTA's launch-call set (cudaLaunchKernel, "
            "cudaLaunchKernelExC, cudaMemcpyAsync, cudaMemsetAsync; ROCm's hipLaunchKernel is not in it): "
            "profstack analyze --launch-calls all (launch_calls='all') computes their delays"
        )
    if not v.d.n_launch_records:
        return "no launch call was recorded with these GPU ops (the CPU side of the trace is missing)"
    return "no GPU op could be joined to its launch call by correlation id"
