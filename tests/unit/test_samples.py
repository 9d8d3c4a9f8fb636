"""The sample traces are the upstream files byte for byte, each with its licence and provenance."""

from __future__ import annotations

import hashlib

from tests.conftest import TRACES_DIR


def test_every_sample_file_matches_its_recorded_digest_and_none_is_unlisted() -> None:
    # GIVEN the digests recorded when the files were copied from their origin repositories
    listed = {}
    for line in (TRACES_DIR / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        listed[name] = digest
    # WHEN every file in the folder is hashed
    present = {
        p.relative_to(TRACES_DIR).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in TRACES_DIR.rglob("*")
        if p.is_file() and p.name not in {"SHA256SUMS", "README.md"}
    }
    # THEN each matches, and nothing was added or removed without updating the list
    assert present == listed


def test_each_origin_folder_carries_its_licence_and_the_readme_names_it() -> None:
    readme = (TRACES_DIR / "README.md").read_text()
    for folder, licence in (
        ("hta", "MIT"),
        ("kineto_tb_plugin", "BSD-3-Clause"),
        ("tracelens", "MIT"),
    ):
        assert (TRACES_DIR / folder / "LICENSE").is_file()
        row = next(line for line in readme.splitlines() if line.startswith(f"| `{folder}/`"))
        assert licence in row
        assert any(len(cell.strip()) == 40 for cell in row.split("|"))  # the origin commit


def test_total_size_stays_small_enough_for_the_repository() -> None:
    total = sum(p.stat().st_size for p in TRACES_DIR.rglob("*") if p.is_file())
    # 21.5 MB since wave 3 added HTA's other test traces (MTIA, CUPTI range profiler, a second graph capture) and
    # AMD TraceLens's (MI300X / MI210 ROCm, vLLM and SGLang with HIP graphs, H100, B200); 22.5 MB since #43 added the
    # recorded ground-truth corpus (0.2 MB)
    assert total < 24_000_000
