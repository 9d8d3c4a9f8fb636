"""The trace processor's Lambda memory size, from measurement: seconds and GB-seconds per GB of trace.

    python -m bench.lambda_sizing FILE [FILE...] [--memory 512,1024,1536,1769,2048,3008] [--validate 1024]

Lambda gives a function CPU in proportion to its memory: 1769 MB is one full vCPU, 3008 MB about 1.7
(AWS Lambda docs). The processor's per-file work (`bench.lambda_single_file`: analyze, trim, report) is
single-threaded, so it can never use more than one vCPU. Model, for memory m:

    share(m)   = min(m / 1769, 1)                       (the vCPU fraction one thread can use)
    seconds(m) = cpu_seconds / share(m)                 (CPU-bound: a smaller share stretches it)
    GB-s(m)    = m / 1024 * seconds(m)

`cpu_seconds` is measured here: the child pinned to one CPU, the user + system time of its work
(``getrusage`` around it, interpreter start and imports excluded), which other jobs on a shared machine
disturb far less than wall time. No cgroup is needed:
``--validate M`` checks the model by running the child with a CPU share of M/1769, enforced by the parent
stopping and continuing it (SIGSTOP / SIGCONT) on a 20 ms cycle, the way a CFS quota throttles a
Lambda sandbox, and compares its slow-down against the unthrottled run with ``1 / share``.

Prints one JSON line per measurement and a markdown table (per GB of uncompressed trace JSON), with the
duration price of Lambda on arm64 (``--price``, USD per GB-second).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FULL_VCPU_MB = 1769
ARM64_USD_PER_GB_S = 0.0000133334  # us-east-1, first 7.5 billion GB-s per month
PERIOD_S = 0.02


def _child_cmd(path: Path) -> list[str]:
    return [sys.executable, "-m", "bench.lambda_single_file", "--child", str(path)]


def run_child(path: Path, *, share: float = 1.0, memory_mb: int = 3008) -> dict[str, Any]:
    """The processor's per-file work in a child on one CPU, address space capped at `memory_mb`; with
    `share` < 1 the parent lets it run only that fraction of each 20 ms period."""
    cpu = min(os.sched_getaffinity(0))

    def limits() -> None:
        cap = memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        os.sched_setaffinity(0, {cpu})

    start = time.perf_counter()
    proc = subprocess.Popen(_child_cmd(path), stdout=subprocess.PIPE, preexec_fn=limits)  # noqa: PLW1509
    assert proc.stdout is not None
    if share < 1.0:
        import threading

        done = threading.Event()

        def throttle() -> None:
            on, off = PERIOD_S * share, PERIOD_S * (1 - share)
            while not done.is_set():
                time.sleep(on)
                try:
                    os.kill(proc.pid, signal.SIGSTOP)
                    time.sleep(off)
                    os.kill(proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    return

        t = threading.Thread(target=throttle, daemon=True)
        t.start()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if share < 1.0:
        done.set()
    row: dict[str, Any] = {"file": path.name, "share": round(share, 3), "memory_cap_mb": memory_mb}
    row["exit"] = os.waitstatus_to_exitcode(status)
    row["wall_s"] = round(wall, 2)
    row["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 2)  # includes interpreter start and imports
    row["peak_rss_mb"] = round(usage.ru_maxrss / 1024)
    if row["exit"] == 0:
        row.update(json.loads(out))
    return row


def model(cpu_s_per_gb: float, memory_mb: int) -> tuple[float, float]:
    """(seconds, GB-seconds) per GB of trace at `memory_mb`."""
    share = min(memory_mb / FULL_VCPU_MB, 1.0)
    seconds = cpu_s_per_gb / share
    return seconds, memory_mb / 1024 * seconds


def table(rows: list[dict[str, Any]], memories: list[int], price: float) -> str:
    lines = [
        "| trace | memory MB | vCPU share used | s per GB | GB-s per GB | USD per 100 GB | fits (peak RSS) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if row.get("exit") != 0:
            continue
        per_gb = row["work_cpu_s"] / (row["uncompressed_mb"] / 1000)
        for m in memories:
            seconds, gbs = model(per_gb, m)
            fits = "yes" if row["peak_rss_mb"] * 1.5 + 64 < m else "no"  # headroom: runtime, boto3, spool
            lines.append(
                f"| {row['file']} ({row['uncompressed_mb']:,.0f} MB) | {m} | {min(m / FULL_VCPU_MB, 1):.2f} "
                f"| {seconds:.1f} | {gbs:.1f} | {gbs * 100 * price:.3f} | {fits} ({row['peak_rss_mb']} MB) |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--memory", default="512,1024,1536,1769,2048,3008")
    parser.add_argument("--validate", type=int, default=None, metavar="MB", help="check the model at this size")
    parser.add_argument("--price", type=float, default=ARM64_USD_PER_GB_S, help="USD per GB-second")
    parser.add_argument("--repeat", type=int, default=2, help="runs per file (least CPU time kept)")
    args = parser.parse_args(argv)
    memories = [int(m) for m in args.memory.split(",") if m]
    from bench.lambda_single_file import _uncompressed_bytes

    rows = []
    for path in args.paths:
        tries = [run_child(path) for _ in range(max(args.repeat, 1))]
        ok = [t for t in tries if t["exit"] == 0] or tries
        best = min(ok, key=lambda t: t.get("work_cpu_s", t["cpu_s"]))
        best["uncompressed_mb"] = round(_uncompressed_bytes(path) / 1e6, 1)
        print(json.dumps(best), flush=True)
        rows.append(best)
        if args.validate:
            share = min(args.validate / FULL_VCPU_MB, 1.0)
            check = run_child(path, share=share)
            # on a shared machine wall time includes waiting for the CPU: compare the slow-down, not seconds
            check["slowdown_measured"] = round(check["wall_s"] / best["wall_s"], 2)
            check["slowdown_model"] = round(1 / share, 2)
            print(json.dumps(check), flush=True)
    print(table(rows, memories, args.price))
    return 0


if __name__ == "__main__":
    sys.exit(main())
