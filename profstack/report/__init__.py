"""Self-contained HTML report for an analysis summary (no JavaScript, no network)."""

from profstack.report.html import render_html

__all__ = ["render_html"]
