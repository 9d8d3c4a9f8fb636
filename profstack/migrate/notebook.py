"""Rewrite a Jupyter notebook's code cells with the same codemods as `.py` files (scripts and launchers).

The cells are read and written with nbformat: outputs, execution counts and metadata stay as they
were; only the `source` of the code cells changes. The codemods see the notebook as one module
(an import in the first cell serves the profiler built in the third), so the code cells are joined,
each behind a marker comment, rewritten once, and split again at the markers. IPython syntax
(`%pip ...`, `!pip ...`, `files = !ls`, `obj?`, a `%%time` first line; profstack.migrate.ipython reads
it by IPython's own rules) becomes placeholder *statements* while the Python is rewritten, so a
`!pip install` that is the only line of an `except:` block still leaves a block that parses, then comes
back byte for byte, except the Profiler's install lines: `%pip install smppy` goes (a `pass` stands in
when it was the only line of its block), `!pip install torch smprof` loses `smprof`, index options
pointing at the Profiler's index go.
Cell magics: `%%time`/`%%timeit`/`%%capture` cells are Python; a `%%writefile train.py` cell is
rewritten as the file it writes (a script, launcher or requirements file, on its own); a `%%bash` cell's
install lines lose the Profiler; other cell magics (`%%html`, ...) are left alone.

A rewrite that would move code across cells (a range begun in one cell and ended in another), or
leave a cell that does not parse on its own, is not made: the notebook is reported cell by cell and
left byte-identical. Every finding names its cell: `cell 3, line 2: ...`.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from profstack.migrate import ipython
from profstack.migrate._cst import CELL_MARKER, Finding, parse_quietly
from profstack.migrate.dependencies import rewrite_install_lines
from profstack.migrate.scan import PYTHON_CELL_MAGICS, SHELL_CELL_MAGICS, notebook_uses

CELL = CELL_MARKER + "{}"
_CELL = re.compile("^" + re.escape(CELL_MARKER) + r"(\d+)$")
_INSTALL = re.compile(r"\b(?:pip3?|conda|mamba)\b.*\binstall\b")


class NotebookError(ValueError):
    """Not a notebook nbformat reads: nothing was rewritten."""


@dataclass
class NotebookResult:
    source: str
    changed: bool
    edits: list[Finding] = field(default_factory=list)
    manual: list[Finding] = field(default_factory=list)


@dataclass
class _Cell:
    index: int  # position among all cells (1-based, as Jupyter numbers them)
    source: str
    read: ipython.Cell | None = None  # the cell as Python, IPython syntax as placeholder statements
    replacements: dict[int, list[str] | None] = field(default_factory=dict)  # install lines without the Profiler
    edits: list[Finding] = field(default_factory=list)

    @property
    def python(self) -> str:
        return self.read.python if self.read is not None else self.source


@dataclass
class _Standalone:
    """A cell rewritten on its own: `%%writefile train.py` (a file of its own), `%%bash` (shell lines)."""

    index: int
    source: str
    new: str
    edits: list[Finding] = field(default_factory=list)
    manual: list[Finding] = field(default_factory=list)


def _cell_magic(source: str) -> str | None:
    first = source.lstrip().split("\n", 1)[0]
    if not first.startswith("%%"):
        return None
    rest = first[2:].split()
    return rest[0] if rest else ""


def _writefile(index: int, source: str, launcher: object | None) -> _Standalone:
    """`%%writefile train.py` + a script (or a requirements file): rewritten as the file it writes."""
    from pathlib import PurePath

    from profstack.migrate.dependencies import kind_of, rewrite_dependencies
    from profstack.migrate.smprof import RewriteError, rewrite_source

    header, _, body = source.partition("\n")
    arguments = [a for a in header.split()[1:] if not a.startswith("-")]
    name = arguments[0] if arguments else ""
    out = _Standalone(index=index, source=source, new=source)
    kind = kind_of(PurePath(name)) if name else None
    try:
        if name.endswith(".py"):
            result: Any = rewrite_source(body, filename=name, launcher=launcher)
        elif kind is not None:
            result = rewrite_dependencies(kind, body)
        else:
            return out
    except RewriteError as exc:
        out.manual.append(Finding(0, f"cell {index}: {exc}"))
        return out
    where = f"cell {index} (%%writefile {name}), line "
    out.edits = [Finding(0, f"{where}{f.line + 1}: {f.message}") for f in result.edits]
    out.manual = [Finding(0, f"{where}{f.line + 1}: {f.message}") for f in result.manual]
    if result.changed:
        out.new = header + "\n" + result.source
    return out


def _shell_cell(index: int, source: str) -> _Standalone:
    """A `%%bash` cell: its `pip install` lines lose the Profiler's packages and index options."""
    from profstack.migrate.dependencies import logical_lines

    out = _Standalone(index=index, source=source, new=source)
    lines: list[str] = []
    for number, logical in logical_lines(source):
        rewritten = rewrite_install_lines(logical) if number > 1 and _INSTALL.search("".join(logical)) else None
        if rewritten is None:
            lines.extend(logical)
            continue
        new, removed = rewritten
        out.edits.append(Finding(0, f"cell {index}, line {number}: removed {', '.join(removed)}"))
        lines.extend(new)
    out.new = "".join(lines)
    return out


