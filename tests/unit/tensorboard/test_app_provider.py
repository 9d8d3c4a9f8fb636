"""The TensorBoard app provider's on_event / is_complete, driven through botocore Stubber."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from lambdas.common import clients
from lambdas.tensorboard_app import provider
from lambdas.tensorboard_app.env import EnvError, ProviderEnv
from tests.unit.tensorboard.stubs import (
    DOMAIN,
    described,
    expect_create,
    expect_delete,
    expect_describe,
    sagemaker_client,
)

PHYSICAL_ID = f"{DOMAIN}/alice/TensorBoard/default"


def _event(request: str, *, instance_type: str = "ml.r5.large", **extra: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "RequestType": request,
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:provider",
            "DomainId": DOMAIN,
            "UserProfileName": "alice",
            "AppName": "default",
            "InstanceType": instance_type,
        },
    }
    if request != "Create":
        event["PhysicalResourceId"] = PHYSICAL_ID
    event.update(extra)
    return event


@pytest.fixture
def client_and_stubber() -> Any:
    client = sagemaker_client()
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def test_create_calls_create_app_then_waits_for_in_service(client_and_stubber: Any) -> None:
    """GIVEN no app WHEN Create runs THEN CreateApp is called and is_complete waits for InService."""
    client, stubber = client_and_stubber
    expect_describe(stubber, "alice", None)
    expect_create(stubber, "alice", "ml.r5.large")
    expect_describe(stubber, "alice", described("alice", "Pending"))
    expect_describe(stubber, "alice", described("alice", "InService"))

    first = provider.on_event(_event("Create"), client, managed_domain_id=DOMAIN)
    assert first == {"PhysicalResourceId": PHYSICAL_ID, "Data": {"Action": "create"}}
    event = {**_event("Create"), **first}
    assert provider.is_complete(event, client, managed_domain_id=DOMAIN) == {"IsComplete": False}
    done = provider.is_complete(event, client, managed_domain_id=DOMAIN)
    assert done["IsComplete"] is True
    assert done["Data"]["AppArn"].endswith(f"app/{DOMAIN}/alice/tensorboard/default")


def test_create_adopts_an_app_that_already_exists(client_and_stubber: Any) -> None:
    """GIVEN an InService app of the wanted type WHEN Create runs THEN nothing is created (idempotent)."""
    client, stubber = client_and_stubber
    expect_describe(stubber, "alice", described("alice", "InService"))
    expect_describe(stubber, "alice", described("alice", "InService"))

    first = provider.on_event(_event("Create"), client, managed_domain_id=DOMAIN)
    assert first["Data"] == {"Action": "in-service"}
    assert provider.is_complete({**_event("Create"), **first}, client, managed_domain_id=DOMAIN)["IsComplete"]


def test_create_tolerates_a_concurrent_create(client_and_stubber: Any) -> None:
    """GIVEN CreateApp answers ResourceInUse (raced) WHEN Create runs THEN it waits instead of failing."""
    client, stubber = client_and_stubber
    expect_describe(stubber, "alice", None)
    expect_create(stubber, "alice", "ml.r5.large", error="ResourceInUse")
    result = provider.on_event(_event("Create"), client, managed_domain_id=DOMAIN)
    assert result["Data"] == {"Action": "create-raced"}


def test_failed_app_becomes_an_error_carrying_failure_reason(client_and_stubber: Any) -> None:
    """GIVEN the new app turns Failed WHEN is_complete polls THEN it raises with SageMaker's FailureReason."""
    client, stubber = client_and_stubber
    expect_describe(stubber, "alice", described("alice", "Failed", failure_reason="InsufficientCapacity"))
    with pytest.raises(provider.AppFailedError, match=r"alice.*failed: InsufficientCapacity"):
        provider.is_complete(_event("Create"), client, managed_domain_id=DOMAIN)


def test_first_call_clears_a_stale_failed_app_and_recreates(client_and_stubber: Any) -> None:
    """GIVEN a Failed app from an earlier attempt WHEN Create runs THEN it is deleted, then created again."""
    client, stubber = client_and_stubber
    expect_describe(stubber, "alice", described("alice", "Failed", failure_reason="old"))
    expect_delete(stubber, "alice")
    expect_describe(stubber, "alice", described("alice", "Deleted"))
    expect_create(stubber, "alice", "ml.r5.large")

    first = provider.on_event(_event("Create"), client, managed_domain_id=DOMAIN)
    assert first["Data"] == {"Action": "delete-stale-failed"}
    assert provider.is_complete(_event("Create"), client, managed_domain_id=DOMAIN) == {"IsComplete": False}


