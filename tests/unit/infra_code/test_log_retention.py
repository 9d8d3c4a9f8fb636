"""The one converter from a config's log-retention days to CDK's RetentionDays."""

from __future__ import annotations

import pytest

from profstack.config import LOG_RETENTION_DAYS
from stacks.components.python_function import log_retention
from tests.conftest import NO_BUNDLING_CONTEXT


def test_every_allowed_retention_synthesizes_as_that_many_days() -> None:
    # GIVEN one log group per retention value the config accepts
    import aws_cdk as cdk
    from aws_cdk import aws_logs as logs
    from aws_cdk.assertions import Template

    app = cdk.App(context=NO_BUNDLING_CONTEXT)
    stack = cdk.Stack(app, "Retention")
    for days in LOG_RETENTION_DAYS:
        logs.LogGroup(stack, f"Days{days}", retention=log_retention(days))
    # WHEN synthesized THEN each group keeps its logs exactly the configured number of days
    groups = Template.from_stack(stack).find_resources("AWS::Logs::LogGroup")
    assert sorted(g["Properties"]["RetentionInDays"] for g in groups.values()) == sorted(LOG_RETENTION_DAYS)


def test_a_value_the_config_rejects_has_no_retention() -> None:
    with pytest.raises(KeyError):
        log_retention(2)
