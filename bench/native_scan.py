"""How much of target 1 could a native reader buy? (issue #17)

    python -m bench.native_scan bench/data/100MB-json/rank-0.pt.trace.json [--repeat 5] [--out FILE]

Target 1 asks the whole analysis to run 1.25x faster than msgspec decoding the file into one typed struct per
event (the "floor"). This measures, pinned to one CPU, interleaved rounds, best of each, in CPU milliseconds per
MB of JSON, each Python measurement in a fresh child process through ``bench.workers`` (as ``make bench``):

* **native scan**: ``bench/native/kineto_scan.c``, compiled here with ``cc -O2``: the columns ProfStack's reader
  fills (ph, name and cat ids, ts, dur, pid, tid, args.correlation, args.stream) without an object per event.
  It neither unescapes nor validates, so it is a lower bound for a native reader. Before any time is reported,
  its event count, sum of ``dur``, correlation count and sum, and number of distinct strings are checked against
  msgspec's decode of the same file; a mismatch stops the probe.
* **floor**: ``bench.workers.run_msgspec``, the floor of ``make bench``.
* **ProfStack** (``bench.workers.run_profstack``), split into **decode** (its batch decoder,
  ``parse._LIST_DECODER``), **consume** (its per-event loop, ``parse._Parser.consume``, which turns structs into
  columns) and **rest** (the work on columns: the GPU accumulator, the launch join and the time bins, which
  ``consume`` calls once per batch and which are timed out of it (``COLUMN_WORK``), then the analyzers, rules and
  the summary), by wrapping those with CPU timers.

The last line projects the best a native reader could give with today's analysis behind it: the floor's time
over (native scan + rest). That is optimistic, since consume's classification work is not in the scan.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import workers
from bench.run import SINGLE_THREAD_ENV

REPO_ROOT = Path(__file__).resolve().parent.parent
NATIVE_REPEAT = 5  # runs inside each kineto_scan process, best kept: its allocations warm, like the Python heap
SOURCE = Path(__file__).resolve().parent / "native" / "kineto_scan.c"


class ProbeError(RuntimeError):
    """The probe cannot give a trustworthy number (no compiler, or the scan disagrees with msgspec)."""


def build(out_dir: Path) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ProbeError("no C compiler (cc or gcc) on PATH")
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / "kineto_scan"
    subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(SOURCE)], check=True)
    return exe


def native_scan(exe: Path, trace: Path, repeat: int) -> dict[str, Any]:
    done = subprocess.run([str(exe), str(trace), str(repeat)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ProbeError(f"kineto_scan failed ({done.returncode}): {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def reference(trace: Path) -> dict[str, Any]:
    """The same counts and sums as kineto_scan prints, from msgspec's untyped decode, summed in file order."""
    import msgspec

    events = msgspec.json.decode(trace.read_bytes())["traceEvents"]
    sum_dur = 0.0
    with_corr = sum_corr = 0
    strings: set[str] = set()
    objects = 0
    for e in events:
        if not isinstance(e, dict):
            continue
        objects += 1
        dur = e.get("dur", 0.0)
        if isinstance(dur, int | float) and not isinstance(dur, bool):
            sum_dur += dur
        for k in ("name", "cat", "pid", "tid"):
            v = e.get(k)
            if isinstance(v, str):
                strings.add(v)
        args = e.get("args")
        corr = args.get("correlation") if isinstance(args, dict) else None
        if isinstance(corr, int) and not isinstance(corr, bool) and corr >= 0:
            with_corr += 1
            sum_corr += corr
    return {
        "events": objects,
        "symbols": len(strings),
        "sum_dur": sum_dur,
        "with_correlation": with_corr,
        "sum_correlation": sum_corr,
    }


def check_agreement(scan: dict[str, Any], ref: dict[str, Any]) -> None:
    wrong = {k: (scan[k], v) for k, v in ref.items() if scan[k] != v}
    if wrong:
        raise ProbeError(f"kineto_scan disagrees with msgspec on {wrong} (scan, msgspec)")


# Column work that ``consume`` calls once per batch (not per event): settling GPU ops into the accumulator, the
# launch join, the CPU time bins. A native reader would still hand its columns to these, so the probe counts them
# with the rest, not with the per-event loop.
COLUMN_WORK = (("gpu", "GpuFeed", "after_batch"), ("gpu", "LaunchJoin", "add"), ("timebins", "TimeBins", "add_points"))


