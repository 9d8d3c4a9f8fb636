"""`profstack verify`: the smoke test of a deployment, on moto (and botocore's Stubber for the two calls moto
cannot serve: EventBridge's TestEventPattern and Lambda's DryRun Invoke, which would need Docker)."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from moto import mock_aws

from profstack.cli import _aws, main
from profstack.cli.verify import BOUNDARY_SIDS, QUEUE_SIDS
from profstack.tensorboard.names import DOMAIN_ID_OUTPUT

REGION = "us-east-1"
ACCOUNT = "403921877410"
BUCKET = "profstack-storage-tracebucket-1x2y3z"


class _Split:
    """A moto client, except for `stubbed` operations, which a Stubber-activated client of the same service
    answers (it validates each request against the service model)."""

    def __init__(self, real: Any, stub: Any, stubbed: set[str]) -> None:
        self._real, self._stub, self._stubbed = real, stub, stubbed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stub if name in self._stubbed else self._real, name)


@dataclass
class Deployment:
    stubs: list[Stubber]
    queue_url: str
    dlq_url: str
    topic: str


def _deploy(
    *,
    dlq_messages: int = 0,
    confirmed: bool = True,
    alarm_state: str = "OK",
    policy_sids: tuple[str, ...] = BOUNDARY_SIDS,
) -> Deployment:
    """What `cdk deploy` leaves, as far as verify reads it (the example config: prefix profstack, users alice and
    bob, max_receive_count 3)."""
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    key = boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"]
    s3.put_bucket_encryption(
        Bucket=BUCKET,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key}}]
        },
    )
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    s3.put_public_access_block(
        Bucket=BUCKET,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    deny = [
        {
            "Sid": sid,
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{BUCKET}/x/*",
        }
        for sid in policy_sids
    ]
    s3.put_bucket_policy(Bucket=BUCKET, Policy=json.dumps({"Version": "2012-10-17", "Statement": deny}))

    sqs = boto3.client("sqs", region_name=REGION)
    dlq_url = sqs.create_queue(QueueName="profstack-dlq", Attributes={"KmsMasterKeyId": key})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for i in range(dlq_messages):
        sqs.send_message(QueueUrl=dlq_url, MessageBody=f"failed-{i}")
    queue_url = sqs.create_queue(
        QueueName="profstack-jobs",
        Attributes={
            "KmsMasterKeyId": key,
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3}),
        },
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    statements = [
        {"Sid": sid, "Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": queue_arn} for sid in QUEUE_SIDS
    ]
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"Policy": json.dumps({"Statement": statements})})

    events = boto3.client("events", region_name=REGION)
    pattern = {
        "source": ["aws.sagemaker"],
        "detail-type": ["SageMaker Training Job State Change"],
        "detail": {"TrainingJobStatus": ["Completed", "Failed", "Stopped"]},
    }
    events.put_rule(Name="profstack-finished", EventPattern=json.dumps(pattern))
    events.put_targets(Rule="profstack-finished", Targets=[{"Id": "queue", "Arn": queue_arn}])

    iam = boto3.client("iam", region_name=REGION)
    role = iam.create_role(RoleName="processor", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as z:
        z.writestr("handler.py", "def handler(event, context):\n    return {}\n")
    lambda_ = boto3.client("lambda", region_name=REGION)
    function = lambda_.create_function(
        FunctionName="profstack-processing-TraceProcessor",
        Runtime="python3.11",
        Role=role,
        Handler="handler.handler",
        Code={"ZipFile": code.getvalue()},
        Architectures=["x86_64"],
    )["FunctionArn"]
    lambda_.create_event_source_mapping(EventSourceArn=queue_arn, FunctionName=function)

    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name="profstack-notifications")["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="email", Endpoint="ml-oncall@example.com")
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    cloudwatch.put_metric_alarm(
        AlarmName="profstack-processing-AlarmsDeadLetterQueueNotEmpty",
        MetricName="ApproximateNumberOfMessagesVisible",
        Namespace="AWS/SQS",
        Statistic="Maximum",
        Period=300,
        EvaluationPeriods=1,
        Threshold=1,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
        AlarmActions=[topic],
    )
    if alarm_state != "OK":
        cloudwatch.set_alarm_state(
            AlarmName="profstack-processing-AlarmsDeadLetterQueueNotEmpty", StateValue=alarm_state, StateReason="test"
        )

    sagemaker = boto3.client("sagemaker", region_name=REGION)
    subnet = boto3.client("ec2", region_name=REGION).describe_subnets()["Subnets"][0]
    domain = sagemaker.create_domain(
        DomainName="p7q2x9k4m1z8",
        AuthMode="IAM",
        DefaultUserSettings={"ExecutionRole": role},
        SubnetIds=[subnet["SubnetId"]],
        VpcId=subnet["VpcId"],
    )["DomainArn"].rsplit("/", 1)[-1]

    cloudformation = boto3.client("cloudformation", region_name=REGION)
    outputs = {
        "profstack-storage": {"TraceBucketName": BUCKET},
        "profstack-tensorboard": {DOMAIN_ID_OUTPUT: domain},
        "profstack-processing": {"QueueUrl": queue_url, "DeadLetterQueueUrl": dlq_url, "TopicArn": topic},
    }
    for stack, values in outputs.items():
        template = {
            "Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
            "Outputs": {k: {"Value": v} for k, v in values.items()},
        }
        cloudformation.create_stack(StackName=stack, TemplateBody=json.dumps(template))

    stubs = _stub_clients(function, domain)
    return Deployment(stubs, queue_url, dlq_url, topic)


def _stub_clients(function: str, domain: str) -> list[Stubber]:
    events_stub = boto3.client("events", region_name=REGION)
    lambda_stub = boto3.client("lambda", region_name=REGION)
    sagemaker_stub = boto3.client("sagemaker", region_name=REGION)
    profiles = Stubber(sagemaker_stub)  # moto has no user profiles
    for user in ("alice", "bob"):
        profiles.add_response(
            "describe_user_profile",
            {"DomainId": domain, "UserProfileName": user, "Status": "InService"},
            {"DomainId": domain, "UserProfileName": user},
        )
    profiles.activate()
    events = Stubber(events_stub)
    events.add_response("test_event_pattern", {"Result": True}, {"EventPattern": ANY, "Event": ANY})
    events.add_response("test_event_pattern", {"Result": False}, {"EventPattern": ANY, "Event": ANY})
    invoke = Stubber(lambda_stub)
    invoke.add_response("invoke", {"StatusCode": 204}, {"FunctionName": function, "InvocationType": "DryRun"})
    events.activate()
    invoke.activate()
    real = _aws.make_client

    def make_client(service: str, region: str | None) -> Any:
        client = real(service, region or REGION)
        if service == "events":
            return _Split(client, events_stub, {"test_event_pattern"})
        if service == "lambda":
            return _Split(client, lambda_stub, {"invoke"})
        if service == "sagemaker":
            return _Split(client, sagemaker_stub, {"describe_user_profile"})
        return client

    _aws.make_client = make_client  # type: ignore[assignment]
    return [events, invoke, profiles]


@pytest.fixture
def aws(aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("MOTO_ACCOUNT_ID", ACCOUNT)
    monkeypatch.setattr(_aws, "make_client", _aws.make_client)  # restored after the test
    with mock_aws():
        yield


def _verify(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, dict[str, str]]]:
    capsys.readouterr()
    rc = main(["verify", "--region", REGION, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is (rc == 0)
    return rc, {c["name"]: c for c in report["checks"]}


def test_a_sound_deployment_passes(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a deployment as `cdk deploy` leaves it
    deployment = _deploy()
    # WHEN verified
    rc, checks = _verify(capsys)
    # THEN every check runs and none fails (the subscription to the example address is only a warning)
    assert rc == 0, checks
    expected = {
        "stack profstack-storage",
        "stack profstack-tensorboard",
        "stack profstack-processing",
        f"bucket {BUCKET} encryption",
        f"bucket {BUCKET} versioning",
        f"bucket {BUCKET} public access",
        f"bucket {BUCKET} policy",
        "job queue",
        "dead-letter queue",
        "event rule",
        "processor",
        "notifications",
        "alarms",
        "user alice",
        "user bob",
    }
    assert expected <= set(checks)
    assert all(c["status"] == "ok" for name, c in checks.items() if name != "notifications"), checks
    assert "takes a Completed job's event, not an InProgress one" in checks["event rule"]["detail"]
    assert "DryRun invoke allowed" in checks["processor"]["detail"]
    # AND the two stubbed calls were made, with requests the service models accept
    for stub in deployment.stubs:
        stub.assert_no_pending_responses()


def test_what_is_wrong_is_named_with_what_to_do(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a deployment with messages in the dead-letter queue, an alarm firing, and a bucket policy stripped
    # of the per-user boundary
    _deploy(dlq_messages=2, alarm_state="ALARM", policy_sids=BOUNDARY_SIDS[:1])
    # WHEN verified
    rc, checks = _verify(capsys)
    # THEN it fails, and each line says what it saw and where to go
    assert rc == 1
    assert checks[f"bucket {BUCKET} policy"]["status"] == "FAIL"
    assert "redeploy the storage stack" in checks[f"bucket {BUCKET} policy"]["detail"]
    assert checks["dead-letter queue"]["status"] == "warn"
    assert "2 message(s): runbook DeadLetterQueueNotEmpty" in checks["dead-letter queue"]["detail"]
    assert checks["alarms"]["status"] == "warn"
    assert "profstack-processing-AlarmsDeadLetterQueueNotEmpty" in checks["alarms"]["detail"]


def test_nothing_deployed_fails_each_stack_in_one_line(aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an account where nothing is deployed WHEN verified THEN one FAIL per stack, saying how to deploy
    capsys.readouterr()
    rc = main(["verify", "--region", REGION])
    out = capsys.readouterr().out.splitlines()
    assert rc == 1
    assert out[:3] == [
        "FAIL stack profstack-storage: not deployed: npx cdk deploy --all (docs/operate.md)",
        "FAIL stack profstack-tensorboard: not deployed: npx cdk deploy --all (docs/operate.md)",
        "FAIL stack profstack-processing: not deployed: npx cdk deploy --all (docs/operate.md)",
    ]
    assert out[-1] == "3 checks: 3 failed, 0 warning(s)"
