"""Synthesize StorageStack + TensorBoardStack for a config variant (cdk-nag on, no bundling)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk.assertions import Template

from profstack.config import ProfStackConfig, parse_config
from tests.conftest import EXAMPLE_CONFIG, NO_BUNDLING_CONTEXT


@dataclass(frozen=True)
class Synth:
    stack: Any  # TensorBoardStack
    template: Template

    def logical_id(self, construct: Any) -> str:
        cfn = construct.node.default_child if construct.node.default_child is not None else construct
        return str(self.stack.resolve(cfn.logical_id))

    def resources(self, type_: str) -> dict[str, Any]:
        found: dict[str, Any] = self.template.find_resources(type_)
        return found


def config_with(**changes: Any) -> ProfStackConfig:
    """The example config with top-level sections replaced."""
    import yaml

    data = yaml.safe_load(EXAMPLE_CONFIG.read_text())
    data.update(changes)
    return parse_config(data)


def synth_tensorboard(config: ProfStackConfig) -> Synth:
    """StorageStack + TensorBoardStack only, with both cdk-nag packs on (synth raises on a finding)."""
    import aws_cdk as cdk

    from stacks.components.python_function import log_retention
    from stacks.profstack_app import add_security_checks
    from stacks.storage_stack import StorageStack
    from stacks.tensorboard_stack import TensorBoardStack

    app = cdk.App(context=NO_BUNDLING_CONTEXT)
    add_security_checks(app)
    storage = StorageStack(
        app,
        "storage",
        retention=config.retention,
        legacy=config.legacy,
        storage=config.storage,
        name_prefix=config.prefix,
        user_tag_key=config.tensorboard.user_tag_key,
    )
    stack = TensorBoardStack(
        app,
        "tensorboard",
        domain=config.domain,
        tensorboard=config.tensorboard,
        users=config.users,
        trace_bucket=storage.trace_bucket,
        data_key=storage.data_key,
        log_retention=log_retention(config.retention.log_retention_days),
        domain_name="profstack-tensorboard",
        name_prefix=config.prefix,
    )
    app.synth()
    return Synth(stack=stack, template=Template.from_stack(stack))
