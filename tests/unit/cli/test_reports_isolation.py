"""`profstack reports` under the deployed policies: every S3 request the command makes on moto is first judged by
the IAM evaluator (tests/infra/iam_eval.py) against the synthesized bucket policy and a user's execution role,
as S3 would judge it. A user lists and opens only reports/<self>/; claiming another user's name gets nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from profstack.cli import _aws, main
from profstack.report import index as idx
from tests.infra.conftest import synthesize
from tests.infra.iam_eval import Request, same_account_decision
from tests.infra.tensorboard_synth import config_with
from tests.infra.test_bucket_boundary import BUCKET_ARN, S3_EVERYTHING, USERS, World, _user_role, _world

BUCKET = BUCKET_ARN.rsplit(":", 1)[1]
#: S3 operations the command may make -> the IAM action S3 authorises them with
ACTIONS = {"GetObject": "s3:GetObject", "HeadObject": "s3:GetObject", "ListObjectsV2": "s3:ListBucket"}


@pytest.fixture(scope="module")
def world() -> World:
    config = config_with(users=[{"name": u, "email": f"{u}@example.com"} for u in USERS])
    return _world(synthesize(config))


class Judge:
    """A botocore hook: each request is allowed or refused (AccessDenied) as the policies decide."""

    def __init__(self, world: World, user: str, *, s3_star: bool) -> None:
        role = _user_role(world, user)
        self.world, self.role = world, role
        self.identity = [*role.statements, *(S3_EVERYTHING if s3_star else [])]
        self.seen: list[tuple[str, str, bool]] = []

    def __call__(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        action = ACTIONS.get(model.name)
        assert action is not None, f"`profstack reports` made an unexpected S3 call: {model.name}"
        context = {"aws:SecureTransport": "true", **{f"aws:PrincipalTag/{k}": v for k, v in self.role.tags.items()}}
        if action == "s3:ListBucket":
            resource = BUCKET_ARN
            if params.get("Prefix") is not None:
                context["s3:prefix"] = params["Prefix"]
        else:
            resource = f"{BUCKET_ARN}/{params['Key']}"
        allowed = same_account_decision(
            self.identity, self.world.bucket_policy, self.role.principal(), Request(action, resource, context)
        )
        self.seen.append(
            (action, resource + (f"?prefix={context.get('s3:prefix')}" if "s3:prefix" in context else ""), allowed)
        )
        if not allowed:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, model.name)


def _seed(s3: Any, user: str, job: str) -> None:
    prefix = f"reports/{user}/{job}/"
    row = idx.index_row(
        {"findings": [], "ranks": []}, job=job, status="Completed", ended_at=datetime.now(UTC) - timedelta(hours=1)
    )
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}summary.json", Body=b'{"schema_version": "1.4", "ranks": []}')
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}report.html", Body=b"<html></html>")
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}{idx.ROW_FILE}", Body=idx.dumps(row))
    doc = idx.index_document(user, [row], generated_at=datetime.now(UTC))
    s3.put_object(Bucket=BUCKET, Key=f"reports/{user}/index.json", Body=idx.dumps(doc))


@pytest.fixture
def judged(
    world: World, aws_credentials: None, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Judge]:
    """alice's role (with s3:* from an identity policy when the test is parametrised so) running the command."""
    s3_star = bool(getattr(request, "param", False))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("PROFSTACK_TRACE_BUCKET", BUCKET)
    monkeypatch.delenv("PROFSTACK_BUCKET", raising=False)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        _seed(s3, "alice", "alice-job-1")
        _seed(s3, "al", "al-job-1")  # a user whose name is a prefix of alice's
        _seed(s3, "bob", "bob-job-1")
        judge = Judge(world, "alice", s3_star=s3_star)
        real = _aws.make_client

        def make_client(service: str, region: str | None) -> Any:
            client = real(service, region)
            client.meta.events.register("before-parameter-build.s3.*", judge)
            return client

        monkeypatch.setattr(_aws, "make_client", make_client)
        yield judge


@pytest.mark.parametrize("judged", [False, True], indirect=True, ids=["as-deployed", "with-s3-star"])
def test_a_user_lists_and_opens_their_own_reports(judged: Judge, capsys: pytest.CaptureFixture[str]) -> None:
    # WHEN alice lists and opens her own reports with her execution role
    assert main(["reports", "list", "--user", "alice", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert main(["reports", "open", "alice-job-1", "--user", "alice", "--print"]) == 0
    # THEN she sees her job, every request was allowed, and every request stayed under reports/alice/
    assert [r["job"] for r in listed] == ["alice-job-1"]
    assert judged.seen
    assert all(allowed for _, _, allowed in judged.seen)
    assert all("/reports/alice/" in where or "prefix=reports/alice/" in where for _, where, _ in judged.seen)


@pytest.mark.parametrize("judged", [False, True], indirect=True, ids=["as-deployed", "with-s3-star"])
@pytest.mark.parametrize("other", ["bob", "al"])
def test_another_users_jobs_are_neither_listed_nor_opened(
    judged: Judge, capsys: pytest.CaptureFixture[str], other: str
) -> None:
    # GIVEN alice's role WHEN she claims to be another user (bob, or al whose name begins hers)
    for argv in (
        ["reports", "list", "--user", other],
        ["reports", "open", f"{other}-job-1", "--user", other, "--print"],
        ["reports", "get", f"{other}-job-1", "/nonexistent/never-written", "--user", other],
        ["reports", "diff", f"{other}-job-1", f"{other}-job-1", "--user", other],
    ):
        # THEN each command fails with the bucket's AccessDenied as one line, and prints none of the other's jobs
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert "AccessDenied" in captured.err
        assert captured.err.count("\n") == 1
        assert f"{other}-job-1" not in captured.out
    # AND not one request for the other user's keys or listing was allowed
    assert judged.seen
    assert not [s for s in judged.seen if s[2]]


@pytest.mark.parametrize("judged", [False], indirect=True, ids=["as-deployed"])
def test_access_denied_says_which_credentials_the_bucket_admits(
    judged: Judge, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN alice's role claiming bob WHEN it lists THEN the one error line names the role that may read bob's reports
    assert main(["reports", "list", "--user", "bob"]) == 2
    err = capsys.readouterr().err
    assert "AccessDenied" in err
    assert "only bob's ProfStack execution role (IAM path /<prefix>/users/bob/" in err
    assert err.count("\n") == 1
