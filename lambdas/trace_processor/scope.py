"""What one job's processing may touch: its owner's folders, and nothing else.

A job owned by `<user>` reads traces only under

    s3://<trace bucket>/traces/<user>/<job>/
    s3://<trace bucket>/tensorboard/<user>/<job>/
    <TensorBoardOutputConfig.S3OutputPath>/<job>/      only if that folder is inside the owner's space
    each extra prefix template with {user}, {job} filled in

and writes TensorBoard scalars only into that TensorBoard folder, when it is in the trace bucket's
`tensorboard/<user>/`. A TensorBoard output anywhere else (another user's folder, the bucket's top-level
`traces/` or `tensorboard/`, a path with `..`, `%`, an empty segment) is ignored, with a summary warning.

The reads run under the trace-reader role assumed with `session_policy(...)`, which names exactly those
folders: even a bug in this module cannot make the session read another user's objects.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lambdas.trace_processor.aws import S3Location, S3UriError, parse_s3_uri
from lambdas.trace_processor.env import ProcessorEnv
from profstack import layout

#: AssumeRole's limit on the inline session policy (characters, before AWS packs it).
SESSION_POLICY_MAX_CHARS = 2048
OUTSIDE_OWNER = "TensorBoardOutputOutsideOwner"


def as_folder(loc: S3Location) -> S3Location:
    """The same location with a trailing '/' (a folder, as listing and the session policy need it)."""
    return loc if loc.key.endswith("/") else S3Location(loc.bucket, loc.key + "/")


def owner_spaces(user: str, env: ProcessorEnv) -> list[S3Location]:
    """Everything of the owner's that a TensorBoard folder may be inside: the trace bucket's
    `tensorboard/<user>/`, and each extra template's owner part (up to `{job}`)."""
    spaces = [S3Location(env.trace_bucket, layout.user_tensorboard_prefix(user))]
    spaces += [parse_s3_uri(layout.expand_prefix_template(t, user=user, job=None)) for t in env.extra_trace_prefixes]
    return spaces


def _inside(loc: S3Location, space: S3Location) -> bool:
    return loc.bucket == space.bucket and loc.key.startswith(space.key) and space.key.endswith("/")


def owned_tensorboard(
    output_path: str | None, user: str, job: str, env: ProcessorEnv
) -> tuple[S3Location | None, list[dict[str, Any]]]:
    """The job's TensorBoard folder (`<S3OutputPath>/<job>/`) if it lies in the owner's space, else
    None and one summary warning saying what was ignored and why."""
    if not output_path:
        return None, []
    try:
        folder = parse_s3_uri(output_path).child(job, "")
    except S3UriError:
        folder = None
    plain = folder is not None and layout.is_plain_prefix(folder.key)
    if folder is not None and plain and any(_inside(folder, space) for space in owner_spaces(user, env)):
        return folder, []
    own = layout.user_tensorboard_prefix(user)
    warning = {
        "source": output_path[:300],
        "error_type": OUTSIDE_OWNER,
        "message": f"The job's TensorBoard output {output_path[:300]} is outside its owner's space "
        f"(s3://{env.trace_bucket}/{own}); it was not searched for traces and no scalars were written there. "
        f"Point TensorBoardOutputConfig.S3OutputPath at s3://{env.trace_bucket}/{own}.",
        "fatal": False,
    }
    return None, [warning]


def read_prefixes(user: str, job: str, tensorboard: S3Location | None, env: ProcessorEnv) -> list[S3Location]:
    """The folders a job's traces are searched in (each ends with '/'), in a fixed order, unique."""
    found: list[S3Location] = []
    if tensorboard is not None:
        found.append(as_folder(tensorboard))
    found.append(S3Location(env.trace_bucket, layout.job_traces_prefix(user, job)))
    found.append(S3Location(env.trace_bucket, layout.job_tensorboard_prefix(user, job)))
    found += [parse_s3_uri(layout.expand_prefix_template(t, user=user, job=job)) for t in env.extra_trace_prefixes]
    unique: dict[tuple[str, str], S3Location] = {}
    for loc in found:
        unique.setdefault((loc.bucket, loc.key), loc)
    return list(unique.values())


def _policy(prefixes: Sequence[S3Location], partition: str, key_arn: str | None) -> str:
    def arn(bucket: str, key: str | None = None) -> str:
        return f"arn:{partition}:s3:::{bucket}" + (f"/{key}" if key is not None else "")

    buckets: dict[str, list[str]] = {}
    for loc in prefixes:
        if not layout.is_plain_prefix(loc.key):
            raise ValueError(f"not a plain folder: {loc.uri}")  # never widen the policy with a strange key
        buckets.setdefault(loc.bucket, []).append(loc.key)
    statements: list[dict[str, Any]] = [
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": [arn(loc.bucket, f"{loc.key}*") for loc in prefixes]}
    ]
    for bucket, keys in sorted(buckets.items()):
        statements.append(
            {
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": arn(bucket),
                "Condition": {"StringLike": {"s3:prefix": [f"{k}*" for k in keys]}},
            }
        )
    if key_arn:
        statements.append({"Effect": "Allow", "Action": "kms:Decrypt", "Resource": key_arn})
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, separators=(",", ":"))


def _unique(locations: Sequence[S3Location]) -> list[S3Location]:
    return list({(loc.bucket, loc.key): loc for loc in locations}.values())


def session_policy(
    prefixes: Sequence[S3Location],
    *,
    partition: str = "aws",
    key_arn: str | None,
    owner_spaces: Sequence[S3Location] = (),
) -> str:
    """The inline session policy for the trace-reader role: GetObject under exactly these folders,
    ListBucket only with these prefixes, Decrypt with the trace key (compact JSON: the limit counts it).

    When the exact folders do not fit AssumeRole's 2,048 characters (long names, deep TensorBoard paths),
    the owner's spaces (`owner_spaces`: e.g. traces/<user>/, tensorboard/<user>/) are used instead: the
    boundary between users holds either way."""
    policy = _policy(_unique(prefixes), partition, key_arn)
    if len(policy) > SESSION_POLICY_MAX_CHARS and owner_spaces:
        covered = all(any(_inside(p, space) for space in owner_spaces) for p in prefixes)
        if not covered:
            raise ValueError("the owner's spaces do not cover the job's folders")
        policy = _policy(_unique(owner_spaces), partition, key_arn)
    if len(policy) > SESSION_POLICY_MAX_CHARS:
        raise ValueError(f"session policy of {len(policy)} characters exceeds {SESSION_POLICY_MAX_CHARS}")
    return policy


def owner_read_spaces(user: str, env: ProcessorEnv) -> list[S3Location]:
    """The owner's whole read space: traces/<user>/, tensorboard/<user>/, each extra template's owner part."""
    return [S3Location(env.trace_bucket, layout.user_traces_prefix(user)), *owner_spaces(user, env)]


def session_name(job: str) -> str:
    """RoleSessionName (2-64 of [\\w+=,.@-]): shows the job in CloudTrail."""
    return f"profstack-{job}"[:64]
