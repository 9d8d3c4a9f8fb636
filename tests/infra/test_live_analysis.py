"""Template assertions for live analysis and rule actions (stacks/components/live_analysis.py, issue 36):
real CDK synth with cdk-nag on, and the IAM evaluator (tests/infra/iam_eval.py) for what the roles may do."""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.conftest import SynthesizedApp, synthesize
from tests.infra.iam_eval import PSEUDO, Request, Resolver, is_allowed, principal_statements
from tests.infra.test_processing_stack import _function, _of_type

STACK = "profstack-processing"
ANALYSER = "lambdas.live_analysis.handler.handler"
DISPATCHER = "lambdas.live_analysis.dispatch.handler"
#: the storage stack's exports (bucket, keys) as opaque text: the assertions here are about SageMaker and Lambda
RESOLVE = Resolver(imports={r".": "<import>"})
JOB_ARN = f"arn:aws:sagemaker:{PSEUDO['AWS::Region']}:{PSEUDO['AWS::AccountId']}:training-job/resnet-7"


def _config(example_config: Any, **processing: Any) -> Any:
    return example_config.model_copy(
        update={"processing": example_config.processing.model_copy(update=processing)}, deep=True
    )


@pytest.fixture(scope="module")
def stop_app(example_config: Any) -> SynthesizedApp:
    from profstack.config import Actions

    actions = Actions(stop_enabled=True, rules={"LowGPUUtilization": "stop"})
    return synthesize(_config(example_config, actions=actions))  # cdk-nag on: raises on an unacknowledged finding


def _role_of(template: dict[str, Any], handler: str) -> str:
    _, props = _function(template, handler)
    return str(props["Role"]["Fn::GetAtt"][0])


def _stop(context: dict[str, str]) -> Request:
    return Request("sagemaker:StopTrainingJob", JOB_ARN, context)


def test_the_analyser_stops_only_jobs_whose_owner_tag_is_a_configured_user(stop_app: SynthesizedApp) -> None:
    # GIVEN a deployment that opted in to stopping jobs
    template = stop_app.templates[STACK]
    statements = principal_statements(template, RESOLVE)
    analyser = statements[_role_of(template, ANALYSER)]
    consent = {"aws:ResourceTag/profstack:actions": "stop"}
    # THEN its role may stop a job tagged with a configured user that consented (profstack:actions=stop)
    assert is_allowed(analyser, _stop({"aws:ResourceTag/profstack:user": "alice", **consent}))
    assert is_allowed(analyser, _stop({"aws:ResourceTag/profstack:user": "bob", **consent}))
    # AND not one tagged with anyone else, a prefix of a user, or no owner tag at all
    assert not is_allowed(analyser, _stop({"aws:ResourceTag/profstack:user": "mallory", **consent}))
    assert not is_allowed(analyser, _stop({"aws:ResourceTag/profstack:user": "alic", **consent}))
    assert not is_allowed(analyser, _stop(consent))
    # AND not a configured user's job without the consent tag, or with another value (issue 42 item 9: before, IAM
    # held only the owner tag, the consent was the code's word)
    assert not is_allowed(analyser, _stop({"aws:ResourceTag/profstack:user": "bob"}))
    assert not is_allowed(
        analyser, _stop({"aws:ResourceTag/profstack:user": "bob", "aws:ResourceTag/profstack:actions": "notify"})
    )
    # AND no other role of the stack may stop any job
    others = [role for role, st in statements.items() if role != _role_of(template, ANALYSER)]
    for role in others:
        assert not is_allowed(
            statements[role],
            _stop({"aws:ResourceTag/profstack:user": "alice", "aws:ResourceTag/profstack:actions": "stop"}),
        ), role


