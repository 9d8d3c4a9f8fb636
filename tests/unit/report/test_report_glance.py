"""A report that reads at a glance (issue 45 item 4, problems 8 and 10): the overview first, the top causes of lost
GPU time each explained (by its finding, or by why no rule fired) with its cost and one change, findings grouped by
rule across ranks with one recommendation, plain labels and units, no Python literal and no back-quote on the page."""

from __future__ import annotations

import copy
import html
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.analysis import AnalysisOptions, analyze, discover_sources
from profstack.analysis.rules import COMM_RECOMMENDATION
from profstack.history.cost import JobResources, job_cost
from profstack.history.prices import pinned_prices
from profstack.report import render_html
from profstack.report.findings import evidence_label, evidence_value, group_findings, top_causes
from tests.conftest import TRACES_DIR

TRACES = [TRACES_DIR / "hta" / "trace_filter" / f"sampled_rank-{r}.json.gz" for r in (0, 1)]


@pytest.fixture(scope="module")
def analysed() -> dict[str, Any]:
    summary = dict(analyze(discover_sources(TRACES), AnalysisOptions()).summary)
    summary["cost"] = job_cost(summary, JobResources("ml.p4d.24xlarge", 2, 3240.0, 3240.0), pinned_prices())
    return summary


@pytest.fixture
def demo(analysed: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(analysed)


def _text(page: str) -> str:
    body = page.split("<body>", 1)[1]
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))


def test_the_overview_comes_first_then_the_causes_then_the_findings(demo: dict[str, Any]) -> None:
    # GIVEN the demo job (two real ranks on 2 x p4d) WHEN its report is rendered
    page = render_html(demo)
    # THEN the KPIs, then the top causes of lost GPU time, then the findings, then the cost and the ranks
    order = ['id="overview"', 'id="causes"', 'id="findings"', 'id="cost"', 'id="ranks"', 'id="rank-0"']
    positions = [page.index(anchor) for anchor in order]
    assert positions == sorted(positions)
    # AND the navigation links every section it names
    nav = page.split('<nav class="toc"', 1)[1].split("</nav>", 1)[0]
    for target in re.findall(r'href="#([^"]+)"', nav):
        assert f'id="{target}"' in page, target
    # AND the input files' S3 paths are folded away, not on the first screen
    assert page.index('<details class="inputs">') < page.index('id="overview"')


def test_one_rule_on_many_ranks_is_one_card_with_one_recommendation(demo: dict[str, Any]) -> None:
    # GIVEN CommunicationBound fired on both ranks, with the same 14-line recommendation
    assert sum(f["rule_id"] == "CommunicationBound" for f in demo["findings"]) == 2
    page = render_html(demo)
    # THEN one card says it, with a row per rank and the recommendation once
    cards = re.findall(r'<div class="card finding [a-z]+" id="f-CommunicationBound">(.*?)</div></div>', page, re.S)
    assert len(cards) == 1
    assert cards[0].count('<span class="where">rank ') == 2
    assert page.count("bucket_cap_mb (default 25 MB") == 1
    assert COMM_RECOMMENDATION.split(". ", 1)[1][:60] in html.unescape(page)


def test_the_largest_loss_is_explained_even_when_a_rule_silenced_it(demo: dict[str, Any]) -> None:
    # GIVEN the demo job: its largest loss is the GPU waiting on the host, and no CPUBound finding (CommunicationBound
    # fired, which silences it)
    groups = group_findings(demo["findings"])
    causes = top_causes(demo, groups)
    assert causes[0].cause == "host"
    assert not any(g.rule_id == "CPUBound" for g in groups)
    # THEN the overview and the cost table say why no finding names it, and what to change
    assert causes[0].explained_by is None
    assert "CommunicationBound" in causes[0].why_no_finding
    assert "CPUBound" in causes[0].why_no_finding
    assert causes[0].change.startswith("Overlap communication")
    text = _text(render_html(demo))
    assert text.count("No finding names the host waits (rule CPUBound)") == 2  # the causes and the cost table
    # AND the next cause links the finding that explains it
    assert causes[1].explained_by is not None
    assert causes[1].explained_by.rule_id == "CommunicationBound"
    assert 'Finding: <a href="#f-CommunicationBound">' in render_html(demo)


