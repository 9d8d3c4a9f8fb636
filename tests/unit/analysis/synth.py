"""Build small synthetic Kineto traces for rule and API tests."""

from __future__ import annotations

import json
from typing import Any


def step_event(n: int, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def launch_event(corr: int | None, ts: float, dur: float = 2.0, name: str = "cudaLaunchKernel") -> dict[str, Any]:
    """A runtime call on the host thread; with ``corr`` it is the launch of the GPU op sharing that id."""
    ev: dict[str, Any] = {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}
    if corr is not None:
        ev["args"] = {"correlation": corr}
    return ev


def kernel_event(
    corr: int, ts: float, dur: float = 5.0, *, name: str = "k", cat: str = "kernel", stream: int = 7, **args: Any
) -> dict[str, Any]:
    """A GPU op on ``stream``, joined to its launch by ``corr``."""
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": {"stream": stream, "correlation": corr, **args}}  # fmt: skip


def cycle_events(t0: float, kernels: int = 5) -> list[dict[str, Any]]:
    """One schedule cycle of a rank from ``t0`` µs: two 100 µs steps, kernels launched every 10 µs.

    Steps are numbered as torch numbers them across the cycles of one profiler: from ``1 + t0 // 100``."""
    first = 1 + int(t0) // 100
    events = [step_event(first, t0, 100), step_event(first + 1, t0 + 100, 100)]
    for i in range(kernels):
        corr = int(t0) + i
        events += [launch_event(corr, t0 + 10 * i), kernel_event(corr, t0 + 10 * i + 3, 4)]
    return events


class TraceBuilder:
    """Events on one host thread (pid 1, tid 1) and GPU streams (pid 0); times in µs."""

    def __init__(self, **top: Any) -> None:
        self.top = top
        self.events: list[dict[str, Any]] = []
        self.corr = 0

    def cpu(self, name: str, ts: float, dur: float, cat: str = "cpu_op") -> TraceBuilder:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur})
        return self

    def step(self, n: int, ts: float, dur: float) -> TraceBuilder:
        self.events.append(step_event(n, ts, dur))
        return self

    def runtime(self, name: str, ts: float, dur: float, corr: int | None = None) -> TraceBuilder:
        self.events.append(launch_event(corr, ts, dur, name))
        return self

    def gpu(
        self,
        name: str,
        launch_ts: float,
        ts: float,
        dur: float,
        *,
        cat: str = "kernel",
        stream: int = 7,
        launch_dur: float = 5.0,
        **args: Any,
    ) -> TraceBuilder:
        self.corr += 1
        self.runtime("cudaLaunchKernel" if cat == "kernel" else "cudaMemcpyAsync", launch_ts, launch_dur, self.corr)
        self.events.append(kernel_event(self.corr, ts, dur, name=name, cat=cat, stream=stream, device=0, **args))
        return self

    def to_bytes(self) -> bytes:
        return json.dumps({"schemaVersion": 1, **self.top, "traceEvents": self.events}).encode()


def busy_steps(n_steps: int = 4, step_us: float = 1000.0, kernel: str = "volta_sgemm_128x64_nn") -> TraceBuilder:
    """A healthy trace: each step is one long kernel launched at the step start."""
    b = TraceBuilder()
    for i in range(n_steps):
        t0 = i * step_us
        b.step(i, t0, step_us)
        b.gpu(kernel, t0, t0 + 10, step_us - 20)
    return b
