"""Helpers for the trace-processor functional tests: a moto data plane shaped like ProcessingStack.
SQS events, the Lambda context and the environment come from demo/lambda_harness.py (shared with the demo)."""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
from botocore.stub import Stubber

from demo.lambda_harness import ACCOUNT, REGION
from tests.conftest import EVENTS_DIR

TRACE_BUCKET = "profstack-traces-test"
OUTPUT_BUCKET = TRACE_BUCKET  # training output (rule-output/) lives in the trace bucket too
TABLE = "profstack-idempotency"
USER = "alice"


def user_role_arn(user: str, prefix: str = "profstack") -> str:
    """A user's ProfStack execution role: path /<prefix>/users/<user>/ (stacks/components/role_paths.py)."""
    return f"arn:aws:iam::{ACCOUNT}:role/{prefix}/users/{user}/ExecutionRole"


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS_DIR / name).read_text())
    return event


@dataclass
class DataPlane:
    s3: Any
    sqs: Any
    sns: Any
    sagemaker: Any
    events: Any
    cloudwatch: Any
    queue_url: str
    dlq_url: str
    topic_arn: str
    inbox_url: str  # an SQS queue subscribed to the topic: what the e-mail would have said

    def notifications(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            got = self.sqs.receive_message(QueueUrl=self.inbox_url, MaxNumberOfMessages=10)
            messages = got.get("Messages", [])
            if not messages:
                return out
            for msg in messages:
                out.append(json.loads(msg["Body"]))
                self.sqs.delete_message(QueueUrl=self.inbox_url, ReceiptHandle=msg["ReceiptHandle"])

    def list_keys(self, prefix: str = "") -> list[str]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=TRACE_BUCKET, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def processor_environ(topic_arn: str, **overrides: str) -> dict[str, str]:
    env = {
        "TRACE_BUCKET": TRACE_BUCKET,
        "IDEMPOTENCY_TABLE": TABLE,
        "TOPIC_ARN": topic_arn,
        "USER_TAG_KEY": "profstack:user",
        "USERS": '["alice", "bob"]',
        "EXTRA_TRACE_PREFIXES": "[]",
        "FANOUT_FILE_THRESHOLD": "8",
        "FANOUT_BYTES_THRESHOLD": str(2048 * 2**20),
        "SINGLE_LAMBDA_MAX_FILE_BYTES": str(4096 * 2**20),
        "TOP_K": "5",
        "RULE_THRESHOLDS": "{}",
        "MAX_RECEIVE_COUNT": "2",  # create_data_plane's queue: maxReceiveCount 2
        # the aggregate step's runs for a transient CloudWatch fault (FanoutWorkflow sets it from
        # AGGREGATE_ATTEMPTS; the test that runs the synthesized definition passes that value)
        "AGGREGATE_MAX_ATTEMPTS": "3",
        "POWERTOOLS_SERVICE_NAME": "profstack-trace-processor",
        "POWERTOOLS_METRICS_NAMESPACE": "ProfStack",
    }
    env.update(overrides)
    return env


def create_data_plane(*, max_receive_count: int = 2, tag_filter: Any = None) -> DataPlane:
    """Bucket, idempotency table, topic (+ inbox queue), job queue + DLQ, and the EventBridge rule
    with the ProcessingStack's own pattern targeting the queue. Call inside mock_aws()."""
    from stacks.components.job_events import training_job_event_pattern

    s3 = boto3.client("s3", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    sns = boto3.client("sns", region_name=REGION)
    ddb = boto3.client("dynamodb", region_name=REGION)
    events = boto3.client("events", region_name=REGION)
    s3.create_bucket(Bucket=TRACE_BUCKET)
    ddb.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dlq_url = sqs.create_queue(QueueName="profstack-jobs-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue_url = sqs.create_queue(
        QueueName="profstack-jobs",
        Attributes={
            "VisibilityTimeout": "0",  # tests redeliver immediately
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_receive_count)}),
        },
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    topic_arn = sns.create_topic(Name="profstack-notifications")["TopicArn"]
    inbox_url = sqs.create_queue(QueueName="profstack-inbox")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=inbox_arn)
    pattern = json.dumps(training_job_event_pattern(tag_filter))
    events.put_rule(Name="profstack-training-job-finished", EventPattern=pattern)
    events.put_targets(Rule="profstack-training-job-finished", Targets=[{"Id": "queue", "Arn": queue_arn}])
    return DataPlane(
        s3=s3,
        sqs=sqs,
        sns=sns,
        sagemaker=boto3.client("sagemaker", region_name=REGION),
        events=events,
        cloudwatch=boto3.client("cloudwatch", region_name=REGION),
        queue_url=queue_url,
        dlq_url=dlq_url,
        topic_arn=topic_arn,
        inbox_url=inbox_url,
    )


