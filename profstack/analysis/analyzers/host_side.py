"""What the host did while the GPU was idle, and collectives that run on the CPU (#43 item 4).

**Collectives on the CPU.** torch.distributed's CPU backends run each collective on a worker thread of the process
group, inside a ``record_function`` named after the backend and the collective: ``gloo:all_reduce``,
``gloo:broadcast``, ``mpi:all_reduce``, ``ucc:allgather`` (``profilingTitle`` in torch/csrc/distributed/c10d/
ProcessGroupGloo.cpp, ProcessGroupMPI.cpp, ProcessGroupUCC.cpp; Kineto writes them as ``user_annotation``). The span
covers the collective's whole run, the wait for the last peer included: it is the host's communication time, the
CPU counterpart of an NCCL kernel. The calling thread's dispatcher op (``c10d::allreduce_``) only enqueues the work
(tens of µs), and its wait (``work.wait()``) is not recorded, so the worker spans are the measure. NCCL's
``nccl:all_reduce`` spans are not counted: NCCL communicates on the GPU, where its kernels are measured.

JAX's collectives on the CPU (``jax_cpu_collectives_implementation``: gloo, MPI) are XLA ops named after the HLO
(``all-reduce.3``); an XSpace without accelerator planes gives them as such spans (profstack/analysis/xplane.py).

**Idle time by cause.** The GPU's idle time (its span less the union of its ops) is split by what the host was doing
meanwhile, in this order, each part counted once:

1. waiting in a collective: the host ran a CPU collective (above);
2. waiting on data: the host was in the DataLoader (``enumerate(DataLoader)#...__next__``);
3. waiting in a synchronisation call: the host was blocked in ``cudaDeviceSynchronize``, ``cudaStreamSynchronize``...
   (the GPU idle meanwhile: it waits for something else, another stream or a peer);

and the rest by HTA's per-stream reading of each gap (``idle_breakdown``: the next op was launched after the
previous one ended, "host wait"; or it was already queued, "kernel wait" and "other"), in proportion:

4. the host's part (HTA's host-wait share), split by what the host did in that time: late launches, where it was
   issuing launches, too slowly to keep the GPU busy (CPU-side launch overhead: what CUDA graphs and torch.compile
   help); the host sleeping or computing, where it issued none (Python, CPU work between steps, ``time.sleep``);
5. the GPU side (HTA's kernel-wait and other shares): the op was already queued, the GPU waited on a dependency
   (another stream, an event) or its own launch latency.

1-3 are measured on the spans themselves; 4 on the time bins of the GPU's busy timeline (``GpuAccumulator.timeline``,
at most span / 1,024 a bin): a bin in which a launch call started is the host launching, one without is the host
doing something else (``resolution_us`` says how coarse that is). Each part is the idle time within those spans or
bins, taking a bin's busy time as spread evenly over it; the parts add up to the idle time exactly. Launch calls
are those the launch-delay section counts (HTA's unless ``--launch-calls all``): where none of those was joined, the
host's part is ``host_unexplained_us``; where no launch was recorded at all, nothing says whose the rest is, and all
of it is ``host_unexplained_us``.
"""

from __future__ import annotations

import math
import re
from array import array
from dataclasses import dataclass

from profstack.analysis import intervals
from profstack.analysis.analyzers.view import RankView
from profstack.analysis.gpu import GPU_SERIES
from profstack.analysis.intervals import Merged
from profstack.analysis.stats import pct_or_none, r2
from profstack.analysis.summary import HostCollectives, IdleCauses, NameStat
from profstack.analysis.timebins import TimeBins

#: the record_function names of collectives that run on the CPU (gloo, MPI, UCC process groups), and XLA's collective
#: ops on a host without accelerators (JAX's CPU collectives: profstack.analysis.xplane.XLA_CPU_COLLECTIVE)
HOST_COLLECTIVE_RE = re.compile(
    r"^((gloo|mpi|ucc):[A-Za-z_]"
    r"|(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|collective-broadcast)(-start|-done)?(\.\d+)?$)"
)
_BUSY = GPU_SERIES.index("busy")
_LAUNCHES = GPU_SERIES.index("launch_calls")
#: bins the idle split is computed on, at most (the GPU timeline has 1,024)
MAX_BINS = 4096
_TOP_NAMES = 20


