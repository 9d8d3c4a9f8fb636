"""The bench runner's tables and its 2-rank job: ratios from the measured cells, ranks set in the header."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import run
from bench.generate import DEFAULT_SOURCE, MB


def cell(
    tool: str, mb_s: float | None, *, fmt: str = "json", cpu_mb_s: float | None = None, **extra: object
) -> run.Measurement:
    m = run.Measurement(tool, 100, fmt, "f", 100 * MB, "ok" if mb_s else "timeout")
    if mb_s:
        m.mb_per_s, m.seconds = mb_s, 100 / mb_s
        m.extra = {"best_cpu_seconds": 100 / (cpu_mb_s or mb_s), "cpu_mb_per_s": cpu_mb_s or mb_s, **extra}
    else:
        m.wall_seconds, m.detail = 900.0, "did not finish within 900 s"
    m.peak_rss_mb = 50.0
    return m


def test_the_table_has_ratios_against_the_floor_and_both_htas() -> None:
    # GIVEN ProfStack at 200 MB/s, the floor at 160 (CPU time: 250 vs 125), HTA 0.5.0 at 10, HTA 0.6.1 unfinished
    results = [
        cell("profstack", 200.0, cpu_mb_s=250.0),
        cell("msgspec", 160.0, cpu_mb_s=125.0),
        cell("hta", 10.0),
        cell("hta061", None),
    ]
    # WHEN tabulated THEN the row carries each ratio
    row = run.markdown_table(results).splitlines()[2]
    assert "| 1.25× | 2.00× | 20.00× |" in row
    assert "> 1800.0× (unfinished)" in row  # 200 MB/s × 900 s / 100 MB


def test_the_breakdown_splits_cpu_time_per_mb() -> None:
    # GIVEN a .json.gz cell: inflate 1 ms/MB (ISA-L), decode incl. inflate 4 ms/MB, ProfStack 10 ms/MB
    results = [
        cell("inflate-isal", 1000.0, fmt="gz"),
        cell("inflate-zlib", 500.0, fmt="gz"),
        cell("decode", 250.0, fmt="gz"),
        cell("profstack", 100.0, fmt="gz"),
        cell("msgspec", 125.0, fmt="gz"),
    ]
    # WHEN tabulated THEN inflate 1, decode 3 (after inflate), analysis 6, totals 10 and 8
    row = run.breakdown_table(results).splitlines()[2]
    assert row == "| 100 MB | .json.gz | 2.00 | 1.00 | 3.00 | 6.00 | 10.00 | 8.00 |"


def test_the_parallel_table_compares_wall_time_and_summaries() -> None:
    one = cell("profstack-jobs1", 100.0, fmt="2ranks", summary_sha="abc")
    two = cell("profstack-jobs2", 180.0, fmt="2ranks", summary_sha="abc")
    row = run.parallel_table([one, two]).splitlines()[2]
    assert "| 0.56× | — | yes |" in row  # no rounds recorded: no median


def test_the_parallel_table_gives_the_ratio_of_the_median_rounds() -> None:
    # GIVEN 3 interleaved rounds each: serial 1.0, 0.5 (one lucky round), 1.0 s; parallel 0.6, 0.55, 0.6 s
    one = cell("profstack-jobs1", 200.0, fmt="2ranks", summary_sha="abc", all_mb_per_s=[100.0, 200.0, 100.0])
    two = cell(
        "profstack-jobs2", 100 / 0.55, fmt="2ranks", summary_sha="abc", all_mb_per_s=[100 / 0.6, 100 / 0.55, 100 / 0.6]
    )
    # WHEN tabulated THEN the best rounds' ratio (0.55 / 0.5) and the medians' (0.6 / 1.0) over 3 rounds
    row = run.parallel_table([one, two]).splitlines()[2]
    assert "| 1.10× | 0.60× (3) | yes |" in row


def test_the_two_rank_job_sets_each_files_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a 2 MB generated trace WHEN the 2-rank job is made from it
    monkeypatch.setattr(run, "DATA_DIR", tmp_path)
    folder = run.ensure_rank_traces(2, DEFAULT_SOURCE)
    # THEN two files of the same size whose distributedInfo says rank 0 and rank 1 of 2
    files = sorted(folder.glob("rank-*.json"))
    assert [f.name for f in files] == ["rank-0.pt.trace.json", "rank-1.pt.trace.json"]
    infos = [json.loads(f.read_text())["distributedInfo"] for f in files]
    assert [(d["rank"], d["world_size"]) for d in infos] == [(0, 2), (1, 2)]
    assert files[0].stat().st_size == files[1].stat().st_size


def test_a_child_reports_its_own_peak_not_the_parents_pages_copied_at_fork(tmp_path: Path) -> None:
    import argparse

    # GIVEN a parent holding ~300 MB when it forks the measured child (the inflate of a 1.5 MB .json.gz)
    ballast = bytearray(300 << 20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page: resident
    trace = run.REPO_ROOT / "samples" / "traces" / "hta" / "trace_diff" / "test" / "test.json.gz"
    args = argparse.Namespace(hta_timeout=60, timeout=60, mem_cap_gb=4)
    # WHEN measured
    m = run.measure("inflate-zlib", trace, 1, "gz", json_bytes=trace.stat().st_size, args=args)
    del ballast
    # THEN the peak is the child's (an interpreter and a small file, far below the parent's 300 MB), and the
    # fork-inflated ru_maxrss is kept beside it
    assert m.status == "ok", m.detail
    assert m.peak_rss_mb is not None
    assert 5 < m.peak_rss_mb < 150
    assert m.extra["ru_maxrss_mb"] > 300


def test_the_delivery_table_puts_every_form_beside_the_floor() -> None:
    # GIVEN the checkout at 400 MB/s (CPU), the flag configuration at 500, the wheel at 400, the Lambda bundle at
    # 300, the analyze command at 200 (its imports 0.7 s), the Processing command at 100 and the floor at 200
    results = [
        cell("profstack", 400.0),
        cell("profstack-no-op-types", 500.0),
        cell("profstack-wheel", 400.0),
        cell("profstack-lambda", 300.0),
        cell("cli", 200.0, import_seconds=0.7),
        cell("processing", 100.0),
        cell("msgspec", 200.0),
    ]
    # WHEN tabulated THEN each form's speed, its CPU ratio to the floor, and the command's imports
    row = run.delivery_table(results).splitlines()[2]
    speeds = "| 100 MB | .json | 400.0 | 500.0 | 400.0 | 300.0 | 200.0 | 100.0 | 200.0 |"
    assert row == speeds + " 2.00× | 2.00× | 1.50× | 1.00× | 0.70 |"


def test_the_record_shapes_row_compares_the_same_events_with_and_without_shapes() -> None:
    # GIVEN ProfStack at 1.05 s with shapes and 1.00 s without (CPU), the floor at 2.0 s and 1.6 s
    results = []
    for tool, label, seconds in (
        ("profstack", "shapes", 1.05),
        ("profstack", "noshapes", 1.0),
        ("msgspec", "shapes", 2.0),
        ("msgspec", "noshapes", 1.6),
    ):
        m = cell(tool, 100 / seconds, fmt=label)
        results.append(m)
    # WHEN tabulated THEN the ratio of the same events with and without the shape args, and each against its floor
    row = run.shapes_table(results).splitlines()[2]
    assert "| 1.05× | 2.000 / 1.600 | 1.90× / 1.60× |" in row


def test_a_delivery_form_that_imported_the_wrong_profstack_fails_its_cell() -> None:
    # GIVEN the wheel's child reporting a profstack imported from the checkout instead of the installed wheel
    m = run.Measurement("profstack-wheel", 100, "json", "f", 100 * MB, "failed")
    got = run._read_result(m, {"seconds": 1.0, "profstack_file": str(run.REPO_ROOT / "profstack" / "__init__.py")})
    # THEN the cell fails and says where it came from (a number for the wrong build is never reported)
    assert got.status == "failed"
    assert "not from" in got.detail
    assert got.mb_per_s is None
