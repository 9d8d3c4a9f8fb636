"""What names crafted to collide in the reader's string cache cost now (issue #33, hostile input).

    python -m bench.crafted_names [--names 200000] [--repeat 3]

One trace of ``--names`` kernels, each with its own 40-byte name (the crafted-name attack's shape: many distinct
names of one length), analysed in this process, CPU time best of ``--repeat``:

* **random names**: the keyed hash as deployed;
* **every name colliding**: ``_gpuaccel._test_degenerate_hash(True)`` makes every name hash alike, what an
  attacker who knew the hash would achieve (with the per-process key, they cannot know it). The probe cap (48)
  then declines the batch to msgspec instead of walking the whole chain;
* **Python loop**: ``native.ACCEL`` off, the reference.

Before the fix (fixed, unkeyed hash, no cap) the issue measured 187 s of CPU for a 100 MB crafted trace against
2.9 s for random names (64x). The ratio printed here is the one the issue bounds: "a few times random ones".
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from profstack.analysis import native
from profstack.analysis.engine import analyze
from profstack.analysis.options import AnalysisOptions
from profstack.analysis.sources import BytesTraceSource


def crafted_trace(count: int) -> bytes:
    head = b'{"schemaVersion": 1, "traceEvents": [\n'
    head += b'{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 100000000}'
    events = []
    for i in range(count):
        ts = 10 + 5 * i
        name = b"crafted_kernel_%025d" % i  # 40 bytes, all distinct
        events.append(
            b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": %d, "dur": 1, '
            b'"args": {"correlation": %d}}' % (ts, i + 1)
        )
        events.append(
            b'{"ph": "X", "cat": "kernel", "name": "' + name + b'", "ts": %d, "dur": 3, '
            b'"args": {"stream": 7, "correlation": %d, "device": 0}}' % (ts + 2, i + 1)
        )
    return head + b",\n" + b",\n".join(events) + b"\n]}\n"


def cpu_seconds(data: bytes, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        analyze([BytesTraceSource(data, name="crafted.json")], AnalysisOptions())
        best = min(best, time.process_time() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    accel = native.ACCEL
    if accel is None:
        raise SystemExit("crafted_names: the C engine is not built (make install)")
    data = crafted_trace(args.names)
    rows: dict[str, float] = {}
    rows["random names (keyed hash)"] = cpu_seconds(data, args.repeat)
    accel._test_degenerate_hash(True)
    try:
        rows["every name colliding (probe cap)"] = cpu_seconds(data, args.repeat)
        stats = accel._cache_stats()
    finally:
        accel._test_degenerate_hash(False)
    native.ACCEL = None
    try:
        rows["Python loop"] = cpu_seconds(data, args.repeat)
    finally:
        native.ACCEL = accel
    mb = len(data) / 1e6
    print(f"{args.names} distinct 40-byte names, {mb:.1f} MB of JSON; CPU s, best of {args.repeat}")
    for name, seconds in rows.items():
        ratio = seconds / rows["random names (keyed hash)"]
        print(f"  {name:34s} {seconds:7.2f} s  {mb / seconds:6.1f} MB/s  {ratio:4.2f}x random")
    print(f"  cache: longest probe {stats['max_probe']} (cap {stats['max_probes']}), {stats['declined']} declined")
    if args.out:
        args.out.write_text(json.dumps({"mb": mb, "seconds": rows, "cache": stats}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
