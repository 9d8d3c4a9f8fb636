"""The system-metrics report panel and the standalone page for jobs without traces."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pytest

from profstack.jobs.instance_metrics import HostMetrics, Series, SystemMetrics
from profstack.jobs.instance_rules import system_findings
from profstack.jobs.links import job_links
from profstack.report.system import MAX_HOSTS_DRAWN, MAX_POINTS_DRAWN, system_panel, system_report
from scripts.screenshot_report import find_chromium, screenshot

T0 = 1_796_562_905.0


def _series(metric: str, values: list[float], *, normalised: bool = True) -> Series:
    return Series(metric, tuple(T0 + 60 * i for i in range(len(values))), tuple(values), normalised, None)  # type: ignore[arg-type]


def demo_metrics(hosts: int = 2, minutes: int = 180) -> SystemMetrics:
    built = []
    for h in range(hosts):
        gpu = [max(0.0, 70 + 25 * math.sin(i / 9 + h) - (60 if 40 < i < 55 else 0)) for i in range(minutes)]
        built.append(
            HostMetrics(
                f"algo-{h + 1}",
                "ml.p4d.24xlarge",
                8,
                96,
                {
                    "GPUUtilization": _series("GPUUtilization", gpu),
                    "GPUMemoryUtilization": _series("GPUMemoryUtilization", [35 + i * 0.2 for i in range(minutes)]),
                    "CPUUtilization": _series("CPUUtilization", [20 + 10 * math.cos(i / 5) for i in range(minutes)]),
                    "MemoryUtilization": _series("MemoryUtilization", [40.0 + h for _ in range(minutes)]),
                    "DiskUtilization": _series("DiskUtilization", [12 + i * 0.05 for i in range(minutes)]),
                },
            )
        )
    return SystemMetrics("resnet-ddp-2026-11-29", T0, T0 + 60 * minutes, 60, tuple(built), True,
                         ("algo-1: GPU count of ml.p4d.24xlarge from an unverified table row",))  # fmt: skip


def test_panel_draws_one_line_per_host_per_metric() -> None:
    html = system_panel(demo_metrics(hosts=3))
    assert html.count("<polyline") == 3 * 5
    assert "% per GPU" in html
    assert "% per vCPU" in html
    assert "unverified table row" in html


def test_panel_is_bounded_for_big_jobs() -> None:
    html = system_panel(demo_metrics(hosts=80, minutes=3000))
    assert html.count("<polyline") == MAX_HOSTS_DRAWN * 5
    longest = max(len(p.split(" ")) for p in re.findall(r'points="([^"]*)"', html))
    assert longest <= MAX_POINTS_DRAWN
    assert "Showing 32 of 80 hosts" in html
    assert len(html) < 3_000_000


def test_hostile_strings_are_escaped() -> None:
    m = demo_metrics(hosts=1)
    evil = SystemMetrics('<script>alert(1)</script>', m.start, m.end, 60,
                         (HostMetrics('<img src=x onerror=1>', '"><b>', 8, 96, m.hosts[0].series),), True,
                         ("<iframe>",))  # fmt: skip
    page = system_report(evil, links={"x": 'javascript:"><script>'})
    assert "<script" not in page
    assert "<img" not in page
    assert "<iframe>" not in page
    assert "javascript:" not in page
    assert "Content-Security-Policy" in page


def test_raw_sums_are_flagged_and_missing_metrics_are_not_zero() -> None:
    host = HostMetrics("algo-1", None, None, None, {"GPUUtilization": _series("GPUUtilization", [300.0] * 10,
                                                                               normalised=False)})  # fmt: skip
    html = system_panel(SystemMetrics("j", T0, T0 + 600, 60, (host,), True))
    assert "raw sum over the host" in html
    assert html.count("No data from CloudWatch") == 4


def test_page_for_a_job_without_traces_and_without_metrics() -> None:
    page = system_report(None, title="System report: j", message="No traces were found.")
    assert "No system metrics were read" in page
    assert "No traces were found." in page
    assert page.startswith("<!DOCTYPE html>")


@pytest.mark.skipif(
    find_chromium() is None and os.environ.get("CI") != "true", reason="headless Chromium not installed"
)
def test_screenshot_of_the_panel(tmp_path: Path) -> None:
    m = demo_metrics(hosts=4)
    transitions = [
        {"Status": "Starting", "StartTime": (T0 - 1800) * 1000},
        {"Status": "Training", "StartTime": T0 * 1000},
    ]
    findings = system_findings(m, {"CreationTime": (T0 - 1800) * 1000, "SecondaryStatusTransitions": transitions})
    page = system_report(m, findings=findings, links=job_links("us-east-1", "profstack", m.job),
                         message="Training job Completed · no traces: system metrics only")  # fmt: skip
    report = tmp_path / "system.html"
    report.write_text(page)
    out = Path(os.environ.get("PROFSTACK_SCREENSHOT_DIR", tmp_path)) / "system-panel.png"
    shot = screenshot(report, out)
    # THEN the whole page renders without console errors (its CSP and markup hold in a real browser)
    assert shot.console_errors == ()
    assert shot.height > 600
    assert out.stat().st_size > 20_000
