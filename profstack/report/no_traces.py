"""The page a job without traces gets instead of a report: what was searched, and how to add traces."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any


def render_no_traces_html(summary: Mapping[str, Any]) -> str:
    """A minimal page for a no-traces summary (`no_traces: true`, with `message`, `searched`, `hint`)."""
    items = "".join(f"<li><code>{html.escape(str(u))}</code></li>" for u in summary.get("searched", []))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>ProfStack: no traces</title></head>"
        f"<body><h1>No traces</h1><p>{html.escape(str(summary['message']))}</p>"
        f"<p>Searched:</p><ul>{items}</ul><p>{html.escape(str(summary['hint']))}</p></body></html>"
    )
