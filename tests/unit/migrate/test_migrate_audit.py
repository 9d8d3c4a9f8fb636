"""Adversarial cases for the migration codemods that the corpus never showed (audit of issue 14).

Each test names the input, what the tools did before the fix, and what they must do now.
"""

from __future__ import annotations

import textwrap

import pytest

from profstack.migrate.scan import remaining_uses
from profstack.migrate.smprof import RewriteError, rewrite_source


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# --- launchers -----------------------------------------------------------------------------------


def test_a_profiler_import_whose_every_name_goes_is_removed() -> None:
    # GIVEN a launcher whose only sagemaker.debugger import is ProfilerConfig (one name, one line)
    source = _src(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        pc = ProfilerConfig(system_monitor_interval_millis=500)
        est = PyTorch(entry_point="t.py", profiler_config=pc)
        """
    )
    # WHEN rewritten
    result = rewrite_source(source)
    # THEN the import line is gone (before: it stayed, unused, and --check kept failing on it)
    assert "ProfilerConfig" not in result.source
    assert remaining_uses(result.source) == []
    assert [f for f in result.manual if f.line] == []
    # AND a second run changes nothing
    assert not rewrite_source(result.source).changed


def test_a_multi_line_import_of_only_profiler_names_is_removed() -> None:
    source = _src(
        """
        from sagemaker.debugger import (
            FrameworkProfile,
            ProfilerConfig,
        )
        from sagemaker.pytorch import PyTorch

        est = PyTorch(
            entry_point="t.py",
            profiler_config=ProfilerConfig(framework_profile_params=FrameworkProfile(num_steps=3)),
        )
        """
    )
    result = rewrite_source(source)
    assert "FrameworkProfile" not in result.source
    assert "ProfilerConfig" not in result.source
    assert remaining_uses(result.source) == []


@pytest.mark.parametrize(
    "source",
    [
        # another library's keyword of the same name (mindspeed-rl, in-house trainers, ...)
        "from myproj import build\nbuild(data, profiler_config=cfg)\n",
        # another library's method of the same name
        "import mylib\nmodel = mylib.Model()\nmodel.disable_profiling()\n",
        "def run(trainer):\n    trainer.update_profiler(cfg)\n",
    ],
)
def test_files_without_sagemaker_are_never_touched(source: str) -> None:
    # GIVEN a file that imports neither sagemaker nor boto3 and has nothing of SageMaker Profiler
    # WHEN rewritten
    result = rewrite_source(source)
    # THEN it is untouched (before: the keyword or the call was removed and, for a call, SageMaker's
    # disable_profiler/tensorboard_output_config/tags and a sagemaker import were added to it)
    assert not result.changed
    assert result.source == source
    assert result.manual == []


def test_profiler_settings_in_a_kwargs_dict_are_refused_not_half_rewritten() -> None:
    # GIVEN the estimator's keywords built in dict(...) and spread with **
    source = _src(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        kw = dict(profiler_config=ProfilerConfig(system_monitor_interval_millis=500))
        est = PyTorch(entry_point="t.py", tags=[{"Key": "a", "Value": "b"}], **kw)
        """
    )
    # WHEN rewritten
    result = rewrite_source(source)
    # THEN nothing changes and the line is reported (before: tags= and disable_profiler= were added to
    # the dict, so PyTorch(...) got `tags` twice: TypeError at launch)
    assert not result.changed
    assert any(f.line == 4 and "dict(...)" in f.message for f in result.manual), result.manual


# --- the --check gate (scan) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "from lightning.pytorch.profilers import Profiler\n\nclass MyProfiler(Profiler):\n    pass\n",
        "from mindspeed_rl.config_cls import ProfilerConfig\n\ncfg = ProfilerConfig({})\n",
        "import ddtrace.profiling.profiler as p\n\nprof = p.Profiler()\n",
        "def stop(model):\n    model.disable_profiling()\n",
    ],
)
def test_check_does_not_flag_other_libraries_profiler_names(source: str) -> None:
    # GIVEN a file whose Profiler/ProfilerConfig/disable_profiling come from another library
    # WHEN the --check gate scans it THEN nothing is reported (before: each was "uses Profiler", a
    # false failure of `migrate smprof --check` on code that never used SageMaker)
    assert remaining_uses(source) == []


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("from sagemaker.debugger import ProfilerConfig\n", 1),
        ("import sagemaker\n\npc = sagemaker.debugger.ProfilerConfig()\n", 3),
        ("from sagemaker.debugger import ProfilerConfig as PC\n\npc = PC()\n", 1),
        ("from sagemaker import debugger\n\npc = debugger.ProfilerConfig()\n", 3),
        ("import sagemaker\n\nest = sagemaker.estimator.Estimator()\nest.disable_profiling()\n", 4),
        ("from smdebug.profiler.analysis.utils import pandas_data_analysis\n", 1),
        ("import smdebug.profiler\n", 1),
        ('import boto3\n\nparams = {"ProfilerConfig": {"DisableProfiler": False}}\n', 3),
    ],
)
def test_check_still_flags_sagemaker_profiler_uses(source: str, line: int) -> None:
    assert line in {f.line for f in remaining_uses(source)}


