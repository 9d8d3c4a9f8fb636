"""`profstack users ...` and `profstack tensorboard ...`: Stubber for SageMaker apps and profiles
(moto lacks them), moto for the CloudFormation output lookup, real files for config edits."""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from botocore.stub import Stubber

from profstack.cli import main
from profstack.config import load_config
from tests.conftest import EXAMPLE_CONFIG
from tests.unit.tensorboard.stubs import DOMAIN, described, expect_create, expect_delete, expect_describe

STACK = "profstack-tensorboard"
PRESIGNED = f"https://{DOMAIN}.studio.us-east-1.sagemaker.aws/auth?token=FAKE"


def _client(service: str) -> Any:
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")


class Clients:
    """Stubbed clients handed to the CLI through make_client."""

    def __init__(self) -> None:
        self.sagemaker = _client("sagemaker")
        self.cloudformation = _client("cloudformation")
        self.sm = Stubber(self.sagemaker)
        self.cfn = Stubber(self.cloudformation)

    def make(self, service: str, region: str | None) -> Any:
        return {"sagemaker": self.sagemaker, "cloudformation": self.cloudformation}[service]

    def deployed_stack(self) -> None:
        self.cfn.add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": STACK,
                        "CreationTime": "2026-11-29T00:00:00Z",
                        "StackStatus": "CREATE_COMPLETE",
                        "Outputs": [{"OutputKey": "DomainId", "OutputValue": DOMAIN}],
                    }
                ]
            },
            {"StackName": STACK},
        )


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clients]:
    stubs = Clients()
    monkeypatch.setattr("profstack.cli._aws.make_client", stubs.make)  # the one factory every command uses
    with stubs.sm, stubs.cfn:
        yield stubs
        stubs.sm.assert_no_pending_responses()
        stubs.cfn.assert_no_pending_responses()


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "profstack.yaml"
    shutil.copy(EXAMPLE_CONFIG, path)
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------------ users list


