"""The ProfStack configuration model: one YAML file, validated once.

`app.py` is the only reader in the CDK app; the CLI reads the same file through
`load_config`. Every error names the field path, e.g. `users[1].email: ...`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TextIO

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, field_validator, model_validator

from profstack import layout
from profstack.analysis.errors import AnalysisOptionsError
from profstack.analysis.options import RuleThresholds
from profstack.history.family import DEFAULT_NAME_PATTERNS, DEFAULT_TAG_KEY, FamilyRuleError, check_pattern
from profstack.history.mlflow import MlflowTarget, MlflowTargetError
from profstack.history.regression import RegressionThresholdError, RegressionThresholds
from profstack.jobs.instance_rules import SYSTEM_RULE_DEFAULTS, SystemThresholdError, check_system_thresholds
from profstack.tensorboard.names import DOMAIN_ID_PATTERN

DEFAULT_CONFIG_PATH = Path("config/profstack.yaml")
#: names the config every command (and app.py) reads when none is given: one deployment's file
CONFIG_ENV = "PROFSTACK_CONFIG"


def default_config_path() -> Path:
    """$PROFSTACK_CONFIG, else config/profstack.yaml (the example config in a checkout)."""
    return Path(os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_PATH)


# Regions where the SageMaker docs list managed TensorBoard (docs/platform-facts.md A2).
TENSORBOARD_DOCUMENTED_REGIONS = frozenset({"us-east-1", "us-east-2", "us-west-2", "eu-central-1", "eu-west-1"})

# CloudWatch Logs accepts only these retention values (days).
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)

# Field(pattern=...) runs pydantic's Rust regex engine, where `$` is the end of the text; a Python `re`
# check must use fullmatch (Python's `$` also matches before a trailing newline: "bob\n").
_NAME_RE = r"^[a-z][a-z0-9-]{0,62}$"
_EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_INSTANCE_RE = r"^ml\.[a-z0-9]+\.[a-z0-9]+$"

#: JSON Schema of processing.rule_thresholds: every rule threshold by name, nothing else.
_RULE_THRESHOLDS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Overrides of the analysis rule thresholds (finite numbers >= 0); see docs for each rule.",
    "properties": {name: {"type": "number", "minimum": 0} for name in RuleThresholds.names()},
    "additionalProperties": False,
    "default": {},
}

#: JSON Schema of processing.system_rule_thresholds: Debugger's system rules (profstack/jobs/instance_rules.py).
_SYSTEM_RULE_THRESHOLDS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Overrides of the system rules' thresholds (CloudWatch instance metrics; finite numbers >= 0): "
    "see docs/processing.md, system metrics.",
    "properties": {name: {"type": "number", "minimum": 0} for name in SYSTEM_RULE_DEFAULTS},
    "additionalProperties": False,
    "default": {},
}

PositiveDays = Annotated[int, Field(gt=0, le=36500)]


class ConfigError(Exception):
    """A configuration problem, rendered as one line: `<field path>: <problem>`. ``problems``: every problem,
    one line each (the message names the first and how many more)."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


def _check_email(value: str) -> str:
    if not _EMAIL_RE.fullmatch(value):
        raise ValueError(f"'{value}' is not a valid e-mail address")
    return value.lower()


