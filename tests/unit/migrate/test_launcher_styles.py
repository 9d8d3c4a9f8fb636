"""Launcher styles issue 35 found refused, now converted (item 2), and the ones still refused.

The launcher corpus (tests/fixtures/launcher_corpus/) is run before and after conversion against
stub SageMaker/boto3 modules (launcher_stubs), so each test sees the keywords every launcher call
really receives, and Python itself rejects a keyword passed twice.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from profstack.migrate.scan import remaining_uses
from profstack.migrate.smprof import rewrite_source
from tests.unit.migrate.launcher_stubs import run_launcher

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "launcher_corpus"
CONVERTED = sorted((CORPUS / "converted").glob("*.py"))
REFUSED = sorted((CORPUS / "refused").glob("*.py"))

LAUNCHERS = ("PyTorch", "HuggingFace", "TensorFlow", "ModelTrainer", "create_training_job", "update_training_job")
SDK_V2 = ("PyTorch", "HuggingFace", "TensorFlow")
PROFILER = {"profiler_config", "profiler_rule_configurations", "ProfilerConfig", "ProfilerRuleConfigurations"}
ADDED = {"disable_profiler", "tensorboard_output_config", "TensorBoardOutputConfig"}

#: why each refused launcher is refused: the line and what the report must tell the user
REASONS = {
    "r01_kwargs_from_caller": (12, "`**overrides`", "build it as a dict literal"),
    "r02_dict_passed_to_helper": (11, "`settings` holds profiler_config", "passed to a function"),
    "r03_profiler_to_wrapper": (9, "`build_estimator(...)`", "cannot prove"),
    "r04_popped_value_used": (11, "profiler_config is read here", "change this line"),
    "r06_rebound_dict": (8, "bound to a name more than once", "bind it once"),
}


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _tags(kwargs: dict[str, Any]) -> str:
    return str(kwargs.get("tags", kwargs.get("Tags", "")))


@pytest.mark.parametrize("path", CONVERTED, ids=lambda p: p.stem)
def test_every_converted_launcher_launches_the_same_jobs_without_the_profiler(path: Path) -> None:
    # GIVEN a launcher in a style that was refused before issue 35
    source = path.read_text()
    before = run_launcher(source).launches(*LAUNCHERS)
    # WHEN converted
    result = rewrite_source(source, filename=str(path))
    # THEN it is converted whole: nothing left for a person, nothing of the Profiler left
    assert result.changed
    assert [f for f in result.manual if f.line] == [], result.manual
    assert remaining_uses(result.source) == []
    # AND it still runs (no keyword given twice), launching the same jobs with the same settings,
    # less the Profiler, plus TensorBoard output and the owner tag on each job that was profiled
    after = run_launcher(result.source).launches(*LAUNCHERS)
    assert [p for p, _ in after] == [p for p, _ in before]
    for (callee, old), (_, new) in zip(before, after, strict=True):
        if callee.endswith("update_training_job"):
            # a running job: the Profiler is turned off the way the API allows, nothing is added
            assert new["ProfilerConfig"] == {"DisableProfiler": True}
            assert "ProfilerRuleConfigurations" not in new
            assert {k: v for k, v in new.items() if k != "ProfilerConfig"} == {
                k: v for k, v in old.items() if k not in PROFILER
            }
            continue
        assert not PROFILER & set(new), callee
        assert set(old) - PROFILER - {"rules"} <= set(new)
        assert set(new) - set(old) <= ADDED | {"tags", "Tags"}
        if not PROFILER & set(old):
            # a job that was not profiled is launched as before, except that an SDK v2 estimator gets
            # disable_profiler=True (SDK v2 profiles every job by default); only a tags list it shares with
            # a profiled job (one dict spread into both) may carry the owner tag
            unchanged = {"tags", "Tags", "disable_profiler"}
            assert {k: v for k, v in new.items() if k not in unchanged} == {
                k: v for k, v in old.items() if k not in unchanged
            }, f"{callee}: a job that was not profiled changed"
            if callee.endswith(SDK_V2):
                assert str(new["disable_profiler"]) == "True", callee
            continue
        assert "profstack:user" in _tags(new) or callee.endswith("ModelTrainer"), callee
        if callee.endswith("ModelTrainer"):
            assert "profstack:user" in _tags(new) or "Tag" in _tags(new)
        elif callee.endswith("create_training_job"):
            assert "TensorBoardOutputConfig" in new
        else:
            assert str(new["disable_profiler"]) == "True", callee
            assert "tensorboard_output_config" in new


@pytest.mark.parametrize("path", CONVERTED, ids=lambda p: p.stem)
def test_a_second_run_changes_nothing(path: Path) -> None:
    once = rewrite_source(path.read_text()).source
    again = rewrite_source(once)
    assert not again.changed
    assert [f for f in again.manual if f.line] == []


def test_converted_corpus_passes_ruff_errors_and_pyflakes(tmp_path: Path) -> None:
    for path in CONVERTED:
        (tmp_path / path.name).write_text(rewrite_source(path.read_text()).source)
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    run = subprocess.run(
        [ruff, "check", "--isolated", "--select", "E,F", "--output-format", "concise", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout


@pytest.mark.parametrize("path", REFUSED, ids=lambda p: p.stem)
def test_refused_launchers_are_untouched_and_say_what_to_change(path: Path) -> None:
    # GIVEN a launcher whose conversion is truly unsafe WHEN rewritten
    source = path.read_text()
    result = rewrite_source(source, filename=str(path))
    # THEN it is left byte-identical and the blocking line says what the user must change
    assert not result.changed
    assert result.source == source
    line, *words = REASONS[path.stem]
    messages = [f.message for f in result.manual if f.line == line]
    assert any(all(w in m for w in words) for m in messages), result.manual
    # AND --check keeps failing on it
    assert remaining_uses(source) != []


def test_every_refused_corpus_file_has_an_expected_reason() -> None:
    assert {p.stem for p in REFUSED} == set(REASONS)


# --- single styles ----------------------------------------------------------------------------------


def _converted(source: str) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    result = rewrite_source(_src(source))
    assert result.changed, result.manual
    assert [f for f in result.manual if f.line] == [], result.manual
    return result.source, run_launcher(result.source).launches(*LAUNCHERS)


def test_a_popped_profiler_key_goes_with_its_pop_statement() -> None:
    # GIVEN profiler_config in a dict literal, `del`-ed for one job and popped for another
    source, launched = _converted(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        kw = {"role": "r", "profiler_config": ProfilerConfig()}
        PyTorch(entry_point="a.py", **kw)
        if True:
            kw.pop("profiler_config", None)
        del kw["profiler_config"]
        PyTorch(entry_point="b.py", **kw)
        """
    )
    # THEN neither statement is left to raise KeyError, and an `if` left empty gets `pass`
    assert ".pop(" not in source
    assert "del kw" not in source
    assert "if True:\n    pass\n" in source
    assert all("profiler_config" not in kw for _, kw in launched)