def test_without_the_opt_in_no_role_may_stop_a_job(synthesized: SynthesizedApp) -> None:
    # GIVEN the example config (processing.actions.stop_enabled: false) WHEN synthesized
    template = synthesized.templates[STACK]
    statements = principal_statements(template, RESOLVE)
    # THEN the live analyser exists, and neither it nor any other role may call StopTrainingJob
    assert _role_of(template, ANALYSER) in statements
    for role, st in statements.items():
        assert not is_allowed(
            st, _stop({"aws:ResourceTag/profstack:user": "alice", "aws:ResourceTag/profstack:actions": "stop"})
        ), role


def test_a_schedule_at_the_configured_interval_drives_the_dispatcher_and_nothing_is_created_per_job(
    synthesized: SynthesizedApp, example_config: Any
) -> None:
    template = synthesized.templates[STACK]
    dispatcher, _ = _function(template, DISPATCHER)
    rules = [
        r["Properties"]
        for r in _of_type(template, "AWS::Events::Rule").values()
        if any(t["Arn"] == {"Fn::GetAtt": [dispatcher, "Arn"]} for t in r["Properties"].get("Targets", []))
    ]
    # THEN one rule, every processing.live.interval_minutes (default 15), runs the dispatcher
    assert [r["ScheduleExpression"] for r in rules] == [
        f"rate({example_config.processing.live.interval_minutes} minutes)"
    ]
    # AND neither function retries an asynchronous invocation (a retried dispatch would analyse jobs twice)
    analyser, _ = _function(template, ANALYSER)
    for function in (analyser, dispatcher):
        configs = [
            c["Properties"]
            for c in _of_type(template, "AWS::Lambda::EventInvokeConfig").values()
            if c["Properties"]["FunctionName"] == {"Ref": function}
        ]
        assert [c["MaximumRetryAttempts"] for c in configs] == [0]
    # AND the dispatcher may invoke the analyser, and no role may create schedules or rules at run time
    statements = principal_statements(template, RESOLVE)
    dispatcher_role = statements[_role_of(template, DISPATCHER)]
    assert is_allowed(dispatcher_role, Request("lambda:InvokeFunction", f"<getatt:{analyser}.Arn>"))
    for st in statements.values():
        for action in ("scheduler:CreateSchedule", "events:PutRule", "events:PutTargets"):
            assert not is_allowed(st, Request(action, "*"))


def test_the_analyser_reads_traces_only_through_the_trace_reader_role(synthesized: SynthesizedApp) -> None:
    template = synthesized.templates[STACK]
    analyser_role = _role_of(template, ANALYSER)
    statements = principal_statements(template, RESOLVE)[analyser_role]
    # THEN its own role reads no trace object (only reports/, where it writes the in-progress report)
    for statement in statements:
        if "s3:GetObject" in statement["Action"]:
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            assert all("/reports/" in str(r) for r in resources), resources
    # AND the trace-reader role trusts it (the per-job session policy is the processor's, scope.session_policy)
    readers = [
        r
        for r in _of_type(template, "AWS::IAM::Role").values()
        if "trace" in str(r["Properties"].get("Description", "")).lower()
        and "assumed by the trace processor" in str(r["Properties"].get("Description", ""))
    ]
    (reader,) = readers
    trusted = [
        p
        for s in reader["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        if s["Action"] == "sts:AssumeRole"
        for p in (s["Principal"]["AWS"] if isinstance(s["Principal"]["AWS"], list) else [s["Principal"]["AWS"]])
    ]
    assert {"Fn::GetAtt": [analyser_role, "Arn"]} in trusted


def test_live_analysis_off_in_config_deploys_nothing_of_it(example_config: Any) -> None:
    from profstack.config import LiveAnalysis

    app = synthesize(_config(example_config, live=LiveAnalysis(enabled=False)), nag=False)
    template = app.templates[STACK]
    handlers = {r["Properties"]["Handler"] for r in _of_type(template, "AWS::Lambda::Function").values()}
    assert ANALYSER not in handlers
    assert DISPATCHER not in handlers
