"""Compose the ProfStack stacks from a validated config. `app.py` calls this; so do the tests."""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from profstack.config import ProfStackConfig
from profstack.guardrails import behaviour_tag_keys
from profstack.tensorboard.names import tensorboard_stack_name
from stacks.components.python_function import log_retention
from stacks.processing_stack import ProcessingStack
from stacks.storage_stack import StorageStack
from stacks.tensorboard_stack import TensorBoardStack


@dataclass(frozen=True)
class ProfStackStacks:
    storage: StorageStack
    others: tuple[cdk.Stack, ...] = ()

    def all(self) -> tuple[cdk.Stack, ...]:
        return (self.storage, *self.others)


def stack_environment(config: ProfStackConfig) -> cdk.Environment | None:
    if config.environment.account is None:
        return None  # env-agnostic: no context lookups, synthesizes offline
    return cdk.Environment(account=config.environment.account, region=config.environment.region)


def add_security_checks(app: cdk.App) -> None:
    """cdk-nag AwsSolutions + Serverless; an unacknowledged finding fails synth."""
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))


def build_profstack(app: cdk.App, config: ProfStackConfig) -> ProfStackStacks:
    env = stack_environment(config)
    prefix = config.prefix
    tags = {"profstack:deployment": prefix}
    storage = StorageStack(
        app,
        f"{prefix}-storage",
        retention=config.retention,
        legacy=config.legacy,
        storage=config.storage,
        name_prefix=prefix,
        user_tag_key=config.tensorboard.user_tag_key,
        env=env,
        description="ProfStack stateful resources: KMS keys, trace bucket, idempotency table",
    )
    # --- TensorBoard per user (issue 5): domain, profiles, apps, idle reaper ---
    tensorboard = TensorBoardStack(
        app,
        tensorboard_stack_name(prefix),
        domain=config.domain,
        tensorboard=config.tensorboard,
        users=config.users,
        trace_bucket=storage.trace_bucket,
        data_key=storage.data_key,
        logs_key=storage.logs_key,
        log_retention=log_retention(config.retention.log_retention_days),
        domain_name=f"{prefix}-tensorboard",
        name_prefix=prefix,
        behaviour_tags=behaviour_tag_keys(config),
        env=env,
        description="ProfStack managed TensorBoard: SageMaker domain, user profiles and roles, apps, idle reaper",
    )
    # --- end TensorBoard ---
    # --- trace processing (issue 4): events -> SQS -> processor -> reports, fan-out, alarms ---
    processing = ProcessingStack(
        app,
        f"{prefix}-processing",
        trace_bucket=storage.trace_bucket,
        data_key=storage.data_key,
        messaging_key=storage.messaging_key,
        logs_key=storage.logs_key,
        idempotency_table=storage.idempotency_table,
        processing=config.processing,
        alarms=config.alarms,
        notifications=config.notifications,
        user_tag_key=config.tensorboard.user_tag_key,
        users=[user.name for user in config.users],
        log_retention_days=config.retention.log_retention_days,
        name_prefix=prefix,
        history=config.history,
        history_users=[u.name for u in config.users],
        behaviour_tags=behaviour_tag_keys(config),
        break_glass=config.storage.break_glass_principal_arns,
        env=env,
        description="ProfStack trace processing: job events, processor Lambda, fan-out, notifications, alarms",
    )
    # --- end trace processing ---
    stacks = ProfStackStacks(storage=storage, others=(tensorboard, processing))
    for stack in stacks.all():
        for key, value in tags.items():
            cdk.Tags.of(stack).add(key, value)
    return stacks