def _install_line(special: ipython.Special, cell: _Cell) -> None:
    """A `!pip install` / `%pip install` (its `\\`-continued lines too) without the Profiler's packages and
    index options: kept as written otherwise, or gone when it installed nothing else."""
    if not (special.kind == "automagic" or (special.kind == "escape" and special.escape in {"!", "!!", "%"})):
        return
    command = "".join(special.original)
    if not _INSTALL.search(command):
        return
    rewritten = rewrite_install_lines(special.original)
    if rewritten is None:
        return
    new, removed = rewritten
    number = _line_of(cell, special)
    stripped = special.original[0].strip()
    cell.edits.append(Finding(0, f"cell {cell.index}, line {number}: removed {', '.join(removed)} from `{stripped}`"))
    cell.replacements[special.number] = new or None


def _line_of(cell: _Cell, special: ipython.Special) -> int:
    """The 1-based line of the cell a placeholder stands on."""
    for number, line in enumerate(cell.python.splitlines(), start=1):
        if special.name in line and not line.lstrip().startswith("#"):
            return number
    return 0


def _prepare(cell: _Cell, counter: list[int]) -> str | None:
    """Read the cell as IPython (placeholders numbered on from ``counter``); why it cannot be, or None."""
    try:
        cell.read = ipython.read_cell(cell.source, start=counter[0])
    except ipython.IPythonError as exc:
        return f"cell {cell.index}: {exc}"
    counter[0] += len(cell.read.specials)
    for special in cell.read.specials.values():
        _install_line(special, cell)
    return None


def _cell_of(line: int, starts: list[tuple[int, _Cell]]) -> tuple[_Cell, int]:
    """The cell a line of the joined module belongs to, and the line within that cell."""
    owner, first = starts[0][1], starts[0][0]
    for start, cell in starts:
        if start <= line:
            owner, first = cell, start
    return owner, line - first


def _split(new: str, cells: list[_Cell]) -> dict[int, str] | None:
    """Each cell's new Python (placeholders still in), or None when a cell marker moved or vanished."""
    chunks: dict[int, list[str]] = {}
    current: int | None = None
    order: list[int] = []
    for line in new.splitlines(keepends=True):
        match = _CELL.match(line.rstrip("\r\n"))
        if match is not None:
            current = int(match.group(1))
            order.append(current)
            chunks[current] = []
            continue
        if current is None:
            if line.strip():
                return None  # code before the first cell marker: the codemod put it above the notebook
            continue
        chunks[current].append(line)
    if order != [c.index for c in cells]:
        return None
    return {index: "".join(lines) for index, lines in chunks.items()}


def _read(text: str) -> tuple[Any, str | None]:
    """(the notebook, why it does not validate or None)."""
    import nbformat
    from nbformat.warnings import MissingIDFieldWarning

    reads: Any = nbformat.reads  # untyped
    invalid: dict[str, Exception] = {}
    try:
        with warnings.catch_warnings():  # a 4.5 notebook saved without cell ids is read (and written) as it is
            warnings.simplefilter("ignore", MissingIDFieldWarning)
            notebook = reads(text, as_version=nbformat.NO_CONVERT, capture_validation_error=invalid)
    except Exception as exc:  # nbformat raises JSON, schema-version and key errors of several kinds
        raise NotebookError(f"not a notebook nbformat reads: {_first_line(exc)}") from None
    error = invalid.get("ValidationError")
    return notebook, (_first_line(error) if error is not None else None)


