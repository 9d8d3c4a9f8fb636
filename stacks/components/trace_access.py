"""Least-privilege S3/KMS grants over the ProfStack layout: read trace prefixes, write reports.

Prefixes come from profstack.layout; extra trace prefixes (config templates, `{user}`/`{job}` as whole
segments) are granted read-only up to their first placeholder. The per-owner, per-job narrowing is the
session policy the processor passes when it assumes the trace-reader role (lambdas/trace_processor/scope.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from profstack import layout
from stacks.components.iam import key_use_statement, s3_key_context

READ_PREFIXES = (layout.TRACES_PREFIX, layout.TENSORBOARD_PREFIX)


def _split(uri: str) -> tuple[str, str]:
    """(bucket, static prefix): a template's key up to its first placeholder."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix.split("{", 1)[0]


@dataclass(frozen=True, kw_only=True)
class TraceAccess:
    """The trace bucket, its key, and extra read-only trace prefixes (s3://bucket/prefix)."""

    bucket: s3.IBucket
    key: kms.IKey
    extra_prefixes: Sequence[str] = ()

    def _partition(self) -> str:
        return cdk.Aws.PARTITION

    def extra_bucket_arns(self) -> list[str]:
        return sorted({f"arn:{self._partition()}:s3:::{_split(u)[0]}" for u in self.extra_prefixes})

    def grant_trace_read(self, role: iam.IRole) -> None:
        """GetObject/ListBucket on traces/ and tensorboard/ (and extra prefixes) only."""
        objects = [self.bucket.arn_for_objects(f"{p}*") for p in READ_PREFIXES]
        objects += [f"arn:{self._partition()}:s3:::{b}/{p}*" for b, p in map(_split, self.extra_prefixes)]
        role.add_to_principal_policy(iam.PolicyStatement(sid="ReadTraces", actions=["s3:GetObject"], resources=objects))
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ListTracePrefixes",
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in READ_PREFIXES]}},
            )
        )
        for bucket, prefix in sorted({_split(u) for u in self.extra_prefixes}):
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    actions=["s3:ListBucket"],
                    resources=[f"arn:{self._partition()}:s3:::{bucket}"],
                    conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
                )
            )
        role.add_to_principal_policy(
            key_use_statement(self.key, ["kms:Decrypt"], via="s3", context=s3_key_context(self.bucket))
        )

    def grant_report_write(self, role: iam.IRole, *, tensorboard: bool, read_reports: bool = False) -> None:
        """PutObject under reports/ (and tensorboard/ for the scalar event files). DeleteObject only on
        the e-mail markers (removed again when Publish fails). GetObject on reports/ only for the
        aggregate step (fan-out manifest and partials)."""
        writable = [self.bucket.arn_for_objects(f"{layout.REPORTS_PREFIX}*")]
        if tensorboard:
            writable.append(self.bucket.arn_for_objects(f"{layout.TENSORBOARD_PREFIX}*"))
        role.add_to_principal_policy(
            iam.PolicyStatement(sid="WriteReports", actions=["s3:PutObject"], resources=writable)
        )
        markers = self.bucket.arn_for_objects(f"{layout.REPORTS_PREFIX}*/.notified-*")
        role.add_to_principal_policy(
            iam.PolicyStatement(sid="RetractNotificationMarker", actions=["s3:DeleteObject"], resources=[markers])
        )
        # HeadObject on a marker (fallback when botocore predates conditional writes); with ListBucket on
        # reports/ a missing marker is a 404, not a 403.
        role.add_to_principal_policy(
            iam.PolicyStatement(sid="CheckNotificationMarker", actions=["s3:GetObject"], resources=[markers])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ListReports",
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{layout.REPORTS_PREFIX}*"]}},
            )
        )
        if read_reports:
            role.add_to_principal_policy(
                iam.PolicyStatement(
                    sid="ReadReports",
                    actions=["s3:GetObject"],
                    resources=[self.bucket.arn_for_objects(f"{layout.REPORTS_PREFIX}*")],
                )
            )
        # Exactly what SSE-KMS PutObject/GetObject need on the one data key (no ReEncrypt*, no wildcards), through
        # S3 and for this bucket only
        self.grant_key_via_s3(role, "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey")

    def grant_report_index_read(self, role: iam.IRole) -> None:
        """GetObject (and so HeadObject) on the per-user report index and the per-job index rows only: the
        processor rewrites reports/<user>/index.json by conditional write after each report (issue 36,
        lambdas/trace_processor/report_index.py). It reads no report, summary or trace of reports/."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadReportIndex",
                actions=["s3:GetObject"],
                resources=[
                    self.bucket.arn_for_objects(f"{layout.REPORTS_PREFIX}*/index.json"),
                    self.bucket.arn_for_objects(f"{layout.REPORTS_PREFIX}*/index-row.json"),
                ],
            )
        )

    def grant_key_via_s3(self, role: iam.IRole, *actions: str) -> None:
        """The data key, used only by S3 for the trace bucket's objects (kms:ViaService + encryption context)."""
        role.add_to_principal_policy(
            key_use_statement(self.key, list(actions), via="s3", context=s3_key_context(self.bucket))
        )

    def grant_fanout_input_read(self, role: iam.IRole) -> None:
        """GetObject on the stored fan-out execution inputs only (reports/<user>/<job>/partials/execution-input.json,
        written by the processor): the analyze-file step checks its input against it (trace_processor/fanout.py)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadFanoutInput",
                actions=["s3:GetObject"],
                resources=[self.bucket.arn_for_objects(f"{layout.REPORTS_PREFIX}*/partials/execution-input.json")],
            )
        )

    def grant_rule_output_tagging(self, role: iam.IRole) -> None:
        """Merge the legacy-rule-output tag into objects under <output>/<job>/rule-output/ in the
        buckets ProfStack manages (trace bucket and extra-prefix buckets)."""
        bucket_arns = [self.bucket.bucket_arn, *self.extra_bucket_arns()]
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="TagLegacyRuleOutput",
                actions=["s3:GetObjectTagging", "s3:PutObjectTagging"],
                resources=[f"{arn}/*/rule-output/*" for arn in bucket_arns],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ListLegacyRuleOutput",
                actions=["s3:ListBucket"],
                resources=bucket_arns,
                conditions={"StringLike": {"s3:prefix": ["*/rule-output/*"]}},
            )
        )
