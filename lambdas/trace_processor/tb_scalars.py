"""The TensorBoard scalars of one job, from its summary: one tag style, per step and per rank.

Tags (all ``profstack/<metric>``, snake_case; per rank ``profstack/<metric>/rank_<label>``):

* job-wide numbers (``job_metrics``: ``profstack/gpu_idle_percent``, ...) at step 0;
* ``profstack/step_time_ms`` (mean over ranks) and ``profstack/step_time_ms/rank_<r>`` at each ProfilerStep;
* ``profstack/memory_peak_bytes/rank_<r>`` (largest device peak of the step) at each ProfilerStep;
* per rank at step 0: ``gpu_busy_pct``, ``exposed_comm_pct_of_step``, ``launch_delay_p95_us``;
* over the analysed window, step = time bin (0, 1, ...): ``profstack/gpu_busy_pct_over_time/rank_<r>`` and
  ``profstack/cpu_ops_per_ms_over_time/rank_<r>``, so the app draws utilisation curves.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lambdas.trace_processor.summary_tools import step_durations_ms

PREFIX = "profstack/"
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def snake(name: str) -> str:
    """``GPUIdlePercent`` -> ``gpu_idle_percent``, ``step_time_ms`` unchanged."""
    return _CAMEL.sub("_", name).lower()


def rank_tag(metric: str, label: object) -> str:
    return f"{PREFIX}{metric}/rank_{_SAFE.sub('_', str(label))}"


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


Steps = dict[int, dict[str, float]]


def _put(steps: Steps, step: int, tag: str, value: float | None) -> None:
    if value is not None and step >= 0:
        steps.setdefault(step, {})[tag] = value


def _rank_steps(r: Mapping[str, Any], label: object, steps: Steps) -> None:
    """Per ProfilerStep: the rank's step time and its largest device memory peak."""
    for d in (r.get("steps") or {}).get("durations") or []:
        if isinstance(d, Mapping) and isinstance(d.get("step"), int):
            dur = _num(d.get("duration_us"))
            _put(steps, d["step"], rank_tag("step_time_ms", label), dur / 1000.0 if dur is not None else None)
    peaks: dict[int, float] = {}
    for dev in (r.get("memory") or {}).get("devices") or []:
        for p in (dev.get("step_peaks") or []) if isinstance(dev, Mapping) else []:
            v = _num(p.get("peak_allocated_bytes"))
            if isinstance(p.get("step"), int) and v is not None:
                peaks[p["step"]] = max(peaks.get(p["step"], 0.0), v)
    for step, v in peaks.items():
        _put(steps, step, rank_tag("memory_peak_bytes", label), v)


def _rank_values(r: Mapping[str, Any], label: object) -> dict[str, float]:
    """The rank's single numbers (step 0)."""
    out: dict[str, float] = {}
    tb = r.get("temporal_breakdown") or {}
    idle = _num(tb.get("idle_pct"))
    if r.get("has_gpu") and idle is not None and _num(tb.get("gpu_span_us")):
        out[rank_tag("gpu_busy_pct", label)] = 100.0 - idle
    for metric, value in (
        ("exposed_comm_pct_of_step", (r.get("communication") or {}).get("exposed_pct_of_step")),
        ("launch_delay_p95_us", (r.get("launch_delay") or {}).get("p95_us")),
    ):
        v = _num(value)
        if v is not None:
            out[rank_tag(metric, label)] = v
    return out


def _rank_over_time(r: Mapping[str, Any], label: object, steps: Steps) -> None:
    """The activity series, step = time bin of the analysed window."""
    tl = r.get("timeline")
    if not isinstance(tl, Mapping):
        return
    series = [("cpu_ops_per_ms_over_time", "cpu_ops_per_ms")]
    if r.get("has_gpu"):
        series.insert(0, ("gpu_busy_pct_over_time", "gpu_busy_pct"))
    for metric, key in series:
        for i, v in enumerate(tl.get(key) or []):
            _put(steps, i, rank_tag(metric, label), _num(v))


def summary_scalars(summary: Mapping[str, Any], metrics: Mapping[str, float]) -> tuple[dict[str, float], Steps]:
    """(scalars at step 0, step -> scalars) for ``tfevents.scalar_event_file``."""
    first: dict[str, float] = {f"{PREFIX}{snake(k)}": float(v) for k, v in sorted(metrics.items())}
    steps: Steps = {}
    for step, ms in step_durations_ms(summary).items():
        _put(steps, step, f"{PREFIX}step_time_ms", ms)
    for r in summary.get("ranks") or []:
        if isinstance(r, Mapping):
            label = r.get("label", r.get("rank"))
            _rank_steps(r, label, steps)
            first.update(_rank_values(r, label))
            _rank_over_time(r, label, steps)
    return first, steps