def _first_line(exc: Exception) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def _code_cells(notebook: Any, launcher: object | None) -> tuple[list[_Cell], list[_Standalone], list[Finding]]:
    """The notebook's Python cells (IPython syntax turned into placeholder statements; `%%time`-style cells
    are Python too), the cells rewritten on their own (`%%writefile`, `%%bash`), and why a cell cannot be
    read. Other cell magics (`%%html`, ...) are left alone."""
    cells: list[_Cell] = []
    standalone: list[_Standalone] = []
    unreadable: list[Finding] = []
    counter = [1]
    for index, cell in enumerate(notebook.get("cells", []), start=1):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        magic = _cell_magic(source)
        if cell.get("cell_type") != "code":
            continue
        if magic == "writefile":
            standalone.append(_writefile(index, source, launcher))
        elif magic in SHELL_CELL_MAGICS:
            standalone.append(_shell_cell(index, source))
        elif magic is None or magic in PYTHON_CELL_MAGICS:
            prepared = _Cell(index=index, source=source)
            why = _prepare(prepared, counter)
            if why is not None:
                unreadable.append(Finding(0, why))
            cells.append(prepared)
    return cells, standalone, unreadable


def _join(cells: list[_Cell]) -> tuple[str, list[tuple[int, _Cell]]]:
    """One module of the cells, each behind its marker; (text, (first line, cell) of each)."""
    joined, starts, line = "", [], 1
    for cell in cells:
        body = cell.python if cell.python.endswith("\n") or not cell.python else cell.python + "\n"
        joined += CELL.format(cell.index) + "\n" + body
        starts.append((line + 1, cell))
        line += 1 + body.count("\n")
    return joined, starts


def _restored(cells: list[_Cell], split: dict[int, str]) -> tuple[dict[int, str], list[Finding]]:
    """Each cell's new source, its IPython syntax put back; and the cells that cannot be put back."""
    out: dict[int, str] = {}
    problems: list[Finding] = []
    for cell in cells:
        if cell.read is None:
            out[cell.index] = cell.source
            continue
        back = ipython.restore(split[cell.index], cell.read, cell.replacements)
        if back.text is None:
            problems.append(Finding(0, f"not rewritten: cell {cell.index}: {back.why}"))
            continue
        out[cell.index] = back.text
    return out, problems


def _put_back(data: Any, cells: list[_Cell], sources: dict[int, str], standalone: list[_Standalone]) -> bool:
    """Each cell's new source into the notebook's JSON, stored as the cell stored it; whether any changed."""
    changed = False
    new_sources = {alone.index: alone.new for alone in standalone if alone.new != alone.source}
    new_sources |= {cell.index: sources[cell.index] for cell in cells if sources[cell.index] != cell.source}
    for index, new in new_sources.items():
        cell = data["cells"][index - 1]
        cell["source"] = _as_read(new, cell.get("source"))
        changed = True
    return changed


@dataclass
class _Joined:
    split: dict[int, str]
    edits: list[Finding] = field(default_factory=list)
    manual: list[Finding] = field(default_factory=list)
    refusal: list[Finding] | None = None  # the notebook stays as it was, for these reasons


def _rewrite_cells(cells: list[_Cell], text: str, launcher: object | None) -> _Joined:
    """The Python cells rewritten as one module and split back at their markers."""
    from profstack.migrate.smprof import RewriteError, rewrite_source

    if not cells:
        return _Joined(split={})
    joined, starts = _join(cells)
    try:  # the ProfStack constants go into the cell of the first launcher, above it (not in cell 1)
        result = rewrite_source(joined, filename="<notebook>", launcher=_first_use(launcher))
    except RewriteError as exc:
        why = str(exc).removeprefix("<notebook>:").strip()
        refused = Finding(0, f"not rewritten: the code cells do not parse as Python ({why})")
        return _Joined(split={}, refusal=[*notebook_uses(text), refused])
    manual = [Finding(0, _where(f, starts) + f.message) for f in result.manual]
    if not result.changed and result.manual:  # the Python stays (refused): so do its install lines
        return _Joined(split={}, refusal=sorted(set(manual + _magics_left(text))))
    split = _split(result.source, cells) if result.changed else {c.index: c.python for c in cells}
    problem = _cells_that_break(split, cells)
    if problem:
        return _Joined(split={}, refusal=[*notebook_uses(text), Finding(0, problem)])
    assert split is not None
    edits = [Finding(0, _where(f, starts) + f.message) for f in result.edits]
    edits += [finding for cell in cells for finding in cell.edits]
    return _Joined(split=split, edits=edits, manual=manual)


