"""Does inflating a .json.gz on a second thread, overlapped with the analysis, make one file faster?

    python -m bench.inflate_thread bench/data/100MB-gz/rank-0.pt.trace.json.gz [--rounds 5] [--depth 4]

Issue #17 asks for it "if it measures faster". Each round analyses the file twice in fresh child processes
pinned to CPUs 0-1, interleaved: once as today (``reader.iter_chunks`` inflates in the analysing thread) and once
with ``reader.iter_chunks`` replaced by a prefetching version whose producer thread reads and inflates into a
bounded queue (``--depth`` chunks of ``reader.OUT_SIZE``). zlib and ISA-L release the GIL while they inflate, so
the producer can run on the second CPU; the analysis holds the GIL otherwise, so the producer gets it back only at
the interpreter's switch interval. Reports best and median wall and CPU time of each, and whether the summaries
are identical. The prototype lives here, not in the library, until it measures faster.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent


def prefetching(chunks: Iterator[bytes], depth: int) -> Iterator[bytes]:
    """Run ``chunks`` on a producer thread, at most ``depth`` chunks ahead; its exceptions re-raise here."""
    q: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for chunk in chunks:
                while not stop.is_set():
                    try:
                        q.put(("data", chunk), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("end", None))
        except BaseException as exc:
            q.put(("error", exc))

    worker = threading.Thread(target=produce, name="inflate", daemon=True)
    worker.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "data":
                yield item
            elif kind == "error":
                raise item
            else:
                return
    finally:
        stop.set()
        while worker.is_alive():
            try:
                q.get_nowait()
            except queue.Empty:
                worker.join(timeout=0.05)


def child(path: Path, mode: str, depth: int) -> None:
    from profstack.analysis import AnalysisOptions, analyze, discover_sources, parse, reader

    if mode == "thread":
        serial = reader.iter_chunks

        def threaded(fh: Any, **kw: Any) -> Iterator[bytes]:
            return prefetching(serial(fh, **kw), depth)

        parse.iter_chunks = threaded  # type: ignore[assignment]  # the analysis pass only
    sources = discover_sources([path])
    start, cpu = time.perf_counter(), time.process_time()
    result = analyze(sources, AnalysisOptions(top_k=10, steps=None))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    digest = hashlib.sha256(json.dumps(result.summary, sort_keys=True, default=str).encode()).hexdigest()
    print("RESULT " + json.dumps({"seconds": seconds, "cpu": cpu, "sha": digest}))


def run(path: Path, mode: str, depth: int, cpus: set[int]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYTHONHASHSEED": "0"}
    out = subprocess.run(
        [sys.executable, "-m", "bench.inflate_thread", "--child", mode, "--depth", str(depth), str(path)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=lambda: os.sched_setaffinity(0, cpus),
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("RESULT "))
    return dict(json.loads(line.removeprefix("RESULT ")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--child", choices=("serial", "thread"))
    args = parser.parse_args(argv)
    if args.child:
        child(args.path, args.child, args.depth)
        return 0
    cpus = {0, 1} & os.sched_getaffinity(0) or os.sched_getaffinity(0)
    runs: dict[str, list[dict[str, Any]]] = {"serial": [], "thread": []}
    for _ in range(args.rounds):
        for mode, tries in runs.items():
            tries.append(run(args.path, mode, args.depth, cpus))
    shas = {r["sha"] for rs in runs.values() for r in rs}
    print(f"{args.path.name}: {args.rounds} interleaved rounds on CPUs {sorted(cpus)}, load {os.getloadavg()[0]:.2f}")
    for mode, rs in runs.items():
        wall, cpu = [r["seconds"] for r in rs], [r["cpu"] for r in rs]
        print(
            f"  {mode:6s} wall best {min(wall):.2f} s median {statistics.median(wall):.2f} s; "
            f"CPU best {min(cpu):.2f} s median {statistics.median(cpu):.2f} s"
        )
    s, t = (statistics.median(r["seconds"] for r in runs[m]) for m in ("serial", "thread"))
    print(f"  thread / serial wall (medians): {t / s:.3f}x; summaries identical: {len(shas) == 1}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
