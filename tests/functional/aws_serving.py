"""Serving what moto lacks, in front of moto, with every answer validated against the service model.

moto runs S3, Logs, IAM, EventBridge, Step Functions, Lambda, CloudWatch and SageMaker Pipelines; it does not know a
training job's ProfilerConfig and rule statuses, DetailedProfiler apps, composite alarms, nor S3's bucket owner
condition. These helpers answer those calls through botocore's own event hooks (the request is built and validated
as for AWS, the answer is checked against the operation's output shape, as botocore's Stubber does), so the code
under test runs unchanged against one account that mixes moto and served answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.validate import ParamValidator

Answer = Callable[[dict[str, Any]], dict[str, Any]]


def _validated(client: Any, operation: str, response: dict[str, Any]) -> dict[str, Any]:
    shape = client.meta.service_model.operation_model(operation).output_shape
    if shape is None:  # an operation that answers nothing (DeleteApp)
        assert response == {}, f"{operation} answers nothing, served {response}"
        return response
    report = ParamValidator().validate(response, shape)
    if report.has_errors():
        raise AssertionError(f"served {operation} answer does not fit the service model: {report.generate_report()}")
    return response


def serve(client: Any, operation: str, answer: Answer) -> None:
    """Answer `operation` on this client with answer(params); the request never reaches moto."""
    service = client.meta.service_model.service_id.hyphenize()

    def remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["served_params"] = dict(params)

    def respond(context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        parsed = _validated(client, operation, answer(context.get("served_params", {})))
        return AWSResponse("", 200, {}, None), {**parsed, "ResponseMetadata": {"HTTPStatusCode": 200}}

    client.meta.events.register(f"before-parameter-build.{service}.{operation}", remember)
    client.meta.events.register(f"before-call.{service}.{operation}", respond)


def add_to(client: Any, operation: str, extend: Callable[[dict[str, Any], dict[str, Any]], None]) -> None:
    """Let moto answer, then extend(parsed, params) adds what moto cannot hold (validated with the rest)."""
    service = client.meta.service_model.service_id.hyphenize()

    def remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["served_params"] = dict(params)

    def after(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        extend(parsed, context.get("served_params", {}))
        body = {k: v for k, v in parsed.items() if k != "ResponseMetadata"}
        _validated(client, operation, body)

    client.meta.events.register(f"before-parameter-build.{service}.{operation}", remember)
    client.meta.events.register(f"after-call.{service}.{operation}", after)


def refuse(client: Any, operation: str, code: str = "AccessDenied", status: int = 403) -> None:
    """Make one API answer with an error, as IAM (or a failing service) would."""
    service = client.meta.service_model.service_id.hyphenize()

    def answer(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        return AWSResponse("", status, {}, None), {
            "Error": {"Code": code, "Message": f"not authorized to perform {operation}"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }

    client.meta.events.register(f"before-call.{service}.{operation}", answer)


@dataclass
class S3Call:
    operation: str
    bucket: str | None
    expected_owner: str | None


@dataclass
class BucketOwners:
    """S3's bucket owner condition, which moto does not check: a request whose ExpectedBucketOwner is not the
    bucket's owner answers 403 AccessDenied (S3 user guide, "Verifying bucket ownership with bucket owner
    condition"). Every call is recorded, so a test can assert that each one named the owner."""

    owner_of: Callable[[str], str | None]
    calls: list[S3Call] = field(default_factory=list)
    recording: bool = True  # off while a test reads the account for itself

    def watch(self, s3: Any) -> Any:
        def remember(params: dict[str, Any], context: dict[str, Any], model: Any, **_: Any) -> None:
            call = S3Call(model.name, params.get("Bucket"), params.get("ExpectedBucketOwner"))
            if self.recording:
                self.calls.append(call)
            context["s3_call"] = call

        def check(context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
            call: S3Call | None = context.get("s3_call")
            if call is None or call.bucket is None or call.expected_owner is None:
                return None
            actual = self.owner_of(call.bucket)
            if actual is None or actual == call.expected_owner:
                return None
            return AWSResponse("", 403, {}, None), {
                "Error": {"Code": "AccessDenied", "Message": "Access Denied"},
                "ResponseMetadata": {"HTTPStatusCode": 403},
            }

        s3.meta.events.register("before-parameter-build.s3", remember)
        s3.meta.events.register("before-call.s3", check)
        return s3

    def without_owner(self) -> list[S3Call]:
        return [c for c in self.calls if c.bucket is not None and not c.expected_owner]
