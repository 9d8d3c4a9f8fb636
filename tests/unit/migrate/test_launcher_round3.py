"""#46 item 1: launcher rewrites correct by construction.

Each converted launcher is run against stub SageMaker/boto3 modules (launcher_stubs: Python itself raises
NameError for a name used before it is bound, TypeError for a keyword given twice) and checked with ruff
F821/F401/F841 before and after: the rewrite adds no undefined name, unused import or unused local.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nbformat.v4 import new_code_cell, new_notebook

from profstack.migrate.notebook import rewrite_notebook
from profstack.migrate.scan import remaining_uses
from profstack.migrate.smprof import rewrite_source
from tests.unit.migrate.launcher_stubs import run_launcher
from tests.unit.migrate.own_corpus import python_of

PROFILER_KEYWORDS = {"profiler_config", "profiler_rule_configurations"}


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _ruff(source: str) -> Counter[str]:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "launcher.py"
        path.write_text(source)
        run = subprocess.run(
            [ruff, "check", "--isolated", "--select", "F821,F401,F841", "--output-format", "json", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
    return Counter(f"{f['code']} {f['message']}" for f in json.loads(run.stdout or "[]"))


def _converted(source: str) -> str:
    result = rewrite_source(source)
    assert result.changed, result.manual
    assert [f for f in result.manual if f.line] == [], result.manual
    assert remaining_uses(result.source) == []
    added = _ruff(result.source) - _ruff(source)
    assert not added, (dict(added), result.source)
    return result.source


def _jobs(source: str, *names: str) -> list[tuple[str, dict[str, Any]]]:
    return run_launcher(source).launches(*names)


# --- 1. constants where every name they use is bound ------------------------------------------------


def test_a_notebook_importing_os_in_a_later_cell_gets_its_constants_where_they_run() -> None:
    # GIVEN AWS's layout: the launcher in cell 2, `import os` only in cell 3 (before: PROFSTACK_USER =
    # os.environ[...] went into cell 1, NameError: os)
    text = (
        nbformat.writes(
            new_notebook(
                cells=[
                    new_code_cell(
                        "from sagemaker.debugger import ProfilerConfig\nfrom sagemaker.pytorch import PyTorch"
                    ),
                    new_code_cell('est = PyTorch(entry_point="t.py", profiler_config=ProfilerConfig())\nest.fit()'),
                    new_code_cell("import os\nprint(os.getcwd())"),
                ]
            )
        )
        + "\n"
    )
    # WHEN converted
    result = rewrite_notebook(text)
    cells = ["".join(c["source"]) for c in json.loads(result.source)["cells"]]
    # THEN cell 1 is only its imports, the constants (and `import os`) open the launcher's cell
    assert cells[0] == "from sagemaker.pytorch import PyTorch"
    assert cells[1].startswith("import os\nfrom sagemaker.debugger import TensorBoardOutputConfig\n")
    # AND the cells, run in order, launch the job without a NameError, and ruff finds no new undefined name
    program = python_of(Path("n.ipynb"), result.source)
    ((_, job),) = _jobs(program, "PyTorch")
    assert str(job["disable_profiler"]) == "True"
    assert "profiler_config" not in job
    assert not (_ruff(program) - _ruff(python_of(Path("n.ipynb"), text)))


def test_a_script_importing_os_only_inside_main_gets_a_module_import() -> None:
    source = _src(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch


        def main():
            import os

            PyTorch(entry_point="t.py", role=os.environ["ROLE"], profiler_config=ProfilerConfig())


        main()
        """
    )
    new = _converted(source)
    assert new.startswith("from sagemaker.pytorch import PyTorch\nimport os\n")
    ((_, job),) = run_launcher(new, env={"ROLE": "r", "PROFSTACK_USER": "a", "PROFSTACK_TRACE_BUCKET": "b"}).launches(
        "PyTorch"
    )
    assert "tensorboard_output_config" in job


