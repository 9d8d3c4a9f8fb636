"""cfn-lint over synthesized templates: zero errors and zero warnings.

Usage: python -m stacks.lint cdk.out
Every check ignored for ProfStack is listed in IGNORED_CHECKS with the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from cfnlint.api import ManualArgs, lint_file

# check id -> why it is safe to ignore. Keep this short; prefer fixing the template.
IGNORED_CHECKS: dict[str, str] = {
    "W3005": "CDK itself writes DependsOn next to a GetAtt (lambda.Function on its role and default policy, "
    "the custom-resource provider's waiter); the redundant edge is harmless and keeps the policy "
    "attached before the function runs.",
}


def lint_templates(paths: Iterable[Path], regions: tuple[str, ...] = ("us-east-1", "eu-west-1")) -> list[str]:
    """Return one line per cfn-lint error or warning over the given templates."""
    problems: list[str] = []
    args = ManualArgs(regions=list(regions), ignore_checks=list(IGNORED_CHECKS), include_checks=["I"])
    for path in paths:
        for match in lint_file(path, config=args):
            if match.rule.id.startswith("I"):
                continue  # informational
            problems.append(f"{path.name}:{match.linenumber}: {match.rule.id} {match.message}")
    return problems


def main(argv: list[str]) -> int:
    out_dir = Path(argv[1] if len(argv) > 1 else "cdk.out")
    templates = sorted(out_dir.glob("*.template.json"))
    if not templates:
        print(f"cfn-lint: no templates in {out_dir}", file=sys.stderr)
        return 1
    problems = lint_templates(templates)
    for line in problems:
        print(line, file=sys.stderr)
    print(f"cfn-lint: {len(templates)} templates, {len(problems)} errors/warnings")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
