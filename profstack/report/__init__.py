"""Every HTML page ProfStack writes: the self-contained report for an analysis summary (no JavaScript,
no network), and the page of a job without traces."""

from profstack.report.html import render_html
from profstack.report.no_traces import render_no_traces_html

__all__ = ["render_html", "render_no_traces_html"]