def test_without_the_silencing_rule_the_page_gives_the_rules_thresholds(demo: dict[str, Any]) -> None:
    # GIVEN the same job judged with a host-wait threshold it does not reach, and no CommunicationBound finding
    demo["findings"] = [f for f in demo["findings"] if f["rule_id"] != "CommunicationBound"]
    demo["options"]["rule_thresholds"]["cpu_bound_host_wait_pct"] = 99.0
    cause = top_causes(demo, group_findings(demo["findings"]))[0]
    # THEN it says no rule fired, and what the rule needs
    assert cause.cause == "host"
    assert cause.explained_by is None
    assert "No rule fired" in cause.why_no_finding
    assert "more than 99%" in cause.why_no_finding


def test_without_a_price_the_causes_come_from_the_ranks(demo: dict[str, Any]) -> None:
    # GIVEN `profstack analyze` on a laptop (no instance type, no cost section)
    del demo["cost"]
    causes = top_causes(demo, group_findings(demo["findings"]))
    # THEN the same causes, shares of GPU time without dollars, and no cost panel
    assert [c.cause for c in causes][:2] == ["host", "exposed_communication"]
    assert all(c.usd is None for c in causes)
    page = render_html(demo)
    assert 'id="causes"' in page
    assert 'id="cost"' not in page
    assert "no price: the job's instance is unknown here" in _text(page)


@settings(max_examples=40, deadline=None)
@given(
    shares=st.lists(st.floats(0, 100), min_size=4, max_size=4),
    fired=st.sets(st.sampled_from(["CPUBound", "CommunicationBound", "DataloaderBottleneck", "BatchSize", "X"])),
)
def test_every_top_cause_is_explained_whatever_fired(
    analysed: dict[str, Any], shares: list[float], fired: set[str]
) -> None:
    # GIVEN any split of the lost time over the four causes, and any set of rules that fired
    summary = copy.deepcopy(analysed)
    for share, row in zip(shares, summary["cost"]["attribution"], strict=True):
        row["share_pct"] = share
    summary["findings"] = [
        {"rule_id": r, "severity": "warning", "message": f"rank 0: {r}", "evidence": {}, "recommendation": "Do it.",
         "ranks": [0]}
        for r in sorted(fired)
    ]  # fmt: skip
    # THEN each of the top three has a finding or a reason none fired, and a change to make
    for cause in top_causes(summary, group_findings(summary["findings"])):
        assert cause.explained_by is not None or cause.why_no_finding
        assert cause.change


def test_no_python_literal_field_name_or_back_quote_reaches_the_page(demo: dict[str, Any]) -> None:
    # GIVEN findings whose evidence holds a mapping, a list, a bool and None, and texts with `code` spans
    demo["findings"] = [
        {
            "rule_id": "UnreadableTraceFiles", "severity": "warning", "ranks": [],
            "message": "1 of 2 trace files could not be read completely",
            "evidence": {"files": {"rank-1.json.gz": "truncated gzip"}, "retried": True, "note": None,
                         "overlap_pct_of_comm": 11.8, "outlier_steps": [3, 4]},
            "recommendation": "Re-run `profstack analyze` on them.",
        },
        *demo["findings"],
    ]  # fmt: skip
    text = _text(render_html(demo))
    # THEN the mapping is listed as `name: value`, code is code, labels are words with their units
    assert "files rank-1.json.gz: truncated gzip" in text
    assert "overlapped with computation 11.8%" in text
    assert "outlier steps 3, 4" in text
    assert "Re-run profstack analyze on them." in text
    assert "retried yes" in text
    assert "note —" in text
    for raw in ("{'", "`", " True", "overlap pct of comm", "overlap_pct", "_us", "note None"):
        assert raw not in text, raw


@settings(max_examples=60, deadline=None)
@given(st.from_regex(r"[a-z][a-z0-9]{0,8}(_[a-z0-9]{1,8}){0,4}", fullmatch=True))
def test_an_evidence_key_the_report_does_not_know_becomes_words(key: str) -> None:
    # GIVEN any snake_case evidence key (a rule added later) THEN its label has no underscore and no unit suffix
    label = evidence_label(key)
    assert "_" not in label
    assert not label.endswith((" us", " bytes", " pct"))
    # AND its value carries the unit its suffix names
    value = evidence_value(key, 1500.0)
    if key.endswith("_us"):
        assert value == "1.50 ms"
    elif key.endswith("_pct"):
        assert value == "1500.0%"