def test_delete_calls_delete_app_then_waits_for_deleted(client_and_stubber: Any) -> None:
    """GIVEN an InService app WHEN Delete runs THEN DeleteApp is called and is_complete waits for Deleted."""
    client, stubber = client_and_stubber
    expect_describe(stubber, "alice", described("alice", "InService"))
    expect_delete(stubber, "alice")
    expect_describe(stubber, "alice", described("alice", "Deleting"))
    expect_describe(stubber, "alice", described("alice", "Deleted"))

    first = provider.on_event(_event("Delete"), client, managed_domain_id=DOMAIN)
    assert first == {"PhysicalResourceId": PHYSICAL_ID, "Data": {"Action": "delete"}}
    assert provider.is_complete(_event("Delete"), client, managed_domain_id=DOMAIN) == {"IsComplete": False}
    assert provider.is_complete(_event("Delete"), client, managed_domain_id=DOMAIN) == {"IsComplete": True}


def test_delete_of_a_missing_app_succeeds(client_and_stubber: Any) -> None:
    """GIVEN no app (never created, or reaped) WHEN Delete runs THEN it completes without DeleteApp."""
    client, stubber = client_and_stubber
    expect_describe(stubber, "alice", None)
    expect_describe(stubber, "alice", None)
    first = provider.on_event(_event("Delete"), client, managed_domain_id=DOMAIN)
    assert first["Data"] == {"Action": "absent"}
    assert provider.is_complete(_event("Delete"), client, managed_domain_id=DOMAIN) == {"IsComplete": True}


def test_delete_racing_a_vanishing_app_succeeds(client_and_stubber: Any) -> None:
    """GIVEN the app disappears between DescribeApp and DeleteApp WHEN Delete runs THEN it is done."""
    client, stubber = client_and_stubber
    expect_describe(stubber, "alice", described("alice", "InService"))
    expect_delete(stubber, "alice", error="ResourceNotFound")
    assert provider.on_event(_event("Delete"), client, managed_domain_id=DOMAIN)["Data"] == {"Action": "absent"}


def test_delete_that_fails_surfaces_the_reason(client_and_stubber: Any) -> None:
    """GIVEN our DeleteApp left the app Failed WHEN is_complete polls THEN the error names the reason."""
    client, stubber = client_and_stubber
    expect_describe(stubber, "alice", described("alice", "Failed", failure_reason="EFS unreachable"))
    with pytest.raises(provider.AppFailedError, match="EFS unreachable"):
        provider.is_complete(_event("Delete"), client, managed_domain_id=DOMAIN)


def test_delete_waits_for_a_pending_app_before_deleting(client_and_stubber: Any) -> None:
    """GIVEN a Pending app WHEN Delete runs THEN it waits (DeleteApp needs a settled app) and deletes later."""
    client, stubber = client_and_stubber
    expect_describe(stubber, "alice", described("alice", "Pending"))
    expect_describe(stubber, "alice", described("alice", "InService"))
    expect_delete(stubber, "alice")
    assert provider.on_event(_event("Delete"), client, managed_domain_id=DOMAIN)["Data"] == {"Action": "wait-pending"}
    assert provider.is_complete(_event("Delete"), client, managed_domain_id=DOMAIN) == {"IsComplete": False}


def test_update_with_a_new_instance_type_replaces_the_app(client_and_stubber: Any) -> None:
    """GIVEN an InService ml.r5.large app WHEN Update asks for ml.r5.xlarge THEN delete, wait, create, wait."""
    client, stubber = client_and_stubber
    new = "ml.r5.xlarge"
    expect_describe(stubber, "alice", described("alice", "InService", instance_type="ml.r5.large"))
    expect_delete(stubber, "alice")
    expect_describe(stubber, "alice", described("alice", "Deleting", instance_type="ml.r5.large"))
    expect_describe(stubber, "alice", described("alice", "Deleted", instance_type="ml.r5.large"))
    expect_create(stubber, "alice", new)
    expect_describe(stubber, "alice", described("alice", "Pending", instance_type=new))
    expect_describe(stubber, "alice", described("alice", "InService", instance_type=new))

    event = _event("Update", instance_type=new, OldResourceProperties={"InstanceType": "ml.r5.large"})
    first = provider.on_event(event, client, managed_domain_id=DOMAIN)
    # Same physical id: CloudFormation must not send a clean-up Delete that would hit the new app.
    assert first == {"PhysicalResourceId": PHYSICAL_ID, "Data": {"Action": "replace-instance-type"}}
    polls = [provider.is_complete(event, client, managed_domain_id=DOMAIN)["IsComplete"] for _ in range(4)]
    assert polls == [False, False, False, True]


def test_update_renaming_the_profile_gets_a_new_physical_id(client_and_stubber: Any) -> None:
    """GIVEN the profile name changes WHEN Update runs THEN the new app gets a new id (old one is cleaned up)."""
    client, stubber = client_and_stubber
    expect_describe(stubber, "alicia", None)
    expect_create(stubber, "alicia", "ml.r5.large")
    event = _event("Update")
    event["ResourceProperties"] = {**event["ResourceProperties"], "UserProfileName": "alicia"}
    result = provider.on_event(event, client, managed_domain_id=DOMAIN)
    assert result["PhysicalResourceId"] == f"{DOMAIN}/alicia/TensorBoard/default"


