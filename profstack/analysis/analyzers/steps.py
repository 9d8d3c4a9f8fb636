"""ProfilerStep statistics: mean, quantiles, outliers (mean + k sigma), durations, histogram."""

from __future__ import annotations

from profstack.analysis.analyzers.view import RankView
from profstack.analysis.options import RuleThresholds
from profstack.analysis.stats import histogram, mean_std, quantile, r2
from profstack.analysis.summary import Steps


def steps(v: RankView, th: RuleThresholds) -> Steps:
    steps_in = v.steps_in
    durs = [s[2] for s in steps_in]
    mean, std = mean_std(durs)
    k_sigma = th.step_outlier_sigma
    thr = (mean + k_sigma * std) if mean is not None and std is not None else None
    sdurs = sorted(durs)
    first = steps_in[0][1] if steps_in else 0.0
    return {
        "count": len(durs),
        "mean_us": r2(mean),
        "p50_us": r2(quantile(sdurs, 0.5)),
        "p95_us": r2(quantile(sdurs, 0.95)),
        "max_us": r2(sdurs[-1]) if sdurs else None,
        "min_us": r2(sdurs[0]) if sdurs else None,
        "std_us": r2(std),
        "outlier_sigma": k_sigma,
        "outlier_threshold_us": r2(thr),
        "outliers": [
            {"step": s[0], "duration_us": r2(s[2])} for s in steps_in if thr is not None and std and s[2] > thr
        ],
        "durations": [{"step": s[0], "start_us": r2(s[1] - first), "duration_us": r2(s[2])} for s in steps_in[:10000]],
        "histogram": histogram(durs),
    }


def step_total(v: RankView) -> float:
    """Sum of the analysed steps' durations (µs): the wall time ExcessiveSync and DataLoader compare to."""
    return sum(s[2] for s in v.steps_in)
