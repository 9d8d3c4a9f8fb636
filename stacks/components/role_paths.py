"""IAM role paths that say, in the role's own ARN, whose data a ProfStack role may touch.

    arn:<partition>:iam::<account>:role/<prefix>/users/<user>/<generated name>   a user's execution role
    arn:<partition>:iam::<account>:role/<prefix>/users/<user>/reader/<name>      the user's report reader role
    arn:<partition>:iam::<account>:role/<prefix>/processing/<generated name>     the trace-processing roles
    arn:<partition>:iam::<account>:role/<prefix>/analysts/<generated name>       the history analyst role
    arn:<partition>:iam::<account>:role/<prefix>/platform/<generated name>       roles that manage every user's
                                                                                 TensorBoard app (provider, reaper)

The trace bucket's policy (stacks/components/trace_store.py) matches `aws:PrincipalArn` against these
patterns instead of naming the roles: the roles live in the TensorBoard and processing stacks, which
depend on the storage stack, so naming their ARNs there would be a dependency cycle (and CloudFormation
names them only at deploy time). A path is fixed when a role is created and appears in the ARN IAM puts in
`aws:PrincipalArn` for the role's sessions.
"""

from __future__ import annotations

import re

import aws_cdk as cdk

_PATH_SEGMENT = re.compile(r"^[a-z][a-z0-9-]{0,62}$")  # config's prefix and user-name rules


def _segment(value: str, what: str) -> str:
    if not _PATH_SEGMENT.match(value):
        raise ValueError(f"{what} {value!r} cannot be an IAM path segment")
    return value


def processing_role_path(prefix: str) -> str:
    return f"/{_segment(prefix, 'prefix')}/processing/"


def analyst_role_path(prefix: str) -> str:
    """The history analyst role's path: it may read every user's history rows, through Athena."""
    return f"/{_segment(prefix, 'prefix')}/analysts/"


def platform_role_path(prefix: str) -> str:
    """Roles that act on every user's Studio apps for the platform (the TensorBoard app provider, the idle reaper):
    the service control policy template spares this path (profstack/guardrails.py)."""
    return f"/{_segment(prefix, 'prefix')}/platform/"


def user_role_path(prefix: str, user: str) -> str:
    return f"/{_segment(prefix, 'prefix')}/users/{_segment(user, 'user')}/"


def reader_role_path(role_path: str) -> str:
    """A user's report reader role sits below the user's path (so every rule for the user's roles holds it too),
    in `reader/`, where the bucket policy lets it write nothing."""
    return f"{role_path}{READER_SEGMENT}/"


READER_SEGMENT = "reader"


def users_role_path_root(prefix: str) -> str:
    return f"/{_segment(prefix, 'prefix')}/users/"


def role_arn_pattern(path: str) -> str:
    """Every role under `path` in this stack's account (for ArnLike on aws:PrincipalArn)."""
    return f"arn:{cdk.Aws.PARTITION}:iam::{cdk.Aws.ACCOUNT_ID}:role{path}*"
