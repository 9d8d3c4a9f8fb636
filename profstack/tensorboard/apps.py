"""SageMaker TensorBoard app I/O shared by the app provider, the idle reaper and the CLI.

Every function takes an injected SageMaker client, so tests drive them with botocore
Stubber (moto has no apps; docs/platform-facts.md, toolchain section).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from profstack.tensorboard.names import APP_NAME, APP_TYPE

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

# DescribeApp statuses.
PENDING = "Pending"
IN_SERVICE = "InService"
DELETING = "Deleting"
DELETED = "Deleted"
FAILED = "Failed"


@dataclass(frozen=True, kw_only=True)
class AppState:
    """What DescribeApp says about one app."""

    domain_id: str
    user_profile_name: str
    app_name: str
    status: str
    instance_type: str | None
    app_arn: str | None
    creation_time: datetime | None
    last_user_activity: datetime | None
    failure_reason: str | None

    @property
    def gone(self) -> bool:
        return self.status == DELETED


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def describe_app(
    client: SageMakerClient, *, domain_id: str, user_profile_name: str, app_name: str = APP_NAME
) -> AppState | None:
    """The app's state, or None when SageMaker has no record of it."""
    try:
        response = client.describe_app(
            DomainId=domain_id, UserProfileName=user_profile_name, AppType=APP_TYPE, AppName=app_name
        )
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFound":
            return None
        raise
    return AppState(
        domain_id=domain_id,
        user_profile_name=user_profile_name,
        app_name=app_name,
        status=response.get("Status", ""),
        instance_type=response.get("ResourceSpec", {}).get("InstanceType"),
        app_arn=response.get("AppArn"),
        creation_time=response.get("CreationTime"),
        last_user_activity=response.get("LastUserActivityTimestamp"),
        failure_reason=response.get("FailureReason"),
    )


def create_app(
    client: SageMakerClient,
    *,
    domain_id: str,
    user_profile_name: str,
    instance_type: str,
    app_name: str = APP_NAME,
) -> bool:
    """Start creating the app. False when one with that name already exists (someone raced us)."""
    try:
        client.create_app(
            DomainId=domain_id,
            UserProfileName=user_profile_name,
            AppType=APP_TYPE,
            AppName=app_name,
            ResourceSpec={"InstanceType": instance_type},  # type: ignore[typeddict-item]
        )
    except ClientError as exc:
        if error_code(exc) == "ResourceInUse":
            return False
        raise
    return True


def delete_app(client: SageMakerClient, *, domain_id: str, user_profile_name: str, app_name: str = APP_NAME) -> bool:
    """Start deleting the app. False when it does not exist."""
    try:
        client.delete_app(DomainId=domain_id, UserProfileName=user_profile_name, AppType=APP_TYPE, AppName=app_name)
    except ClientError as exc:
        if error_code(exc) == "ResourceNotFound":
            return False
        raise
    return True


def list_tensorboard_apps(client: SageMakerClient, *, domain_id: str) -> Iterator[dict[str, Any]]:
    """Every TensorBoard app of the domain's user profiles, as ListApps lists it (all pages)."""
    for page in client.get_paginator("list_apps").paginate(DomainIdEquals=domain_id):
        for app in page.get("Apps", []):
            if app.get("AppType") == APP_TYPE and "UserProfileName" in app:
                yield dict(app)
