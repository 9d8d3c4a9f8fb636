"""One measurement, run in a fresh child process by `bench.run`.

    python -m bench.workers {profstack,profstack-heap,hta,msgspec} PATH

Prints one JSON line: {"seconds": work time excluding interpreter start and imports, ...}. The
parent reads peak RSS from the child's rusage (os.wait4), so the imports count towards memory
but not towards time.
"""

from __future__ import annotations

import gc
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

import msgspec


class Event(msgspec.Struct, gc=False):
    name: str = ""
    cat: str = ""
    ph: str = ""
    ts: float = 0.0
    dur: float = 0.0
    pid: int | str = 0
    tid: int | str = 0
    args: dict[str, Any] = {}


class Trace(msgspec.Struct, gc=False):
    traceEvents: list[Event]  # the Kineto key


def run_msgspec(path: Path) -> dict[str, Any]:
    """The floor: read (and gunzip) the whole file and decode it into typed structs.

    The cyclic GC is off during the decode: millions of fresh `args` dicts would otherwise trigger
    ever longer collections, and the floor should be the best a plain decode can do.
    """
    decoder = msgspec.json.Decoder(Trace)
    gc.disable()
    start = time.perf_counter()
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    trace = decoder.decode(data)
    seconds = time.perf_counter() - start
    gc.enable()
    return {"seconds": seconds, "events": len(trace.traceEvents)}


def run_profstack(path: Path) -> dict[str, Any]:
    from profstack.analysis import AnalysisOptions, analyze, discover_sources

    start = time.perf_counter()
    sources = discover_sources([path])
    result = analyze(sources, AnalysisOptions(top_k=10, steps=None))
    seconds = time.perf_counter() - start
    summary = result.summary
    return {
        "seconds": seconds,
        "complete": bool(result.complete),
        "ranks": len(summary.get("ranks", [])),
        "gpu_analysis": sorted({r["gpu_analysis"]["mode"] for r in summary.get("ranks", [])}),
    }


def run_profstack_heap(path: Path) -> dict[str, Any]:
    """ProfStack under tracemalloc (slower, not timed for the table): the peak of the Python heap.

    Unlike RSS, this excludes memory the allocator keeps from earlier peaks and the interpreter's own
    footprint, so it shows whether the engine's live state grows with the trace."""
    import tracemalloc

    from profstack.analysis import AnalysisOptions, analyze, discover_sources

    tracemalloc.start()
    start = time.perf_counter()
    analyze(discover_sources([path]), AnalysisOptions(top_k=10, steps=None))
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"seconds": seconds, "heap_peak_mb": round(peak / 1e6, 1)}


def run_hta(path: Path) -> dict[str, Any]:
    """HTA 0.5.0 loads a directory (one file per rank), then temporal + kernel breakdown."""
    import logging

    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    start = time.perf_counter()
    analysis = TraceAnalysis(trace_dir=str(path.parent))
    loaded = time.perf_counter()
    temporal = analysis.get_temporal_breakdown(visualize=False)
    analysis.get_gpu_kernel_breakdown(visualize=False)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "load_seconds": loaded - start,
        "idle_pct": float(temporal["idle_time_pctg"].iloc[0]),
    }


RUNNERS = {
    "msgspec": run_msgspec,
    "profstack": run_profstack,
    "profstack-heap": run_profstack_heap,
    "hta": run_hta,
}


def main(argv: list[str]) -> int:
    tool, path = argv[0], Path(argv[1])
    result = RUNNERS[tool](path)
    sys.stdout.write("BENCH-RESULT " + json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
