"""The idle reaper: decisions, dry run, real deletes and the handler's log lines and metrics."""

from __future__ import annotations

import importlib
import json
import sys
from datetime import timedelta
from typing import Any

import pytest
from botocore.stub import Stubber

from lambdas.common import clients
from lambdas.idle_reaper.env import EnvError, ReaperEnv
from lambdas.idle_reaper.reaper import reap_idle_apps
from tests.unit.tensorboard.stubs import (
    DOMAIN,
    T0,
    app_key,
    described,
    expect_delete,
    expect_describe,
    sagemaker_client,
)

TTL = timedelta(minutes=120)
NOW = T0 + timedelta(hours=5)


def _listed(user: str, status: str = "InService", app_type: str = "TensorBoard") -> dict[str, Any]:
    return {**app_key(user), "AppType": app_type, "Status": status, "CreationTime": T0}


def _expect_list(stubber: Stubber, apps: list[dict[str, Any]]) -> None:
    stubber.add_response("list_apps", {"Apps": apps}, {"DomainIdEquals": DOMAIN})


def _run(client: Any, *, dry_run: bool, profiles: tuple[str, ...] = ("alice", "bob", "carol", "dave")) -> Any:
    return reap_idle_apps(client, domain_id=DOMAIN, user_profiles=profiles, idle_ttl=TTL, dry_run=dry_run, now=NOW)


def _stub_fleet(stubber: Stubber) -> None:
    """alice: active 30 min ago; bob: last active 4 h ago; carol: never used, created 5 h ago; dave: Pending;
    erin: not a ProfStack user; a JupyterServer app is ignored."""
    _expect_list(
        stubber,
        [
            _listed("alice"),
            _listed("bob"),
            _listed("carol"),
            _listed("dave", status="Pending"),
            _listed("erin"),
            _listed("alice", app_type="JupyterServer"),
        ],
    )
    expect_describe(stubber, "alice", described("alice", "InService", last_activity=NOW - timedelta(minutes=30)))
    expect_describe(stubber, "bob", described("bob", "InService", last_activity=NOW - timedelta(hours=4)))
    expect_describe(stubber, "carol", described("carol", "InService"))


def test_dry_run_deletes_nothing_and_reports_what_it_would_reap() -> None:
    """GIVEN two idle apps WHEN the reaper runs in dry-run mode THEN no DeleteApp, two would-reap decisions."""
    client = sagemaker_client()
    with Stubber(client) as stubber:
        _stub_fleet(stubber)
        result = _run(client, dry_run=True)
        stubber.assert_no_pending_responses()  # and no delete_app was stubbed: any call would fail
    by_user = {d.user_profile: d for d in result.decisions}
    assert by_user["alice"].action == "keep"
    assert by_user["bob"].action == "would-reap"
    assert by_user["bob"].idle_reference == "last-user-activity"
    assert by_user["bob"].idle_minutes == 240.0
    assert by_user["carol"].action == "would-reap"
    assert by_user["carol"].idle_reference == "creation-time"  # fallback: no activity timestamp
    assert by_user["dave"].action == "keep"
    assert by_user["erin"].action == "skip"
    assert result.count("reaped") == 0
    assert len(result.decisions) == 5  # the JupyterServer app is not a TensorBoard app


def test_real_run_deletes_only_idle_managed_apps() -> None:
    """GIVEN the same fleet WHEN the reaper runs for real THEN it deletes bob's and carol's apps only."""
    client = sagemaker_client()
    with Stubber(client) as stubber:
        # Stubber answers in call order: bob is decided (and deleted) before carol is described.
        _expect_list(stubber, [_listed("alice"), _listed("bob"), _listed("carol"), _listed("erin")])
        expect_describe(stubber, "alice", described("alice", "InService", last_activity=NOW - timedelta(minutes=30)))
        expect_describe(stubber, "bob", described("bob", "InService", last_activity=NOW - timedelta(hours=4)))
        expect_delete(stubber, "bob")
        expect_describe(stubber, "carol", described("carol", "InService"))
        expect_delete(stubber, "carol")
        result = _run(client, dry_run=False)
        stubber.assert_no_pending_responses()
    assert [(d.user_profile, d.action) for d in result.decisions] == [
        ("alice", "keep"),
        ("bob", "reaped"),
        ("carol", "reaped"),
        ("erin", "skip"),
    ]
    assert result.count("reaped") == 2


def test_app_exactly_at_the_ttl_is_kept() -> None:
    """GIVEN an app idle for exactly the TTL WHEN the reaper runs THEN it is kept (idle must exceed the TTL)."""
    client = sagemaker_client()
    with Stubber(client) as stubber:
        _expect_list(stubber, [_listed("alice")])
        expect_describe(stubber, "alice", described("alice", "InService", last_activity=NOW - TTL))
        result = _run(client, dry_run=False)
    assert result.decisions[0].action == "keep"


