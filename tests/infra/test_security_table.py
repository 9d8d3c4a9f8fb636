"""docs/security.md's tenant tables are what the IAM evaluator derives from the synthesized templates (issue 42,
"Keep proving it"): a new role, prefix or action that changes who may do what changes the tables, and this test
fails until the doc says so (python -m scripts.security_table --write)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.infra.conftest import SynthesizedApp
from tests.infra.security_matrix import (
    END,
    START,
    current_block,
    family_actions,
    family_of,
    object_actions,
    render,
    replace_block,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


@pytest.fixture(scope="module")
def block(synthesized: SynthesizedApp, example_config: Any) -> str:
    return render(synthesized.templates, example_config)


def test_the_doc_tables_are_the_evaluated_ones(block: str) -> None:
    # GIVEN the tables derived from the example config's templates THEN the doc holds exactly them
    assert current_block(DOC.read_text()) == block, "run: python -m scripts.security_table --write"


def test_the_tables_say_what_isolation_means(block: str) -> None:
    rows = {tuple(cell.strip() for cell in line.strip("|").split("|")[:2]): line for line in block.splitlines()}
    # GIVEN the derived data table THEN alice's role reads her traces and nothing of bob's, the pipeline everything
    alice_own = rows[("alice's execution role", "`traces/alice/`")]
    alice_bob = rows[("alice's execution role", "`traces/bob/`")]
    assert "| yes |" in alice_own
    assert "yes" not in alice_bob
    assert "some" not in alice_bob
    admin = rows[("an administrator", "`reports/bob/`")]
    assert "yes" not in admin
    pipeline = rows[("the pipeline roles (`/profstack/processing/`)", "`reports/bob/`")]
    assert "no" not in pipeline.split("|", 3)[3]


def test_every_object_action_of_s3_is_in_exactly_one_family() -> None:
    # GIVEN S3's action list THEN each object action falls in one family (a new verb fails here until placed)
    actions = object_actions()
    assert len(actions) >= 30
    assert {
        "s3:ReplicateObject",
        "s3:AbortMultipartUpload",
        "s3:ListMultipartUploadParts",
        "s3:PutObjectLegalHold",
    } <= set(actions)
    for action in actions:
        family_of(action)
    assert sum(len(a) for a in family_actions().values()) == len(actions)
    with pytest.raises(ValueError, match="families"):
        family_of("s3:SomeFutureObjectVerb")


def test_the_block_is_replaced_between_its_markers_only() -> None:
    document = f"before\n{START}\nold\n{END}\nafter\n"
    new = f"{START}\nnew\n{END}\n"
    assert replace_block(document, new) == f"before\n{START}\nnew\n{END}\nafter\n"
    assert current_block(replace_block(document, new)) == new
