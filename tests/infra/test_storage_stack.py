"""StorageStack: encryption, access logs, lifecycle from config, retention and stable logical IDs."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from tests.infra.conftest import SynthesizedApp

# Pinned logical IDs of stateful resources. A change here replaces the resource and orphans data:
# update this list only with a migration plan.
STATEFUL_LOGICAL_IDS = {
    "AWS::KMS::Key": {"DataKey17AFBB84", "MessagingKey9A79A2B1", "LogsKeyA6AB43B2"},
    "AWS::S3::Bucket": {"TraceStoreAccessLogs6BD1CAB2", "TraceStoreTraces8E0064C8"},
    "AWS::DynamoDB::Table": {"IdempotencyTable22A5A209"},
}


@pytest.fixture(scope="module")
def storage(synthesized: SynthesizedApp) -> Template:
    return Template.from_stack(synthesized.stacks.storage)


def _resources(template: Template, type_: str) -> dict[str, Any]:
    found: dict[str, Any] = template.find_resources(type_)
    return found


def test_stateful_logical_ids_are_stable(storage: Template) -> None:
    # GIVEN the pinned IDs WHEN the stack synthesizes THEN every stateful resource keeps its logical ID
    for type_, expected in STATEFUL_LOGICAL_IDS.items():
        assert set(_resources(storage, type_)) == expected, type_


def test_stack_is_termination_protected(synthesized: SynthesizedApp) -> None:
    assert synthesized.stacks.storage.termination_protection is True


def test_every_stateful_resource_is_retained(storage: Template) -> None:
    for type_ in STATEFUL_LOGICAL_IDS:
        for logical_id, resource in _resources(storage, type_).items():
            assert resource.get("DeletionPolicy") == "Retain", logical_id
            assert resource.get("UpdateReplacePolicy") == "Retain", logical_id


def test_keys_rotate(storage: Template) -> None:
    storage.resource_count_is("AWS::KMS::Key", 3)
    storage.all_resources_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_trace_bucket_is_private_encrypted_versioned_and_logged(storage: Template) -> None:
    storage.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {
                        "BucketKeyEnabled": True,
                        "ServerSideEncryptionByDefault": {
                            "SSEAlgorithm": "aws:kms",
                            "KMSMasterKeyID": {"Fn::GetAtt": ["DataKey17AFBB84", "Arn"]},
                        },
                    }
                ]
            },
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "VersioningConfiguration": {"Status": "Enabled"},
            "LoggingConfiguration": {
                "DestinationBucketName": {"Ref": "TraceStoreAccessLogs6BD1CAB2"},
                "LogFilePrefix": "trace-bucket/",
            },
        },
    )


def test_both_buckets_deny_insecure_transport(storage: Template) -> None:
    policies = _resources(storage, "AWS::S3::BucketPolicy")
    assert len(policies) == 2
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
        )


def _trace_bucket_rules(storage: Template) -> dict[str, dict[str, Any]]:
    bucket = _resources(storage, "AWS::S3::Bucket")["TraceStoreTraces8E0064C8"]
    return {rule["Id"]: rule for rule in bucket["Properties"]["LifecycleConfiguration"]["Rules"]}


def test_lifecycle_rules_follow_the_config(storage: Template, example_config: Any) -> None:
    # GIVEN the example config's retention WHEN the bucket is synthesized THEN each class of data has its rule
    rules = _trace_bucket_rules(storage)
    raw = example_config.retention.raw_traces
    assert rules["raw-traces"]["Prefix"] == "traces/"
    assert rules["raw-traces"]["Transitions"] == [
        {"StorageClass": "STANDARD_IA", "TransitionInDays": raw.infrequent_access_after_days},
        {"StorageClass": "GLACIER_IR", "TransitionInDays": raw.glacier_ir_after_days},
    ]
    assert rules["raw-traces"]["ExpirationInDays"] == raw.expire_after_days
    assert rules["tensorboard-logs"]["Prefix"] == "tensorboard/"
    assert rules["reports"]["Prefix"] == "reports/"
    assert rules["reports"]["ExpirationInDays"] == example_config.retention.reports_expire_after_days
    assert rules["reports"]["ExpirationInDays"] > rules["raw-traces"]["ExpirationInDays"]
    assert rules["legacy-rule-output"]["TagFilters"] == [{"Key": "profstack:class", "Value": "legacy-rule-output"}]
    assert "Prefix" not in rules["legacy-rule-output"]  # a prefix cannot match <output>/<job>/rule-output/
    assert rules["legacy-rule-output"]["ExpirationInDays"] == example_config.legacy.rule_output_expire_after_days
    assert rules["abort-incomplete-uploads"]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}
    assert rules["noncurrent-versions"]["NoncurrentVersionExpiration"] == {
        "NoncurrentDays": example_config.retention.noncurrent_versions_expire_after_days
    }
    assert all(rule["Status"] == "Enabled" for rule in rules.values())


def test_idempotency_table_uses_powertools_layout(storage: Template) -> None:
    storage.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
            "TimeToLiveSpecification": {"AttributeName": "expiration", "Enabled": True},
            "SSESpecification": {"SSEEnabled": True, "SSEType": "KMS", "KMSMasterKeyId": Match.any_value()},
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        },
    )


def test_messaging_key_admits_eventbridge_and_cloudwatch_only_for_this_account(storage: Template) -> None:
    key = _resources(storage, "AWS::KMS::Key")["MessagingKey9A79A2B1"]
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    granted = [s for s in statements if isinstance(s.get("Principal"), dict) and "Service" in s["Principal"]]
    assert {s["Principal"]["Service"] for s in granted} == {"events.amazonaws.com", "cloudwatch.amazonaws.com"}
    for statement in granted:  # CDK's SqsQueue target adds one for events too: the key's Deny bounds it (below)
        assert statement["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    services = {s["Principal"]["Service"]: s for s in granted if str(s.get("Sid", "")).startswith("Allow")}
    via = [{"Fn::Join": ["", [f"{s}.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]} for s in ("sqs", "sns")]
    for statement in services.values():
        assert statement["Condition"] == {
            "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}, "kms:ViaService": via}
        }


@pytest.mark.parametrize(
    ("key_id", "services"),
    [
        ("MessagingKey9A79A2B1", ("sqs", "sns")),
        ("DataKey17AFBB84", ("s3", "dynamodb", "sagemaker", "elasticfilesystem", "ec2")),
    ],
)
def test_each_key_is_used_only_through_the_services_that_hold_its_data(
    storage: Template, key_id: str, services: tuple[str, ...]
) -> None:
    # GIVEN the key policy, whatever identity policies (or CDK's grants to service principals) allow
    statements = _resources(storage, "AWS::KMS::Key")[key_id]["Properties"]["KeyPolicy"]["Statement"]
    (deny,) = [s for s in statements if s["Effect"] == "Deny"]
    # THEN every principal (service principals included) is denied the key's cryptographic operations unless a
    # listed service makes the call (before: a role granted kms:Decrypt for S3 reads could decrypt any ciphertext of
    # the key handed to it, and the service principals' statements named no service). A direct call carries no
    # kms:ViaService, and a negated condition on a missing key holds, so the Deny applies to it.
    assert deny["Principal"] == {"AWS": "*"}
    assert deny["Resource"] == "*"
    assert set(deny["Action"]) == {"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*"}
    assert deny["Condition"] == {
        "StringNotEquals": {
            "kms:ViaService": [
                {"Fn::Join": ["", [f"{s}.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]} for s in services
            ]
        }
    }
    # AND the key's administration is not denied (the account keeps managing it)
    assert not any(a.startswith(("kms:Put", "kms:Create", "kms:Describe")) for a in deny["Action"])


def test_idempotency_items_are_touched_only_by_processing_and_break_glass(synthesized: SynthesizedApp) -> None:
    from tests.infra.iam_eval import Principal, Request, Resolver, same_account_decision

    # GIVEN the idempotency table's resource policy (a record per job and status decides whether its event is
    # processed: one planted for bob's (job, Completed) would swallow SageMaker's event for the record's lifetime)
    (table,) = _resources(Template.from_stack(synthesized.stacks.storage), "AWS::DynamoDB::Table").values()
    statements = Resolver()(table["Properties"]["ResourcePolicy"]["PolicyDocument"])["Statement"]
    table_arn = "arn:aws:dynamodb:us-east-1:123456789012:table/profstack-idempotency"
    everything = [{"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"}]

    def can(who: str, action: str) -> bool:
        return same_account_decision(everything, statements, Principal(arn=who), Request(action, table_arn))

    # WHEN a role outside ProfStack (an administrator, a user's role) with dynamodb:* writes, reads or deletes items
    for who in ("arn:aws:iam::123456789012:role/Admin", "arn:aws:iam::123456789012:role/profstack/users/alice/x"):
        for action in ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:GetItem",
                       "dynamodb:BatchWriteItem", "dynamodb:PartiQLInsert"):  # fmt: skip
            # THEN denied
            assert not can(who, action), (who, action)
        # AND the table itself stays manageable (control plane is left to identity policies)
        assert can(who, "dynamodb:DescribeTable")
    # AND the processor's role (the processing path) keeps what Powertools' idempotency layer calls
    processor = "arn:aws:iam::123456789012:role/profstack/processing/TraceProcessorRole"
    for action in ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"):
        assert can(processor, action)