class Environment(_Model):
    """Target account and region; leave both empty for an env-agnostic app."""

    account: Annotated[str, Field(pattern=r"^\d{12}$")] | None = None
    region: Annotated[str, Field(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$")] | None = None

    @model_validator(mode="after")
    def _both_or_neither(self) -> Environment:
        if (self.account is None) != (self.region is None):
            raise ValueError("set both account and region, or neither (env-agnostic)")
        return self


class RawTraceRetention(_Model):
    infrequent_access_after_days: Annotated[int, Field(ge=30)] = 30  # S3 minimum for STANDARD_IA
    glacier_ir_after_days: PositiveDays = 90
    expire_after_days: PositiveDays = 365

    @model_validator(mode="after")
    def _ordered(self) -> RawTraceRetention:
        if not self.infrequent_access_after_days < self.glacier_ir_after_days < self.expire_after_days:
            raise ValueError(
                "days must increase: infrequent_access_after_days < glacier_ir_after_days < expire_after_days"
            )
        return self


class Retention(_Model):
    raw_traces: RawTraceRetention = RawTraceRetention()
    tensorboard_logs_expire_after_days: PositiveDays = 365
    reports_expire_after_days: PositiveDays = 1095
    noncurrent_versions_expire_after_days: PositiveDays = 30
    access_logs_expire_after_days: PositiveDays = 365
    log_retention_days: int = 90

    @field_validator("log_retention_days")
    @classmethod
    def _valid_log_retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"{value} is not a CloudWatch Logs retention value; use one of {LOG_RETENTION_DAYS}")
        return value

    @model_validator(mode="after")
    def _reports_outlive_traces(self) -> Retention:
        if self.tensorboard_logs_expire_after_days <= self.raw_traces.glacier_ir_after_days:
            raise ValueError(
                "tensorboard_logs_expire_after_days must be > raw_traces.glacier_ir_after_days "
                "(TensorBoard logs follow the same storage tiers)"
            )
        if self.reports_expire_after_days < self.raw_traces.expire_after_days:
            raise ValueError(
                "reports_expire_after_days must be >= raw_traces.expire_after_days (reports are kept longer)"
            )
        return self


# An IAM role or user ARN, exact (no wildcards): the bucket policy names these principals.
_PRINCIPAL_ARN_RE = r"^arn:aws(-cn|-us-gov)?:iam::\d{12}:(role|user)/[A-Za-z0-9+=,.@_/-]{1,512}$"
PrincipalArn = Annotated[str, Field(pattern=_PRINCIPAL_ARN_RE)]


class Storage(_Model):
    """The trace bucket's resource-policy backstop (stacks/components/trace_store.py, bucket_boundary)."""

    break_glass_principal_arns: Annotated[
        list[PrincipalArn],
        Field(
            max_length=10,
            description="IAM roles/users (exact ARNs) that may read and write every user's traces/, "
            "tensorboard/ and reports/ prefixes besides the processing roles, e.g. an incident-response role",
        ),
    ] = []
    trace_writer_principal_arns: Annotated[
        list[PrincipalArn],
        Field(
            max_length=20,
            description="Training-job roles outside ProfStack that may also write under every user's traces/ "
            "and tensorboard/ (opt-in: whatever they write is read as that user's evidence). By default only "
            "each user's own ProfStack roles (their own folders), the processing roles and break-glass write there",
        ),
    ] = []

    @field_validator("break_glass_principal_arns", "trace_writer_principal_arns")
    @classmethod
    def _unique_arns(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("principal ARNs must be unique")
        return value


class Legacy(_Model):
    rule_output_expire_after_days: PositiveDays = 30


class User(_Model):
    name: Annotated[str, Field(pattern=_NAME_RE, description="lower-case; used in S3 keys and profile names")]
    email: str
    tensorboard_instance_type: Annotated[str, Field(pattern=_INSTANCE_RE)] | None = None
    principals: Annotated[
        list[PrincipalArn],
        Field(
            max_length=10,
            description="IAM roles or users (exact ARNs) that are this person alone: they may assume the user's "
            "report reader role without the principal tag <tensorboard.user_tag_key>=<name>. Never a role that "
            "several people assume (an IAM Identity Center permission set's role): use session tags for those",
        ),
    ] = []

    @field_validator("email")
    @classmethod
    def _valid_email(cls, value: str) -> str:
        return _check_email(value)


class CreateDomain(_Model):
    """Create a SageMaker domain (AuthMode IAM, home EFS) in the given VPC."""

    mode: Literal["create"]
    vpc_id: Annotated[str, Field(pattern=r"^vpc-[0-9a-f]{8,17}$")]
    subnet_ids: Annotated[list[Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]], Field(min_length=1)]
    network_access: Literal["PublicInternetOnly", "VpcOnly"] = "PublicInternetOnly"
    s3_gateway_route_table_ids: Annotated[
        list[Annotated[str, Field(pattern=r"^rtb-[0-9a-f]{8,17}$")]],
        Field(
            description="VpcOnly: route tables that get an S3 gateway endpoint (TensorBoard reads its logs "
            "from S3); leave empty when the VPC already has one"
        ),
    ] = []

    @field_validator("subnet_ids")
    @classmethod
    def _unique_subnets(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("subnet ids must be unique")
        return value

    @model_validator(mode="after")
    def _gateway_needs_vpc_only(self) -> CreateDomain:
        if self.s3_gateway_route_table_ids and self.network_access != "VpcOnly":
            raise ValueError("s3_gateway_route_table_ids is only used with network_access: VpcOnly")
        return self


class ImportDomain(_Model):
    """Use an existing SageMaker domain."""

    mode: Literal["import"]
    domain_id: Annotated[str, Field(pattern=DOMAIN_ID_PATTERN, description="e.g. d-abcdef123456")]


class TensorBoard(_Model):
    default_instance_type: Annotated[str, Field(pattern=_INSTANCE_RE)] = "ml.r5.large"
    idle_ttl_minutes: Annotated[int, Field(ge=15, le=10080)] = 120
    reaper_schedule_minutes: Annotated[int, Field(ge=5, le=1440)] = 15
    reaper_dry_run: bool = False
    user_tag_key: Annotated[str, Field(min_length=1, max_length=128)] = "profstack:user"


class JobTagFilter(_Model):
    key: Annotated[str, Field(min_length=1, max_length=128)]
    value: Annotated[str, Field(min_length=1, max_length=256)]


class OwnerTagGuard(_Model):
    """Opt-in IAM guardrail (stacks/components/owner_tag_guard.py, docs/security.md): CreateTrainingJob and
    CreateHyperParameterTuningJob must carry <tensorboard.user_tag_key> equal to the caller's own principal
    tag of that key, and the tag cannot be added, changed or removed on an existing job."""

    enabled: bool = False
    #: IAM role names (in this account) the guardrail policy is attached to; empty: attach it yourself.
    role_names: list[Annotated[str, Field(pattern=r"^[\w+=,.@-]{1,64}$")]] = []


class LiveAnalysis(_Model):
    """Analysis while a training job runs (lambdas/live_analysis, docs/processing.md "While a job runs")."""

    #: off: no live analysis at all (no function, no schedule is deployed)
    enabled: bool = True
    #: how often each running job's traces so far are analysed
    interval_minutes: Annotated[int, Field(ge=5, le=1440)] = 15
    #: a trace object younger than this is taken to be still written, and skipped until the next run
    settle_seconds: Annotated[int, Field(ge=0, le=3600)] = 120
    #: at most this many trace files per run: the newest (what the job does now); the report says what was left out
    max_files: Annotated[int, Field(ge=1, le=1000)] = 64


_RULE_ID_RE = r"^[A-Z][A-Za-z0-9]{1,63}$"


class Actions(_Model):
    """What a finding does, per rule, as Debugger's rule actions (profstack/actions.py). `notify` (default) e-mails;
    `stop` stops the training job, only when `stop_enabled` and the job carries `profstack:actions=stop`."""

    #: stopping jobs is opt-in for the deployment; without it a `stop` rule only notifies
    stop_enabled: bool = False
    #: rule id -> notify | stop (rules not listed: notify)
    rules: dict[Annotated[str, Field(pattern=_RULE_ID_RE)], Literal["notify", "stop"]] = {}
    #: the lowest severity of a finding that stops a job (warning findings and above always notify)
    stop_min_severity: Literal["warning", "critical"] = "critical"


class Processing(_Model):
    job_tag_filter: JobTagFilter | None = None
    #: templates, `{user}` and `{job}` as whole segments: s3://team-bucket/profiles/{user}/{job}/
    extra_trace_prefixes: list[
        Annotated[str, Field(pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/.*\{user\}.*\{job\}.*$")]
    ] = []
    owner_tag_guard: OwnerTagGuard = OwnerTagGuard()
    live: LiveAnalysis = LiveAnalysis()  # issue 36: analysis while a job runs
    actions: Actions = Actions()  # issue 36: notify or stop on a finding
    #: whose a job is (docs/security.md, "Who owns a job"). "verified" (default): the owner tag counts only when
    #: something the job's creator cannot choose confirms it: the job runs as that user's ProfStack execution role
    #: (its IAM path), or the owner-tag guard is on and the job was created directly (not by Pipelines or
    #: AutoML, which the guard cannot see). Otherwise the report is filed under _unowned for an administrator.
    #: "tag": trust the tag alone (anyone who can tag a job can file reports as anyone: not recommended).
    ownership: Literal["verified", "tag"] = "verified"
    # 1769 MB = one full vCPU, all the single-threaded processor can use (docs/processing.md "Lambda memory size")
    lambda_memory_mb: Annotated[int, Field(ge=512, le=10240)] = 1769
    lambda_timeout_seconds: Annotated[int, Field(ge=60, le=900)] = 900
    reserved_concurrency: Annotated[int, Field(ge=1, le=1000)] = 5
    #: the fan-out's AnalyzeFile function: at most `reserved_concurrency` fan-outs run at once (one per processor
    #: invocation), each at most 20 files wide (its Map's MaxConcurrency), so 40 lets two run at full width and
    #: queues the rest (a throttled file is retried with backoff by the state machine). One big job can no longer
    #: take the account's whole concurrency. The aggregate step reserves `reserved_concurrency` (one per fan-out).
    fanout_reserved_concurrency: Annotated[int, Field(ge=1, le=1000)] = 40
    max_receive_count: Annotated[int, Field(ge=1, le=20)] = 3
    fanout_file_threshold: Annotated[int, Field(ge=1)] = 8
    #: the most trace files one job's report covers (the first by key); the rest are listed as left out
    max_files_per_job: Annotated[int, Field(ge=1, le=100_000)] = 5000
    fanout_bytes_threshold_mb: Annotated[int, Field(ge=1)] = 2048
    single_lambda_max_file_mb: Annotated[int, Field(ge=1)] = 4096
    #: a file with more events (sampled from its head) goes to the Processing job, whatever its size says
    single_lambda_max_events: Annotated[int, Field(ge=1)] = 100_000_000
    processing_job_instance_type: Annotated[str, Field(pattern=_INSTANCE_RE)] = "ml.m5.4xlarge"
    top_k_kernels: Annotated[int, Field(ge=1, le=100)] = 15
    #: time window of the trimmed Perfetto timelines (profstack.analysis.trim): median (the median step
    #: with its neighbours, plus the slowest step), slowest, all, or A:B (ProfilerStep#A..#B)
    timeline_window: Annotated[
        str,
        Field(
            pattern=r"^(median|slowest|all|\d+(:\d+)?)$",
            description="Window of the trimmed Perfetto timelines: median, slowest, all or A:B (step numbers).",
        ),
    ] = "median"
    #: overrides of the analysis engine's rule thresholds (profstack.analysis.options.RuleThresholds)
    rule_thresholds: Annotated[dict[str, float], WithJsonSchema(_RULE_THRESHOLDS_SCHEMA)] = {}

    @field_validator("extra_trace_prefixes")
    @classmethod
    def _prefix_templates(cls, value: list[str]) -> list[str]:
        try:
            checked = [layout.check_prefix_template(v) for v in value]
        except layout.LayoutError as exc:
            raise ValueError(str(exc)) from None
        if len(set(checked)) != len(checked):
            raise ValueError("extra trace prefixes must be unique")
        return checked

    @field_validator("rule_thresholds", mode="before")
    @classmethod
    def _known_rule_thresholds(cls, value: object) -> object:
        # The engine's own check, so a typo fails `config check` and synth, not every job in the Lambda.
        if isinstance(value, Mapping):
            try:
                RuleThresholds.from_overrides(value)
            except AnalysisOptionsError as exc:
                raise ValueError(str(exc)) from None
        return value

    #: overrides of the system rules' thresholds (profstack.jobs.instance_rules.SYSTEM_RULE_DEFAULTS)
    system_rule_thresholds: Annotated[dict[str, float], WithJsonSchema(_SYSTEM_RULE_THRESHOLDS_SCHEMA)] = {}

    @field_validator("system_rule_thresholds", mode="before")
    @classmethod
    def _known_system_rule_thresholds(cls, value: object) -> object:
        # The processor's own check (its environment model runs it again at cold start).
        if isinstance(value, Mapping):
            try:
                check_system_thresholds(value)
            except SystemThresholdError as exc:
                raise ValueError(str(exc)) from None
        return value

    include_last_step: Annotated[
        bool,
        Field(
            description="keep GPU work launched in the last ProfilerStep; default false: dropped, like HTA "
            "(include_last_profiler_step=False)"
        ),
    ] = False


class Alarms(_Model):
    gpu_utilization_low_percent: Annotated[float, Field(gt=0, le=100)] = 30.0
    gpu_memory_high_percent: Annotated[float, Field(gt=0, le=100)] = 95.0
    gpu_idle_high_percent: Annotated[float, Field(gt=0, le=100)] = 40.0
    launch_delay_p95_high_us: Annotated[float, Field(gt=0)] = 500.0
    dataloader_high_percent: Annotated[float, Field(gt=0, le=100)] = 20.0
    evaluation_periods: Annotated[int, Field(ge=1, le=100)] = 15  # minutes, for the live training-job alarms
    gpus_per_host: Annotated[
        int | None,
        Field(
            ge=1,
            le=64,
            description="deprecated and ignored: each host's GPU count now comes from its instance type "
            "(profstack/jobs/instances.py)",
        ),
    ] = None
    dlq_messages_threshold: Annotated[int, Field(ge=1)] = 1
    # Per-job alarms (lambdas/alarm_manager): created per host while a training job runs, deleted after.
    per_job_alarms: bool = True
    warmup_minutes: Annotated[
        int, Field(ge=0, le=1440, description="no low-GPU or CPU-bound alarm before a job has trained this long")
    ] = 20
    host_disk_high_percent: Annotated[float, Field(gt=0, le=100)] = 90.0
    host_memory_high_percent: Annotated[float, Field(gt=0, le=100)] = 90.0
    cpu_high_percent: Annotated[float, Field(gt=0, le=100, description="per vCPU; Debugger CPUBottleneck")] = 90.0
    cpu_bound_gpu_low_percent: Annotated[float, Field(gt=0, le=100, description="per GPU; Debugger CPUBottleneck")] = (
        10.0
    )
    reconcile_minutes: Annotated[
        int, Field(ge=5, le=1440, description="how often orphaned per-job alarms are removed and missed jobs added")
    ] = 15


class Notifications(_Model):
    emails: list[str] = []

    @field_validator("emails")
    @classmethod
    def _valid_emails(cls, value: list[str]) -> list[str]:
        checked = [_check_email(v) for v in value]
        if len(set(checked)) != len(checked):
            raise ValueError("notification e-mails must be unique")
        return checked


#: JSON Schema of history.regression: every regression threshold by name, nothing else.
_REGRESSION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Overrides of the regression thresholds (profstack.history.regression.RegressionThresholds): "
    "step_time_pct, launch_delay_pct (relative %), gpu_idle_points, dataloader_points, kernel_share_points "
    "(percentage points), new_kernel_min_pct, launch_delay_floor_us, baseline_jobs (N, the median of the last "
    "N jobs), min_baseline_jobs, lookback_days.",
    "properties": {name: {"type": "number", "minimum": 0} for name in RegressionThresholds.names()},
    "additionalProperties": False,
    "default": {},
}


class Family(_Model):
    """How a job's family is found: its tag, else the first job-name rule that matches."""

    tag_key: Annotated[str, Field(min_length=1, max_length=128)] = DEFAULT_TAG_KEY
    name_patterns: Annotated[
        list[str],
        Field(
            description="regular expressions over the job name; the family is the (?P<family>...) group, else "
            "group 1, else the whole match. Default: SageMaker's <base>-YYYY-MM-DD-HH-MM-SS-mmm names."
        ),
    ] = list(DEFAULT_NAME_PATTERNS)

    @field_validator("name_patterns")
    @classmethod
    def _valid_patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                check_pattern(pattern)
            except FamilyRuleError as exc:
                raise ValueError(str(exc)) from None
        return value


class Prices(_Model):
    """Overrides of the pinned on-demand price table (profstack/history/prices.json)."""

    usd_per_hour: Annotated[
        dict[Annotated[str, Field(pattern=_INSTANCE_RE)], Annotated[float, Field(ge=0)]],
        Field(description="instance type -> USD per instance-hour (e.g. your negotiated or regional price)"),
    ] = {}
    gpus: Annotated[
        dict[Annotated[str, Field(pattern=_INSTANCE_RE)], Annotated[int, Field(ge=0, le=64)]],
        Field(description="instance type -> GPUs per instance, for types the table lacks"),
    ] = {}


class Mlflow(_Model):
    """Optional export of each job's summary metrics and report to MLflow."""

    tracking: Annotated[
        str | None,
        Field(
            description="a SageMaker managed MLflow tracking-server ARN (SigV4) or an http(s) URI (no auth); "
            "unset: no export"
        ),
    ] = None
    experiment: Annotated[str, Field(min_length=1, max_length=256)] = "profstack"
    #: MLflow has no per-user permissions of its own: every user of the tracking server reads every experiment.
    #: So by default a run holds numbers and the report's S3 location (readable only by its owner: the bucket
    #: policy), never the report or summary themselves (kernel, file and host names); and each user's runs are in
    #: an experiment of their own, "<experiment>/<user>", which a server with permissions (SageMaker managed MLflow
    #: with IAM conditions, or MLflow's auth plugin) can restrict. docs/security.md says what MLflow users see.
    artifacts: Annotated[
        bool,
        Field(description="also upload report.html and summary.json to MLflow (every MLflow user can read them)"),
    ] = False
    experiment_per_user: bool = True
    artifact_s3_uri: Annotated[
        str | None,
        Field(
            pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$",
            description="the tracking server's S3 artifact store (s3://bucket/prefix): the processor may write "
            "the report there; unset for a server that proxies artifacts",
        ),
    ] = None

    @field_validator("tracking")
    @classmethod
    def _valid_tracking(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                MlflowTarget.parse(value)
            except MlflowTargetError as exc:
                raise ValueError(str(exc)) from None
        return value


class History(_Model):
    """Across jobs: history rows for Athena, baselines and regressions, cost, MLflow (issue 16)."""

    enabled: bool = True
    family: Family = Family()
    regression: Annotated[dict[str, float], WithJsonSchema(_REGRESSION_SCHEMA)] = {}
    prices: Prices = Prices()
    mlflow: Mlflow = Mlflow()

    @field_validator("regression", mode="before")
    @classmethod
    def _known_regression_thresholds(cls, value: object) -> object:
        if isinstance(value, Mapping):
            try:
                RegressionThresholds.from_overrides(value)
            except RegressionThresholdError as exc:
                raise ValueError(str(exc)) from None
        return value


class ProfStackConfig(_Model):
    prefix: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{1,20}$", description="name prefix for stacks and resources")]
    environment: Environment = Environment()
    retention: Retention = Retention()
    legacy: Legacy = Legacy()
    storage: Storage = Storage()
    domain: Annotated[CreateDomain | ImportDomain, Field(discriminator="mode")]
    tensorboard: TensorBoard = TensorBoard()
    users: list[User] = []
    processing: Processing = Processing()
    alarms: Alarms = Alarms()
    notifications: Notifications = Notifications()
    history: History = History()

    @field_validator("users")
    @classmethod
    def _unique_users(cls, users: list[User]) -> list[User]:
        seen: set[str] = set()
        owners: dict[str, str] = {}
        for user in users:
            if user.name in seen:
                raise ValueError(f"duplicate user '{user.name}'")
            seen.add(user.name)
            for arn in user.principals:
                if arn in owners:
                    # one identity acting as two users would be both
                    raise ValueError(f"principal {arn} is listed for both '{owners[arn]}' and '{user.name}'")
                owners[arn] = user.name
        return users

    def user(self, name: str) -> User:
        for user in self.users:
            if user.name == name:
                return user
        raise ConfigError(f"users: no user named '{name}'")

    def warnings(self) -> list[str]:
        """Non-fatal findings worth telling the admin about."""
        found: list[str] = []
        region = self.environment.region
        if region is not None and region not in TENSORBOARD_DOCUMENTED_REGIONS:
            found.append(
                f"environment.region: managed TensorBoard is not documented in {region} "
                f"(documented: {', '.join(sorted(TENSORBOARD_DOCUMENTED_REGIONS))})"
            )
        if self.alarms.gpus_per_host is not None:
            found.append(
                "alarms.gpus_per_host: deprecated and ignored; per-GPU thresholds now divide by each host's own "
                "GPU count (profstack/jobs/instances.py)"
            )
        if not self.notifications.emails:
            found.append("notifications.emails: empty; findings and alarms will reach no one by e-mail")
        actions = self.processing.actions
        stop_rules = sorted(rule for rule, action in actions.rules.items() if action == "stop")
        if stop_rules and not actions.stop_enabled:
            found.append(
                f"processing.actions.rules: {', '.join(stop_rules)} say stop, but stop_enabled is false: they only "
                "notify"
            )
        if (stop_rules or actions.stop_enabled) and not self.processing.live.enabled:
            found.append("processing.actions: rules act only while a job runs, and processing.live.enabled is false")
        return found


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in {"create", "import"} and path.endswith("domain"):
            continue  # discriminator tag, not a field the user wrote
        else:
            path += f".{part}" if path else str(part)
    return path or "<root>"


def format_validation_error(error: ValidationError) -> str:
    """One line per problem, the first one first: `field.path: message`."""
    first = error.errors()[0]
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    elif first["type"] == "missing":
        message = "required field is missing"
    message = message.removeprefix("Value error, ")
    more = len(error.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{_field_path(tuple(first['loc']))}: {message}{suffix}"


def validation_problems(error: ValidationError) -> list[str]:
    """Every problem of a validation error, one line each: `field.path: message`."""
    lines = []
    for problem in error.errors():
        message = problem["msg"]
        if problem["type"] == "extra_forbidden":
            message = "unknown key"
        elif problem["type"] == "missing":
            message = "required field is missing"
        lines.append(f"{_field_path(tuple(problem['loc']))}: {message.removeprefix('Value error, ')}")
    return lines


def parse_config(data: Mapping[str, Any] | None, *, source: str = "config") -> ProfStackConfig:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the file must hold a YAML mapping at the top level")
    try:
        return ProfStackConfig.model_validate(dict(data))
    except ValidationError as exc:
        problems = [f"{source}: {line}" for line in validation_problems(exc)]
        raise ConfigError(f"{source}: {format_validation_error(exc)}", problems) from None


# ------------------------------------------------------------------------------------------ example values
# What the example config (config/profstack.yaml), the docs and AWS's own documentation use as placeholders.
# A config holding one validates (the shapes are right) but cannot deploy: `config check` and `cdk deploy`
# refuse it (app.py; `make synth` and `make demo` synthesize the example on purpose, with a warning).
EXAMPLE_RESOURCE_IDS = frozenset(
    {
        "vpc-0a1b2c3d4e5f60718",
        "subnet-0a1b2c3d4e5f60718",
        "subnet-0f1e2d3c4b5a69788",
        "rtb-0a1b2c3d4e5f60718",
        "d-abcdef123456",
        "d-xxxxxxxxxxxx",
    }
)
# ids whose hex part is a run anyone types as a placeholder: 0000..., 1234..., 0123..., abcdef..., xxxx...
_PLACEHOLDER_ID_RE = re.compile(
    r"(vpc|subnet|rtb|d)-(0+|0?123456789abcdef[0-9a-f]*|0?1234567[0-9a-f]*|abcdef[0-9a-f]*|0a1b2c3d[0-9a-f]*|x+)"
)
#: e-mail domains reserved for documentation and testing (RFC 2606, RFC 6761): no mailbox there exists
RESERVED_EMAIL_DOMAINS = frozenset({"example.com", "example.net", "example.org"})
RESERVED_EMAIL_TLDS = frozenset({"example", "test", "invalid", "localhost"})
#: account ids documentation uses (AWS's own docs: 123456789012, 111122223333, 444455556666)
EXAMPLE_ACCOUNT_IDS = frozenset({"123456789012", "111122223333", "444455556666", "012345678901", "210987654321"})
_ARN_ACCOUNT_RE = re.compile(r"^arn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:(\d{12}):")

_NOT_YOURS = "the example config's placeholder, not a resource of yours"


def _example_id(value: str) -> bool:
    return value in EXAMPLE_RESOURCE_IDS or bool(_PLACEHOLDER_ID_RE.fullmatch(value))


def _example_email(value: str) -> bool:
    domain = value.rpartition("@")[2].lower()
    return (
        domain in RESERVED_EMAIL_DOMAINS
        or any(domain.endswith(f".{d}") for d in RESERVED_EMAIL_DOMAINS)
        or (domain.rpartition(".")[2] in RESERVED_EMAIL_TLDS)
    )


def _example_account(value: str) -> bool:
    return value in EXAMPLE_ACCOUNT_IDS or len(set(value)) == 1


def example_value_problems(config: ProfStackConfig) -> list[str]:
    """One line per value that is a placeholder (the example VPC and subnets, example.com e-mails, documentation
    account ids), each naming the field and what to do; empty for a config that can deploy."""
    return [*_example_network(config.domain), *_example_emails(config), *_example_accounts(config)]


def _example_network(domain: CreateDomain | ImportDomain) -> list[str]:
    init = "run `profstack init` (docs/operate.md, Configure)"
    if isinstance(domain, ImportDomain):
        if _example_id(domain.domain_id):
            return [f"domain.domain_id: {domain.domain_id} is {_NOT_YOURS}: set your domain's id or {init}"]
        return []
    found = []
    if _example_id(domain.vpc_id):
        found.append(f"domain.vpc_id: {domain.vpc_id} is {_NOT_YOURS}: set your VPC's id or {init}")
    for i, subnet in enumerate(domain.subnet_ids):
        if _example_id(subnet):
            found.append(f"domain.subnet_ids[{i}]: {subnet} is {_NOT_YOURS}: set a subnet of your VPC or {init}")
    for i, table in enumerate(domain.s3_gateway_route_table_ids):
        if _example_id(table):
            found.append(f"domain.s3_gateway_route_table_ids[{i}]: {table} is {_NOT_YOURS}: set your route table")
    return found


def _example_emails(config: ProfStackConfig) -> list[str]:
    found = [
        f"users[{i}].email: {user.email} is a documentation address (no mailbox exists): set {user.name}'s real e-mail"
        for i, user in enumerate(config.users)
        if _example_email(user.email)
    ]
    found += [
        f"notifications.emails[{i}]: {email} is a documentation address: findings and alarms would reach no one; "
        "set your on-call address"
        for i, email in enumerate(config.notifications.emails)
        if _example_email(email)
    ]
    return found


def _example_accounts(config: ProfStackConfig) -> list[str]:
    found = []
    account = config.environment.account
    if account is not None and _example_account(account):
        found.append(
            f"environment.account: {account} is a documentation account id: set yours (aws sts get-caller-identity)"
        )
    arns = {
        "storage.break_glass_principal_arns": config.storage.break_glass_principal_arns,
        "storage.trace_writer_principal_arns": config.storage.trace_writer_principal_arns,
        **{f"users[{i}].principals": user.principals for i, user in enumerate(config.users)},
    }
    for field, values in arns.items():
        for i, arn in enumerate(values):
            match = _ARN_ACCOUNT_RE.match(arn)
            if match and _example_account(match.group(1)):
                found.append(f"{field}[{i}]: {arn} names the documentation account {match.group(1)}")
    tracking = config.history.mlflow.tracking or ""
    match = _ARN_ACCOUNT_RE.match(tracking)
    if match and _example_account(match.group(1)):
        found.append(f"history.mlflow.tracking: {tracking} names the documentation account {match.group(1)}")
    return found


def load_config(path: Path | str = DEFAULT_CONFIG_PATH) -> ProfStackConfig:
    """Read and validate a config file; every failure is a one-line ConfigError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}") from None
    return parse_config(data, source=str(path))


def load_config_reporting(
    path: Path | str, stream: TextIO, *, example_values: Literal["refuse", "warn", "ignore"] = "ignore"
) -> ProfStackConfig | None:
    """Load for a command line: problems and warnings go to `stream` as one line each; None if invalid.
    ``example_values``: what a placeholder value is (example_value_problems): a problem, a warning, or nothing."""
    try:
        config = load_config(path)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"profstack: invalid config: {problem}", file=stream)
        return None
    placeholders = example_value_problems(config) if example_values != "ignore" else []
    if example_values == "refuse" and placeholders:
        for problem in placeholders:
            print(f"profstack: invalid config: {path}: {problem}", file=stream)
        return None
    warnings = config.warnings()
    if placeholders:
        fields = ", ".join(p.split(":", 1)[0] for p in placeholders)
        warnings.append(
            f"{path} holds the example config's placeholders ({fields}): it synthesizes but cannot deploy; "
            "`profstack config check` says what to set, `profstack init` writes a config from your account"
        )
    for warning in warnings:
        print(f"profstack: warning: {warning}", file=stream)
    return config


def _main(argv: list[str]) -> int:
    """`python -m profstack.config --check [PATH]` validates; `--schema` rewrites the JSON Schema."""
    import json
    import sys

    args = argv[1:]
    if args[:1] == ["--schema"] and len(args) == 1:
        target = Path(__file__).resolve().parents[1] / "config" / "profstack.schema.json"
        target.write_text(json.dumps(ProfStackConfig.model_json_schema(), indent=2) + "\n")
        print(f"wrote {target}")
        return 0
    if args[:1] == ["--check"] and len(args) <= 2:
        from profstack.cli import main as cli_main  # the same check as `profstack config check`

        return cli_main(["config", "check", *args[1:]])
    print("usage: python -m profstack.config (--check [PATH] | --schema)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv))
