"""The HTML report: panels present, every trace string escaped, no network, graceful degradation."""

from __future__ import annotations

import copy
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from profstack.report import render_html

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "summary_example.json"
SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(2)>'
QUOTE = 'it\'s & "quoted" <T>'


@pytest.fixture
def summary() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def _poison(summary: dict[str, Any]) -> dict[str, Any]:
    """Put hostile strings everywhere a trace (or a file name) can reach the report."""
    s = copy.deepcopy(summary)
    s["inputs"][0]["name"] = IMG + ".json.gz"
    s["inputs"].append(
        {
            "name": SCRIPT,
            "rank": 9,
            "rank_source": "file_name",
            "size_bytes": 1,
            "status": "failed",
            "events": 0,
            "error": {"source": SCRIPT, "error_type": "CorruptGzipError", "message": SCRIPT, "fatal": True},
        }
    )
    s["errors"].append({"source": SCRIPT, "error_type": IMG, "message": SCRIPT + " (2)", "fatal": True})
    rank = s["ranks"][0]
    rank["label"] = IMG
    rank["sources"] = [SCRIPT]
    rank["device"] = {"name": SCRIPT, "total_global_mem_bytes": None, "num_sms": None, "compute_capability": None}
    for key in ("top_kernels_by_time", "top_kernels_by_count"):
        rank[key][0]["name"] = f"void k<{SCRIPT}>({IMG})"
    hist = {"edges_us": [0, 10, 100], "counts": [1, 2]}
    rank["annotations"]["cpu"] = [
        {"name": SCRIPT, "count": 1, "total_us": 5.0, "mean_us": 5.0, "max_us": 5.0, "histogram": hist}
    ]
    rank["annotations"]["gpu"] = [
        {"name": IMG, "count": 1, "total_us": 5.0, "mean_us": 5.0, "max_us": 5.0, "histogram": hist}
    ]
    rank["sync"]["by_name"] = [{"name": QUOTE, "count": 1, "total_us": 3.0}]
    rank["top_cpu_ops"] = [{"name": IMG, "count": 2, "total_us": 7.0}]
    finding = s["findings"][0]
    finding["message"] = SCRIPT
    finding["recommendation"] = IMG
    finding["rule_id"] = QUOTE
    finding["evidence"] = {SCRIPT: IMG, "kernel": SCRIPT}
    s["cross_rank"]["table"][0]["label"] = SCRIPT
    return s


def _visible_text(page: str) -> str:
    return re.sub(r"<[^>]+>", " ", page)


class _TagCollector(HTMLParser):
    """What a browser would build: element names and attribute names."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.attrs: set[str] = set()
        self.attr_values: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attrs:
            self.attrs.add(name)
            self.attr_values.append(value or "")


def test_every_trace_supplied_string_is_escaped(summary: dict[str, Any]) -> None:
    # GIVEN a summary whose kernel, annotation, file, device and finding strings are HTML/JS payloads
    poisoned = _poison(summary)

    # WHEN rendering it
    page = render_html(poisoned)

    # THEN no payload survives as markup: no script or img element, no event-handler attribute
    parsed = _TagCollector()
    parsed.feed(page)
    assert not parsed.tags & {"script", "img", "iframe"}
    assert not [a for a in parsed.attrs if a.startswith("on")]
    assert "<script" not in page.lower()
    assert "<img" not in page.lower()
    # AND the payloads are shown as (escaped) text instead of vanishing
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in page
    assert "it&#x27;s &amp; &quot;quoted&quot; &lt;T&gt;" in page
    # AND the full payloads stay inside attribute values (title tooltips) as plain text
    assert any(SCRIPT in v for v in parsed.attr_values)


def test_page_is_self_contained_without_network_references(summary: dict[str, Any]) -> None:
    # GIVEN the example summary
    # WHEN rendering it
    page = render_html(summary)

    # THEN no URL, script, stylesheet link, font or external src/href appears
    assert "http://" not in page
    assert "https://" not in page
    assert not re.search(r"""(?:src|href)\s*=\s*["']?//""", page, re.IGNORECASE)
    assert not re.search(r"<(?:script|link|iframe|object|embed)\b", page, re.IGNORECASE)
    assert "@import" not in page
    assert "url(" not in page
    # AND a Content-Security-Policy forbids scripts and fetches as a second line of defence
    assert "default-src 'none'" in page


