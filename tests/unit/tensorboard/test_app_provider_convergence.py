"""The provider converges from any app state, driven like the CDK framework drives it.

A small fake of SageMaker's app lifecycle (Pending -> InService | Failed, Deleting -> Deleted)
that refuses what SageMaker refuses (CreateApp over a live app, DeleteApp on a Pending or
Deleting app). Hypothesis picks the starting state and the request; the framework loop calls
on_event once, then is_complete after each tick, and must finish within a bounded number of polls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import given, settings
from hypothesis import strategies as st

from lambdas.tensorboard_app import provider
from tests.unit.tensorboard.stubs import DOMAIN

SMALL, LARGE = "ml.r5.large", "ml.r5.xlarge"
MAX_POLLS = 12


def _error(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, operation)


@dataclass
class FakeApp:
    status: str
    instance_type: str
    failure_reason: str | None = None


class FakeSageMaker:
    """One user's `default` TensorBoard app. `fail_creates` makes new apps end Failed."""

    def __init__(self, app: FakeApp | None, *, fail_creates: bool = False) -> None:
        self.app = app
        self.fail_creates = fail_creates
        self.calls: list[str] = []

    def tick(self) -> None:
        if self.app is None:
            return
        if self.app.status == "Pending":
            if self.fail_creates:
                self.app.status, self.app.failure_reason = "Failed", "CapacityError: no ml.r5 capacity"
            else:
                self.app.status = "InService"
        elif self.app.status == "Deleting":
            self.app.status = "Deleted"

    def describe_app(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append("describe")
        if self.app is None:
            raise _error("ResourceNotFound", "DescribeApp")
        response: dict[str, Any] = {
            "AppArn": f"arn:aws:sagemaker:us-east-1:123456789012:app/{DOMAIN}/alice/tensorboard/default",
            "Status": self.app.status,
            "ResourceSpec": {"InstanceType": self.app.instance_type},
        }
        if self.app.failure_reason:
            response["FailureReason"] = self.app.failure_reason
        return response

    def create_app(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append("create")
        if self.app is not None and self.app.status != "Deleted":
            raise _error("ResourceInUse", "CreateApp")
        self.app = FakeApp("Pending", kwargs["ResourceSpec"]["InstanceType"])
        return {}

    def delete_app(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append("delete")
        if self.app is None or self.app.status == "Deleted":
            raise _error("ResourceNotFound", "DeleteApp")
        if self.app.status in {"Pending", "Deleting"}:
            raise _error("ValidationException", "DeleteApp")  # SageMaker refuses; the provider must wait
        self.app.status = "Deleting"
        return {}


def _event(request: str, instance_type: str) -> dict[str, Any]:
    return {
        "RequestType": request,
        "PhysicalResourceId": f"{DOMAIN}/alice/TensorBoard/default",
        "ResourceProperties": {"DomainId": DOMAIN, "UserProfileName": "alice", "InstanceType": instance_type},
    }


def drive(fake: FakeSageMaker, event: dict[str, Any]) -> int:
    """The CDK provider framework: onEvent once, then isComplete until done. Returns the poll count."""
    event = {**event, **provider.on_event(event, fake, managed_domain_id=DOMAIN)}  # type: ignore[arg-type]
    for poll in range(1, MAX_POLLS + 1):
        fake.tick()
        if provider.is_complete(event, fake, managed_domain_id=DOMAIN)["IsComplete"]:  # type: ignore[arg-type]
            return poll
    raise AssertionError(f"no convergence after {MAX_POLLS} polls: {fake.app}, calls {fake.calls}")


START_STATES = st.one_of(
    st.none(),
    st.builds(
        FakeApp,
        st.sampled_from(["Pending", "InService", "Deleting", "Deleted", "Failed"]),
        st.sampled_from([SMALL, LARGE]),
        st.sampled_from([None, "old failure"]),
    ),
)


@settings(max_examples=200, deadline=None)
@given(start=START_STATES, request=st.sampled_from(["Create", "Update"]), wanted=st.sampled_from([SMALL, LARGE]))
def test_create_and_update_end_in_service_with_the_wanted_type(
    start: FakeApp | None, request: str, wanted: str
) -> None:
    # GIVEN any starting state WHEN Create/Update runs THEN the app ends InService with the wanted type
    fake = FakeSageMaker(start)
    drive(fake, _event(request, wanted))
    assert fake.app is not None
    assert (fake.app.status, fake.app.instance_type) == ("InService", wanted)


@settings(max_examples=100, deadline=None)
@given(start=START_STATES)
def test_delete_ends_with_no_live_app(start: FakeApp | None) -> None:
    # GIVEN any starting state WHEN Delete runs THEN the app is gone (missing or Deleted)
    fake = FakeSageMaker(start)
    drive(fake, _event("Delete", SMALL))
    assert fake.app is None or fake.app.status == "Deleted"


@settings(max_examples=50, deadline=None)
@given(start=START_STATES, wanted=st.sampled_from([SMALL, LARGE]))
def test_an_app_that_fails_to_start_fails_the_deployment_with_its_reason(start: FakeApp | None, wanted: str) -> None:
    # GIVEN SageMaker cannot start the app WHEN Create runs THEN AppFailedError carries the FailureReason,
    # unless the app already runs with the wanted type (then nothing is created at all)
    fake = FakeSageMaker(start, fail_creates=True)
    already_fine = start is not None and (start.status, start.instance_type) == ("InService", wanted)
    if already_fine:
        drive(fake, _event("Create", wanted))
        assert "create" not in fake.calls
        return
    with pytest.raises(provider.AppFailedError, match=r"CapacityError: no ml\.r5 capacity"):
        drive(fake, _event("Create", wanted))
