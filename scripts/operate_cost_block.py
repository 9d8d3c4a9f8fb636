"""Rewrite the cost block of docs/operate.md (between `<!-- cost:start -->` and `<!-- cost:end -->`) with what
`profstack cost` prints for the example config and its default assumptions. tests/infra/test_operate.py checks
that the two agree: `python -m scripts.operate_cost_block` after changing prices.json or the cost model."""

from __future__ import annotations

from pathlib import Path

from profstack.config import load_config
from profstack.deploy_cost import Assumptions, estimate, format_text

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "operate.md"
START, END = "<!-- cost:start -->\n", "<!-- cost:end -->"


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    block = (
        "```text\n" + format_text(estimate(load_config(ROOT / "config" / "profstack.yaml"), Assumptions())) + "```\n"
    )
    DOC.write_text(head + START + block + END + tail, encoding="utf-8")
    print(f"wrote the cost block of {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
