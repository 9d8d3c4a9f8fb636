"""The synthesized fan-out state machine, executed by moto (issue 11, item 5): the Distributed Map, its S3
item reader, the Choice by size, the analyze-file items and the aggregate step run end to end.

moto runs the definition (`execute_state_machine`); its Lambda task integration would call moto's Lambda,
which needs Docker, so those invokes are served in-process by the real handlers
(moto.stepfunctions.parser...lambda_eval_utils._invoke_lambda_function is the one call both Lambda task
forms go through). The SageMaker Processing job route has no emulator: moto fails that item, the map
tolerates it, and the aggregate flags the file; that is the behaviour asserted for it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from demo.lambda_harness import LambdaContext, patched_environ, sqs_event, sqs_record
from profstack import layout
from tests.functional.processing_support import (
    ACCOUNT,
    REGION,
    TRACE_BUCKET,
    USER,
    DataPlane,
    create_data_plane,
    job_event,
    processor_environ,
    register_training_job,
    throttled_cloudwatch,
)

RANKS = ("hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz")
ANALYZE_FILE_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:profstack-analyze-file"
AGGREGATE_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:profstack-aggregate"


def _resolve(node: Any, template: dict[str, Any]) -> str:
    """The definition's Fn::Join as text: functions -> the in-process ARNs, the bucket -> the test bucket."""
    if isinstance(node, str):
        return node
    if "Ref" in node:
        return {"AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}.get(node["Ref"], node["Ref"])
    if "Fn::GetAtt" in node:
        logical_id = node["Fn::GetAtt"][0]
        if "AnalyzeFileFunction" in logical_id:
            return ANALYZE_FILE_ARN
        if "AggregateFunction" in logical_id:
            return AGGREGATE_ARN
        return f"arn:aws:iam::{ACCOUNT}:role/{logical_id}"
    if "Fn::ImportValue" in node:
        export = node["Fn::ImportValue"]
        return TRACE_BUCKET if "TraceStoreTraces" in export else f"arn:aws:kms:{REGION}:{ACCOUNT}:key/data-key"
    if "Fn::Sub" in node:
        text, values = node["Fn::Sub"]
        return re.sub(r"\$\{([^}]+)\}", lambda m: _resolve(values.get(m.group(1), {"Ref": m.group(1)}), template), text)
    if "Fn::Join" in node:
        sep, parts = node["Fn::Join"]
        return str(sep).join(_resolve(p, template) for p in parts)
    raise AssertionError(f"unexpected intrinsic {node}")


@pytest.fixture(scope="module")
def processing_template(example_config: Any) -> dict[str, Any]:
    from tests.infra.conftest import synthesize

    template: dict[str, Any] = synthesize(example_config, nag=False).templates[f"{example_config.prefix}-processing"]
    return template


@pytest.fixture(scope="module")
def aggregate_max_attempts(processing_template: dict[str, Any]) -> str:
    """What the stack tells the aggregate function (FanoutWorkflow, from AGGREGATE_ATTEMPTS)."""
    (fn,) = [
        r["Properties"]
        for r in processing_template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"]["Handler"] == "lambdas.trace_processor.aggregate.handler"
    ]
    return str(fn["Environment"]["Variables"]["AGGREGATE_MAX_ATTEMPTS"])


@pytest.fixture(scope="module")
def definition(processing_template: dict[str, Any]) -> str:
    template = processing_template
    (machine,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"]
    text = _resolve(machine["Properties"]["DefinitionString"], template)
    json.loads(text)  # a valid ASL document
    # moto's ASL grammar takes ToleratedFailurePercentage only as a NUMBER token, not an INT: the same
    # JSON number spelled 100.0 (Step Functions itself accepts both).
    return re.sub(r'"ToleratedFailurePercentage":(\d+)([,}])', r'"ToleratedFailurePercentage":\1.0\2', text)


def _serve_lambda_in_process(monkeypatch: pytest.MonkeyPatch, calls: list[str]) -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

    from lambdas.trace_processor import aggregate as aggregate_entry
    from lambdas.trace_processor import analyze_file as analyze_entry

    handlers = {ANALYZE_FILE_ARN: analyze_entry.handler, AGGREGATE_ARN: aggregate_entry.handler}

    def invoke(parameters: dict[str, Any], region: str, state_credentials: Any) -> dict[str, Any]:
        name = str(parameters["FunctionName"])
        handler = handlers[name]
        calls.append(name)
        event = json.loads(parameters.get("Payload") or b"{}")
        try:
            return {"StatusCode": 200, "Payload": handler(event, LambdaContext())}
        except Exception as exc:  # what Lambda reports for an unhandled error
            return {
                "StatusCode": 200,
                "FunctionError": "Unhandled",
                "Payload": {"errorType": type(exc).__name__, "errorMessage": str(exc)},
            }

    monkeypatch.setattr(lambda_eval_utils, "_invoke_lambda_function", invoke)


@pytest.fixture
def machine(
    aws_credentials: None, definition: str, aggregate_max_attempts: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[DataPlane, Any, list[str]]]:
    calls: list[str] = []
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        plane = create_data_plane()
        sfn = boto3.client("stepfunctions", region_name=REGION)
        arn = sfn.create_state_machine(
            name="profstack-fanout", definition=definition, roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn"
        )["stateMachineArn"]
        environ = processor_environ(
            plane.topic_arn,
            FANOUT_FILE_THRESHOLD="1",  # two files -> fan out
            # rank-0's gzip is 124 kB (~1.86 MB at 15:1), rank-1's 120 kB: rank-0 -> Processing job
            SINGLE_LAMBDA_MAX_FILE_BYTES=str(122_000 * 15),
            STATE_MACHINE_ARN=arn,
            AGGREGATE_MAX_ATTEMPTS=aggregate_max_attempts,
        )
        with patched_environ(environ):
            from lambdas.trace_processor import runtime

            runtime.reset()
            _serve_lambda_in_process(monkeypatch, calls)
            yield plane, sfn, calls
            runtime.reset()


def _wait(sfn: Any, execution_arn: str, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        found: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
        if found["status"] != "RUNNING" or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _two_rank_job(plane: DataPlane, traces_dir: Path, job: str) -> None:
    """A registered training job of ``USER`` with one trace per rank (RANKS) under its TensorBoard prefix."""
    register_training_job(plane, job)
    for i, rel in enumerate(RANKS):
        key = f"{layout.job_tensorboard_prefix(USER, job)}algo-{i + 1}_1.1.pt.trace.json.gz"
        plane.s3.upload_file(str(traces_dir / rel), TRACE_BUCKET, key)


@pytest.mark.slow  # one synth (~30 s) and a real execution
def test_the_synthesized_fanout_runs_end_to_end(machine: tuple[DataPlane, Any, list[str]], traces_dir: Path) -> None:
    from lambdas.trace_processor import handler

    plane, sfn, calls = machine
    job = "fanned-job"
    _two_rank_job(plane, traces_dir, job)
    # WHEN the job-completed event reaches the processor, which writes the manifest and starts the execution
    response = handler.handler(sqs_event(sqs_record(job_event(job))), LambdaContext())
    assert response["batchItemFailures"] == []
    (execution,) = sfn.list_executions(stateMachineArn=handler.runtime.env().state_machine_arn)["executions"]
    # THEN moto runs the synthesized definition to the end
    done = _wait(sfn, execution["executionArn"])
    assert done["status"] == "SUCCEEDED", done
    # AND the Distributed Map read the manifest and ran the Lambda-routed item, then the aggregate ran once
    assert calls.count(ANALYZE_FILE_ARN) == 1
    assert calls.count(AGGREGATE_ARN) == 1
    reports = layout.job_reports_prefix(USER, job)
    keys = plane.list_keys(reports)
    assert f"{reports}partials/00001/summary.json" in keys
    summary = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}summary.json")["Body"].read())
    # AND the report covers rank 1, and flags the Processing-job file (no Processing emulator in moto)
    assert [r["rank"] for r in summary["ranks"]] == [1]
    assert summary["complete"] is False
    (flagged,) = [i for i in summary["inputs"] if i["status"] == "failed"]
    assert flagged["name"].endswith("algo-1_1.1.pt.trace.json.gz")
    assert "Processing job did not finish" in flagged["error"]["message"]
    assert f"{reports}report.html" in keys
    assert len(plane.notifications()) == 1


@pytest.mark.slow  # one synth (~30 s, shared with the test above) and a real execution with retries
def test_the_synthesized_fanout_retries_a_throttled_aggregate_and_reports_on_its_last_attempt(
    machine: tuple[DataPlane, Any, list[str]], traces_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

    from lambdas.trace_processor import handler, runtime

    plane, sfn, calls = machine
    # GIVEN a fanned-out job whose GetMetricData stays throttled past botocore's retries on every attempt
    job = "fanned-throttled"
    _two_rank_job(plane, traces_dir, job)
    attempts = runtime.env().aggregate_max_attempts
    assert attempts is not None
    assert attempts >= 2
    cloudwatch = runtime.clients().cloudwatch
    assert cloudwatch is not None
    stubber = throttled_cloudwatch(cloudwatch, attempts)
    # AND moto's retrier waits recorded instead of slept (they are minutes)
    waits: list[float] = []
    monkeypatch.setattr(retrier_decl, "time", SimpleNamespace(sleep=waits.append))
    # WHEN the job-completed event starts the execution and moto runs the synthesized definition
    response = handler.handler(sqs_event(sqs_record(job_event(job))), LambdaContext())
    assert response["batchItemFailures"] == []
    (execution,) = sfn.list_executions(stateMachineArn=runtime.env().state_machine_arn)["executions"]
    done = _wait(sfn, execution["executionArn"])
    stubber.assert_no_pending_responses()
    stubber.deactivate()
    # THEN the aggregate step ran AGGREGATE_MAX_ATTEMPTS times: each run before the last raised the error the
    # state's Retry names, and was retried with backoff (at most 60 s x 2^n, capped at 300 s, jittered)
    assert done["status"] == "SUCCEEDED", done
    assert calls.count(AGGREGATE_ARN) == attempts
    assert len(waits) == attempts - 1
    assert all(0 <= w <= min(60 * 2**n, 300) for n, w in enumerate(waits)), waits
    history = sfn.get_execution_history(executionArn=execution["executionArn"], maxResults=1000)["events"]
    failed = [e["lambdaFunctionFailedEventDetails"] for e in history if e["type"] == "LambdaFunctionFailed"]
    assert [f["error"] for f in failed] == ["SystemMetricsTransientError"] * (attempts - 1)
    # AND the last attempt published the report, the system section unavailable with the reason, one e-mail
    reports = layout.job_reports_prefix(USER, job)
    summary = json.loads(plane.s3.get_object(Bucket=TRACE_BUCKET, Key=f"{reports}summary.json")["Body"].read())
    assert summary["system"]["status"] == "unavailable"
    assert "GetMetricData failed after retries (Throttling)" in summary["system"]["reason"]
    assert [r["rank"] for r in summary["ranks"]] == [1]
    (note,) = plane.notifications()
    assert "System metrics: unavailable: GetMetricData failed after retries (Throttling)" in note["Message"]
