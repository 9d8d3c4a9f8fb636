"""The ranks of one job analysed in several processes, with one summary identical to the serial one.

``engine.analyze`` runs two phases: :func:`engine.analyse_files` parses the files and analyses each rank
as soon as its last file is parsed, then :func:`engine.assemble` builds the one summary. Ranks never share
state in the first phase (each is closed, merged and analysed from its own files), so this module cuts
the job into rank groups, runs the first phase of each group in worker processes (each takes the next
group, biggest first, from one queue), and hands the concatenated results, in the serial phase's order,
to the same assembler.

What makes the cut exact, and when it falls back to one process (``Report.serial_reason``):

* Ranks come from a header peek (``engine.predict_ranks``). A file whose rank the peek cannot tell is
  parsed first by the serial phase and joins rank 0 unless its trailing metadata names another rank: it
  is sent with rank 0's files, and the worker's result is used only if every file got the rank it was
  grouped by. Otherwise (a mispredicted rank) the job is analysed again in one process, so the summary is
  always the serial one.
* A job with one input, one rank, or ``jobs <= 1`` runs serially; so does a job with unknown-rank files
  next to negative ranks (the serial phase orders those before rank 0).
* A worker that fails (killed, out of memory, an exception) does not lose the job: the others are
  stopped and the job is analysed again in one process. An interrupted caller stops its workers.

Workers start by fork while the caller runs a single thread (they inherit the job: nothing is pickled on
the way in), else by forkserver. The CLI's progress bar runs no thread for this reason. Workers report the
input bytes they consume through a queue, so ``progress`` sees the same total as a serial run.
Each worker holds one rank at a time, so peak memory is about ``jobs`` times a serial run's.
Not for the Lambda (one job per invocation; no /dev/shm for multiprocessing there).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import resource
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import wait as mp_wait
from typing import Any

from profstack.analysis.allocator import tune_malloc
from profstack.analysis.engine import (
    Analysed,
    AnalysisResult,
    Entry,
    FileError,
    analyse_files,
    assemble,
    for_assembly,
    predict_ranks,
)
from profstack.analysis.engine import (
    analyze as analyze_serial,
)
from profstack.analysis.options import AnalysisOptions
from profstack.analysis.parse import FileData
from profstack.analysis.sources import TraceSource

Context = (
    multiprocessing.context.ForkContext
    | multiprocessing.context.ForkServerContext
    | multiprocessing.context.SpawnContext
)

PROGRESS_BYTES = 4 << 20  # a worker reports consumed input in steps of at least this many bytes
#: Below this much input (on disk) one process is as fast: starting workers costs ~15-25 ms by fork (a
#: 2-rank job, bench/README.md), ~0.5 s the first time by forkserver.
MIN_PARALLEL_BYTES = 32 << 20


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), the default of ``--jobs``."""
    count: Callable[[], int | None] | None = getattr(os, "process_cpu_count", None)  # Python 3.13+
    if count is not None:
        return max(1, count() or 1)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity masks
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class Report:
    """How a job ran: ``workers`` processes over ``groups`` rank groups, or serially and why; and where the time went
    (``timings``, seconds, parallel runs: ``peek`` the header peeks, ``fork`` starting the workers, ``worker_start``
    the longest from a worker's start call to its first group, ``analyse`` / ``analyse_cpu`` the longest group's wall
    and CPU time, ``analyse_cpu_sum`` all groups' CPU time, ``transfer`` the longest from a worker's send to its
    result unpickled here, ``result_bytes`` all results pickled, ``collect`` from the workers' start to the last
    result, ``assemble`` the summary; bench/scaling.py prints them)."""

    workers: int
    groups: int
    serial_reason: str | None = None
    timings: Mapping[str, float] = field(default_factory=dict, compare=False)


