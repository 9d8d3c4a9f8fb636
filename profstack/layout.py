"""The one S3 key layout of the trace bucket. Every component builds keys here.

    traces/<user>/<job>/<worker>.<ts>.pt.trace.json[.gz]     raw torch.profiler traces
    tensorboard/<user>/<job>/...                              TensorBoard logs (TensorBoardOutputConfig
                                                              S3OutputPath = s3://<bucket>/tensorboard/<user>/)
    reports/<user>/<job>/summary.json                         analysis summary (schema-versioned)
    reports/<user>/<job>/report.html                          self-contained HTML report
    reports/<user>/<job>/perfetto/rank-<r>.trace.json.gz      trimmed traces for Perfetto
    reports/<user>/<job>/partials/...                         fan-out partial results
    history/<table>/dt=<date>/user=<user>/<job>.jsonl         history rows for Athena (profstack/history/rows.py)
    athena-results/                                           Athena query results of the history workgroup

`<user>` is the job's owner (the training-job tag named by tensorboard.user_tag_key),
or `_unowned` when the job carries no such tag.
"""

from __future__ import annotations

import re

TRACES_PREFIX = "traces/"
TENSORBOARD_PREFIX = "tensorboard/"
REPORTS_PREFIX = "reports/"
HISTORY_PREFIX = "history/"
ATHENA_RESULTS_PREFIX = "athena-results/"
UNOWNED_USER = "_unowned"

TRACE_FILE_RE = re.compile(r"\.pt\.trace\.json(\.gz)?$")
LEGACY_RULE_OUTPUT_TAG = ("profstack:class", "legacy-rule-output")

_SEGMENT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")


class LayoutError(ValueError):
    """A user or job name that cannot be a key segment."""


def _segment(value: str, what: str) -> str:
    if not _SEGMENT_RE.match(value) or value in {".", ".."}:
        raise LayoutError(f"{what} '{value}' cannot be used in an S3 key")
    return value


def user_traces_prefix(user: str) -> str:
    return f"{TRACES_PREFIX}{_segment(user, 'user')}/"


def user_tensorboard_prefix(user: str) -> str:
    return f"{TENSORBOARD_PREFIX}{_segment(user, 'user')}/"


def user_reports_prefix(user: str) -> str:
    return f"{REPORTS_PREFIX}{_segment(user, 'user')}/"


def job_traces_prefix(user: str, job: str) -> str:
    return f"{user_traces_prefix(user)}{_segment(job, 'job')}/"


def job_tensorboard_prefix(user: str, job: str) -> str:
    return f"{user_tensorboard_prefix(user)}{_segment(job, 'job')}/"


def job_reports_prefix(user: str, job: str) -> str:
    return f"{user_reports_prefix(user)}{_segment(job, 'job')}/"


def is_trace_key(key: str) -> bool:
    return TRACE_FILE_RE.search(key) is not None
