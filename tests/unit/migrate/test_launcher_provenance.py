"""Provenance before edits (issue 35 item 1): a launcher edit happens only where the callee and
the Profiler names are proven SageMaker's by where they were imported from; anything else is left
byte-identical."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from libcst.metadata import MetadataWrapper

from profstack.migrate.provenance import UNKNOWN, Provenance, foreign_profiler_lines, launcher_flavour
from profstack.migrate.scan import remaining_uses
from profstack.migrate.smprof import rewrite_source
from tests.unit.migrate.launcher_stubs import run_launcher

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "launcher_corpus"
DECOYS = sorted((CORPUS / "decoys").glob("*.py"))


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _origins(source: str, expression: str) -> frozenset[str]:
    """The origins of the last statement's expression, which must be `expression`."""
    module = cst.parse_module(_src(source))
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    prov = Provenance(wrapper)
    last = module.body[-1]
    assert isinstance(last, cst.SimpleStatementLine)
    expr = last.body[0]
    assert isinstance(expr, cst.Expr)
    assert module.code_for_node(expr.value) == expression
    return prov.origins(expr.value)


@pytest.mark.parametrize("path", DECOYS, ids=lambda p: p.stem)
def test_decoys_are_left_byte_identical_and_pass_check(path: Path) -> None:
    # GIVEN a file with Profiler-looking names that are not SageMaker Profiler's
    source = path.read_text()
    # WHEN rewritten
    result = rewrite_source(source, filename=str(path))
    # THEN not one byte changes, nothing is reported, and the --check gate passes it
    assert not result.changed
    assert result.source == source
    assert result.manual == []
    assert remaining_uses(source) == []


def test_the_issue_decoy_no_longer_gets_sagemaker_keywords() -> None:
    # GIVEN issue 35's decoy: another library's ProfilerConfig passed to its LocalRunner, which has a
    # disable_profiling() of its own, in a file that imports sagemaker for something else
    source = (CORPUS / "decoys" / "d01_other_library_local_runner.py").read_text()
    # WHEN converted (before: both were removed, and disable_profiler=True, a SageMaker
    # TensorBoardOutputConfig and os.environ["PROFSTACK_USER"] were added to LocalRunner(...))
    result = rewrite_source(source)
    # THEN the script runs exactly as before: LocalRunner gets its own keywords and nothing else
    assert result.source == source
    launched = run_launcher(result.source).launches("LocalRunner")
    assert [p for p, _ in launched] == ["trainkit.runners.LocalRunner"]
    assert set(launched[0][1]) == {"script", "output", "profiler_config"}


# --- what provenance proves --------------------------------------------------------------------------


_SM_PC = "sagemaker.debugger.ProfilerConfig"


@pytest.mark.parametrize(
    ("source", "expression", "expected"),
    [
        ("import sagemaker.debugger as dbg\ndbg.ProfilerConfig\n", "dbg.ProfilerConfig", _SM_PC),
        ("from sagemaker import ProfilerConfig as P\nP\n", "P", "sagemaker.ProfilerConfig"),
        ("import sagemaker\nsagemaker.debugger.ProfilerConfig()\n", f"{_SM_PC}()", f"{_SM_PC}()"),
        ("import sagemaker.debugger\nsagemaker.debugger.ProfilerConfig\n", _SM_PC, _SM_PC),
        ("from sagemaker.pytorch import PyTorch\nEst = PyTorch\nEst\n", "Est", "sagemaker.pytorch.PyTorch"),
        ("from sagemaker.pytorch import PyTorch\nclass Job(PyTorch): ...\nJob\n", "Job", "sagemaker.pytorch.PyTorch"),
        ('import boto3\nc = boto3.Session().client("sagemaker")\nc\n', "c", "boto3.Session().client(sagemaker)"),
        ("from .profiler_config import ProfilerConfig as P\nP\n", "P", ".profiler_config.ProfilerConfig"),
    ],
)
def test_origins_follow_aliases_reexports_assignments_and_subclasses(
    source: str, expression: str, expected: str
) -> None:
    assert _origins(source, expression) == frozenset({expected})


