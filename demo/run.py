"""`make demo`: the whole processing pipeline on an embedded AWS emulator (moto server), no account.

1. Read the synthesized templates (cdk.out, or synthesize now without Lambda bundling).
2. Start moto's server on localhost and deploy the data plane there *from those templates*: the trace
   bucket, idempotency table, job queue + DLQ, notification topic and the EventBridge rule -> queue
   target, through moto's CloudFormation. Properties moto cannot honour (KMS keys, access logging,
   cross-stack imports) are dropped and listed; the Lambda, alarms and state machine stay out
   (moto cannot run Lambda without Docker) and the processor runs in-process instead.
3. Register the demo training job (moto SageMaker) and upload a real two-rank sample trace from
   samples/traces as its TensorBoard output.
4. Put the job-completed event on EventBridge, receive what arrives in SQS, and run the real handler
   on it, as the Lambda event-source mapping would. Its EMF lines become CloudWatch metrics.
5. Print the findings and the notification, and copy the report and the TensorBoard event file out of
   emulated S3 into <out>/<job>/ (one folder per demo job, replaced on every run).
6. Across jobs: the history rows of earlier runs (<out>/history/) are put back into the fresh emulator first,
   so a second run of the same family (--family, --job, --trace) is compared with the first; the rows
   are copied back out and the named Athena queries run over them with DuckDB when it is installed.

    python -m demo --job resnet50-w4 --family resnet50 --trace kineto_tb_plugin/resnet50_num_workers_4/...
    python -m demo --job resnet50-w0 --family resnet50 --trace kineto_tb_plugin/resnet50_num_workers_0/...
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from demo.lambda_harness import ACCOUNT, REGION, LambdaContext, patched_environ, sqs_event_from_messages
from profstack import layout

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = REPO_ROOT / "samples" / "traces"
DEMO_TRACES = ("hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz")
# One fixed job: every run starts from an empty emulator, so the name is free, and the local copy of its
# report replaces the previous run's instead of adding a folder per run.
DEMO_JOB = "resnet-ddp-demo"
DEMO_USER = "alice"
TENSORBOARD_DIR = "tensorboard"  # <out>/<job>/tensorboard/: the scalars' event file
# Data-plane resources the demo deploys, by stack: CloudFormation type -> why it is needed.
DATA_PLANE_TYPES = {
    "AWS::S3::Bucket": "trace bucket",
    "AWS::DynamoDB::Table": "idempotency table",
    "AWS::SQS::Queue": "job queue and DLQ",
    "AWS::SNS::Topic": "notification topic",
    "AWS::Events::Rule": "training-job rule -> queue target",
}
# Properties moto's CloudFormation cannot honour here (they reference KMS keys, other stacks or the
# access-log bucket); the real deployment keeps them.
DROPPED_PROPERTIES = {
    "AWS::S3::Bucket": ("BucketEncryption", "LoggingConfiguration", "LifecycleConfiguration", "BucketName"),
    "AWS::DynamoDB::Table": ("SSESpecification", "TableName"),
    "AWS::SQS::Queue": ("KmsMasterKeyId", "QueueName"),
    "AWS::SNS::Topic": ("KmsMasterKeyId", "TopicName"),
    "AWS::Events::Rule": ("Name",),
}


class DemoError(RuntimeError):
    """A one-line reason the demo cannot run."""


@dataclass
class DataPlane:
    bucket: str
    table: str
    queue_url: str
    dlq_url: str
    topic_arn: str
    rule: str


def _say(text: str) -> None:
    print(text, flush=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("localhost", 0))
        return int(sock.getsockname()[1])


# --- templates -------------------------------------------------------------------------------------


def load_templates(cdk_out: Path | None, required: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Stack name -> template, from a cloud assembly; synthesize one (no bundling) if the given one is
    missing or lacks a required stack (e.g. an old cdk.out)."""
    if cdk_out is None or not (cdk_out / "manifest.json").exists():
        cdk_out = _synthesize()
    templates = _read_assembly(cdk_out)
    if not set(required) <= set(templates):
        templates = _read_assembly(_synthesize())
    return templates


def _read_assembly(cdk_out: Path) -> dict[str, dict[str, Any]]:
    manifest = json.loads((cdk_out / "manifest.json").read_text())
    templates: dict[str, dict[str, Any]] = {}
    for name, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") == "aws:cloudformation:stack":
            templates[name] = json.loads((cdk_out / artifact["properties"]["templateFile"]).read_text())
    return templates