def test_a_failed_delete_is_recorded_and_the_rest_continue() -> None:
    """GIVEN DeleteApp fails for bob WHEN the reaper runs THEN bob is an error and carol is still reaped."""
    client = sagemaker_client()
    with Stubber(client) as stubber:
        _expect_list(stubber, [_listed("bob"), _listed("carol")])
        expect_describe(stubber, "bob", described("bob", "InService", last_activity=NOW - timedelta(hours=4)))
        expect_delete(stubber, "bob", error="ValidationException")
        expect_describe(stubber, "carol", described("carol", "InService"))
        expect_delete(stubber, "carol")
        result = _run(client, dry_run=False)
    assert [d.action for d in result.decisions] == ["error", "reaped"]
    assert "ValidationException" in result.decisions[0].reason


def test_an_app_it_may_not_describe_is_an_error_and_every_app_after_it_is_still_reaped() -> None:
    """GIVEN DescribeApp answers AccessDenied for bob's app (named "custom", not "default") WHEN the reaper runs
    THEN bob's app is one error and carol's idle app after it is still reaped (before: the run stopped at bob)."""
    client = sagemaker_client()
    bob = {**app_key("bob"), "AppName": "custom"}
    with Stubber(client) as stubber:
        _expect_list(stubber, [{**_listed("bob"), "AppName": "custom"}, _listed("carol")])
        stubber.add_client_error(
            "describe_app", service_error_code="AccessDeniedException", http_status_code=400, expected_params=bob
        )
        expect_describe(stubber, "carol", described("carol", "InService"))
        expect_delete(stubber, "carol")
        result = _run(client, dry_run=False)
        stubber.assert_no_pending_responses()
    assert [(d.user_profile, d.action) for d in result.decisions] == [("bob", "error"), ("carol", "reaped")]
    assert result.decisions[0].reason == "DescribeApp failed: AccessDeniedException"


def test_an_app_that_vanished_after_listing_is_kept() -> None:
    """GIVEN an app deleted between ListApps and DescribeApp WHEN the reaper runs THEN nothing is deleted."""
    client = sagemaker_client()
    with Stubber(client) as stubber:
        _expect_list(stubber, [_listed("bob")])
        expect_describe(stubber, "bob", None)
        result = _run(client, dry_run=False)
    assert result.decisions[0].action == "keep"
    assert result.decisions[0].status == "NotFound"


def test_env_parses_profiles_and_rejects_garbage() -> None:
    """GIVEN the stack's environment WHEN parsed THEN profiles are a set; a non-list is an EnvError."""
    env = ReaperEnv.from_environ(
        {"DOMAIN_ID": DOMAIN, "IDLE_TTL_MINUTES": "120", "DRY_RUN": "true", "USER_PROFILES": '["a","b"]'}
    )
    assert env.dry_run is True
    assert env.user_profiles == frozenset({"a", "b"})
    with pytest.raises(EnvError):
        ReaperEnv.from_environ({"DOMAIN_ID": DOMAIN, "IDLE_TTL_MINUTES": "120", "USER_PROFILES": '"a"'})
    with pytest.raises(EnvError, match="IDLE_TTL_MINUTES"):
        ReaperEnv.from_environ({"DOMAIN_ID": DOMAIN, "USER_PROFILES": "[]"})


def test_handler_logs_each_decision_and_emits_the_reaped_metric(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """GIVEN one idle app WHEN the Lambda handler runs THEN it logs a JSON decision and EMF TensorBoardAppsReaped=1."""
    monkeypatch.setenv("DOMAIN_ID", DOMAIN)
    monkeypatch.setenv("IDLE_TTL_MINUTES", "120")
    monkeypatch.setenv("DRY_RUN", "false")
    monkeypatch.setenv("USER_PROFILES", '["bob"]')
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "ProfStack")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "idle-reaper")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    sys.modules.pop("lambdas.idle_reaper.handler", None)
    handler_module = importlib.import_module("lambdas.idle_reaper.handler")
    client = sagemaker_client()
    monkeypatch.setattr(clients, "sagemaker", lambda: client)

    class Context:
        function_name = "reaper"
        memory_limit_in_mb = 256
        invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:reaper"
        aws_request_id = "req-1"

    with Stubber(client) as stubber:
        _expect_list(stubber, [_listed("bob")])
        # The handler uses the wall clock: an activity far in the past is idle for sure.
        expect_describe(stubber, "bob", described("bob", "InService", last_activity=T0 - timedelta(days=3650)))
        expect_delete(stubber, "bob")
        summary = handler_module.handler({"source": "aws.scheduler"}, Context())

    assert summary["reaped"] == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    decisions = [line for line in lines if line.get("message") == "tensorboard app decision"]
    assert decisions[0]["decision"]["action"] == "reaped"
    assert decisions[0]["decision"]["user_profile"] == "bob"
    emf = next(line for line in lines if "_aws" in line)
    assert emf["TensorBoardAppsReaped"] == [1.0]
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ProfStack"