@dataclass(frozen=True)
class HostSpans:
    """The host collective spans of a rank (merged, within the analysed steps) and their per-name totals."""

    merged: Merged
    calls: int
    by_name: list[NameStat]


def _in_window(v: RankView) -> Merged | None:
    """The analysed steps as intervals (None: no steps, the whole file counts)."""
    if not v.steps_in:
        return None
    return intervals.merge((s[1], s[1] + s[2]) for s in v.steps_in)


def clip(spans: Merged, window: Merged | None) -> Merged:
    """``spans`` within ``window`` (both merged; None: unclipped)."""
    if window is None:
        return spans
    out = Merged()
    j = 0
    ws, we = window.starts, window.ends
    for s, e in spans:
        while j < len(ws) and we[j] <= s:
            j += 1
        k = j
        while k < len(ws) and ws[k] < e:
            lo, hi = max(s, ws[k]), min(e, we[k])
            out.add_sorted(lo, hi)
            k += 1
    return out


def minus(a: Merged, b: Merged) -> Merged:
    """``a`` without ``b`` (both merged)."""
    out = Merged()
    j = 0
    bs, be = b.starts, b.ends
    for s, e in a:
        cur = s
        while j < len(bs) and be[j] <= cur:
            j += 1
        k = j
        while k < len(bs) and bs[k] < e and cur < e:
            if bs[k] > cur:
                out.add_sorted(cur, min(bs[k], e))
            cur = max(cur, be[k])
            k += 1
        if cur < e:
            out.add_sorted(cur, e)
    return out


def host_collective_spans(v: RankView) -> HostSpans:
    """The rank's CPU collective spans (``HOST_COLLECTIVE_RE``), merged and clipped to the analysed steps."""
    d, names = v.d, v.names
    starts: array[float] = array("d")
    durs: array[float] = array("d")
    per: dict[int, list[float]] = {}
    matches: dict[int, bool] = {}
    for nid, gpu, ts, dur in zip(d.a_name, d.a_gpu, d.a_ts, d.a_dur, strict=True):
        if gpu:
            continue
        hit = matches.get(nid)
        if hit is None:
            hit = matches[nid] = bool(HOST_COLLECTIVE_RE.match(names[nid]))
        if not hit or not dur > 0:
            continue
        starts.append(ts)
        durs.append(dur)
        rec = per.setdefault(nid, [0, 0.0])
        rec[0] += 1
        rec[1] += dur
    merged = clip(intervals.merge_columns(starts, durs), _in_window(v))
    by_name: list[NameStat] = [
        {"name": names[nid], "count": int(rec[0]), "total_us": r2(rec[1]) or 0.0}
        for nid, rec in sorted(per.items(), key=lambda kv: (-kv[1][1], names[kv[0]]))[:_TOP_NAMES]
    ]
    return HostSpans(merged, len(starts), by_name)


def _gpu_busy_within(v: RankView, spans: Merged) -> float:
    tl = v.acc.timeline
    if not len(spans) or not v.has_union or tl.empty:
        return 0.0
    return min(tl.integral(_BUSY, spans.starts, spans.ends), intervals.total(spans))


def host_collectives(v: RankView, spans: HostSpans, step_total: float) -> HostCollectives | None:
    """The ``communication.host_collectives`` section: None where the rank ran no CPU collective."""
    if not spans.calls:
        return None
    time = intervals.total(spans.merged)
    exposed = max(time - _gpu_busy_within(v, spans.merged), 0.0)
    dist = v.d.meta.get("distributedInfo")
    backend = dist.get("backend") if isinstance(dist, dict) else None
    return {
        "calls": spans.calls,
        "time_us": r2(time) or 0.0,
        "exposed_time_us": r2(exposed) or 0.0,
        "pct_of_step": pct_or_none(time, step_total) if step_total > 0 else None,
        "backend": backend if isinstance(backend, str) else None,
        "by_name": spans.by_name,
    }


