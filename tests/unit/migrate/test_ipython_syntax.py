"""#46 item 2: any valid IPython cell is read as Python (placeholder statements), and put back byte for byte.

The cases below were checked against IPython 8.12's own TransformerManager (inputtransformer2): each cell
it turns into valid Python is valid Python here, with the same lines taken as IPython syntax.
"""

from __future__ import annotations

import ast
import json

import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nbformat.v4 import new_code_cell, new_notebook

from profstack.migrate.ipython import IPythonError, read_cell, restore
from profstack.migrate.notebook import rewrite_notebook
from profstack.migrate.scan import notebook_uses

# (cell, the kinds of IPython syntax in it, in order, with their escape)
CASES = [
    (
        "try:\n    !pip install -U awswrangler\nexcept ModuleNotFoundError:\n    !pip install --no-input awswrangler",
        [("escape", "!"), ("escape", "!")],
    ),
    (
        "%matplotlib inline\nimport os\nfiles = !ls -la\nx = %env HOME\n",
        [("escape", "%"), ("system-assign", "!"), ("magic-assign", "%")],
    ),
    (
        "obj?\nos.path??\n?os\n??os.path\n!!ls\n%time x = 1\n",
        [("help", "?"), ("help", "??"), ("escape", "?"), ("escape", "??"), ("escape", "!!"), ("escape", "%")],
    ),
    ("if True:\n    !pip install a \\\n        b \\\n        c\n    y = 2\n", [("escape", "!")]),
    ("%%time\nx = 1\n", [("cell-magic", "%%")]),
    ("/print 1 2\n,print a b\n;print a b\n", [("escape", "/"), ("escape", ","), ("escape", ";")]),
    ('def f():\n    !echo "unterminated\n    return 1\n', [("escape", "!")]),
    ("for i in range(3):\n    %time f(i)\n", [("escape", "%")]),
    ("%magic?\n", [("help", "?")]),
    ("while x:\n    x = !cat f\r\n    break\r\n", [("system-assign", "!")]),
    # valid Python that only looks special: never touched
    ("x = (10\n% 3)\nx!=1\ns = '!not a magic'\n# !comment\nt = '''\n!in a string\n'''\n", []),
]


@pytest.mark.parametrize(("source", "kinds"), CASES, ids=range(len(CASES)))
def test_ipython_syntax_becomes_statements_and_comes_back_byte_for_byte(
    source: str, kinds: list[tuple[str, str]]
) -> None:
    # GIVEN a cell of valid IPython WHEN read
    cell = read_cell(source)
    # THEN its Python parses, one placeholder per piece of IPython syntax, every line where it was
    ast.parse(cell.python)
    assert [(s.kind, s.escape) for s in cell.specials.values()] == kinds
    assert cell.python.count("\n") == source.count("\n")
    # AND it comes back byte for byte, unchanged or after a rewrite that touched other lines
    assert restore(cell.python, cell).text == source
    edited = cell.python + ("\n" if not cell.python.endswith("\n") else "") + "added = 1\n"
    back = restore(edited, cell).text
    assert back is not None
    assert back.startswith(source.rstrip("\n"))
    assert back.rstrip("\n").endswith("added = 1")


def test_a_pasted_session_and_an_indented_cell_are_read_and_kept() -> None:
    for source in (">>> x = 1\n>>> y = 2\n", "In [1]: x = 1\n   ...: y = 2\n", "  x = 1\n  !ls\n"):
        cell = read_cell(source)
        ast.parse(cell.python)
        assert restore(cell.python, cell).text == source
        # a rewrite of such a cell cannot be put back line for line: refused, with the change to make
        refused = restore(cell.python + "z = 3\n", cell)
        assert refused.text is None
        assert "dedent" in refused.why or "prompts" in refused.why


def test_a_moved_placeholder_keeps_its_line_and_an_edited_one_is_refused() -> None:
    cell = read_cell("!nvidia-smi \\\n  --query\nx = 1\n")
    # GIVEN the rewrite moved the placeholder into a `with` block (its continuation comment too)
    moved = "with ctx():\n" + "".join("    " + line for line in cell.python.splitlines(keepends=True))
    # THEN the command comes back there, each of its lines indented as far as the block
    assert restore(moved, cell).text == "with ctx():\n    !nvidia-smi \\\n      --query\n    x = 1\n"
    # AND a placeholder the rewrite edited cannot be put back: refused, never guessed
    edited = cell.python.replace("_profstack_ipython_1_\n", "y = _profstack_ipython_1_\n", 1)
    assert restore(edited, cell).text is None


