"""Legacy SageMaker Debugger/Profiler rule output of a finished job: tagged so the StorageStack's
tag-based expiry applies to it (docs/platform-facts.md A6/A7)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lambdas.trace_processor.aws import S3Location, add_object_tag, list_objects, parse_s3_uri
from lambdas.trace_processor.env import ProcessorEnv
from lambdas.trace_processor.job import s3_path
from profstack import layout

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def rule_output_prefixes(describe: Mapping[str, Any], job: str) -> list[S3Location]:
    roots = [
        s3_path(describe, "OutputDataConfig", "S3OutputPath"),
        s3_path(describe, "ProfilerConfig", "S3OutputPath"),
        s3_path(describe, "DebugHookConfig", "S3OutputPath"),
    ]
    unique: dict[tuple[str, str], S3Location] = {}
    for root in roots:
        if root is not None:
            loc = root.child(job, "rule-output", "")
            unique.setdefault((loc.bucket, loc.key), loc)
    return list(unique.values())


def owned_rule_output(prefixes: Sequence[S3Location], user: str, env: ProcessorEnv) -> list[S3Location]:
    """Only rule-output folders that cannot be another user's: plain keys (no `..`, `%`, empty
    segments), and in the trace bucket not under the per-user layout (traces/, tensorboard/, reports/)
    unless under this owner's own folders. The expiry tag deletes objects, so a job must not be able to
    point it at someone else's."""
    owned = (layout.user_traces_prefix(user), layout.user_tensorboard_prefix(user))
    per_user = (layout.TRACES_PREFIX, layout.TENSORBOARD_PREFIX, layout.REPORTS_PREFIX)
    kept: list[S3Location] = []
    for prefix in prefixes:
        if not layout.is_plain_prefix(prefix.key):
            continue
        if prefix.bucket == env.trace_bucket and prefix.key.startswith(per_user) and not prefix.key.startswith(owned):
            continue
        kept.append(prefix)
    return kept


def tag_rule_output(s3: S3Client, prefixes: Sequence[S3Location], allowed_buckets: set[str]) -> int:
    """Tag legacy rule-output objects so the StorageStack's tag-based expiry applies.
    Buckets outside ProfStack's grant are skipped (the role may not touch them)."""
    key, value = layout.LEGACY_RULE_OUTPUT_TAG
    tagged = 0
    for prefix in prefixes:
        if prefix.bucket not in allowed_buckets:
            continue
        for obj in list_objects(s3, prefix.bucket, prefix.key):
            if add_object_tag(s3, obj, key, value):
                tagged += 1
    return tagged


def allowed_buckets(env: ProcessorEnv) -> set[str]:
    return {env.trace_bucket, *(parse_s3_uri(p).bucket for p in env.extra_trace_prefixes)}
