"""A user's report index: one row per job, `reports/<user>/index.json` and `reports/<user>/index.html`.

Pure (no AWS): the processor's hook (lambdas/trace_processor/report_index.py) and `profstack reports` use it.

    index_row(summary, ...)     the row of one job: status, duration, step time p50, GPU idle, top finding, cost
    parse_rows(data)            rows from index.json (or a per-job index-row.json); untrusted: every field checked
    upsert(rows, row)           the rows with this job's row in, newest first, at most MAX_INDEX_JOBS
    render_index_html(...)      the page (index_page.py): the jobs, filtered and paged, and per job family the step-time
                                and GPU-idle trend (inline SVG)

The step time p50 and GPU idle are the same numbers as the history rows and the e-mail (means over GPU ranks,
``profstack.history.rows.job_numbers``). A row is a few hundred bytes; MAX_INDEX_JOBS bounds index.json and the
page whatever a user runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from profstack import layout
from profstack.analysis.summary import severity_rank
from profstack.history.rows import job_numbers
from profstack.report.format import cost_text, duration_text, num, pct
from profstack.report.format import dur as dur_us

INDEX_JSON = "index.json"
INDEX_HTML = "index.html"
#: next to each job's report: the job's row, from which a lost or missing index.json is rebuilt
ROW_FILE = "index-row.json"
INDEX_SCHEMA = 1
#: newest jobs kept in the index (about 400 bytes of JSON each): older ones stay in S3 and in history/
MAX_INDEX_JOBS = 5000
MAX_MESSAGE_CHARS = 240
#: bytes of index.json read at most (MAX_INDEX_JOBS rows with room to spare)
MAX_INDEX_BYTES = 16 << 20
MAX_ROW_BYTES = 64 << 10

FIELDS = (
    "job",
    "family",
    "status",
    "ended_at",
    "duration_s",
    "step_p50_us",
    "gpu_idle_pct",
    "top_finding",
    "findings",
    "cost_usd",
    "complete",
    "no_traces",
)


class IndexFormatError(ValueError):
    """index.json (or a row file) that is not what this module writes."""


# ------------------------------------------------------------------------------------------ rows


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def top_finding(summary: Mapping[str, Any]) -> dict[str, str] | None:
    """The most severe finding (first of that severity in the summary's order), shortened to one line."""
    findings = [f for f in summary.get("findings") or [] if isinstance(f, Mapping)]
    if not findings:
        return None
    best = min(enumerate(findings), key=lambda p: (severity_rank(p[1].get("severity")), p[0]))[1]
    message = " ".join(str(best.get("message") or "").split())
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    return {
        "rule_id": str(best.get("rule_id") or "")[:128],
        "severity": str(best.get("severity") or "")[:32],
        "message": message,
    }


def index_row(
    summary: Mapping[str, Any],
    *,
    job: str,
    status: str,
    ended_at: datetime,
    family: str | None = None,
    duration_s: float | None = None,
) -> dict[str, Any]:
    """The index row of one job. `duration_s`: the job's run time when the caller knows it (SageMaker's start and
    end); the summary's cost section (history on) is used otherwise."""
    layout.job_reports_prefix("u", job)  # a job name that is a key segment (LayoutError otherwise)
    cost = summary.get("cost") if isinstance(summary.get("cost"), Mapping) else {}
    assert isinstance(cost, Mapping)
    numbers = job_numbers(summary)
    findings = [f for f in summary.get("findings") or [] if isinstance(f, Mapping)]
    duration = duration_s if duration_s is not None else num(cost.get("duration_s"))
    return {
        "job": job,
        "family": family,
        "status": status,
        "ended_at": _iso(ended_at),
        "duration_s": round(duration, 1) if duration is not None and duration >= 0 else None,
        "step_p50_us": numbers["step_p50_us"],
        "gpu_idle_pct": numbers["gpu_idle_pct"],
        "top_finding": top_finding(summary),
        "findings": len(findings),
        "cost_usd": num(cost.get("total_usd")),
        "complete": bool(summary.get("complete")),
        "no_traces": bool(summary.get("no_traces")),
    }


def _str(value: Any, limit: int) -> str | None:
    return value[:limit] if isinstance(value, str) else None


def _nonneg(value: Any) -> float | None:
    v = num(value)
    return v if v is not None and v >= 0 else None


def clean_row(value: Any) -> dict[str, Any] | None:
    """A row as this module writes it, or None: index.json is read back, so nothing in it is trusted (a job
    name that is not a key segment, a number that is a string, a missing date all drop or blank the field)."""
    if not isinstance(value, Mapping):
        return None
    job = value.get("job")
    ended = value.get("ended_at")
    if not isinstance(job, str) or not layout.is_segment(job) or not isinstance(ended, str):
        return None
    try:
        ended_at = datetime.fromisoformat(ended.replace("Z", "+00:00"))
    except ValueError:
        return None
    if ended_at.tzinfo is None:
        return None
    family = value.get("family")
    finding = value.get("top_finding")
    top = None
    if isinstance(finding, Mapping):
        top = {k: _str(finding.get(k), MAX_MESSAGE_CHARS) or "" for k in ("rule_id", "severity", "message")}
    findings = value.get("findings")
    return {
        "job": job,
        "family": family if isinstance(family, str) and layout.is_segment(family) else None,
        "status": _str(value.get("status"), 32) or "",
        "ended_at": _iso(ended_at),
        "duration_s": _nonneg(value.get("duration_s")),
        "step_p50_us": _nonneg(value.get("step_p50_us")),
        "gpu_idle_pct": _nonneg(value.get("gpu_idle_pct")),
        "top_finding": top,
        "findings": findings if isinstance(findings, int) and not isinstance(findings, bool) and findings >= 0 else 0,
        "cost_usd": _nonneg(value.get("cost_usd")),
        "complete": value.get("complete") is True,
        "no_traces": value.get("no_traces") is True,
    }


def _order(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Newest first (ties by job name), one row per job (the newest), at most MAX_INDEX_JOBS."""
    ordered = sorted((dict(r) for r in rows), key=lambda r: (r["ended_at"], r["job"]), reverse=True)
    seen: set[str] = set()
    out: list[dict[str, Any]] = []
    for row in ordered:
        if row["job"] in seen:
            continue
        seen.add(row["job"])
        out.append(row)
        if len(out) >= MAX_INDEX_JOBS:
            break
    return out


#: the status of a row written while the job runs (lambdas/live_analysis): it never replaces a finished job's row
RUNNING = "InProgress"


def upsert(rows: Iterable[Mapping[str, Any]], row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`rows` with `row` replacing any earlier row of its job (a re-delivered or re-run job), newest first; except
    that a running job's row (an in-progress report that lost a race with the final one) never replaces the row
    of a finished job."""
    new = clean_row(row)
    if new is None:
        raise IndexFormatError(f"not an index row: {row!r:.200}")
    kept = list(rows)
    if new.get("status") == RUNNING and any(r.get("job") == new["job"] and r.get("status") != RUNNING for r in kept):
        return _order(kept)
    return _order([new, *(r for r in kept if r.get("job") != new["job"])])


def merge_rows(rows: Iterable[Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """Rows from several sources (row files, an old index) into one index: the cleaned ones, newest first."""
    return _order(r for r in (clean_row(x) for x in rows) if r is not None)


def parse_rows(data: bytes) -> list[dict[str, Any]]:
    """The rows of an index.json. Raises IndexFormatError for anything that is not one (the caller rebuilds)."""
    if len(data) > MAX_INDEX_BYTES:
        raise IndexFormatError(f"index is {len(data)} bytes, more than {MAX_INDEX_BYTES}")
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexFormatError(f"index is not JSON: {exc}") from None
    if not isinstance(doc, Mapping) or doc.get("schema") != INDEX_SCHEMA or not isinstance(doc.get("jobs"), list):
        raise IndexFormatError(f"not a ProfStack report index (schema {INDEX_SCHEMA})")
    return merge_rows(doc["jobs"])


def parse_row_file(data: bytes) -> list[dict[str, Any]]:
    """The row of a per-job index-row.json, as a one-item list. Raises IndexFormatError."""
    if len(data) > MAX_ROW_BYTES:
        raise IndexFormatError(f"row file is {len(data)} bytes, more than {MAX_ROW_BYTES}")
    try:
        row = clean_row(json.loads(data))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexFormatError(f"row file is not JSON: {exc}") from None
    if row is None:
        raise IndexFormatError("not an index row")
    return [row]


def index_document(user: str, rows: Sequence[Mapping[str, Any]], *, generated_at: datetime) -> dict[str, Any]:
    layout.user_reports_prefix(user)
    return {"schema": INDEX_SCHEMA, "user": user, "generated_at": _iso(generated_at), "jobs": [dict(r) for r in rows]}


def dumps(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, allow_nan=False, ensure_ascii=False, separators=(",", ":")).encode()


def filter_rows(
    rows: Iterable[Mapping[str, Any]], *, since: datetime | None = None, family: str | None = None
) -> list[dict[str, Any]]:
    """Rows that ended at or after `since` and belong to `family` (when given)."""
    cutoff = _iso(since) if since is not None else ""
    return [dict(r) for r in rows if r["ended_at"] >= cutoff and (family is None or r.get("family") == family)]


# ------------------------------------------------------------------------------------------ text cells


def finding_text(row: Mapping[str, Any]) -> str:
    top = row.get("top_finding")
    if not isinstance(top, Mapping):
        return "no traces" if row.get("no_traces") else "—"
    return f"[{top.get('severity')}] {top.get('rule_id')}: {top.get('message')}"


def text_cells(row: Mapping[str, Any]) -> list[str]:
    """The columns of `profstack reports list` and the page, as text."""
    return [
        str(row["job"]),
        str(row.get("status") or "—"),
        str(row["ended_at"]).replace("T", " ").replace("Z", ""),
        duration_text(row.get("duration_s")),
        dur_us(row.get("step_p50_us")),
        pct(row.get("gpu_idle_pct")),
        cost_text(row.get("cost_usd")),
        finding_text(row),
    ]


HEADERS = ["job", "status", "ended (UTC)", "duration", "step p50", "GPU idle", "cost", "top finding"]


# ------------------------------------------------------------------------------------------ page


INDEX_LINK_HTML = (
    '<p class="notice indexlink">All your jobs: <a href="../index.html">your report index</a> '
    "(or <code>profstack reports list</code>)</p>"
)
#: the same link as the first entry of the report's navigation bar
INDEX_NAV_HTML = '<a class="up" href="../index.html">← All your reports</a>'


def with_index_link(page: str) -> str:
    """A job's page with the link to its owner's index (reports/<user>/index.html, one folder up): first in the
    report's navigation bar, else a line on top of the page."""
    nav = '<nav class="toc" aria-label="Sections of this report">'
    if nav in page:
        return page.replace(nav, nav + INDEX_NAV_HTML, 1)
    for marker in ('<div class="wrap" id="top">', '<div class="wrap">'):
        if marker in page:
            return page.replace(marker, marker + INDEX_LINK_HTML, 1)
    return page.replace("<body>", "<body>" + INDEX_LINK_HTML, 1)


def render_index_html(user: str, rows: Sequence[Mapping[str, Any]], *, generated_at: datetime) -> str:
    """The page: self-contained (inline CSS and SVG, no script, the report's Content-Security-Policy), every
    job and family name escaped, filtered and paged without a script (profstack/report/index_page.py). Links
    are relative: reports/<user>/<job>/report.html beside it."""
    from profstack.report.index_page import render_page

    return render_page(user, rows, generated_at=generated_at)
