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
