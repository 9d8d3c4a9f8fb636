"""How big a single trace file can one trace-processor Lambda handle? (docs/processing.md)

    python -m bench.lambda_single_file PATH [PATH...] [--memory-mb 3008]

For each file, in a fresh child process capped at --memory-mb of address space (RLIMIT_AS, stricter
than Lambda's RSS limit) and pinned to one CPU (the engine is single-threaded), it runs exactly the
processor's per-file work: analyze() (pass 1), trim_trace(max_events=1M, gzip) into a spooled temp
file (pass 2), render_html() and the summary JSON. Prints one JSON line per file: seconds per step,
peak RSS (ru_maxrss from wait4), uncompressed MB/s.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from profstack.analysis.perfetto_plan import PERFETTO_MAX_EVENTS


def _uncompressed_bytes(path: Path) -> int:
    if path.suffix != ".gz":
        return path.stat().st_size
    total = 0
    with gzip.open(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            total += len(chunk)
    return total


def child(path: Path) -> dict[str, Any]:
    import tempfile

    from profstack.analysis import AnalysisOptions, FileTraceSource, analyze, trim_trace
    from profstack.report import render_html

    source = FileTraceSource(path)
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    result = analyze([source], AnalysisOptions())
    t1 = time.perf_counter()
    with tempfile.SpooledTemporaryFile(max_size=64 << 20) as spool:
        trim_trace(source, spool, steps=None, max_events=PERFETTO_MAX_EVENTS, compress=True)  # type: ignore[arg-type]
        trimmed = spool.tell()
    t2 = time.perf_counter()
    html = render_html(result.summary)
    body = json.dumps(result.summary)
    t3 = time.perf_counter()
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    work_cpu = (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime)
    return {
        "work_cpu_s": round(work_cpu, 2),
        "analyze_s": round(t1 - t0, 2),
        "trim_s": round(t2 - t1, 2),
        "report_s": round(t3 - t2, 2),
        "complete": result.complete,
        "trimmed_gz_mb": round(trimmed / 1e6, 1),
        "html_kb": len(html) // 1000,
        "summary_kb": len(body) // 1000,
    }


def measure(path: Path, memory_mb: int) -> dict[str, Any]:
    def limits() -> None:
        cap = memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.lambda_single_file", "--child", str(path)],
        stdout=subprocess.PIPE,
        preexec_fn=limits,  # noqa: PLW1509 - setrlimit must run in the child
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    row: dict[str, Any] = {"file": path.name, "size_mb": round(path.stat().st_size / 1e6, 1)}
    row["uncompressed_mb"] = round(_uncompressed_bytes(path) / 1e6, 1)
    row["peak_rss_mb"] = round(usage.ru_maxrss / 1024)
    row["exit"] = os.waitstatus_to_exitcode(status)
    if row["exit"] == 0:
        row.update(json.loads(out))
        total = row["analyze_s"] + row["trim_s"] + row["report_s"]
        row["total_s"] = round(total, 2)
        row["mb_per_s_uncompressed"] = round(row["uncompressed_mb"] / total, 1)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--memory-mb", type=int, default=3008)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.paths[0])))
        return 0
    for path in args.paths:
        print(json.dumps(measure(path, args.memory_mb)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
