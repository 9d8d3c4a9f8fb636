"""Security gates over every stack the app synthesizes: cdk-nag, cfn-lint, IAM wildcards."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stacks.components.iam import NO_RESOURCE_TYPE_ACTIONS
from stacks.lint import IGNORED_CHECKS, lint_templates
from tests.conftest import NO_BUNDLING_CONTEXT
from tests.infra.conftest import SynthesizedApp

POLICY_TYPES = {"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::Role"}


def _statements(template: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Identity-policy statements (resource policies such as KMS key policies use '*' for 'this key')."""
    for logical_id, resource in template.get("Resources", {}).items():
        if resource["Type"] not in POLICY_TYPES:
            continue
        props = resource.get("Properties", {})
        documents = [props["PolicyDocument"]] if "PolicyDocument" in props else []
        documents += [p["PolicyDocument"] for p in props.get("Policies", [])]
        for document in documents:
            for statement in document["Statement"]:
                yield logical_id, statement


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_every_stack_passes_cdk_nag(synthesized: SynthesizedApp) -> None:
    # GIVEN the example config WHEN the whole app synthesizes with both nag packs
    # THEN synth did not raise ValidationFailed and every stack produced a template
    assert set(synthesized.templates) == {s.stack_name for s in synthesized.stacks.all()}
    assert all(t["Resources"] for t in synthesized.templates.values())


def test_cdk_nag_gate_fails_on_a_noncompliant_resource() -> None:
    # GIVEN an app with the same checks and a bucket that breaks AwsSolutions-S1/S10
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3

    from stacks.profstack_app import add_security_checks

    app = cdk.App(context=NO_BUNDLING_CONTEXT)
    add_security_checks(app)
    stack = cdk.Stack(app, "Bad")
    s3.Bucket(stack, "Open")
    # WHEN it synthesizes THEN the gate fails
    with pytest.raises(Exception, match=r"AwsSolutions-S1|AwsSolutions-S10|Validation"):
        app.synth()


def test_every_acknowledgement_has_a_reason(synthesized: SynthesizedApp) -> None:
    # GIVEN the construct tree WHEN we collect cdk-nag acknowledgements THEN each names a rule and a reason
    import aws_cdk as cdk

    key = cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    acknowledgements: dict[str, str] = {}
    for stack in synthesized.stacks.all():
        for node in stack.node.find_all():
            for entry in node.node.metadata:
                if entry.type == key:
                    # metadata maps "Annotation::<rule id>" to the reason
                    for rule, reason in entry.data.items():
                        acknowledgements[f"{node.node.path} {rule}"] = reason
    assert any(k.endswith("TraceStore/AccessLogs Annotation::AwsSolutions-S1") for k in acknowledgements)
    for where, reason in acknowledgements.items():
        rule = where.split(" Annotation::", 1)[-1]  # granular ids contain "::" themselves
        assert rule.startswith(("AwsSolutions-", "Serverless-")), where
        assert len(reason) >= 20, where


def test_cfn_lint_reports_nothing(synthesized: SynthesizedApp, tmp_path: Path) -> None:
    # GIVEN every synthesized template written to disk
    paths = []
    for name, template in synthesized.templates.items():
        path = tmp_path / f"{name}.template.json"
        path.write_text(json.dumps(template))
        paths.append(path)
    # WHEN cfn-lint runs THEN it reports no error and no warning
    assert lint_templates(paths) == []


def test_cfn_lint_gate_can_fail(tmp_path: Path) -> None:
    # GIVEN a template with an invalid property WHEN linted THEN the gate reports it
    bad = {"Resources": {"B": {"Type": "AWS::S3::Bucket", "Properties": {"NoSuchProperty": 1}}}}
    path = tmp_path / "bad.template.json"
    path.write_text(json.dumps(bad))
    assert any("E3002" in line for line in lint_templates([path]))


def test_ignored_cfn_lint_checks_have_reasons() -> None:
    assert all(len(reason) >= 20 for reason in IGNORED_CHECKS.values())


def test_no_iam_statement_allows_every_action(synthesized: SynthesizedApp) -> None:
    for stack_name, template in synthesized.templates.items():
        for logical_id, statement in _statements(template):
            actions = _as_list(statement.get("Action", []))
            assert "*" not in actions, f"{stack_name}/{logical_id}: Action '*'"
            assert "NotAction" not in statement, f"{stack_name}/{logical_id}: NotAction"


def test_resource_star_only_for_actions_without_resource_types(synthesized: SynthesizedApp) -> None:
    for stack_name, template in synthesized.templates.items():
        for logical_id, statement in _statements(template):
            if "*" not in _as_list(statement.get("Resource", [])):
                continue
            actions = _as_list(statement["Action"])
            unlisted = [a for a in actions if a not in NO_RESOURCE_TYPE_ACTIONS]
            assert not unlisted, f"{stack_name}/{logical_id}: Resource '*' for {unlisted}"


def _identity_statements(template: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] in {"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"}:
            yield from props["PolicyDocument"]["Statement"]
        elif resource["Type"] == "AWS::IAM::Role":
            for policy in props.get("Policies", []):
                yield from policy["PolicyDocument"]["Statement"]


def test_every_grant_of_the_data_key_names_the_service_that_uses_it(synthesized: SynthesizedApp) -> None:
    # GIVEN every identity statement of every stack that uses the data key (traces, reports, history, idempotency)
    crypto = {"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:GenerateDataKey*", "kms:ReEncrypt*"}
    found = 0
    for template in synthesized.templates.values():
        for statement in _identity_statements(template):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if not crypto & set(actions) or "DataKey" not in json.dumps(statement["Resource"]):
                continue
            found += 1
            # THEN each names the service (kms:ViaService) and the data (the bucket or table) it is for: before,
            # kms:Decrypt on the key alone let a role decrypt any ciphertext of it
            condition = statement.get("Condition", {})
            assert "kms:ViaService" in condition.get("StringEquals", {}), statement
            assert any(k.startswith("kms:EncryptionContext:") for k in condition.get("StringLike", {})), statement
    assert found >= 5  # processor, analyze-file, aggregate, state machine, Processing job, users, history


def test_every_log_group_is_encrypted_and_every_engine_function_has_reserved_concurrency(
    synthesized: SynthesizedApp,
) -> None:
    # GIVEN every stack's log groups and functions (checkov CKV_AWS_158 and CKV_AWS_115 flagged 9 and 2)
    groups = functions = 0
    for name, template in synthesized.templates.items():
        for logical_id, resource in template["Resources"].items():
            props = resource.get("Properties", {})
            if resource["Type"] == "AWS::Logs::LogGroup":
                groups += 1
                # THEN each log group has the storage stack's LogsKey (its lines name jobs, files and users)
                assert "LogsKey" in json.dumps(props.get("KmsKeyId")), (name, logical_id)
            if resource["Type"] == "AWS::Lambda::Function" and any(
                part in logical_id for part in ("Processor", "AnalyzeFile", "Aggregate")
            ):
                functions += 1
                # AND each function that runs the engine has a bound on how much of the account it may take
                assert props.get("ReservedConcurrentExecutions", 0) >= 1, (name, logical_id)
    assert groups >= 9
    assert functions == 3