def _synthesize() -> Path:
    import aws_cdk as cdk

    from profstack.config import load_config
    from stacks.profstack_app import build_profstack

    pinned_node = REPO_ROOT / ".venv" / "bin" / "node"  # the repository's Node.js (requirements/infra.txt)
    if pinned_node.exists():
        os.environ.setdefault("JSII_NODE", str(pinned_node))
    context = json.loads((REPO_ROOT / "cdk.json").read_text()).get("context", {})
    outdir = Path(tempfile.mkdtemp(prefix="profstack-demo-cdk-"))
    app = cdk.App(outdir=str(outdir), context={**context, "aws:cdk:bundling-stacks": []})
    build_profstack(app, load_config(REPO_ROOT / "config" / "profstack.yaml"))  # the default config
    app.synth()
    return outdir


def data_plane_template(
    templates: dict[str, dict[str, Any]], stacks: tuple[str, ...]
) -> tuple[dict[str, Any], list[str]]:
    """One template with the data-plane resources of the given stacks, trimmed to what moto deploys."""
    resources: dict[str, Any] = {}
    notes: list[str] = []
    for stack, template in templates.items():
        if stack not in stacks:
            continue
        for logical_id, resource in template.get("Resources", {}).items():
            rtype = resource["Type"]
            if rtype not in DATA_PLANE_TYPES:
                continue
            props = dict(resource.get("Properties", {}))
            dropped = [p for p in DROPPED_PROPERTIES.get(rtype, ()) if props.pop(p, None) is not None]
            if rtype == "AWS::S3::Bucket" and "AccessLogs" in logical_id:
                continue  # the access-log bucket only receives logs; no data-plane role here
            if dropped:
                notes.append(f"{stack}/{logical_id}: dropped {', '.join(dropped)}")
            resources[logical_id] = {"Type": rtype, "Properties": props}
    ids = set(resources)
    for logical_id, resource in list(resources.items()):
        if resource["Type"] == "AWS::Events::Rule":
            targets = resource["Properties"].get("Targets", [])
            for target in targets:
                target.pop("DeadLetterConfig", None)  # moto: target DLQs are not modelled
                target.pop("RetryPolicy", None)
            outside = [t for t in targets if _refs(t) - ids]
            if outside and len(outside) == len(targets):
                # e.g. the per-job alarm manager's rule: its Lambda is not part of the demo's data plane
                del resources[logical_id]
                notes.append(f"{logical_id}: left out (it targets only functions the demo does not deploy)")
            elif outside:
                raise DemoError(f"rule {logical_id} targets something outside the data plane")
    return {"AWSTemplateFormatVersion": "2010-09-09", "Resources": resources}, notes


