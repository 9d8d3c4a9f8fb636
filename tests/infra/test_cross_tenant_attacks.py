"""Issue 42, items 1-6 and 9: every cross-tenant attempt at the identity and data layers, one test each, judged on
the synthesized templates of a default deployment (users alice and bob; the owner-tag guard and job stops opted in
for item 9) by the IAM evaluator.

Each attacker holds what an ordinary administrator hands out besides ProfStack's own policies: `sagemaker:*`,
`s3:*`, `iam:PassRole` and `sts:AssumeRole` on `*`. An attempt that IAM allows is a failing test. The suite
depends only on the templates and the evaluator, so it runs unchanged against an older tree: on main at 7b6ecc3
25 of the 26 attempts succeeded (only 6c, alice's own role writing into bob's folder, was refused); docs/security.md
lists what stops each one now.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.infra.conftest import SynthesizedApp, synthesize
from tests.infra.iam_eval import (
    PSEUDO,
    Principal,
    Request,
    Resolver,
    can_assume,
    decision,
    principal_statements,
    trust_statements,
)

ACCOUNT = PSEUDO["AWS::AccountId"]
REGION = PSEUDO["AWS::Region"]
DOMAIN = "d-attacks00001"
BUCKET_ARN = "arn:aws:s3:::profstack-traces"
KEY_ARN = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/data-key"
TAG = "profstack:user"
BROAD = [
    {"Effect": "Allow", "Action": ["sagemaker:*", "s3:*"], "Resource": "*"},
    {"Effect": "Allow", "Action": ["iam:PassRole", "sts:AssumeRole"], "Resource": "*"},
]
ADMIN = Principal(arn=f"arn:aws:iam::{ACCOUNT}:role/Admin")
POWER_USER = Principal(arn=f"arn:aws:iam::{ACCOUNT}:role/PowerUser")
TRAINING = Principal(arn=f"arn:aws:iam::{ACCOUNT}:role/SageMakerTrainingRole")
ALICE = Principal(arn=f"arn:aws:iam::{ACCOUNT}:role/DataScientist-alice")
BOB_JOB = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/bob-resnet-1"


@dataclass(frozen=True)
class World:
    bucket_policy: list[dict[str, Any]]
    policies: dict[str, list[dict[str, Any]]]  # logical id -> statements (roles, managed policies)
    trust: dict[str, list[dict[str, Any]]]  # logical id of a role -> its trust policy
    arns: dict[str, str]  # logical id of a role -> its ARN (path included)
    tags: dict[str, dict[str, str]]  # logical id of a role -> its tags
    tensorboard: dict[str, Any]
    processing: dict[str, Any]

    def role(self, user: str, kind: str) -> str:
        """Logical id of `user`'s role of `kind` (ExecutionRole, ReportReaderRole) or policy (AccessPolicy)."""
        (found,) = [k for k in self.policies if k.startswith(f"User{user}{kind}")]
        return found

    def caller(self, logical_id: str) -> Principal:
        return Principal(arn=self.arns[logical_id])

    def about(self, logical_id: str) -> dict[str, str]:
        """What IAM knows of a role as the resource of a request: its tags, under both condition keys."""
        tags = self.tags[logical_id]
        return {
            **{f"iam:ResourceTag/{k}": v for k, v in tags.items()},
            **{f"aws:ResourceTag/{k}": v for k, v in tags.items()},
        }


def _tagged_guard_config(example_config: Any) -> Any:
    from profstack.config import Actions, OwnerTagGuard

    processing = example_config.processing.model_copy(
        update={
            "owner_tag_guard": OwnerTagGuard(enabled=True, role_names=["DataScientist-alice"]),
            "actions": Actions(stop_enabled=True, rules={"LowGPUUtilization": "stop"}),
        }
    )
    return example_config.model_copy(update={"processing": processing})


