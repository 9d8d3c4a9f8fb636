"""Every summary as flat rows for Athena (and DuckDB locally): one row per job, per rank and per top kernel.

JSON Lines, one object per line, under a Hive-style layout partitioned by date and user::

    history/<table>/dt=YYYY-MM-DD/user=<user>/<job>.jsonl     table: jobs | ranks | kernels

JSON Lines rather than Parquet: writing Parquet in the Lambda would need pyarrow (well over 100 MB
unpacked, beyond the bundle's size budget) for a few kilobytes per job; Athena reads JSON Lines through the
OpenX JSON SerDe, and the rows are small. The partition values (``dt``, ``user``) live in the key only, as
Hive partitioning wants: Glue does not allow a column with a partition key's name.

``COLUMNS`` is the one definition of each table: the Glue tables (stacks/components/job_history.py) and
the DuckDB tests read it, and ``validate_row`` checks that every row built here has exactly these keys.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from profstack import layout
from profstack.analysis.loose import at as _get
from profstack.analysis.loose import mapping as _mapping
from profstack.analysis.loose import number as _num

HISTORY_PREFIX = layout.HISTORY_PREFIX
TABLES = ("jobs", "ranks", "kernels")

#: table -> (column, Glue/Hive type); partition keys come after, from PARTITION_KEYS
COLUMNS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "jobs": (
        ("job", "string"),
        ("family", "string"),
        ("family_source", "string"),
        ("ended_at", "string"),
        ("status", "string"),
        ("complete", "boolean"),
        ("ranks", "int"),
        ("gpu_ranks", "int"),
        ("instance_type", "string"),
        ("instance_count", "int"),
        ("gpu_count", "int"),
        ("duration_s", "double"),
        ("gpu_hours", "double"),
        ("total_usd", "double"),
        ("lost_usd", "double"),
        ("host_usd", "double"),
        ("input_pipeline_usd", "double"),
        ("exposed_communication_usd", "double"),
        ("other_idle_usd", "double"),
        ("step_p50_us", "double"),
        ("step_p95_us", "double"),
        ("gpu_idle_pct", "double"),
        ("launch_delay_p95_us", "double"),
        ("dataloader_share_pct", "double"),
        ("exposed_comm_pct", "double"),
        ("findings", "int"),
        ("critical_findings", "int"),
        ("warning_findings", "int"),
        ("regressions", "int"),
        ("regression_worst_pct", "double"),
        ("regression_summary", "string"),
        ("baseline_jobs", "string"),
        ("report_uri", "string"),
        ("schema_version", "string"),
    ),
    "ranks": (
        ("job", "string"),
        ("family", "string"),
        ("ended_at", "string"),
        ("rank", "int"),
        ("label", "string"),
        ("has_gpu", "boolean"),
        ("device", "string"),
        ("step_p50_us", "double"),
        ("step_p95_us", "double"),
        ("gpu_idle_pct", "double"),
        ("host_wait_pct", "double"),
        ("launch_delay_p95_us", "double"),
        ("dataloader_share_pct", "double"),
        ("comm_time_us", "double"),
        ("overlap_time_us", "double"),
        ("gpu_span_us", "double"),
        ("gpu_kernels", "bigint"),
    ),
    "kernels": (
        ("job", "string"),
        ("family", "string"),
        ("ended_at", "string"),
        ("position", "int"),
        ("name", "string"),
        ("kernel_type", "string"),
        ("precision", "string"),
        ("ranks", "int"),
        ("count", "bigint"),
        ("total_us", "double"),
        ("mean_us", "double"),
        ("max_us", "double"),
        ("share_pct", "double"),
    ),
}
PARTITION_KEYS: tuple[tuple[str, str], ...] = (("dt", "string"), ("user", "string"))
#: the most kernel rows per job (top kernels by time, summed over ranks)
MAX_KERNEL_ROWS = 50
MAX_NAME_CHARS = 1024


class RowError(ValueError):
    """A row that does not match its table's columns."""