def _refs(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        if "Ref" in value and isinstance(value["Ref"], str) and not value["Ref"].startswith("AWS::"):
            found.add(value["Ref"])
        if "Fn::GetAtt" in value:
            found.add(str(value["Fn::GetAtt"][0]))
        for item in value.values():
            found |= _refs(item)
    elif isinstance(value, list):
        for item in value:
            found |= _refs(item)
    return found


# --- emulator --------------------------------------------------------------------------------------


@contextlib.contextmanager
def emulator() -> Iterator[str]:
    """moto's server on localhost; AWS_ENDPOINT_URL points every boto3 client at it."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no per-request access log
    port = _free_port()
    server = ThreadedMotoServer(ip_address="localhost", port=port, verbose=False)
    server.start()
    endpoint = f"http://localhost:{port}"
    try:
        # moto keeps its backends per process: start empty even when a process runs the demo twice (tests).
        reset = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")  # noqa: S310 - http://localhost
        urllib.request.urlopen(reset, timeout=30).close()  # noqa: S310 - our own localhost server
        with patched_environ({**_FAKE_ENV, "AWS_ENDPOINT_URL": endpoint}):
            yield endpoint
    finally:
        server.stop()


_FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "demo",
    "AWS_SECRET_ACCESS_KEY": "demo",
    "AWS_SESSION_TOKEN": "demo",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}


def deploy_data_plane(template: dict[str, Any]) -> DataPlane:
    import boto3

    cfn = boto3.client("cloudformation")
    cfn.create_stack(StackName="profstack-demo-data-plane", TemplateBody=json.dumps(template))
    resources = cfn.describe_stack_resources(StackName="profstack-demo-data-plane")["StackResources"]
    physical = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources}
    types = {r["LogicalResourceId"]: r["ResourceType"] for r in resources}

    def one(rtype: str, contains: str = "") -> str:
        found = [physical[k] for k, t in types.items() if t == rtype and contains in k]
        if len(found) != 1:
            raise DemoError(f"expected one {rtype} ({contains}) in the data plane, found {len(found)}")
        return str(found[0])

    queues = {k: physical[k] for k, t in types.items() if t == "AWS::SQS::Queue"}
    dlq = next(v for k, v in queues.items() if "DeadLetter" in k)
    queue = next(v for k, v in queues.items() if "DeadLetter" not in k)
    return DataPlane(
        bucket=one("AWS::S3::Bucket"),
        table=one("AWS::DynamoDB::Table"),
        queue_url=queue,
        dlq_url=dlq,
        topic_arn=one("AWS::SNS::Topic"),
        rule=one("AWS::Events::Rule"),
    )


# --- the job -----------------------------------------------------------------------------------------


def job_event_detail(job: str, user: str, bucket: str) -> dict[str, Any]:
    now_ms = int(time.time() * 1000)
    return {
        "TrainingJobName": job,
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{job}",
        "TrainingJobStatus": "Completed",
        "SecondaryStatus": "Completed",
        "OutputDataConfig": {"KmsKeyId": "", "S3OutputPath": f"s3://{bucket}/output"},
        "ResourceConfig": {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
        "CreationTime": now_ms - 3_600_000,
        "TrainingStartTime": now_ms - 3_300_000,
        "TrainingEndTime": now_ms - 60_000,
        "LastModifiedTime": now_ms,
        "Tags": {"profstack:user": user},
    }


def register_job(
    sagemaker: Any,
    s3: Any,
    plane: DataPlane,
    *,
    job: str,
    user: str,
    traces_dir: Path,
    traces: tuple[str, ...] = DEMO_TRACES,
    family: str | None = None,
) -> list[str]:
    tensorboard_root = f"s3://{plane.bucket}/{layout.user_tensorboard_prefix(user)}"
    sagemaker.create_training_job(
        TrainingJobName=job,
        AlgorithmSpecification={
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311",
            "TrainingInputMode": "File",
        },
        # the user's ProfStack execution role (IAM path /profstack/users/<user>/): it confirms the owner tag
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/profstack/users/{user}/ExecutionRole",
        OutputDataConfig={"S3OutputPath": f"s3://{plane.bucket}/output"},
        ResourceConfig={"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
        StoppingCondition={"MaxRuntimeInSeconds": 86400},
        TensorBoardOutputConfig={"S3OutputPath": tensorboard_root},
        Tags=[{"Key": "profstack:user", "Value": user}]
        + ([{"Key": "profstack:family", "Value": family}] if family else []),
    )
    # the emulator makes the job end the moment it starts: give it the hour the event says it ran
    from datetime import UTC, datetime

    from demo.lambda_harness import set_emulated_training_times

    detail = job_event_detail(job, user, plane.bucket)
    set_emulated_training_times(
        job,
        start=datetime.fromtimestamp(detail["TrainingStartTime"] / 1000, UTC),
        end=datetime.fromtimestamp(detail["TrainingEndTime"] / 1000, UTC),
    )
    keys = []
    for rank, rel in enumerate(traces):
        source = traces_dir / rel
        if not source.is_file():
            raise DemoError(f"trace {source} not found (--traces names the folder of sample traces)")
        # tensorboard_trace_handler's naming: <worker>.<time_ns>.pt.trace.json.gz under the job's folder
        key = f"{layout.job_tensorboard_prefix(user, job)}algo-{rank + 1}_{4242 + rank}.1796565600000.pt.trace.json.gz"
        s3.upload_file(str(source), plane.bucket, key)
        keys.append(key)
    # A leftover of the old Debugger/Profiler: it gets the expiry tag on job completion.
    s3.put_object(
        Bucket=plane.bucket,
        Key=f"output/{job}/rule-output/ProfilerReport-1796565600/profiler-output/profiler-report.html",
        Body=b"<html>legacy</html>",
    )
    return keys


def seed_instance_metrics(cloudwatch: Any, job: str, *, hosts: int = 2) -> int:
    """What SageMaker would have published for the demo job: per host and minute, CPU and GPU summed over the
    host's vCPUs and GPUs (ml.p4d.24xlarge: 96 and 8), memory and disk in percent (docs/platform-facts.md A8).
    Deterministic shapes: a warm-up, then algo-1 around 55 % per GPU and algo-2 around 30 % (it waits on
    algo-1), with GPU memory creeping up. Returns the datapoints written."""
    import math
    from datetime import UTC, datetime, timedelta

    detail = job_event_detail(job, "demo", "demo")
    start = datetime.fromtimestamp(detail["TrainingStartTime"] / 1000, UTC).replace(second=0, microsecond=0)
    minutes = int((detail["TrainingEndTime"] - detail["TrainingStartTime"]) // 60_000)
    written = 0
    for h in range(1, hosts + 1):
        level = 55.0 if h == 1 else 30.0
        data = []
        for i in range(minutes):
            warm = min(1.0, i / 6)
            wave = 8.0 * math.sin(i / 4 + h)
            per_gpu = max(0.0, warm * (level + wave))
            values = {  # algo-2 a little lower everywhere, so its lines do not hide under algo-1's
                "GPUUtilization": 8 * per_gpu,
                "GPUMemoryUtilization": 8 * (warm * (44.0 - 6.0 * h + 0.25 * i)),
                "CPUUtilization": 96 * (16.0 - 3.0 * h + 20.0 * warm + 3.0 * math.cos(i / 3)),
                "MemoryUtilization": 26.0 - 3.0 * h + 18.0 * warm,
                "DiskUtilization": 9.0 - h + 0.05 * i,
            }
            for name, value in values.items():
                data.append({"MetricName": name, "Dimensions": [{"Name": "Host", "Value": f"{job}/algo-{h}"}],
                             "Timestamp": start + timedelta(minutes=i), "Value": round(value, 3)})  # fmt: skip
        for i in range(0, len(data), 500):
            cloudwatch.put_metric_data(Namespace="/aws/sagemaker/TrainingJobs", MetricData=data[i : i + 500])
        written += len(data)
    return written


def processor_environment(templates: dict[str, dict[str, Any]], plane: DataPlane) -> dict[str, str]:
    """The processor's environment as synthesized, with the emulated resources' names filled in."""
    for template in templates.values():
        for resource in template.get("Resources", {}).values():
            props = resource.get("Properties", {})
            if resource["Type"] == "AWS::Lambda::Function" and props.get("Handler") == (
                "lambdas.trace_processor.handler.handler"
            ):
                env = {k: v for k, v in props["Environment"]["Variables"].items() if isinstance(v, str)}
                env.update(
                    TRACE_BUCKET=plane.bucket,
                    IDEMPOTENCY_TABLE=plane.table,
                    TOPIC_ARN=plane.topic_arn,
                    STATE_MACHINE_ARN="",  # two small files stay below the fan-out thresholds
                )
                return env
    raise DemoError("no trace-processor function in the synthesized templates")


def _deliver_event(sqs: Any, plane: DataPlane, *, job: str, user: str) -> list[dict[str, Any]]:
    """Put the job-completed event on EventBridge; return what the rule delivered to the queue."""
    import boto3

    put = boto3.client("events").put_events(
        Entries=[
            {
                "Source": "aws.sagemaker",
                "DetailType": "SageMaker Training Job State Change",
                "Detail": json.dumps(job_event_detail(job, user, plane.bucket)),
                "Resources": [f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{job}"],
            }
        ]
    )
    if put["FailedEntryCount"]:
        raise DemoError(f"EventBridge rejected the event: {put['Entries']}")
    got = sqs.receive_message(
        QueueUrl=plane.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=2, AttributeNames=["All"]
    )
    messages: list[dict[str, Any]] = got.get("Messages", [])
    if not messages:
        raise DemoError("the rule did not deliver the event to the queue")
    return messages


def _process(sqs: Any, plane: DataPlane, env: dict[str, str], messages: list[dict[str, Any]]) -> list[str]:
    """Run the handler on the messages as the event-source mapping would (successes deleted); its log lines."""
    queue_arn = sqs.get_queue_attributes(QueueUrl=plane.queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    response, logs = _invoke_handler(env, sqs_event_from_messages(messages, queue_arn))
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    for msg in messages:
        if msg["MessageId"] not in failed:
            sqs.delete_message(QueueUrl=plane.queue_url, ReceiptHandle=msg["ReceiptHandle"])
    if failed:
        reasons = [line for line in logs if '"reason"' in line]
        raise DemoError(f"processing failed: {reasons[-1][:500] if reasons else 'see logs'}")
    return logs


def _restore_history(s3: Any, bucket: str, out_dir: Path) -> int:
    """Put the history rows of earlier demo runs back into the (fresh) emulated bucket."""
    root = out_dir / "history"
    files = sorted(root.rglob("*.jsonl")) if root.is_dir() else []
    for path in files:
        s3.upload_file(str(path), bucket, str(path.relative_to(out_dir)))
    return len(files)


def _restore_index_rows(s3: Any, bucket: str, out_dir: Path, user: str) -> int:
    """The index rows of earlier demo jobs (<out>/<job>/index-row.json) back into the fresh emulated bucket: the
    processor rebuilds the user's report index from them (lambdas/trace_processor/report_index.py)."""
    from profstack.report.index import ROW_FILE

    rows = sorted(p for p in out_dir.glob(f"*/{ROW_FILE}") if layout.is_segment(p.parent.name))
    for path in rows:
        s3.upload_file(str(path), bucket, f"{layout.job_reports_prefix(user, path.parent.name)}{ROW_FILE}")
    return len(rows)


def _restore_earlier_runs(s3: Any, bucket: str, out_dir: Path, user: str) -> None:
    restored = _restore_history(s3, bucket, out_dir)
    if restored:
        _say(f"history: {restored} row file(s) of earlier demo runs restored from {out_dir / 'history'}")
    indexed = _restore_index_rows(s3, bucket, out_dir, user)
    if indexed:
        _say(f"report index: {indexed} job row(s) of earlier demo runs restored from {out_dir}/*/")


def _download_index(s3: Any, bucket: str, out_dir: Path, user: str) -> Path | None:
    """reports/<user>/index.html and index.json into <out>/, beside the job folders its links point to."""
    from profstack.report.index import INDEX_HTML, INDEX_JSON

    keys = set(_list(s3, bucket, layout.user_reports_prefix(user)))
    for name in (INDEX_JSON, INDEX_HTML):
        key = f"{layout.user_reports_prefix(user)}{name}"
        if key not in keys:
            return None
        s3.download_file(bucket, key, str(out_dir / name))
    return out_dir / INDEX_HTML


def run(
    traces_dir: Path,
    out_dir: Path,
    cdk_out: Path | None,
    config_path: Path,
    *,
    job: str = DEMO_JOB,
    user: str = DEMO_USER,
    family: str | None = None,
    traces: tuple[str, ...] = DEMO_TRACES,
) -> int:
    started = time.monotonic()
    from profstack.config import load_config

    prefix = load_config(config_path).prefix
    stacks = (f"{prefix}-storage", f"{prefix}-processing")
    templates = load_templates(cdk_out, stacks)
    counts = {name: len(t.get("Resources", {})) for name, t in templates.items()}
    _say("ProfStack demo: " + ", ".join(f"{n} ({c} resources)" for n, c in counts.items()) + " synthesized")
    template, notes = data_plane_template(templates, stacks)
    with emulator() as endpoint:
        import boto3

        _say(f"embedded AWS (moto server) at {endpoint}")
        plane = deploy_data_plane(template)
        _say(
            f"deployed from the templates via CloudFormation: {len(template['Resources'])} resources "
            f"({', '.join(sorted({DATA_PLANE_TYPES[r['Type']] for r in template['Resources'].values()}))})"
        )
        for note in notes:
            _say(f"  {note} (emulator limitation; kept in the real deployment)")
        _say("  not emulated: Lambda (runs in-process below), alarms, dashboard, state machine, KMS")
        s3, sqs, sns = boto3.client("s3"), boto3.client("sqs"), boto3.client("sns")
        inbox = sqs.create_queue(QueueName="demo-inbox")["QueueUrl"]
        inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=plane.topic_arn, Protocol="sqs", Endpoint=inbox_arn)

        env = processor_environment(templates, plane)
        _restore_earlier_runs(s3, plane.bucket, out_dir, user)
        keys = register_job(
            boto3.client("sagemaker"),
            s3,
            plane,
            job=job,
            user=user,
            traces_dir=traces_dir,
            traces=traces,
            family=family,
        )
        folder = keys[0].rsplit("/", 1)[0]
        _say(f"training job {job} (user {user}) with {len(keys)} rank traces under s3://{plane.bucket}/{folder}/")
        seeded = seed_instance_metrics(boto3.client("cloudwatch"), job)
        _say(f"CloudWatch: {seeded} instance-metric points for algo-1 and algo-2 (what SageMaker publishes)")

        messages = _deliver_event(sqs, plane, job=job, user=user)
        _say(f"EventBridge rule -> SQS delivered {len(messages)} message(s); running the processor handler")
        logs = _process(sqs, plane, env, messages)

        from demo.local_emf import publish_emf

        points = publish_emf(logs, boto3.client("cloudwatch"))
        report_dir = _download(s3, plane.bucket, layout.job_reports_prefix(user, job), out_dir / job)
        history_files = _download_history(s3, plane.bucket, out_dir)
        index_page = _download_index(s3, plane.bucket, out_dir, user)
        summary = json.loads((report_dir / "summary.json").read_text())
        _print_findings(summary)
        system = summary.get("system") or {}
        _say(f"system metrics: {system.get('status')} ({system.get('hosts')} hosts) -> {report_dir / 'system.json'}")
        _print_metrics(boto3.client("cloudwatch"), job, points)
        notes_in = sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10).get("Messages", [])
        for message in notes_in:
            body = json.loads(message["Body"])
            _say(f"\nnotification (SNS -> e-mail): {body.get('Subject')}")
            for line in str(body.get("Message", "")).splitlines()[:40]:
                _say(f"  | {line}")
        tags = s3.get_object_tagging(
            Bucket=plane.bucket,
            Key=f"output/{job}/rule-output/ProfilerReport-1796565600/profiler-output/profiler-report.html",
        )["TagSet"]
        _say(f"\nlegacy rule-output tagged for expiry: {', '.join(t['Key'] + '=' + t['Value'] for t in tags)}")
        tensorboard = _download_event_files(s3, plane.bucket, layout.job_tensorboard_prefix(user, job), report_dir)
        for key, path in tensorboard:
            _say(f"TensorBoard scalars: s3://{plane.bucket}/{key} -> {path.resolve()}")
        if not tensorboard:
            _say("TensorBoard scalars: none")
    _say(f"\nhistory: {history_files} row file(s) under {(out_dir / 'history').resolve()}")
    _print_queries(out_dir)
    _say(f"\nHTML report: {(report_dir / 'report.html').resolve()}")
    if index_page is not None:
        _say(f"report index: {index_page.resolve()}  (reports/{user}/index.html: every job of {user}, newest first)")
    _say(f"summary:     {(report_dir / 'summary.json').resolve()}")
    perfetto = sorted((report_dir / "perfetto").glob("*.gz")) if (report_dir / "perfetto").is_dir() else []
    for path in perfetto:
        _say(f"perfetto:    {path.resolve()}  (open in https://ui.perfetto.dev)")
    _say(f"demo finished in {time.monotonic() - started:.1f} s")
    return 0


