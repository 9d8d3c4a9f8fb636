"""The page a job without traces gets instead of a report: what was searched, and how to add traces."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from profstack.report.html import CSP


def no_traces_section(summary: Mapping[str, Any]) -> str:
    """The no-traces explanation as a fragment (the system report of a job without traces starts with it):
    what was searched, what was left out (warnings other than the system metrics'), and how to add traces."""
    items = "".join(f"<li><code>{html.escape(str(u))}</code></li>" for u in summary.get("searched", []))
    warnings = [w for w in summary.get("warnings") or [] if isinstance(w, Mapping) and w.get("source") != "cloudwatch"]
    notes = "".join(f"<li>{html.escape(str(w.get('message', '')))}</li>" for w in warnings)
    warned = f"<p>Not searched:</p><ul>{notes}</ul>" if notes else ""
    return (
        '<section class="card no-traces"><h2>No traces</h2>'
        f"<p>{html.escape(str(summary.get('message', '')))}</p><p>Searched:</p><ul>{items}</ul>{warned}"
        f'<p class="hint">{html.escape(str(summary.get("hint", "")))}</p></section>'
    )


def render_no_traces_html(summary: Mapping[str, Any]) -> str:
    """A minimal page for a no-traces summary (`no_traces: true`, with `message`, `searched`, `hint`, and
    `warnings`: places the job named that were left out, e.g. a TensorBoard output outside its owner's space)."""
    items = "".join(f"<li><code>{html.escape(str(u))}</code></li>" for u in summary.get("searched", []))
    warnings = [w for w in summary.get("warnings") or [] if isinstance(w, Mapping)]
    notes = "".join(f"<li>{html.escape(str(w.get('message', '')))}</li>" for w in warnings)
    warned = f"<p>Not searched:</p><ul>{notes}</ul>" if notes else ""
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="referrer" content="no-referrer">'
        "<title>ProfStack: no traces</title></head>"
        f"<body><h1>No traces</h1><p>{html.escape(str(summary['message']))}</p>"
        f"<p>Searched:</p><ul>{items}</ul>{warned}<p>{html.escape(str(summary['hint']))}</p></body></html>"
    )
