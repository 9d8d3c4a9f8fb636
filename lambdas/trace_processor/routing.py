"""Where a job's files are analysed: here in one Lambda, or fanned out to the state machine (one map
item per file, a file too large for Lambda routed to the SageMaker Processing job). Also where the
fan-out's manifest and partial summaries live."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
import zlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from lambdas.trace_processor import aws
from lambdas.trace_processor.aws import Clients, S3Location, S3Object, put_json
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.errors import ProcessingError
from lambdas.trace_processor.job import JobContext
from lambdas.trace_processor.system_view import describe_for_fanout
from lambdas.trace_processor.telemetry import logger
from profstack.layout import PROCESSING_INPUT_MANIFEST

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

# Uncompressed/compressed size of Kineto traces: 13.2:1 on bench/generate.py traces, 14.5:1 on the
# hta/trace_filter ranks (docs/processing.md). Thresholds are in uncompressed bytes.
GZIP_RATIO = 15


#: a .json.gz file's head read to estimate its JSON bytes and events (routing by work, not by compressed bytes)
SAMPLE_BYTES = 256 * 1024
#: files smaller than this are not sampled (even at gzip's ~1000:1 they hold at most a few hundred MB of JSON)
SAMPLE_MIN_BYTES = 64 * 1024
SAMPLE_MAX_OUTPUT = 64 * 2**20
SAMPLE_READERS = 8


def estimated_json_bytes(obj: S3Object) -> int:
    """What the engine will parse. Work scales with uncompressed JSON, so .gz sizes are scaled by the ratio
    sampled from the file's head when there is one, else GZIP_RATIO (Kineto traces compress ~13-15:1; the
    larger ratio errs towards fanning out)."""
    if obj.json_bytes is not None:
        return obj.json_bytes
    return obj.size * GZIP_RATIO if obj.key.endswith(".gz") else obj.size


def route_for(obj: S3Object, env: ProcessorEnv) -> str:
    """Lambda, or the Processing job for a file whose JSON bytes or events (sampled) are beyond one Lambda."""
    too_big = estimated_json_bytes(obj) > env.single_lambda_max_file_bytes
    too_many = obj.events is not None and obj.events > env.single_lambda_max_events
    return "processing" if too_big or too_many else "lambda"


def sample_estimate(s3: Any, obj: S3Object) -> S3Object:
    """`obj` with its JSON bytes and events estimated from its first SAMPLE_BYTES: a crafted .json.gz (31.6 M
    tiny events in 7.3 MB, ~200:1) is then routed by its work, not by its compressed size. A failed read or a
    head that does not inflate leaves the default estimate (the analysis then says what is wrong with it)."""
    if not obj.key.endswith(".gz") or obj.size < SAMPLE_MIN_BYTES:
        return obj
    try:
        body = s3.get_object(Bucket=obj.bucket, Key=obj.key, Range=f"bytes=0-{SAMPLE_BYTES - 1}")["Body"]
        try:
            head = body.read()
        finally:
            body.close()
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = inflater.decompress(head, SAMPLE_MAX_OUTPUT)
    except (OSError, zlib.error, ClientError):
        return obj
    consumed = len(head) - len(inflater.unconsumed_tail) - len(inflater.unused_data)
    if consumed <= 0 or not out:
        return obj
    ratio = max(len(out) / consumed, GZIP_RATIO)
    json_bytes = int(obj.size * ratio)
    events = int(json_bytes * out.count(b'"ph"') / len(out))
    return replace(obj, json_bytes=json_bytes, events=events)


def sample_estimates(s3: Any, objects: Sequence[S3Object]) -> list[S3Object]:
    """Every object with its sampled estimate (a few in parallel), in the same order."""
    with ThreadPoolExecutor(max_workers=SAMPLE_READERS) as pool:
        return list(pool.map(lambda o: sample_estimate(s3, o), objects))


def needs_fanout(objects: Sequence[S3Object], env: ProcessorEnv) -> bool:
    return (
        len(objects) > env.fanout_file_threshold
        or sum(estimated_json_bytes(o) for o in objects) > env.fanout_bytes_threshold
        or any(route_for(o, env) == "processing" for o in objects)
    )


def execution_name(job: str, status: str, suffix: str = "") -> str:
    """Deterministic: a duplicate event cannot start a second execution (ExecutionAlreadyExists). A `suffix`
    (start_fanout's fallback names) is always kept whole within Step Functions' 80 characters."""
    tail = f"-{suffix}" if suffix else ""
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"{job}-{status}")[: 80 - len(tail)] + tail


def _start_execution(sfn: SFNClient, machine: str, ctx: JobContext, payload: Mapping[str, Any]) -> bool:
    """Start the job's execution; False when it already exists. An existing execution of the job's name is this
    job's only if its input is this payload: anyone allowed states:StartExecution could take the (predictable)
    name first, and treating theirs as ours would cost the job its report. Then the job's execution runs under
    a name with the payload's digest, or, if that is taken by another input too, a random one."""
    sent = json.loads(json.dumps(payload))  # what DescribeExecution gives back
    digest = hashlib.sha256(json.dumps(sent, sort_keys=True).encode()).hexdigest()[:16]
    # a re-analysis (its payload names the request) never is the job's first execution: its own name first
    first = () if payload.get("request") else ("",)
    for suffix in (*first, digest, uuid.uuid4().hex[:16]):
        name = execution_name(ctx.job, ctx.status, suffix)
        if aws.start_execution(sfn, state_machine_arn=machine, name=name, payload=payload):
            return True
        if aws.execution_input(sfn, state_machine_arn=machine, name=name) == sent:
            return False
        logger.warning(
            "an execution with this job's fan-out name but another input exists; not this job's",
            extra={"execution": name},
        )
    raise ProcessingError(f"could not start a fan-out execution for {ctx.job!r}: every name tried is taken")


def manifest_location(ctx: JobContext) -> S3Location:
    return ctx.reports.child("partials", "manifest.json")


def input_location(ctx: JobContext) -> S3Location:
    """The execution input the processor sent the job's fan-out, as it stored it (fanout.trusted_context checks
    each step's input against it: only the processing roles write reports/)."""
    return ctx.reports.child("partials", "execution-input.json")


def partial_location(ctx: JobContext, index: int) -> S3Location:
    return ctx.reports.child("partials", f"{index:05d}", "summary.json")


def processing_input_manifest(obj: S3Object) -> list[Any]:
    """A SageMaker Processing `ManifestFile` input naming exactly `obj`: an `S3Prefix` input would also pull
    every key that starts with it (`x.pt.trace.json` would bring `x.pt.trace.json.gz` along)."""
    directory, _, name = obj.key.rpartition("/")
    return [{"prefix": f"s3://{obj.bucket}/{directory}/" if directory else f"s3://{obj.bucket}/"}, name]


def start_fanout(
    clients: Clients,
    env: ProcessorEnv,
    ctx: JobContext,
    objects: Sequence[S3Object],
    *,
    describe: Mapping[str, Any] | None = None,
    request: str | None = None,
) -> bool:
    """Write the item manifest (a JSON array the Distributed Map reads) and start the execution.
    Returns False when an execution for this job and status already exists. `describe` travels in the
    execution input (system_view.describe_for_fanout: the keys the aggregate step's system view and e-mail
    need), so the aggregate step reads no SageMaker API. `request`: a re-analysis request's id
    (profstack reports reanalyze), which makes the payload, and so the execution, new."""
    if clients.sfn is None or not env.state_machine_arn:
        raise ProcessingError("fan-out needed but no state machine is configured")
    items = [
        {
            "index": i,
            "bucket": o.bucket,
            "key": o.key,
            "size": o.size,
            "route": route_for(o, env),
            # The SageMaker Processing path writes its summary.json here (ASL cannot zero-pad).
            "partial_prefix": partial_location(ctx, i).key.rsplit("/", 1)[0] + "/",
        }
        for i, o in enumerate(objects)
    ]
    for item, obj in zip(items, objects, strict=True):
        if item["route"] == "processing":  # the Processing job's exact input (fanout_workflow.py)
            target = S3Location(ctx.trace_bucket, str(item["partial_prefix"]) + PROCESSING_INPUT_MANIFEST)
            put_json(clients.s3, target, processing_input_manifest(obj))
    manifest = manifest_location(ctx)
    put_json(clients.s3, manifest, items)
    payload: dict[str, Any] = {
        "context": ctx.to_json(),
        "manifest": {"bucket": manifest.bucket, "key": manifest.key},
        "partials": {"bucket": ctx.trace_bucket, "prefix": ctx.reports.child("partials", "").key},
        "job": describe_for_fanout(describe or {}),
    }
    if request:
        payload["request"] = request
    put_json(clients.s3, input_location(ctx), payload)
    return _start_execution(clients.sfn, env.state_machine_arn, ctx, payload)
