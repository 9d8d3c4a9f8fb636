"""Generate AMD TraceLens reference values for every sample trace (samples/traces/reference_values/tracelens.json).

TraceLens (github.com/AMD-AGI/TraceLens, MIT) is not on PyPI (PyPI's ``tracelens`` 0.7.0 is an unrelated project).
Run this script with the Python of a virtualenv of its own (never ProfStack's) in which AMD's TraceLens is importable,
installed as TraceLens's own README says; ``--commit`` names the TraceLens commit the values come from. This
repository holds no TraceLens code and no recipe that builds it: only the numbers it printed.

Nothing here is typed by hand: every number is TraceLens's own, from ``TreePerfAnalyzer.from_file(path)`` and its GPU
timeline (``get_df_gpu_timeline``, what TraceLens's perf report's "gpu_timeline" sheet shows) with TraceLens's
defaults: the GPU rows (kernel, gpu_memcpy, gpu_memset) linked to a CPU launcher, on float µs exactly as written
(``ts``, ``ts + dur``), no rounding, the whole trace (no ProfilerStep selection). Per kernel name, the total and count
of the durations of the same rows (TraceLens sums ``dur`` per kernel). A trace TraceLens cannot analyse is recorded
with its error. This script imports TraceLens and pandas; ProfStack never imports it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import platform
import sys
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TRACES = REPO / "samples" / "traces"
OUT = TRACES / "reference_values" / "tracelens.json"
#: not traces, or not Kineto JSON
SKIP = ("reference_values", "xplane", "execution_trace/benchmark_simple_add_et.json.gz")


def _files() -> list[Path]:
    return sorted(
        p
        for p in TRACES.rglob("*")
        if p.name.endswith((".json", ".json.gz")) and not any(s in p.relative_to(TRACES).as_posix() for s in SKIP)
    )


def analyse(path: Path) -> dict[str, Any]:
    from TraceLens import TreePerfAnalyzer

    analyzer = TreePerfAnalyzer.from_file(str(path))
    df = analyzer.get_df_gpu_timeline()
    timeline = {str(t): float(v) * 1e3 for t, v in zip(df["type"], df["time ms"], strict=True)}  # back to µs
    rows = [
        e
        for e in analyzer.tree.events
        if analyzer.event_to_category(e) in {"kernel", "gpu_memcpy", "gpu_memset"} and e.get("tree")
    ]
    kernels: dict[str, dict[str, float]] = {}
    for e in rows:
        k = kernels.setdefault(str(e["name"]), {"count": 0, "total_us": 0.0})
        k["count"] += 1
        k["total_us"] += float(e["dur"])
    return {"gpu_timeline_us": timeline, "gpu_rows": len(rows), "kernels": kernels}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commit", required=True, help="the TraceLens commit installed (recorded in the output)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    traces: dict[str, Any] = {}
    for path in _files():
        key = path.relative_to(TRACES).as_posix()
        try:
            traces[key] = analyse(path)
        except Exception as exc:
            traces[key] = {"error": f"{type(exc).__name__}: {exc}"[:400], "where": traceback.format_exc()[-600:]}
        print(key, "error" if "error" in traces[key] else traces[key]["gpu_timeline_us"].get("busy_time"))
    out = {
        "generator": "scripts/tracelens_reference.py",
        "tracelens": {"repository": "github.com/AMD-AGI/TraceLens", "commit": args.commit},
        "python": platform.python_version(),
        "pandas": importlib.metadata.version("pandas"),
        "notes": (
            "TreePerfAnalyzer.from_file(path).get_df_gpu_timeline() with TraceLens's defaults: GPU rows (kernel, "
            "gpu_memcpy, gpu_memset) linked to a CPU launcher (include_unlinked_kernels=False), float µs as written, "
            "the whole trace; busy_time is the union of the rows, total_time the last end minus the first start, "
            "idle_time their difference. kernels: per name, the count and the sum of dur of the same rows."
        ),
        "traces": traces,
    }
    args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
