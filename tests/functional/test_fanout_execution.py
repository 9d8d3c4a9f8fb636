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
def definition(example_config: Any) -> str:
    from tests.infra.conftest import synthesize

    template = synthesize(example_config, nag=False).templates[f"{example_config.prefix}-processing"]
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
    aws_credentials: None, definition: str, monkeypatch: pytest.MonkeyPatch
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


@pytest.mark.slow  # one synth (~30 s) and a real execution
def test_the_synthesized_fanout_runs_end_to_end(machine: tuple[DataPlane, Any, list[str]], traces_dir: Path) -> None:
    from lambdas.trace_processor import handler

    plane, sfn, calls = machine
    job = "fanned-job"
    register_training_job(plane, job)
    for i, rel in enumerate(RANKS):
        key = f"{layout.job_tensorboard_prefix(USER, job)}algo-{i + 1}_1.1.pt.trace.json.gz"
        plane.s3.upload_file(str(traces_dir / rel), TRACE_BUCKET, key)
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
