"""The report index page (reports/<user>/index.html, issue 36) in headless Chromium: no console error, the
table and the per-family trend charts drawn, and a real, non-blank screenshot."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from profstack.report import index as idx
from scripts.screenshot_report import CHROMIUM_ARGS, screenshot
from tests.unit.report.test_report_browser import BROWSER, _png_rows

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "summary_example.json"

pytestmark = [pytest.mark.browser, pytest.mark.skipif(BROWSER is None, reason="headless Chromium not installed")]


def _rows() -> list[dict[str, Any]]:
    """Nine jobs of three families, one with a hostile name and message, one without traces."""
    summary = json.loads(FIXTURE.read_text())
    end = datetime(2026, 12, 4, 6, tzinfo=UTC)
    rows: list[dict[str, Any]] = []
    for i in range(9):
        family = ("bert-large", "llama-7b", "resnet50")[i % 3]
        for rank in summary["ranks"]:
            rank["steps"]["p50_us"] = 100_000 + 9_000 * i
            rank["temporal_breakdown"]["idle_pct"] = 5.0 + 4 * i
        summary["cost"] = {"total_usd": 3.5 * (i + 1), "duration_s": 1800.0 * (i + 1)}
        rows = idx.upsert(
            rows,
            idx.index_row(
                {"no_traces": True, "findings": []} if i == 4 else summary,
                job=f"{family}-{i:02d}",
                status="Failed" if i == 7 else "Completed",
                ended_at=end - timedelta(hours=6 * (9 - i)),
                family=family,
            ),
        )
    rows[0]["top_finding"] = {"rule_id": "X", "severity": "critical", "message": "<script>alert(1)</script>"}
    return rows


def test_the_report_index_renders_in_headless_chromium(tmp_path: Path) -> None:
    # GIVEN alice's index page over nine jobs of three families
    rows = _rows()
    page = tmp_path / "index.html"
    page.write_text(idx.render_index_html("alice", rows, generated_at=datetime(2026, 12, 4, 7, tzinfo=UTC)))

    # WHEN headless Chromium screenshots the whole page (no network)
    shot = screenshot(page, tmp_path / "index.png", width=1280)

    # THEN no console error (CSP, script), the whole page as wide as asked, and not blank
    assert shot.console_errors == ()
    width, height, pixels = _png_rows(shot.path.read_bytes())
    assert (width, height) == (1280, shot.height)
    colours = {row[x : x + 3] for row in pixels[::5] for x in range(0, len(row) - 3, 4 * 3)}
    assert len(colours) > 30


def test_the_table_links_each_report_and_each_family_has_two_trend_charts(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    rows = _rows()
    page_file = tmp_path / "index.html"
    page_file.write_text(idx.render_index_html("alice", rows, generated_at=datetime(2026, 12, 4, 7, tzinfo=UTC)))
    # WHEN Chromium loads it
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=BROWSER, args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(page_file.resolve().as_uri(), wait_until="load")
            links = page.eval_on_selector_all(
                "table.jobs tbody tr td:first-child > a", "a => a.map(x => x.getAttribute('href'))"
            )
            charts = page.eval_on_selector_all("svg.trend", "s => s.length")
            dots = page.eval_on_selector_all("svg.trend circle", "c => c.length")
            alerts = page.eval_on_selector_all("script", "s => s.length")
            boxes = page.eval_on_selector_all(
                "svg.trend", "s => s.map(x => { const r = x.getBoundingClientRect(); return [r.width, r.height]; })"
            )
        finally:
            browser.close()
    # THEN one row per job, newest first, linking its report beside the index
    assert links == [f"{r['job']}/report.html" for r in rows]
    # AND per family a step-time and a GPU-idle chart, one dot per job that has the number (the job without
    # traces has neither), each drawn at its size; the hostile message is text, not a script
    assert charts == 6
    assert dots == 2 * 8
    assert all(w > 200 and h > 50 for w, h in boxes)
    assert alerts == 0