@pytest.fixture(scope="module")
def world(example_config: Any) -> World:
    app: SynthesizedApp = synthesize(_tagged_guard_config(example_config))
    prefix = example_config.prefix
    storage = app.templates[f"{prefix}-storage"]
    tensorboard = app.templates[f"{prefix}-tensorboard"]
    processing = app.templates[f"{prefix}-processing"]
    (bucket_id,) = [
        k
        for k, r in storage["Resources"].items()
        if k.startswith("TraceStoreTraces") and r["Type"] == "AWS::S3::Bucket"
    ]
    (bucket_policy,) = [
        r["Properties"]["PolicyDocument"]
        for r in storage["Resources"].values()
        if r["Type"] == "AWS::S3::BucketPolicy" and r["Properties"]["Bucket"] == {"Ref": bucket_id}
    ]
    (domain_id,) = [k for k, r in tensorboard["Resources"].items() if r["Type"] == "AWS::SageMaker::Domain"]
    resolve = Resolver(
        get_att={f"{domain_id}.DomainId": DOMAIN},
        imports={
            r"TraceStoreTraces.*Arn": BUCKET_ARN,
            r"TraceStoreTraces": "profstack-traces",
            r"DataKey.*Arn": KEY_ARN,
            r".": "arn:aws:other:::unrelated",
        },
    )
    policies: dict[str, list[dict[str, Any]]] = {}
    trust: dict[str, list[dict[str, Any]]] = {}
    arns: dict[str, str] = {}
    tags: dict[str, dict[str, str]] = {}
    for template in (tensorboard, processing):
        policies.update(principal_statements(template, resolve))
        for logical_id, resource in template["Resources"].items():
            if resource["Type"] == "AWS::IAM::Role":
                trust[logical_id] = trust_statements(template, logical_id, resolve)
                path = resource["Properties"].get("Path", "/")
                arns[logical_id] = f"arn:aws:iam::{ACCOUNT}:role{path}{logical_id}"
                tags[logical_id] = {t["Key"]: t["Value"] for t in resource["Properties"].get("Tags", [])}
    return World(
        bucket_policy=Resolver(get_att={f"{bucket_id}.Arn": BUCKET_ARN})(bucket_policy)["Statement"],
        policies=policies,
        trust=trust,
        arns=arns,
        tags=tags,
        tensorboard=tensorboard,
        processing=processing,
    )


def _profile(user: str) -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:user-profile/{DOMAIN}/{user}"


def _app(user: str, kind: str = "jupyterserver") -> str:
    return f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:app/{DOMAIN}/{user}/{kind}/default"


def _person(world: World, user: str) -> list[dict[str, Any]]:
    """A person's identity: their ProfStack access policy and the broad grants of an ordinary administrator."""
    return [*world.policies[world.role(user, "AccessPolicy")], *BROAD]


def _s3(world: World, who: Principal, identity: list[dict[str, Any]], action: str, key: str, **tags: str) -> bool:
    context = {"aws:SecureTransport": "true", **{f"aws:PrincipalTag/{k}": v for k, v in tags.items()}}
    return decision(identity, who, Request(action, f"{BUCKET_ARN}/{key}", context), resource_policy=world.bucket_policy)


def _s3_attackers(world: World) -> list[tuple[Principal, list[dict[str, Any]], dict[str, str]]]:
    """An administrator, alice's execution role and a training job's role, each with s3:* by identity policy."""
    alice_role = world.role("alice", "ExecutionRole")
    return [
        (ADMIN, BROAD, {}),
        (world.caller(alice_role), [*world.policies[alice_role], *BROAD], {TAG: "alice"}),
        (TRAINING, BROAD, {}),
    ]


# --- item 1: bob's report reader role must trust bob, not the whole account ---------------------------------------


def attack_1a_a_power_user_assumes_bobs_reader(world: World) -> bool:
    reader = world.role("bob", "ReportReaderRole")
    return can_assume(BROAD, world.trust[reader], POWER_USER, world.arns[reader], context=world.about(reader))


def attack_1b_alice_assumes_bobs_reader(world: World) -> bool:
    reader = world.role("bob", "ReportReaderRole")
    context = {f"aws:PrincipalTag/{TAG}": "alice", **world.about(reader)}
    return can_assume(_person(world, "alice"), world.trust[reader], ALICE, world.arns[reader], context=context)


def attack_1c_alices_execution_role_assumes_bobs_reader(world: World) -> bool:
    reader, alice = world.role("bob", "ReportReaderRole"), world.role("alice", "ExecutionRole")
    identity = [*world.policies[alice], *BROAD]
    context = {f"aws:PrincipalTag/{TAG}": "alice", **world.about(reader)}
    return can_assume(identity, world.trust[reader], world.caller(alice), world.arns[reader], context=context)


# --- item 2: bob's execution role must not be passed by alice -----------------------------------------------------


def _pass(world: World, who: Principal, identity: list[dict[str, Any]], role: str, **tags: str) -> bool:
    context = {
        "iam:PassedToService": "sagemaker.amazonaws.com",
        **world.about(role),
        **{f"aws:PrincipalTag/{k}": v for k, v in tags.items()},
    }
    return decision(identity, who, Request("iam:PassRole", world.arns[role], context))


def attack_2a_alice_passes_bobs_execution_role(world: World) -> bool:
    return _pass(world, ALICE, _person(world, "alice"), world.role("bob", "ExecutionRole"), **{TAG: "alice"})


