"""One measurement, run in a fresh child process by `bench.run`.

    python -m bench.workers {profstack,profstack-no-op-types,profstack-zlib,profstack-heap,decode,inflate-isal,
                             inflate-zlib,cli,processing,hta,msgspec} PATH
    python -m bench.workers {profstack-jobs1,profstack-jobs2} DIR

``profstack`` is ``analyze()`` with its default options, from whichever profstack the interpreter imports: bench.run
starts it from the checkout, from an installed wheel and from the Lambda bundle (its ``profstack_file`` and
``engine`` say which). ``cli`` / ``processing`` run the ``profstack analyze`` command in-process (``--format json``,
and the Processing job's ``--format json,perfetto``), its modules imported before the clock starts.

``hta`` runs whichever HTA the interpreter has (bench.run starts it from the HTA 0.5.0 or 0.6.1 venv), so this
module imports nothing but the standard library at the top.

Prints one JSON line: {"seconds": work time excluding interpreter start and imports, ...}. The
parent reads peak RSS from the child's rusage (os.wait4), so the imports count towards memory
but not towards time.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_msgspec(path: Path) -> dict[str, Any]:
    """The floor: read (and gunzip) the whole file and decode it into typed structs.

    The cyclic GC is off during the decode: millions of fresh `args` dicts would otherwise trigger
    ever longer collections, and the floor should be the best a plain decode can do. The gunzip is zlib's
    (``gzip.decompress``): the floor is what plain Python does with the file.
    """
    import msgspec

    from bench.floor_types import Trace

    decoder = msgspec.json.Decoder(Trace)
    gc.disable()
    start, cpu = time.perf_counter(), _cpu_seconds()
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    trace = decoder.decode(data)
    seconds = time.perf_counter() - start
    cpu = _cpu_seconds() - cpu
    gc.enable()
    return {"seconds": seconds, "cpu_seconds": cpu, "events": len(trace.traceEvents)}


def _use_inflater(name: str) -> None:
    from profstack.analysis import reader

    reader.INFLATER = reader.ZLIB if name == "zlib" else reader._best_inflater()
    if reader.INFLATER.name != name:
        raise SystemExit(f"inflate backend {name} is not available (got {reader.INFLATER.name})")


def run_inflate(path: Path, backend: str) -> dict[str, Any]:
    """Only ProfStack's reader: read and inflate the whole file in its 4 MB steps, keeping nothing."""
    from profstack.analysis import reader

    _use_inflater(backend)
    start, cpu = time.perf_counter(), _cpu_seconds()
    total = 0
    with path.open("rb") as fh:
        for chunk in reader.iter_chunks(fh, max_decompressed=1 << 40):
            total += len(chunk)
    return {"seconds": time.perf_counter() - start, "cpu_seconds": _cpu_seconds() - cpu, "bytes": total}


def run_decode(path: Path) -> dict[str, Any]:
    """ProfStack's reading without its column work and analysis: read, inflate, cut into batches, then each fast
    batch read by the C reader straight into the per-event loop (``_gpuaccel.decode_consume``, where built: it has
    no separate decode), else (and for the batches it declines) msgspec's typed decode into ``parse.Event``."""
    from array import array

    from profstack.analysis import AnalysisOptions, native, reader
    from profstack.analysis.jsonstream import EventStream
    from profstack.analysis.parse import _LIST_DECODER, BATCH_BYTES, FileData, SymbolTable, new_parser

    c_reader = getattr(native.ACCEL, "decode_consume", None)
    start, cpu = time.perf_counter(), _cpu_seconds()
    events = taken = 0
    parser = new_parser(FileData(name=path.name, size_bytes=None), SymbolTable(), AnalysisOptions(), bounded=True)
    with path.open("rb") as fh:
        stream = EventStream(
            reader.iter_chunks(fh, max_decompressed=1 << 40), max_value_bytes=64 << 20, read_size_hint=BATCH_BYTES
        )
        for batch in stream.batches():
            if isinstance(batch, memoryview) and c_reader is not None:
                r = c_reader(parser, batch, array("q"), array("d"), array("d"), array("d"))
                if r is not NotImplemented:  # it counted the batch's events in parser.fd.events
                    taken += 1
                    continue
            events += len(
                _LIST_DECODER.decode(batch if isinstance(batch, memoryview) else b"[" + b",".join(batch) + b"]")
            )
    reset = getattr(native.ACCEL, "reader_reset", None)
    if reset is not None:
        reset()
    return {
        "seconds": time.perf_counter() - start,
        "cpu_seconds": _cpu_seconds() - cpu,
        "events": events + parser.fd.events,
        "reader": "c" if c_reader is not None else "msgspec",
        "reader_batches": taken,
    }


