"""The legacy audit's scoreboard on the third seeded account, as docs/migration.md publishes it.

    python -m scripts.legacy_scoreboard           # print the per-kind table
    python -m scripts.legacy_scoreboard --write   # and write it into docs/migration.md, between its markers

The account (tests/functional/legacy_third_account.py) runs on moto with fake credentials; nothing leaves the
machine. tests/functional/test_legacy_audit_third_account.py fails when the published table differs from a run.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs" / "migration.md"
MARKER = "legacy-scoreboard"


def measure() -> str:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "MOTO_IAM_LOAD_MANAGED_POLICIES": "true",
    }.items():
        os.environ[key] = value
    os.environ.pop("AWS_PROFILE", None)
    from moto import mock_aws

    from tests.functional import legacy_third_account as third

    with mock_aws():
        return third.table(third.scoreboard().rows)


def write(table: str, docs: Path = DOCS) -> bool:
    """Replace the table between the markers; True when the file changed."""
    text = docs.read_text(encoding="utf-8")
    block = re.compile(rf"(<!-- {MARKER} -->\n)(?:.*?\n)?(<!-- /{MARKER} -->)", re.DOTALL)
    if not block.search(text):
        raise SystemExit(f"{docs}: no <!-- {MARKER} --> block to write into")
    updated = block.sub(lambda m: m.group(1) + table + "\n" + m.group(2), text)
    if updated != text:
        docs.write_text(updated, encoding="utf-8")
    return updated != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help="write the table into docs/migration.md")
    args = parser.parse_args(argv)
    table = measure()
    print(table)
    if args.write:
        print(f"{DOCS}: {'updated' if write(table) else 'already up to date'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