def test_dashboard_panels_are_present_with_findings_first(summary: dict[str, Any]) -> None:
    # GIVEN a GPU rank with every section and one finding
    # WHEN rendering
    page = render_html(summary)
    text = _visible_text(page)

    # THEN the SageMaker-Profiler-like panels all appear
    for title in (
        "Findings",
        "GPU active share",
        "GPU activity mix",
        "Kernel type mix",
        "Top kernels by total time",
        "Top kernels by launch count",
        "Kernel precision",
        "Launch → execution delay",
        "Step time",
        "Ranks compared",
        "Memcpy &amp; memset bandwidth",
        "Synchronisation",
        "NCCL communication",
        "User annotations",
        "Why the GPU was idle",
    ):
        assert title in text, title
    # AND the overview comes first, then the findings, then the per-rank details (issue 45: KPIs first)
    assert page.index('id="overview"') < page.index('id="findings"') < page.index('id="rank-0"')
    # AND values from the summary are formatted into the page
    rank = summary["ranks"][0]
    assert f"{100 - rank['temporal_breakdown']['idle_pct']:.1f}%" in text  # GPU active share
    top = rank["top_kernels_by_time"][0]["name"]
    assert f'title="{html.escape(top)}"' in page
    # AND the header names the partial status, the bad input file and its error
    assert "partial results" in text
    bad = next(i for i in summary["inputs"] if i["status"] == "failed")
    assert html.escape(bad["error"]["message"]) in page
    # AND every rank gets a section, and the page has inline SVG charts
    for r in summary["ranks"]:
        assert f"Rank {r['label']}" in text
    assert page.count("<svg") >= 6


def test_findings_sorted_by_severity_with_recommendation(summary: dict[str, Any]) -> None:
    # GIVEN findings of mixed severity, the critical one last
    base = summary["findings"][0]
    summary["findings"] = [
        {**base, "rule_id": "InfoRule", "severity": "info"},
        {**base, "rule_id": "WarnRule", "severity": "warning"},
        {**base, "rule_id": "CritRule", "severity": "critical", "recommendation": "Enable AMP"},
    ]

    # WHEN rendering
    page = render_html(summary)

    # THEN critical comes first, then warning, then info, each with its badge and recommendation
    assert page.index("CritRule") < page.index("WarnRule") < page.index("InfoRule")
    assert '<span class="badge critical">critical</span>' in page
    assert "Enable AMP" in page
    assert "1 critical · 1 warning · 1 info" in page


def test_evidence_chips_show_units_in_the_value_not_the_key(summary: dict[str, Any]) -> None:
    # GIVEN a finding whose evidence keys carry unit suffixes
    base = summary["findings"][0]
    summary["findings"] = [
        {**base, "evidence": {"host_wait_us": 3_530_000.0, "idle_pct": 55.2, "copied_bytes": 2048, "ranks": 2}}
    ]
    # WHEN rendering
    page = render_html(summary)
    # THEN the label is plain words without the suffix, and the value is formatted in its unit
    assert '<span class="chip">host waits <b>3.53 s</b></span>' in page
    assert '<span class="chip">GPU idle <b>55.2%</b></span>' in page
    assert '<span class="chip">copied <b>2.05 KB</b></span>' in page
    assert "host_wait_us" not in page
    assert "idle_pct" not in page


def test_long_kernel_names_are_shortened_with_the_full_name_in_a_title(summary: dict[str, Any]) -> None:
    # GIVEN a long templated C++ kernel name
    name = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"
    )
    summary["ranks"][0]["top_kernels_by_time"][0]["name"] = name

    # WHEN rendering
    page = render_html(summary)

    # THEN the cell shows a folded name and the title attribute carries the whole escaped name
    assert (
        'title="void at::native::vectorized_elementwise_kernel&lt;4, at::native::CUDAFunctor_add&lt;float&gt;' in page
    )
    assert ">at::native::vectorized_elementwise_kernel&lt;4, at::native::CUDAFunctor_add…" in page