def attack_2b_alices_execution_role_passes_bobs(world: World) -> bool:
    alice = world.role("alice", "ExecutionRole")
    identity = [*world.policies[alice], *BROAD]
    return _pass(world, world.caller(alice), identity, world.role("bob", "ExecutionRole"), **{TAG: "alice"})


def attack_2c_alices_reader_role_passes_bobs_execution_role(world: World) -> bool:
    alice = world.role("alice", "ReportReaderRole")
    identity = [*world.policies[alice], *BROAD]
    return _pass(world, world.caller(alice), identity, world.role("bob", "ExecutionRole"), **{TAG: "alice"})


# --- item 3: bob's Studio profile and apps must not be opened by alice --------------------------------------------


def _studio(world: World, action: str, resource: str, **context: str) -> bool:
    # the profile carries its owner's tag (the stack sets it), as IAM would see it on bob's profile
    full = {f"aws:PrincipalTag/{TAG}": "alice", f"aws:ResourceTag/{TAG}": "bob", **context}
    return decision(_person(world, "alice"), ALICE, Request(action, resource, full))


def attack_3a_alice_opens_bobs_profile(world: World) -> bool:
    return _studio(world, "sagemaker:CreatePresignedDomainUrl", _profile("bob"))


def attack_3b_alice_creates_an_app_in_bobs_profile(world: World) -> bool:
    return _studio(world, "sagemaker:CreateApp", _app("bob"))


def attack_3c_alice_deletes_bobs_tensorboard(world: World) -> bool:
    return _studio(world, "sagemaker:DeleteApp", _app("bob", "tensorboard"))


def attack_3d_alice_points_bobs_profile_at_her_role(world: World) -> bool:
    return _studio(world, "sagemaker:UpdateUserProfile", _profile("bob"))


def attack_3e_alice_opens_an_app_in_bobs_private_space(world: World) -> bool:
    space_app = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:app/{DOMAIN}/bobs-space/jupyterlab/default"
    return _studio(world, "sagemaker:CreateApp", space_app, **{"sagemaker:OwnerUserProfileArn": _profile("bob")})


def attack_3f_alices_execution_role_opens_bobs_profile(world: World) -> bool:
    alice = world.role("alice", "ExecutionRole")
    identity = [*world.policies[alice], *BROAD]
    context = {f"aws:PrincipalTag/{TAG}": "alice", f"aws:ResourceTag/{TAG}": "bob"}
    request = Request("sagemaker:CreatePresignedDomainUrl", _profile("bob"), context)
    return decision(identity, world.caller(alice), request)


# --- items 4, 5: the bucket policy covers every action that writes, deletes, aborts or answers for a key ----------


def _anyone_can(world: World, action: str, key: str) -> bool:
    return any(_s3(world, who, identity, action, key, **tags) for who, identity, tags in _s3_attackers(world))


def attack_4a_replicate_object_into_bobs_reports(world: World) -> bool:
    return _anyone_can(world, "s3:ReplicateObject", "reports/bob/job-1/summary.json")


def attack_4b_replicate_delete_over_bobs_reports(world: World) -> bool:
    return _anyone_can(world, "s3:ReplicateDelete", "reports/bob/job-1/summary.json")


def attack_4c_replicate_tags_onto_bobs_reports(world: World) -> bool:
    return _anyone_can(world, "s3:ReplicateTags", "reports/bob/job-1/summary.json")


def attack_5a_abort_an_upload_of_bobs_traces(world: World) -> bool:
    return _anyone_can(world, "s3:AbortMultipartUpload", "traces/bob/job-1/algo-1.pt.trace.json")


def attack_5b_abort_an_upload_of_bobs_report(world: World) -> bool:
    return _anyone_can(world, "s3:AbortMultipartUpload", "reports/bob/job-1/report.html")


def attack_5c_get_object_acl_of_bobs_key(world: World) -> bool:
    return _anyone_can(world, "s3:GetObjectAcl", "traces/bob/job-1/algo-1.pt.trace.json")


def attack_5d_list_the_parts_of_bobs_upload(world: World) -> bool:
    return _anyone_can(world, "s3:ListMultipartUploadParts", "traces/bob/job-1/algo-1.pt.trace.json")


# --- item 6: trace folders are written only by their owner's roles and the pipeline by default --------------------


def attack_6a_outside_writer_plants_tensorboard_logs(world: World) -> bool:
    return _s3(world, TRAINING, BROAD, "s3:PutObject", "tensorboard/bob/job-1/events.out.tfevents.1")


