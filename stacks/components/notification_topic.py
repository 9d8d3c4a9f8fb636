"""The ProfStack notification topic: KMS-encrypted, TLS-only, e-mail subscriptions from config, and no
other subscriber.

Every user's findings, failure reasons and kernel names go through this topic, so its policy denies
`sns:Subscribe` for any endpoint that is not a configured address (`notifications.emails`), whoever asks:
without it anyone in the account allowed sns:Subscribe (identity policies only) could subscribe their own
address or queue and read every user's notifications. Add a recipient in the config, not by hand."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from stacks.components.nag import acknowledge


class NotificationTopic(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey, emails: Sequence[str]) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="ProfStack",
            master_key=key,
            enforce_ssl=True,
        )
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="SubscribeOnlyConfiguredEmails",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["sns:Subscribe"],
                resources=[self.topic.topic_arn],
                conditions={"StringNotEquals": {"sns:Endpoint": list(emails)}} if emails else None,
            )
        )
        for email in emails:
            subscription = subscriptions.EmailSubscription(email)
            self.topic.add_subscription(subscription)
        for child in self.topic.node.children:
            if isinstance(child, sns.Subscription):
                acknowledge(
                    child,
                    "Serverless-SNSRedrivePolicy",
                    "E-mail notifications only point at reports stored in S3; SNS retries e-mail delivery and "
                    "failures show in NumberOfNotificationsFailed. Nothing is lost if one mail is.",
                )