@pytest.mark.parametrize(
    ("source", "name"),
    [
        # a parameter: could be anything
        ("from sagemaker.pytorch import PyTorch\n\n\ndef f(PyTorch):\n    return PyTorch()\n", "PyTorch"),
        # rebound on one branch: which one runs depends on the flow
        (
            "import sys\nfrom sagemaker.pytorch import PyTorch\nif sys.argv:\n    PyTorch = object\nPyTorch()\n",
            "PyTorch",
        ),
        # bound by a star import
        ("from sagemaker.debugger import *\nProfilerConfig()\n", "ProfilerConfig"),
        # a loop variable
        ("from sagemaker.pytorch import PyTorch\nfor PyTorch in []:\n    PyTorch()\n", "PyTorch"),
    ],
    ids=["parameter", "rebound", "star-import", "loop-variable"],
)
def test_what_cannot_be_proven_is_not_proven(source: str, name: str) -> None:
    module = cst.parse_module(source)
    prov = Provenance(MetadataWrapper(module, unsafe_skip_copy=True))
    last = [n for n in _walk(module) if isinstance(n, cst.Name) and n.value == name][-1]
    origins = prov.origins(last)
    assert UNKNOWN in origins or len(origins) > 1, origins


def test_a_module_named_like_sagemaker_is_not_sagemaker() -> None:
    source = "from sagemaker_utils.debugger import ProfilerConfig\nProfilerConfig\n"
    assert _origins(source, "ProfilerConfig") == frozenset({"sagemaker_utils.debugger.ProfilerConfig"})
    result = rewrite_source(source + "est = ProfilerConfig()\n")
    assert not result.changed


@pytest.mark.parametrize(
    ("source", "flavour"),
    [
        ("from sagemaker.pytorch import PyTorch\nPyTorch()\n", "estimator"),
        ("import sagemaker\nsagemaker.estimator.Estimator()\n", "estimator"),
        ("from sagemaker.train import ModelTrainer\nModelTrainer()\n", "trainer"),
        ("from sagemaker.core.resources import TrainingJob\nTrainingJob.create()\n", "core"),
        ('import boto3\nboto3.client("sagemaker").create_training_job()\n', "boto3"),
        ('import boto3\nboto3.client("s3").create_training_job()\n', None),
        ("from trainkit import PyTorch\nPyTorch()\n", None),
        ("def launch(sm):\n    sm.create_training_job()\n", None),
    ],
)
def test_launcher_flavour_needs_proof(source: str, flavour: str | None) -> None:
    module = cst.parse_module(source)
    prov = Provenance(MetadataWrapper(module, unsafe_skip_copy=True))
    outermost = next(n for n in _walk(module) if isinstance(n, cst.Call))
    assert launcher_flavour(prov, outermost) == flavour


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    out = [node]
    for child in node.children:
        out.extend(_walk(child))
    return out


def test_typed_boto3_client_parameter_is_proven() -> None:
    # GIVEN a client passed in, typed with boto3-stubs' SageMakerClient
    source = _src(
        """
        from mypy_boto3_sagemaker import SageMakerClient


        def launch(sm: SageMakerClient) -> None:
            sm.create_training_job(TrainingJobName="j", ProfilerConfig={"S3OutputPath": "s3://o/"})
        """
    )
    result = rewrite_source(source)
    # THEN it is converted; an untyped parameter is not (below)
    assert result.changed
    assert "ProfilerConfig" not in result.source
    untyped = source.replace("sm: SageMakerClient", "sm")
    assert not rewrite_source(untyped).changed


