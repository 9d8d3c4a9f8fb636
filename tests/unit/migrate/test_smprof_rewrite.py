"""smprof -> torch.profiler rewriting: mappings, findings, safety and the CLI."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from profstack.cli import main
from profstack.migrate.smprof import RewriteError, rewrite_source

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "smprof" / "train_smprof.py"


def _rewrite(text: str) -> str:
    return rewrite_source(textwrap.dedent(text)).source


def test_documented_smprof_script_is_fully_rewritten() -> None:
    # GIVEN the script shape the SageMaker Profiler docs show
    result = rewrite_source(FIXTURE.read_text())
    # THEN no smprof/smppy reference is left, the result parses, and every call was mapped
    assert result.changed
    tree = ast.parse(result.source)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not names & {"smprof", "smppy"}
    assert imported == {"os", "torch", "torch.profiler"}
    assert "SMProf = torch.profiler.profile(" in result.source
    assert "SMProf.start()  # begin" in result.source  # trailing comment kept
    assert "SMProf.stop()" in result.source
    assert 'with torch.profiler.record_function("step_" + str(step)):' in result.source
    assert '_profstack_range_1 = torch.profiler.record_function("forward"); _profstack_range_1.__enter__()' in (
        result.source
    )
    assert "_profstack_range_1.__exit__(None, None, None)" in result.source
    assert result.source.count("import os\n") == 1
    assert len(result.edits) == 10
    assert [f.message for f in result.manual] == [
        "consider torch.profiler.schedule(wait=1, warmup=1, active=3) and calling SMProf.step() once per "
        "training step to bound trace size"
    ]


def test_rewrite_is_idempotent() -> None:
    once = rewrite_source(FIXTURE.read_text()).source
    again = rewrite_source(once)
    assert not again.changed
    assert again.source == once


def test_removed_sole_statement_keeps_the_block_valid() -> None:
    # GIVEN configure() as the only statement of an if-block
    source = _rewrite(
        """
        import smprof
        P = smprof.SMProfiler.instance()
        cfg = smprof.Config()
        if True:
            P.configure(cfg)
        """
    )
    # THEN the block holds `pass` with the explanation, and the module still parses
    assert "    pass  # profstack-migrate: removed SMProfiler.configure(...)" in source
    ast.parse(source)


def test_unmapped_uses_are_reported_not_guessed() -> None:
    result = rewrite_source(
        textwrap.dedent(
            """
            import smprof
            smprof.some_future_api(1)
            smprof.annotation_end("never-begun")
            from smppy import annotate
            """
        )
    )
    messages = [f.message for f in result.manual]
    assert any("smprof.some_future_api" in m for m in messages)
    assert any('annotation_end("never-begun") has no matching annotation_begin' in m for m in messages)
    assert any("from smppy import ..." in m for m in messages)
    assert 'smprof.annotation_end("never-begun")' in result.source  # left as it was


def test_launcher_profiler_config_gets_guidance() -> None:
    result = rewrite_source(
        "from sagemaker import ProfilerConfig, Profiler\n"
        "est = PyTorch(entry_point='t.py', profiler_config=ProfilerConfig(profile_params=Profiler()))\n"
    )
    assert not result.changed
    assert any("TensorBoardOutputConfig" in f.message and f.line == 2 for f in result.manual)


def test_script_without_smprof_is_untouched() -> None:
    source = "import torch\nprint(torch.__version__)\n"
    result = rewrite_source(source)
    assert not result.changed
    assert result.source == source
    assert result.manual == []


def test_unparsable_script_is_an_error_not_a_rewrite() -> None:
    with pytest.raises(RewriteError, match=r"train.py:1: cannot parse"):
        rewrite_source("def broken(:\n", filename="train.py")


def test_cli_diff_check_and_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN a copy of the fixture
    script = tmp_path / "train.py"
    script.write_text(FIXTURE.read_text())
    # WHEN diffed THEN the file is untouched and stdout holds a unified diff
    assert main(["migrate", "smprof", str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert out.out.startswith(f"--- a/{script}")
    assert script.read_text() == FIXTURE.read_text()
    # WHEN checked THEN exit 1 (still uses smprof)
    assert main(["migrate", "smprof", "--check", str(script)]) == 1
    # WHEN written THEN the file is rewritten
    assert main(["migrate", "smprof", "--write", str(script)]) == 0
    assert "torch.profiler.profile(" in script.read_text()
    assert "rewrote 1 file(s)" in capsys.readouterr().err


def test_cli_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "smprof", str(tmp_path / "missing.py")]) == 2
    assert capsys.readouterr().err.strip() == f"profstack: error: {tmp_path / 'missing.py'}: no such file or directory"
    bad = tmp_path / "bad.py"
    bad.write_text("def broken(:\n")
    assert main(["migrate", "smprof", str(bad)]) == 2
    assert capsys.readouterr().err.strip().startswith(f"profstack: error: {bad}:1: cannot parse")
