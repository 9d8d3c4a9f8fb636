"""A scheduled Lambda that deletes idle TensorBoard apps of ProfStack users (lambdas/idle_reaper)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from profstack.config import TensorBoard
from profstack.tensorboard.names import app_arn_patterns, user_profile_name
from stacks.components.iam import no_resource_type_statement
from stacks.components.nag import acknowledge
from stacks.components.nag_findings import acknowledge_function_baseline
from stacks.components.python_function import PowertoolsSettings, ProfStackFunction


class IdleReaper(Construct):
    """`function` runs every `tensorboard.reaper_schedule_minutes`; it may delete only the users' apps."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        domain_id: str,
        user_names: Sequence[str],
        tensorboard: TensorBoard,
        log_retention: logs.RetentionDays,
        role_path: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        self.function = ProfStackFunction(
            self,
            "Function",
            handler_module="lambdas.idle_reaper.handler",
            description="ProfStack: delete TensorBoard apps idle longer than the configured TTL",
            log_retention=log_retention,
            powertools=PowertoolsSettings(service="tensorboard-idle-reaper"),
            environment={
                "DOMAIN_ID": domain_id,
                "IDLE_TTL_MINUTES": str(tensorboard.idle_ttl_minutes),
                "DRY_RUN": "true" if tensorboard.reaper_dry_run else "false",
                "USER_PROFILES": json.dumps(sorted(user_profile_name(u) for u in user_names)),
            },
            timeout=cdk.Duration.minutes(2),
            memory_size=256,
            reserved_concurrency=1,  # overlapping runs would race on the same apps
            role_path=role_path,
        )
        role = self.function.role
        # sagemaker:ListApps supports no resource type (docs/platform-facts.md A4).
        role.add_to_principal_policy(no_resource_type_statement(["sagemaker:ListApps"]))
        acknowledge(role, "AwsSolutions-IAM5[Resource::*]", "Only sagemaker:ListApps, which supports no resource type.")
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["sagemaker:DescribeApp", "sagemaker:DeleteApp"],
                resources=[
                    arn
                    for name in user_names
                    for arn in app_arn_patterns(stack.partition, stack.region, stack.account, domain_id, name)
                ],
            )
        )
        # The function publishes its metrics as EMF log lines (Powertools), so it needs no
        # cloudwatch:PutMetricData permission.
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Run the ProfStack TensorBoard idle reaper",
            schedule=events.Schedule.rate(cdk.Duration.minutes(tensorboard.reaper_schedule_minutes)),
            targets=[targets.LambdaFunction(self.function.function, retry_attempts=0)],
        )
        superseded = (
            f"Runs every {tensorboard.reaper_schedule_minutes} min with an empty event: a failed run is "
            "superseded by the next one and shows in the function's Errors metric; a dead-letter "
            "queue would only collect copies of the schedule event."
        )
        acknowledge_function_baseline(self.function, async_reason=superseded)
        acknowledge(self.schedule, "Serverless-EventBusDLQ", superseded)