def test_a_method_on_an_unproven_receiver_stays_and_is_reported_in_a_converted_launcher() -> None:
    # GIVEN a launcher being converted, with .update_profiler() and .disable_profiling() on a parameter
    source = _src(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        est = PyTorch(entry_point="t.py", profiler_config=ProfilerConfig())


        def stop(job):
            job.update_profiler(system_monitor_interval_millis=100)
            job.disable_profiling()
        """
    )
    result = rewrite_source(source)
    # THEN the proven part is converted, the unproven calls stay, and the user is told about the one that
    # may turn a Profiler on; disable_profiling() turns it off whatever job it is: it stays, unreported
    assert result.changed
    assert "job.update_profiler(system_monitor_interval_millis=100)" in result.source
    assert "job.disable_profiling()" in result.source
    assert any(f.line == 8 and "cannot prove" in f.message for f in result.manual), result.manual
    assert not any(f.line == 9 for f in result.manual), result.manual


def test_the_check_gate_ignores_only_what_is_proven_foreign() -> None:
    source = _src(
        """
        import sagemaker
        from trainkit import Runner

        Runner(profiler_config={}).update_profiler()


        def stop(job):
            job.update_profiler()
            job.disable_profiling()  # turns a running job's Profiler off: never a use of it
        """
    )
    assert foreign_profiler_lines(source) == {4}
    assert [f.line for f in remaining_uses(source)] == [8]


# --- generated launchers ---------------------------------------------------------------------------

_CONFIG_IMPORTS = {
    "sm-debugger": ("from sagemaker.debugger import ProfilerConfig as PC", True),
    "sm-reexport": ("from sagemaker import ProfilerConfig as PC", True),
    "sm-module-alias": ("import sagemaker.debugger as dbg\nPC = dbg.ProfilerConfig", True),
    "foreign": ("from trainkit.profiling import ProfilerConfig as PC", False),
    "own-module": ("from .profiler_config import ProfilerConfig as PC", False),
}
_RUNNER_IMPORTS = {
    "sm-pytorch": ("from sagemaker.pytorch import PyTorch as Runner", True),
    "sm-estimator-alias": ("import sagemaker.estimator\nRunner = sagemaker.estimator.Estimator", True),
    "sm-subclass": ("from sagemaker.huggingface import HuggingFace\n\n\nclass Runner(HuggingFace):\n    pass", True),
    "foreign": ("from trainkit.runners import LocalRunner as Runner", False),
    "foreign-named-estimator": ("from torchkit.estimator import Estimator as Runner", False),
}
_STYLES = {
    "explicit": 'job = Runner(entry_point="t.py", profiler_config=PC(){tags})',
    "dict-literal": 'kw = {{"profiler_config": PC(){dtags}}}\njob = Runner(entry_point="t.py", **kw)',
    "dict-call": 'kw = dict(profiler_config=PC(){ktags})\njob = Runner(entry_point="t.py", **kw)',
    "chained": 'base = {{"role": "r"{dtags}}}\nkw = {{**base, "profiler_config": PC()}}\njob = Runner(**kw)',
    "two-jobs-pop": (
        'kw = {{"profiler_config": PC(){dtags}}}\njob = Runner(entry_point="a.py", **kw)\n'
        'kw.pop("profiler_config")\nother = Runner(entry_point="b.py", **kw)'
    ),
    "update": 'kw = dict(role="r"{ktags})\nkw.update(profiler_config=PC())\njob = Runner(**kw)',
    "subscript": 'kw = {{"role": "r"{dtags}}}\nkw["profiler_config"] = PC()\njob = Runner(**kw)',
    "copy": 'base = dict(profiler_config=PC(){ktags})\nkw = base.copy()\njob = Runner(entry_point="a.py", **kw)',
    "dict-copy": 'base = {{"profiler_config": PC(){dtags}}}\njob = Runner(**dict(base, entry_point="a.py"))',
    "in-function": (
        'def launch():\n    kw = {{"profiler_config": PC(){dtags}}}\n    return Runner(entry_point="a.py", **kw)\n\n\n'
        "job = launch()"
    ),
    "setdefault": 'kw = {{"role": "r"{dtags}}}\nkw.setdefault("profiler_config", PC())\njob = Runner(**kw)',
}


@pytest.mark.slow  # ~20 s on a shared core: run by `make test`
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    config=st.sampled_from(sorted(_CONFIG_IMPORTS)),
    runner=st.sampled_from(sorted(_RUNNER_IMPORTS)),
    style=st.sampled_from(sorted(_STYLES)),
    tags=st.booleans(),
    disable=st.booleans(),
)
def test_generated_launchers_are_converted_when_proven_and_untouched_otherwise(
    config: str, runner: str, style: str, tags: bool, disable: bool
) -> None:
    # GIVEN a launcher built from an import style of each name and a keyword style
    config_import, config_sm = _CONFIG_IMPORTS[config]
    runner_import, runner_sm = _RUNNER_IMPORTS[runner]
    tag = '[{"Key": "team", "Value": "a"}]'
    body = _STYLES[style].format(
        tags=f", tags={tag}" if tags else "",
        dtags=f', "tags": {tag}' if tags else "",
        ktags=f", tags={tag}" if tags else "",
    )
    source = f"{config_import}\n{runner_import}\n\n{body}\n"
    if disable and style != "in-function":  # `job = launch()` proves nothing (tested above)
        source += "job.disable_profiling()\n"
    before = run_launcher(source).launches("Runner", "PyTorch", "Estimator", "HuggingFace", "LocalRunner")
    # WHEN rewritten
    result = rewrite_source(source)
    if not runner_sm:
        # THEN a callee that is not SageMaker's is never edited: byte-identical; a proven SageMaker
        # ProfilerConfig handed to it is refused with a reason, anything else is not even reported
        assert result.source == source
        if config_sm:
            assert any("cannot prove" in f.message for f in result.manual), result.manual
        else:
            assert [f for f in result.manual if f.line] == [], result.manual
        return
    # THEN a proven estimator is converted whole (its keyword is SageMaker's whatever the value)
    assert result.changed, result.manual
    assert [f for f in result.manual if f.line] == [], result.manual
    assert remaining_uses(result.source) == []
    assert not rewrite_source(result.source).changed
    # AND it still launches every job, with no Profiler keyword, no keyword twice, the owner tag once
    after = run_launcher(result.source).launches("Runner", "PyTorch", "Estimator", "HuggingFace", "LocalRunner")
    assert len(after) == len(before)
    profiled = [kw for _, kw in after if "tensorboard_output_config" in kw]
    assert profiled
    for kwargs in profiled:
        assert "profiler_config" not in kwargs
        assert str(kwargs["disable_profiler"]) == "True"
        assert str(kwargs["tags"]).count("profstack:user") == 1


def test_an_optional_import_and_a_choice_of_estimators_are_proven() -> None:
    # GIVEN the estimator imported optionally (None when the SDK is missing), and chosen between two
    source = _src(
        """
        import sys

        from sagemaker.debugger import ProfilerConfig

        try:
            from sagemaker.pytorch import PyTorch
            from sagemaker.tensorflow import TensorFlow
        except ImportError:
            PyTorch = TensorFlow = None

        Est = PyTorch if "torch" in sys.argv else TensorFlow
        est = Est(entry_point="t.py", profiler_config=ProfilerConfig())
        """
    )
    # WHEN rewritten THEN both bindings that can be called are SageMaker estimators: converted
    result = rewrite_source(source)
    assert result.changed
    assert [f for f in result.manual if f.line] == []
    assert "disable_profiler=True" in result.source


def test_a_choice_between_sagemaker_and_another_library_is_refused() -> None:
    source = _src(
        """
        import sys

        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch
        from trainkit import LocalRunner

        Est = PyTorch if "cloud" in sys.argv else LocalRunner
        est = Est(entry_point="t.py", profiler_config=ProfilerConfig())
        """
    )
    result = rewrite_source(source)
    assert not result.changed
    assert any(f.line == 8 and "cannot prove" in f.message for f in result.manual), result.manual
