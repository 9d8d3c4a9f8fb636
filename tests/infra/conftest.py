"""One synthesized ProfStack app (example config, cdk-nag on, no bundling) per test session."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import NO_BUNDLING_CONTEXT


@dataclass(frozen=True)
class SynthesizedApp:
    stacks: Any  # stacks.profstack_app.ProfStackStacks
    templates: dict[str, dict[str, Any]]  # stack name -> template


def synthesize(config: Any, *, nag: bool = True) -> SynthesizedApp:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from stacks.profstack_app import add_security_checks, build_profstack

    app = cdk.App(context=NO_BUNDLING_CONTEXT)
    if nag:
        add_security_checks(app)
    stacks = build_profstack(app, config)
    app.synth()  # raises ValidationFailed on any unacknowledged cdk-nag finding
    templates = {stack.stack_name: Template.from_stack(stack).to_json() for stack in stacks.all()}
    return SynthesizedApp(stacks=stacks, templates=templates)


@pytest.fixture(scope="session")
def synthesized(example_config: Any) -> SynthesizedApp:
    return synthesize(example_config)