def attack_6b_outside_writer_plants_a_trace(world: World) -> bool:
    return _s3(world, TRAINING, BROAD, "s3:PutObject", "traces/bob/job-1/idle.pt.trace.json")


def attack_6c_alices_role_plants_a_trace_in_bobs_folder(world: World) -> bool:
    alice = world.role("alice", "ExecutionRole")
    identity = [*world.policies[alice], *BROAD]
    return _s3(
        world, world.caller(alice), identity, "s3:PutObject", "traces/bob/job-1/idle.pt.trace.json", **{TAG: "alice"}
    )


# --- item 9: behaviour tags of bob's job, and the consent tag of a stop -------------------------------------------


def _guard_statements(world: World) -> list[dict[str, Any]]:
    (guard,) = [k for k in world.policies if k.startswith("OwnerTagGuard")]
    return world.policies[guard]


def _retag(world: World, key: str) -> bool:
    identity = [*_person(world, "alice"), *_guard_statements(world)]
    context = {
        f"aws:PrincipalTag/{TAG}": "alice",
        f"aws:ResourceTag/{TAG}": "bob",
        "aws:TagKeys": [key],
        f"aws:RequestTag/{key}": "x",
    }
    return decision(identity, ALICE, Request("sagemaker:AddTags", BOB_JOB, context))


def attack_9a_alice_opts_bobs_job_into_stops(world: World) -> bool:
    return _retag(world, "profstack:actions")


def attack_9b_alice_turns_live_analysis_off_for_bobs_job(world: World) -> bool:
    return _retag(world, "profstack:live")


def attack_9c_alice_moves_bobs_job_to_another_family(world: World) -> bool:
    return _retag(world, "profstack:family")


def attack_9d_the_actions_role_stops_a_job_that_did_not_consent(world: World) -> bool:
    analyser = next(
        k
        for k, r in world.processing["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"].get("Handler", "").startswith("lambdas.live_analysis.handler")
    )
    role = world.processing["Resources"][analyser]["Properties"]["Role"]["Fn::GetAtt"][0]
    context = {f"aws:ResourceTag/{TAG}": "bob"}  # bob's job, without profstack:actions=stop
    return decision(world.policies[role], world.caller(role), Request("sagemaker:StopTrainingJob", BOB_JOB, context))


ATTACKS: dict[str, Callable[[World], bool]] = {
    name.removeprefix("attack_"): fn for name, fn in sorted(globals().items()) if name.startswith("attack_")
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_the_attempt_is_refused(world: World, attack: str) -> None:
    # GIVEN the default deployment WHEN the attacker tries THEN IAM refuses
    assert not ATTACKS[attack](world), f"{attack} succeeds"


def test_the_legitimate_counterparts_still_work(world: World) -> None:
    # GIVEN the same world THEN each attack's honest twin is allowed, so the refusals above are not blanket denials
    bob_reader, bob_role = world.role("bob", "ReportReaderRole"), world.role("bob", "ExecutionRole")
    bob = Principal(arn=f"arn:aws:iam::{ACCOUNT}:role/DataScientist-bob")
    bob_person = [*world.policies[world.role("bob", "AccessPolicy")], *BROAD]
    tags = {f"aws:PrincipalTag/{TAG}": "bob"}
    assert can_assume(
        bob_person, world.trust[bob_reader], bob, world.arns[bob_reader], context={**tags, **world.about(bob_reader)}
    )
    assert _pass(world, bob, bob_person, bob_role, **{TAG: "bob"})
    profile = {**tags, f"aws:ResourceTag/{TAG}": "bob"}
    assert decision(bob_person, bob, Request("sagemaker:CreatePresignedDomainUrl", _profile("bob"), profile))
    assert decision(bob_person, bob, Request("sagemaker:CreateApp", _app("bob", "tensorboard"), tags))
    # AND bob's own execution role writes his traces; the pipeline writes his report
    identity = [*world.policies[bob_role], *BROAD]
    assert _s3(
        world, world.caller(bob_role), identity, "s3:PutObject", "traces/bob/job-1/a.pt.trace.json", **{TAG: "bob"}
    )
    processor = next(k for k in world.arns if k.startswith("TraceProcessorRole"))
    assert _s3(world, world.caller(processor), BROAD, "s3:ReplicateObject", "reports/bob/job-1/summary.json")
    # AND bob may tag his own job; the actions role stops a job that consented
    context = {f"aws:PrincipalTag/{TAG}": "bob", f"aws:ResourceTag/{TAG}": "bob", "aws:TagKeys": ["profstack:actions"]}
    assert decision([*bob_person, *_guard_statements(world)], bob, Request("sagemaker:AddTags", BOB_JOB, context))