@dataclass(frozen=True)
class JobInfo:
    """What the rows need besides the summary: who ran the job, when it ended, its family."""

    job: str
    user: str
    ended_at: datetime
    status: str = ""
    family: str | None = None
    family_source: str | None = None
    report_uri: str | None = None

    @property
    def dt(self) -> str:
        return self.ended_at.astimezone(UTC).strftime("%Y-%m-%d")

    @property
    def ended_iso(self) -> str:
        return self.ended_at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def table_prefix(table: str) -> str:
    if table not in TABLES:
        raise RowError(f"unknown history table {table!r}")
    return f"{HISTORY_PREFIX}{table}/"


def partition_prefix(table: str, dt: str, user: str) -> str:
    layout.user_reports_prefix(user)  # the same key-segment check as every other prefix (LayoutError)
    return f"{table_prefix(table)}dt={dt}/user={user}/"


def row_key(table: str, info: JobInfo) -> str:
    """history/<table>/dt=<date>/user=<user>/<job>.jsonl (user and job checked by profstack.layout)."""
    layout.job_reports_prefix(info.user, info.job)
    return f"{partition_prefix(table, info.dt, info.user)}{info.job}.jsonl"


# ------------------------------------------------------------------------------------------ numbers


def _ranks(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in summary.get("ranks") or [] if isinstance(r, Mapping)]


