"""#35 item 3: notebooks are rewritten cell by cell with the script/launcher codemods (nbformat in and out)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nbformat.v4 import new_code_cell, new_notebook

from profstack.cli import main
from profstack.migrate.notebook import NotebookError, rewrite_notebook
from profstack.migrate.scan import notebook_uses

NOTEBOOK = Path(__file__).resolve().parents[2] / "fixtures" / "smprof_round2" / "notebooks" / "profile_training.ipynb"


def _notebook(*sources: str) -> str:
    return nbformat.writes(new_notebook(cells=[new_code_cell(s) for s in sources])) + "\n"


def _sources(text: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(text)["cells"]]


def test_the_corpus_notebook_is_converted_with_outputs_metadata_and_magics_kept() -> None:
    # GIVEN a Studio notebook: the smppy wheel installed by %pip, smppy imported in one cell, the profiler
    # configured in the next, the training loop in a third, outputs and tags on the cells
    text = NOTEBOOK.read_text()
    before = json.loads(text)
    # WHEN rewritten
    result = rewrite_notebook(text)
    after = json.loads(result.source)
    # THEN nothing of the Profiler is left and nothing needs a person
    assert result.changed
    assert result.manual == []
    assert notebook_uses(result.source) == []
    # AND every cell keeps its type, outputs, execution count and metadata; the notebook its metadata
    assert after["metadata"] == before["metadata"]
    assert len(after["cells"]) == len(before["cells"])
    for old, new in zip(before["cells"], after["cells"], strict=True):
        assert (new["cell_type"], new.get("outputs"), new.get("execution_count"), new["metadata"]) == (
            old["cell_type"],
            old.get("outputs"),
            old.get("execution_count"),
            old["metadata"],
        )
    sources = _sources(result.source)
    # AND the magics stay, except the Profiler's install lines: the wheel's line goes, the mixed one loses smppy
    assert sources[0] == "".join(before["cells"][0]["source"])  # markdown untouched
    assert sources[1] == ""
    assert sources[2] == "%pip install --quiet torch==2.3.1 datasets"
    assert sources[3].startswith("%matplotlib inline\nimport torch\n")
    assert sources[6] == "!pip list 2>/dev/null | grep -i torch"
    # AND the code cells hold the same conversion a script gets, each where it was
    assert "import torch.profiler" in sources[3]
    assert sources[4].startswith("prof = torch.profiler.profile(")
    assert "    prof.step()\nprof.stop()\n" in sources[5]
    # AND each edit names its cell
    assert all(f.message.startswith("cell ") for f in result.edits)
    assert any(f.message.startswith("cell 2, line 1: removed https://smppy") for f in result.edits)
    # AND a second run changes nothing
    assert not rewrite_notebook(result.source).changed


@pytest.mark.slow
def test_the_converted_notebook_runs_and_records_a_bounded_window(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch is pinned in requirements/dev.txt")
    # GIVEN the converted notebook's code cells as one program (IPython lines left out, as a kernel runs them)
    sources = _sources(rewrite_notebook(NOTEBOOK.read_text()).source)
    code = "\n".join(line for s in sources[1:] for line in s.splitlines() if not line.lstrip().startswith(("%", "!")))
    script = tmp_path / "notebook.py"
    script.write_text(code + "\n")
    # WHEN run on CPU torch
    run = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, "PROFSTACK_TRACE_DIR": str(tmp_path / "traces"), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    # THEN one trace holds the notebook's annotation and at most three recorded steps of six
    (trace,) = (tmp_path / "traces").glob("*.pt.trace.json")
    names = {e["name"] for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "user_annotation"}
    assert "nb_step" in names
    assert 1 <= len({n for n in names if n.startswith("ProfilerStep#")}) <= 3


def test_a_range_begun_in_one_cell_and_ended_in_another_leaves_the_notebook_as_it_was() -> None:
    # GIVEN annotation_begin in one cell and annotation_end in the next (a `with` block would span cells)
    text = _notebook(
        "%pip install smprof\nimport smprof",
        'smprof.annotation_begin("load")\ndata = [1, 2]',
        'smprof.annotation_end("load")',
    )
    # WHEN rewritten THEN byte-identical, the reason given, the install line kept (the import stays)
    result = rewrite_notebook(text)
    assert not result.changed
    assert result.source == text
    assert any("would move code across cells" in f.message for f in result.manual)


def test_a_refused_conversion_keeps_the_install_line_and_reports_by_cell() -> None:
    text = _notebook("!pip install smprof", "import smprof\nsmprof.set_metadata({'a': 1})")
    result = rewrite_notebook(text)
    assert result.source == text
    messages = [f.message for f in result.manual]
    assert any(m.startswith("cell 2, line 2: `smprof.set_metadata` has no safe") for m in messages), messages
    assert any(m.startswith("cell 1: names smprof/smppy (a magic or pip line)") for m in messages), messages


def test_a_notebook_without_the_profiler_is_untouched() -> None:
    text = _notebook("%matplotlib inline\nimport torch", "!nvidia-smi", "%%bash\npip install smprof-docs")
    result = rewrite_notebook(text)
    assert (result.changed, result.source, result.edits, result.manual) == (False, text, [], [])


def test_an_unreadable_notebook_is_an_error() -> None:
    with pytest.raises(NotebookError, match="not a notebook nbformat reads"):
        rewrite_notebook("{not json")


def test_cli_writes_the_notebook_and_names_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "train.ipynb"
    path.write_text(NOTEBOOK.read_text())
    assert main(["migrate", "smprof", "--write", str(path)]) == 0
    err = capsys.readouterr().err
    assert f"{path}: rewrote: cell 4, line 3: profiler import -> import torch.profiler" in err
    assert main(["migrate", "smprof", "--check", str(path)]) == 0
    (tmp_path / "bad.ipynb").write_text("{")
    assert main(["migrate", "smprof", "--check", str(tmp_path / "bad.ipynb")]) == 1


SCRIPTS = sorted(
    [
        *(NOTEBOOK.parents[1] / "scripts").glob("*.py"),
        *(NOTEBOOK.parents[2] / "smprof" / "scripts").glob("*.py"),
    ]
)


def _top_level_chunks(source: str) -> list[str]:
    """The script cut before each top-level statement (a cell may only hold whole statements)."""
    import ast

    tree = ast.parse(source)
    decorated = [min([n.lineno, *[d.lineno for d in getattr(n, "decorator_list", [])]]) for n in tree.body]
    lines = source.splitlines(keepends=True)
    cuts = sorted({1, *decorated})
    return ["".join(lines[a - 1 : b - 1]) for a, b in zip(cuts, [*cuts[1:], len(lines) + 1], strict=True)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.sampled_from(SCRIPTS), data=st.data())
def test_any_split_into_cells_gives_the_scripts_conversion(script: Path, data: st.DataObject) -> None:
    import ast

    from profstack.migrate.smprof import rewrite_source

    # GIVEN a corpus script cut into cells at random statement boundaries
    chunks = _top_level_chunks(script.read_text())
    cut = data.draw(st.lists(st.booleans(), min_size=len(chunks), max_size=len(chunks)))
    cells: list[str] = []
    for chunk, new_cell in zip(chunks, cut, strict=True):
        if new_cell or not cells:
            cells.append(chunk)
        else:
            cells[-1] += chunk
    text = _notebook(*[c.rstrip("\n") for c in cells])
    # WHEN the notebook is rewritten
    result = rewrite_notebook(text)
    # THEN either it is refused as it was, or its cells, each valid on its own, hold the script's conversion
    if not result.changed:
        assert result.source == text
        assert any("across cells" in f.message or "on its own" in f.message for f in result.manual)
        return
    new_cells = _sources(result.source)
    for cell in new_cells:
        ast.parse(cell)
    expected = rewrite_source(script.read_text()).source
    assert ast.dump(ast.parse("\n".join(new_cells))) == ast.dump(ast.parse(expected))


def test_a_launcher_notebook_gets_the_launcher_codemod_cell_by_cell() -> None:
    import ast

    # GIVEN a Studio notebook that configures ProfilerConfig in one cell and launches in another
    text = _notebook(
        "%pip install sagemaker",
        "import sagemaker\nfrom sagemaker.pytorch import PyTorch\nfrom sagemaker.debugger import ProfilerConfig",
        "role = sagemaker.get_execution_role()\npc = ProfilerConfig(system_monitor_interval_millis=500)",
        "est = PyTorch(entry_point='train.py', role=role, instance_count=1, instance_type='ml.g5.xlarge',\n"
        "              framework_version='2.3', py_version='py311', profiler_config=pc)\nest.fit()",
    )
    # WHEN rewritten
    result = rewrite_notebook(text)
    # THEN the Profiler settings are gone from every cell, each cell still parses, the magic stays
    assert result.changed
    sources = _sources(result.source)
    assert len(sources) == 4
    assert sources[0] == "%pip install sagemaker"
    assert "ProfilerConfig" not in result.source
    assert "profiler_config" not in result.source
    for cell in sources[1:]:
        ast.parse(cell)
    assert all(f.message.startswith("cell ") for f in result.edits)


def test_cell_magics_writefile_bash_and_time() -> None:
    import ast

    # GIVEN a notebook that writes its training script with %%writefile, installs in %%bash, and times a
    # profiled cell with %%time, next to an %%html cell
    script = (
        "import smprof\nimport torch\n\nP = smprof.SMProfiler.instance()\nP.start_profiling()\n"
        "for b in range(3):\n    with smprof.annotate('s'):\n        torch.ones(1).sum()\nP.stop_profiling()\n"
    )
    text = _notebook(
        "%%writefile train.py\n" + script,
        "%%bash\npip install --quiet smppy torch \\\n"
        "    --extra-index-url https://smppy.s3.amazonaws.com/simple\necho ok",
        "import smppy\nQ = smppy.SMProfiler.instance()",
        "%%time\nQ.start_profiling()\nfor i in range(3):\n    x = i\nQ.stop_profiling()",
        "%%html\n<b>smprof</b>",
    )
    # WHEN rewritten
    result = rewrite_notebook(text)
    sources = _sources(result.source)
    # THEN the written file is the script's own conversion, under its magic line
    assert sources[0].startswith("%%writefile train.py\n")
    assert "torch.profiler.record_function('s')" in sources[0]
    assert "P.step()" in sources[0]
    ast.parse(sources[0].split("\n", 1)[1])
    # AND the shell cell keeps torch and its layout without the Profiler
    assert sources[1] == "%%bash\npip install --quiet torch\necho ok"
    # AND the %%time cell is converted with the rest of the notebook's Python
    assert sources[3].startswith("%%time\nQ.start()\n")
    assert "    Q.step()\n" in sources[3]
    # AND the %%html cell is left alone (and, not being code the tool reads, not reported)
    assert sources[4] == "%%html\n<b>smprof</b>"
    assert result.manual == []
    assert any(f.message.startswith("cell 1 (%%writefile train.py), line ") for f in result.edits)
