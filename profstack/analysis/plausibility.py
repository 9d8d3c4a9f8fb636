"""Plausibility checks on a rank's result: a number that cannot be right becomes a warning, never a silent result.

Each check compares the result with something the trace itself says. A result that fails one is still
reported, with ``complete: false`` and an ``ImplausibleResultError`` warning naming the check, so that a
merge of unrelated files, a corrupt timestamp or an engine bug never passes as a confident answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the GPU span may exceed the host-side range (launches, steps) by this factor plus ``SLACK_US``
SPAN_FACTOR = 2.0
SLACK_US = 1_000_000.0  # 1 s: GPU work queued at the end of a window may run that much later
EPS_US = 1.0  # rounding (HTA rounds to whole µs)


#: HTA rounds each GPU op to whole µs (start up, end down). When that removes more than this share of the analysed
#: GPU op time, and at least ``ROUNDING_MIN_LOSS_US``, busy time and kernel totals are materially understated
ROUNDING_LOSS_SHARE = 0.10
ROUNDING_MIN_LOSS_US = 100.0
#: ... and from this share on, the entry is also marked incomplete: the GPU did more than twice what it shows.
#: Below it the numbers are HTA's definition, understated and said so: many torch >= 2 traces of kernels a few
#: µs long lose 10-50 % to the rounding, and marking each incomplete would drown the signal in noise.
ROUNDING_INCOMPLETE_SHARE = 0.5


def rounding_loss(raw_us: float, rounded_us: float) -> str | None:
    """A one-line warning when HTA's rounding removed a material share of the GPU op time, else None."""
    lost = raw_us - rounded_us
    if raw_us <= 0 or lost < ROUNDING_MIN_LOSS_US or lost < ROUNDING_LOSS_SHARE * raw_us:
        return None
    return (
        f"HTA's whole-µs rounding (start up, end down) keeps {rounded_us:,.0f} µs of the {raw_us:,.0f} µs the "
        f"analysed GPU ops last ({100 * lost / raw_us:.0f} % lost: many ops last a few µs or less); GPU busy time, "
        "kernel totals and utilisation are understated by about as much"
    )


def rounding_loss_severe(raw_us: float, rounded_us: float) -> bool:
    """Whether a loss ``rounding_loss`` reports is so large (``ROUNDING_INCOMPLETE_SHARE``) that the entry is
    incomplete."""
    return raw_us - rounded_us >= ROUNDING_INCOMPLETE_SHARE * raw_us


def duplicates(n_duplicates: int) -> str | None:
    """A one-line warning when GPU ops were written twice (same stream, name, launch, start, duration), else None."""
    if n_duplicates <= 0:
        return None
    return (
        f"{n_duplicates:,} analysed GPU op(s) repeat the op before them on their stream (same name, launch, "
        "start and duration): duplicated events (traces concatenated?); op counts, per-kernel totals and kernel "
        "time include the copies (busy and idle time do not)"
    )


def streams_folded(n_ops: int, max_streams: int, other_stream: int) -> str | None:
    """A one-line warning when ops on streams beyond ``max_streams`` share one idle-breakdown row, else None."""
    if n_ops <= 0:
        return None
    return (
        f"GPU ops on more than {max_streams:,} distinct streams: {n_ops:,} op(s) on the further streams share one "
        f"idle-breakdown row (stream {other_stream}); its idle times mix those streams"
    )


def host_range(launch_span: tuple[float, float] | None, step_ts: list[float], step_end: list[float]) -> float | None:
    """Length of the host-side time range a rank's files cover (launches and ProfilerSteps), µs."""
    lo, hi = float("inf"), -float("inf")
    if launch_span is not None:
        lo, hi = launch_span
    if step_ts:
        lo, hi = min(lo, *step_ts), max(hi, *step_end)
    return hi - lo if hi >= lo else None


def check_rank(
    rank: Mapping[str, Any], host_range_us: float | None, launch_span: tuple[float, float] | None = None
) -> list[str]:
    """Messages (one line each) for every failed check; empty when the result is plausible.

    ``launch_span``: the first launch's start and the last launch's end (the rank's clock), when it has launches."""
    problems: list[str] = []
    tb = rank.get("temporal_breakdown") or {}
    span = float(tb.get("gpu_span_us") or 0.0)
    if rank.get("has_gpu") and span > 0:
        win = rank.get("window") or {}
        g_lo, g_hi = win.get("start_us"), win.get("end_us")
        if launch_span is not None and g_lo is not None and g_hi is not None:
            lo, hi = launch_span
            if g_lo > hi + SLACK_US or g_hi < lo - SLACK_US:
                problems.append(
                    f"the analysed GPU ops ({g_lo / 1e6:,.3f} .. {g_hi / 1e6:,.3f} s) lie outside the time their "
                    f"launches cover ({lo / 1e6:,.3f} .. {hi / 1e6:,.3f} s): GPU and host timestamps are on different "
                    "clocks, so launch delays and the idle breakdown are not meaningful"
                )
        idle = float(tb.get("idle_time_us") or 0.0)
        compute = float(tb.get("compute_time_us") or 0.0)
        non_compute = float(tb.get("non_compute_time_us") or 0.0)
        if idle < -EPS_US or compute > span + EPS_US or non_compute < -EPS_US:
            problems.append(
                f"GPU busy time exceeds the GPU span ({span / 1e6:.3f} s): idle {idle:.0f} µs, "
                f"compute {compute:.0f} µs, non-compute {non_compute:.0f} µs"
            )
        if host_range_us is not None and span > SPAN_FACTOR * host_range_us + SLACK_US:
            problems.append(
                f"GPU span {span / 1e6:,.1f} s is far beyond the {host_range_us / 1e6:,.1f} s the files' launches "
                "and steps cover (unrelated files merged, or corrupt timestamps?)"
            )
        durations = (rank.get("steps") or {}).get("durations") or []
        if durations:
            window = max(d["start_us"] + d["duration_us"] for d in durations) - min(d["start_us"] for d in durations)
            if span > SPAN_FACTOR * window + SLACK_US:
                problems.append(f"GPU span {span / 1e6:,.1f} s is far beyond the analysed steps' {window / 1e6:,.1f} s")
    steps = rank.get("steps") or {}
    mean, count = steps.get("mean_us"), steps.get("count") or 0
    if count and host_range_us is not None and mean is not None and mean * count > host_range_us * 1.01 + SLACK_US:
        problems.append(
            f"{count} steps totalling {mean * count / 1e6:,.1f} s do not fit in the {host_range_us / 1e6:,.1f} s "
            "the files cover"
        )
    return problems