def run_profstack(path: Path, jobs: int | None = None, *, op_types: bool = True) -> dict[str, Any]:
    """``analyze()`` with its default options (``op_types=False``: the --no-op-types configuration)."""
    import profstack
    from profstack.analysis import AnalysisOptions, analyze, discover_sources, native, reader
    from profstack.analysis.allocator import tune_malloc

    tune_malloc()  # as the CLI, the Lambda handler and the --jobs workers do
    options = AnalysisOptions() if op_types else AnalysisOptions(op_types=False)
    start, cpu = time.perf_counter(), _cpu_seconds()
    sources = discover_sources([path])
    extra: dict[str, Any] = {
        "inflate": reader.INFLATER.name,
        "engine": native.describe(),
        "profstack_file": profstack.__file__,
    }
    if jobs is None:
        result = analyze(sources, options)
    else:  # (the Lambda bundle has no parallel module: it runs one job per invocation)
        from profstack.analysis.parallel import analyze_with_report

        result, report = analyze_with_report(sources, options, jobs=jobs)
        extra.update(workers=report.workers, serial_reason=report.serial_reason)
    seconds = time.perf_counter() - start
    summary = result.summary
    return {
        **extra,
        "cpu_seconds": _cpu_seconds() - cpu,
        "summary_sha": __import__("hashlib").sha256(json.dumps(summary).encode()).hexdigest()[:16],
        "seconds": seconds,
        "complete": bool(result.complete),
        "ranks": len(summary.get("ranks", [])),
        "gpu_analysis": sorted({r["gpu_analysis"]["mode"] for r in summary.get("ranks", [])}),
    }


def run_cli(path: Path, formats: str) -> dict[str, Any]:
    """``profstack analyze PATH --out TMP --format FORMATS``, as the Processing job runs it (its command line:
    stacks/components/fanout_workflow.PROCESSING_COMMAND), in this process: its modules imported first, as every
    other tool's are; what the command's imports take (its parser imports every sub-command) is ``import_seconds``."""
    import tempfile

    started = time.perf_counter()
    import profstack.analysis
    import profstack.analysis.trim
    import profstack.cli.analyze
    import profstack.report  # noqa: F401 - imported before the clock, as every other tool's modules
    from profstack.analysis import native
    from profstack.cli import build_parser, main

    build_parser()  # the sub-commands' modules
    imported = time.perf_counter() - started

    with tempfile.TemporaryDirectory() as out:
        start, cpu = time.perf_counter(), _cpu_seconds()
        with contextlib.redirect_stdout(sys.stderr):
            rc = main(["analyze", str(path), "--out", out, "--format", formats])
        seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
        written = sorted(p.name for p in Path(out).iterdir())
        summary = (Path(out) / "summary.json").read_bytes()
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "exit_code": rc,
        "import_seconds": round(imported, 3),
        "written": written,
        "engine": native.describe(),
        "summary_sha": __import__("hashlib").sha256(summary).hexdigest()[:16],
    }


def run_profstack_heap(path: Path) -> dict[str, Any]:
    """ProfStack under tracemalloc (slower, not timed for the table): the peak of the Python heap.

    Unlike RSS, this excludes memory the allocator keeps from earlier peaks and the interpreter's own
    footprint, so it shows whether the engine's live state grows with the trace."""
    import tracemalloc

    from profstack.analysis import AnalysisOptions, analyze, discover_sources
    from profstack.analysis.allocator import tune_malloc

    tune_malloc()
    tracemalloc.start()
    start = time.perf_counter()
    analyze(discover_sources([path]), AnalysisOptions())
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"seconds": seconds, "heap_peak_mb": round(peak / 1e6, 1)}


def run_hta(path: Path) -> dict[str, Any]:
    """HTA (0.5.0 or 0.6.1, whichever this interpreter has) loads a directory (one file per rank), then
    temporal + kernel breakdown."""
    import logging

    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    start, cpu = time.perf_counter(), _cpu_seconds()
    analysis = TraceAnalysis(trace_dir=str(path.parent))
    loaded = time.perf_counter()
    temporal = analysis.get_temporal_breakdown(visualize=False)
    analysis.get_gpu_kernel_breakdown(visualize=False)
    seconds = time.perf_counter() - start
    cpu = _cpu_seconds() - cpu
    from importlib import metadata

    versions = {}
    for dist in ("HolisticTraceAnalysis", "traceinsight"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "load_seconds": loaded - start,
        "idle_pct": float(temporal["idle_time_pctg"].iloc[0]),
        "versions": versions,
    }


def run_profstack_zlib(path: Path) -> dict[str, Any]:
    _use_inflater("zlib")
    return run_profstack(path)


RUNNERS = {
    "msgspec": run_msgspec,
    "profstack": run_profstack,
    "profstack-no-op-types": lambda p: run_profstack(p, op_types=False),
    "cli": lambda p: run_cli(p, "json"),
    "processing": lambda p: run_cli(p, "json,perfetto"),
    "profstack-zlib": run_profstack_zlib,
    "profstack-heap": run_profstack_heap,
    "profstack-jobs1": lambda p: run_profstack(p, jobs=1),
    "profstack-jobs2": lambda p: run_profstack(p, jobs=2),
    "decode": run_decode,
    "inflate-isal": lambda p: run_inflate(p, "isal"),
    "inflate-zlib": lambda p: run_inflate(p, "zlib"),
    "hta": run_hta,
}


def _vm_hwm_mb() -> float | None:
    """This process's own peak RSS (VmHWM): unlike ru_maxrss, which keeps the high-water mark of the parent's
    pages that the fork before exec copied (a 120 MB bench parent made a 40 MB ProfStack child read 106 MB)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def main(argv: list[str]) -> int:
    tool, path = argv[0], Path(argv[1])
    os.environ.pop("PROFSTACK_INFLATE", None)
    result = RUNNERS[tool](path)
    result["vm_hwm_mb"] = _vm_hwm_mb()
    sys.stdout.write("BENCH-RESULT " + json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
