"""Communication: NCCL-type kernels, their GPU time, and how much of it overlaps computation."""

from __future__ import annotations

from profstack.analysis.analyzers.host_side import HostSpans, host_collectives
from profstack.analysis.analyzers.time_breakdown import COMM_IDX, COMP_IDX, compute_time
from profstack.analysis.analyzers.view import RankView
from profstack.analysis.stats import pct_or_none, r2
from profstack.analysis.summary import Communication


def communication(v: RankView, step_total: float = 0.0, host: HostSpans | None = None) -> Communication:
    """The one definition of communication time every panel uses: ``comm_time_us`` is the time during
    which at least one communication kernel runs (the union of their intervals); ``exposed_time_us`` is
    the part of it during which no computation kernel runs (``comm_time_us - overlap_time_us``), the
    communication the step waits for. Collectives that run on the CPU (gloo, MPI: ``host``) are the host's
    communication (``host_collectives``); their exposed part (no GPU op running) counts in
    ``exposed_pct_of_step`` with the GPU's, so a gloo job's waits are communication like an NCCL job's."""
    acc = v.acc
    comm_t = acc.type_total[COMM_IDX]
    overlap = acc.overlap_us(COMM_IDX, COMP_IDX)
    exposed = max(comm_t - overlap, 0.0)
    n_comm = sum(int(st[0]) for nid, st in acc.kstats.items() if acc.type_cache.get(nid) == COMM_IDX)
    span = v.span
    hc = host_collectives(v, host, step_total) if host is not None else None
    waits = exposed + (hc["exposed_time_us"] if hc is not None else 0.0)
    return {
        "kernel_count": n_comm,
        "comm_time_us": r2(comm_t),
        "compute_time_us": r2(compute_time(v)),
        "overlap_time_us": r2(overlap),
        "overlap_pct_of_comm": pct_or_none(overlap, comm_t),
        "comm_pct_of_span": pct_or_none(comm_t, span),
        "exposed_time_us": r2(exposed),
        "exposed_pct_of_span": pct_or_none(exposed, span),
        "step_time_us": r2(step_total) if step_total > 0 else None,
        "exposed_pct_of_step": pct_or_none(waits, step_total) if n_comm or hc is not None else None,
        "host_collectives": hc,
    }
