"""StorageStack: every stateful resource of ProfStack. Termination-protected, retained on delete."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from profstack.config import Legacy, Retention, Storage
from stacks.components.trace_store import BucketBoundary, TraceStore

# Logical IDs of stateful resources. Changing one replaces (and orphans) data: tests pin them.
STATEFUL_IDS = ("DataKey", "MessagingKey", "LogsKey", "TraceStore", "IdempotencyTable")
#: the cryptographic operations a data key is used for (not its administration, nor CreateGrant)
KEY_USE_ACTIONS = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*")
#: the only services through which each key is used (kms:ViaService)
MESSAGING_KEY_SERVICES = ("sqs", "sns")
#: the trace bucket (S3, Athena's results in it), the idempotency table, and the SageMaker domain's storage
DATA_KEY_SERVICES = ("s3", "dynamodb", "sagemaker", "elasticfilesystem", "ec2")
#: DynamoDB's item-level (data plane) actions; control-plane calls (describe, update) stay with identity policies
IDEMPOTENCY_ITEM_ACTIONS = (
    "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:Scan", "dynamodb:PutItem",
    "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem",
    "dynamodb:PartiQLSelect", "dynamodb:PartiQLInsert", "dynamodb:PartiQLUpdate", "dynamodb:PartiQLDelete",
)  # fmt: skip


class StorageStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retention: Retention,
        legacy: Legacy,
        storage: Storage,
        name_prefix: str,
        user_tag_key: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, termination_protection=True, **kwargs)
        self.data_key = kms.Key(
            self,
            "DataKey",
            description="ProfStack traces, reports, idempotency records and SageMaker domain storage",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        # every ProfStack log group (functions, the state machine, the TensorBoard provider): their lines carry job,
        # file and user names. CloudWatch Logs uses the key for log groups of this account and region only.
        self.logs_key = kms.Key(
            self,
            "LogsKey",
            description="ProfStack CloudWatch Logs log groups",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        self.logs_key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchLogsForThisAccountsLogGroups",
                principals=[iam.ServicePrincipal(f"logs.{self.region}.amazonaws.com")],
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                resources=["*"],  # in a key policy "*" means this key
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": (
                            f"arn:{self.partition}:logs:{self.region}:{self.account}:log-group:*"
                        )
                    }
                },
            )
        )
        self.messaging_key = kms.Key(
            self,
            "MessagingKey",
            description="ProfStack SQS queues and SNS topics",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        # EventBridge (rule -> encrypted queue) and CloudWatch (alarm -> encrypted topic) must use the key, through
        # SQS and SNS only.
        messaging_services = [f"{s}.{self.region}.amazonaws.com" for s in MESSAGING_KEY_SERVICES]
        for service in ("events.amazonaws.com", "cloudwatch.amazonaws.com"):
            self.messaging_key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid=f"Allow{service.split('.')[0].capitalize()}ToUseKey",
                    principals=[iam.ServicePrincipal(service)],
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    resources=["*"],  # in a key policy "*" means this key
                    conditions={
                        "StringEquals": {"aws:SourceAccount": self.account, "kms:ViaService": messaging_services}
                    },
                )
            )
        # Whatever an identity policy or a construct's grant says, the keys encrypt and decrypt only as the services
        # that hold ProfStack's data use them: a role allowed kms:Decrypt for S3 reads cannot decrypt a ciphertext
        # handed to it directly. Key administration (and the services' grants) stays with the account.
        for key, services, sid in (
            (self.messaging_key, MESSAGING_KEY_SERVICES, "UseOnlyThroughSqsAndSns"),
            (self.data_key, DATA_KEY_SERVICES, "UseOnlyThroughTheDataServices"),
        ):
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid=sid,
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=list(KEY_USE_ACTIONS),
                    resources=["*"],
                    conditions={
                        "StringNotEquals": {"kms:ViaService": [f"{s}.{self.region}.amazonaws.com" for s in services]}
                    },
                )
            )
        # The bucket-policy backstop needs the deployment prefix (role paths) and the user tag key.
        boundary = BucketBoundary(prefix=name_prefix, user_tag_key=user_tag_key, storage=storage)
        self.trace_store = TraceStore(
            self, "TraceStore", key=self.data_key, retention=retention, legacy=legacy, boundary=boundary
        )
        self.trace_bucket = self.trace_store.bucket
        self.idempotency_table = dynamodb.Table(
            self,
            "IdempotencyTable",
            partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute="expiration",
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=self.data_key,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=cdk.RemovalPolicy.RETAIN,
            # one record per job and status decides whether a job event is processed at all: a record planted
            # for another user's (job, status) would swallow SageMaker's event, so only the processing roles and
            # break-glass may touch items, whatever identity policies say ("*" here is this table)
            resource_policy=iam.PolicyDocument(
                statements=[
                    iam.PolicyStatement(
                        sid="ItemsOnlyByProcessingBreakGlass",
                        effect=iam.Effect.DENY,
                        principals=[iam.AnyPrincipal()],
                        actions=list(IDEMPOTENCY_ITEM_ACTIONS),
                        resources=["*"],
                        conditions={"ArnNotLike": {"aws:PrincipalArn": boundary.privileged_principals()}},
                    )
                ]
            ),
        )
        cdk.CfnOutput(self, "TraceBucketName", value=self.trace_bucket.bucket_name)
