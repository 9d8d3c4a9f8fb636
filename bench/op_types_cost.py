"""What reading the launching ops' input types costs (issue #34 item 3, #44 item 1: profstack.analysis.op_types).

    python -m bench.op_types_cost [--repeat 3] [--out bench/results/op_types_cost.json]
    python -m bench.op_types_cost --memory 1000000 [--pending 250000]

Every sample trace whose ops carry ``"Input type"`` (record_shapes), analysed in this process with the engine as
deployed (C where built), CPU time best of ``--repeat``:

* **names only**: ``AnalysisOptions(op_types=False)``;
* **op types**: the default: the main pass also collects each operator's class and the followed kernels' counts
  (one read of the file);
* **bare msgspec decode**: the file's events decoded by msgspec into a four-field struct (what any reader of
  those fields pays, for scale).

Printed per trace: MB of JSON, both times, the ratio, and the share of computation time the op types attributed.

``--memory N``: the Python heap peak (tracemalloc) of one analysis of a crafted trace with ``N`` operators carrying
input types and ``--pending`` followed kernels written before them (they wait for their operator), with the op
types on and off: what the op types' bounds (``op_types.MAX_OPS``, ``MAX_PENDING``) cost at most. ``--first-id``
beyond ``op_types.DENSE_IDS`` puts every operator in the dict instead of the byte per id.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec

from bench.timing import best_cpu, trace_json
from profstack.analysis import native
from profstack.analysis.engine import analyze
from profstack.analysis.options import AnalysisOptions
from profstack.analysis.sources import FileTraceSource

TRACES = Path(__file__).resolve().parent.parent / "samples" / "traces"


class _Args(msgspec.Struct):
    external_id: int | str | float | None = msgspec.field(default=None, name="External id")
    input_types: list[str] | None = msgspec.field(default=None, name="Input type")


class _Four(msgspec.Struct):
    cat: str = ""
    name: str = ""
    dur: float = 0.0
    args: _Args | None = None


class _Trace(msgspec.Struct):
    traceEvents: list[_Four] = []


def _with_input_types() -> list[Path]:
    return [
        p
        for p in sorted(TRACES.rglob("*.json*"))
        if "reference_values" not in p.parts and b'"Input type"' in trace_json(p)
    ]


def _measure(path: Path, repeat: int) -> dict[str, Any]:
    raw = trace_json(path)
    off = best_cpu(lambda: analyze([FileTraceSource(path)], AnalysisOptions(op_types=False)), repeat)
    on = best_cpu(lambda: analyze([FileTraceSource(path)], AnalysisOptions()), repeat)
    result = analyze([FileTraceSource(path)], AnalysisOptions())
    bare = best_cpu(lambda: msgspec.json.decode(raw, type=_Trace), repeat)
    precision = [p for r in result.summary["ranks"] for p in r["precision"]]
    total = sum(p["time_us"] for p in precision)
    by_ops = sum(p.get("from_op_types_time_us", 0.0) for p in precision)
    return {
        "trace": str(path.relative_to(TRACES)),
        "json_mb": len(raw) / 1e6,
        "names_only_s": off,
        "op_types_s": on,
        "bare_decode_s": bare,
        "from_op_types_pct": 100.0 * by_ops / total if total else 0.0,
    }


def crafted_trace(path: Path, ops: int, pending: int, first_id: int = 1) -> None:
    """``pending`` Triton kernels (External ids first_id.., before their operators), then ``ops`` bf16 operators
    (External ids first_id..), each kernel launched by a runtime call, one ProfilerStep around it all."""
    with path.open("w") as fh:
        fh.write('{"schemaVersion": 1, "record_shapes": 1, "traceEvents": [\n')
        fh.write('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 1e9}')
        for i in range(1, pending + 1):
            fh.write(
                f',\n{{"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_0", "ts": {10 * i + 5}, "dur": 2,'
                f' "args": {{"stream": 7, "correlation": {i}, "External id": {first_id + i - 1}}}}}'
                f',\n{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": {10 * i}, "dur": 1,'
                f' "args": {{"correlation": {i}}}}}'
            )
        for i in range(1, ops + 1):
            fh.write(
                f',\n{{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": {10 * i}, "dur": 3, "args": '
                f'{{"External id": {first_id + i - 1}, "Input type": ["c10::BFloat16", "c10::BFloat16", "Scalar"]}}}}'
            )
        fh.write("\n]}\n")


def heap_peak(path: Path, opts: AnalysisOptions) -> tuple[float, dict[str, Any]]:
    tracemalloc.start()
    result = analyze([FileTraceSource(path)], opts)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1e6, result.summary


def memory(ops: int, pending: int, first_id: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "crafted.pt.trace.json"
        crafted_trace(path, ops, pending, first_id)
        off, _ = heap_peak(path, AnalysisOptions(op_types=False, include_last_step=True))
        on, summary = heap_peak(path, AnalysisOptions(include_last_step=True))
        mix = {p["precision"]: p["pct"] for r in summary["ranks"] for p in r["precision"]}
        return {
            "ops": ops,
            "pending": pending,
            "first_id": first_id,
            "json_mb": path.stat().st_size / 1e6,
            "heap_peak_mb_names_only": off,
            "heap_peak_mb_op_types": on,
            "precision": mix,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--memory", type=int, default=None, help="operators of a crafted trace: heap peak only")
    parser.add_argument("--pending", type=int, default=250_000, help="with --memory: kernels before their ops")
    parser.add_argument("--first-id", type=int, default=1, help="with --memory: the first External id (Kineto: 1)")
    args = parser.parse_args(argv)
    print(f"engine: {'c' if native.ACCEL is not None else 'python'}")
    if args.memory is not None:
        print(json.dumps(memory(args.memory, args.pending, args.first_id)))
        return 0
    rows = []
    head = (
        "trace",
        "JSON MB",
        "names only (CPU s)",
        "op types (CPU s)",
        "ratio",
        "bare msgspec decode (CPU s)",
        "from op types",
    )
    print("| " + " | ".join(head) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for path in _with_input_types():
        rows.append(_measure(path, args.repeat))
        r = rows[-1]
        print(
            f"| {r['trace']} | {r['json_mb']:.1f} | {r['names_only_s']:.3f} | {r['op_types_s']:.3f} | "
            f"{r['op_types_s'] / r['names_only_s']:.2f}x | {r['bare_decode_s']:.3f} | {r['from_op_types_pct']:.1f} % |"
        )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
