"""Annotations: record_function ranges on the CPU and their GPU projections (gpu_user_annotation)."""

from __future__ import annotations

from profstack.analysis.analyzers.view import RankView
from profstack.analysis.stats import histogram, r2
from profstack.analysis.summary import Annotations, AnnotationStat, Histogram

#: durations kept per annotation name for its histogram
_MAX_DURATIONS = 100_000


def annotation_stats(v: RankView, top_k: int) -> Annotations:
    d, names = v.d, v.names
    cpu_lo, cpu_hi, glo, ghi = v.cpu_lo, v.cpu_hi, v.glo, v.ghi
    ann: dict[tuple[int, int], list[float]] = {}
    ann_durs: dict[tuple[int, int], list[float]] = {}
    for nid, gpu, ts, dur in zip(d.a_name, d.a_gpu, d.a_ts, d.a_dur, strict=True):
        if not (cpu_lo <= ts <= cpu_hi) and not (gpu and glo <= ts <= ghi):
            continue
        key = (gpu, nid)
        arec = ann.get(key)
        if arec is None:
            ann[key] = [1, dur, dur]
            ann_durs[key] = [dur]
        else:
            arec[0] += 1
            arec[1] += dur
            arec[2] = max(arec[2], dur)
            lst = ann_durs[key]
            if len(lst) < _MAX_DURATIONS:
                lst.append(dur)

    def ann_list(gpu: int) -> list[AnnotationStat]:
        rows = [(k, rec) for k, rec in ann.items() if k[0] == gpu]
        rows.sort(key=lambda kv: -kv[1][1])
        return [
            {
                "name": names[k[1]],
                "count": int(rec[0]),
                "total_us": r2(rec[1]),
                "mean_us": r2(rec[1] / rec[0]),
                "max_us": r2(rec[2]),
                "histogram": histogram(ann_durs[k]),
                "durations_histogram": linear_histogram(ann_durs[k]),
            }
            for k, rec in rows[: max(top_k, 50)]
        ]

    return {"cpu": ann_list(0), "gpu": ann_list(1)}


#: bins of an annotation's own duration histogram
LINEAR_BINS = 16


def linear_histogram(durs: list[float], bins: int = LINEAR_BINS) -> Histogram:
    """Equal-width bins from the shortest to the longest duration (one bin when they are all equal); the
    last bin is closed, so ``sum(counts) == len(durs)`` and ``len(edges_us) == len(counts) + 1``."""
    if not durs:
        return {"edges_us": [], "counts": []}
    lo, hi = min(durs), max(durs)
    if hi <= lo:
        return {"edges_us": [r2(lo) or 0.0, r2(hi) or 0.0], "counts": [len(durs)]}
    w = (hi - lo) / bins
    counts = [0] * bins
    for d in durs:
        counts[min(int((d - lo) / w), bins - 1)] += 1
    return {"edges_us": [r2(lo + i * w) or 0.0 for i in range(bins + 1)], "counts": counts}
