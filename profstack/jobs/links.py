"""Console links for a training job and the text of a failed job's notification. Pure functions.

The console URL formats are the CloudWatch and SageMaker consoles' own deep links as of 2026-12
(*verify* after console changes: they are fragments the console parses, not a documented API).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from profstack import escape

MAX_FAILURE_REASON = 1024  # SageMaker's FailureReason is at most 1024 characters


def console_base(region: str) -> str:
    if region.startswith("cn-"):
        return f"https://{region}.console.amazonaws.cn"
    if region.startswith("us-gov-"):
        return f"https://{region}.console.amazonaws-us-gov.com"
    return f"https://{region}.console.aws.amazon.com"


def _cw(region: str) -> str:
    return f"{console_base(region)}/cloudwatch/home?region={region}"


def _console_escape(text: str) -> str:
    """The CloudWatch console's fragment encoding: percent-encode, then '%' becomes '$25'."""
    return quote(text, safe="").replace("%", "$25")


def job_metrics_url(region: str, job: str) -> str:
    """CloudWatch metrics search for the job's hosts in /aws/sagemaker/TrainingJobs."""
    query = quote(f'{{/aws/sagemaker/TrainingJobs,Host}} "{job}/"', safe="")
    return f"{_cw(region)}#metricsV2?search={query}"


def job_alarms_url(region: str, name_prefix: str, job: str) -> str:
    """The per-job alarms ProfStack keeps while the job runs (lambdas/alarm_manager)."""
    return f"{_cw(region)}#alarmsV2:?search={quote(f'{name_prefix}/job/{job}/', safe='')}"


def job_logs_url(region: str, job: str) -> str:
    group = _console_escape("/aws/sagemaker/TrainingJobs")
    return f"{_cw(region)}#logsV2:log-groups/log-group/{group}$3FlogStreamNameFilter$3D{_console_escape(job)}"


def job_console_url(region: str, job: str) -> str:
    return f"{console_base(region)}/sagemaker/home?region={region}#/jobs/{quote(job, safe='')}"


def job_links(region: str, name_prefix: str, job: str) -> dict[str, str]:
    """Label -> URL, in the order a report or e-mail lists them."""
    if not region:
        return {}
    return {
        "Training job": job_console_url(region, job),
        "Instance metrics": job_metrics_url(region, job),
        "Alarms": job_alarms_url(region, name_prefix, job),
        "Logs": job_logs_url(region, job),
    }


def failure_reason(describe: Mapping[str, Any]) -> str | None:
    reason = describe.get("FailureReason")
    if not isinstance(reason, str) or not reason.strip():
        return None
    # SageMaker's text, but often the training script's own exception message: the one escaping rule, lines kept
    return escape.lines(reason.strip())[:MAX_FAILURE_REASON]


def failure_lines(describe: Mapping[str, Any]) -> list[str]:
    """Lines a Failed (or Stopped) job's notification starts with; empty for a job that did not fail."""
    status = describe.get("TrainingJobStatus")
    if status not in ("Failed", "Stopped"):
        return []
    reason = failure_reason(describe)
    lines = [f"Training job {describe.get('TrainingJobName', '?')} {str(status).lower()}."]
    if reason:
        lines += ["", "FailureReason:", *[f"  {line}" for line in reason.splitlines()[:20]]]
    elif status == "Failed":
        lines += ["", "FailureReason: (SageMaker gave none; read the job's logs)"]
    secondary = describe.get("SecondaryStatus")
    if secondary and secondary != status:
        lines.append(f"Secondary status: {secondary}")
    return lines


def link_lines(links: Mapping[str, str]) -> list[str]:
    return [f"{label}: {url}" for label, url in links.items()]


def notification_text(
    describe: Mapping[str, Any], links: Mapping[str, str], body: Sequence[str] = ()
) -> tuple[str, str]:
    """(subject, message) of a job notification: the failure first, then `body`, then the console links."""
    job = str(describe.get("TrainingJobName", "?"))
    status = str(describe.get("TrainingJobStatus", "?"))
    reason = failure_reason(describe)
    subject = f"ProfStack: {job} {status}" + (f": {reason.splitlines()[0]}" if reason else "")
    lines = [*failure_lines(describe)]
    if body:
        lines += ["", *body] if lines else list(body)
    if links:
        lines += ["", *link_lines(links)]
    return subject[:100], "\n".join(lines)
