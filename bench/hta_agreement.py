"""The agreement table: ProfStack against HTA 0.6.1 and 0.5.0 on every sample, per metric, worst difference.

    python -m bench.hta_agreement [--out bench/results/hta_agreement.json]

The reference values are HTA's own output on the sample traces (samples/traces/reference_values/, made by
scripts/hta_reference.py); the comparison and its tolerances are the agreement tests' (tests/unit/analysis/
hta_compare.py), run here over every (version, trace, step setting) to print, per metric, how many checks agree
and the worst difference among them: percentage points for shares, % for kernel totals and launch delays.
A trace HTA cannot analyse is counted apart, with HTA's error.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from profstack.analysis import AnalysisOptions, analyze
from profstack.analysis.sources import FileTraceSource
from tests.unit.analysis.hta_compare import METRICS, cases, compare, files_of, reference

_MAX = re.compile(r"max diff ([0-9.]+) (pp|%)")


def _launch_worst(summary: dict[str, Any], expected: dict[str, Any]) -> float:
    """The largest relative difference (%) of launch delay mean / p50 / p99 / max over ranks HTA measured."""
    worst = 0.0
    for r in summary["ranks"]:
        ref = expected["cuda_launch_stats"].get(str(r["rank"]), {})
        if not ref.get("n"):
            continue
        for mine, theirs in (("mean_us", "mean"), ("p50_us", "p50"), ("p99_us", "p99"), ("max_us", "max")):
            want, got = ref["launch_delay"][theirs], r["launch_delay"][mine]
            if got is not None and want:
                worst = max(worst, 100 * abs(got - want) / abs(want))
    return worst


def table() -> dict[str, Any]:
    cache: dict[tuple[tuple[Path, ...], str], dict[str, Any]] = {}
    rows: dict[tuple[str, str], dict[str, Any]] = defaultdict(
        lambda: {"checks": 0, "agree": 0, "worst": 0.0, "unit": "", "differ": []}
    )
    hta_failed: list[str] = []
    for version, key, mode in cases():
        entry = reference(version)["traces"][key]
        expected = entry[mode]
        if "error" in expected:
            if mode == "default":
                hta_failed.append(f"HTA {version} on {key}: {expected['error'].splitlines()[0][:120]}")
            continue
        files = files_of(entry)
        if (files, mode) not in cache:
            # HTA's time model (--hta-compat): whole µs, as HTA rounds; the exact default is compared in
            # docs/analysis.md ("Exact time and HTA's time model")
            opts = AnalysisOptions(include_last_step=(mode == "include_last_step"), top_k=100_000, hta_compat=True)
            cache[(files, mode)] = dict(analyze([FileTraceSource(f) for f in files], opts).summary)
        summary = cache[(files, mode)]
        for metric in METRICS:
            ok, detail = compare(summary, expected, metric)
            row = rows[(version, metric)]
            row["checks"] += 1
            row["agree"] += ok
            if not ok:
                row["differ"].append(f"{key} ({mode}): {detail[:160]}")
            found = _MAX.search(detail)
            if found:
                row["worst"] = max(row["worst"], float(found.group(1)))
                row["unit"] = found.group(2)
            elif metric == "launch_delay":
                row["worst"] = max(row["worst"], _launch_worst(summary, expected))
                row["unit"] = "%"
    return {"rows": {f"{v} {m}": r for (v, m), r in sorted(rows.items())}, "hta_failed": hta_failed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    result = table()
    print("| HTA | metric | agree / checks | worst difference |")
    print("|---|---|---|---|")
    for name, row in result["rows"].items():
        version, metric = name.split(" ", 1)
        worst = f"{row['worst']:.3f} {row['unit']}" if row["unit"] else "exact"
        print(f"| {version} | {metric} | {row['agree']} / {row['checks']} | {worst} |")
    for name, row in result["rows"].items():
        for d in row["differ"]:
            print(f"  differs, {name}: {d}")
    for line in result["hta_failed"]:
        print(f"  {line}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
