"""Regenerate docs/security.md's tenant tables from the synthesized templates (tests/infra/security_matrix.py).

    python -m scripts.security_table            # exit 1 and say so when the doc is out of date
    python -m scripts.security_table --write    # rewrite the block between the markers

Synthesizes the example config (cdk-nag on) like the tests do; needs the CDK environment of CONTRIBUTING.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "security.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the tables in docs/security.md")
    args = parser.parse_args(argv)

    from profstack.config import load_config
    from tests.conftest import EXAMPLE_CONFIG
    from tests.infra.conftest import synthesize
    from tests.infra.security_matrix import current_block, render, replace_block

    config = load_config(EXAMPLE_CONFIG)
    block = render(synthesize(config).templates, config)
    document = DOC.read_text()
    if args.write:
        DOC.write_text(replace_block(document, block))
        print(f"wrote the tenant tables into {DOC}")
        return 0
    if current_block(document) != block:
        print(
            f"{DOC}: the tenant tables are out of date: run python -m scripts.security_table --write", file=sys.stderr
        )
        return 1
    print(f"{DOC}: the tenant tables match the templates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
