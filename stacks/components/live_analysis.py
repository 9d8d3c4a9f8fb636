"""Analysis while a training job runs, and the actions its findings take (issue 36; lambdas/live_analysis).

- An EventBridge schedule every `processing.live.interval_minutes` runs the dispatcher, which asks SageMaker which
  jobs run now and invokes the analyser once per eligible job (asynchronously, no retry: the next run is the
  retry). Nothing is created per job, so nothing can outlive one: a lost or reordered state-change event changes
  nothing, and a finished job is never analysed again.
- The analyser runs on the processing role path (the trace bucket's policy lets only those roles read traces and
  write reports), reads traces only through the trace-reader role with the processor's per-job session policy, and
  writes the in-progress report at the job's report keys.
- With `processing.actions.stop_enabled`, the analyser's role may call sagemaker:StopTrainingJob, only on jobs
  whose owner tag (`tensorboard.user_tag_key`) names a configured user: an IAM condition on aws:ResourceTag, so
  even a bug in the analyser cannot stop anyone else's job (proven in tests/infra/test_live_analysis.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from constructs import Construct

from profstack import layout
from profstack.actions import ACTIONS_FILE, ACTIONS_TAG, STOP_TAG_VALUE, ActionPolicy
from profstack.config import Processing
from profstack.jobs.metric_names import NAMESPACE
from stacks.components.iam import no_resource_type_statement
from stacks.components.nag import acknowledge
from stacks.components.nag_findings import acknowledge_function_baseline
from stacks.components.nag_wildcards import acknowledge_wildcards, default_policy
from stacks.components.python_function import PowertoolsSettings, ProfStackFunction, log_retention
from stacks.components.trace_access import TraceAccess
from stacks.components.trace_processor import (
    WILDCARD_REASONS as PROCESSOR_WILDCARD_REASONS,
)
from stacks.components.trace_processor import (
    TraceProcessorFunctions,
    grant_describe_training_jobs,
    grant_notify,
    grant_put_metric_data,
)

ANALYSER_TIMEOUT_S = 900
DISPATCHER_MEMORY_MB = 256

WILDCARD_REASONS = {
    **PROCESSOR_WILDCARD_REASONS,
    r"AwsSolutions-IAM5\[Resource::\*\]": "Only sagemaker:ListTrainingJobs and cloudwatch:PutMetricData (namespace "
    "condition), which support no resource type (stacks/components/iam.py).",
    r"AwsSolutions-IAM5\[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:training-job/\*\]": (
        "DescribeTrainingJob and ListTags must work for any job that runs in this account and region (read-only); "
        "StopTrainingJob only where the job's owner tag names a configured user (aws:ResourceTag condition)."
    ),
    r"AwsSolutions-IAM5\[Resource::<.*Analyser.*\.Arn>:\*\]": "Invoking the analyser function's versions and "
    "aliases (added by grant_invoke); the function is named exactly.",
}


def stop_statement(scope: Construct, *, user_tag_key: str, users: Sequence[str]) -> iam.PolicyStatement:
    """StopTrainingJob only on jobs whose owner tag is one of the configured users and whose creator consented
    (`profstack:actions=stop`, issue 42 item 9): IAM, not only the code, holds both."""
    stack = cdk.Stack.of(scope)
    return iam.PolicyStatement(
        sid="StopOwnedConsentingTrainingJobs",
        actions=["sagemaker:StopTrainingJob"],
        resources=[stack.format_arn(service="sagemaker", resource="training-job", resource_name="*")],
        conditions={
            "StringEquals": {
                f"aws:ResourceTag/{user_tag_key}": sorted(users),
                f"aws:ResourceTag/{ACTIONS_TAG}": STOP_TAG_VALUE,
            }
        },
    )


class LiveAnalysis(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        access: TraceAccess,
        processor: TraceProcessorFunctions,
        processor_env: dict[str, str],
        topic: sns.ITopic,
        processing: Processing,
        user_tag_key: str,
        users: Sequence[str],
        log_retention_days: int,
        name_prefix: str,
        role_path: str,
    ) -> None:
        super().__init__(scope, construct_id)
        live = processing.live
        policy = ActionPolicy(
            stop_enabled=processing.actions.stop_enabled,
            rules=dict(processing.actions.rules),
            stop_min_severity=processing.actions.stop_min_severity,
        )
        retention = log_retention(log_retention_days)
        env = {
            **processor_env,
            "READER_ROLE_ARN": processor.trace_reader.role_arn,
            "TRACE_KEY_ARN": access.key.key_arn,
            "LIVE_SETTLE_SECONDS": str(live.settle_seconds),
            "LIVE_MAX_FILES": str(live.max_files),
            "LIVE_INTERVAL_MINUTES": str(live.interval_minutes),
            "ACTIONS": json.dumps(policy.to_json(), separators=(",", ":")),
        }
        self.analyser = ProfStackFunction(
            self,
            "Analyser",
            handler_module="lambdas.live_analysis.handler",
            description="ProfStack: analyse a running training job's traces so far; act on its findings",
            log_retention=retention,
            powertools=PowertoolsSettings(service=f"{name_prefix}-live-analysis", metrics_namespace=NAMESPACE),
            environment=env,
            timeout=cdk.Duration.seconds(ANALYSER_TIMEOUT_S),
            memory_size=processing.lambda_memory_mb,
            reserved_concurrency=processing.reserved_concurrency,
            ephemeral_storage_mib=2048,
            role_path=role_path,
        )
        # a run that fails or waits is superseded by the next one: no retry, no older request than one interval
        self.analyser.function.configure_async_invoke(
            retry_attempts=0, max_event_age=cdk.Duration.minutes(max(live.interval_minutes, 1))
        )
        role = self.analyser.role
        access.grant_report_write(role, tensorboard=False, read_reports=True)
        grant_describe_training_jobs(role, self)
        grant_put_metric_data(role)
        grant_notify(role, topic)
        # the trace reader: the same role and per-job session policy as the processor's reads
        processor.trace_reader.assume_role_policy.add_statements(  # type: ignore[union-attr]
            iam.PolicyStatement(actions=["sts:AssumeRole"], principals=[iam.ArnPrincipal(role.role_arn)])
        )
        processor.trace_reader.grant_assume_role(role)
        if policy.stop_enabled:
            role.add_to_principal_policy(stop_statement(self, user_tag_key=user_tag_key, users=users))
        # the final report states a stop taken while the job ran (lambdas/trace_processor/outputs.add_live_actions)
        read_actions = iam.Policy(
            self,
            "FinalReportReadsActions",
            statements=[
                iam.PolicyStatement(
                    actions=["s3:GetObject"],
                    resources=[access.bucket.arn_for_objects(f"{layout.REPORTS_PREFIX}*/{ACTIONS_FILE}")],
                )
            ],
        )
        read_actions.attach_to_role(processor.processor.role)
        read_actions.attach_to_role(processor.aggregate.role)
        acknowledge_wildcards(
            read_actions,
            {
                r"AwsSolutions-IAM5\[Resource::.*/reports/\*/actions\.json\]": "Only the per-job actions.json "
                "(reports/<user>/<job>/actions.json) the live analysis writes; user and job are known only at run time."
            },
        )

        dispatch_env = {"ANALYSER_FUNCTION": self.analyser.function.function_name}
        tag_filter = processing.job_tag_filter
        if tag_filter is not None:
            dispatch_env |= {"TAG_FILTER_KEY": tag_filter.key, "TAG_FILTER_VALUE": tag_filter.value}
        self.dispatcher = ProfStackFunction(
            self,
            "Dispatcher",
            handler_module="lambdas.live_analysis.dispatch",
            description="ProfStack: every interval, analyse each running training job's traces so far",
            log_retention=retention,
            powertools=PowertoolsSettings(service=f"{name_prefix}-live-dispatch", metrics_namespace=NAMESPACE),
            environment=dispatch_env,
            timeout=cdk.Duration.minutes(2),
            memory_size=DISPATCHER_MEMORY_MB,
            reserved_concurrency=1,
        )
        # a failed run is not retried (it would invoke the analyser twice for the jobs it did dispatch)
        self.dispatcher.function.configure_async_invoke(
            retry_attempts=0, max_event_age=cdk.Duration.minutes(max(live.interval_minutes, 1))
        )
        dispatcher_role = self.dispatcher.role
        dispatcher_role.add_to_principal_policy(no_resource_type_statement(["sagemaker:ListTrainingJobs"]))
        grant_describe_training_jobs(dispatcher_role, self)
        self.analyser.function.grant_invoke(dispatcher_role)
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="ProfStack live analysis: analyse each running training job's traces uploaded so far",
            schedule=events.Schedule.rate(cdk.Duration.minutes(live.interval_minutes)),
            targets=[targets.LambdaFunction(self.dispatcher.function, retry_attempts=0)],
        )
        self.errors_alarm = cloudwatch.Alarm(
            self,
            "Errors",
            metric=cloudwatch.MathExpression(
                expression="a + d",
                using_metrics={
                    "a": self.analyser.function.metric_errors(period=cdk.Duration.minutes(15), statistic="Sum"),
                    "d": self.dispatcher.function.metric_errors(period=cdk.Duration.minutes(15), statistic="Sum"),
                },
                period=cdk.Duration.minutes(15),
            ),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description="ProfStack's live analysis failed: running jobs' in-progress reports and rule actions "
            "are late until a run succeeds. Read the analyser's and dispatcher's log groups.",
        )
        self.errors_alarm.add_alarm_action(cw_actions.SnsAction(topic))
        superseded = (
            f"Each run is superseded by the next, {live.interval_minutes} min later, which reads SageMaker and S3 "
            "afresh; failures count in the functions' Errors metric, which has an alarm. A DLQ would hold only "
            "requests the next run supersedes."
        )
        for fn in (self.analyser, self.dispatcher):
            acknowledge(fn.function, "Serverless-LambdaAsyncFailureDestination", superseded)
            acknowledge_function_baseline(fn, async_reason=superseded)
            acknowledge_wildcards(default_policy(fn.role), WILDCARD_REASONS)
        acknowledge(self.schedule, "Serverless-EventBusDLQ", superseded)
