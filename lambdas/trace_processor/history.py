"""Across jobs, in the processor (issue 16): the job's cost, its family's baseline and a Regression finding,
the history rows under ``history/``, and the optional MLflow export. Two calls from ``outputs.publish_report``:

    summary = record_history(...)   before summary.json is written: adds ``cost`` and the Regression finding,
                                    writes history/<table>/dt=<date>/user=<user>/<job>.jsonl
    export_mlflow(...)              after the report and the e-mail: one MLflow run per job

The logic is pure (``profstack.history``); this module is the AWS I/O around it (DescribeTrainingJob,
ListTags, the history objects, SigV4 credentials). A transient AWS fault propagates, so the record is
retried; a defect in the history code never costs the job its report: it becomes a summary warning.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import Field, field_validator

from lambdas.common.env import FunctionEnv
from lambdas.trace_processor import aws
from lambdas.trace_processor.aws import Clients, S3Location, error_code, list_objects, put_bytes
from lambdas.trace_processor.job import JobContext
from lambdas.trace_processor.telemetry import logger
from profstack.history.cost import JobResources
from profstack.history.family import DEFAULT_NAME_PATTERNS, DEFAULT_TAG_KEY, FamilyRules, resolve_family
from profstack.history.mlflow import MlflowClient, MlflowError, MlflowTarget, export_job, summary_metrics
from profstack.history.pipeline import enrich
from profstack.history.prices import pinned_prices
from profstack.history.regression import RegressionThresholds
from profstack.history.rows import JobInfo, from_jsonl, job_numbers, partition_prefix, row_key, to_jsonl

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient

#: at most this many jobs rows are read per day and user when looking for a baseline
MAX_JOB_OBJECTS_PER_DAY = 200
MAX_ROW_OBJECT_BYTES = 4 << 20


class HistoryEnv(FunctionEnv):
    """Settings of the history step (stacks/components/job_history.py sets them)."""

    enabled: Annotated[bool, Field(alias="HISTORY_ENABLED")] = False
    family_tag_key: Annotated[str, Field(min_length=1, alias="FAMILY_TAG_KEY")] = DEFAULT_TAG_KEY
    family_name_patterns: Annotated[
        list[str], Field(alias="FAMILY_NAME_PATTERNS", default_factory=lambda: list(DEFAULT_NAME_PATTERNS))
    ]
    regression_thresholds: Annotated[dict[str, float], Field(alias="REGRESSION_THRESHOLDS", default_factory=dict)]
    price_overrides: Annotated[dict[str, dict[str, float]], Field(alias="PRICE_OVERRIDES", default_factory=dict)]
    mlflow_tracking: Annotated[str | None, Field(alias="MLFLOW_TRACKING")] = None
    mlflow_experiment: Annotated[str, Field(min_length=1, alias="MLFLOW_EXPERIMENT")] = "profstack"
    #: config history.mlflow.artifacts / experiment_per_user (profstack/config.py says why both default safe)
    mlflow_artifacts: Annotated[bool, Field(alias="MLFLOW_ARTIFACTS")] = False
    mlflow_experiment_per_user: Annotated[bool, Field(alias="MLFLOW_EXPERIMENT_PER_USER")] = True

    @field_validator("family_name_patterns", "regression_thresholds", "price_overrides", mode="before")
    @classmethod
    def _json(cls, value: Any) -> Any:
        if isinstance(value, str):
            return json.loads(value) if value.strip() else None
        return value

    @field_validator("mlflow_tracking", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return value or None

    def rules(self) -> FamilyRules:
        return FamilyRules(self.family_tag_key, tuple(self.family_name_patterns))

    def thresholds(self) -> RegressionThresholds:
        return RegressionThresholds.from_overrides(self.regression_thresholds)


# ------------------------------------------------------------------------------------------ AWS I/O


def job_tags(sagemaker: SageMakerClient, arn: str) -> dict[str, str]:
    """The training job's tags from SageMaker (ListTags), not from the event: the family must come from AWS."""
    tags: dict[str, str] = {}
    kwargs: dict[str, Any] = {"ResourceArn": arn, "MaxResults": 100}
    for _ in range(10):  # a job has at most 50 tags
        page = sagemaker.list_tags(**kwargs)
        tags.update({str(t["Key"]): str(t["Value"]) for t in page.get("Tags", [])})
        if not page.get("NextToken"):
            break
        kwargs["NextToken"] = page["NextToken"]
    return tags


def _get_bytes(s3: S3Client, bucket: str, key: str) -> bytes | None:
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
    except ClientError as exc:
        if error_code(exc) in {"NoSuchKey", "404"}:
            return None
        raise
    try:
        data: bytes = body.read(MAX_ROW_OBJECT_BYTES)
        return data
    finally:
        body.close()


class S3HistoryReader:
    """``profstack.history.regression.HistoryReader`` over the trace bucket's history/ prefix."""

    def __init__(self, s3: S3Client, bucket: str) -> None:
        self._s3 = s3
        self._bucket = bucket

    def recent_jobs(
        self, *, user: str, family: str, before: datetime, lookback_days: int, limit: int
    ) -> list[dict[str, Any]]:
        cutoff = before.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        found: list[dict[str, Any]] = []
        day = before.astimezone(UTC).date()
        for back in range(lookback_days + 1):
            prefix = partition_prefix("jobs", (day - timedelta(days=back)).isoformat(), user)
            for i, obj in enumerate(list_objects(self._s3, self._bucket, prefix)):
                if i >= MAX_JOB_OBJECTS_PER_DAY:
                    logger.warning(
                        "history: too many jobs in one day; baseline search truncated", extra={"prefix": prefix}
                    )
                    break
                data = _get_bytes(self._s3, self._bucket, obj.key)
                for row in from_jsonl(data or b""):
                    if row.get("family") == family and str(row.get("ended_at") or "") < cutoff:
                        found.append(row)
            if len(found) >= limit:
                break  # newest days first: enough candidates
        found.sort(key=lambda r: str(r.get("ended_at") or ""), reverse=True)
        return found[:limit]

    def kernels(self, *, user: str, row: Mapping[str, Any]) -> list[dict[str, Any]]:
        key = f"{partition_prefix('kernels', str(row.get('ended_at') or '')[:10], user)}{row.get('job')}.jsonl"
        return from_jsonl(_get_bytes(self._s3, self._bucket, key) or b"")


