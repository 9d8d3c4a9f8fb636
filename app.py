#!/usr/bin/env python3
"""CDK entry point: reads the config once and builds the ProfStack stacks.

This is the only place that reads CDK context or the environment. The config path
defaults to config/profstack.yaml; override it with `npx cdk synth -c config=PATH`.
"""

from __future__ import annotations

import sys

import aws_cdk as cdk

from profstack.config import DEFAULT_CONFIG_PATH, load_config_reporting
from stacks.profstack_app import add_security_checks, build_profstack


def main() -> int:
    app = cdk.App()
    config_path = app.node.try_get_context("config") or str(DEFAULT_CONFIG_PATH)
    config = load_config_reporting(config_path, sys.stderr)
    if config is None:
        return 1
    add_security_checks(app)
    build_profstack(app, config)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