def test_hostile_cells_stay_bounded() -> None:
    with pytest.raises(IPythonError):
        read_cell("!ls\n" * 10_001)


# --- generated cells: Python blocks holding IPython lines at any depth -----------------------------

_IPYTHON_LINES = st.sampled_from(
    [
        "!pip install torch",
        "%pip install -q datasets",
        "!!ls",
        "%time f()",
        "out = !ls -la",
        "env = %env",
        "obj?",
        "?obj",
        "os.path??",
        "!echo 'a' \\\n    'b'",
        "/print 1 2",
    ]
)
_PYTHON_LINES = st.sampled_from(["x = 1", "f(x)", "y = {'a': '!b'}", "z = (1,\n     2)", "pass"])
_HEADERS = st.sampled_from(["if x:", "try:", "except Exception:", "for i in y:", "while False:", "with c:", "else:"])


@st.composite
def cells(draw: st.DrawFn) -> str:
    lines: list[str] = []
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        header = draw(st.one_of(st.none(), _HEADERS))
        body = draw(st.lists(st.one_of(_IPYTHON_LINES, _PYTHON_LINES), min_size=1, max_size=3))
        if header is None:
            lines.extend(body)
            continue
        if header == "except Exception:":
            lines.append("try:")
            lines.append("    pass")
        if header == "else:":
            lines.append("if y:")
            lines.append("    pass")
        lines.append(header)
        lines.extend("    " + line.replace("\n", "\n    ") for line in body)
        if header == "try:":
            lines.extend(["finally:", "    pass"])
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    text = ending.join(lines)
    return text + (ending if draw(st.booleans()) else "")


@settings(max_examples=150, deadline=None)
@given(source=cells())
def test_any_generated_cell_parses_and_round_trips(source: str) -> None:
    # GIVEN a cell of Python blocks whose only line may be IPython syntax WHEN read
    cell = read_cell(source)
    # THEN it parses as Python, its lines where they were, and it comes back byte for byte
    ast.parse(cell.python)
    assert len(cell.python.splitlines()) == len(source.splitlines())
    assert restore(cell.python, cell).text == source


# --- whole notebooks --------------------------------------------------------------------------------


def _notebook(*sources: str) -> str:
    return nbformat.writes(new_notebook(cells=[new_code_cell(s) for s in sources])) + "\n"


def _sources(text: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(text)["cells"]]


def test_a_pip_install_alone_in_an_except_block_is_converted() -> None:
    # GIVEN AWS's pattern: `!pip install` as the only line of a try and its except (before: "does not parse")
    text = _notebook(
        "try:\n    import smprof\nexcept ImportError:\n    !pip install smprof\n",
        "if not os.path.exists('x'):\n    !pip install -q torch\nprof = smprof.SMProfiler.instance()\n"
        "prof.start_profiling()\nfor step in range(3):\n    loss.backward()\nprof.stop_profiling()\n",
    )
    # WHEN rewritten
    result = rewrite_notebook(text)
    # THEN it converts: the install that only installed the Profiler leaves a `pass`, the other stays
    assert result.changed, result.manual
    assert [f for f in result.manual if "needs review" in f.message or "not rewritten" in f.message] == []
    first, second = _sources(result.source)
    assert "!pip install" not in first
    assert "    !pip install -q torch\n" in second
    assert notebook_uses(result.source) == []
    for source in (first, second):
        ast.parse(read_cell(source).python)


def test_the_only_line_of_a_block_going_leaves_pass() -> None:
    text = _notebook("import os\nif os.environ.get('SM'):\n    %pip install smppy\nprint('ready')")
    result = rewrite_notebook(text)
    (cell,) = _sources(result.source)
    assert cell == "import os\nif os.environ.get('SM'):\n    pass\nprint('ready')"


def test_a_one_line_automagic_cell_is_a_magic_and_python_stays_python() -> None:
    # GIVEN one-line cells IPython runs through automagic (AWS's `pip install sagemaker --upgrade`)
    for source in ("pip install sagemaker --upgrade", "cd ..\n", "store model_data"):
        cell = read_cell(source)
        assert [s.kind for s in cell.specials.values()] == ["automagic"]
        ast.parse(cell.python)
        assert restore(cell.python, cell).text == source
    # AND lines that are Python (an assignment, a call, a bare name, two lines) stay Python
    for source in ("pip = 1", "time.sleep(1)", "pwd", "ls -l\nx = 1\n"):
        assert read_cell(source).specials == {}


def test_an_automagic_install_of_the_profiler_is_removed() -> None:
    result = rewrite_notebook(_notebook("pip install smprof", "import torch"))
    assert _sources(result.source)[0] == ""
    assert notebook_uses(result.source) == []