def _gpu_ranks(summary: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    ranks = _ranks(summary)
    return [r for r in ranks if r.get("has_gpu")] or ranks


def _values(ranks: Iterable[Mapping[str, Any]], *path: str) -> list[float]:
    return [v for v in (_num(_get(r, *path)) for r in ranks) if v is not None]


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def _exposed_comm_pct(rank: Mapping[str, Any]) -> float | None:
    span = _num(_get(rank, "temporal_breakdown", "gpu_span_us")) or 0.0
    comm = _num(_get(rank, "communication", "comm_time_us"))
    overlap = _num(_get(rank, "communication", "overlap_time_us")) or 0.0
    if span <= 0 or comm is None:
        return None
    return max(0.0, 100.0 * (comm - overlap) / span)


def job_numbers(summary: Mapping[str, Any]) -> dict[str, float | None]:
    """The job-level numbers compared across jobs. Same aggregation as the processor's metrics: step times
    and GPU idle are means over GPU ranks (the typical rank), launch delay and data-loading share the worst
    rank (what a regression or an alarm should catch)."""
    ranks = _gpu_ranks(summary)
    gpu = [r for r in ranks if r.get("has_gpu")]
    delay = _values(ranks, "launch_delay", "p95_us")
    loader = _values(ranks, "dataloader", "share_pct")
    exposed = [v for v in (_exposed_comm_pct(r) for r in gpu) if v is not None]
    return {
        "step_p50_us": _mean(_values(ranks, "steps", "p50_us")),
        "step_p95_us": _mean(_values(ranks, "steps", "p95_us")),
        "gpu_idle_pct": _mean(_values(gpu, "temporal_breakdown", "idle_pct")),
        "launch_delay_p95_us": max(delay) if delay else None,
        "dataloader_share_pct": max(loader) if loader else None,
        "exposed_comm_pct": _mean(exposed),
    }


def top_kernels(summary: Mapping[str, Any], limit: int = MAX_KERNEL_ROWS) -> list[dict[str, Any]]:
    """Top kernels by time over the job: each rank's ``top_kernels_by_time`` summed by name (a kernel counts
    only on the ranks where it made the top-K), share of the summed GPU op time of all ranks."""
    acc: dict[str, dict[str, Any]] = {}
    gpu_time = 0.0
    for rank in _ranks(summary):
        activity = _get(rank, "gpu_activity")
        gpu_time += sum(_num(_get(activity, k)) or 0.0 for k in ("kernel_time_us", "memcpy_time_us", "memset_time_us"))
        for k in _get(rank, "top_kernels_by_time") or []:
            if not isinstance(k, Mapping) or not isinstance(k.get("name"), str):
                continue
            name = k["name"][:MAX_NAME_CHARS]
            row = acc.setdefault(
                name,
                {
                    "name": name,
                    "kernel_type": str(k.get("kernel_type") or ""),
                    "precision": str(k.get("precision") or ""),
                    "ranks": 0,
                    "count": 0,
                    "total_us": 0.0,
                    "max_us": 0.0,
                },
            )
            row["ranks"] += 1
            row["count"] += int(_num(k.get("count")) or 0)
            row["total_us"] += _num(k.get("total_us")) or 0.0
            row["max_us"] = max(row["max_us"], _num(k.get("max_us")) or 0.0)
    rows = sorted(acc.values(), key=lambda r: (-r["total_us"], r["name"]))[:limit]
    for row in rows:
        row["total_us"] = round(row["total_us"], 3)
        row["mean_us"] = round(row["total_us"] / row["count"], 3) if row["count"] else None
        row["share_pct"] = round(100.0 * row["total_us"] / gpu_time, 3) if gpu_time > 0 else None
    return rows


# ------------------------------------------------------------------------------------------ rows


def _regression_fields(summary: Mapping[str, Any]) -> dict[str, Any]:
    found = [f for f in summary.get("findings") or [] if isinstance(f, Mapping) and f.get("rule_id") == "Regression"]
    if not found:
        return {"regressions": 0, "regression_worst_pct": None, "regression_summary": None, "baseline_jobs": None}
    evidence = _mapping(found[0].get("evidence"))
    changes = _mapping(evidence.get("regressed"))
    worst = max((v for v in (_num(x) for x in changes.values()) if v is not None), default=None)
    baseline = evidence.get("baseline_jobs") or []
    return {
        "regressions": len(changes) or len(found),
        "regression_worst_pct": worst,
        "regression_summary": str(found[0].get("message") or "")[:2000],
        "baseline_jobs": ",".join(str(b) for b in baseline)[:2000] if isinstance(baseline, list) else None,
    }


def _cost_fields(summary: Mapping[str, Any]) -> dict[str, Any]:
    cost = _mapping(summary.get("cost"))
    by_cause = {
        str(a.get("cause")): _num(a.get("usd")) for a in cost.get("attribution") or [] if isinstance(a, Mapping)
    }
    return {
        "instance_type": cost.get("instance_type"),
        "instance_count": cost.get("instance_count"),
        "gpu_count": cost.get("gpu_count"),
        "duration_s": _num(cost.get("duration_s")),
        "gpu_hours": _num(cost.get("gpu_hours")),
        "total_usd": _num(cost.get("total_usd")),
        "lost_usd": _num(cost.get("lost_usd")),
        "host_usd": by_cause.get("host"),
        "input_pipeline_usd": by_cause.get("input_pipeline"),
        "exposed_communication_usd": by_cause.get("exposed_communication"),
        "other_idle_usd": by_cause.get("other_idle"),
    }


#: gaps that leave only the memory panel's peaks unknown: nothing a history row holds (step time, GPU idle, kernel
#: shares, cost) depends on them, so such a job still counts as measured completely here (summaries before 1.8,
#: where they made the summary incomplete; from 1.8 they are warnings and the sections say it)
_OUTSIDE_HISTORY = frozenset({"MemoryAllocatorUnknownError"})
#: the sections of ``ranks[].completeness`` (schema 1.8) the history rows rest on: step time, GPU idle and its split,
#: kernel shares, launch delays, the DataLoader share and cost; the memory section is no part of them
_HISTORY_SECTIONS = ("gpu_time", "launches", "cpu_ops", "steps")


def measured_completely(summary: Mapping[str, Any]) -> bool:
    """The jobs table's ``complete``: the summary is complete, or its gaps leave no number of the history rows
    unknown. From schema 1.8 that is what each rank's ``completeness`` says of the sections the rows rest on
    (``_HISTORY_SECTIONS``); before, the only such gap was memory without allocator totals (a 2021 PyTorch trace:
    incomplete as a report, since its memory panel lacks the peaks, and still a baseline for step time and GPU idle)."""
    if summary.get("complete") is True:
        return True
    ranks = _ranks(summary)
    errors = [e for e in summary.get("errors") or [] if isinstance(e, Mapping)]
    warnings = [w for w in summary.get("warnings") or [] if isinstance(w, Mapping)]
    # what else makes a summary incomplete (engine.assemble): an implausible result, folded names
    otherwise = {"ImplausibleResultError", "NamesFoldedError"}
    if not ranks or any(e.get("fatal") for e in errors) or any(w.get("error_type") in otherwise for w in warnings):
        return False
    sections = [_mapping(r.get("completeness")) for r in ranks]
    if all(sections):  # schema 1.8: per section
        return all(_mapping(c.get(s)).get("complete") is True for c in sections for s in _HISTORY_SECTIONS)
    return bool(errors) and all(e.get("error_type") in _OUTSIDE_HISTORY for e in errors)


def job_row(summary: Mapping[str, Any], info: JobInfo) -> dict[str, Any]:
    findings = [f for f in summary.get("findings") or [] if isinstance(f, Mapping)]
    ranks = _ranks(summary)
    row: dict[str, Any] = {
        "job": info.job,
        "family": info.family,
        "family_source": info.family_source,
        "ended_at": info.ended_iso,
        "status": info.status,
        "complete": measured_completely(summary),
        "ranks": len(ranks),
        "gpu_ranks": sum(1 for r in ranks if r.get("has_gpu")),
        **_cost_fields(summary),
        **job_numbers(summary),
        "findings": len(findings),
        "critical_findings": sum(1 for f in findings if f.get("severity") == "critical"),
        "warning_findings": sum(1 for f in findings if f.get("severity") == "warning"),
        **_regression_fields(summary),
        "report_uri": info.report_uri,
        "schema_version": str(summary.get("schema_version") or ""),
    }
    return validate_row("jobs", row)


def rank_rows(summary: Mapping[str, Any], info: JobInfo) -> list[dict[str, Any]]:
    rows = []
    for r in _ranks(summary):
        rows.append(
            validate_row(
                "ranks",
                {
                    "job": info.job,
                    "family": info.family,
                    "ended_at": info.ended_iso,
                    "rank": int(r.get("rank") or 0),
                    "label": str(r.get("label") or "")[:MAX_NAME_CHARS],
                    "has_gpu": bool(r.get("has_gpu")),
                    "device": str(_get(r, "device", "name") or "") or None,
                    "step_p50_us": _num(_get(r, "steps", "p50_us")),
                    "step_p95_us": _num(_get(r, "steps", "p95_us")),
                    "gpu_idle_pct": _num(_get(r, "temporal_breakdown", "idle_pct")) if r.get("has_gpu") else None,
                    "host_wait_pct": _num(_get(r, "idle_breakdown", "host_wait_pct")),
                    "launch_delay_p95_us": _num(_get(r, "launch_delay", "p95_us")),
                    "dataloader_share_pct": _num(_get(r, "dataloader", "share_pct")),
                    "comm_time_us": _num(_get(r, "communication", "comm_time_us")),
                    "overlap_time_us": _num(_get(r, "communication", "overlap_time_us")),
                    "gpu_span_us": _num(_get(r, "temporal_breakdown", "gpu_span_us")),
                    "gpu_kernels": int(_num(_get(r, "counts", "gpu_kernels")) or 0),
                },
            )
        )
    return rows


def kernel_rows(summary: Mapping[str, Any], info: JobInfo) -> list[dict[str, Any]]:
    return [
        validate_row(
            "kernels",
            {"job": info.job, "family": info.family, "ended_at": info.ended_iso, "position": i + 1, **k},
        )
        for i, k in enumerate(top_kernels(summary))
    ]


def validate_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """The row, if its keys are exactly the table's columns (nothing else reaches S3)."""
    expected = [name for name, _ in COLUMNS[table]]
    if set(row) != set(expected):
        extra, missing = sorted(set(row) - set(expected)), sorted(set(expected) - set(row))
        raise RowError(f"{table} row: extra {extra}, missing {missing}")
    return {name: row[name] for name in expected}


def history_rows(summary: Mapping[str, Any], info: JobInfo) -> dict[str, list[dict[str, Any]]]:
    """table -> rows of this job."""
    return {
        "jobs": [job_row(summary, info)],
        "ranks": rank_rows(summary, info),
        "kernels": kernel_rows(summary, info),
    }


def to_jsonl(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """One JSON object per line (NaN/inf are never written: allow_nan=False)."""
    return b"".join(json.dumps(r, allow_nan=False, ensure_ascii=False).encode() + b"\n" for r in rows)


def from_jsonl(data: bytes) -> list[dict[str, Any]]:
    out = []
    for line in data.splitlines():
        if line.strip():
            value = json.loads(line)
            if isinstance(value, dict):
                out.append(value)
    return out
