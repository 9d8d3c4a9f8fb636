"""Exact time against HTA's whole-µs model on every sample trace: the table in docs/analysis.md.

    python -m bench.time_models [--out bench/results/time_models.json] [--markdown]

Each sample trace is analysed twice with the defaults: in the exact time model (integer ns, the default) and in HTA's
(``AnalysisOptions(hta_compat=True)``: every GPU op rounded to whole µs, start up and end down). Per trace: GPU busy
time (the union of the analysed GPU ops), busy share of the GPU span, kernel time (the sum of the analysed kernels),
the mean launch delay, the resolution the trace's GPU times have, and how much HTA's rounding loses.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from profstack.analysis import AnalysisOptions, FileTraceSource, analyze
from tests.conftest import TRACES_DIR as TRACES
from tests.unit.analysis.conftest import all_trace_files


def _numbers(summary: dict[str, Any]) -> dict[str, Any] | None:
    ranks = [r for r in summary["ranks"] if r["has_gpu"]]
    if not ranks:
        return None
    r = ranks[0]
    tb = r["temporal_breakdown"]
    return {
        "busy_us": round(tb["gpu_span_us"] - tb["idle_time_us"], 3),
        "busy_pct": round(100.0 - tb["idle_pct"], 3),
        "kernel_us": r["gpu_activity"]["kernel_time_us"],
        "launch_delay_mean_us": r["launch_delay"]["mean_us"],
        "resolution_ns": r.get("time_resolution_ns"),
        "complete": summary["complete"],
    }


def table() -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for path in all_trace_files():
        key = path.relative_to(TRACES).as_posix()
        exact = _numbers(dict(analyze([FileTraceSource(path)], AnalysisOptions()).summary))
        if exact is None:
            continue
        hta = _numbers(dict(analyze([FileTraceSource(path)], AnalysisOptions(hta_compat=True)).summary))
        assert hta is not None
        lost = exact["busy_us"] - hta["busy_us"]
        rows[key] = {
            "exact": exact,
            "hta": hta,
            "busy_lost_pct": round(100.0 * lost / exact["busy_us"], 2) if exact["busy_us"] else 0.0,
            "busy_pp": round(exact["busy_pct"] - hta["busy_pct"], 2),
        }
    return rows


def markdown(rows: dict[str, Any]) -> str:
    out = [
        "| trace | resolution | busy exact | busy HTA | HTA loses | busy % exact / HTA | kernel time exact / HTA | "
        "launch delay mean exact / HTA |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, row in sorted(rows.items(), key=lambda kv: -kv[1]["busy_lost_pct"]):
        e, h = row["exact"], row["hta"]
        res = e["resolution_ns"]
        res_txt = "1 µs" if res == 1000.0 else f"{res:g} ns"
        out.append(
            f"| `{key.split('.json')[0]}` | {res_txt} | {e['busy_us']:,.1f} µs | {h['busy_us']:,.1f} µs | "
            f"{row['busy_lost_pct']:.1f} % | {e['busy_pct']:.2f} / {h['busy_pct']:.2f} | "
            f"{e['kernel_us']:,.1f} / {h['kernel_us']:,.1f} µs | "
            f"{e['launch_delay_mean_us'] if e['launch_delay_mean_us'] is not None else '-'} / "
            f"{h['launch_delay_mean_us'] if h['launch_delay_mean_us'] is not None else '-'} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--markdown", action="store_true", help="print the docs/analysis.md table")
    args = ap.parse_args(argv)
    rows = table()
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    print(markdown(rows) if args.markdown else json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
