"""Per-job alarms that live and die with a training job (lambdas/alarm_manager), and the live per-GPU dashboard.

This replaces the two fleet-wide alarms that multiplied a fixed `gpus_per_host`: each host's alarm divides
by that host's own GPU count, so a fleet that mixes instance types gets the right threshold everywhere.

- EventBridge rule on every `SageMaker Training Job State Change` -> the manager converges that job.
- Schedule every `alarms.reconcile_minutes` -> reconcile: orphans removed, missed jobs and warm-up-gated
  alarms added, the live dashboard rewritten.
- The role may create and delete only alarms named `<prefix>/job/*` and write only the one dashboard.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from profstack.config import Alarms, JobTagFilter
from profstack.jobs.alarms import MANAGED_BY_TAG, alarm_prefix
from profstack.jobs.events import SCHEDULE_DETAIL_TYPE, TRAINING_DETAIL_TYPE
from stacks.components.iam import no_resource_type_statement
from stacks.components.nag import acknowledge
from stacks.components.nag_findings import acknowledge_function_baseline
from stacks.components.nag_wildcards import acknowledge_wildcards, default_policy
from stacks.components.python_function import PowertoolsSettings, ProfStackFunction

WILDCARD_REASONS = {
    r"AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:cloudwatch:<AWS::Region>:<AWS::AccountId>:alarm:"
    r"[a-z][a-z0-9-]*/job/\*\]": "Per-job alarms are created and deleted at run time, one set per running "
    "job; the name prefix <prefix>/job/ is the tightest static scope (a job name cannot contain '/').",
    r"AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:training-job/\*\]": (
        "DescribeTrainingJob (and ListTags with a tag filter) must work for any job of this account and region: "
        "which job runs is only known at run time. Both are read-only."
    ),
    r"AwsSolutions-IAM5\[Resource::\*\]": "Only sagemaker:ListTrainingJobs, cloudwatch:DescribeAlarms and the X-Ray "
    "actions, which support no resource type (stacks/components/iam.py).",
}


def training_job_state_pattern(tag_filter: JobTagFilter | None) -> dict[str, object]:
    """Every state change (InProgress included), as plain JSON; tests match real events against it."""
    pattern: dict[str, object] = {"source": ["aws.sagemaker"], "detail-type": [TRAINING_DETAIL_TYPE]}
    if tag_filter is not None:
        pattern["detail"] = {"Tags": {tag_filter.key: [tag_filter.value]}}
    return pattern


class JobAlarmManager(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        thresholds: Alarms,
        topic: sns.ITopic,
        name_prefix: str,
        tag_filter: JobTagFilter | None,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.dashboard_name = f"{name_prefix}-running-jobs-per-gpu-{stack.region}"  # dashboards are global
        self.dashboard = cloudwatch.CfnDashboard(
            self,
            "LiveDashboard",
            dashboard_name=self.dashboard_name,
            dashboard_body=json.dumps(
                {
                    "widgets": [
                        {
                            "type": "text",
                            "x": 0,
                            "y": 0,
                            "width": 24,
                            "height": 3,
                            "properties": {
                                "markdown": "## Running training jobs, per GPU\nProfStack's alarm manager rewrites "
                                f"this dashboard every {thresholds.reconcile_minutes} min with one per-GPU line "
                                "per running host."
                            },
                        }
                    ]
                }
            ),
        )
        env = {
            "NAME_PREFIX": name_prefix,
            "TOPIC_ARN": topic.topic_arn,
            "DASHBOARD_NAME": self.dashboard_name,
            "GPU_UTILIZATION_LOW_PERCENT": str(thresholds.gpu_utilization_low_percent),
            "GPU_MEMORY_HIGH_PERCENT": str(thresholds.gpu_memory_high_percent),
            "DISK_HIGH_PERCENT": str(thresholds.host_disk_high_percent),
            "MEMORY_HIGH_PERCENT": str(thresholds.host_memory_high_percent),
            "CPU_HIGH_PERCENT": str(thresholds.cpu_high_percent),
            "CPU_BOUND_GPU_LOW_PERCENT": str(thresholds.cpu_bound_gpu_low_percent),
            "EVALUATION_PERIODS": str(thresholds.evaluation_periods),
            "WARMUP_MINUTES": str(thresholds.warmup_minutes),
        }
        if tag_filter is not None:
            env |= {"TAG_FILTER_KEY": tag_filter.key, "TAG_FILTER_VALUE": tag_filter.value}
        self.function = ProfStackFunction(
            self,
            "Function",
            handler_module="lambdas.alarm_manager.handler",
            description="ProfStack: create and delete per-job CloudWatch alarms as training jobs start and end",
            log_retention=log_retention,
            powertools=PowertoolsSettings(service=f"{name_prefix}-alarm-manager"),
            environment=env,
            timeout=cdk.Duration.minutes(5),
            memory_size=256,
            reserved_concurrency=1,  # convergences of one job never interleave (lambdas/alarm_manager/logic.py)
        )
        role = self.function.role
        alarms = [
            stack.format_arn(
                service="cloudwatch",
                resource="alarm",
                resource_name=f"{alarm_prefix(name_prefix)}*",
                arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
            )
        ]
        # created with the managed-by tag (PutMetricAlarm with Tags needs TagResource); changed or deleted only
        # when it carries that tag: the name alone proves nothing (docs/security.md)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="CreatePerJobAlarms",
                actions=["cloudwatch:PutMetricAlarm", "cloudwatch:TagResource", "cloudwatch:ListTagsForResource"],
                resources=alarms,
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DeleteOwnPerJobAlarms",
                actions=["cloudwatch:DeleteAlarms"],
                resources=alarms,
                conditions={"StringEquals": {f"aws:ResourceTag/{MANAGED_BY_TAG}": name_prefix}},
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="LiveDashboard",
                actions=["cloudwatch:PutDashboard"],
                resources=[
                    stack.format_arn(
                        service="cloudwatch",
                        region="",
                        resource="dashboard",
                        resource_name=self.dashboard_name,
                    )
                ],
            )
        )
        role.add_to_principal_policy(
            no_resource_type_statement(["cloudwatch:DescribeAlarms", "sagemaker:ListTrainingJobs"])
        )
        describe = ["sagemaker:DescribeTrainingJob"] + (["sagemaker:ListTags"] if tag_filter is not None else [])
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DescribeTrainingJobs",
                actions=describe,
                resources=[stack.format_arn(service="sagemaker", resource="training-job", resource_name="*")],
            )
        )
        pattern = training_job_state_pattern(tag_filter)
        self.rule = events.Rule(
            self,
            "TrainingJobStateChange",
            description="Any SageMaker training job state change: converge that job's per-job alarms",
            event_pattern=events.EventPattern(
                source=["aws.sagemaker"],
                detail_type=[TRAINING_DETAIL_TYPE],
                detail=pattern.get("detail"),  # type: ignore[arg-type]
            ),
            targets=[
                targets.LambdaFunction(self.function.function, retry_attempts=4, max_event_age=cdk.Duration.hours(1))
            ],
        )
        self.schedule = events.Rule(
            self,
            "Reconcile",
            description="Reconcile ProfStack's per-job alarms and rewrite the live per-GPU dashboard",
            schedule=events.Schedule.rate(cdk.Duration.minutes(thresholds.reconcile_minutes)),
            targets=[
                targets.LambdaFunction(
                    self.function.function,
                    retry_attempts=0,
                    event=events.RuleTargetInput.from_object(
                        {"source": "profstack.alarm-manager", "detail-type": SCHEDULE_DETAIL_TYPE, "detail": {}}
                    ),
                )
            ],
        )
        self.errors_alarm = cloudwatch.Alarm(
            self,
            "Errors",
            metric=self.function.function.metric_errors(period=cdk.Duration.minutes(15), statistic="Sum"),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description="The per-job alarm manager failed: alarms of starting or ending jobs may be missing "
            "or orphaned until a reconcile succeeds. Read its log group.",
        )
        self.errors_alarm.add_alarm_action(cw_actions.SnsAction(topic))
        repaired = (
            f"A lost invocation is repaired by the reconcile that runs every {thresholds.reconcile_minutes} min "
            "and converges every running job's alarms from DescribeTrainingJob; failures count in the function's "
            "Errors metric, which has an alarm. A DLQ would only hold events the reconcile supersedes."
        )
        acknowledge_function_baseline(self.function, async_reason=repaired)
        acknowledge_wildcards(default_policy(role), WILDCARD_REASONS)
        for rule in (self.rule, self.schedule):
            acknowledge(rule, "Serverless-EventBusDLQ", repaired)