def register_training_job(
    plane: DataPlane,
    name: str,
    *,
    user: str = USER,
    tensorboard: bool = True,
    instance_type: str = "ml.p4d.24xlarge",
    instance_count: int = 2,
) -> None:
    kwargs: dict[str, Any] = {}
    if tensorboard:
        kwargs["TensorBoardOutputConfig"] = {"S3OutputPath": f"s3://{TRACE_BUCKET}/tensorboard/{user}/"}
    plane.sagemaker.create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311",
            "TrainingInputMode": "File",
        },
        # the user's ProfStack execution role: its IAM path confirms the owner tag (job.owner_of)
        RoleArn=user_role_arn(user),
        OutputDataConfig={"S3OutputPath": f"s3://{OUTPUT_BUCKET}/output"},
        ResourceConfig={"InstanceType": instance_type, "InstanceCount": instance_count, "VolumeSizeInGB": 100},
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
        Tags=[{"Key": "profstack:user", "Value": user}],
        **kwargs,
    )


def job_event(name: str, status: str = "Completed", *, user: str = USER) -> dict[str, Any]:
    event = load_event("sagemaker_training_job_completed.json")
    event["id"] = str(uuid.uuid4())
    event["detail"]["TrainingJobName"] = name
    event["detail"]["TrainingJobArn"] = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name}"
    event["detail"]["TrainingJobStatus"] = status
    event["detail"]["OutputDataConfig"]["S3OutputPath"] = f"s3://{OUTPUT_BUCKET}/output"
    event["detail"]["Tags"] = {"profstack:user": user}
    return event


def upload_trace(plane: DataPlane, source: Path, key: str) -> None:
    plane.s3.upload_file(str(source), TRACE_BUCKET, key)


def copy_trace(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target


INSTANCE_NAMESPACE = "/aws/sagemaker/TrainingJobs"  # docs/platform-facts.md A8


def emulate_run(
    name: str,
    *,
    start: datetime,
    end: datetime,
    status: str = "Completed",
    failure_reason: str | None = None,
    initialization: timedelta = timedelta(minutes=2),
) -> None:
    """Give a moto training job the life it would have had (moto creates it straight into Completed with
    every time set to now, facts C): created `initialization` before `start`, Training from `start` to `end`,
    the terminal `status`, and SageMaker's FailureReason when given."""
    from moto.sagemaker.models import sagemaker_backends

    fake = sagemaker_backends[ACCOUNT][REGION].training_jobs[name]
    created = start - initialization
    fake.creation_time = created
    fake.training_start_time = start
    fake.training_end_time = end
    fake.last_modified_time = end
    fake.training_job_status = status
    fake.secondary_status = status
    fake.secondary_status_transitions = [
        {"Status": "Starting", "StartTime": created, "EndTime": start, "StatusMessage": "Preparing the instances"},
        {
            "Status": "Training",
            "StartTime": start,
            "EndTime": end,
            "StatusMessage": "Training image download completed",
        },
        {"Status": status, "StartTime": end, "EndTime": end, "StatusMessage": status},
    ]
    if failure_reason is not None:
        fake.failure_reason = failure_reason


def seed_instance_metric(
    plane: DataPlane, job: str, host: str, metric: str, values: list[float], *, start: datetime
) -> None:
    """SageMaker-style instance metrics (one point a minute from `start`, Host=<job>/<host>) via PutMetricData."""
    data = [
        {
            "MetricName": metric,
            "Dimensions": [{"Name": "Host", "Value": f"{job}/{host}"}],
            "Timestamp": start + timedelta(minutes=i),
            "Value": value,
        }
        for i, value in enumerate(values)
    ]
    for i in range(0, len(data), 500):
        plane.cloudwatch.put_metric_data(Namespace=INSTANCE_NAMESPACE, MetricData=data[i : i + 500])


def throttled_cloudwatch(cloudwatch: Any, calls: int) -> Stubber:
    """``cloudwatch`` answering its next ``calls`` GetMetricData with Throttling, as after botocore's retries are
    spent (moto cannot throttle; the Stubber checks the calls against the service model). Activated: the caller
    asserts no response is left pending and deactivates it."""
    stubber = Stubber(cloudwatch)
    for _ in range(calls):
        stubber.add_client_error(
            "get_metric_data", service_error_code="Throttling", service_message="Rate exceeded", http_status_code=400
        )
    stubber.activate()
    return stubber


def backdate(key: str, when: datetime, bucket: str = TRACE_BUCKET) -> None:
    """Make moto's object at `key` look as if S3 stored it at `when` (LastModified is S3's, no API sets it): a file
    planted in a job's folder before the job existed."""
    from moto.s3.models import s3_backends

    for backend in s3_backends[ACCOUNT].values():
        found = backend.buckets.get(bucket)
        if found is not None:
            found.keys[key].last_modified = when.replace(tzinfo=None)
            return
    raise AssertionError(f"no moto bucket {bucket}")
