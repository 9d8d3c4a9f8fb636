"""Communication: NCCL-type kernels, their GPU time, and how much of it overlaps computation."""

from __future__ import annotations

from profstack.analysis.analyzers.time_breakdown import COMM_IDX, COMP_IDX, compute_time
from profstack.analysis.analyzers.view import RankView
from profstack.analysis.stats import pct_or_none, r2
from profstack.analysis.summary import Communication


def communication(v: RankView) -> Communication:
    acc = v.acc
    comm_t = acc.type_total[COMM_IDX]
    overlap = acc.overlap_us(COMM_IDX, COMP_IDX)
    n_comm = sum(int(st[0]) for nid, st in acc.kstats.items() if acc.type_cache.get(nid) == COMM_IDX)
    span = v.span
    return {
        "kernel_count": n_comm,
        "comm_time_us": r2(comm_t),
        "compute_time_us": r2(compute_time(v)),
        "overlap_time_us": r2(overlap),
        "overlap_pct_of_comm": pct_or_none(overlap, comm_t),
        "comm_pct_of_span": pct_or_none(comm_t, span),
    }