def test_update_and_subscript_assignments_of_the_profiler_go() -> None:
    source, launched = _converted(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        kw = dict(role="r")
        kw.update(profiler_config=ProfilerConfig())
        kw["profiler_rule_configurations"] = []
        kw.update(instance_type="ml.g5.xlarge", profiler_config=ProfilerConfig())
        PyTorch(entry_point="a.py", **kw)
        """
    )
    assert 'kw.update(instance_type="ml.g5.xlarge")' in source
    assert "profiler" not in source.replace("disable_profiler", "")
    (_, kwargs) = launched[0]
    assert kwargs["instance_type"] == "ml.g5.xlarge"
    assert str(kwargs["disable_profiler"]) == "True"


def test_disable_profiler_false_in_a_dict_becomes_true() -> None:
    source, launched = _converted(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        kw = {"disable_profiler": False, "profiler_config": ProfilerConfig()}
        PyTorch(entry_point="a.py", **kw)
        """
    )
    assert '"disable_profiler": True' in source
    assert str(launched[0][1]["disable_profiler"]) == "True"


def test_tags_in_the_dict_get_the_owner_tag_there_not_on_the_call() -> None:
    # GIVEN tags only in the spread dict: adding tags= to the call too would be a TypeError at launch
    source, launched = _converted(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        kw = dict(tags=[{"Key": "team", "Value": "a"}], profiler_config=ProfilerConfig())
        PyTorch(entry_point="a.py", **kw)
        """
    )
    assert source.count("profstack:user") == 1
    assert "profstack:user" in _tags(launched[0][1])
    assert "team" in _tags(launched[0][1])


def test_one_tags_list_feeding_two_sdks_is_refused() -> None:
    source = _src(
        """
        from sagemaker.core.shapes import ProfilerConfig
        from sagemaker.pytorch import PyTorch
        from sagemaker.train import ModelTrainer

        kw = dict(tags=[], profiler_config=ProfilerConfig())
        PyTorch(entry_point="a.py", **kw)
        ModelTrainer(training_image="i", **kw)
        """
    )
    result = rewrite_source(source)
    assert not result.changed
    assert any("different SDKs" in f.message for f in result.manual), result.manual


def test_an_inline_dict_spread_is_followed() -> None:
    _, launched = _converted(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        base = {"role": "r"}
        PyTorch(entry_point="a.py", **{**base, "profiler_config": ProfilerConfig()})
        """
    )
    assert launched[0][1]["role"] == "r"
    assert "profiler_config" not in launched[0][1]