def plan_groups(
    predicted: Sequence[int | None], jobs: int, *, total_bytes: int = 0, min_bytes: int = 0
) -> tuple[list[list[int]], str | None]:
    """Input indices per rank group, in the serial phase's order (rank order; unknown-rank files first in
    rank 0's group), or ``([], why)`` when the job should run in one process."""
    if jobs < 2:
        return [], "one job requested"
    if len(predicted) < 2:
        return [], "one input"
    if total_bytes < min_bytes:
        return [], f"less than {min_bytes / 1e6:.0f} MB of input"
    unknown = [i for i, p in enumerate(predicted) if p is None]
    by_rank: dict[int, list[int]] = {}
    for i, p in enumerate(predicted):
        if p is not None:
            by_rank.setdefault(p, []).append(i)
    if unknown and any(r < 0 for r in by_rank):
        return [], "files of unknown rank next to negative ranks"
    if unknown:
        by_rank[0] = unknown + by_rank.get(0, [])
    if len(by_rank) < 2:
        return [], "every input belongs to one rank"
    return [by_rank[r] for r in sorted(by_rank)], None


# ------------------------------------------------------------------------------------------- worker side

_queue: Any = None  # the job's progress queue, set in each worker by _worker


@dataclass(frozen=True)
class _Job:
    """What every worker of one job gets (inherited by fork, pickled once per worker otherwise)."""

    sources: Sequence[TraceSource]
    opts: AnalysisOptions
    predicted: Sequence[int | None]
    groups: Sequence[Sequence[int]]


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _worker(job: _Job, tasks: Any, out: Any, queue: Any, cpu: int | None) -> None:
    """Analyse the groups taken from ``tasks`` until its ``None``, sending ``(k, Analysed | None, error, times)``
    for each on ``out`` (``times``: when it started, began and finished the group, its CPU seconds, when it sent:
    ``time.perf_counter``, one clock for every process). Imports nothing and pickles no arguments under fork: it
    starts in ~4 ms."""
    started = time.perf_counter()
    global _queue  # noqa: PLW0603 - one queue per worker process, set once at its start
    _queue = queue
    tune_malloc()  # inherited under fork; a spawned or forkserver worker sets it itself
    if cpu is not None:
        # one CPU per worker: left to itself the scheduler kept both workers of a 2-rank job on one of two
        # CPUs (each at ~50 %, no faster than one process); pinned, the job took 0.71-0.76x the serial time
        os.sched_setaffinity(0, {cpu})
    n = len(job.sources)
    while (k := tasks.get()) is not None:
        g = job.groups[k]
        begun, cpu0 = time.perf_counter(), _cpu_seconds()
        try:
            part = _analyse_group([job.sources[i] for i in g], job.opts, [job.predicted[i] for i in g], n)
        except Exception as exc:  # analyse_files records per-file failures; this is MemoryError and the like
            out.send((k, None, f"{type(exc).__name__}: {exc}", {}))
        else:
            done = time.perf_counter()
            times = {"started": started, "begun": begun, "done": done, "cpu": _cpu_seconds() - cpu0}
            times["sent"] = time.perf_counter()
            out.send((k, part, None, times))
    out.close()


SYS_CPU = "/sys/devices/system/cpu"  # Linux's CPU topology (read by _spread)


def _worker_cpus(workers: int) -> list[int | None]:
    """A distinct CPU per worker, one physical core each before any core's second hardware thread, or None each
    where affinity cannot be set or CPUs are too few."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - no affinity masks (macOS, Windows)
        return [None] * workers
    if len(allowed) < workers:
        return [None] * workers
    return list(_spread(allowed)[:workers])


def _spread(cpus: Sequence[int]) -> list[int]:
    """``cpus`` ordered so that the first ones are on distinct physical cores, alternating between packages: where
    Linux numbers a core's hardware threads side by side (0 and 1 one core), taking the first N in number order
    would put two workers on one core while other cores idle (each then runs at about 60 %). Number order where
    the topology cannot be read."""
    keys: dict[int, tuple[int, int]] = {}
    for cpu in cpus:
        try:
            base = f"{SYS_CPU}/cpu{cpu}/topology"
            with open(f"{base}/physical_package_id") as pkg_file, open(f"{base}/core_id") as core_file:
                keys[cpu] = (int(pkg_file.read()), int(core_file.read()))
        except (OSError, ValueError):
            return list(cpus)
    seen: dict[tuple[int, int], int] = {}  # (package, core) -> hardware threads of it placed so far
    cores_in: dict[int, list[int]] = {}  # package -> its cores, in first-seen order
    order: list[tuple[int, int, int, int]] = []
    for cpu in cpus:
        pkg, core = keys[cpu]
        thread = seen.get((pkg, core), 0)
        seen[(pkg, core)] = thread + 1
        cores = cores_in.setdefault(pkg, [])
        if core not in cores:
            cores.append(core)
        order.append((thread, cores.index(core), pkg, cpu))  # a core's first threads, cores across packages
    return [cpu for *_, cpu in sorted(order)]


def _analyse_group(
    sources: Sequence[TraceSource], opts: AnalysisOptions, predicted: Sequence[int | None], n_inputs: int
) -> Analysed:
    unreported = 0

    def progress(nbytes: int) -> None:
        nonlocal unreported
        unreported += nbytes
        if unreported >= PROGRESS_BYTES and _queue is not None:
            _queue.put(unreported)
            unreported = 0

    parts = analyse_files(sources, opts, predicted, progress, n_inputs=n_inputs)
    if unreported and _queue is not None:
        _queue.put(unreported)
    return for_assembly(parts)


# ------------------------------------------------------------------------------------------- main side


def _context() -> Context:
    """fork while this process runs one thread (a worker starts in ~4 ms, with the engine already imported);
    else forkserver (forking a process with threads can deadlock on a lock another thread held), whose first
    start costs ~0.5 s; spawn where neither exists."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["profstack.analysis.engine"])  # workers fork with the engine imported
        return ctx
    return multiprocessing.get_context("spawn")  # pragma: no cover - Windows


