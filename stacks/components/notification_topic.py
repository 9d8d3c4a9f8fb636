"""The ProfStack notification topic: KMS-encrypted, TLS-only, e-mail subscriptions from config."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct


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
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
