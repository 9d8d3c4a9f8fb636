"""The pinned GPU table and the hosts of a job (profstack/jobs/instances.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import botocore.session
import pytest

from profstack.jobs.instances import (
    GPU_INSTANCE_TYPES,
    NON_GPU_ACCELERATOR_FAMILIES,
    SOURCES,
    gpu_spec,
    hosts_of,
    looks_like_gpu_type,
)


def _training_types() -> list[str]:
    model = botocore.session.get_session().get_service_model("sagemaker")
    return list(model.shape_for("TrainingInstanceType").enum)


def test_every_gpu_training_type_of_the_api_model_is_in_the_table() -> None:
    # GIVEN the TrainingInstanceType enum of the installed botocore (what SageMaker trains on)
    gpu_types = [t for t in _training_types() if looks_like_gpu_type(t)]
    # THEN the table knows each of them (a newer botocore with a new GPU type fails here, on purpose)
    assert gpu_types, "the enum lists GPU types"
    assert sorted(set(gpu_types) - set(GPU_INSTANCE_TYPES)) == []
    # AND the table names nothing SageMaker does not train on
    assert sorted(set(GPU_INSTANCE_TYPES) - set(_training_types())) == []
    # AND the accelerated types outside the table are the known non-GPU families
    others = {t.split(".")[1] for t in _training_types() if t.startswith(("ml.trn", "ml.inf"))}
    assert others <= NON_GPU_ACCELERATOR_FAMILIES


def test_rows_are_consistent_and_name_their_source() -> None:
    for row in GPU_INSTANCE_TYPES.values():
        assert row.gpus >= 1, row
        assert row.vcpus >= row.gpus, row
        assert row.gpu_memory_gib > 0, row
        assert row.source in SOURCES
        assert row.verified == (row.source in {"aws-batch", "ec2-api"}), row


@pytest.mark.parametrize(
    ("instance_type", "gpus", "memory", "vcpus"),
    [
        # AWS Batch user guide, "Run GPU jobs": total GPU memory / GPUs
        ("ml.g4dn.12xlarge", 4, 16, 48),
        ("ml.g5.48xlarge", 8, 24, 192),
        ("ml.g5.12xlarge", 4, 24, 48),
        ("ml.p2.16xlarge", 16, 12, 64),
        ("ml.p3.16xlarge", 8, 16, 64),
        ("ml.p3dn.24xlarge", 8, 32, 96),
    ],
)
def test_verified_rows_match_the_aws_batch_table(instance_type: str, gpus: int, memory: float, vcpus: int) -> None:
    spec = gpu_spec(instance_type)
    assert spec is not None
    assert spec.verified
    assert (spec.gpus, spec.vcpus) == (gpus, vcpus)
    # (Batch's "24 GiB" per A10G is the product pages' decimal 24 GB; the EC2 API says 22,888 MiB)
    assert spec.gpu_memory_gib == pytest.approx(memory, rel=0.08)


def _ec2_snapshot() -> dict[str, Any]:
    """EC2 DescribeInstanceTypes as moto ships it (captured from the AWS API)."""
    import moto.ec2

    path = Path(moto.ec2.__file__).parent / "resources" / "instance_types.json.gz"
    data: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return data


def test_ec2_api_rows_match_describe_instance_types() -> None:
    # GIVEN DescribeInstanceTypes' answer for each row sourced from it
    snapshot = _ec2_snapshot()
    rows = [r for r in GPU_INSTANCE_TYPES.values() if r.source == "ec2-api"]
    assert len(rows) >= 40
    for row in rows:
        api = snapshot[row.instance_type.removeprefix("ml.")]
        (gpu,) = api["GpuInfo"]["Gpus"]
        # THEN GPU count, vCPUs and GPU memory are the API's, and the model is the API's GPU name
        assert (row.gpus, row.vcpus) == (gpu["Count"], api["VCpuInfo"]["DefaultVCpus"]), row
        assert row.gpu_memory_gib * 1024 == pytest.approx(gpu["MemoryInfo"]["SizeInMiB"]), row
        assert gpu["Name"].replace("Server ", "").split()[-1] in row.gpu_model, (row, gpu["Name"])


def test_rows_outside_the_snapshot_are_the_ones_it_lacks() -> None:
    # GIVEN the rows from other sources THEN the snapshot has no such type (else they would be checked above)
    snapshot = _ec2_snapshot()
    others = [r.instance_type for r in GPU_INSTANCE_TYPES.values() if r.source != "ec2-api"]
    assert others
    assert [t for t in others if t.removeprefix("ml.") in snapshot] == []


def test_hosts_from_instance_count() -> None:
    hosts = hosts_of({"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2})
    assert [h.name for h in hosts] == ["algo-1", "algo-2"]
    assert {(h.gpus, h.vcpus) for h in hosts} == {(8, 96)}
    assert hosts[0].dimension("job-a") == "job-a/algo-1"
    assert hosts[0].verified  # checked against DescribeInstanceTypes
    assert hosts[0].note == ""


def test_hosts_of_an_unverified_row_say_so() -> None:
    # GIVEN the one row no AWS source in the repository confirms (not in moto's DescribeInstanceTypes)
    hosts = hosts_of({"InstanceType": "ml.p6e-gb200.36xlarge", "InstanceCount": 1})
    assert (hosts[0].gpus, hosts[0].vcpus) == (4, 144)
    assert not hosts[0].verified
    assert "unverified" in hosts[0].note


def test_homogeneous_instance_groups_keep_their_counts() -> None:
    config = {
        "InstanceGroups": [
            {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2, "InstanceGroupName": "a"},
            {"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "InstanceGroupName": "b"},
        ]
    }
    hosts = hosts_of(config)
    assert [h.index for h in hosts] == [1, 2, 3]
    assert {h.gpus for h in hosts} == {1}


def test_heterogeneous_groups_leave_gpu_counts_unknown_instead_of_guessing() -> None:
    # GIVEN a cluster of 8-GPU and 1-GPU hosts: SageMaker does not say which algo-N is which
    config = {
        "InstanceGroups": [
            {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1, "InstanceGroupName": "gpu"},
            {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2, "InstanceGroupName": "data"},
        ]
    }
    hosts = hosts_of(config)
    assert len(hosts) == 3
    assert all(h.gpus is None and h.vcpus is None for h in hosts)
    assert "heterogeneous" in hosts[0].note


def test_unknown_gpu_type_and_cpu_types() -> None:
    (unknown,) = hosts_of({"InstanceType": "ml.p9.96xlarge", "InstanceCount": 1})
    assert unknown.gpus is None
    assert "not in ProfStack's GPU table" in unknown.note
    (cpu,) = hosts_of({"InstanceType": "ml.m5.xlarge", "InstanceCount": 1})
    assert cpu.gpus == 0


@pytest.mark.parametrize("config", [None, {}, {"InstanceType": "ml.g5.xlarge", "InstanceCount": "x"}, "junk"])
def test_malformed_resource_configs_give_no_hosts(config: object) -> None:
    assert hosts_of(config) == []  # type: ignore[arg-type]


def test_host_count_is_bounded() -> None:
    assert len(hosts_of({"InstanceType": "ml.g5.xlarge", "InstanceCount": 10**9})) == 512