def write_rows(s3: S3Client, bucket: str, rows: Mapping[str, Sequence[Mapping[str, Any]]], info: JobInfo) -> list[str]:
    """One object per table; fixed keys, so a re-delivered job overwrites its rows."""
    written = []
    for table, table_rows in rows.items():
        location = S3Location(bucket, row_key(table, info))
        put_bytes(s3, location, to_jsonl(table_rows), content_type="application/x-ndjson")
        written.append(location.uri)
    return written


# ------------------------------------------------------------------------------------------ the two calls


def _warn(summary: dict[str, Any], error_type: str, message: str) -> None:
    summary.setdefault("warnings", []).append(
        {"source": "history", "error_type": error_type, "message": message[:1000], "fatal": False}
    )


def record_history(clients: Clients, ctx: JobContext, summary: dict[str, Any]) -> dict[str, Any]:
    """Cost, family baseline and Regression finding into ``summary``; the job's history rows into S3."""
    henv = HistoryEnv.from_environ()
    if not henv.enabled or summary.get("no_traces"):
        return summary
    try:
        describe = aws.describe_training_job(clients.sagemaker, ctx.job)
        prices = pinned_prices().with_overrides(
            henv.price_overrides.get("usd_per_hour"),
            {k: int(v) for k, v in (henv.price_overrides.get("gpus") or {}).items()},
        )
        arn = describe.get("TrainingJobArn")
        tags = job_tags(clients.sagemaker, str(arn)) if arn else {}
        family = resolve_family(ctx.job, tags, henv.rules())
        info = JobInfo(
            job=ctx.job,
            user=ctx.user,
            ended_at=datetime.fromtimestamp(ctx.end_time_s, UTC),
            status=ctx.status,
            family=family[0] if family else None,
            family_source=family[1] if family else None,
            report_uri=ctx.reports.child("report.html").uri,
        )
        rows = enrich(
            summary,
            info=info,
            resources=JobResources.from_describe(describe),
            prices=prices,
            reader=S3HistoryReader(clients.s3, ctx.trace_bucket),
            thresholds=henv.thresholds(),
        )
        write_rows(clients.s3, ctx.trace_bucket, rows, info)
    except (ClientError, BotoCoreError):
        raise  # transient or access: retried, then dead-lettered (the reason code says which)
    except Exception as exc:  # a defect here must not cost the job its report
        logger.exception("history step failed; the report is written without it")
        _warn(summary, "HistoryFailed", f"history, cost and regression check skipped: {type(exc).__name__}: {exc}")
    return summary


def _put(s3: S3Client, location: S3Location, data: bytes, content_type: str) -> None:
    put_bytes(s3, location, data, content_type=content_type)


def export_mlflow(clients: Clients, ctx: JobContext, summary: Mapping[str, Any], page: str) -> str | None:
    """Log the job to MLflow when configured; the run id, or None. A transient failure propagates (the record
    is retried; the report and the e-mail are already out and are not repeated), a refusal is logged."""
    henv = HistoryEnv.from_environ()
    if not henv.mlflow_tracking or summary.get("no_traces"):
        return None
    target = MlflowTarget.parse(henv.mlflow_tracking)
    credentials = None
    if target.arn:
        import botocore.session

        credentials = botocore.session.get_session().get_credentials()
    client = MlflowClient(target, credentials=credentials)
    cost: Mapping[str, Any] = summary["cost"] if isinstance(summary.get("cost"), Mapping) else {}
    params = {"user": ctx.user, "status": ctx.status, "instance_type": str(cost.get("instance_type") or "")}
    # every MLflow user reads every experiment: the report and summary (kernel, file and host names) go there
    # only when the config asks for it; the run links to the report, which the bucket policy keeps the owner's
    artifacts = (
        {
            "profstack/report.html": (page.encode(), "text/html"),
            "profstack/summary.json": (json.dumps(summary, sort_keys=True).encode(), "application/json"),
        }
        if henv.mlflow_artifacts
        else {}
    )
    experiment = f"{henv.mlflow_experiment}/{ctx.user}" if henv.mlflow_experiment_per_user else henv.mlflow_experiment
    try:
        run = export_job(
            client,
            experiment=experiment,
            job=ctx.job,
            metrics=summary_metrics(summary, job_numbers(summary)),
            params=params,
            tags={"profstack.user": ctx.user, "profstack.report": ctx.reports.child("report.html").uri},
            artifacts=artifacts,
            put_s3=lambda bucket, key, data, ctype: _put(clients.s3, S3Location(bucket, key), data, ctype),
            now_ms=int(time.time() * 1000),
        )
    except MlflowError as exc:
        if exc.transient:
            raise
        logger.error("MLflow export refused; not retried", extra={"error": str(exc)[:1000]})
        return None
    return run.run_id
