"""CUDA graphs: launches that ran several GPU ops (one correlation id, many kernels), grouped by the
sequence of op names into graphs, with their kernels per launch and GPU time."""

from __future__ import annotations

from profstack.analysis.analyzers.view import RankView
from profstack.analysis.stats import r2
from profstack.analysis.summary import CudaGraph, CudaGraphs

MAX_GRAPHS = 20


def cuda_graphs(v: RankView) -> CudaGraphs | None:
    acc, names = v.acc, v.names
    if not acc.graphs:
        return None
    groups: dict[tuple[int, int], list[float]] = {}  # (ops, signature) -> [launches, GPU time, first name id]
    for n_ops, dur, sig, first in acc.graphs.values():
        g = groups.setdefault((int(n_ops), int(sig)), [0, 0.0, first])
        g[0] += 1
        g[1] += dur
    ordered = sorted(groups.items(), key=lambda kv: -kv[1][1])
    graphs: list[CudaGraph] = []
    for i, ((n_ops, _), (launches, dur, first)) in enumerate(ordered[:MAX_GRAPHS], 1):
        head = names[int(first)] if first >= 0 else None
        graphs.append(
            {
                "graph": f"graph {i}",
                "launches": int(launches),
                "kernels_per_launch": n_ops,
                "gpu_time_us": r2(dur) or 0.0,
                "mean_launch_us": r2(dur / launches) or 0.0,
                "first_kernel": head,
            }
        )
    apis = sorted(n for n in v.d.rt_agg if "GraphLaunch" in n)
    return {
        "launch_apis": apis,
        "graph_launches": len(acc.graphs) + acc.graphs_untracked,
        "kernels": int(sum(g[0] for g in acc.graphs.values())),
        "gpu_time_us": r2(sum(g[1] for g in acc.graphs.values())) or 0.0,
        "distinct_graphs": len(groups),
        "graphs": graphs,
        "complete": acc.graphs_untracked == 0 and acc.graph_first_unseen == 0,
    }