def _invoke_handler(env: dict[str, str], event: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Run the real handler in-process with the function's environment; capture its stdout (logs, EMF)."""
    buffer = io.StringIO()
    with patched_environ(env):
        from lambdas.trace_processor import handler, runtime, telemetry

        runtime.reset()
        for log_handler in logging.getLogger(telemetry.logger.service).handlers:
            if isinstance(log_handler, logging.StreamHandler):
                log_handler.stream = buffer
        with contextlib.redirect_stdout(buffer):
            response: dict[str, Any] = handler.handler(event, LambdaContext())
    return response, buffer.getvalue().splitlines()


def _list(s3: Any, bucket: str, prefix: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def _download(s3: Any, bucket: str, prefix: str, target: Path) -> Path:
    if target.exists():
        shutil.rmtree(target)
    for key in _list(s3, bucket, prefix):
        name = key[len(prefix) :]
        if name.startswith("."):
            continue  # internal markers
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, key, str(path))
    return target


def _download_history(s3: Any, bucket: str, out_dir: Path) -> int:
    """history/ of the emulated bucket into <out>/history/ (kept across runs, unlike the emulator)."""
    keys = _list(s3, bucket, "history/")
    for key in keys:
        path = out_dir / key
        path.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, key, str(path))
    return len(keys)


