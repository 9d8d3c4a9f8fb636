"""TensorBoardStack template assertions: domain, profiles, roles, app provider, reaper."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk.assertions import Match, Template

from tests.infra.conftest import SynthesizedApp
from tests.infra.tensorboard_synth import Synth, config_with, synth_tensorboard


@pytest.fixture(scope="module")
def example(synthesized: SynthesizedApp) -> Synth:
    from stacks.tensorboard_stack import TensorBoardStack

    stack = next(s for s in synthesized.stacks.all() if isinstance(s, TensorBoardStack))
    return Synth(stack=stack, template=Template.from_stack(stack))


@pytest.fixture(scope="module")
def vpc_only() -> Synth:
    domain = {
        "mode": "create",
        "vpc_id": "vpc-0a1b2c3d4e5f60718",
        "subnet_ids": ["subnet-0a1b2c3d4e5f60718"],
        "network_access": "VpcOnly",
        "s3_gateway_route_table_ids": ["rtb-0a1b2c3d4e5f60718"],
    }
    users = [
        {"name": "alice", "email": "alice@example.com"},
        {"name": "al", "email": "al@example.com"},
    ]
    return synth_tensorboard(config_with(domain=domain, users=users))


@pytest.fixture(scope="module")
def imported() -> Synth:
    return synth_tensorboard(config_with(domain={"mode": "import", "domain_id": "d-abcdef123456"}))


def test_created_domain_uses_iam_auth_home_efs_kms_and_the_configured_network(example: Synth) -> None:
    # GIVEN the example config (create mode) WHEN synthesized THEN one domain as the issue requires
    example.template.resource_count_is("AWS::SageMaker::Domain", 1)
    example.template.has_resource_properties(
        "AWS::SageMaker::Domain",
        {
            "AuthMode": "IAM",
            "HomeEfsFileSystemCreation": "Enabled",
            "VpcId": "vpc-0a1b2c3d4e5f60718",
            "SubnetIds": ["subnet-0a1b2c3d4e5f60718", "subnet-0f1e2d3c4b5a69788"],
            "AppNetworkAccessType": "PublicInternetOnly",
            "KmsKeyId": {"Fn::ImportValue": Match.string_like_regexp("DataKey")},
            "DefaultUserSettings": Match.object_like({"AutoMountHomeEFS": "Enabled"}),
        },
    )
    # PublicInternetOnly needs no interface endpoints
    example.template.resource_count_is("AWS::EC2::VPCEndpoint", 0)
    domain_id = example.logical_id(example.stack.domain.resource)
    outputs = example.template.find_outputs("DomainId")
    assert outputs["DomainId"]["Value"] == {"Fn::GetAtt": [domain_id, "DomainId"]}


def test_domain_default_role_has_no_permissions(example: Synth) -> None:
    # GIVEN the domain's default execution role WHEN synthesized THEN no policy is attached to it
    role_id = example.logical_id(example.stack.domain.node.find_child("DefaultExecutionRole"))
    for policy in example.resources("AWS::IAM::Policy").values():
        assert {"Ref": role_id} not in policy["Properties"]["Roles"]
    assert "Policies" not in example.resources("AWS::IAM::Role")[role_id]["Properties"]


def test_vpc_only_domain_gets_the_interface_endpoints_it_needs(vpc_only: Synth) -> None:
    # GIVEN network_access VpcOnly WHEN synthesized THEN SageMaker API, runtime and STS endpoints exist
    vpc_only.template.has_resource_properties("AWS::SageMaker::Domain", {"AppNetworkAccessType": "VpcOnly"})
    endpoints = {
        k: e
        for k, e in vpc_only.resources("AWS::EC2::VPCEndpoint").items()
        if e["Properties"]["VpcEndpointType"] == "Interface"
    }
    services = sorted(
        e["Properties"]["ServiceName"]["Fn::Join"][1][2] for e in endpoints.values()
    )  # com.amazonaws.<region token>.<service>
    assert services == [".sagemaker.api", ".sagemaker.runtime", ".sts"]
    for endpoint in endpoints.values():
        props = endpoint["Properties"]
        assert props["VpcEndpointType"] == "Interface"
        assert props["PrivateDnsEnabled"] is True
        assert props["SubnetIds"] == ["subnet-0a1b2c3d4e5f60718"]


def test_vpc_only_domain_gets_an_s3_gateway_on_the_given_route_tables(vpc_only: Synth) -> None:
    # GIVEN s3_gateway_route_table_ids WHEN synthesized THEN one S3 gateway endpoint on those route tables
    gateways = [
        e["Properties"]
        for e in vpc_only.resources("AWS::EC2::VPCEndpoint").values()
        if e["Properties"]["VpcEndpointType"] == "Gateway"
    ]
    assert len(gateways) == 1
    assert gateways[0]["RouteTableIds"] == ["rtb-0a1b2c3d4e5f60718"]
    assert gateways[0]["ServiceName"]["Fn::Join"][1][2] == ".s3"


def test_imported_domain_is_used_by_id_and_nothing_is_created(imported: Synth) -> None:
    # GIVEN mode import WHEN synthesized THEN no domain, and profiles and apps use the given id
    imported.template.resource_count_is("AWS::SageMaker::Domain", 0)
    imported.template.resource_count_is("AWS::EC2::SecurityGroup", 0)
    imported.template.all_resources_properties("AWS::SageMaker::UserProfile", {"DomainId": "d-abcdef123456"})
    imported.template.all_resources_properties("Custom::TensorBoardApp", {"DomainId": "d-abcdef123456"})
    assert imported.template.find_outputs("DomainId")["DomainId"]["Value"] == "d-abcdef123456"


def test_one_profile_per_user_each_with_its_own_execution_role(example: Synth) -> None:
    # GIVEN users alice and bob WHEN synthesized THEN two profiles with distinct roles, tagged by user
    profiles = example.resources("AWS::SageMaker::UserProfile")
    assert sorted(p["Properties"]["UserProfileName"] for p in profiles.values()) == ["alice", "bob"]
    roles = {json.dumps(p["Properties"]["UserSettings"]["ExecutionRole"]) for p in profiles.values()}
    assert len(roles) == 2
    for profile in profiles.values():
        name = profile["Properties"]["UserProfileName"]
        assert {"Key": "profstack:user", "Value": name} in profile["Properties"]["Tags"]
        role_id = example.logical_id(example.stack.workspaces[name].role)
        assert profile["Properties"]["UserSettings"]["ExecutionRole"] == {"Fn::GetAtt": [role_id, "Arn"]}


def test_no_aws_managed_policies_anywhere(example: Synth) -> None:
    # GIVEN every role of the stack (framework roles included) WHEN synthesized THEN none has a managed policy
    for logical_id, role in example.resources("AWS::IAM::Role").items():
        assert "ManagedPolicyArns" not in role["Properties"], logical_id


def test_execution_role_policy_is_scoped_to_the_users_prefixes_key_and_tagged_jobs(example: Synth) -> None:
    # GIVEN alice's execution role WHEN synthesized THEN its statements are exactly the least-privilege set
    role_id = example.logical_id(example.stack.workspaces["alice"].role)
    policy = next(
        p for p in example.resources("AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]
    )
    statements = {s.get("Sid", "kms"): s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert statements["ListOwnPrefixes"]["Condition"] == {
        "StringLike": {"s3:prefix": ["traces/alice/*", "tensorboard/alice/*", "reports/alice/*"]}
    }
    assert statements["ReadOwnObjects"]["Action"] == "s3:GetObject"
    # a job that runs as the role (the verified owner) writes its own traces and TensorBoard logs, nothing else
    writes = statements["WriteOwnTraces"]
    assert sorted(writes["Action"]) == ["s3:AbortMultipartUpload", "s3:PutObject"]
    written = json.dumps(writes["Resource"])
    assert "/traces/alice/*" in written
    assert "/tensorboard/alice/*" in written
    assert "reports" not in written
    assert statements["DescribeOwnTrainingJobs"]["Condition"] == {
        "StringEquals": {"aws:ResourceTag/profstack:user": "alice"}
    }
    assert sorted(statements["kms"]["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]  # SSE-KMS read and upload
    assert "DataKey" in statements["kms"]["Resource"]["Fn::ImportValue"]  # the trace key, only
    actions = sorted(
        json.dumps(sorted(s["Action"]) if isinstance(s["Action"], list) else s["Action"]) for s in statements.values()
    )
    assert actions == sorted(
        json.dumps(a)
        for a in [
            "s3:ListBucket",
            "s3:GetObject",
            ["s3:AbortMultipartUpload", "s3:PutObject"],
            ["kms:Decrypt", "kms:GenerateDataKey"],
            "sagemaker:DescribeTrainingJob",
        ]
    )


def test_app_custom_resource_per_user_with_instance_type_and_profile_dependency(example: Synth) -> None:
    # GIVEN alice (default type) and bob (ml.r5.xlarge) WHEN synthesized THEN one app resource each,
    # created after (and deleted before) the user's profile
    apps = example.template.find_resources("Custom::TensorBoardApp")
    assert len(apps) == 2
    by_user = {a["Properties"]["UserProfileName"]: a for a in apps.values()}
    assert by_user["alice"]["Properties"]["InstanceType"] == "ml.r5.large"
    assert by_user["bob"]["Properties"]["InstanceType"] == "ml.r5.xlarge"
    for name, app in by_user.items():
        assert app["Properties"]["AppName"] == "default"
        workspace = example.stack.workspaces[name]
        assert example.logical_id(workspace.profile) in app["DependsOn"]
        assert example.logical_id(workspace.role) in app["DependsOn"]  # and its policy, before the app starts
        role_policy = workspace.role.node.find_child("DefaultPolicy").node.default_child
        assert example.stack.resolve(role_policy.logical_id) in app["DependsOn"]
        assert app["Properties"]["ServiceToken"]["Fn::GetAtt"][1] == "Arn"
    assert not example.template.find_resources("AWS::SageMaker::App")  # docs/platform-facts.md A1: never CfnApp


def test_provider_wires_on_event_and_is_complete_with_scoped_permissions(example: Synth) -> None:
    # GIVEN the app provider WHEN synthesized THEN both handlers exist, on arm64, and may touch only app ARNs
    functions = example.resources("AWS::Lambda::Function")
    handlers = {f["Properties"].get("Handler") for f in functions.values()}
    assert {"lambdas.tensorboard_app.on_event.handler", "lambdas.tensorboard_app.is_complete.handler"} <= handlers
    example.template.resource_count_is("AWS::StepFunctions::StateMachine", 1)  # the is_complete waiter
    provider = example.stack.app_provider
    role_id = example.logical_id(provider.on_event.role)
    policy = next(
        p for p in example.resources("AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]
    )
    sagemaker = next(
        s for s in policy["Properties"]["PolicyDocument"]["Statement"] if "sagemaker:CreateApp" in s["Action"]
    )
    rendered = json.dumps(sagemaker["Resource"])
    assert ":app/" in rendered
    assert "/alice/tensorboard/default" in rendered
    assert "/bob/TensorBoard/default" in rendered
    assert '"*"' not in rendered


def test_reaper_runs_on_the_configured_schedule_with_its_settings(example: Synth) -> None:
    # GIVEN tensorboard settings WHEN synthesized THEN an EventBridge rule runs the reaper with them
    example.template.has_resource_properties("AWS::Events::Rule", {"ScheduleExpression": "rate(15 minutes)"})
    reaper = next(
        f
        for f in example.resources("AWS::Lambda::Function").values()
        if f["Properties"].get("Handler") == "lambdas.idle_reaper.handler.handler"
    )
    env = reaper["Properties"]["Environment"]["Variables"]
    assert env["IDLE_TTL_MINUTES"] == "120"
    assert env["DRY_RUN"] == "false"
    assert json.loads(env["USER_PROFILES"]) == ["alice", "bob"]
    assert reaper["Properties"]["ReservedConcurrentExecutions"] == 1


def test_removing_a_user_removes_exactly_their_profile_app_and_role() -> None:
    # GIVEN the example config without bob WHEN synthesized THEN bob's resources are gone and alice's keep
    # their logical IDs (so the next deploy deletes bob's app, then profile, and touches nothing else)
    base = config_with()
    with_bob = synth_tensorboard(base).template.to_json()["Resources"]
    without_bob = synth_tensorboard(base.model_copy(update={"users": [base.user("alice")]}))
    after = set(without_bob.template.to_json()["Resources"])
    removed = set(with_bob) - after
    assert removed
    assert all("bob" in logical_id for logical_id in removed)
    kinds = {with_bob[r]["Type"] for r in removed}
    assert {"AWS::SageMaker::UserProfile", "Custom::TensorBoardApp", "AWS::IAM::Role"} <= kinds
    assert not any("bob" in r for r in after)


def test_no_users_means_no_provider_and_no_reaper() -> None:
    # GIVEN an empty user list WHEN synthesized THEN only the domain (and its output) is created
    empty = synth_tensorboard(config_with(users=[]))
    empty.template.resource_count_is("AWS::Lambda::Function", 0)
    empty.template.resource_count_is("AWS::SageMaker::UserProfile", 0)
    empty.template.resource_count_is("AWS::SageMaker::Domain", 1)


@pytest.mark.slow  # cfn-lint loads its schemas: ~5 s
def test_cfn_lint_is_clean_for_the_vpc_only_and_imported_variants(
    vpc_only: Synth, imported: Synth, tmp_path: Path
) -> None:
    # GIVEN the two config variants the example config does not cover WHEN cfn-lint runs THEN nothing
    from stacks.lint import lint_templates

    paths = []
    for name, synth in (("vpc-only", vpc_only), ("imported", imported)):
        path = tmp_path / f"{name}.template.json"
        path.write_text(json.dumps(synth.template.to_json()))
        paths.append(path)
    assert lint_templates(paths) == []