def _drain(queue: Any, progress: Callable[[int], None] | None) -> None:
    while not queue.empty():
        nbytes = queue.get()
        if progress is not None:
            progress(nbytes)


def _run_workers(
    job: _Job, workers: int, progress: Callable[[int], None] | None, timings: dict[str, float]
) -> tuple[dict[int, Analysed], str | None]:
    """Every group of ``job`` analysed by ``workers`` processes taking groups from one queue (biggest first,
    so they end together): the results by group, or a failure (a worker died or raised) to redo serially.

    Plain processes, not a ``ProcessPoolExecutor``: under fork the job is inherited rather than pickled,
    there is no manager thread, and the caller does not wait for the workers to exit (``multiprocessing``
    reaps them at its next start or at exit). With the header peek reading only up to ``traceEvents``, this
    cut the time before the workers start and after they finish (bench/README.md)."""
    ctx = _context()
    queue, tasks = ctx.SimpleQueue(), ctx.SimpleQueue()
    sizes = [sum(job.sources[i].size_hint or 0 for i in g) for g in job.groups]
    for k in sorted(range(len(job.groups)), key=lambda k: -sizes[k]):
        tasks.put(k)
    for _ in range(workers):
        tasks.put(None)
    procs: list[tuple[Any, Any]] = []  # (process, the read end of its results pipe)
    results: dict[int, Analysed] = {}
    failure: str | None = None
    forked = time.perf_counter()
    try:
        for cpu in _worker_cpus(workers):
            reader, writer = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_worker, args=(job, tasks, writer, queue, cpu), daemon=True)
            proc.start()
            writer.close()  # the worker holds the only write end: its exit is the reader's EOF
            procs.append((proc, reader))
        timings["fork"] = time.perf_counter() - forked
        failure = _collect(procs, queue, progress, results, timings=timings, forked=forked)
        if failure is None and len(results) < len(job.groups):
            codes = sorted({p.exitcode for p, _ in procs if p.exitcode})
            failure = f"a worker failed (exit code {', '.join(map(str, codes)) or 'unknown'})"
    finally:
        if failure is not None or len(results) < len(job.groups):  # failed or interrupted: stop the rest
            _stop([p for p, _ in procs])
        for _, reader in procs:
            reader.close()
    _drain(queue, progress)
    return results, failure


def _collect(
    procs: list[tuple[Any, Any]],
    queue: Any,
    progress: Callable[[int], None] | None,
    results: dict[int, Analysed],
    *,
    timings: dict[str, float],
    forked: float,
) -> str | None:
    """Receive the workers' results into ``results`` until every worker has exited or one reports a
    failure (returned); what each took into ``timings`` (``Report``)."""
    live = list(procs)
    for key in ("worker_start", "analyse", "analyse_cpu", "analyse_cpu_sum", "transfer", "result_bytes"):
        timings[key] = 0.0
    while live:
        mp_wait([r for _, r in live], timeout=0.2)
        _drain(queue, progress)
        for entry in list(live):
            reader = entry[1]
            try:
                while reader.poll():
                    data = reader.recv_bytes()
                    k, part, error, times = pickle.loads(data)  # noqa: S301 - from our own worker process
                    if error is not None:
                        return f"a worker failed ({error})"
                    results[k] = part
                    _account(timings, times, len(data), forked)
            except EOFError:  # the worker exited: normally after its last group, else killed
                live.remove(entry)
    timings["collect"] = time.perf_counter() - forked
    return None


