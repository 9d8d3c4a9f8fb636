"""`profstack analyze --jobs N`: ranks in N processes, one summary byte-for-byte the serial one."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import BinaryIO

import pytest

from profstack.analysis import AnalysisOptions, FileTraceSource, TraceSource, analyze, discover_sources, parallel
from profstack.cli import main
from tests.conftest import TRACES_DIR

TWO_RANKS = TRACES_DIR / "hta" / "trace_filter"


def summary_bytes(result: object) -> bytes:
    return json.dumps(result.summary, indent=2, allow_nan=False).encode()  # type: ignore[attr-defined]


def serial_and_parallel(sources: list[TraceSource], jobs: int = 2) -> tuple[bytes, bytes, parallel.Report, int]:
    seen: list[int] = []
    result, report = parallel.analyze_with_report(sources, None, seen.append, jobs=jobs, min_bytes=0)
    return summary_bytes(analyze(sources)), summary_bytes(result), report, sum(seen)


def test_two_ranks_in_two_processes_give_the_serial_summary() -> None:
    # GIVEN the two-rank sample WHEN analysed in 2 processes
    sources = discover_sources([TWO_RANKS])
    serial, par, report, progressed = serial_and_parallel(sources)
    # THEN it ran in 2 processes, the summary JSON is byte-for-byte the serial one
    assert report == parallel.Report(workers=2, groups=2)
    assert par == serial
    # AND progress saw every input byte once, aggregated from the workers
    assert progressed == sum(s.size_hint or 0 for s in sources)


def test_the_whole_sample_folder_in_processes_gives_the_serial_summary() -> None:
    # GIVEN every sample trace (ranks 0, 1, 2, 3 and 34, files of unknown rank, merged cycles, files that fail, a
    # file of another format that is left out, XSpaces expanded into a rank per device)
    sources = discover_sources([TRACES_DIR])
    # WHEN analysed in 2 and in 3 processes THEN both summaries are the serial one, byte for byte
    serial, par, report, progressed = serial_and_parallel(sources)
    assert report == parallel.Report(workers=2, groups=5)
    assert par == serial
    assert progressed == sum(s.size_hint or 0 for s in sources)
    result, report3 = parallel.analyze_with_report(sources, None, jobs=3, min_bytes=0)
    assert report3.workers == 3
    assert summary_bytes(result) == serial


def _late_rank_trace(path: Path, rank: int) -> Path:
    """A real trace whose distributedInfo comes after traceEvents (the header peek cannot see it)."""
    src = TWO_RANKS / "sampled_rank-1.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc.pop("distributedInfo", None)
    events = doc.pop("traceEvents")
    doc["traceEvents"] = events
    doc["distributedInfo"] = {"rank": rank, "world_size": 2, "backend": "nccl"}
    path.write_text(json.dumps(doc))
    return path


def test_a_rank_the_peek_got_wrong_falls_back_to_the_serial_answer(tmp_path: Path) -> None:
    # GIVEN a file named rank-1 whose trailing distributedInfo says rank 0, next to a rank-0 file
    (tmp_path / "rank-0.json.gz").write_bytes((TWO_RANKS / "sampled_rank-0.json.gz").read_bytes())
    _late_rank_trace(tmp_path / "rank-1.json", rank=0)
    sources = discover_sources([tmp_path])
    # WHEN analysed in processes THEN the mismatch is noticed and the job is redone in one process
    serial, par, report, _ = serial_and_parallel(sources)
    assert report.serial_reason == "a file's rank differs from its header peek"
    assert par == serial
    assert [r["rank"] for r in json.loads(par)["ranks"]] == [0, 0]  # both files are rank 0, as serially


def test_a_file_of_unknown_rank_is_analysed_with_rank_0(tmp_path: Path) -> None:
    # GIVEN a file without a rank in its name or header (the serial pass gives it rank 0), and ranks 0 and 1
    for name in ("sampled_rank-0.json.gz", "sampled_rank-1.json.gz"):
        (tmp_path / name).write_bytes((TWO_RANKS / name).read_bytes())
    (tmp_path / "trace.json.gz").write_bytes(
        (TRACES_DIR / "hta" / "triton_example" / "triton_example.json.gz").read_bytes()
    )
    sources = discover_sources([tmp_path])
    # WHEN analysed in processes THEN in parallel, and the serial summary
    serial, par, report, _ = serial_and_parallel(sources)
    assert report.serial_reason is None
    assert par == serial


class DiesInWorkers:
    """A trace source that kills any process but the one that made it (a worker killed by the OOM killer)."""

    def __init__(self, path: Path) -> None:
        self.inner = FileTraceSource(path)
        self.name = self.inner.name
        self.size_hint = self.inner.size_hint
        self.owner = os.getpid()

    def open(self) -> BinaryIO:
        if os.getpid() != self.owner:
            os._exit(9)
        return self.inner.open()


def test_a_worker_that_dies_loses_nothing() -> None:
    # GIVEN rank 1's file kills the worker that reads it
    sources: list[TraceSource] = [
        FileTraceSource(TWO_RANKS / "sampled_rank-0.json.gz"),
        DiesInWorkers(TWO_RANKS / "sampled_rank-1.json.gz"),
    ]
    # WHEN analysed in processes THEN the job is redone in one process: the serial summary, and it says why
    serial, par, report, _ = serial_and_parallel(sources)
    assert report.serial_reason is not None
    assert report.serial_reason.startswith("a worker failed")
    assert par == serial


@pytest.mark.parametrize(
    ("predicted", "jobs", "groups", "why"),
    [
        ([0, 1], 1, [], "one job requested"),
        ([None], 4, [], "one input"),
        ([3, 3, 3], 4, [], "every input belongs to one rank"),
        ([None, -1, 0], 4, [], "files of unknown rank next to negative ranks"),
        ([1, None, 0, 1, None], 4, [[1, 4, 2], [0, 3]], None),
        ([2, 0, 1], 2, [[1], [2], [0]], None),
    ],
)
def test_rank_groups_follow_the_serial_order(
    predicted: list[int | None], jobs: int, groups: list[list[int]], why: str | None
) -> None:
    # GIVEN predicted ranks WHEN planned THEN groups in rank order, unknown-rank files first in rank 0's
    assert parallel.plan_groups(predicted, jobs) == (groups, why)


def test_small_jobs_stay_in_one_process() -> None:
    # GIVEN less input than the pool's start-up is worth WHEN planned THEN one process
    assert parallel.plan_groups([0, 1], 2, total_bytes=1000, min_bytes=1 << 20) == ([], "less than 1 MB of input")


def test_available_cpus_is_the_affinity_mask() -> None:
    assert parallel.available_cpus() == len(os.sched_getaffinity(0))


def test_cli_jobs_writes_the_same_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the two-rank sample (and no size floor, so the CLI really uses 2 processes)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_BYTES", 0)
    used: list[parallel.Report] = []
    real = parallel.analyze_with_report

    def spy(*args: object, **kwargs: object) -> tuple[object, parallel.Report]:
        result, report = real(*args, **kwargs)  # type: ignore[arg-type]
        used.append(report)
        return result, report

    monkeypatch.setattr(parallel, "analyze_with_report", spy)
    # WHEN `profstack analyze --jobs 2` and `--jobs 1` write summary.json
    for jobs in ("1", "2"):
        assert main(["analyze", str(TWO_RANKS), "--out", str(tmp_path / jobs), "--format", "json", "--jobs", jobs]) == 0
    # THEN the same bytes, and the --jobs 2 run used 2 processes
    assert (tmp_path / "1" / "summary.json").read_bytes() == (tmp_path / "2" / "summary.json").read_bytes()
    assert used == [parallel.Report(workers=2, groups=2)]


def test_cli_rejects_zero_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(TWO_RANKS), "--out", str(tmp_path), "--jobs", "0"]) == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err


def test_options_reach_the_workers() -> None:
    # GIVEN non-default options WHEN analysed in processes THEN the workers used them (same as serial)
    sources = discover_sources([TWO_RANKS])
    opts = AnalysisOptions(top_k=2, include_last_step=True)
    result = parallel.analyze(sources, opts, jobs=2, min_bytes=0)
    assert summary_bytes(result) == summary_bytes(analyze(sources, opts))
    assert all(len(r["top_kernels_by_time"]) <= 2 for r in result.summary["ranks"])


@pytest.mark.parametrize(("threads", "method"), [(1, "fork"), (2, "forkserver")])
def test_workers_start_by_fork_only_while_one_thread_runs(
    threads: int, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the caller runs one thread (fork is safe and fast) or more (fork could copy a held lock)
    monkeypatch.setattr(parallel.threading, "active_count", lambda: threads)
    assert parallel._context().get_start_method() == method
    # WHEN analysed that way THEN the serial summary
    sources = discover_sources([TWO_RANKS])
    serial, par, report, _ = serial_and_parallel(sources)
    assert report.workers == 2
    assert par == serial


def test_a_worker_that_raises_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN analysing a group raises in the workers (MemoryError; fork inherits the patch) but not here
    owner, real = os.getpid(), parallel._analyse_group

    def raises(*args: object, **kwargs: object) -> object:
        if os.getpid() != owner:
            raise MemoryError("no room for rank 1")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(parallel, "_analyse_group", raises)
    monkeypatch.setattr(parallel.threading, "active_count", lambda: 1)  # fork (pytest-xdist runs threads)
    sources = discover_sources([TWO_RANKS])
    # WHEN analysed in processes THEN the serial summary, and the reason names the error
    serial, par, report, _ = serial_and_parallel(sources)
    assert report.serial_reason == "a worker failed (MemoryError: no room for rank 1)"
    assert par == serial


def test_an_interrupted_caller_stops_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the caller is interrupted (Ctrl-C) while its workers run
    import multiprocessing
    import time

    def interrupt(queue: object, progress: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(parallel, "_drain", interrupt)
    sources = discover_sources([TWO_RANKS])
    # WHEN analysed in processes THEN the interrupt reaches the caller
    with pytest.raises(KeyboardInterrupt):
        parallel.analyze(sources, jobs=2, min_bytes=0)
    # AND no worker is left running
    deadline = time.monotonic() + 10
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert multiprocessing.active_children() == []
