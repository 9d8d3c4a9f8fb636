"""IAM helpers. `Resource: "*"` is allowed only for actions that support no resource type.

NO_RESOURCE_TYPE_ACTIONS is the single list of such actions ProfStack uses, each with the
reason (IAM service authorization reference). The security-gate tests reject any
`Resource: "*"` statement whose actions are not all listed here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import aws_iam as iam
from constructs import Construct

from profstack.guardrails import MANAGED_POLICY_MAX_CHARS, Statement, pack

NO_RESOURCE_TYPE_ACTIONS: dict[str, str] = {
    "cloudwatch:PutMetricData": "PutMetricData supports no resource type; scoped by the cloudwatch:namespace "
    "condition instead.",
    "sagemaker:ListApps": "ListApps supports no resource type (docs/platform-facts.md A4).",
    "sagemaker:Search": "Search supports no resource type (docs/platform-facts.md A4).",
    "sagemaker:ListUserProfiles": "ListUserProfiles supports no resource type.",
    "sagemaker:ListDomains": "ListDomains supports no resource type.",
    "sagemaker:ListTrainingJobs": "ListTrainingJobs supports no resource type (list actions of SageMaker).",
    "cloudwatch:GetMetricData": "GetMetricData supports no resource type (the processor reads a job's "
    "/aws/sagemaker/TrainingJobs instance metrics).",
    "cloudwatch:DescribeAlarms": "Read-only; granted on '*' because the per-job alarm manager lists by name "
    "prefix (AlarmNamePrefix). The IAM service authorization reference was not re-read for its resource type "
    "in issue 15; if it supports alarm ARNs, scope it to the <prefix>/job/* alarms.",
    "s3:ListAllMyBuckets": "ListAllMyBuckets supports no resource type.",
    "ec2:DescribeNetworkInterfaces": "EC2 Describe* actions support no resource type.",
    "ec2:DescribeVpcs": "EC2 Describe* actions support no resource type.",
    "ec2:DescribeSubnets": "EC2 Describe* actions support no resource type.",
    "ec2:DescribeSecurityGroups": "EC2 Describe* actions support no resource type.",
    "states:ListStateMachines": "ListStateMachines supports no resource type.",
    "s3:CreateJob": "S3 Batch Operations CreateJob supports no resource type.",
    "ecr:GetAuthorizationToken": "ECR GetAuthorizationToken supports no resource type (image pulls are scoped "
    "to the repository separately).",
    # Step Functions logging to CloudWatch Logs (vended log delivery): these support no resource type
    # (Step Functions developer guide, "IAM policies for logging to CloudWatch Logs").
    "logs:CreateLogDelivery": "Vended log delivery (Step Functions logging) supports no resource type.",
    "logs:GetLogDelivery": "Vended log delivery (Step Functions logging) supports no resource type.",
    "logs:UpdateLogDelivery": "Vended log delivery (Step Functions logging) supports no resource type.",
    "logs:DeleteLogDelivery": "Vended log delivery (Step Functions logging) supports no resource type.",
    "logs:ListLogDeliveries": "Vended log delivery (Step Functions logging) supports no resource type.",
    "logs:PutResourcePolicy": "Step Functions logging sets the log-group resource policy; no resource type.",
    "logs:DescribeResourcePolicies": "DescribeResourcePolicies supports no resource type.",
    "logs:DescribeLogGroups": "DescribeLogGroups is granted account-wide by Step Functions logging.",
    "xray:PutTraceSegments": "X-Ray accepts no resource ARN for PutTraceSegments (state machine tracing).",
    "xray:PutTelemetryRecords": "X-Ray accepts no resource ARN for PutTelemetryRecords (state machine tracing).",
    "xray:GetSamplingRules": "X-Ray GetSamplingRules supports no resource type (state machine tracing).",
    "xray:GetSamplingTargets": "X-Ray GetSamplingTargets supports no resource type (state machine tracing).",
}


class UnscopedActionError(ValueError):
    """An action was given Resource "*" although it supports a resource type."""


def no_resource_type_statement(
    actions: Sequence[str], *, conditions: Mapping[str, Any] | None = None
) -> iam.PolicyStatement:
    """A statement with Resource "*" for actions that support no resource type, checked here."""
    unscoped = [a for a in actions if a not in NO_RESOURCE_TYPE_ACTIONS]
    if unscoped:
        raise UnscopedActionError(f"actions support a resource type, scope them: {', '.join(unscoped)}")
    return iam.PolicyStatement(
        actions=list(actions),
        resources=["*"],  # every action here is in NO_RESOURCE_TYPE_ACTIONS, with its reason
        conditions=dict(conditions) if conditions else None,
    )


def key_use_statement(
    key: Any,
    actions: Sequence[str],
    *,
    via: str,
    context: Mapping[str, str | list[str]] | None = None,
    sid: str | None = None,
) -> iam.PolicyStatement:
    """Use of a KMS key only through `via` (s3, dynamodb, ...), and only for the encryption context given
    (S3: the bucket, `aws:s3:arn`; DynamoDB: the table): a role that may decrypt for S3 reads cannot decrypt
    arbitrary ciphertext of the same key, nor data of another bucket or table under it."""
    from aws_cdk import Aws

    conditions: dict[str, Any] = {"StringEquals": {"kms:ViaService": f"{via}.{Aws.REGION}.amazonaws.com"}}
    if context:
        conditions["StringLike"] = {f"kms:EncryptionContext:{k}": v for k, v in context.items()}
    return iam.PolicyStatement(sid=sid, actions=list(actions), resources=[key.key_arn], conditions=conditions)


def s3_key_context(bucket: Any) -> dict[str, str | list[str]]:
    """S3's encryption context for a bucket's objects: the bucket's ARN with an S3 Bucket Key, else the object's."""
    return {"aws:s3:arn": [bucket.bucket_arn, f"{bucket.bucket_arn}/*"]}


#: the longest text a CloudFormation reference resolves to in these policies (IAM counts resolved characters)
_LONGEST = {"AWS::Partition": len("aws-us-gov"), "AWS::Region": len("ap-southeast-5"), "AWS::AccountId": 12,
            "AWS::URLSuffix": len("amazonaws.com.cn")}  # fmt: skip
_LONGEST_DOMAIN_ID = len("d-") + 12
#: any other reference (a role's or bucket's ARN, an import): generously long
_LONGEST_OTHER = 256


def _longest_text(node: Any) -> int | None:
    """How long the text an intrinsic (or a literal string) resolves to can be at most; None: not text."""
    if isinstance(node, str):
        return len(node)
    if not isinstance(node, Mapping):
        return None
    if "Ref" in node:
        return _LONGEST.get(str(node["Ref"]), _LONGEST_OTHER)
    if "Fn::GetAtt" in node:
        return _LONGEST_DOMAIN_ID if node["Fn::GetAtt"][1] == "DomainId" else _LONGEST_OTHER
    if "Fn::Join" in node:
        delimiter, items = node["Fn::Join"]
        lengths = [_longest_text(item) for item in items]
        return sum(n if n is not None else _LONGEST_OTHER for n in lengths) + len(delimiter) * max(len(items) - 1, 0)
    if "Fn::ImportValue" in node or "Fn::Sub" in node:
        return _LONGEST_OTHER
    return None


def _shadow(node: Any) -> Any:
    """The document with every intrinsic replaced by text of the longest length it can resolve to."""
    length = _longest_text(node) if isinstance(node, Mapping) else None
    if length is not None:
        return "x" * length
    if isinstance(node, Mapping):
        return {key: _shadow(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_shadow(item) for item in node]
    return node


def resolved_chars(scope: Construct, document: Mapping[str, Any]) -> int:
    """The most characters IAM can count for `document` once CloudFormation has resolved its references."""
    import json

    import aws_cdk as cdk

    return len(json.dumps(_shadow(cdk.Stack.of(scope).resolve(document)), separators=(",", ":")))


def managed_policies(
    scope: Construct, construct_id: str, statements: list[Statement], *, description: str, **kwargs: Any
) -> list[iam.ManagedPolicy]:
    """Statements as customer-managed policies of at most IAM's 6,144 characters each: `construct_id`, then
    `<construct_id>2`, ... Each reference is measured at the longest text it can resolve to (resolved_chars)."""
    documents = pack(statements, MANAGED_POLICY_MAX_CHARS, lambda document: resolved_chars(scope, document))
    policies = []
    for index, document in enumerate(documents, start=1):
        suffix = "" if index == 1 else str(index)
        part = f" (part {index} of {len(documents)})" if len(documents) > 1 else ""
        policies.append(
            iam.ManagedPolicy(
                scope,
                f"{construct_id}{suffix}",
                description=f"{description}{part}",
                document=iam.PolicyDocument.from_json(document),
                **kwargs,
            )
        )
    return policies