def _print_queries(out_dir: Path) -> None:
    """The Athena named queries over <out>/history with DuckDB (a dev dependency) as Athena's stand-in."""
    try:
        import duckdb
    except ImportError:
        _say("named queries: install duckdb (requirements/dev.txt) to run them over the demo's rows")
        return
    from profstack.history.queries import NAMED_QUERIES
    from profstack.history.rows import COLUMNS, TABLES

    kinds = {"string": "VARCHAR", "int": "INTEGER", "bigint": "BIGINT", "double": "DOUBLE", "boolean": "BOOLEAN"}
    con = duckdb.connect()
    for table in TABLES:
        if not list((out_dir / "history" / table).glob("*/*/*.jsonl")):
            return
        columns = ", ".join(f"'{name}': '{kinds[kind]}'" for name, kind in COLUMNS[table])
        pattern = str(out_dir / "history" / table / "*" / "*" / "*.jsonl")
        # our own table names and columns; the path is the demo's output folder
        options = (
            f"format='newline_delimited', hive_partitioning=true, hive_types_autocast=false, columns={{{columns}}}"
        )
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_json('{pattern}', {options})")  # noqa: S608
    for query in NAMED_QUERIES:
        cursor = con.execute(query.render({t: t for t in TABLES}))
        names = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
        _say(f"\nnamed query {query.name} (DuckDB over the history rows): {len(rows)} row(s)")
        for row in rows[:5]:
            cells = ", ".join(f"{n}={str(v)[:70]}" for n, v in zip(names, row, strict=True))
            _say(f"  {cells}")


