"""The TensorBoard app custom resource: `on_event` starts work, `is_complete` converges.

CloudFormation cannot create TensorBoard apps (docs/platform-facts.md A1), so a
`custom_resources.Provider` drives `CreateApp`/`DeleteApp` and polls `DescribeApp`:

- Create/Update converge on "the app exists, is InService and has the wanted instance type".
  An app that already exists is adopted (idempotent). An InService app with another instance
  type is deleted and created again (replace in place, same physical id, so CloudFormation
  sends no clean-up delete that could hit the new app).
- Delete converges on "no app, or Deleted"; deleting a missing app succeeds.
- A `Failed` app becomes an error carrying SageMaker's `FailureReason`. Only the first call
  (on_event) may clear a Failed app left over from an earlier attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from profstack.tensorboard.apps import (
    DELETING,
    FAILED,
    IN_SERVICE,
    AppState,
    create_app,
    delete_app,
    describe_app,
)
from profstack.tensorboard.names import APP_NAME, APP_TYPE, DOMAIN_ID_PATTERN

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient


class AppFailedError(RuntimeError):
    """SageMaker reports the app as Failed; the message carries its FailureReason."""


class BadRequestError(ValueError):
    """The custom resource was declared with properties this provider cannot act on."""


class AppSpec(BaseModel):
    """The custom resource's properties (all strings, as CloudFormation sends them)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    domain_id: Annotated[str, Field(alias="DomainId", pattern=DOMAIN_ID_PATTERN)]
    user_profile_name: Annotated[str, Field(alias="UserProfileName", pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")]
    instance_type: Annotated[str, Field(alias="InstanceType", pattern=r"^ml\.[a-z0-9]+\.[a-z0-9]+$")]
    app_name: Annotated[str, Field(alias="AppName", min_length=1, max_length=63)] = APP_NAME

    @property
    def physical_id(self) -> str:
        return f"{self.domain_id}/{self.user_profile_name}/{APP_TYPE}/{self.app_name}"

    def describe(self, client: SageMakerClient) -> AppState | None:
        return describe_app(
            client, domain_id=self.domain_id, user_profile_name=self.user_profile_name, app_name=self.app_name
        )


@dataclass(frozen=True)
class Step:
    """The outcome of one converge step, with a line for the log."""

    done: bool
    action: str
    app: AppState | None = None


def parse_spec(properties: Mapping[str, Any] | None) -> AppSpec:
    try:
        return AppSpec.model_validate(dict(properties or {}))
    except ValidationError as exc:
        fields = ", ".join(".".join(str(p) for p in err["loc"]) for err in exc.errors())
        raise BadRequestError(f"invalid TensorBoard app properties ({fields})") from None


def _failed(spec: AppSpec, app: AppState) -> AppFailedError:
    reason = app.failure_reason or "SageMaker gave no FailureReason"
    return AppFailedError(
        f"TensorBoard app '{spec.app_name}' of user profile '{spec.user_profile_name}' "
        f"in domain {spec.domain_id} failed: {reason}"
    )


def converge_present(client: SageMakerClient, spec: AppSpec, *, first_call: bool) -> Step:
    """One step towards an InService app with the wanted instance type."""
    app = spec.describe(client)
    if app is None or app.gone:
        created = create_app(
            client,
            domain_id=spec.domain_id,
            user_profile_name=spec.user_profile_name,
            instance_type=spec.instance_type,
            app_name=spec.app_name,
        )
        return Step(False, "create" if created else "create-raced", app)
    if app.status == FAILED:
        if not first_call:
            raise _failed(spec, app)
        delete_app(client, domain_id=spec.domain_id, user_profile_name=spec.user_profile_name, app_name=spec.app_name)
        return Step(False, "delete-stale-failed", app)
    if app.status == IN_SERVICE:
        if app.instance_type == spec.instance_type:
            return Step(True, "in-service", app)
        delete_app(client, domain_id=spec.domain_id, user_profile_name=spec.user_profile_name, app_name=spec.app_name)
        return Step(False, "replace-instance-type", app)
    return Step(False, f"wait-{app.status.lower()}", app)  # Pending or Deleting


def converge_absent(client: SageMakerClient, spec: AppSpec, *, first_call: bool) -> Step:
    """One step towards no app (or a Deleted one)."""
    app = spec.describe(client)
    if app is None or app.gone:
        return Step(True, "absent", app)
    if app.status == DELETING:
        return Step(False, "wait-deleting", app)
    if app.status == FAILED and not first_call:
        raise _failed(spec, app)  # a deletion we started has failed
    if app.status in {IN_SERVICE, FAILED}:
        deleted = delete_app(
            client, domain_id=spec.domain_id, user_profile_name=spec.user_profile_name, app_name=spec.app_name
        )
        return Step(not deleted, "delete" if deleted else "absent", app)
    return Step(False, f"wait-{app.status.lower()}", app)  # Pending: DeleteApp needs a settled app


def _spec_for(event: Mapping[str, Any], managed_domain_id: str) -> AppSpec | None:
    """The spec to act on; None for a Delete this provider must not (or cannot) act on."""
    request = event.get("RequestType")
    try:
        spec = parse_spec(event.get("ResourceProperties"))
    except BadRequestError:
        if request == "Delete":
            return None  # never block a rollback over properties that never created anything
        raise
    if spec.domain_id != managed_domain_id:
        if request == "Delete":
            return None  # an app of another domain: our IAM policy could not touch it anyway
        raise BadRequestError(f"DomainId {spec.domain_id} is not the managed domain {managed_domain_id}")
    return spec


def on_event(event: Mapping[str, Any], client: SageMakerClient, *, managed_domain_id: str) -> dict[str, Any]:
    """Provider `onEvent`: validate, take the first step, name the physical resource."""
    request = event.get("RequestType")
    if request not in {"Create", "Update", "Delete"}:
        raise BadRequestError(f"unknown RequestType {request!r}")
    spec = _spec_for(event, managed_domain_id)
    if spec is None:
        return {"PhysicalResourceId": event.get("PhysicalResourceId", "none"), "Data": {"Action": "skip"}}
    if request == "Delete":
        step = converge_absent(client, spec, first_call=True)
        # Keep CloudFormation's id: on a clean-up delete after a rename it names the old app.
        physical_id = str(event.get("PhysicalResourceId") or spec.physical_id)
    else:
        step = converge_present(client, spec, first_call=True)
        physical_id = spec.physical_id  # a new id (user renamed) makes CloudFormation delete the old app
    return {"PhysicalResourceId": physical_id, "Data": {"Action": step.action}}


def is_complete(event: Mapping[str, Any], client: SageMakerClient, *, managed_domain_id: str) -> dict[str, Any]:
    """Provider `isComplete`: one more step; done when the app reached the wanted state."""
    spec = _spec_for(event, managed_domain_id)
    if spec is None:
        return {"IsComplete": True}
    if event.get("RequestType") == "Delete":
        step = converge_absent(client, spec, first_call=False)
        return {"IsComplete": step.done}
    step = converge_present(client, spec, first_call=False)
    if not step.done:
        return {"IsComplete": False}
    arn = step.app.app_arn if step.app is not None else None
    return {"IsComplete": True, "Data": {"AppArn": arn or "", "AppName": spec.app_name}}
