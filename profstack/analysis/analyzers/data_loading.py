"""Data loading: the DataLoader's share of step time (its intervals merged, clipped to the steps)."""

from __future__ import annotations

from profstack.analysis import intervals
from profstack.analysis.analyzers.view import RankView
from profstack.analysis.stats import pct_or_none, r2
from profstack.analysis.summary import DataLoader


def dataloader(v: RankView, step_total: float) -> DataLoader:
    d, steps_in = v.d, v.steps_in
    dl_merged = intervals.merge_columns(d.dl_ts, d.dl_dur)
    if steps_in:
        step_iv = intervals.merge((s[1], s[1] + s[2]) for s in steps_in)
        dl_time = intervals.intersection_length(dl_merged, step_iv)
    else:
        dl_time = intervals.total(dl_merged)
    return {
        "time_us": r2(dl_time),
        "step_time_us": r2(step_total),
        "share_pct": pct_or_none(dl_time, step_total),
        "events": len(d.dl_ts),
    }
