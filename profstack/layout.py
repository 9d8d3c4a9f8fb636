"""The one S3 key layout of the trace bucket. Every component builds keys here.

    traces/<user>/<job>/<worker>.<ts>.pt.trace.json[.gz]     raw torch.profiler traces
    tensorboard/<user>/<job>/...                              TensorBoard logs (TensorBoardOutputConfig
                                                              S3OutputPath = s3://<bucket>/tensorboard/<user>/)
    reports/<user>/<job>/summary.json                         analysis summary (schema-versioned)
    reports/<user>/<job>/report.html                          self-contained HTML report
    reports/<user>/<job>/perfetto/rank-<r>[.<i>].trace.json.gz trimmed traces for Perfetto (perfetto_plan)
    reports/<user>/<job>/partials/...                         fan-out partial results
    reports/<user>/<job>/index-row.json                       the job's row of the user's report index
    reports/<user>/index.json, index.html                     the user's report index (profstack/report/index.py)
    history/<table>/dt=<date>/user=<user>/<job>.jsonl         history rows for Athena (profstack/history/rows.py)
    athena-results/                                           Athena query results of the history workgroup

`<user>` is the job's owner: the training-job tag named by tensorboard.user_tag_key, as SageMaker's
ListTags returns it (never the event), which must name a configured user; `_unowned` when the job
carries no such tag.

Extra trace prefixes (processing.extra_trace_prefixes) are templates with `{user}` and `{job}` as whole
path segments, e.g. `s3://team-bucket/profiles/{user}/{job}/`: a job reads only its owner's folder there.
"""

from __future__ import annotations

import re

TRACES_PREFIX = "traces/"
TENSORBOARD_PREFIX = "tensorboard/"
REPORTS_PREFIX = "reports/"
HISTORY_PREFIX = "history/"
ATHENA_RESULTS_PREFIX = "athena-results/"
UNOWNED_USER = "_unowned"

# \Z, not $: `$` also matches before a trailing newline ("bob\n" would pass).
#: torch.profiler's Kineto traces, and TensorFlow's / JAX's XSpace profiles (plugins/profile/<run>/<host>.xplane.pb)
TRACE_FILE_RE = re.compile(r"(\.pt\.trace\.json(\.gz)?|\.xplane\.pb)\Z")
LEGACY_RULE_OUTPUT_TAG = ("profstack:class", "legacy-rule-output")

_SEGMENT_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
USER_PLACEHOLDER = "{user}"
JOB_PLACEHOLDER = "{job}"


class LayoutError(ValueError):
    """A user or job name that cannot be a key segment."""


def _segment(value: str, what: str) -> str:
    if not is_segment(value):
        raise LayoutError(f"{what} '{value}' cannot be used in an S3 key")
    return value


def is_segment(value: str) -> bool:
    """A plain key segment: full match of the segment pattern, and not `.` or `..`."""
    return _SEGMENT_RE.fullmatch(value) is not None and value not in {".", ".."}


def is_plain_prefix(key: str) -> bool:
    """A key prefix made only of plain segments, ending with '/': no `..`, no empty segment, no
    percent-encoding, no control character. What a trusted folder may look like."""
    if not key.endswith("/"):
        return False
    return all(is_segment(part) for part in key[:-1].split("/"))


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


def check_prefix_template(template: str) -> str:
    """An extra trace prefix template: `s3://bucket/.../{user}/.../{job}/`, each placeholder once, as a
    whole segment, `{user}` before `{job}`, every other segment plain. Returns it with a trailing '/'."""
    if not template.startswith("s3://"):
        raise LayoutError(f"extra trace prefix '{template}' must start with s3://")
    bucket, _, key = template[5:].partition("/")
    parts = list(key.rstrip("/").split("/")) if key.strip("/") else []
    if not bucket or any(not p for p in parts):
        raise LayoutError(f"extra trace prefix '{template}' has an empty bucket or segment")
    if parts.count(USER_PLACEHOLDER) != 1 or parts.count(JOB_PLACEHOLDER) != 1:
        raise LayoutError(
            f"extra trace prefix '{template}' must contain {USER_PLACEHOLDER} and {JOB_PLACEHOLDER} once each, "
            "as whole path segments (e.g. s3://bucket/profiles/{user}/{job}/), so a job reads only its owner's folder"
        )
    if parts.index(USER_PLACEHOLDER) > parts.index(JOB_PLACEHOLDER):
        raise LayoutError(f"extra trace prefix '{template}': {USER_PLACEHOLDER} must come before {JOB_PLACEHOLDER}")
    for part in parts:
        if part not in {USER_PLACEHOLDER, JOB_PLACEHOLDER} and not is_segment(part):
            raise LayoutError(f"extra trace prefix '{template}': segment '{part}' is not a plain key segment")
    return f"s3://{bucket}/{'/'.join(parts)}/"


def expand_prefix_template(template: str, *, user: str, job: str | None) -> str:
    """The template for one owner (and job). With job=None: the owner's part only, up to `{job}`."""
    checked = check_prefix_template(template)
    head, _, _ = checked.partition(JOB_PLACEHOLDER)
    owner = head.replace(USER_PLACEHOLDER, _segment(user, "user"))
    if job is None:
        return owner
    return checked.replace(USER_PLACEHOLDER, _segment(user, "user")).replace(JOB_PLACEHOLDER, _segment(job, "job"))


#: Name of the SageMaker Processing `ManifestFile` input written next to a fan-out partial: it names exactly
#: one trace object (an `S3Prefix` input would also pull every key that starts with it).
PROCESSING_INPUT_MANIFEST = "input.manifest"
#: the idempotency table's item holding the owners' fair shares of the fan-out's analyze-file slots
#: (lambdas/trace_processor/slots.py); the fan-out roles may touch this one item of the table only
FANOUT_SLOTS_ID = "fanout-slots"