def _spans(starts: array[float], durs: array[float], window: Merged | None) -> Merged:
    return clip(intervals.merge_columns(starts, durs), window)


def _host_share(v: RankView) -> float | None:
    """HTA's host-wait share of the per-stream gaps (0..1): the part of the gaps the host is responsible for. None
    where no launch was recorded (then HTA's split says nothing: every gap is "kernel wait" or "other")."""
    if not v.d.n_launch_records:
        return None
    host = kern = other = 0.0
    for state in v.acc.stream_state.values():
        host += state[1]
        kern += state[2]
        other += state[3]
    total = host + kern + other
    return host / total if total > 0 else 1.0


def idle_causes(v: RankView, collectives: Merged) -> IdleCauses | None:
    """The GPU's idle time split by what the host did meanwhile (module docstring); None without GPU time."""
    tl = v.acc.timeline
    lo, hi = v.gpu_lo, v.gpu_hi
    if not v.has_union or tl.empty or not hi > lo:
        return None
    idle_total = max(v.span - v.acc.union_us, 0.0)  # the span exact (integer ns), not hi - lo of two µs floats
    span = Merged()
    span.add_sorted(lo, hi)
    coll = clip(collectives, span)
    data = minus(_spans(v.d.dl_ts, v.d.dl_dur, span), coll)
    sync = minus(minus(_spans(v.d.s_ts, v.d.s_dur, span), coll), data)
    n = max(1, min(MAX_BINS, math.ceil((hi - lo) / tl.width)))
    width = (hi - lo) / n
    busy = tl.resample(_BUSY, lo, hi, n)
    launches = tl.resample(_LAUNCHES, lo, hi, n)
    host = TimeBins(("collective", "data", "sync"))
    for k, part in enumerate((coll, data, sync)):
        host.add_spans(k, part.starts, part.ends)
    explained = [host.resample(k, lo, hi, n) for k in range(3)]
    parts = [0.0, 0.0, 0.0, 0.0, 0.0]  # collective, data, sync, rest in bins with a launch, rest without
    for b in range(n):
        idle_b = max(width - busy[b], 0.0)
        if idle_b <= 0:
            continue
        share = idle_b / width
        rest = idle_b
        for k in range(3):
            got = min(explained[k][b] * share, rest)
            parts[k] += got
            rest -= got
        parts[3 if launches[b] > 0 else 4] += rest
    # the bins' idle time adds up to the exact idle time only within the timeline's resolution: scale to it
    binned = sum(parts)
    scale = idle_total / binned if binned > 0 else 0.0
    coll_t, data_t, sync_t, with_launch, without = (p * scale for p in parts)
    rest_t = with_launch + without
    host_p = _host_share(v)
    late = busy_host = unexplained = gpu_side = None
    if host_p is None:  # no launch recorded: nothing says whose the rest is
        unexplained = rest_t
    elif v.acc.launch_cpu_n == 0:  # launches joined, none of the launch-delay set: no launch bins
        unexplained, gpu_side = rest_t * host_p, rest_t * (1.0 - host_p)
    else:
        late, busy_host, gpu_side = with_launch * host_p, without * host_p, rest_t * (1.0 - host_p)
    return {
        "idle_time_us": r2(idle_total) or 0.0,
        "collective_wait_us": r2(coll_t) or 0.0,
        "data_wait_us": r2(data_t) or 0.0,
        "sync_wait_us": r2(sync_t) or 0.0,
        "late_launch_us": r2(late),
        "host_busy_us": r2(busy_host),
        "host_unexplained_us": r2(unexplained),
        "gpu_side_us": r2(gpu_side),
        "collective_wait_pct": pct_or_none(coll_t, idle_total),
        "data_wait_pct": pct_or_none(data_t, idle_total),
        "sync_wait_pct": pct_or_none(sync_t, idle_total),
        "late_launch_pct": pct_or_none(late, idle_total) if late is not None else None,
        "host_busy_pct": pct_or_none(busy_host, idle_total) if busy_host is not None else None,
        "gpu_side_pct": pct_or_none(gpu_side, idle_total) if gpu_side is not None else None,
        "resolution_us": r2(width) or 0.0,
    }
