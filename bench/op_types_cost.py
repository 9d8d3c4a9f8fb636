"""What reading the launching ops' input types costs (issue #34 item 3: profstack.analysis.op_types).

    python -m bench.op_types_cost [--repeat 3] [--out bench/results/op_types_cost.json]

Every sample trace whose ops carry ``"Input type"`` (record_shapes), analysed in this process with the engine as
deployed (C where built), wall time best of ``--repeat``:

* **names only**: ``AnalysisOptions(op_types=False)``, one read of the file;
* **op types**: the default: the second, narrow read runs where untyped kernels take >= 5 % of computation time;
* **bare msgspec decode**: the file's events decoded by msgspec into a four-field struct (the peer's floor for a
  second read: what any reader of those fields pays).

Printed per trace: MB of JSON, both times, the ratio, whether the second read ran, and the share of computation
time it attributed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import msgspec

from bench.timing import best_wall, trace_json
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
    off, _ = best_wall(lambda: analyze([FileTraceSource(path)], AnalysisOptions(op_types=False)), repeat)
    on, result = best_wall(lambda: analyze([FileTraceSource(path)], AnalysisOptions()), repeat)
    bare, _ = best_wall(lambda: msgspec.json.decode(raw, type=_Trace), repeat)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    print(f"engine: {'c' if native.ACCEL is not None else 'python'}")
    print("| trace | JSON MB | names only (s) | op types (s) | ratio | bare msgspec decode (s) | from op types |")
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
