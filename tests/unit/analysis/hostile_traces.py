"""Hostile Kineto traces written on the fly with a streaming gzip writer (never held in memory), and a
child process that analyses one and reports its peak RSS (VmHWM; resource.getrusage's ru_maxrss alongside)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO_ROOT

_HEAD = b'{"schemaVersion": 1, "traceEvents": [\n'
_STEP = b'{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 100000000}'


def _kernel(name: bytes, ts: int, corr: int) -> bytes:
    return (
        b'{"ph": "X", "cat": "kernel", "name": "' + name + b'", "ts": %d, "dur": 3, '
        b'"args": {"stream": 7, "correlation": %d, "device": 0}}' % (ts, corr)
    )


def _launch(ts: int, corr: int) -> bytes:
    return b'{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": %d, "dur": 1, ' % ts + (
        b'"args": {"correlation": %d}}' % corr
    )


def distinct_kernel_names(path: Path, count: int) -> Path:
    """`count` kernels, each with its own name (`hostile_kernel_<i>`), each launched once."""
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(_HEAD + _STEP)
        batch: list[bytes] = []
        for i in range(count):
            ts = 10 + 5 * i
            batch.append(_launch(ts, i + 1))
            batch.append(_kernel(b"hostile_kernel_%d" % i, ts + 2, i + 1))
            if len(batch) >= 20_000:
                out.write(b",\n" + b",\n".join(batch))
                batch.clear()
        if batch:
            out.write(b",\n" + b",\n".join(batch))
        out.write(b"\n]}\n")
    return path


def one_huge_name(path: Path, name_bytes: int, *, after: int = 1000) -> Path:
    """A few normal kernels, one kernel whose name is `name_bytes` long (written in 1 MiB pieces), then
    `after` more normal kernels: the events after the huge one must still count."""
    piece = b"A" * (1 << 20)
    with gzip.open(path, "wb", compresslevel=6) as out:
        out.write(_HEAD + _STEP)
        for i in range(10):
            out.write(b",\n" + _launch(10 + 5 * i, i + 1) + b",\n" + _kernel(b"before", 12 + 5 * i, i + 1))
        out.write(b',\n{"ph": "X", "cat": "kernel", "name": "huge_')
        left = name_bytes
        while left > 0:
            out.write(piece[: min(left, len(piece))])
            left -= len(piece)
        out.write(b'", "ts": 100, "dur": 3, "args": {"stream": 7, "correlation": 999999, "device": 0}}')
        for i in range(after):
            ts = 200 + 5 * i
            out.write(b",\n" + _launch(ts, 1000 + i) + b",\n" + _kernel(b"after", ts + 2, 1000 + i))
        out.write(b"\n]}\n")
    return path


_CHILD = """
import json, resource, sys, time
from profstack.analysis import FileTraceSource, analyze
started = time.monotonic()
result = analyze([FileTraceSource(sys.argv[1])])
elapsed = time.monotonic() - started
summary = json.dumps(result.summary).encode()
from profstack.report import render_html
report = render_html(result.summary).encode()
# the pipeline's second pass: the trimmed Perfetto timeline of the same file
import tempfile
from profstack.analysis import trim_trace
with tempfile.TemporaryFile() as out:
    trim_trace(FileTraceSource(sys.argv[1]), out, steps=None, max_events=1_000_000, compress=True)
    timeline_bytes = out.tell()
# VmHWM is this process's own high-water mark; ru_maxrss also carries the parent's (Linux keeps it across
# exec), which inside a big pytest process can exceed what the analysis used
hwm_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({
    "peak_rss_mb": hwm_kb / 1024,
    "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "seconds": elapsed,
    "summary_bytes": len(summary),
    "report_bytes": len(report),
    "timeline_bytes": timeline_bytes,
    "summary": result.summary,
}))
"""


def analyse_in_child(path: Path, *, timeout_s: float = 120) -> dict[str, Any]:
    """Analyse `path` in a fresh interpreter; its peak RSS is the analysis's (plus the interpreter's)."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


if __name__ == "__main__":  # python -m tests.unit.analysis.hostile_traces names|huge N OUT
    kind, n, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    (distinct_kernel_names if kind == "names" else one_huge_name)(out, n)
    found = analyse_in_child(out, timeout_s=1200)
    found.pop("summary")
    print(json.dumps(found))
