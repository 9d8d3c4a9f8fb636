"""`profstack init`: a config written from the account (moto: EC2, SageMaker, STS, IAM Identity Center)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import yaml
from moto import mock_aws

from profstack.cli import main
from profstack.cli.init import profstack_name
from profstack.config import example_value_problems, load_config

REGION = "eu-west-1"


@pytest.fixture
def account(aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("PROFSTACK_CONFIG", raising=False)
    # moto's default account is 123456789012, the documentation account id that init (rightly) refuses
    monkeypatch.setenv("MOTO_ACCOUNT_ID", "403921877410")
    with mock_aws():
        yield


def _init(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(["init", "--region", REGION, *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_init_writes_a_deployable_config_from_the_default_vpc(
    account: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN an account with only its default VPC (one subnet per Availability Zone) and no SageMaker domain
    ec2 = boto3.client("ec2", region_name=REGION)
    (vpc,) = [v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"] if v["IsDefault"]]
    zones = {s["AvailabilityZone"]: s["SubnetId"] for s in ec2.describe_subnets()["Subnets"] if s["VpcId"] == vpc}
    out = tmp_path / "deploy.yaml"
    # WHEN init runs with one user and an on-call address
    rc, stdout, _ = _init(
        capsys, "--output", str(out), "--user", "dana=dana@mlplatform.io", "--notify", "ml-oncall@mlplatform.io"
    )
    # THEN the file is written and is a config `config check` accepts: no placeholder left
    assert rc == 0
    assert stdout.startswith(f"wrote {out}: account ")
    config = load_config(out)
    assert example_value_problems(config) == []
    # AND it names the account and region, a domain created in the default VPC on one subnet per zone (at most 3)
    assert config.environment.region == REGION
    assert config.environment.account == boto3.client("sts", region_name=REGION).get_caller_identity()["Account"]
    assert config.domain.mode == "create"
    assert config.domain.vpc_id == vpc
    assert config.domain.subnet_ids == [zones[z] for z in sorted(zones)][:3]
    assert [(u.name, u.email) for u in config.users] == [("dana", "dana@mlplatform.io")]
    assert config.notifications.emails == ["ml-oncall@mlplatform.io"]
    # AND the file says where each value came from
    assert "# created in " + vpc in out.read_text()
    assert main(["config", "check", str(out)]) == 0


def test_init_imports_the_regions_one_iam_domain(account: None, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a region with one SageMaker domain using IAM authentication
    ec2 = boto3.client("ec2", region_name=REGION)
    subnet = ec2.describe_subnets()["Subnets"][0]
    domain = (
        boto3.client("sagemaker", region_name=REGION)
        .create_domain(
            DomainName="t3amml2x9q4z",  # moto makes the id d-<name>; SageMaker's ids are d- and 12 characters
            AuthMode="IAM",
            DefaultUserSettings={"ExecutionRole": "arn:aws:iam::123456789012:role/x"},
            SubnetIds=[subnet["SubnetId"]],
            VpcId=subnet["VpcId"],
        )["DomainArn"]
        .rsplit("/", 1)[-1]
    )
    # WHEN init prints the config it would write
    rc, out, _ = _init(capsys, "--print", "--user", "dana=dana@mlplatform.io")
    # THEN the domain is imported, and nothing was written
    assert rc == 0
    assert yaml.safe_load(out)["domain"] == {"mode": "import", "domain_id": domain}


def test_init_takes_users_from_an_identity_center_group(account: None, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN an IAM Identity Center group of three people, one without an e-mail address
    ids = boto3.client("identitystore", region_name=REGION)
    store = "d-9067642ac7"
    group = ids.create_group(IdentityStoreId=store, DisplayName="ml-engineers")["GroupId"]
    people = [
        ("Dana.Smith@mlplatform.io", [{"Value": "dana@mlplatform.io", "Primary": True}]),
        ("2fast", [{"Value": "fast@mlplatform.io", "Primary": False}]),
        ("nomail", []),
    ]
    for name, emails in people:
        user = ids.create_user(
            IdentityStoreId=store,
            UserName=name,
            DisplayName=name,
            Name={"GivenName": "A", "FamilyName": "B"},
            **({"Emails": emails} if emails else {}),
        )["UserId"]
        ids.create_group_membership(IdentityStoreId=store, GroupId=group, MemberId={"UserId": user})
    # WHEN init reads the group
    rc, out, err = _init(capsys, "--print", "--identity-center-group", "ml-engineers", "--identity-store-id", store)
    # THEN each member with an e-mail is a user with a ProfStack name, and the one without is named as left out
    assert rc == 0
    users = yaml.safe_load(out)["users"]
    assert users == [
        {"name": "dana-smith", "email": "dana@mlplatform.io"},
        {"name": "fast", "email": "fast@mlplatform.io"},
    ]
    assert "nomail: no e-mail in Identity Center; left out" in err
    assert "#   Dana.Smith@mlplatform.io -> dana-smith" in out


def test_init_refuses_example_values_and_never_overwrites(
    account: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a documentation e-mail address WHEN init runs THEN it refuses, naming the field, and writes nothing
    out = tmp_path / "deploy.yaml"
    rc, _, err = _init(capsys, "--output", str(out), "--user", "carol=carol@example.com")
    assert rc == 2
    assert "users[0].email: carol@example.com is a documentation address" in err
    assert not out.exists()
    # GIVEN a file already there WHEN init runs without --force THEN it stops before any AWS call, saying how
    out.write_text("prefix: mine\n")
    rc, _, err = _init(capsys, "--output", str(out), "--user", "dana=dana@mlplatform.io")
    assert rc == 2
    assert "--force" in err
    assert "PROFSTACK_CONFIG" in err
    assert out.read_text() == "prefix: mine\n"


def test_init_asks_which_domain_when_the_region_has_several(account: None, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN two IAM domains WHEN init runs without --domain-id/--vpc-id THEN it lists them and asks
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    subnet = boto3.client("ec2", region_name=REGION).describe_subnets()["Subnets"][0]
    for name in ("team-a", "team-b"):
        sagemaker.create_domain(
            DomainName=name,
            AuthMode="IAM",
            DefaultUserSettings={"ExecutionRole": "arn:aws:iam::123456789012:role/x"},
            SubnetIds=[subnet["SubnetId"]],
            VpcId=subnet["VpcId"],
        )
    rc, _, err = _init(capsys, "--print")
    assert rc == 2
    assert "this region has 2 SageMaker domains" in err
    assert "pass --domain-id ID or --vpc-id VPC" in err


@pytest.mark.parametrize(
    ("raw", "name"),
    [("Dana.Smith@corp.io", "dana-smith"), ("alice", "alice"), ("9lives", "lives"), ("A__B", "a-b"), ("---", "")],
)
def test_identity_names_become_profstack_names(raw: str, name: str) -> None:
    assert profstack_name(raw) == name


def test_a_group_that_does_not_exist_is_one_line_naming_it(account: None, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the account's Identity Center (sso-admin ListInstances finds it) without such a group
    rc, _, err = _init(capsys, "--print", "--identity-center-group", "ml-engineers")
    # THEN one line names the group and what Identity Center said
    assert rc == 2
    assert err.strip().splitlines() == [
        "profstack: error: Identity Center group 'ml-engineers': ResourceNotFoundException: GROUP not found."
    ]
