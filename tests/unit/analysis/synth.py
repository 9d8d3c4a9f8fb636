"""Build small synthetic Kineto traces for rule and API tests."""

from __future__ import annotations

import json
from typing import Any


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
        return self.cpu(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")

    def runtime(self, name: str, ts: float, dur: float, corr: int | None = None) -> TraceBuilder:
        ev: dict[str, Any] = {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}
        if corr is not None:
            ev["args"] = {"correlation": corr}
        self.events.append(ev)
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
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                            "args": {"stream": stream, "correlation": self.corr, "device": 0, **args}})  # fmt: skip
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
