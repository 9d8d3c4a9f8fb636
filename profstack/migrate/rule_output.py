"""Tag legacy Profiler/Debugger rule output so the StorageStack's tag-based expiry applies (facts A6/A7).

Objects live at `<output>/<job>/rule-output/...` (and `.../profiler-output/`): a prefix lifecycle rule
cannot match them (no wildcards), so each object gets the tag `profstack:class=legacy-rule-output`,
merged with its tags. Only the prefixes of verified training jobs are listed (derived from each job's
output configuration and name by profstack.migrate.legacy_profiler): a `rule-output/` folder that
belongs to no job (`datasets/rule-output/labels.csv`) is never touched.

Small buckets: tag object by object (GetObjectTagging + PutObjectTagging, merge). Every S3 call names the
caller's account as ExpectedBucketOwner (the legacy commands pass it; another account's bucket answers 403).
Very large buckets: write a CSV manifest of the matching keys and create one S3 Batch Operations
job with the S3PutObjectTagging operation. That operation *replaces* each object's tag set, which is
why it needs an explicit confirmation (SageMaker writes rule output without tags).
"""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from profstack.layout import LEGACY_RULE_OUTPUT_TAG

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3control import S3ControlClient

RULE_OUTPUT_SEGMENT = "rule-output"
MAX_TAGS_PER_OBJECT = 10
MANIFEST_FORMAT = "S3BatchOperations_CSV_20180820"


class TaggingError(RuntimeError):
    """An object that cannot take the tag (already 10 tags), or a failed batch job request."""


def is_rule_output_key(key: str, job_prefixes: Sequence[str]) -> bool:
    """A file under one of the verified jobs' prefixes (`<output>/<job>/rule-output/`), not the folder itself."""
    return any(key.startswith(p) and len(key) > len(p) and not key.endswith("/") for p in job_prefixes)


def owner_kwargs(expected_owner: str | None) -> dict[str, Any]:
    """`ExpectedBucketOwner`: S3 answers 403 instead of acting when the bucket is another account's."""
    return {"ExpectedBucketOwner": expected_owner} if expected_owner else {}


def iter_prefix_keys(
    s3: S3Client, bucket: str, job_prefixes: Sequence[str], *, expected_owner: str
) -> Iterator[tuple[str, int]]:
    """(key, size) of every object under the verified job prefixes, listed 1,000 at a time, each once."""
    seen: set[str] = set()
    for prefix in sorted(set(job_prefixes)):
        if not prefix.endswith("/"):
            raise TaggingError(f"job prefix must end with '/': {prefix}")
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix, **owner_kwargs(expected_owner)
        )
        for page in pages:
            for item in page.get("Contents", []):
                key = item["Key"]
                if key not in seen and is_rule_output_key(key, [prefix]):
                    seen.add(key)
                    yield key, int(item.get("Size", 0))


def merge_object_tag(
    s3: S3Client,
    bucket: str,
    key: str,
    tag_key: str,
    tag_value: str,
    *,
    expected_owner: str | None = None,
    version_id: str | None = None,
) -> bool:
    """Add one tag, keeping the object's other tags (PutObjectTagging replaces the whole set); with version_id,
    to that version. Returns False when the tag was already there."""
    owner: dict[str, Any] = owner_kwargs(expected_owner)
    if version_id is not None:
        owner["VersionId"] = version_id
    current = s3.get_object_tagging(Bucket=bucket, Key=key, **owner).get("TagSet", [])
    if any(t["Key"] == tag_key and t["Value"] == tag_value for t in current):
        return False
    merged = [t for t in current if t["Key"] != tag_key] + [{"Key": tag_key, "Value": tag_value}]
    if len(merged) > MAX_TAGS_PER_OBJECT:
        raise TaggingError(f"s3://{bucket}/{key} already has {MAX_TAGS_PER_OBJECT} tags; cannot add {tag_key}")
    s3.put_object_tagging(Bucket=bucket, Key=key, Tagging={"TagSet": merged}, **owner)
    return True


def manifest_csv(bucket: str, keys: Iterator[str] | list[str]) -> tuple[bytes, int]:
    """Batch Operations CSV manifest (Bucket,Key; keys URL-encoded as the format requires)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    count = 0
    for key in keys:
        writer.writerow([bucket, quote(key, safe="/")])
        count += 1
    return buffer.getvalue().encode(), count


@dataclass(frozen=True)
class BatchJobRequest:
    account_id: str
    bucket: str
    manifest_bucket: str
    manifest_key: str
    report_bucket: str
    report_prefix: str
    role_arn: str
    priority: int = 10
    description: str = "ProfStack: tag legacy rule-output for expiry"


def create_tagging_job(s3: S3Client, s3control: S3ControlClient, request: BatchJobRequest, manifest: bytes) -> str:
    """Upload the manifest, then create the S3 Batch Operations tagging job. Returns the job id."""
    put = s3.put_object(
        Bucket=request.manifest_bucket,
        Key=request.manifest_key,
        Body=manifest,
        ContentType="text/csv",
        ExpectedBucketOwner=request.account_id,
    )
    etag = str(put["ETag"]).strip('"')
    tag_key, tag_value = LEGACY_RULE_OUTPUT_TAG
    params: dict[str, Any] = {
        "AccountId": request.account_id,
        "ConfirmationRequired": False,
        "Operation": {"S3PutObjectTagging": {"TagSet": [{"Key": tag_key, "Value": tag_value}]}},
        "Report": {
            "Bucket": f"arn:aws:s3:::{request.report_bucket}",
            "Format": "Report_CSV_20180820",
            "Enabled": True,
            "Prefix": request.report_prefix,
            "ReportScope": "FailedTasksOnly",
        },
        "ClientRequestToken": str(uuid.uuid4()),
        "Manifest": {
            "Spec": {"Format": MANIFEST_FORMAT, "Fields": ["Bucket", "Key"]},
            "Location": {"ObjectArn": f"arn:aws:s3:::{request.manifest_bucket}/{request.manifest_key}", "ETag": etag},
        },
        "Description": request.description,
        "Priority": request.priority,
        "RoleArn": request.role_arn,
        "Tags": [{"Key": "profstack:component", "Value": "legacy-tagging"}],
    }
    response = s3control.create_job(**params)
    return str(response["JobId"])
