"""The SageMaker Processing path's entry point, run on a real trace with the container's layout
(/opt/ml/processing/input and /output mapped to temporary folders), fed exactly what SageMaker would
download for the input the state machine asks for (issue 11, item 5)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lambdas.trace_processor.aws import S3Object
from lambdas.trace_processor.routing import processing_input_manifest
from profstack.layout import PROCESSING_INPUT_MANIFEST
from stacks.components.fanout_workflow import PROCESSING_COMMAND, PROCESSING_INPUT, PROCESSING_OUTPUT
from tests.conftest import REPO_ROOT

SAMPLE = "hta/trace_filter/sampled_rank-1.json.gz"
BUCKET = "profstack-traces-test"
PREFIX = "traces/alice/job-1/"


def _sagemaker_download(s3: Any, s3_input: dict[str, str], local: Path) -> list[str]:
    """What SageMaker Processing puts under LocalPath for an S3Input (File mode): an S3Prefix input gets every
    key that starts with S3Uri; a ManifestFile input gets the manifest's keys, relative to its prefix."""
    bucket, _, key = s3_input["S3Uri"].removeprefix("s3://").partition("/")
    if s3_input["S3DataType"] == "S3Prefix":
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=key).get("Contents", [])]
        pairs = [(k, k[len(key.rsplit("/", 1)[0]) + 1 :]) for k in keys]
    else:
        assert s3_input["S3DataType"] == "ManifestFile"
        entries = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        prefix = entries[0]["prefix"].removeprefix(f"s3://{bucket}/")
        pairs = [(prefix + rel, rel) for rel in entries[1:]]
    for source, relative in pairs:
        target = local / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, source, str(target))
    return sorted(relative for _, relative in pairs)


def _run_entrypoint(input_dir: Path, output_dir: Path) -> subprocess.CompletedProcess[str]:
    # the container's command, with its fixed paths mapped to the test's folders and the console script
    # to this checkout's interpreter
    cli = f"{shlex.quote(sys.executable)} -c 'import sys; from profstack.cli import main; sys.exit(main(sys.argv[1:]))'"
    command = (
        PROCESSING_COMMAND.replace(PROCESSING_INPUT, shlex.quote(str(input_dir)))
        .replace(PROCESSING_OUTPUT, shlex.quote(str(output_dir)))
        .replace("profstack analyze", f"{cli} analyze", 1)
    )
    return subprocess.run(
        ["/bin/sh", "-c", command], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def s3(aws_credentials: None, traces_dir: Path) -> Any:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        # the trace, and a sibling whose key starts with the trace's key
        client.upload_file(str(traces_dir / SAMPLE), BUCKET, f"{PREFIX}algo-1_1.1.pt.trace.json")
        client.upload_file(str(traces_dir / SAMPLE), BUCKET, f"{PREFIX}algo-1_1.1.pt.trace.json.gz")
        yield client


def test_a_prefix_input_would_pull_the_sibling_but_the_manifest_input_is_exact(s3: Any, tmp_path: Path) -> None:
    obj = S3Object(BUCKET, f"{PREFIX}algo-1_1.1.pt.trace.json", 1)
    # GIVEN the old input (S3Prefix of the key) THEN SageMaker would download both files
    before = _sagemaker_download(
        s3, {"S3Uri": f"s3://{BUCKET}/{obj.key}", "S3DataType": "S3Prefix"}, tmp_path / "prefix"
    )
    assert before == ["algo-1_1.1.pt.trace.json", "algo-1_1.1.pt.trace.json.gz"]
    # WHEN the processor writes the item's input manifest (what the state machine now points SageMaker at)
    manifest_key = f"reports/alice/job-1/partials/00000/{PROCESSING_INPUT_MANIFEST}"
    s3.put_object(Bucket=BUCKET, Key=manifest_key, Body=json.dumps(processing_input_manifest(obj)).encode())
    after = _sagemaker_download(
        s3, {"S3Uri": f"s3://{BUCKET}/{manifest_key}", "S3DataType": "ManifestFile"}, tmp_path / "manifest"
    )
    # THEN exactly the one object arrives
    assert after == ["algo-1_1.1.pt.trace.json"]


def test_the_processing_entrypoint_analyses_the_input_into_the_output_layout(s3: Any, tmp_path: Path) -> None:
    # GIVEN the container's input folder filled from the item's manifest (a real two-rank sample's rank 1)
    obj = S3Object(BUCKET, f"{PREFIX}algo-1_1.1.pt.trace.json.gz", 1)
    manifest_key = f"reports/alice/job-1/partials/00001/{PROCESSING_INPUT_MANIFEST}"
    s3.put_object(Bucket=BUCKET, Key=manifest_key, Body=json.dumps(processing_input_manifest(obj)).encode())
    input_dir, output_dir = tmp_path / "opt/ml/processing/input", tmp_path / "opt/ml/processing/output"
    output_dir.mkdir(parents=True)
    _sagemaker_download(s3, {"S3Uri": f"s3://{BUCKET}/{manifest_key}", "S3DataType": "ManifestFile"}, input_dir)
    # WHEN the container's command runs
    done = _run_entrypoint(input_dir, output_dir)
    # THEN it succeeds and leaves what SageMaker uploads to the partial's prefix: summary.json and the trace
    assert done.returncode == 0, done.stderr
    summary = json.loads((output_dir / "summary.json").read_text())
    assert [i["name"] for i in summary["inputs"]] == ["algo-1_1.1.pt.trace.json.gz"]
    assert summary["ranks"][0]["rank"] == 1
    assert summary["ranks"][0]["counts"]["gpu_kernels"] == 1104
    assert sorted(p.name for p in (output_dir / "perfetto").iterdir()) == ["rank-1.trace.json.gz"]
    # AND the aggregate step can read that summary as a partial (same schema as the Lambda path's)
    from lambdas.trace_processor.summary_tools import merge_partials

    merged = merge_partials([summary], [], cross_rank=lambda table: ({}, []))
    assert merged["cross_rank"]["rank_count"] == 1


def test_partial_results_still_count_as_success_and_garbage_fails(tmp_path: Path) -> None:
    # GIVEN a truncated trace (partial results: `profstack analyze` exits 1) THEN the job still succeeds
    source = (REPO_ROOT / "samples/traces" / SAMPLE).read_bytes()
    import gzip

    text = gzip.decompress(source)
    input_dir, output_dir = tmp_path / "in", tmp_path / "out"
    input_dir.mkdir()
    output_dir.mkdir()
    (input_dir / "rank-1.pt.trace.json").write_bytes(text[: len(text) // 2])
    done = _run_entrypoint(input_dir, output_dir)
    assert done.returncode == 0, done.stderr
    assert json.loads((output_dir / "summary.json").read_text())["complete"] is False
    # AND a run that writes no summary (here: the output folder cannot be created) fails the job
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the output folder should be")
    assert _run_entrypoint(input_dir, blocker / "out").returncode != 0
