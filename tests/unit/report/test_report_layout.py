"""The report and the index as a reader meets them (issue 45 item 4), measured in headless Chromium at 400, 800 and
1,400 px, light and dark: no card's content spills out of it, the KPIs sit in the first screen, every text is WCAG
AA against the background it is drawn on (computed styles, scripts/page_audit.py), and every chart has an
accessible name. One browser for the module; the full-page screenshots go to $PROFSTACK_SHOTS when it is set, for
a person to look at."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from profstack.analysis import AnalysisOptions, analyze, discover_sources
from profstack.history.cost import JobResources, job_cost
from profstack.history.prices import pinned_prices
from profstack.jobs.instance_rules import system_findings
from profstack.report import index as idx
from profstack.report import render_html
from profstack.report.system import system_panel
from scripts.page_audit import Audit, audit, browser
from tests.conftest import TRACES_DIR
from tests.unit.monitoring.test_system_panel import T0, demo_metrics
from tests.unit.report.test_report_browser import BROWSER

pytestmark = [pytest.mark.browser, pytest.mark.skipif(BROWSER is None, reason="headless Chromium not installed")]

WIDTHS = (400, 800, 1400)
SCHEMES = ("light", "dark")
#: the first screen: a phone held upright, a laptop
SCREEN = {400: 800, 800: 900, 1400: 900}
SHOTS = Path(os.environ["PROFSTACK_SHOTS"]) if os.environ.get("PROFSTACK_SHOTS") else None


def demo_summary() -> dict[str, Any]:
    """What the pipeline writes for the demo's job: two real ranks (hta/trace_filter), its cost on 2 x p4d, and
    the CloudWatch system findings of its hosts."""
    traces = [TRACES_DIR / "hta" / "trace_filter" / f"sampled_rank-{r}.json.gz" for r in (0, 1)]
    summary = dict(analyze(discover_sources(traces), AnalysisOptions()).summary)
    summary["cost"] = job_cost(summary, JobResources("ml.p4d.24xlarge", 2, 3240.0, 3240.0), pinned_prices())
    describe = {"CreationTime": (T0 - 1800) * 1000, "SecondaryStatusTransitions": []}
    summary["findings"] = [*summary["findings"], *system_findings(demo_metrics(), describe)]
    summary["job_name"] = "resnet-ddp-demo"
    return summary


def index_rows(jobs: int = 120) -> list[dict[str, Any]]:
    """`jobs` jobs of four families (one with a long name), some failed or stopped, one without traces."""
    summary = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "summary_example.json").read_text())
    end = datetime(2026, 12, 4, 6, tzinfo=UTC)
    families = ("bert-large-pretraining-with-a-long-family-name", "llama-7b", "resnet50", "gpt-neox-20b")
    rows: list[dict[str, Any]] = []
    for i in range(jobs):
        for rank in summary["ranks"]:
            rank["steps"]["p50_us"] = 100_000 + 900 * i + (i * 7919) % 20_000
            rank["temporal_breakdown"]["idle_pct"] = 5.0 + (i * 31) % 40
        summary["cost"] = {"total_usd": 3.5 * (i % 7 + 1), "duration_s": 1800.0 * (i % 5 + 1)}
        status = "Failed" if i % 11 == 7 else "Stopped" if i % 13 == 5 else "Completed"
        rows = idx.upsert(
            rows,
            idx.index_row(
                {"no_traces": True, "findings": []} if i == 4 else summary,
                job=f"{families[i % 4]}-{i:04d}",
                status=status,
                ended_at=end - timedelta(hours=6 * (jobs - i)),
                family=families[i % 4],
            ),
        )
    return rows


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as b:
        yield b


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    page = render_html(demo_summary(), sections=[system_panel(demo_metrics())])
    path.write_text(idx.with_index_link(page), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def index_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("index") / "index.html"
    path.write_text(idx.render_index_html("alice", index_rows(), generated_at=datetime(2026, 12, 4, 7, tzinfo=UTC)))
    return path


def _check(a: Audit, *, min_charts: int) -> None:
    assert a.console_errors == []
    # no horizontal scroll of the page, and no card whose content spills out of it (a wide table scrolls in a box
    # of its own inside the card)
    assert a.doc_overflow <= 0
    assert a.overflow == [], a.overflow[:5]
    # WCAG AA: 4.5:1 (3:1 for large text), each text against what it is drawn on
    assert a.low_contrast == [], a.low_contrast[:5]
    assert a.min_contrast >= 4.5
    # every chart a reader is shown has an accessible name
    assert len(a.charts) >= min_charts
    assert a.unnamed_charts == [], a.unnamed_charts[:5]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", WIDTHS)
def test_the_report_reads_at_a_glance_at_every_width(chromium: Any, report_file: Path, width: int, scheme: str) -> None:
    # GIVEN the demo job's report (two real ranks, cost, system metrics) WHEN a reader opens it
    shot = SHOTS / f"report-{width}-{scheme}.png" if SHOTS else None
    a = audit(chromium, report_file, width=width, scheme=scheme, height=SCREEN[width], shot=shot)
    # THEN it holds together at this width and in this colour scheme
    _check(a, min_charts=25)
    # AND the overview's KPIs are on the first screen, under the title and the navigation, before any finding
    assert a.kpis_top is not None
    assert a.kpis_bottom is not None
    assert a.kpis_bottom <= SCREEN[width]
    fold = [f["tag"] for f in a.fold]
    assert fold.index("nav.toc") < fold.index("div.kpis")
    if width >= 800:  # and on a laptop, the top causes of lost GPU time start there too
        assert any(f["tag"].startswith("div.card causes") for f in a.fold)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("width", WIDTHS)
def test_the_index_reads_at_every_width(chromium: Any, index_file: Path, width: int, scheme: str) -> None:
    shot = SHOTS / f"index-{width}-{scheme}.png" if SHOTS else None
    a = audit(chromium, index_file, width=width, scheme=scheme, height=SCREEN[width], shot=shot)
    _check(a, min_charts=8)  # two trends for each of the four families


def test_the_report_is_readable_between_641_and_1040_px(chromium: Any, report_file: Path) -> None:
    # GIVEN the widths where tables used to spill out of their cards (issue 45: 641 to 1,040 px)
    for width in (641, 1040, 1600):
        a = audit(chromium, report_file, width=width)
        # THEN no card overflows, and the page does not scroll sideways
        assert (width, a.doc_overflow, a.overflow) == (width, 0, [])


def _counter(context: Any, page: Any) -> str:
    """The text the page draws for the match counter: CSS generated content (a counter), which no DOM property
    holds; Chromium's layout snapshot does."""
    cdp = context.new_cdp_session(page)
    snap = cdp.send("DOMSnapshot.captureSnapshot", {"computedStyles": []})
    texts = [snap["strings"][i] if i >= 0 else "" for i in snap["documents"][0]["layout"]["text"]]
    at = texts.index(" shown ")
    return f"{texts[at - 1]}{texts[at]}{texts[at + 1]}"