def test_a_name_the_rewrite_needs_bound_to_something_else_is_refused() -> None:
    source = _src(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        TensorBoardOutputConfig = dict
        PyTorch(entry_point="t.py", profiler_config=ProfilerConfig())
        """
    )
    result = rewrite_source(source)
    assert not result.changed
    assert any(
        f.line == 4 and "`TensorBoardOutputConfig` is bound to something else" in f.message for f in result.manual
    )


# --- 2. every SDK v2 estimator the file creates stops profiling ---------------------------------------

ESTIMATORS = {
    "pytorch": ("from sagemaker.pytorch import PyTorch as E", 'E(entry_point="t.py")'),
    "pytorch-module": ("from sagemaker.pytorch.estimator import PyTorch as E", 'E(entry_point="t.py")'),
    "tensorflow": ("import sagemaker.tensorflow", 'sagemaker.tensorflow.TensorFlow(entry_point="t.py")'),
    "huggingface": ("from sagemaker.huggingface import HuggingFace as E", 'E(entry_point="t.py")'),
    "generic": ("import sagemaker", 'sagemaker.estimator.Estimator(image_uri="i")'),
    "kmeans": ("from sagemaker import KMeans as E", "E(role='r', k=3)"),
    "xgboost": ("from sagemaker.xgboost import XGBoost as E", 'E(entry_point="t.py")'),
    "jumpstart": ("from sagemaker.jumpstart.estimator import JumpStartEstimator as E", 'E(model_id="m")'),
    "subclass": (
        "from sagemaker.pytorch import PyTorch\n\nclass E(PyTorch):\n    def __init__(self, **kw):\n"
        "        super().__init__(**kw)",
        'E(entry_point="t.py")',
    ),
}


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_an_estimator_that_passed_no_profiler_settings_still_gets_disable_profiler(name: str) -> None:
    # GIVEN a launcher that builds Profiler rules but never passes them, and an estimator of each kind
    imports, call = ESTIMATORS[name]
    source = (
        "from sagemaker.debugger import ProfilerRule, rule_configs\n"
        f"{imports}\n\n"
        "unused_rules = [ProfilerRule.sagemaker(rule_configs.ProfilerReport())]\n"
        f"job = {call}\n"
        "job.fit()\n"
    )
    # WHEN converted THEN the job runs with disable_profiler=True (SDK v2 monitors every job by default)
    new = _converted(source)
    launched = [kw for path, kw in run_launcher(new).calls if path.rsplit(".", 1)[-1] not in {"sagemaker", "fit"}]
    assert [str(kw.get("disable_profiler")) for kw in launched[-1:]] == ["True"], new
    assert "unused_rules = []" in new


def test_disable_profiler_false_anywhere_becomes_true_and_an_expression_is_reported() -> None:
    source = _src(
        """
        import os

        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        settings = {"disable_profiler": False}
        PyTorch(entry_point="a.py", profiler_config=ProfilerConfig())
        PyTorch(entry_point="b.py", disable_profiler=False)
        PyTorch(entry_point="c.py", **settings)
        PyTorch(entry_point="d.py", disable_profiler=os.environ.get("OFF") == "1")
        """
    )
    result = rewrite_source(source)
    jobs = [kw for _, kw in _jobs(result.source, "PyTorch")]
    assert [str(kw["disable_profiler"]) for kw in jobs[:3]] == ["True", "True", "True"]
    assert any(f.line == 10 and "expression" in f.message for f in result.manual), result.manual


def test_what_is_not_an_sdk_v2_estimator_is_left_and_what_drops_the_keyword_is_reported() -> None:
    source = _src(
        """
        from sagemaker import AlgorithmEstimator
        from sagemaker.automl.candidate_estimator import CandidateEstimator
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch


        class Fixed(PyTorch):
            def __init__(self, entry_point):
                super().__init__(entry_point=entry_point)


        PyTorch(entry_point="t.py", profiler_config=ProfilerConfig())
        CandidateEstimator({"CandidateName": "c"})
        AlgorithmEstimator(algorithm_arn="arn:aws:sagemaker:us-east-1:1:algorithm/a")
        Fixed("t.py")
        """
    )
    result = rewrite_source(source)
    assert result.changed
    assert 'CandidateEstimator({"CandidateName": "c"})' in result.source
    notes = {f.line: f.message for f in result.manual}
    assert "AlgorithmEstimator drops disable_profiler" in notes[14]
    assert "takes no **kwargs" in notes[15]


# --- 3. calls on running jobs: kept, or turned into the way to stop a running job's Profiler ---------


def test_calls_on_running_jobs_are_kept_or_converted_never_dropped() -> None:
    source = _src(
        """
        from sagemaker.debugger import ProfilerConfig, ProfilerRule, rule_configs
        from sagemaker.pytorch import PyTorch

        new = PyTorch(entry_point="t.py", profiler_config=ProfilerConfig())
        new.fit(wait=False)
        new.update_profiler(rules=[ProfilerRule.sagemaker(rule_configs.CPUBottleneck())])
        new.disable_profiling()


        def tune(name):
            running = PyTorch.attach(name)
            running.update_profiler(system_monitor_interval_millis=100)
            PyTorch.attach(name).enable_default_profiling()
            PyTorch.attach(name).disable_profiling()


        tune("job-1")
        """
    )
    new = _converted(source)
    # THEN the job launched here (now with disable_profiler=True) loses the calls that would fail on it or
    # turn it on; jobs started elsewhere keep disable_profiling() and the others become it
    assert "new.update_profiler" not in new
    assert "new.disable_profiling" not in new
    assert "running.disable_profiling()" in new
    assert new.count("with contextlib.suppress(ValueError):") == 2
    assert "PyTorch.attach(name).disable_profiling()" in new
    paths = [path for path, _ in run_launcher(new).calls]
    assert paths.count("sagemaker.pytorch.PyTorch.attach().disable_profiling") == 3
    assert not any(p.endswith(("update_profiler", "enable_default_profiling")) for p in paths)


def test_a_running_job_call_used_as_a_value_is_refused() -> None:
    source = _src(
        """
        from sagemaker.debugger import ProfilerConfig
        from sagemaker.pytorch import PyTorch

        PyTorch(entry_point="t.py", profiler_config=ProfilerConfig())
        answer = PyTorch.attach("j").update_profiler(system_monitor_interval_millis=100)
        """
    )
    result = rewrite_source(source)
    assert not result.changed
    assert any(f.line == 5 and "used as a value" in f.message for f in result.manual)


# --- 4. what the removals leave behind ------------------------------------------------------------


def test_emptied_lists_and_their_comments() -> None:
    source = _src(
        """
        from sagemaker.debugger import ProfilerRule, Rule, rule_configs
        from sagemaker.pytorch import PyTorch

        # the rules the job evaluates
        rules = [
            # GPU usage
            ProfilerRule.sagemaker(rule_configs.LowGPUUtilization()),
            ProfilerRule.sagemaker(rule_configs.ProfilerReport()),  # the report
        ]
        debug = [
            Rule.sagemaker(rule_configs.loss_not_decreasing()),  # keep this one
            # GPU usage
            ProfilerRule.sagemaker(rule_configs.LowGPUUtilization()),
            # and this one
            Rule.sagemaker(rule_configs.overfit()),
        ]
        PyTorch(entry_point="t.py", rules=rules + debug)
        """
    )
    new = _converted(source)
    assert "# the rules the job evaluates\nrules = []\n" in new
    assert "# GPU usage" not in new
    assert "# the report" not in new
    assert (
        "debug = [\n    Rule.sagemaker(rule_configs.loss_not_decreasing()),  # keep this one\n"
        "    # and this one\n    Rule.sagemaker(rule_configs.overfit()),\n]\n"
    ) in new


def test_imports_and_locals_only_the_removed_settings_used_go_and_nothing_else() -> None:
    source = _src(
        """
        import json
        import os

        from sagemaker.debugger import FrameworkProfile, ProfilerConfig
        from sagemaker.pytorch import PyTorch
        import unused_before  # already unused: not the codemod's business


        def launch():
            interval = 500
            steps = json.loads("3")
            config = ProfilerConfig(
                system_monitor_interval_millis=interval,
                framework_profile_params=FrameworkProfile(num_steps=steps),
            )
            PyTorch(entry_point="t.py", role=os.environ["ROLE"], profiler_config=config)


        launch()
        """
    )
    new = _converted(source)
    assert "interval" not in new
    assert '    json.loads("3")\n' in new  # the call may do something: it stays, as a statement
    assert "FrameworkProfile" not in new
    assert "import unused_before" in new


# --- 5. generated launchers ---------------------------------------------------------------------------

_OS = st.sampled_from(["top", "later", "function", "none"])
_CLASSES = st.sampled_from(["PyTorch", "TensorFlow", "HuggingFace"])
_RULES = st.sampled_from(["none", "passed", "unused", "mixed"])
_RUNNING = st.sampled_from(["none", "attach-update", "created-disable"])


@st.composite
def launchers(draw: st.DrawFn) -> str:
    where_os = draw(_OS)
    cls = draw(_CLASSES)
    module = {"PyTorch": "pytorch", "TensorFlow": "tensorflow", "HuggingFace": "huggingface"}[cls]
    rules = draw(_RULES)
    running = draw(_RUNNING)
    in_function = draw(st.booleans())
    helper_local = draw(st.booleans())
    second_job = draw(st.booleans())
    top = ["from sagemaker.debugger import FrameworkProfile, ProfilerConfig, ProfilerRule, Rule, rule_configs"]
    top.append(f"from sagemaker.{module} import {cls}")
    if where_os == "top":
        top.insert(0, "import os")
    body: list[str] = []
    if where_os == "function":
        body.append("import os")
    if helper_local:
        body.append("steps = 3")
    body.append(
        "config = ProfilerConfig(framework_profile_params=FrameworkProfile(num_steps="
        + ("steps" if helper_local else "3")
        + "))"
    )
    rule_list = {
        "none": None,
        "passed": "[ProfilerRule.sagemaker(rule_configs.ProfilerReport())]",
        "unused": "[ProfilerRule.sagemaker(rule_configs.CPUBottleneck())]",
        "mixed": "[Rule.sagemaker(rule_configs.overfit()), ProfilerRule.sagemaker(rule_configs.ProfilerReport())]",
    }[rules]
    if rule_list is not None:
        body.append(f"rules = {rule_list}")
    role = 'os.environ.get("ROLE", "r")' if where_os in {"top", "function"} else '"r"'
    passed = ", rules=rules" if rules in {"passed", "mixed"} else ""
    body.append(f'job = {cls}(entry_point="t.py", role={role}, profiler_config=config{passed})')
    body.append("job.fit(wait=False)")
    if second_job:
        body.append(f'{cls}(entry_point="second.py", role="r").fit()')
    if running == "attach-update":
        body.append(f'{cls}.attach("old-job").update_profiler(system_monitor_interval_millis=100)')
    elif running == "created-disable":
        body.append("job.disable_profiling()")
    lines = list(top)
    if in_function:
        lines += ["", "", "def launch():"] + ["    " + b for b in body] + ["", "", "launch()"]
    else:
        lines += ["", *body]
    if where_os == "later":
        lines += ["import os", "print(os.getcwd())"]
    return "\n".join(lines) + "\n"


@settings(max_examples=40, deadline=None)
@given(source=launchers())
def test_generated_launchers_convert_run_and_add_no_ruff_findings(source: str) -> None:
    # GIVEN a launcher: os imported at the top, later, in the function or not at all; rules passed,
    # unused or mixed; a second job without Profiler settings; a call on a running job
    # WHEN converted THEN whole, with no new F821/F401/F841, and it runs
    new = _converted(source)
    calls = run_launcher(new).calls
    jobs = [kw for path, kw in calls if path.rsplit(".", 1)[-1] in {"PyTorch", "TensorFlow", "HuggingFace"}]
    # AND every job stops profiling, none keeps a Profiler setting, and the profiled one reports to ProfStack
    assert jobs
    assert all(str(kw.get("disable_profiler")) == "True" for kw in jobs), new
    assert not any(PROFILER_KEYWORDS & set(kw) for kw in jobs)
    assert "tensorboard_output_config" in jobs[0]
    assert not any(p.endswith("update_profiler") for p, _ in calls)
    # AND a second run changes nothing
    assert not rewrite_source(new).changed


@st.composite
def notebooks(draw: st.DrawFn) -> str:
    """A generated launcher (module level) cut into cells at random top-level statement boundaries."""
    source = draw(launchers().filter(lambda s: "def launch" not in s))
    statements = source.rstrip("\n").split("\n")
    cuts = sorted(set(draw(st.lists(st.integers(min_value=1, max_value=len(statements) - 1), max_size=4))))
    cells, start = [], 0
    for cut in [*cuts, len(statements)]:
        if statements[cut - 1 : cut] == [""] or cut == start:
            continue
        cells.append("\n".join(statements[start:cut]).strip("\n"))
        start = cut
    if start < len(statements):
        cells.append("\n".join(statements[start:]).strip("\n"))
    return nbformat.writes(new_notebook(cells=[new_code_cell(c) for c in cells if c.strip()])) + "\n"


@settings(max_examples=25, deadline=None)
@given(text=notebooks())
def test_generated_notebooks_convert_cell_by_cell_and_run_in_order(text: str) -> None:
    # GIVEN a launcher cut into notebook cells anywhere (os imported in a later cell, or not at all)
    # WHEN converted
    result = rewrite_notebook(text)
    assert result.changed
    assert [f for f in result.manual if f.message.startswith(("cell", "not rewritten"))] == [], result.manual
    program = python_of(Path("n.ipynb"), result.source)
    # THEN the cells, run in order, launch every job without a NameError, each without the Profiler
    jobs = [
        kw for p, kw in run_launcher(program).calls if p.rsplit(".", 1)[-1] in {"PyTorch", "TensorFlow", "HuggingFace"}
    ]
    assert jobs
    assert all(str(kw.get("disable_profiler")) == "True" for kw in jobs)
    assert not any(PROFILER_KEYWORDS & set(kw) for kw in jobs)
    # AND ruff finds nothing the original cells did not have
    assert not (_ruff(program) - _ruff(python_of(Path("n.ipynb"), text)))