def _download_event_files(s3: Any, bucket: str, prefix: str, report_dir: Path) -> list[tuple[str, Path]]:
    """The job's TensorBoard event files (the scalars ProfStack wrote), into <report_dir>/tensorboard/."""
    copied = []
    for key in _list(s3, bucket, prefix):
        if "tfevents" in key.rsplit("/", 1)[-1]:
            path = report_dir / TENSORBOARD_DIR / key.rsplit("/", 1)[-1]
            path.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, key, str(path))
            copied.append((key, path))
    return copied


def _print_findings(summary: dict[str, Any]) -> None:
    ranks = summary.get("ranks", [])
    _say(f"\nanalysed {len(ranks)} ranks, complete={summary.get('complete')}")
    for row in summary.get("cross_rank", {}).get("table", []):
        _say(
            f"  rank {row.get('rank')}: step mean {row.get('step_mean_us', 0) / 1000:.1f} ms, "
            f"GPU busy {row.get('gpu_busy_pct')}%, idle {row.get('idle_pct')}%"
        )
    found = summary.get("findings", [])
    _say(f"findings ({len(found)}):")
    for finding in found[:8]:
        _say(f"  [{finding.get('severity')}] {finding.get('rule_id')}: {finding.get('message')}")
        if finding.get("recommendation"):
            _say(f"      -> {finding['recommendation']}")


