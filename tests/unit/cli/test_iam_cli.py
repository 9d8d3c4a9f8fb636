"""`profstack iam boundary|scp`: the guardrails an administrator installs, printed from the config alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profstack.cli import main
from profstack.guardrails import MANAGED_POLICY_MAX_CHARS, SCP_MAX_CHARS, document_chars
from tests.conftest import EXAMPLE_CONFIG


def test_the_boundary_of_a_user_is_printed_as_one_policy(capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the example config WHEN an administrator asks for alice's boundary in account 123456789012
    code = main(["iam", "boundary", "--user", "alice", "--account", "123456789012", "--config", str(EXAMPLE_CONFIG)])
    out, err = capsys.readouterr()
    # THEN one IAM policy document comes out, within IAM's size limit, with the name to install it under
    assert code == 0
    document = json.loads(out)
    assert document["Version"] == "2012-10-17"
    assert document_chars(document) <= MANAGED_POLICY_MAX_CHARS
    assert "profstack-boundary-alice" in err
    sids = {st["Sid"] for st in document["Statement"]}
    assert {"OtherUsersRoles", "OtherUsersProfilesAndApps1", "BoundaryStays", "NewIdentitiesCarryTheBoundary"} <= sids
    # AND bob's app is named, alice's is not
    rendered = json.dumps(document)
    assert "/bob/*" in rendered
    assert "app/*/alice/" not in rendered


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--user", "mallory", "--account", "123456789012"],
            "unknown user 'mallory' (users in the config: alice, bob)",
        ),
        (["--user", "alice"], "a boundary names its own policy ARN: pass --account"),
        (["--user", "alice", "--account", "12345"], "--account '12345' is not a 12-digit account id"),
        (["--user", "alice", "--account", "123456789012", "--domain-id", "d-x"], "is not a SageMaker domain id"),
        (["--user", "alice", "--account", "123456789012", "--partition", "azure"], "is not aws, aws-cn or aws-us-gov"),
    ],
)
def test_bad_boundary_arguments_fail_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["iam", "boundary", *argv, "--config", str(EXAMPLE_CONFIG)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert message in err


def test_the_scps_are_written_one_file_each_within_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN an identity administrator to spare and the trace bucket's name
    admin = "arn:aws:iam::123456789012:role/IdentityAdmin"
    code = main(
        [
            "iam",
            "scp",
            "--config",
            str(EXAMPLE_CONFIG),
            "--account",
            "123456789012",
            "--exempt",
            admin,
            "--bucket",
            "profstack-storage-traces",
            "--out-dir",
            str(tmp_path),
        ]
    )
    assert code == 0
    files = sorted(tmp_path.glob("scp-*.json"))
    assert files
    documents = [json.loads(f.read_text()) for f in files]
    # THEN each is an SCP within its size limit, sparing the administrator, CDK's deploy role and the platform
    assert all(document_chars(d) <= SCP_MAX_CHARS for d in documents)
    rendered = json.dumps(documents)
    for spared in (admin, "role/cdk-*-cfn-exec-role-*", "role/profstack/processing/*", "role/profstack/platform/*"):
        assert spared in rendered, spared
    assert "arn:aws:s3:::profstack-storage-traces" in rendered
    assert all(st["Effect"] == "Deny" for d in documents for st in d["Statement"])
    assert capsys.readouterr().out.count("wrote ") == len(files)
