"""Training-job state changes -> encrypted SQS queue (with DLQ). The processor's input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from profstack.config import JobTagFilter
from profstack.jobs.events import DETAIL_TYPE, SOURCE, TERMINAL_STATUSES
from stacks.components.nag import acknowledge

#: what takes a message off the job queue (or hides it for a while)
CONSUME_ACTIONS = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:PurgeQueue", "sqs:ChangeMessageVisibility")


def training_job_event_pattern(tag_filter: JobTagFilter | None) -> dict[str, Any]:
    """The rule's pattern as plain JSON (tests match real events against exactly this)."""
    detail: dict[str, Any] = {"TrainingJobStatus": list(TERMINAL_STATUSES)}
    if tag_filter is not None:
        detail["Tags"] = {tag_filter.key: [tag_filter.value]}
    return {"source": [SOURCE], "detail-type": [DETAIL_TYPE], "detail": detail}


class JobEventQueue(Construct):
    """EventBridge rule on finished training jobs, targeting a KMS-encrypted queue with a DLQ.

    The DLQ also catches events EventBridge cannot deliver to the queue (target DLQ)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        key: kms.IKey,
        visibility_timeout: cdk.Duration,
        max_receive_count: int,
        tag_filter: JobTagFilter | None,
        consumers: Sequence[str],
    ) -> None:
        """`consumers`: `aws:PrincipalArn` patterns of the only principals that may receive, delete or purge
        the queue's messages (the processor's role)."""
        super().__init__(scope, construct_id)
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            retention_period=cdk.Duration.days(14),  # the SQS maximum: time to investigate and redrive
        )
        acknowledge(
            self.dead_letter_queue,
            "Serverless-SQSRedrivePolicy",
            "This queue is the dead-letter queue; it keeps messages 14 days and an alarm fires on its depth.",
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            visibility_timeout=visibility_timeout,
            retention_period=cdk.Duration.days(4),
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letter_queue, max_receive_count=max_receive_count),
        )
        pattern = training_job_event_pattern(tag_filter)
        self.rule = events.Rule(
            self,
            "TrainingJobFinished",
            description="SageMaker training job reached Completed, Failed or Stopped",
            event_pattern=events.EventPattern(
                source=pattern["source"], detail_type=pattern["detail-type"], detail=pattern["detail"]
            ),
        )
        self.rule.add_target(
            targets.SqsQueue(
                self.queue,
                dead_letter_queue=self.dead_letter_queue,
                retry_attempts=185,  # EventBridge's maximum; a DLQ'd event is not lost either way
                max_event_age=cdk.Duration.hours(24),
            )
        )
        # A job's event is its only trigger: whoever may receive and delete it (identity policies alone would
        # decide) could make another user's job go without a report. Only the consumers may.
        self.queue.add_to_resource_policy(
            iam.PolicyStatement(
                sid="ConsumedOnlyByTheProcessor",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=list(CONSUME_ACTIONS),
                resources=[self.queue.queue_arn],
                conditions={"ArnNotLike": {"aws:PrincipalArn": list(consumers)}},
            )
        )
        restrict_to_rule(self.queue, self.rule)


def restrict_to_rule(queue: sqs.Queue, rule: events.Rule) -> None:
    """Let EventBridge send to `queue` only on behalf of `rule` (`aws:SourceArn`), nothing else.

    On a KMS-encrypted queue CDK's SqsQueue target grants events.amazonaws.com
    SendMessage/GetQueueAttributes/GetQueueUrl with only `aws:SourceAccount`, so any rule in the account
    (say one with an input transformer that rewrites the job's owner) could feed the processor. CDK does
    that to avoid a dependency cycle through the key policy (aws-cdk #11158); here the key lives in the
    storage stack and its policy names no rule, so the rule's ARN can be named without a cycle. The
    statement CDK added is replaced in place; synthesis fails if it is not found exactly once."""
    policy = queue.node.try_find_child("Policy")
    if not isinstance(policy, sqs.QueuePolicy):
        raise TypeError("the queue has no resource policy to restrict")
    stack = cdk.Stack.of(queue)
    document = stack.resolve(policy.document.to_json())
    indexes = [
        i
        for i, statement in enumerate(document.get("Statement", []))
        if statement.get("Effect") == "Allow" and statement.get("Principal") == {"Service": "events.amazonaws.com"}
    ]
    if len(indexes) != 1:
        raise ValueError(f"expected one EventBridge statement in the queue policy, found {len(indexes)}")
    cfn = policy.node.default_child
    if not isinstance(cfn, cdk.CfnResource):
        raise TypeError("the queue policy has no CloudFormation resource")
    path = f"PolicyDocument.Statement.{indexes[0]}"
    cfn.add_property_override(f"{path}.Sid", "OnlyProfStackJobEventRule")
    cfn.add_property_override(f"{path}.Action", "sqs:SendMessage")
    cfn.add_property_override(
        f"{path}.Condition",
        {"ArnEquals": {"aws:SourceArn": rule.rule_arn}, "StringEquals": {"aws:SourceAccount": stack.account}},
    )
