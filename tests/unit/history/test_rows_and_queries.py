"""History rows from real summaries, and the Athena named queries run over them with DuckDB as Athena's
stand-in (the same SQL text the stack ships, table names filled in)."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import date, timedelta
from typing import Any

import duckdb
import jsonschema
import pytest

from profstack.analysis.summary import summary_schema
from profstack.history.queries import (
    IDLE_GPU_HOURS_BY_USER_AND_WEEK,
    NAMED_QUERIES,
    SLOWEST_KERNELS_ACROSS_JOBS,
    TOP_REGRESSIONS,
)
from profstack.history.rows import COLUMNS, MAX_NAME_CHARS, TABLES, RowError, from_jsonl, to_jsonl, validate_row
from tests.unit.history.conftest import JOBS, BuiltHistory

DUCK_TYPES = {"string": "VARCHAR", "int": "INTEGER", "bigint": "BIGINT", "double": "DOUBLE", "boolean": "BOOLEAN"}


def _connect(history: BuiltHistory) -> duckdb.DuckDBPyConnection:
    """Views named like the Glue tables: the columns of profstack.history.rows.COLUMNS with their Glue types,
    plus the Hive partition keys dt and user read from the paths (as strings, as Athena's projection has them)."""
    con = duckdb.connect()
    for table in TABLES:
        columns = ", ".join(f"'{name}': '{DUCK_TYPES[kind]}'" for name, kind in COLUMNS[table])
        pattern = str(history.root / "history" / table / "*" / "*" / "*.jsonl")
        con.execute(
            f"CREATE VIEW {table} AS SELECT * FROM read_json('{pattern}', format='newline_delimited', "
            f"hive_partitioning=true, hive_types_autocast=false, columns={{{columns}}})"
        )
    return con


def _run(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def test_rows_are_written_under_the_dt_and_user_partitions(built_history: BuiltHistory) -> None:
    files = sorted(str(p.relative_to(built_history.root)) for p in built_history.root.rglob("*.jsonl"))
    assert "history/jobs/dt=2026-11-18/user=alice/resnet-w0.jsonl" in files
    assert "history/kernels/dt=2026-11-24/user=bob/ddp-2026-11-24-10-00-00-000.jsonl" in files
    assert len(files) == 3 * len(TABLES)


def test_one_row_per_job_per_rank_and_per_top_kernel(built_history: BuiltHistory) -> None:
    for job, rows in built_history.rows.items():
        summary = built_history.summaries[job]
        assert len(rows["jobs"]) == 1
        assert len(rows["ranks"]) == len(summary["ranks"])
        # (names are cut at MAX_NAME_CHARS: C++ template kernels run to several kilobytes)
        names = {k["name"][:MAX_NAME_CHARS] for r in summary["ranks"] for k in r["top_kernels_by_time"]}
        assert {k["name"] for k in rows["kernels"]} == names
        assert [k["position"] for k in rows["kernels"]] == list(range(1, len(rows["kernels"]) + 1))
        # THEN the job row carries the summary's cost
        job_row = rows["jobs"][0]
        assert job_row["total_usd"] == summary["cost"]["total_usd"]
        assert job_row["gpu_hours"] == summary["cost"]["gpu_hours"]


def test_summaries_with_cost_and_regression_validate_against_the_schema(built_history: BuiltHistory) -> None:
    for summary in built_history.summaries.values():
        jsonschema.validate(summary, summary_schema())
        json.dumps(summary, allow_nan=False)


def test_a_row_with_an_unknown_column_is_refused() -> None:
    row = {name: None for name, _ in COLUMNS["kernels"]}
    assert validate_row("kernels", dict(row)) == row
    with pytest.raises(RowError, match="extra"):
        validate_row("kernels", {**row, "surprise": 1})
    with pytest.raises(RowError, match="missing"):
        validate_row("kernels", {k: v for k, v in row.items() if k != "name"})


def test_jsonl_round_trips_and_never_writes_nan() -> None:
    rows = [{"a": 1, "b": "ü"}, {"a": None, "b": "x\ny"}]
    assert from_jsonl(to_jsonl(rows)) == rows
    with pytest.raises(ValueError, match="Out of range float"):
        to_jsonl([{"a": float("nan")}])


def _week(day: str) -> date:
    d = date.fromisoformat(day)
    return d - timedelta(days=d.weekday())  # ISO weeks start on Monday, as date_trunc('week') does


def test_idle_gpu_hours_by_user_and_week_matches_the_rows(built_history: BuiltHistory) -> None:
    # GIVEN the rows and the named query's SQL WHEN DuckDB runs it
    got = _run(_connect(built_history), IDLE_GPU_HOURS_BY_USER_AND_WEEK.render({t: t for t in TABLES}))
    # THEN it equals the same sum done by hand over the job rows
    expected: dict[tuple[str, date], float] = defaultdict(float)
    for job, rows in built_history.rows.items():
        row = rows["jobs"][0]
        user = next(j.info.user for j in JOBS if j.info.job == job)
        expected[(user, _week(row["ended_at"][:10]))] += row["gpu_hours"] * row["gpu_idle_pct"] / 100.0
    assert {(r["user"], r["week"]): r["idle_gpu_hours"] for r in got} == pytest.approx(
        {k: round(v, 3) for k, v in expected.items()}, abs=1e-3
    )
    # two weeks, newest first; alice's two resnet jobs fall in one week
    assert [r["week"] for r in got] == [date(2026, 11, 23), date(2026, 11, 16)]
    assert next(r for r in got if r["user"] == "alice")["jobs"] == 2
    assert all(r["lost_usd"] > 0 for r in got)


def test_top_regressions_lists_the_regressed_job_with_its_baseline(built_history: BuiltHistory) -> None:
    got = _run(_connect(built_history), TOP_REGRESSIONS.render({t: t for t in TABLES}))
    assert [(r["user"], r["family"], r["job"], r["baseline_jobs"]) for r in got] == [
        ("alice", "resnet", "resnet-w0", "resnet-w4")
    ]
    assert got[0]["regressions"] >= 2
    assert got[0]["regression_worst_pct"] > 10


def test_slowest_kernels_across_jobs_sums_each_kernels_time_over_jobs(built_history: BuiltHistory) -> None:
    got = _run(_connect(built_history), SLOWEST_KERNELS_ACROSS_JOBS.render({t: t for t in TABLES}))
    by_name: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for rows in built_history.rows.values():
        for k in rows["kernels"]:
            by_name[(k["name"], k["kernel_type"])].append(k)
    top = got[0]
    ks = by_name[(top["name"], top["kernel_type"])]
    assert top["jobs"] == len({k["job"] for k in ks})
    assert top["total_s"] == pytest.approx(round(sum(k["total_us"] for k in ks) / 1e6, 3))
    assert top["total_s"] == max(round(sum(k["total_us"] for k in v) / 1e6, 3) for v in by_name.values())
    # the resnet kernels appear in both resnet jobs
    assert any(r["jobs"] == 2 for r in got)
    assert [r["total_s"] for r in got] == sorted((r["total_s"] for r in got), reverse=True)


def test_every_named_query_runs_and_names_all_its_tables() -> None:
    for query in NAMED_QUERIES:
        with pytest.raises(KeyError):
            query.render({"jobs": "jobs"})
        assert "{" not in query.render({t: f'"db"."{t}"' for t in TABLES})


def _summary(complete: bool, errors: list[tuple[str, bool]], warnings: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "complete": complete,
        "ranks": [{"rank": 0}],
        "errors": [{"source": "t", "error_type": t, "message": "m", "fatal": fatal} for t, fatal in errors],
        "warnings": [{"source": "t", "error_type": t, "message": "m", "fatal": False} for t in warnings],
    }


@pytest.mark.parametrize(
    ("summary", "measured"),
    [
        (_summary(True, []), True),
        # a 2021 trace whose memory events carry no allocator totals: the report is incomplete (memory peaks
        # unknown), every number of the history rows is measured: still a regression baseline
        (_summary(False, [("MemoryAllocatorUnknownError", False)]), True),
        # any gap that touches a history number keeps the job out of baselines
        (_summary(False, [("MemoryAllocatorUnknownError", False), ("FlowsToNowhereError", False)]), False),
        (_summary(False, [("CpuActivityNotRecordedError", False)]), False),
        (_summary(False, [("MemoryAllocatorUnknownError", True)]), False),
        (_summary(False, [("MemoryAllocatorUnknownError", False)], ("ImplausibleResultError",)), False),
        (_summary(False, [("MemoryAllocatorUnknownError", False)], ("NamesFoldedError",)), False),
        (_summary(False, []), False),  # incomplete for a reason the errors do not name: not measured
        ({"complete": False, "ranks": [], "errors": [{"error_type": "MemoryAllocatorUnknownError"}]}, False),
    ],
)
def test_a_job_counts_as_measured_only_when_no_history_number_is_unknown(
    summary: dict[str, Any], measured: bool
) -> None:
    from profstack.history.rows import measured_completely

    assert measured_completely(summary) is measured