def _account(timings: dict[str, float], times: Mapping[str, float], nbytes: int, forked: float) -> None:
    """One group's result received: its times into the job's (``Report.timings``)."""
    now = time.perf_counter()
    timings["worker_start"] = max(timings["worker_start"], times["started"] - forked)
    timings["analyse"] = max(timings["analyse"], times["done"] - times["begun"])
    timings["analyse_cpu"] = max(timings["analyse_cpu"], times["cpu"])
    timings["analyse_cpu_sum"] += times["cpu"]
    timings["transfer"] = max(timings["transfer"], now - times["sent"])
    timings["result_bytes"] += nbytes


def _stop(procs: list[Any]) -> None:
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join()


def _rank_as_grouped(f: FileData | None, predicted: int | None) -> bool:
    return f is None or f.rank == (predicted if predicted is not None else 0)


def analyze_with_report(
    sources: Sequence[TraceSource],
    options: AnalysisOptions | None = None,
    progress: Callable[[int], None] | None = None,
    *,
    jobs: int | None = None,
    min_bytes: int | None = None,
) -> tuple[AnalysisResult, Report]:
    """``engine.analyze`` with the ranks spread over ``jobs`` processes (default: the CPUs available), for
    jobs of at least ``min_bytes`` of input (default ``MIN_PARALLEL_BYTES``)."""
    opts = options if options is not None else AnalysisOptions()
    min_bytes = MIN_PARALLEL_BYTES if min_bytes is None else min_bytes
    want = available_cpus() if jobs is None else jobs
    n = len(sources)
    t0 = time.perf_counter()
    predicted = predict_ranks(sources, opts)  # the serial phase needs them too
    timings: dict[str, float] = {"peek": time.perf_counter() - t0}
    total = sum(s.size_hint or 0 for s in sources)
    groups, why = plan_groups(predicted, want, total_bytes=total, min_bytes=min_bytes)
    if why is not None:
        parts = analyse_files(sources, opts, predicted, progress, n_inputs=n)
        return assemble(parts, opts), Report(1, 1, why)
    workers = min(want, len(groups))
    results, failure = _run_workers(_Job(sources, opts, predicted, groups), workers, progress, timings)
    if failure is None:
        mispredicted = [
            k
            for k, g in enumerate(groups)
            if not all(_rank_as_grouped(f, predicted[i]) for i, f in zip(g, results[k].files, strict=True))
        ]
        if mispredicted:
            failure = "a file's rank differs from its header peek"
    if failure is not None:
        # exact but slower: the serial phase decides which files merge (progress has reported the bytes once)
        return analyze_serial(sources, opts), Report(1, len(groups), failure)
    files: list[FileData | None] = [None] * n
    errors: list[FileError] = []
    warnings: list[FileError] = []
    entries: list[Entry] = []
    for k, g in enumerate(groups):
        part = results[k]
        for i, f in zip(g, part.files, strict=True):
            files[i] = f
        errors.extend(part.errors)
        warnings.extend(part.warnings)
        entries.extend(part.entries)
    assembled = time.perf_counter()
    result = assemble(Analysed(files, errors, warnings, entries), opts)
    timings["assemble"] = time.perf_counter() - assembled
    return result, Report(workers, len(groups), timings=timings)


def analyze(
    sources: Sequence[TraceSource],
    options: AnalysisOptions | None = None,
    progress: Callable[[int], None] | None = None,
    *,
    jobs: int | None = None,
    min_bytes: int | None = None,
) -> AnalysisResult:
    """``engine.analyze`` in ``jobs`` processes (default: the CPUs available); the same summary."""
    return analyze_with_report(sources, options, progress, jobs=jobs, min_bytes=min_bytes)[0]
