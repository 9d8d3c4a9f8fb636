"""Index rows and the index page under adversarial input (hypothesis): index.json is read back from S3, so
whatever it holds must give clean rows or a clear IndexFormatError, never a crash, a script, or a wrong link."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profstack import layout
from profstack.report import index as idx

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=20,
)
ROW_LIKE = st.fixed_dictionaries(
    {},
    optional=dict.fromkeys(idx.FIELDS, JSON)
    | {
        "job": st.text(max_size=30) | st.sampled_from(["job-1", "../x", "a/b", ".", "ok_job.2"]),
        "ended_at": st.sampled_from(["2026-12-01T00:00:00Z", "2026-12-01", "yesterday", "2026-13-01T00:00:00Z"]),
        "top_finding": st.fixed_dictionaries(
            {}, optional={"rule_id": JSON, "severity": JSON, "message": st.text(max_size=300)}
        ),
    },
)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(ROW_LIKE)
def test_a_row_read_back_is_clean_or_dropped(value: dict[str, Any]) -> None:
    row = idx.clean_row(value)
    if row is None:
        return
    # THEN exactly the fields, a job that is a key segment, a UTC date, numbers that are numbers
    assert set(row) == set(idx.FIELDS)
    assert layout.is_segment(row["job"])
    assert row["ended_at"].endswith("Z")
    for name in ("duration_s", "step_p50_us", "gpu_idle_pct", "cost_usd"):
        assert row[name] is None or (isinstance(row[name], float) and row[name] >= 0)
    assert row["family"] is None or layout.is_segment(row["family"])
    json.dumps(row, allow_nan=False)  # writable back


@SETTINGS
@given(st.binary(max_size=200) | JSON.map(lambda v: json.dumps(v).encode()))
def test_anything_in_index_json_gives_rows_or_a_format_error(data: bytes) -> None:
    try:
        rows = idx.parse_rows(data)
    except idx.IndexFormatError:
        return
    assert all(set(r) == set(idx.FIELDS) for r in rows)


@SETTINGS
@given(st.lists(ROW_LIKE, max_size=12), st.text(max_size=200))
def test_the_page_escapes_everything_and_links_only_job_folders(rows: list[dict[str, Any]], text: str) -> None:
    # GIVEN rows with any family, status and finding text (trace-derived messages included)
    cleaned = idx.merge_rows(
        [
            {**r, "job": f"j{i}", "ended_at": "2026-12-01T00:00:00Z", "status": text, "top_finding": {"message": text}}
            for i, r in enumerate(rows)
        ]
    )
    page = idx.render_index_html("alice", cleaned, generated_at=datetime(2026, 12, 4, tzinfo=UTC))
    # THEN no markup from the input, and every link is <job>/report.html or <job>/summary.json beside the index,
    # or a place on the page itself (sections, pages of the table)
    assert "<script" not in page.lower()
    assert page.count('<tr class="job') == len(cleaned)
    ids = set(re.findall(r' id="([^"]*)"', page))
    for href in re.findall(r'href="([^"]*)"', page):
        if href.startswith("#"):
            assert href[1:] in ids, href
            continue
        job, _, name = href.partition("/")
        assert layout.is_segment(job), href
        assert name in {"report.html", "summary.json"}, href


def test_a_summary_of_the_wrong_shape_still_gives_a_row() -> None:
    # GIVEN a summary whose ranks and findings are not what the engine writes
    row = idx.index_row(
        {"ranks": ["x", 3, {"has_gpu": "yes"}], "findings": ["not a finding", {"severity": 5}], "cost": "free"},
        job="job-1",
        status="Completed",
        ended_at=datetime(2026, 12, 1, tzinfo=UTC),
    )
    # THEN the row says what it knows and blanks the rest
    assert row["step_p50_us"] is None
    assert row["cost_usd"] is None
    assert row["findings"] == 1
    assert row["top_finding"] == {"rule_id": "", "severity": "5", "message": ""}


def test_the_index_keeps_one_row_per_job_newest_first_and_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN more jobs than the index keeps, and a job reported twice (a re-delivery with a later end)
    monkeypatch.setattr(idx, "MAX_INDEX_JOBS", 5)
    start = datetime(2026, 12, 1, tzinfo=UTC)
    rows: list[dict[str, Any]] = []
    for i in range(8):
        rows = idx.upsert(
            rows, idx.index_row({}, job=f"job-{i}", status="Completed", ended_at=start + timedelta(hours=i))
        )
    rows = idx.upsert(rows, idx.index_row({}, job="job-6", status="Stopped", ended_at=start + timedelta(hours=20)))
    # THEN the newest five, one row per job, the re-delivered job's latest row first
    assert [r["job"] for r in rows] == ["job-6", "job-7", "job-5", "job-4", "job-3"]
    assert rows[0]["status"] == "Stopped"


def test_an_oversized_index_is_refused_before_it_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(idx, "MAX_INDEX_BYTES", 100)
    with pytest.raises(idx.IndexFormatError, match="more than 100"):
        idx.parse_rows(b"{" + b" " * 200 + b"}")


def test_every_kind_of_job_page_links_the_index_once() -> None:
    # GIVEN the three pages a job can get: a full report, a no-traces page, a system-metrics-only page
    from profstack.report import render_html, render_no_traces_html
    from profstack.report.system import system_report
    from tests.unit.cli.test_reports_cli import FIXTURE

    pages = [
        render_html(json.loads(FIXTURE.read_text())),
        render_no_traces_html({"message": "none", "searched": ["s3://b/traces/alice/j/"], "hint": "enable it"}),
        system_report(None, findings=[], links={}, title="No traces: j", message="m", preface="", unavailable="x"),
    ]
    for page in pages:
        # WHEN the processor adds the index link THEN it is there once, pointing one folder up, inside the body
        linked = idx.with_index_link(page)
        assert linked.count('href="../index.html"') == 1
        assert linked.index("<body>") < linked.index('href="../index.html"') < linked.index("</body>")