# --- training scripts -----------------------------------------------------------------------------


def test_async_with_annotate_is_refused() -> None:
    # GIVEN `async with smprof.annotate(...)` in a coroutine
    source = _src(
        """
        import smprof


        async def step(batch):
            async with smprof.annotate("fetch"):
                await batch.load()
        """
    )
    # WHEN rewritten
    result = rewrite_source(source)
    # THEN the file is left as is and the line reported (before: `async with
    # torch.profiler.record_function(...)`, which has no __aenter__: TypeError when the step runs)
    assert not result.changed
    assert any(f.line == 5 and "async with" in f.message for f in result.manual), result.manual


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ('import smprof\n\n__all__ = ["smprof", "train"]\n', 3),
        ('from smprof import annotate\n\n__all__ = ("annotate",)\n\nwith annotate("x"):\n    pass\n', 3),
        ('import smprof\n\n__all__ = []\n__all__ += ["smprof"]\n', 4),
    ],
)
def test_all_that_exports_a_removed_name_is_refused(source: str, line: int) -> None:
    # GIVEN a module whose __all__ exports the profiler module or a name imported from it
    # WHEN rewritten
    result = rewrite_source(source)
    # THEN nothing changes and the __all__ line is reported (before: the import went, __all__ kept the
    # name, so `from this_module import *` raised AttributeError; the file was still written)
    assert not result.changed
    assert any(f.line == line and "__all__" in f.message for f in result.manual), result.manual


def test_the_module_named_in_a_string_is_refused() -> None:
    # GIVEN the profiler imported statically and looked up by name
    source = (
        "import importlib\nimport smprof\n\n"
        'prof = importlib.import_module("smprof")\nwith smprof.annotate("a"):\n    pass\n'
    )
    # WHEN rewritten THEN the file is converted whole or not at all (before: half-converted and written)
    result = rewrite_source(source)
    assert not result.changed
    assert any(f.line == 4 for f in result.manual)


def test_newer_python_syntax_without_the_profiler_is_left_alone() -> None:
    # GIVEN a file in Python 3.12 syntax (PEP 695) with nothing of SageMaker Profiler in it
    source = "type Batch = list[int]\n\n\ndef first[T](xs: list[T]) -> T:\n    return xs[0]\n"
    # WHEN rewritten THEN it is untouched, no error (before: RewriteError "cannot parse: invalid
    # syntax", so `migrate smprof --check` failed on every 3.12 codebase)
    result = rewrite_source(source, filename="util.py")
    assert not result.changed
    assert result.manual == []


def test_newer_python_syntax_with_the_profiler_gets_a_clear_refusal() -> None:
    source = (
        'import smprof\n\n\ndef first[T](xs: list[T]) -> T:\n    with smprof.annotate("a"):\n        return xs[0]\n'
    )
    with pytest.raises(RewriteError, match=r"train.py:4: .*newer than"):
        rewrite_source(source, filename="train.py")


@pytest.mark.parametrize(
    "call",
    [
        'PyTorch(entry_point="t.py", profiler_config=ProfilerConfig(), **common)',
        'PyTorch(**common, entry_point="t.py", profiler_config=ProfilerConfig())',
    ],
)
def test_a_launcher_call_that_spreads_kwargs_is_refused(call: str) -> None:
    # GIVEN an estimator call that spreads ** keywords, which here already hold tags
    source = (
        "from sagemaker.debugger import ProfilerConfig\nfrom sagemaker.pytorch import PyTorch\n\n"
        f'common = {{"tags": [{{"Key": "team", "Value": "vision"}}]}}\nest = {call}\n'
    )
    # WHEN rewritten
    result = rewrite_source(source)
    # THEN nothing changes and the call is reported (before: tags= was added beside **common, so
    # PyTorch(...) got `tags` twice: TypeError at launch)
    assert not result.changed
    assert any(f.line == 5 and "spreads **" in f.message for f in result.manual), result.manual


def test_explicit_disable_profiler_false_becomes_true() -> None:
    # GIVEN profiler_config= beside an explicit disable_profiler=False
    source = _src(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        est = PyTorch(entry_point="t.py", profiler_config=ProfilerConfig(), disable_profiler=False)
        """
    )
    # WHEN rewritten
    result = rewrite_source(source)
    # THEN it is True (before: False stayed, so without ProfilerConfig SDK v2 turned its default
    # Profiler monitoring and report rule back on, and --check passed)
    assert "disable_profiler=True" in result.source
    assert "disable_profiler=False" not in result.source
    assert [f for f in result.manual if f.line] == []
    # AND the gate flags a False left anywhere in a SageMaker launcher
    assert remaining_uses(source.replace("profiler_config=ProfilerConfig(), ", "")) != []


def test_disable_profiler_from_an_expression_is_reported() -> None:
    source = _src(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        est = PyTorch(entry_point="t.py", profiler_config=ProfilerConfig(), disable_profiler=args.no_prof)
        """
    )
    result = rewrite_source(source)
    assert any(f.line == 4 and "disable_profiler=" in f.message for f in result.manual), result.manual