def _print_metrics(cloudwatch: Any, job: str, points: int) -> None:
    metrics = cloudwatch.list_metrics(Namespace="ProfStack", Dimensions=[{"Name": "TrainingJobName", "Value": job}])[
        "Metrics"
    ]
    names = sorted({m["MetricName"] for m in metrics})
    _say(f"\nCloudWatch (from {points} EMF data points): ProfStack/{{TrainingJobName={job}}}: {', '.join(names)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--cdk-out", type=Path, default=REPO_ROOT / "cdk.out", help="synthesized cloud assembly")
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--out", type=Path, default=Path("demo-output"), help="where the report is copied")
    parser.add_argument("--config", type=Path, default=REPO_ROOT / "config" / "profstack.yaml")
    parser.add_argument("--job", default=DEMO_JOB, help=f"training job name (default {DEMO_JOB})")
    parser.add_argument("--family", help="profstack:family tag of the job: runs of one family are compared")
    parser.add_argument(
        "--trace",
        action="append",
        metavar="REL",
        help="trace file under --traces, one per rank (repeatable; default: the two hta/trace_filter ranks)",
    )
    args = parser.parse_args(argv)
    try:
        return run(
            args.traces,
            args.out,
            args.cdk_out,
            args.config,
            job=args.job,
            family=args.family,
            traces=tuple(args.trace) if args.trace else DEMO_TRACES,
        )
    except DemoError as exc:
        print(f"profstack demo: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