def _first_use(launcher: object | None) -> object:
    import dataclasses

    from profstack.migrate.launcher import LauncherOptions

    options = launcher if isinstance(launcher, LauncherOptions) else LauncherOptions()
    return dataclasses.replace(options, constants_at="first-use")


def _dumps(data: Any, original: str) -> str:
    """The notebook's JSON in the layout it was read in (Jupyter's: one-space indent, keys in their order,
    non-ASCII as is), so that only the edited sources differ: nbformat's writer would also add an `id`
    (random) to every cell of a 4.5 notebook saved without them."""
    second = original.split("\n", 2)[1] if original.count("\n") >= 2 else ""
    indent = len(second) - len(second.lstrip(" ")) or 1
    ascii_only = original.isascii() and bool(re.search(r"\\u[0-9a-fA-F]{4}", original))
    written = json.dumps(data, indent=indent, separators=(",", ": "), ensure_ascii=ascii_only)
    if original.endswith("\n") and not written.endswith("\n"):
        written += "\n"
    return written


def _as_read(new: str, old: object) -> object:
    """A cell source in the form it was stored: a list of lines (Jupyter's) or one string."""
    return new.splitlines(keepends=True) if isinstance(old, list) else new


def rewrite_notebook(text: str, *, launcher: object | None = None) -> NotebookResult:
    """Rewrite the notebook's code cells; raises NotebookError when nbformat cannot read it."""
    notebook, invalid = _read(text)
    if invalid is not None:  # nbformat would write it back changed (or not at all): report, never edit
        uses = notebook_uses(text)
        why = f"not rewritten: the notebook does not validate ({invalid}); open and save it in Jupyter, then rerun"
        return NotebookResult(source=text, changed=False, manual=[*uses, Finding(0, why)] if uses else [])
    cells, standalone, unreadable = _code_cells(notebook, launcher)
    if unreadable:
        return NotebookResult(source=text, changed=False, manual=[*notebook_uses(text), *unreadable])
    joined = _rewrite_cells(cells, text, launcher)
    if joined.refusal is not None:
        return NotebookResult(source=text, changed=False, manual=joined.refusal)
    sources, problems = _restored(cells, joined.split)
    if problems:
        return NotebookResult(source=text, changed=False, manual=[*notebook_uses(text), *problems])
    manual = joined.manual + [finding for alone in standalone for finding in alone.manual]
    data = json.loads(text)  # written back as read: only the changed cells' sources differ
    if not _put_back(data, cells, sources, standalone):
        return NotebookResult(source=text, changed=False, manual=sorted(set(manual + _magics_left(text))))
    written = _dumps(data, text)
    edits = joined.edits + [finding for alone in standalone for finding in alone.edits]
    return NotebookResult(source=written, changed=True, edits=edits, manual=sorted(set(manual + _magics_left(written))))


def _magics_left(text: str) -> list[Finding]:
    """Magic and shell lines that still name the Profiler (the Python is checked by the rewrite itself)."""
    return [f for f in notebook_uses(text) if "magic or pip line" in f.message]


def _where(finding: Finding, starts: list[tuple[int, _Cell]]) -> str:
    if finding.line <= 0:
        return ""
    cell, line = _cell_of(finding.line, starts)
    return f"cell {cell.index}, line {line + 1}: "


def _cells_that_break(split: dict[int, str] | None, cells: list[_Cell]) -> str | None:
    """Why the rewrite cannot be split back into these cells, or None."""
    if split is None:
        return "not rewritten: the rewrite would move code across cells; convert it by hand or export to .py"
    broken = []
    for cell in cells:
        try:
            parse_quietly(split[cell.index])
        except SyntaxError:
            broken.append(str(cell.index))
    if broken:
        return (
            f"not rewritten: cell {', '.join(broken)} would not run on its own after the rewrite (a range or "
            "block spans cells); keep each begin/end in one cell, then rerun"
        )
    return None
