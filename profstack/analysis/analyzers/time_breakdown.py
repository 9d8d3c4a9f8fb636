"""Where the GPU span goes: busy vs idle (HTA temporal breakdown), why it idles, and the activity mix."""

from __future__ import annotations

from profstack.analysis import classify
from profstack.analysis.analyzers.view import RankView
from profstack.analysis.gpu import OP_KERNEL, OP_MEMCPY, OP_MEMSET
from profstack.analysis.options import RuleThresholds
from profstack.analysis.stats import pct, r2
from profstack.analysis.summary import GpuActivity, IdleBreakdown, KernelTypeShare, StreamIdle, TemporalBreakdown

COMP_IDX = classify.KERNEL_TYPES.index(classify.COMPUTATION)
COMM_IDX = classify.KERNEL_TYPES.index(classify.COMMUNICATION)


def compute_time(v: RankView) -> float:
    """GPU time of computation kernels (µs)."""
    return v.acc.type_total[COMP_IDX]


def temporal_breakdown(v: RankView) -> TemporalBreakdown:
    span = v.span
    idle = span - v.acc.union_us
    compute = compute_time(v)
    non_compute = span - compute - idle
    return {
        "gpu_span_us": r2(span),
        "idle_time_us": r2(idle),
        "compute_time_us": r2(compute),
        "non_compute_time_us": r2(non_compute),
        "idle_pct": pct(idle, span),
        "compute_pct": pct(compute, span),
        "non_compute_pct": pct(non_compute, span),
    }


def kernel_types(v: RankView) -> list[KernelTypeShare]:
    acc = v.acc
    kernel_types_all = classify.KERNEL_TYPES
    out: list[KernelTypeShare] = []
    for mask, t_us in sorted(acc.parts.items(), key=lambda kv: -kv[1]):
        label = " overlapping ".join(t for b, t in enumerate(kernel_types_all) if mask & (1 << b))
        out.append({"kernel_type": label, "time_us": r2(t_us), "pct": pct(t_us, acc.union_us)})
    return out


def idle_breakdown(v: RankView, th: RuleThresholds) -> IdleBreakdown:
    acc = v.acc
    streams_out: list[StreamIdle] = []
    tot_host = tot_kern = tot_other = 0.0
    for stream in sorted(acc.stream_state):
        _, host, kern, other = acc.stream_state[stream][:4]
        streams_out.append(
            {"stream": stream, "host_wait_us": r2(host), "kernel_wait_us": r2(kern), "other_us": r2(other)}
        )
        tot_host += host
        tot_kern += kern
        tot_other += other
    tot_idle = tot_host + tot_kern + tot_other
    return {
        "host_wait_us": r2(tot_host),
        "kernel_wait_us": r2(tot_kern),
        "other_us": r2(tot_other),
        "host_wait_pct": pct(tot_host, tot_idle),
        "kernel_wait_pct": pct(tot_kern, tot_idle),
        "other_pct": pct(tot_other, tot_idle),
        "consecutive_kernel_delay_us": th.consecutive_kernel_delay_us,
        "per_stream": streams_out,
    }


def gpu_activity(v: RankView, sync_activity: float, host_sync_us: float) -> GpuActivity:
    """Kernel, memcpy, memset and GPU-side synchronisation time (``cuda_sync`` rows) as shares of their sum. Host
    sync calls (``host_sync_us``) are CPU time: shown apart, in none of the shares (a final cudaDeviceSynchronize
    after a busy GPU is not half of the GPU's activity)."""
    time_by_kind = v.acc.time_by_kind
    kernel_time = time_by_kind[OP_KERNEL]
    act_total = kernel_time + time_by_kind[OP_MEMCPY] + time_by_kind[OP_MEMSET] + sync_activity
    return {
        "kernel_time_us": r2(kernel_time),
        "memcpy_time_us": r2(time_by_kind[OP_MEMCPY]),
        "memset_time_us": r2(time_by_kind[OP_MEMSET]),
        "sync_time_us": r2(sync_activity),
        "kernel_pct": pct(kernel_time, act_total),
        "memcpy_pct": pct(time_by_kind[OP_MEMCPY], act_total),
        "memset_pct": pct(time_by_kind[OP_MEMSET], act_total),
        "sync_pct": pct(sync_activity, act_total),
        "host_sync_time_us": r2(host_sync_us),
    }
