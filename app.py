#!/usr/bin/env python3
"""CDK entry point: reads the config once and builds the ProfStack stacks.

This is the only place that reads CDK context or the environment. The config path
defaults to $PROFSTACK_CONFIG, else config/profstack.yaml; override it with `npx cdk synth -c config=PATH`.

A config holding the example config's placeholders (its VPC and subnets, example.com e-mails, documentation
account ids) is refused, one line per value: `npx cdk deploy` would create the retained storage stack and then
fail on the domain. `make synth` and `make demo` synthesize the example on purpose with
`-c allow_example_values=true`, which turns the refusal into warnings.
"""

from __future__ import annotations

import sys

import aws_cdk as cdk

from profstack.config import default_config_path, load_config_reporting
from stacks.profstack_app import add_security_checks, build_profstack


def main() -> int:
    app = cdk.App()
    config_path = app.node.try_get_context("config") or str(default_config_path())
    allow = str(app.node.try_get_context("allow_example_values") or "").lower() in {"1", "true", "yes"}
    config = load_config_reporting(config_path, sys.stderr, example_values="warn" if allow else "refuse")
    if config is None:
        return 1
    add_security_checks(app)
    build_profstack(app, config)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
