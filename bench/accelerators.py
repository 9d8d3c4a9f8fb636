"""Real traces from other accelerators (issue #34): ProfStack's engines against a bare msgspec decode and HTA.

    python -m bench.accelerators [--repeat 3] [--hta-python /tmp/hta061/bin/python] [--out FILE]

Every trace under ``samples/traces/tracelens/`` (AMD MI300X / MI210 on ROCm, vLLM and SGLang with HIP graphs,
H100, B200), CPU time in this process, best of ``--repeat``:

* **C**: the engine as deployed (the C reader and loop; ``op_types=False`` so one read of the file is timed);
* **Python**: the same with ``native.ACCEL`` off (the msgspec decode and the Python loop);
* **msgspec**: a bare decode of the file's events into a five-field struct, the floor of any Python reader;
* **HTA**: ``TraceAnalysis`` loading the trace and computing the temporal breakdown, in a separate interpreter
  that has HTA installed (``--hta-python``; wall time of that work only, not its start-up), or left out.

The ratios printed are C against each peer on the same file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec

from bench.timing import best_cpu, trace_json
from profstack.analysis import native
from profstack.analysis.engine import analyze
from profstack.analysis.options import AnalysisOptions
from profstack.analysis.sources import FileTraceSource

TRACES = Path(__file__).resolve().parent.parent / "samples" / "traces"

_HTA_SNIPPET = """
import logging, sys, time
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
best = None
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    try:
        a = TraceAnalysis(trace_files={0: sys.argv[1]}, trace_dir="/")
        a.get_temporal_breakdown(visualize=False)
    except Exception as exc:
        print("error " + type(exc).__name__ + ": " + str(exc)[:80]); raise SystemExit(0)
    d = time.perf_counter() - t
    best = d if best is None else min(best, d)
print(best)
"""


class _Event(msgspec.Struct):
    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float = 0.0
    dur: float = 0.0


class _Trace(msgspec.Struct):
    traceEvents: list[_Event] = []


def _hta(python: str | None, path: Path, repeat: int) -> str:
    if python is None:
        return "-"
    out = subprocess.run(
        [python, "-c", _HTA_SNIPPET, str(path), str(repeat)], capture_output=True, text=True, check=False, timeout=900
    ).stdout.strip()
    return out.splitlines()[-1] if out else "failed"


def _measure(path: Path, repeat: int, hta_python: str | None) -> dict[str, Any]:
    raw = trace_json(path)
    opts = AnalysisOptions(op_types=False)
    c = best_cpu(lambda: analyze([FileTraceSource(path)], opts), repeat)
    accel, native.ACCEL = native.ACCEL, None
    try:
        py = best_cpu(lambda: analyze([FileTraceSource(path)], opts), repeat)
    finally:
        native.ACCEL = accel
    floor = best_cpu(lambda: msgspec.json.decode(raw, type=_Trace), repeat)
    return {
        "trace": str(path.relative_to(TRACES)),
        "json_mb": len(raw) / 1e6,
        "c_s": c,
        "python_s": py,
        "msgspec_s": floor,
        "hta_s": _hta(hta_python, path, repeat),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hta-python", default=None, help="an interpreter with HTA installed (see hta_reference)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if native.ACCEL is None:
        print("the C module is not built: run make install", file=sys.stderr)
        return 2
    rows = [_measure(p, args.repeat, args.hta_python) for p in sorted((TRACES / "tracelens").rglob("*.json.gz"))]
    print("| trace | JSON MB | C s (MB/s) | Python s | msgspec decode s | HTA s | C vs Python / msgspec / HTA |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        try:
            seconds = float(r["hta_s"])
            hta, vs_hta = f"{seconds:.3f}", f"{seconds / r['c_s']:.1f}x"
        except ValueError:  # "-" (not run), or HTA's own failure
            failure = r["hta_s"].split(":")[0].removeprefix("error ")
            hta = vs_hta = r["hta_s"] if r["hta_s"] == "-" else f"fails: {failure}"
        print(
            f"| {r['trace']} | {r['json_mb']:.1f} | {r['c_s']:.3f} ({r['json_mb'] / r['c_s']:.0f}) | "
            f"{r['python_s']:.3f} | {r['msgspec_s']:.3f} | {hta} | "
            f"{r['python_s'] / r['c_s']:.1f}x / {r['msgspec_s'] / r['c_s']:.2f}x / {vs_hta} |"
        )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