def test_users_list_shows_live_profile_and_app_status(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a deployed stack, alice with a running TensorBoard and bob without a profile yet
    clients.deployed_stack()
    clients.sm.add_response(
        "describe_user_profile",
        {"DomainId": DOMAIN, "UserProfileName": "alice", "Status": "InService"},
        {"DomainId": DOMAIN, "UserProfileName": "alice"},
    )
    clients.sm.add_response(
        "list_apps",
        {
            "Apps": [
                {
                    "DomainId": DOMAIN,
                    "UserProfileName": "alice",
                    "AppType": "JupyterServer",
                    "AppName": "default",
                    "Status": "InService",
                },
                {
                    "DomainId": DOMAIN,
                    "UserProfileName": "alice",
                    "AppType": "TensorBoard",
                    "AppName": "default",
                    "Status": "InService",
                },
            ]
        },
        {"DomainIdEquals": DOMAIN, "UserProfileNameEquals": "alice"},
    )
    clients.sm.add_client_error(
        "describe_user_profile",
        service_error_code="ResourceNotFound",
        http_status_code=400,
        expected_params={"DomainId": DOMAIN, "UserProfileName": "bob"},
    )
    # WHEN listing THEN one row per config user with the live status
    code, out, _ = _run(capsys, "users", "list", "--config", str(config_path))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["USER", "EMAIL", "INSTANCE_TYPE", "PROFILE", "TENSORBOARD"]
    assert lines[1].split() == ["alice", "alice@example.com", "ml.r5.large", "InService", "InService"]
    assert lines[2].split() == ["bob", "bob@example.com", "ml.r5.xlarge", "-", "-"]


def test_users_list_with_domain_id_skips_the_stack_lookup(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for user in ("alice", "bob"):
        clients.sm.add_response(
            "describe_user_profile",
            {"DomainId": "d-given0000001", "UserProfileName": user, "Status": "Pending"},
            {"DomainId": "d-given0000001", "UserProfileName": user},
        )
        clients.sm.add_response(
            "list_apps", {"Apps": []}, {"DomainIdEquals": "d-given0000001", "UserProfileNameEquals": user}
        )
    code, out, _ = _run(
        capsys, "users", "list", "--config", str(config_path), "--domain-id", "d-given0000001", "--json"
    )
    assert code == 0
    assert '"profile": "Pending"' in out
    assert '"tensorboard": "-"' in out


def test_users_list_without_a_deployed_stack_is_a_one_line_error(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clients.cfn.add_client_error(
        "describe_stacks",
        service_error_code="ValidationError",
        service_message=f"Stack with id {STACK} does not exist",
        http_status_code=400,
    )
    code, out, err = _run(capsys, "users", "list", "--config", str(config_path))
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "no SageMaker domain found" in err
    assert "--domain-id" in err


def test_missing_credentials_are_a_one_line_error(
    config_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN no credentials anywhere (no env keys, no files, no instance metadata)
    for var in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    # WHEN a command needs AWS THEN one clear line, exit 2
    code, _, err = _run(
        capsys,
        "tensorboard",
        "url",
        "--user",
        "alice",
        "--config",
        str(config_path),
        "--domain-id",
        DOMAIN,
        "--region",
        "us-east-1",
    )
    assert code == 2
    assert err.strip().endswith("no AWS credentials found (set AWS_PROFILE, run `aws sso login`, or export keys)")
    assert err.count("\n") == 1


@pytest.mark.usefixtures("aws_credentials")
def test_domain_id_comes_from_the_deployed_stack_output_in_moto(config_path: Path) -> None:
    # GIVEN a stack with the DomainId output (moto CloudFormation) WHEN the CLI resolves the domain
    import argparse

    from moto import mock_aws

    from profstack.cli._aws import domain_id

    template = '{"Resources": {"T": {"Type": "AWS::SNS::Topic"}}, "Outputs": {"DomainId": {"Value": "d-fromstack001"}}}'
    with mock_aws():
        boto3.client("cloudformation", region_name="us-east-1").create_stack(StackName=STACK, TemplateBody=template)
        args = argparse.Namespace(domain_id=None)
        assert domain_id(args, load_config(config_path), "us-east-1") == "d-fromstack001"


def test_imported_domain_id_is_read_from_the_config(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = config_path.read_text()
    start = text.index("domain:\n  mode: create")
    end = text.index("tensorboard:")
    config_path.write_text(text[:start] + "domain: {mode: import, domain_id: d-imported0001}\n\n" + text[end:])
    expect = {"DomainId": "d-imported0001", "UserProfileName": "alice", "AppType": "TensorBoard", "AppName": "default"}
    clients.sm.add_response("describe_app", {**expect, "Status": "InService"}, expect)
    code, out, _ = _run(capsys, "tensorboard", "start", "--user", "alice", "--config", str(config_path))
    assert code == 0
    assert "already InService" in out


# ------------------------------------------------------------------------------- users add/remove


def test_users_add_appends_keeps_comments_and_says_to_deploy(
    config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = config_path.read_text()
    code, out, _ = _run(
        capsys,
        "users",
        "add",
        "carol",
        "--email",
        "carol@example.com",
        "--instance-type",
        "ml.r5.2xlarge",
        "--config",
        str(config_path),
    )
    assert code == 0
    assert "npx cdk deploy --all" in out
    after = config_path.read_text()
    # Exactly the new entry was inserted after bob's; every other byte (comments included) is kept.
    inserted = "  - name: carol\n    email: carol@example.com\n    tensorboard_instance_type: ml.r5.2xlarge\n"
    anchor = "    tensorboard_instance_type: ml.r5.xlarge\n"
    assert after == before.replace(anchor, anchor + inserted, 1)
    assert load_config(config_path).user("carol").tensorboard_instance_type == "ml.r5.2xlarge"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["alice", "--email", "a2@example.com"], "user 'alice' already exists"),
        (["carol", "--email", "not-an-email"], "users[2].email"),
        (["Carol", "--email", "c@example.com"], "users[2].name"),
        (["carol", "--email", "c@example.com", "--instance-type", "r5.large"], "tensorboard_instance_type"),
    ],
)
def test_users_add_rejects_bad_input_and_leaves_the_file_alone(
    config_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    before = config_path.read_text()
    code, _, err = _run(capsys, "users", "add", *argv, "--config", str(config_path))
    assert code == 2
    assert message in err
    assert err.count("\n") == 1
    assert config_path.read_text() == before


def test_users_add_to_an_empty_list_writes_a_block_list(config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = config_path.read_text()
    start, end = text.index("users:\n"), text.index("processing:")
    config_path.write_text(text[:start] + "users: []\n\n" + text[end:])
    code, _, _ = _run(capsys, "users", "add", "dave", "--email", "dave@example.com", "--config", str(config_path))
    assert code == 0
    assert "users:\n  - name: dave\n    email: dave@example.com\n" in config_path.read_text()


def test_users_remove_deletes_only_that_user(config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = config_path.read_text()
    code, out, _ = _run(capsys, "users", "remove", "bob", "--config", str(config_path))
    assert code == 0
    assert "npx cdk deploy --all" in out
    after = config_path.read_text()
    removed = "  - name: bob\n    email: bob@example.com\n    tensorboard_instance_type: ml.r5.xlarge\n"
    assert after == before.replace(removed, "", 1)
    assert [u.name for u in load_config(config_path).users] == ["alice"]


def test_users_remove_unknown_user(config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "users", "remove", "zoe", "--config", str(config_path))
    assert code == 2
    assert "unknown user 'zoe' (users in" in err
    assert "alice, bob" in err


# ----------------------------------------------------------------------------------- tensorboard


def _expect_presign(clients: Clients, user: str = "alice") -> None:
    clients.sm.add_response(
        "create_presigned_domain_url",
        {"AuthorizedUrl": PRESIGNED},
        {
            "DomainId": DOMAIN,
            "UserProfileName": user,
            "ExpiresInSeconds": 300,
            "SessionExpirationDurationInSeconds": 43200,
        },
    )


def test_tensorboard_url_lands_in_tensorboard(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clients.deployed_stack()
    _expect_presign(clients)
    code, out, _ = _run(capsys, "tensorboard", "url", "--user", "alice", "--config", str(config_path))
    assert code == 0
    assert out.strip() == f"{PRESIGNED}&redirect=TensorBoard"


def test_tensorboard_url_opens_the_job(clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _expect_presign(clients)
    code, out, _ = _run(
        capsys,
        "tensorboard",
        "url",
        "--user",
        "alice",
        "--job",
        "resnet-2026-11-29",
        "--domain-id",
        DOMAIN,
        "--config",
        str(config_path),
    )
    assert code == 0
    query = parse_qs(urlsplit(out.strip()).query)
    assert query["redirect"] == ["TensorBoard"]
    assert base64.b64decode(out.strip().split("&state=", 1)[1]).decode() == (
        "/tensorboard/default/data/plugin/sagemaker_data_manager/add_folder_or_job?Redirect=True&Name=resnet-2026-11-29"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--user", "zoe"], "unknown user 'zoe' (users in the config: alice, bob)"),
        (["--user", "alice", "--job", "bad_job!"], "'bad_job!' is not a valid training job name"),
        (["--user", "alice", "--expires", "3600"], "--expires must be between 5 and 300 seconds"),
    ],
)
def test_tensorboard_url_errors_before_any_aws_call(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = _run(capsys, "tensorboard", "url", *argv, "--config", str(config_path))
    assert code == 2
    assert out == ""
    assert err == f"profstack: error: {message}\n"


def test_tensorboard_start_creates_with_the_users_instance_type(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect_describe(clients.sm, "bob", None)
    expect_create(clients.sm, "bob", "ml.r5.xlarge")
    code, out, _ = _run(
        capsys, "tensorboard", "start", "--user", "bob", "--apply", "--domain-id", DOMAIN, "--config", str(config_path)
    )
    assert code == 0
    assert "starting TensorBoard of 'bob' on ml.r5.xlarge" in out


def test_tensorboard_start_is_a_no_op_when_running(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect_describe(clients.sm, "alice", described("alice", "InService"))
    code, out, _ = _run(
        capsys, "tensorboard", "start", "--user", "alice", "--domain-id", DOMAIN, "--config", str(config_path)
    )
    assert code == 0
    assert "already InService" in out


def test_tensorboard_start_wait_polls_until_in_service(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("profstack.cli.tensorboard.POLL_SECONDS", 0.0)
    expect_describe(clients.sm, "alice", described("alice", "Deleted"))
    expect_create(clients.sm, "alice", "ml.r5.large")
    expect_describe(clients.sm, "alice", described("alice", "Pending"))
    expect_describe(clients.sm, "alice", described("alice", "InService"))
    code, out, _ = _run(
        capsys,
        "tensorboard",
        "start",
        "--user",
        "alice",
        "--wait",
        "--apply",
        "--domain-id",
        DOMAIN,
        "--config",
        str(config_path),
    )
    assert code == 0
    assert out.splitlines()[-1].startswith("TensorBoard of 'alice' is InService")


def test_tensorboard_start_wait_reports_failure_reason(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("profstack.cli.tensorboard.POLL_SECONDS", 0.0)
    expect_describe(clients.sm, "alice", None)
    expect_create(clients.sm, "alice", "ml.r5.large")
    failed = described("alice", "Failed", failure_reason="ResourceLimitExceeded: ml.r5.large")
    expect_describe(clients.sm, "alice", failed)
    expect_describe(clients.sm, "alice", failed)
    code, _, err = _run(
        capsys,
        "tensorboard",
        "start",
        "--user",
        "alice",
        "--wait",
        "--apply",
        "--domain-id",
        DOMAIN,
        "--config",
        str(config_path),
    )
    assert code == 2
    assert "failed: ResourceLimitExceeded: ml.r5.large" in err


def test_tensorboard_stop_deletes_the_running_app(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect_describe(clients.sm, "alice", described("alice", "InService"))
    expect_delete(clients.sm, "alice")
    code, out, _ = _run(
        capsys, "tensorboard", "stop", "--user", "alice", "--apply", "--domain-id", DOMAIN, "--config", str(config_path)
    )
    assert code == 0
    assert out.startswith("stopping TensorBoard of 'alice'")


def test_tensorboard_start_and_stop_without_apply_only_describe_and_say_what_they_would_do(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN no app for bob and a running app for alice; the stubbed client accepts only DescribeApp
    expect_describe(clients.sm, "bob", None)
    expect_describe(clients.sm, "alice", described("alice", "InService"))

    # WHEN start and stop run without --apply
    start = _run(capsys, "tensorboard", "start", "--user", "bob", "--domain-id", DOMAIN, "--config", str(config_path))
    stop = _run(capsys, "tensorboard", "stop", "--user", "alice", "--domain-id", DOMAIN, "--config", str(config_path))

    # THEN both succeed as dry runs that name the change and the flag, and no CreateApp/DeleteApp was sent
    assert start[0] == 0
    assert start[1].startswith("dry run: would start TensorBoard of 'bob' on ml.r5.xlarge")
    assert "--apply" in start[1]
    assert stop[0] == 0
    assert stop[1].startswith("dry run: would stop TensorBoard of 'alice' (now InService)")
    clients.sm.assert_no_pending_responses()


def test_tensorboard_stop_when_not_running(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect_describe(clients.sm, "alice", None)
    code, out, _ = _run(
        capsys, "tensorboard", "stop", "--user", "alice", "--domain-id", DOMAIN, "--config", str(config_path)
    )
    assert code == 0
    assert "is not running" in out


def test_access_denied_is_a_one_line_error(
    clients: Clients, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clients.sm.add_client_error(
        "create_presigned_domain_url",
        service_error_code="AccessDeniedException",
        service_message="not authorized to perform sagemaker:CreatePresignedDomainUrl",
        http_status_code=400,
    )
    code, _, err = _run(
        capsys, "tensorboard", "url", "--user", "bob", "--domain-id", DOMAIN, "--config", str(config_path)
    )
    assert code == 2
    assert err == (
        "profstack: error: CreatePresignedDomainUrl for 'bob': AccessDeniedException: "
        "not authorized to perform sagemaker:CreatePresignedDomainUrl\n"
    )