def profstack_split(trace: Path) -> dict[str, float]:
    """One analysis, its CPU time split into decode, the per-event loop and the rest (the column work)."""
    import importlib

    from profstack.analysis import parse

    acc = {"decode": 0.0, "consume": 0.0, "column_work_in_consume": 0.0}
    depth = [0]
    inner_decoder = parse._LIST_DECODER  # the probe times the engine's own private stages
    inner_consume = parse._Parser.consume
    patched: list[tuple[type, str, Any]] = []

    class TimedDecoder:
        def decode(self, raw: bytes) -> Any:
            start = time.process_time()
            try:
                return inner_decoder.decode(raw)
            finally:
                acc["decode"] += time.process_time() - start

    def timed_consume(self: Any, events: Any) -> None:
        start = time.process_time()
        depth[0] += 1
        try:
            inner_consume(self, events)
        finally:
            depth[0] -= 1
            acc["consume"] += time.process_time() - start

    def column_timer(inner: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not depth[0]:
                return inner(*args, **kwargs)
            start = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                acc["column_work_in_consume"] += time.process_time() - start

        return timed

    parse._LIST_DECODER = TimedDecoder()  # type: ignore[assignment]
    parse._Parser.consume = timed_consume  # type: ignore[method-assign]
    for module, cls_name, method in COLUMN_WORK:
        cls = getattr(importlib.import_module(f"profstack.analysis.{module}"), cls_name)
        inner = getattr(cls, method)
        patched.append((cls, method, inner))
        setattr(cls, method, column_timer(inner))
    try:
        total = float(workers.run_profstack(trace)["cpu_seconds"])  # make bench's ProfStack measurement
    finally:
        parse._LIST_DECODER = inner_decoder
        parse._Parser.consume = inner_consume  # type: ignore[method-assign]
        for cls, method, inner in patched:
            setattr(cls, method, inner)
    if min(acc.values()) <= 0.0:
        raise ProbeError(f"a stage the probe times was never called ({acc}): the split would be wrong")
    per_event = acc["consume"] - acc["column_work_in_consume"]
    return {
        "total": total,
        "decode": acc["decode"],
        "consume": per_event,
        "rest": total - acc["decode"] - per_event,
        "rest_of_it_inside_consume": acc["column_work_in_consume"],
    }


def in_child(kind: str, trace: Path) -> dict[str, float]:
    """One measurement in a fresh interpreter, through ``bench.workers`` as ``make bench`` runs each tool (imports
    are not timed): a floor measured in a process that already decoded the file several times is slower (its heap is
    fragmented), which would flatter every ratio to it."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.native_scan", "--child", kind, str(trace)],
        cwd=REPO_ROOT,
        env={**os.environ, **SINGLE_THREAD_ENV, "PYTHONPATH": str(REPO_ROOT)},  # as bench.run starts its workers
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ProbeError(f"the {kind} child failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    result: dict[str, float] = json.loads(done.stdout)
    return result


def child(kind: str, trace: Path) -> dict[str, float]:
    if kind == "floor":
        return {"total": float(workers.run_msgspec(trace)["cpu_seconds"])}  # make bench's floor measurement
    return profstack_split(trace)


def best_of(rounds: list[dict[str, float]]) -> dict[str, float]:
    return min(rounds, key=lambda r: r["total"])


def measure(trace: Path, repeat: int, build_dir: Path) -> dict[str, Any]:
    exe = build(build_dir)
    scan = native_scan(exe, trace, 1)
    check_agreement(scan, reference(trace))
    mb = trace.stat().st_size / 1e6
    scans: list[float] = []
    floors: list[float] = []
    splits: list[dict[str, float]] = []
    steps: list[Callable[[], None]] = [
        lambda: scans.append(native_scan(exe, trace, NATIVE_REPEAT)["best_cpu_ms"] / 1e3),
        lambda: floors.append(in_child("floor", trace)["total"]),
        lambda: splits.append(in_child("split", trace)),
    ]
    for _ in range(repeat):
        for step in steps:
            step()
    split = best_of(splits)
    per_mb = {
        "native_scan": min(scans) / mb * 1e3,
        "floor": min(floors) / mb * 1e3,
        **{f"profstack_{k}": v / mb * 1e3 for k, v in split.items()},
    }
    floor = per_mb["floor"]
    return {
        "trace": str(trace),
        "mb": mb,
        "repeat": repeat,
        "cpu": sorted(os.sched_getaffinity(0)),
        "check": {k: scan[k] for k in ("events", "symbols", "with_correlation")},
        "cpu_ms_per_mb": per_mb,
        "ratios_to_floor": {
            "profstack": floor / per_mb["profstack_total"],
            "native_scan_alone": floor / per_mb["native_scan"],
            "native_scan_plus_todays_rest": floor / (per_mb["native_scan"] + per_mb["profstack_rest"]),
            "target_json": 1.25,
        },
        "target_budget_ms_per_mb": floor / 1.25,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", type=Path, help="an uncompressed Kineto .json trace")
    ap.add_argument("--child", choices=("floor", "split"), help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=0, help="the CPU to pin to (default 0)")
    ap.add_argument("--build-dir", type=Path, default=REPO_ROOT / "build" / "native_scan")
    ap.add_argument("--out", type=Path, default=None, help="also write the result as JSON here")
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.trace)))
        return 0
    os.sched_setaffinity(0, {args.cpu})  # inherited by the children
    try:
        result = measure(args.trace, args.repeat, args.build_dir)
    except ProbeError as exc:
        print(f"native_scan: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