def _visible(page: Any, selector: str) -> int:
    return int(
        page.eval_on_selector_all(selector, "els => els.filter(e => e.getBoundingClientRect().height > 0).length")
    )


def test_the_index_filters_and_pages_without_a_script(chromium: Any, index_file: Path) -> None:
    rows = index_rows()
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.goto(index_file.resolve().as_uri())
        # GIVEN 120 jobs WHEN the page opens THEN the newest 50 show, and the counter says so
        assert _visible(page, "tr.job") == 50
        assert _counter(context, page) == "50 shown of 120 jobs"
        # WHEN the reader goes to page 3 THEN jobs 101 to 120, the oldest
        page.click("section#page-1 nav.pager >> text=3")
        shown = page.eval_on_selector_all(
            "tr.job",
            "rs => rs.filter(r => r.getBoundingClientRect().height > 0).map(r => r.querySelector('a').textContent)",
        )
        assert shown == [r["job"] for r in rows[100:]]
        # WHEN she picks the family llama-7b THEN its jobs from every page, and its trend card only
        page.click("label[for=fam-1]")
        family = page.eval_on_selector("label[for=fam-1]", "l => l.textContent")
        wanted = [r["job"] for r in rows if r["family"] == family]
        shown = page.eval_on_selector_all(
            "tr.job",
            "rs => rs.filter(r => r.getBoundingClientRect().height > 0).map(r => r.querySelector('a').textContent)",
        )
        assert shown == wanted
        assert len(wanted) == 30
        assert _visible(page, ".trendcard") == 1
        # AND with "Failed" too, the jobs that are both
        page.click("label[for=st-failed]")
        both = [r["job"] for r in rows if r["family"] == family and r["status"] == "Failed"]
        assert _visible(page, "tr.job") == len(both) > 0
        assert _counter(context, page) == f"{len(both)} shown of 120 jobs"
        assert page.eval_on_selector_all("script", "s => s.length") == 0
    finally:
        context.close()


def test_trend_labels_never_overlap(chromium: Any, index_file: Path) -> None:
    # GIVEN families of 30 jobs with long names (the old charts printed the first and last job names on top of
    # each other) WHEN the trends are drawn at each width THEN no two labels of a chart overlap, none is cut off
    # at the chart's edge, and the x axis says dates
    for width in WIDTHS:
        context = chromium.new_context(viewport={"width": width, "height": 900})
        try:
            page = context.new_page()
            page.goto(index_file.resolve().as_uri())
            charts = page.eval_on_selector_all(
                "svg.trend",
                """svgs => svgs.map(s => { const box = s.getBoundingClientRect();
                    return [...s.querySelectorAll('text')].map(t => { const b = t.getBoundingClientRect();
                        return [b.left, b.top, b.right, b.bottom, t.textContent,
                                b.left >= box.left - 0.5 && b.right <= box.right + 0.5]; }); })""",
            )
        finally:
            context.close()
        assert len(charts) == 8
        for labels in charts:
            for i, a in enumerate(labels):
                for b in labels[i + 1 :]:
                    apart = a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
                    assert apart, (width, a, b)
            assert all(t[5] for t in labels), (width, [t[4] for t in labels if not t[5]])  # none cut off
            texts = [t[4] for t in labels]
            assert any(t.startswith("2026-1") for t in texts), texts
            assert "job end date (UTC), oldest to newest" in texts
