"""The analysed window of one rank: steps, the GPU span and the wall window CPU-side metrics use."""

from __future__ import annotations

import math
from dataclasses import dataclass

from profstack.analysis.gpu import GpuAccumulator, Selection, Step
from profstack.analysis.parse import FileData
from profstack.analysis.stats import r2
from profstack.analysis.summary import Window


@dataclass(frozen=True)
class RankView:
    """What every analyzer reads: the rank's columns (``d``), its GPU accumulator and the window."""

    d: FileData
    names: list[str]
    acc: GpuAccumulator
    mode: str
    win_lo: float
    win_hi: float
    steps_in: list[Step]
    last_step_dropped: bool
    has_union: bool
    #: GPU busy span (0, 0 without GPU ops)
    gpu_lo: float
    gpu_hi: float
    #: wall window for CPU-side metrics
    cpu_lo: float
    cpu_hi: float
    #: gpu_hi - gpu_lo, exact (from the accumulator's integer ns: the two ends are µs floats)
    gpu_span: float = 0.0

    @property
    def span(self) -> float:
        return self.gpu_span

    @property
    def glo(self) -> float:
        """Lower bound for GPU-side events (GPU syncs, GPU annotations)."""
        return self.gpu_lo if self.mode != "window" else self.win_lo

    @property
    def ghi(self) -> float:
        return self.gpu_hi if self.mode != "window" else self.win_hi


def rank_view(d: FileData, names: list[str], acc: GpuAccumulator, sel: Selection) -> RankView:
    mode = sel.mode
    win_lo, win_hi = sel.win_lo, sel.win_hi
    steps_in = list(sel.steps_in)
    has_union = acc.has_union
    if has_union:
        gpu_lo, gpu_hi, span = acc.gpu_lo, acc.gpu_hi, acc.span_us
    else:
        gpu_lo = gpu_hi = span = 0.0

    # ---- wall window for CPU-side metrics ----
    if mode == "window":
        cpu_lo, cpu_hi = win_lo, win_hi
    elif steps_in:
        cpu_lo, cpu_hi = steps_in[0][1], max(s[1] + s[2] for s in steps_in)
    else:
        cpu_lo, cpu_hi = -math.inf, math.inf
    return RankView(
        d=d,
        names=names,
        acc=acc,
        mode=mode,
        win_lo=win_lo,
        win_hi=win_hi,
        steps_in=steps_in,
        last_step_dropped=sel.last_step_dropped,
        has_union=has_union,
        gpu_lo=gpu_lo,
        gpu_hi=gpu_hi,
        cpu_lo=cpu_lo,
        cpu_hi=cpu_hi,
        gpu_span=span,
    )


def window(v: RankView) -> Window:
    gpu_lo, gpu_hi, cpu_lo, cpu_hi, has_union, span = v.gpu_lo, v.gpu_hi, v.cpu_lo, v.cpu_hi, v.has_union, v.span
    return {
        "start_us": r2(gpu_lo) if has_union else (r2(cpu_lo) if math.isfinite(cpu_lo) else None),
        "end_us": r2(gpu_hi) if has_union else (r2(cpu_hi) if math.isfinite(cpu_hi) else None),
        "duration_us": r2(span if has_union else (cpu_hi - cpu_lo if math.isfinite(cpu_lo) else 0.0)) or 0.0,
        "steps": [s[0] for s in v.steps_in],
        "last_step_dropped": v.last_step_dropped,
    }
