"""Print what `cdk deploy` would create, from the synthesized cloud assembly.

Usage: python -m stacks.plan [cdk.out] [--config PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from profstack import layout
from profstack.config import DEFAULT_CONFIG_PATH, ConfigError, ProfStackConfig, load_config


def _templates(cdk_out: Path) -> dict[str, dict[str, Any]]:
    manifest = json.loads((cdk_out / "manifest.json").read_text())
    found: dict[str, dict[str, Any]] = {}
    for name, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") == "aws:cloudformation:stack":
            template_file = artifact["properties"]["templateFile"]
            found[name] = json.loads((cdk_out / template_file).read_text())
    return found


def describe_deployment(cdk_out: Path, config: ProfStackConfig) -> str:
    lines: list[str] = []
    templates = _templates(cdk_out)
    env = config.environment
    target = f"{env.account}/{env.region}" if env.account else "env-agnostic (account/region from your credentials)"
    lines.append(f"ProfStack '{config.prefix}' -> {target}")
    lines.append("")
    lines.append(f"Stacks ({len(templates)}):")
    for name, template in templates.items():
        resources = template.get("Resources", {})
        counts = Counter(str(r["Type"]) for r in resources.values() if r["Type"] != "AWS::CDK::Metadata")
        lines.append(f"  {name}: {sum(counts.values())} resources")
        for type_, count in sorted(counts.items()):
            lines.append(f"      {count:3d}  {type_}")
    lines.append("")
    domain = config.domain
    if domain.mode == "create":
        lines.append(
            f"SageMaker domain: create in {domain.vpc_id} ({len(domain.subnet_ids)} subnets, {domain.network_access})"
        )
    else:
        lines.append(f"SageMaker domain: import {domain.domain_id}")
    lines.append(f"Users ({len(config.users)}):")
    for user in config.users:
        instance = user.tensorboard_instance_type or config.tensorboard.default_instance_type
        lines.append(f"  {user.name:<16} {user.email:<32} TensorBoard on {instance}")
    lines.append("")
    lines.append("S3 layout of the trace bucket:")
    example_user = config.users[0].name if config.users else "<user>"
    for prefix, what in (
        (layout.job_traces_prefix(example_user, "JOB"), "raw torch.profiler traces (*.pt.trace.json[.gz])"),
        (layout.job_tensorboard_prefix(example_user, "JOB"), "TensorBoard logs (TensorBoardOutputConfig)"),
        (layout.job_reports_prefix(example_user, "JOB"), "summary.json, report.html, perfetto/"),
    ):
        lines.append(f"  {prefix:<32} {what}")
    raw = config.retention.raw_traces
    lines.append(
        f"Lifecycle: traces IA@{raw.infrequent_access_after_days}d, Glacier IR@{raw.glacier_ir_after_days}d, "
        f"expire@{raw.expire_after_days}d; reports expire@{config.retention.reports_expire_after_days}d; "
        f"legacy rule-output (tag {'='.join(layout.LEGACY_RULE_OUTPUT_TAG)}) expire@"
        f"{config.legacy.rule_output_expire_after_days}d"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stacks.plan")
    parser.add_argument("cdk_out", nargs="?", default="cdk.out", type=Path)
    parser.add_argument("--config", default=str(DEFAULT_CONFIG_PATH))
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"profstack: invalid config: {exc}", file=sys.stderr)
        return 1
    if not (args.cdk_out / "manifest.json").exists():
        print(f"profstack: {args.cdk_out} holds no cloud assembly; run `make synth` first", file=sys.stderr)
        return 1
    print(describe_deployment(args.cdk_out, config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
