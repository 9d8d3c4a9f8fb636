"""Small helpers the benchmarks share: best-of-N timings and a sample trace's JSON."""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def best_wall(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """(the shortest wall time of ``repeat`` calls, the last call's result)."""
    best, out = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - started)
    return best, out


def best_cpu(fn: Callable[[], Any], repeat: int) -> float:
    """The shortest CPU time of ``repeat`` calls (this process)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        fn()
        best = min(best, time.process_time() - started)
    return best


def trace_json(path: Path) -> bytes:
    """A trace file's JSON text, gunzipped where it is ``.gz``."""
    if path.name.endswith(".gz"):
        with gzip.open(path) as fh:
            return fh.read()
    return path.read_bytes()