def test_boto3_request_dict_through_sagemaker_sessions_client() -> None:
    _, launched = _converted(
        """
        import sagemaker

        sm = sagemaker.Session().sagemaker_client
        request = {"TrainingJobName": "j", "ProfilerConfig": {"S3OutputPath": "s3://o/"}}
        sm.create_training_job(**request, Tags=[{"Key": "team", "Value": "a"}])
        """
    )
    (_, kwargs) = launched[0]
    assert "ProfilerConfig" not in kwargs
    assert "profstack:user" in _tags(kwargs)
    assert "TensorBoardOutputConfig" in kwargs


def test_a_dict_escaping_after_being_spread_is_refused_with_its_line() -> None:
    source = _src(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        kw = {"profiler_config": ProfilerConfig()}
        PyTorch(entry_point="a.py", **kw)
        save_settings(kw)
        """
    )
    result = rewrite_source(source)
    assert not result.changed
    assert any(f.line == 6 and "passed to a function" in f.message for f in result.manual), result.manual


def test_a_copy_spread_into_a_foreign_call_is_refused() -> None:
    source = _src(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch
        from trainkit import LocalRunner

        kw = {"profiler_config": ProfilerConfig()}
        PyTorch(entry_point="a.py", **kw)
        local = kw.copy()
        LocalRunner(**local)
        """
    )
    result = rewrite_source(source)
    assert not result.changed
    assert any(f.line == 8 and "`LocalRunner(...)`" in f.message for f in result.manual), result.manual


def test_published_corpus_numbers_match_the_corpus() -> None:
    # GIVEN the numbers docs/migration.md publishes for the launcher corpus
    from bench.launcher_corpus import measure, table

    docs = (Path(__file__).resolve().parents[3] / "docs" / "migration.md").read_text()
    published = docs.split("<!-- launcher-corpus-table -->\n", 1)[1].split("\n\n", 1)[0]
    # WHEN measured THEN they are what the corpus gives now (the docs stay in sync)
    assert published == table(measure(CORPUS))


def test_a_hostile_chain_of_dicts_is_refused_in_bounded_time() -> None:
    # GIVEN 300 dicts each spreading the one before, each spread into an estimator
    lines = ["from sagemaker.debugger import ProfilerConfig", "from sagemaker.pytorch import PyTorch", "d0 = {}"]
    for i in range(1, 300):
        lines.append(f'd{i} = {{**d{i - 1}, "profiler_config": ProfilerConfig()}}')
        lines.append(f'PyTorch(entry_point="t.py", **d{i})')
    source = "\n".join(lines) + "\n"
    # WHEN rewritten (before: RecursionError from following the chain, the whole run failed)
    result = rewrite_source(source)
    # THEN it is refused, unchanged, with the reason
    assert not result.changed
    assert any("too long to follow" in f.message for f in result.manual)


def test_a_request_dict_that_turns_the_profiler_off_is_kept_and_passes_check() -> None:
    # GIVEN a boto3 request dict whose ProfilerConfig only turns the Profiler off
    source = _src(
        """
        import boto3

        sm = boto3.client("sagemaker")
        request = {"TrainingJobName": "j", "ProfilerConfig": {"DisableProfiler": True}}
        sm.create_training_job(**request)
        """
    )
    # WHEN rewritten THEN it stays, and the --check gate does not count it (before: "sets
    # 'ProfilerConfig'", a --check failure on the setting that turns the Profiler off)
    result = rewrite_source(source)
    assert not result.changed
    assert result.manual == []
    assert remaining_uses(source) == []


def test_cli_write_then_check_over_the_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from profstack.cli import main

    # GIVEN a copy of the launcher corpus
    tree = tmp_path / "corpus"
    shutil.copytree(CORPUS, tree)
    before = {p: p.read_text() for p in tree.rglob("*.py")}
    # WHEN `migrate smprof --write --user --trace-bucket` runs over it
    code = main(["migrate", "smprof", "--write", "--user", "alice", "--trace-bucket", "traces-1", str(tree)])
    err = capsys.readouterr().err
    assert code == 0, err
    # THEN every converted launcher was written, no refused or decoy file was touched
    for path, text in before.items():
        assert (path.read_text() != text) == (path.parent.name == "converted"), path
    # AND --check passes on the converted launchers and the decoys, and fails on each refused one
    assert main(["migrate", "smprof", "--check", str(tree / "converted"), str(tree / "decoys")]) == 0
    for path in sorted((tree / "refused").glob("*.py")):
        assert main(["migrate", "smprof", "--check", str(path)]) == 1, path
    assert (
        'PROFSTACK_TENSORBOARD_URI = "s3://traces-1/tensorboard/alice/"'
        in (tree / "converted" / "c02_dict_call_several_estimators.py").read_text()
    )