def test_cpu_only_rank_says_so_and_omits_gpu_panels(summary: dict[str, Any]) -> None:
    # GIVEN a job whose only rank is CPU-only (no GPU section at all, as in hta/cpu_only)
    summary["ranks"] = summary["ranks"][:1]
    summary["cross_rank"]["table"] = summary["cross_rank"]["table"][:1]
    rank = summary["ranks"][0]
    rank["has_gpu"] = False
    rank["device"] = None
    for key in ("temporal_breakdown", "idle_breakdown", "gpu_activity", "launch_delay", "memory_ops"):
        rank.pop(key)
    rank["top_kernels_by_time"] = rank["top_kernels_by_count"] = rank["precision"] = rank["kernel_types"] = []
    summary["cross_rank"]["table"][0]["gpu_busy_pct"] = None

    # WHEN rendering
    page = render_html(summary)

    # THEN the rank is labelled CPU-only with an explanation, and no GPU panel is drawn
    text = _visible_text(page)
    assert "CPU only" in text
    assert "no GPU activity" in text
    panels = [t.strip() for t in re.findall(r"<h3>([^<]+)", page)]
    for title in ("GPU active share", "Top kernels by total time", "Kernel precision", "Launch → execution delay"):
        assert title not in panels, title
    # AND CPU-side panels remain
    assert "Step time" in panels
    assert "User annotations" in panels


@pytest.mark.parametrize(
    "summary_in",
    [
        {},
        {"ranks": None, "findings": None, "cross_rank": None},
        {"ranks": [{"rank": 3}], "inputs": [{"name": "x.json"}]},
        {"ranks": [{"rank": 0, "has_gpu": True, "steps": {"count": 2, "durations": [{"step": 1}]}}]},
        {"ranks": ["not a mapping", {"rank": 1, "has_gpu": True, "temporal_breakdown": {"idle_pct": float("nan")}}]},
    ],
)
def test_sparse_or_odd_summaries_render_without_error(summary_in: dict[str, Any]) -> None:
    # GIVEN a summary with sections missing, null or malformed
    # WHEN rendering
    page = render_html(summary_in)

    # THEN a complete page still comes out
    assert page.startswith("<!DOCTYPE html>")
    assert page.rstrip().endswith("</html>")
    assert "nan" not in _visible_text(page).lower().split()


def test_stragglers_are_highlighted_in_the_per_rank_table(summary: dict[str, Any]) -> None:
    # GIVEN two ranks, rank 1 a straggler
    row = summary["cross_rank"]["table"][0]
    summary["cross_rank"]["table"] = [row, {**row, "rank": 1, "label": "1", "step_mean_us": 150000.0}]
    summary["cross_rank"]["stragglers"] = [
        {"rank": 1, "label": "1", "metric": "step_mean_us", "value": 150000.0, "median": 96000.0, "deviation_pct": 56.2}
    ]

    # WHEN rendering
    page = render_html(summary)

    # THEN exactly that row is marked and badged
    rows = re.findall(r'<tr class="(straggler)?">', page)
    assert rows.count("straggler") == 1
    assert "straggler 56%" in page


def test_many_ranks_detail_stragglers_first_and_say_what_was_left_out(summary: dict[str, Any]) -> None:
    # GIVEN 12 ranks, rank 11 a straggler
    base = summary["ranks"][0]
    summary["ranks"] = [{**base, "rank": r, "label": str(r)} for r in range(12)]
    summary["cross_rank"]["stragglers"] = [
        {"rank": 11, "label": "11", "metric": "step_mean_us", "value": 2.0, "median": 1.0, "deviation_pct": 100.0}
    ]

    # WHEN rendering
    page = render_html(summary)

    # THEN 8 rank sections are drawn, the straggler's first, with a note about the rest
    sections = re.findall(r'<section class="rank" id="rank-\d+"><h2>Rank (\d+)', page)
    assert sections[0] == "11"
    assert len(sections) == 8
    assert "Showing details for 8 of 12 ranks" in page


def test_launch_delay_panel_says_when_percentiles_come_from_the_sketch(summary: dict[str, Any]) -> None:
    # GIVEN a rank whose launch-delay percentiles are exact, and the same rank above the exact limit
    exact = copy.deepcopy(summary)
    exact["ranks"][0]["launch_delay"]["quantiles"] = "exact"
    sketched = copy.deepcopy(summary)
    sketched["ranks"][0]["launch_delay"]["quantiles"] = "sketch (relative error <= 0.001)"
    # WHEN both are rendered
    # THEN only the sketched one carries the note next to the panel title
    assert "bounded sketch" not in render_html(exact)
    assert "percentiles from a bounded sketch, within 0.1 %" in render_html(sketched)
