"""What a ProfStack deployment costs: standing per month, per finished job, per running job-hour.

Computed from a config and the pinned list prices (`profstack/history/prices.json`, section `services`, and the
Studio app prices TensorBoard runs on), never fetched. The resources counted here (KMS keys, alarms and the
metrics they watch, dashboards, schedules, interface endpoints) are what the stacks synthesize for that config:
`tests/unit/cli/test_cost.py` counts them in the synthesized templates. The per-job work comes from measurements
in docs/processing.md (Lambda GB-seconds per GB of trace, the live analysis's runs). Pure: no AWS calls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from profstack.config import ProfStackConfig

HOURS_PER_MONTH = 730.0

# ---------------------------------------------------------------------------------------- what the stacks hold
#: customer-managed KMS keys of the storage stack (data, logs, notifications)
STORAGE_KMS_KEYS = 3
#: alarms of the processing stack (stacks/components/processing_alarms.py), one metric each
PROCESSING_ALARMS = 6
#: interface endpoints a VpcOnly domain gets (stacks/components/sagemaker_domain.py VPC_ONLY_ENDPOINTS)
VPC_ONLY_INTERFACE_ENDPOINTS = 3

# ---------------------------------------------------------------------------------------- measured work
#: processor GB-seconds per GB of uncompressed trace JSON at 1769 MB (docs/processing.md, "Lambda memory size":
#: 22.8 s per GB on one vCPU)
PROCESSOR_GB_S_PER_TRACE_GB = 39.4
#: a job's fixed processor work: describe, list, write outputs, index, e-mail (~2 s at 1769 MB)
PROCESSOR_GB_S_PER_JOB = 3.5
#: one live-analysis run on a small job (docs/processing.md, "Cost per running job-hour": 1.10 GB-s)
LIVE_GB_S_PER_RUN = 1.10
#: a scheduled 256 MB function's run (reaper, reconcile, dispatcher: about a second each)
SCHEDULED_GB_S_PER_RUN = 0.25
#: per-job alarms per host while a job runs (profstack/jobs/alarms.py KINDS), and the metrics they watch (the
#: CPU-bound one is a metric-math alarm over two)
JOB_ALARMS_PER_HOST = 5
JOB_ALARM_METRICS_PER_HOST = 6
#: custom metrics a reported job publishes with its TrainingJobName dimension (telemetry.publish_metrics)
JOB_METRICS = 11
#: the processor's metrics without the job dimension (what the alarms watch), emitted in each hour a job ends
SERVICE_METRICS = 15
#: the reaper's metrics, emitted every run
REAPER_METRICS = 3
#: S3 requests of one job: PUT (summary, report, timelines, system.json, scalars, index) and GET
JOB_S3_PUTS = 15
JOB_S3_GETS_PLUS_FILES = 10
JOB_KMS_REQUESTS = 30
JOB_SQS_REQUESTS = 3


@cache
def service_prices() -> dict[str, Any]:
    """The `services` section of the pinned price table."""
    data = json.loads(resources.files("profstack.history").joinpath("prices.json").read_text(encoding="utf-8"))
    prices: dict[str, Any] = data["services"]
    return {**prices, "as_of": data["as_of"], "region": data["region"], "verified": data["verified"]}


@dataclass(frozen=True)
class Assumptions:
    jobs_per_month: int = 100
    trace_gb_per_job: float = 1.0
    report_mb_per_job: float = 10.0
    tensorboard_hours_per_user: float = 20.0
    running_hosts: float = 2.0
    running_hours_per_job: float = 6.0


@dataclass
class Line:
    item: str
    quantity: str
    usd: float
    note: str = ""


@dataclass
class Estimate:
    standing: list[Line] = field(default_factory=list)
    per_job: list[Line] = field(default_factory=list)
    per_running_hour: list[Line] = field(default_factory=list)
    assumptions: Assumptions = Assumptions()
    prices: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def total(lines: list[Line]) -> float:
        return sum(line.usd for line in lines)

    @property
    def monthly(self) -> float:
        a = self.assumptions
        return (
            self.total(self.standing)
            + a.jobs_per_month * self.total(self.per_job)
            + a.jobs_per_month * a.running_hours_per_job * self.total(self.per_running_hour)
        )

    def to_json(self) -> dict[str, Any]:
        def rows(lines: list[Line]) -> list[dict[str, Any]]:
            return [{"item": x.item, "quantity": x.quantity, "usd": round(x.usd, 6), "note": x.note} for x in lines]

        return {
            "currency": "USD",
            "prices_as_of": self.prices.get("as_of"),
            "prices_region": self.prices.get("region"),
            "prices_verified": self.prices.get("verified"),
            "assumptions": self.assumptions.__dict__,
            "standing_per_month": {"lines": rows(self.standing), "total": round(self.total(self.standing), 4)},
            "per_finished_job": {"lines": rows(self.per_job), "total": round(self.total(self.per_job), 6)},
            "per_running_job_hour": {
                "lines": rows(self.per_running_hour),
                "total": round(self.total(self.per_running_hour), 6),
            },
            "monthly_total": round(self.monthly, 2),
        }


@dataclass(frozen=True)
class Counts:
    """The billed resources the stacks synthesize for a config."""

    kms_keys: int
    alarms: int
    alarm_metrics: int
    dashboards: int
    schedules: dict[str, int]  # name -> minutes between runs
    interface_endpoints: int  # endpoints x subnets (each endpoint has one network interface per subnet)


def resource_counts(config: ProfStackConfig) -> Counts:
    per_job_alarms = config.alarms.per_job_alarms
    live = config.processing.live.enabled
    alarms = PROCESSING_ALARMS + int(per_job_alarms) + int(live)
    schedules = {"TensorBoard idle reaper": config.tensorboard.reaper_schedule_minutes}
    if per_job_alarms:
        schedules["per-job alarm reconcile"] = config.alarms.reconcile_minutes
    if live:
        schedules["live-analysis dispatcher"] = config.processing.live.interval_minutes
    domain = config.domain
    endpoints = 0
    if domain.mode == "create" and domain.network_access == "VpcOnly":
        endpoints = VPC_ONLY_INTERFACE_ENDPOINTS * len(domain.subnet_ids)
    return Counts(
        kms_keys=STORAGE_KMS_KEYS,
        alarms=alarms,
        alarm_metrics=alarms + int(live),  # the live-analysis alarm adds the analyser's and dispatcher's errors
        dashboards=1 + int(per_job_alarms),
        schedules=schedules,
        interface_endpoints=endpoints,
    )


def _tensorboard(config: ProfStackConfig, a: Assumptions, p: dict[str, Any]) -> Line:
    apps: dict[str, float] = p["studio_app_usd_per_hour"]
    usd = 0.0
    unknown: set[str] = set()
    for user in config.users:
        kind = user.tensorboard_instance_type or config.tensorboard.default_instance_type
        if kind in apps:
            usd += apps[kind] * a.tensorboard_hours_per_user
        else:
            unknown.add(kind)
    note = f"idle apps are deleted after {config.tensorboard.idle_ttl_minutes} min"
    if unknown:
        note += f"; no pinned price for {', '.join(sorted(unknown))} (not counted)"
    return Line("TensorBoard apps", f"{len(config.users)} user(s) x {a.tensorboard_hours_per_user:g} h", usd, note)


def estimate(config: ProfStackConfig, assumptions: Assumptions | None = None) -> Estimate:
    a = assumptions or Assumptions()
    p = service_prices()
    counts = resource_counts(config)
    gb_s = float(p["lambda_x86_usd_per_gb_second"])
    request = float(p["lambda_usd_per_million_requests"]) / 1e6
    metric_month = float(p["cloudwatch_custom_metric_usd_per_month"])
    runs = sum(HOURS_PER_MONTH * 60 / minutes for minutes in counts.schedules.values())
    hours_with_jobs = min(float(a.jobs_per_month), HOURS_PER_MONTH)
    out = Estimate(assumptions=a, prices=p)
    out.standing = [
        Line("KMS keys", f"{counts.kms_keys}", counts.kms_keys * float(p["kms_usd_per_key_month"])),
        Line(
            "CloudWatch alarms",
            f"{counts.alarms} ({counts.alarm_metrics} metrics)",
            counts.alarm_metrics * float(p["cloudwatch_alarm_usd_per_metric_month"]),
        ),
        Line(
            "CloudWatch dashboards",
            f"{counts.dashboards}",
            counts.dashboards * float(p["cloudwatch_dashboard_usd_per_month"]),
            f"free while the account has at most {p['cloudwatch_free_dashboards_per_account']} dashboards in all",
        ),
        Line(
            "scheduled functions",
            ", ".join(f"{name} every {m} min" for name, m in counts.schedules.items()),
            runs * (SCHEDULED_GB_S_PER_RUN * gb_s + request),
        ),
        Line(
            "custom metrics",
            f"{SERVICE_METRICS} pipeline + {REAPER_METRICS} reaper",
            (SERVICE_METRICS * hours_with_jobs / HOURS_PER_MONTH + REAPER_METRICS) * metric_month,
            "pipeline metrics are billed for the hours in which jobs end",
        ),
        Line(
            "VPC interface endpoints",
            f"{counts.interface_endpoints} endpoint-subnets",
            counts.interface_endpoints * float(p["vpc_interface_endpoint_usd_per_az_hour"]) * HOURS_PER_MONTH,
            "VpcOnly domains only",
        ),
        _tensorboard(config, a, p),
    ]
    lambda_gb_s = PROCESSOR_GB_S_PER_TRACE_GB * a.trace_gb_per_job + PROCESSOR_GB_S_PER_JOB
    emails = max(1, len(config.notifications.emails))
    out.per_job = [
        Line(
            "processor Lambda",
            f"{lambda_gb_s:.1f} GB-s ({a.trace_gb_per_job:g} GB of trace JSON)",
            lambda_gb_s * gb_s + request,
        ),
        Line(
            "S3 requests",
            f"{JOB_S3_PUTS} PUT, {JOB_S3_GETS_PLUS_FILES}+ GET",
            JOB_S3_PUTS * float(p["s3_put_usd_per_1000"]) / 1000
            + JOB_S3_GETS_PLUS_FILES * float(p["s3_get_usd_per_1000"]) / 1000,
        ),
        Line("KMS requests", f"{JOB_KMS_REQUESTS}", JOB_KMS_REQUESTS * float(p["kms_usd_per_10k_requests"]) / 10_000),
        Line(
            "queue, idempotency, e-mail",
            f"{JOB_SQS_REQUESTS} SQS, 3 DynamoDB, {emails} e-mail(s)",
            JOB_SQS_REQUESTS * float(p["sqs_usd_per_million_requests"]) / 1e6
            + 2 * float(p["dynamodb_on_demand_write_usd_per_million"]) / 1e6
            + float(p["dynamodb_on_demand_read_usd_per_million"]) / 1e6
            + emails * float(p["sns_email_usd_per_100k"]) / 1e5,
        ),
        Line("per-job metrics", f"{JOB_METRICS} for one hour", JOB_METRICS * metric_month / HOURS_PER_MONTH),
        Line(
            "report storage, first month",
            f"{a.report_mb_per_job:g} MB",
            a.report_mb_per_job / 1024 * float(p["s3_standard_usd_per_gb_month"]),
            f"kept {config.retention.reports_expire_after_days} days",
        ),
    ]
    alarm_hour = float(p["cloudwatch_alarm_usd_per_metric_month"]) / HOURS_PER_MONTH
    out.per_running_hour = []
    if config.alarms.per_job_alarms:
        out.per_running_hour.append(
            Line(
                "per-job alarms",
                f"{JOB_ALARMS_PER_HOST} per host x {a.running_hosts:g} hosts",
                JOB_ALARM_METRICS_PER_HOST * a.running_hosts * alarm_hour,
            )
        )
    if config.processing.live.enabled:
        per_hour = 60 / config.processing.live.interval_minutes
        out.per_running_hour.append(
            Line(
                "live analysis",
                f"{per_hour:g} runs",
                per_hour * (LIVE_GB_S_PER_RUN * gb_s + request),
                "grows with the trace uploaded so far (docs/processing.md)",
            )
        )
    return out


def format_text(est: Estimate) -> str:
    p = est.prices
    a = est.assumptions
    head = f"USD at {p.get('region')} list prices of {p.get('as_of')}" + (
        "" if p.get("verified") else " (transcribed, not verified: profstack/history/prices.json)"
    )
    lines = [head, ""]

    def section(title: str, rows: list[Line], digits: int) -> None:
        lines.append(title)
        width = max([len(r.item) for r in rows] + [10])
        for r in rows:
            note = f"  ({r.note})" if r.note else ""
            lines.append(f"  {r.item:<{width}}  {r.usd:>12.{digits}f}  {r.quantity}{note}")
        lines.append(f"  {'total':<{width}}  {Estimate.total(rows):>12.{digits}f}")
        lines.append("")

    section("Standing, per month:", est.standing, 2)
    section("Per finished job:", est.per_job, 5)
    if est.per_running_hour:
        section("Per running job-hour:", est.per_running_hour, 5)
    lines.append(
        f"A month of {a.jobs_per_month} jobs ({a.trace_gb_per_job:g} GB of trace each, {a.running_hours_per_job:g} h "
        f"on {a.running_hosts:g} hosts): about {est.monthly:.2f} USD, training itself not included."
    )
    return "\n".join(lines) + "\n"