def test_other_sagemaker_errors_propagate(client_and_stubber: Any) -> None:
    """GIVEN DescribeApp is denied WHEN Create runs THEN the ClientError reaches CloudFormation."""
    client, stubber = client_and_stubber
    stubber.add_client_error("describe_app", service_error_code="AccessDeniedException", http_status_code=403)
    with pytest.raises(ClientError, match="AccessDenied"):
        provider.on_event(_event("Create"), client, managed_domain_id=DOMAIN)


def test_bad_properties_fail_create_but_not_delete(client_and_stubber: Any) -> None:
    """GIVEN a malformed instance type WHEN Create runs THEN it fails; a rollback Delete is a no-op."""
    client, _ = client_and_stubber
    bad = _event("Create", instance_type="r5.large")
    with pytest.raises(provider.BadRequestError, match="InstanceType"):
        provider.on_event(bad, client, managed_domain_id=DOMAIN)
    rollback = {**bad, "RequestType": "Delete", "PhysicalResourceId": "whatever"}
    assert provider.on_event(rollback, client, managed_domain_id=DOMAIN)["Data"] == {"Action": "skip"}
    assert provider.is_complete(rollback, client, managed_domain_id=DOMAIN) == {"IsComplete": True}


def test_refuses_apps_outside_the_managed_domain(client_and_stubber: Any) -> None:
    """GIVEN properties naming another domain WHEN Create runs THEN the provider refuses."""
    client, _ = client_and_stubber
    with pytest.raises(provider.BadRequestError, match="not the managed domain"):
        provider.on_event(_event("Create"), client, managed_domain_id="d-zzzzzzzzzzzz")


def test_env_is_validated() -> None:
    """GIVEN a malformed DOMAIN_ID WHEN the function cold-starts THEN EnvError names the problem."""
    assert ProviderEnv.from_environ({"DOMAIN_ID": DOMAIN}).domain_id == DOMAIN
    with pytest.raises(EnvError, match="DOMAIN_ID"):
        ProviderEnv.from_environ({"DOMAIN_ID": "not-a-domain"})


class _Context:
    function_name = "provider"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:provider"
    aws_request_id = "req-1"


@pytest.mark.parametrize(
    ("module_name", "expected"),
    [
        ("on_event", {"PhysicalResourceId": PHYSICAL_ID, "Data": {"Action": "absent"}}),
        ("is_complete", {"IsComplete": True}),
    ],
)
def test_thin_handlers_validate_env_and_delegate(
    monkeypatch: pytest.MonkeyPatch, module_name: str, expected: dict[str, Any]
) -> None:
    """GIVEN the deployed environment WHEN CloudFormation calls a handler THEN it answers via provider.py."""
    import importlib
    import sys

    monkeypatch.setenv("DOMAIN_ID", DOMAIN)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "tensorboard-app-provider")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    sys.modules.pop(f"lambdas.tensorboard_app.{module_name}", None)
    module = importlib.import_module(f"lambdas.tensorboard_app.{module_name}")
    client = sagemaker_client()
    monkeypatch.setattr(clients, "sagemaker", lambda: client)
    with Stubber(client) as stubber:
        expect_describe(stubber, "alice", None)
        result = module.handler(_event("Delete"), _Context())
        stubber.assert_no_pending_responses()
    assert result == expected


def test_handler_refuses_to_start_with_a_bad_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """GIVEN no DOMAIN_ID WHEN the module loads (cold start) THEN EnvError, before any event is handled."""
    import importlib
    import sys

    monkeypatch.delenv("DOMAIN_ID", raising=False)
    sys.modules.pop("lambdas.tensorboard_app.on_event", None)
    with pytest.raises(EnvError, match="DOMAIN_ID"):
        importlib.import_module("lambdas.tensorboard_app.on_event")
    sys.modules.pop("lambdas.tensorboard_app.on_event", None)


def test_config_rejects_an_s3_gateway_without_vpc_only() -> None:
    """GIVEN route tables for an S3 gateway on a PublicInternetOnly domain WHEN validated THEN one-line error."""
    from profstack.config import ConfigError, parse_config

    domain = {
        "mode": "create",
        "vpc_id": "vpc-0a1b2c3d4e5f60718",
        "subnet_ids": ["subnet-0a1b2c3d4e5f60718"],
        "s3_gateway_route_table_ids": ["rtb-0a1b2c3d4e5f60718"],
    }
    with pytest.raises(ConfigError, match=r"^config: domain: .*only used with network_access: VpcOnly"):
        parse_config({"prefix": "profstack", "domain": domain})
    parse_config({"prefix": "profstack", "domain": {**domain, "network_access": "VpcOnly"}})
