"""The ProfStack notification topic: KMS-encrypted, TLS-only, e-mail subscriptions from config."""

from __future__ import annotations

from collections.abc import Sequence

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
