"""botocore Stubber helpers for SageMaker apps (moto has no apps; docs/platform-facts.md, toolchain)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
from botocore.stub import Stubber

DOMAIN = "d-abcdef123456"
REGION = "us-east-1"
ACCOUNT = "123456789012"
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def sagemaker_client() -> Any:
    return boto3.client("sagemaker", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")


def app_key(user: str, app_name: str = "default") -> dict[str, str]:
    return {"DomainId": DOMAIN, "UserProfileName": user, "AppType": "TensorBoard", "AppName": app_name}


def described(
    user: str,
    status: str,
    *,
    instance_type: str = "ml.r5.large",
    failure_reason: str | None = None,
    last_activity: datetime | None = None,
    created: datetime | None = T0,
) -> dict[str, Any]:
    response: dict[str, Any] = {
        **app_key(user),
        "AppArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:app/{DOMAIN}/{user}/tensorboard/default",
        "Status": status,
        "ResourceSpec": {"InstanceType": instance_type},
    }
    if created is not None:
        response["CreationTime"] = created
    if failure_reason is not None:
        response["FailureReason"] = failure_reason
    if last_activity is not None:
        response["LastUserActivityTimestamp"] = last_activity
    return response


def expect_describe(stubber: Stubber, user: str, response: dict[str, Any] | None) -> None:
    if response is None:
        stubber.add_client_error(
            "describe_app",
            service_error_code="ResourceNotFound",
            service_message="App does not exist",
            http_status_code=400,
            expected_params=app_key(user),
        )
    else:
        stubber.add_response("describe_app", response, app_key(user))


def expect_create(stubber: Stubber, user: str, instance_type: str, *, error: str | None = None) -> None:
    params = {**app_key(user), "ResourceSpec": {"InstanceType": instance_type}}
    if error:
        stubber.add_client_error("create_app", service_error_code=error, http_status_code=400, expected_params=params)
    else:
        stubber.add_response("create_app", {"AppArn": described(user, "Pending")["AppArn"]}, params)


def expect_delete(stubber: Stubber, user: str, *, error: str | None = None) -> None:
    if error:
        stubber.add_client_error(
            "delete_app", service_error_code=error, http_status_code=400, expected_params=app_key(user)
        )
    else:
        stubber.add_response("delete_app", {}, app_key(user))
