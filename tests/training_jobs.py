"""DescribeTrainingJob responses shaped by the real SageMaker service model, for the tests that stub it
(botocore's Stubber validates every response against the model, so the required fields are all here)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

ACCOUNT = "123456789012"
REGION = "us-east-1"


def describe_training_job(
    name: str,
    *,
    output: str,
    created: datetime,
    status: str = "Completed",
    instance_type: str = "ml.p4d.24xlarge",
    profiler: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Job ``name`` of this account, writing under the S3 URI ``output``; ``profiler``: its ProfilerConfig."""
    job: dict[str, Any] = {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name}",
        "ModelArtifacts": {"S3ModelArtifacts": f"{output}/{name}/output/model.tar.gz"},
        "TrainingJobStatus": status,
        "SecondaryStatus": "Completed" if status == "Completed" else "Training",
        "AlgorithmSpecification": {"TrainingInputMode": "File", "TrainingImage": "img"},
        "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": 1, "VolumeSizeInGB": 50},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "CreationTime": created,
        "OutputDataConfig": {"S3OutputPath": output},
    }
    if profiler is not None:
        job["ProfilerConfig"] = profiler
    return job


def list_training_jobs_response(jobs: list[dict[str, Any]], created: datetime) -> dict[str, Any]:
    """ListTrainingJobs' answer naming these DescribeTrainingJob responses."""
    return {
        "TrainingJobSummaries": [
            {
                "TrainingJobName": j["TrainingJobName"],
                "TrainingJobArn": j["TrainingJobArn"],
                "CreationTime": created,
                "TrainingJobStatus": j["TrainingJobStatus"],
            }
            for j in jobs
        ]
    }
