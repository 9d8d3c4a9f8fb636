"""Every HTML page ProfStack writes carries the same Content-Security-Policy meta tag (issue 11 item 6)."""

from __future__ import annotations

import json
import re
from typing import Any

from profstack.report import render_html, render_no_traces_html
from profstack.report.html import CSP
from tests.conftest import REPO_ROOT

_META = re.compile(r'<meta\s+http-equiv="Content-Security-Policy"\s+content="([^"]+)"', re.IGNORECASE)


def _csp(page: str) -> str | None:
    head = page.split("</head>", 1)[0]
    found = _META.search(head)
    return found.group(1) if found else None


def test_the_report_and_the_no_traces_page_both_carry_the_csp() -> None:
    summary: dict[str, Any] = json.loads((REPO_ROOT / "tests" / "fixtures" / "summary_example.json").read_text())
    no_traces = {
        "no_traces": True,
        "message": "No traces <script>alert(1)</script>",
        "searched": ["s3://b/traces/alice/j/"],
        "hint": "upload them",
        "warnings": [{"message": "ignored s3://b/tensorboard/bob/"}],
    }
    for page in (render_html(summary), render_no_traces_html(no_traces)):
        assert _csp(page) == CSP
        assert "default-src 'none'" in CSP
    assert "<script>" not in render_no_traces_html(no_traces)


def test_the_index_the_system_page_and_the_local_servers_pages_carry_it_and_no_script() -> None:
    # GIVEN the other pages: a user's report index (filters and paging in CSS), a job's system-metrics page, and
    # the pages `profstack reports open` answers with when S3 refuses
    from datetime import UTC, datetime

    from profstack.cli.reports_serve import _page
    from profstack.report import index as idx
    from profstack.report.system import system_report

    summary: dict[str, Any] = json.loads((REPO_ROOT / "tests" / "fixtures" / "summary_example.json").read_text())
    row = idx.index_row(summary, job="j-1", status="Completed", ended_at=datetime(2026, 12, 1, tzinfo=UTC), family="j")
    pages = [
        idx.render_index_html("alice", [row], generated_at=datetime(2026, 12, 2, tzinfo=UTC)),
        system_report(None, title="No traces: j", message="m", unavailable="throttled"),
        _page("Access denied", "<script>alert(1)</script>").decode(),
    ]
    # THEN each carries the same policy, and none holds a script
    for page in pages:
        assert _csp(page) == CSP
        assert "<script" not in page.lower()
