"""The one implementation of the provider's two Lambda entry points (on_event.py, is_complete.py):
structured logging and the SageMaker client around one provider step; the logic is in provider.py."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from lambdas.common import clients
from lambdas.tensorboard_app.env import ProviderEnv

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

logger = Logger()

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


class ProviderStep(Protocol):
    def __call__(
        self, event: Mapping[str, Any], client: SageMakerClient, *, managed_domain_id: str
    ) -> dict[str, Any]: ...


def entry_point(step: ProviderStep, env: ProviderEnv) -> Handler:
    """A Lambda handler running `step` (provider.on_event or provider.is_complete) on the managed domain."""
    name = getattr(step, "__name__", "step")

    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        logger.append_keys(
            request_type=event.get("RequestType"),
            physical_id=event.get("PhysicalResourceId"),
            user_profile=(event.get("ResourceProperties") or {}).get("UserProfileName"),
        )
        result = step(event, clients.sagemaker(), managed_domain_id=env.domain_id)
        logger.info(name, extra={"result": result})
        return result

    return handler
