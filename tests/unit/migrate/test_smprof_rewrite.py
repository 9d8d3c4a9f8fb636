"""smprof -> torch.profiler codemod (LibCST): every form, safety, idempotency, ruff-clean output, the CLI."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profstack.cli import main
from profstack.migrate.scan import remaining_uses
from profstack.migrate.smprof import RewriteError, rewrite_source

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "smprof"
SCRIPTS = sorted((FIXTURES / "scripts").glob("*.py"))
LAUNCHERS = sorted((FIXTURES / "launchers").glob("*.py"))


def _rewrite(text: str) -> str:
    return rewrite_source(textwrap.dedent(text)).source


def _imported(source: str) -> set[str]:
    tree = ast.parse(source)
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return names | {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_every_corpus_script_is_converted_whole(script: Path) -> None:
    # GIVEN a realistic smprof script WHEN rewritten
    result = rewrite_source(script.read_text(), filename=str(script))
    # THEN nothing of smprof/smppy is left, nothing needs review, and the text still parses
    assert result.changed
    assert result.manual == []
    assert remaining_uses(result.source) == []
    assert not {"smprof", "smppy"} & _imported(result.source)
    assert "torch.profiler" in _imported(result.source)
    # AND the comments it inserts never name the old package (a CI grep must not flag converted files)
    original = script.read_text()
    for line in result.source.splitlines():
        comment = line[line.index("#") :] if "#" in line else ""
        if comment and comment not in original:  # written by the codemod, not the user's own comment
            assert "smprof" not in line.lower()
            assert "smppy" not in line.lower()


@pytest.mark.parametrize("path", SCRIPTS + LAUNCHERS, ids=lambda p: p.stem)
def test_a_second_run_changes_nothing(path: Path) -> None:
    once = rewrite_source(path.read_text()).source
    again = rewrite_source(once)
    assert not again.changed
    assert again.source == once
    assert again.manual == [] or all(f.line == 0 for f in again.manual)


def test_converted_corpus_passes_ruff_errors_and_pyflakes(tmp_path: Path) -> None:
    # GIVEN every converted script and launcher in one folder (the fixtures themselves are ruff-clean)
    for path in SCRIPTS + LAUNCHERS:
        (tmp_path / path.name).write_text(rewrite_source(path.read_text()).source)
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    # WHEN ruff checks E and F with its defaults (88 columns), not this project's config
    run = subprocess.run(
        [ruff, "check", "--isolated", "--select", "E,F", "--output-format", "concise", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    # THEN it finds nothing: no `x = ...; x.__enter__()` one-liners, no long lines, no unused imports
    assert run.returncode == 0, run.stdout


def test_documented_script_maps_each_call() -> None:
    source = rewrite_source((FIXTURES / "scripts" / "01_docs_fallback.py").read_text()).source
    assert "SMProf = torch.profiler.profile(" in source
    assert "schedule=torch.profiler.schedule(" in source
    assert "torch.profiler.tensorboard_trace_handler(" in source
    assert '"PROFSTACK_TRACE_DIR", "/opt/ml/output/tensorboard"' in source
    assert "SMProf.start()  # begin" in source  # the trailing comment stays
    assert "SMProf.stop()" in source
    assert "        SMProf.step()\n    SMProf.stop()" in source  # once per step, at the end of the loop
    assert 'with torch.profiler.record_function("step_" + str(step)):' in source
    assert '            with torch.profiler.record_function("forward"):\n                loss =' in source
    # the try/except fallback became one import, its comment kept
    assert "# backward-compatibility for TF 2.11 and PT 1.13.1 images\nimport os\nimport torch.profiler\n" in source
    assert "__enter__" not in source


def test_from_imports_with_aliases_and_handles() -> None:
    source = rewrite_source((FIXTURES / "scripts" / "03_from_import_handles.py").read_text()).source
    assert "prof = torch.profiler.profile(" in source
    assert 'with torch.profiler.record_function("forward"):' in source  # handle used only to end: a block
    assert 'with torch.profiler.record_function("backward"):  # gradients' in source
    assert "from smprof" not in source


def test_begin_with_ends_in_both_branches_becomes_enter_and_exits() -> None:
    source = rewrite_source((FIXTURES / "scripts" / "04_class_trainer.py").read_text()).source
    assert '_prof_range_1 = torch.profiler.record_function("step")\n' in source
    assert "            _prof_range_1.__enter__()\n" in source
    assert source.count("_prof_range_1.__exit__(None, None, None)") == 2
    assert "self.prof.step()" in source


def test_handle_travelling_between_functions() -> None:
    source = rewrite_source((FIXTURES / "scripts" / "08_handle_across_functions.py").read_text()).source
    assert 'return torch.profiler.record_function(f"step_{step}").__enter__()' in source
    assert "    handle.__exit__(None, None, None)" in source


def test_decorators_and_inline_singleton() -> None:
    alias = rewrite_source((FIXTURES / "scripts" / "02_alias_decorator.py").read_text()).source
    assert '@torch.profiler.record_function("forward")' in alias
    assert '@torch.profiler.record_function("optimizer_step")' in alias  # bare @annotate: the function's name
    assert "            optimizer_step(optimizer)\n            profiler.step()" in alias  # the batch loop, not epochs
    inline = rewrite_source((FIXTURES / "scripts" / "05_inline_singleton.py").read_text()).source
    assert "import os  # noqa: E401\nimport torch.profiler\nimport torch\n\n_profiler = torch.profiler.profile(" in (
        inline
    )
    assert "    _profiler.start()\n" in inline
    assert "        _profiler.step()\n    _profiler.stop()" in inline


def test_removed_sole_statement_keeps_the_block_valid() -> None:
    # GIVEN configure() as the only statement of an if-block
    source = rewrite_source((FIXTURES / "scripts" / "06_while_loop_config.py").read_text()).source
    # THEN the block holds `pass`, and the module still parses
    assert "    if not args.no_profile:\n        pass\n" in source
    assert "# collect CUDA kernels" in source  # a removed line's comment is kept
    ast.parse(source)


def test_what_cannot_be_converted_is_left_alone_and_reported() -> None:
    # GIVEN a label opened in one function and closed in another, and an unknown API
    path = FIXTURES / "unsafe" / "label_across_functions.py"
    result = rewrite_source(path.read_text(), filename=str(path))
    # THEN the file is untouched and each blocking line is reported
    assert not result.changed
    assert result.source == path.read_text()
    lines = {f.line: f.message for f in result.manual}
    assert 'annotation_begin("step") is never ended in this function' in lines[10]
    assert 'annotation_end("step") has no matching annotation_begin' in lines[14]
    assert "smprof.set_metadata" in lines[15]
    assert lines[4] == "imports smprof"  # the check gate still sees the import


@pytest.mark.parametrize(
    ("snippet", "why"),
    [
        ("import smprof\nsmprof.annotation_end('x')\n", "has no matching annotation_begin"),
        ("from smprof import *\n", "import *"),
        ("from smprof import record\n", "`record` has no torch.profiler mapping"),
        (
            "import smprof\nfor i in range(3):\n    smprof.annotation_begin('x')\nsmprof.annotation_end('x')\n",
            "not inside",
        ),
        ("import smprof\nP = smprof.SMProfiler.instance()\nP.get_profile()\n", "P.get_profile"),
        ("import smprof\nP = smprof.SMProfiler.instance()\nfoo(P)\n", "`P` is used"),
        ("import smprof\nwith smprof.annotate('x', color='red'):\n    pass\n", "annotate(...)"),
    ],
)
def test_unsafe_forms_block_the_file(snippet: str, why: str) -> None:
    result = rewrite_source(snippet)
    assert not result.changed
    assert any(why in f.message for f in result.manual), result.manual


def test_crossing_ranges_in_one_block_use_enter_and_exit() -> None:
    # GIVEN begin a, begin b, end a, end b: not nestable as with-blocks
    source = _rewrite(
        """
        import smprof
        smprof.annotation_begin("a")
        x = 1
        smprof.annotation_begin("b")
        y = 2
        smprof.annotation_end("a")
        z = 3
        smprof.annotation_end("b")
        """
    )
    assert "__enter__()" in source
    assert source.count(".__exit__(None, None, None)") >= 1
    compiled = compile(source.replace("import torch.profiler\n", ""), "<t>", "exec")
    assert compiled is not None


def test_launcher_v2_profiler_removed_tensorboard_and_tag_added() -> None:
    result = rewrite_source((FIXTURES / "launchers" / "launch_v2.py").read_text())
    source = result.source
    assert "ProfilerConfig" not in source
    assert "ProfilerRule" not in source
    assert "FrameworkProfile" not in source
    assert "profiler_config=" not in source
    assert "Rule.sagemaker(rule_configs.vanishing_gradient())" in source  # a Debugger rule stays
    assert "disable_profiler=True" in source
    assert "tensorboard_output_config=TensorBoardOutputConfig(" in source
    assert 'container_local_output_path="/opt/ml/output/tensorboard"' in source
    assert '{"Key": "team", "Value": "vision"},\n        {"Key": "profstack:user", "Value": PROFSTACK_USER},' in source
    assert "from sagemaker.debugger import TensorBoardOutputConfig" in source
    assert remaining_uses(source) == []


def test_launcher_v3_and_boto3() -> None:
    v3 = rewrite_source((FIXTURES / "launchers" / "launch_v3.py").read_text()).source
    assert "tensor_board_output_config=TensorBoardOutputConfig(" in v3
    assert 'local_path="/opt/ml/output/tensorboard"' in v3
    assert 'tags=[Tag(key="profstack:user", value=PROFSTACK_USER)]' in v3
    assert "from sagemaker.core.shapes import Tag" in v3
    assert "profiler_rule_configurations" not in v3
    boto = rewrite_source((FIXTURES / "launchers" / "launch_boto3.py").read_text()).source
    assert '"S3OutputPath": PROFSTACK_TENSORBOARD_URI' in boto
    assert "ProfilerConfig=" not in boto
    assert "ProfilerRuleConfigurations" not in boto
    assert remaining_uses(v3) == remaining_uses(boto) == []


def test_launcher_with_known_user_and_bucket_and_without_tensorboard() -> None:
    from profstack.migrate.launcher import LauncherOptions

    text = (FIXTURES / "launchers" / "launch_v2.py").read_text()
    named = rewrite_source(text, launcher=LauncherOptions(user="alice", trace_bucket="traces-1")).source
    assert 'PROFSTACK_TENSORBOARD_URI = "s3://traces-1/tensorboard/alice/"' in named
    assert "import os" not in named
    bare = rewrite_source(text, launcher=LauncherOptions(tensorboard=False)).source
    assert "TensorBoardOutputConfig" not in bare
    assert "profstack:user" not in bare
    assert "ProfilerConfig" not in bare


def test_launcher_with_tags_in_a_variable_is_reported() -> None:
    result = rewrite_source(
        "from sagemaker.debugger import ProfilerConfig\nfrom sagemaker.pytorch import PyTorch\n"
        "TAGS = []\nest = PyTorch(entry_point='t.py', profiler_config=ProfilerConfig(), tags=TAGS)\n"
    )
    assert result.changed
    assert any("tags are not a list literal" in f.message and f.line == 4 for f in result.manual)


def test_script_without_profiler_is_untouched() -> None:
    source = "import torch\nprint(torch.__version__)\n"
    result = rewrite_source(source)
    assert not result.changed
    assert result.source == source
    assert result.manual == []


def test_unparsable_script_is_an_error_not_a_rewrite() -> None:
    with pytest.raises(RewriteError, match=r"train.py:1: cannot parse"):
        rewrite_source("def broken(:\n", filename="train.py")


def test_cli_diff_check_and_write_over_a_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # GIVEN the whole corpus, an unparsable file and a file that cannot be converted among them
    tree = tmp_path / "repo"
    shutil.copytree(FIXTURES, tree)
    (tree / "unsafe" / "broken_syntax.py.txt").rename(tree / "unsafe" / "broken_syntax.py")
    before = {p: p.read_text() for p in tree.rglob("*") if p.is_file()}
    # WHEN diffed THEN nothing changes on disk and stdout holds unified diffs
    assert main(["migrate", "smprof", str(tree)]) == 1  # one file could not be parsed
    out = capsys.readouterr()
    assert "--- a/" in out.out
    assert all(p.read_text() == text for p, text in before.items())
    assert "broken_syntax.py:3: cannot parse" in out.err
    # WHEN checked THEN non-zero
    assert main(["migrate", "smprof", "--check", str(tree)]) == 1
    # WHEN written THEN every other file is processed despite the broken one
    assert main(["migrate", "smprof", "--write", str(tree)]) == 1
    err = capsys.readouterr().err
    assert "rewrote 15 file(s)" in err
    assert (tree / "unsafe" / "broken_syntax.py").read_text() == before[tree / "unsafe" / "broken_syntax.py"]
    assert "torch.profiler.profile(" in (tree / "scripts" / "01_docs_fallback.py").read_text()
    # AND --check still fails: the unconvertible file keeps using smprof (no false all-clear)
    (tree / "unsafe" / "broken_syntax.py").unlink()
    assert main(["migrate", "smprof", "--check", str(tree)]) == 1
    assert "label_across_functions.py:4: needs review: imports smprof" in capsys.readouterr().err
    # AND once that file is gone, the converted tree passes --check except the reported dependency lines
    (tree / "unsafe" / "label_across_functions.py").unlink()
    assert main(["migrate", "smprof", "--check", str(tree / "scripts"), str(tree / "launchers")]) == 0


def test_cli_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "smprof", str(tmp_path / "missing.py")]) == 2
    assert capsys.readouterr().err.strip() == f"profstack: error: {tmp_path / 'missing.py'}: no such file or directory"
    assert main(["migrate", "smprof", "--user", "../x", str(tmp_path)]) == 2
    assert "cannot be used in an S3 key" in capsys.readouterr().err
