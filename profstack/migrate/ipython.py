"""IPython's special syntax in a notebook cell, as placeholder statements the Python codemods can parse.

A code cell is IPython, not Python: `!pip install x`, `%matplotlib inline`, `files = !ls`, `x = %env`,
`obj?`, `?obj`, `!!cmd`, the autocall escapes (`/f 1 2`, `,f a b`, `;f a b`) and a `%%magic` first line.
Such a line can stand anywhere a statement can, also as the only line of an `except:` or `if` block, so
turning it into a comment (as this codemod once did) empties the block and the cell no longer parses.
Here each one becomes a *statement*: `_profstack_ipython_7_` (or `files = _profstack_ipython_7_` for an
assignment), one line per original physical line (the extra lines are comments), so every line number
still points at the same line of the cell. `restore` puts the original text back byte for byte.

What counts as special syntax follows IPython's own rules (IPython.core.inputtransformer2, IPython 7+,
BSD-3-Clause; read, not copied): the cell is tokenized as Python and grouped into logical lines (a
bracketed expression or a `\\`-continued line is one), and the earliest of these is taken, one at a time,
re-tokenizing after each (the tokens after IPython syntax are not reliable):

- an escaped command: the first token of a logical line (after its indentation) is `!`, `?`, `%`, `,`,
  `;` or `/` (`!!` and `??` included); it runs to the end of its `\\`-continued physical lines;
- a magic or system assignment: `target = %magic ...` / `target = !cmd ...` (the first `=` outside brackets);
- a help request: a logical line ending in `?` or `??` whose text before it is a dotted name (`obj.attr?`);
  checked before the escaped command at the same place, so `%magic?` is a help request, as in IPython;
- a `%%magic` first line (the cell magic's body is the caller's business);
- automagic: a one-line cell that starts with a line magic's name and is not Python (`pip install x`),
  which IPython's prefilter runs as `%pip install x`.

IPython also strips a whole-cell indentation and pasted prompts (`>>> `, `In [3]: `) before it reads a
cell. A cell like that is read the same way here, and `restore` puts the indentation and prompts back
when the cell's Python was not changed; a cell whose Python the codemod changes is refused (reported).
"""

from __future__ import annotations

import ast
import itertools
import re
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from profstack.migrate._cst import parse_quietly

PLACEHOLDER = "_profstack_ipython_{}_"
_PLACEHOLDER = re.compile(r"_profstack_ipython_(\d+)_")
_CONTINUED = re.compile(r"^[ \t]*#[ \t]*_profstack_ipython_(\d+)_ continued[ \t]*$")
ESCAPES = frozenset({"!", "?", "%", ",", ";", "/"})
#: IPython's line magics and shell aliases, run without `%` when a one-line cell starts with them (automagic)
AUTOMAGICS = frozenset(
    [
        "alias",
        "alias_magic",
        "autoawait",
        "autocall",
        "automagic",
        "bookmark",
        "cat",
        "cd",
        "colors",
        "conda",
        "config",
        "cp",
        "debug",
        "dhist",
        "dirs",
        "doctest_mode",
        "ed",
        "edit",
        "env",
        "gui",
        "hist",
        "history",
        "killbgscripts",
        "ldir",
        "lf",
        "lk",
        "ll",
        "load",
        "load_ext",
        "loadpy",
        "logoff",
        "logon",
        "logstart",
        "logstate",
        "logstop",
        "ls",
        "lsmagic",
        "lx",
        "macro",
        "magic",
        "mamba",
        "matplotlib",
        "micromamba",
        "mkdir",
        "mv",
        "notebook",
        "page",
        "pastebin",
        "pdb",
        "pdef",
        "pdoc",
        "pfile",
        "pinfo",
        "pinfo2",
        "pip",
        "popd",
        "pprint",
        "precision",
        "prun",
        "psearch",
        "psource",
        "pushd",
        "pwd",
        "pycat",
        "pylab",
        "quickref",
        "recall",
        "rehashx",
        "reload_ext",
        "rep",
        "rerun",
        "reset",
        "reset_selective",
        "rm",
        "rmdir",
        "run",
        "save",
        "sc",
        "set_env",
        "store",
        "sx",
        "system",
        "tb",
        "time",
        "timeit",
        "unalias",
        "unload_ext",
        "uv",
        "who",
        "who_ls",
        "whos",
        "xdel",
        "xmode",
    ]
)
_HELP_TARGET = re.compile(r"%{0,2}[A-Za-z_*][\w*]*(?:\.[A-Za-z_*][\w*]*|\[-?[0-9]+\])*(\?\??)$")
_PROMPT_CLASSIC_FIRST = re.compile(r"^>>>( |$)")
_PROMPT_CLASSIC = re.compile(r"^(>>>|\.\.\.)( |$)")
_PROMPT_IPYTHON = re.compile(r"^(((\[nav\]|\[ins\])? )?In \[\d+\]: |\s*\.{3,}: ?)")
_INDENT = re.compile(r"^[ \t]+")
MAX_SPECIALS = 10_000  # one cell
TOKEN_BUDGET = 1_000_000  # tokens read for one cell, all passes together (a few seconds at worst)


class IPythonError(ValueError):
    """The cell cannot be read as IPython (its special syntax could not be told apart)."""


@dataclass
class Special:
    """One piece of IPython syntax: the physical lines it spans, as written, and what stands in for them."""

    number: int
    kind: str  # "escape", "magic-assign", "system-assign", "help", "cell-magic", "automagic"
    original: list[str]  # its physical lines, byte for byte (endings included)
    head: str  # the placeholder line's text before the name: indentation, or `target = ` for an assignment
    escape: str = ""  # `!`, `!!`, `%`, `?`, ...: what the command starts with
    command: str = ""  # the command after the escape, its `\\`-continued lines joined (IPython's reading)

    @property
    def name(self) -> str:
        return PLACEHOLDER.format(self.number)

    def python(self, ending: str = "\n") -> list[str]:
        """The lines that stand in for it: the placeholder statement, then one comment per extra line."""
        indent = self.head[: len(self.head) - len(self.head.lstrip())]
        extra = [f"{indent}# {self.name} continued{ending}" for _ in self.original[1:]]
        return [f"{self.head}{self.name}{ending}", *extra]


@dataclass
class Cell:
    """A cell read as IPython: its Python (placeholders in), and what `restore` needs."""

    source: str
    python: str
    specials: dict[int, Special] = field(default_factory=dict)
    cleanup: str | None = None  # "indented" / "prompts": the cell was cleaned before it was read


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _logical_lines(lines: Iterable[str], budget: list[int]) -> Iterator[list[tokenize.TokenInfo]]:
    """Tokens grouped into logical lines (brackets and `\\` continuations joined), as IPython groups them,
    lazily: the caller stops at the first line it needs. Tokenizing stops quietly where IPython syntax
    makes the rest untokenizable (an unclosed quote in a shell command): the part before it is what the
    next step needs. ``budget`` counts tokens across calls (hostile cells stay bounded in time)."""
    line: list[tokenize.TokenInfo] = []
    depth = 0
    try:
        for token in tokenize.generate_tokens(iter(lines).__next__):
            budget[0] -= 1
            if budget[0] < 0:
                raise IPythonError(f"the cell's IPython syntax takes more than {TOKEN_BUDGET} tokens to read")
            line.append(token)
            if token.type == tokenize.NEWLINE or (token.type == tokenize.NL and depth <= 0):
                yield line
                line = []
            elif token.string in {"(", "[", "{"}:
                depth += 1
            elif token.string in {")", "]", "}"} and depth > 0:
                depth -= 1
    except (tokenize.TokenError, SyntaxError):  # 3.12+ raises SyntaxError for some IPython tokens
        pass
    if line:
        yield line


def _first(line: list[tokenize.TokenInfo]) -> int | None:
    index = 0
    while index < len(line) and line[index].type in {tokenize.INDENT, tokenize.DEDENT}:
        index += 1
    return index if index < len(line) and line[index].type not in {tokenize.NL, tokenize.NEWLINE} else None


def _assign_index(line: list[tokenize.TokenInfo]) -> int | None:
    """The first `=` outside brackets."""
    depth = 0
    for index, token in enumerate(line):
        if token.string == "=" and depth == 0:
            return index
        if token.string in {"(", "[", "{"}:
            depth += 1
        elif token.string in {")", "]", "}"} and depth > 0:
            depth -= 1
    return None


@dataclass(order=True)
class _Found:
    line: int  # 0-based physical line
    col: int
    priority: int
    kind: str = field(compare=False)
    end_line: int = field(compare=False, default=-1)  # help requests: the line of the `?`


def _candidates(line: list[tokenize.TokenInfo]) -> list[_Found]:
    """The IPython syntax one logical line starts (earliest first; a help request before an escaped command
    at the same place, so `%magic?` asks for help, as in IPython)."""
    found: list[_Found] = []
    for kind, finder in (("magic-assign", _magic_assign), ("system-assign", _system_assign)):
        hit = finder(line)
        if hit is not None:
            found.append(_Found(hit[0] - 1, hit[1], 10, kind))
    first = _first(line)
    if first is not None and line[first].string in ESCAPES:
        start = line[first].start
        found.append(_Found(start[0] - 1, start[1], 10, "escape"))
    if first is not None and len(line) > 2 and line[-2].string == "?":
        start = line[first].start
        found.append(_Found(start[0] - 1, start[1], 5, "help", end_line=line[-2].start[0] - 1))
    return sorted(found)


def _magic_assign(line: list[tokenize.TokenInfo]) -> tuple[int, int] | None:
    at = _assign_index(line)
    if at is not None and len(line) > at + 2 and line[at + 1].string == "%" and line[at + 2].type == tokenize.NAME:
        return line[at + 1].start
    return None


def _system_assign(line: list[tokenize.TokenInfo]) -> tuple[int, int] | None:
    at = _assign_index(line)
    if at is None or line[at].line.strip().startswith("="):
        return None
    for token in line[at + 1 :]:
        if token.string == "!":  # an ERRORTOKEN before 3.12, an OP after
            return token.start
        if token.type != tokenize.ERRORTOKEN or not token.string.isspace():
            return None
    return None


def _continued_end(lines: list[str], start: int) -> int:
    """The last physical line of a `\\`-continued line."""
    end = start
    while end < len(lines) - 1 and lines[end].rstrip("\r\n").endswith("\\"):
        end += 1
    return end


def _joined(lines: list[str], start: int, col: int, end: int) -> str:
    """The command as IPython reads it: the continued pieces joined by spaces, backslashes dropped."""
    parts = [lines[start][col:], *lines[start + 1 : end + 1]]
    head = [p.rstrip("\r\n").rstrip()[:-1] for p in parts[:-1]]
    return " ".join([*head, parts[-1].rstrip()])


def _escape_of(command: str) -> tuple[str, str]:
    if command[:2] in {"!!", "??", "%%"}:
        return command[:2], command[2:]
    return command[:1], command[1:]


@dataclass(frozen=True)
class _Restart:
    line: int  # 0-based physical line a logical line starts on
    indents: tuple[str, ...]  # the indentation levels open there (INDENT tokens' text)


class _Reader:
    def __init__(self, start: int) -> None:
        self.next_number = start
        self.specials: dict[int, Special] = {}
        self.budget = [TOKEN_BUDGET]

    def special(self, kind: str, original: list[str], head: str, command: str = "") -> Special:
        escape, rest = _escape_of(command) if command else ("", "")
        special = Special(self.next_number, kind, original, head, escape, rest)
        self.specials[special.number] = special
        self.next_number += 1
        return special

    def one(self, lines: list[str], restart: _Restart) -> tuple[list[str], _Restart] | None:
        """The lines with the earliest piece of IPython syntax replaced, and where to read from next time;
        None when there is none left. What follows IPython syntax does not tokenize reliably, so after each
        replacement the cell is read again, as IPython does, but only from the logical line that held it:
        the lines above are Python already, and the tokenizer is put back in the state it had there (its
        indentation levels, rebuilt by `if 1:` lines that are read and dropped). Linear in the cell, and
        bounded by TOKEN_BUDGET in any case."""
        prefix = [f"{outer}if 1:\n" for outer in ["", *restart.indents[:-1]]] if restart.indents else []
        shift = restart.line - len(prefix)
        indents: list[str] = []
        rest = (lines[i] for i in range(restart.line, len(lines)))
        for line in _logical_lines(itertools.chain(prefix, rest), self.budget):
            for token in line:
                if token.type == tokenize.INDENT:
                    indents.append(token.string)
                elif token.type == tokenize.DEDENT and indents:
                    indents.pop()
            if line[-1].end[0] <= len(prefix):
                continue  # the lines that only rebuild the indentation
            for hit in _candidates(line):
                hit.line += shift
                hit.end_line = hit.end_line + shift if hit.end_line >= 0 else -1
                replaced = self._replace(lines, hit)
                if replaced is not None:
                    return replaced, _Restart(line[0].start[0] - 1 + shift, tuple(indents))
        return None

    def _replace(self, lines: list[str], hit: _Found) -> list[str] | None:
        start, col = hit.line, hit.col
        if hit.kind == "help":
            end = hit.end_line
            content = "".join(lines[start : end + 1])[col:].rstrip("\r\n")
            if not _HELP_TARGET.search(content.strip()):
                return None  # IPython rejects it too (SyntaxError): not a help request
            special = self.special("help", lines[start : end + 1], lines[start][:col])
            special.command = content
            special.escape = "??" if content.endswith("??") else "?"
        else:
            end = _continued_end(lines, start)
            command = _joined(lines, start, col, end)
            head = lines[start][:col]
            if hit.kind != "escape":
                head = head.rstrip() + " "  # `files = !ls` -> `files = _profstack_ipython_3_`
            special = self.special(hit.kind, lines[start : end + 1], head, command)
        ending = _ending(lines[end])
        lines[start : end + 1] = special.python(ending or "\n")
        return lines


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")) :]


def _cleanup(lines: list[str]) -> tuple[list[str], str | None]:
    """IPython's whole-cell cleanups: a common leading indentation, pasted `>>>` / `In [n]:` prompts."""
    body = [line for line in lines if line.strip()]
    if not body:
        return lines, None
    indent = _INDENT.match(body[0])
    if indent is not None:
        prefix = indent.group(0)
        return [line[len(prefix) :] if line.startswith(prefix) else line for line in lines], "indented"
    if _PROMPT_CLASSIC_FIRST.match(body[0]) or (len(body) > 1 and _PROMPT_CLASSIC.match(body[1])):
        return [_PROMPT_CLASSIC.sub("", line, count=1) for line in lines], "prompts"
    if _PROMPT_IPYTHON.match(body[0]) or (len(body) > 1 and _PROMPT_IPYTHON.match(body[1])):
        return [_PROMPT_IPYTHON.sub("", line, count=1) for line in lines], "prompts"
    return lines, None


def read_cell(source: str, *, start: int = 1) -> Cell:
    """The cell as Python: each piece of IPython syntax a placeholder statement numbered from ``start``."""
    lines = _lines(source)
    lines, cleanup = _cleanup(lines)
    if lines and not _ending(lines[-1]):
        lines[-1] += "\n"  # tokenize needs the last line ended; `restore` drops it again
    reader = _Reader(start)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        special = reader.special("cell-magic", [lines[first]], "", lines[first].strip())
        lines[first : first + 1] = special.python(_ending(lines[first]))
    restart = _Restart(0, ())
    for _ in range(MAX_SPECIALS + 1):
        found = reader.one(lines, restart)
        if found is None:
            break
        lines, restart = found
    else:
        raise IPythonError(f"more than {MAX_SPECIALS} IPython lines in one cell")
    _automagic(lines, reader)
    python = "".join(lines)
    if not source.endswith(("\n", "\r")) and python.endswith("\n"):
        python = python[:-1]
    return Cell(source=source, python=python, specials=reader.specials, cleanup=cleanup)


def _automagic(lines: list[str], reader: _Reader) -> None:
    """IPython runs a one-line cell `pip install x` as `%pip install x` (automagic, its prefilter: only for
    single-line input, only a line magic's name, never an assignment `pip = 1` or a call). Taken as a magic
    only when the line is not Python already."""
    body = [i for i, line in enumerate(lines) if line.strip()]
    if len(body) != 1:
        return
    line = lines[body[0]]
    word = re.match(r"[ \t]*([A-Za-z_]\w*)(.*)", line.rstrip("\r\n"))
    if word is None or word.group(1) not in AUTOMAGICS or re.match(r"[.(\[]|\s*=(?!=)", word.group(2)):
        return
    try:
        parse_quietly(line.strip())
    except SyntaxError:
        indent = line[: len(line) - len(line.lstrip())]
        special = reader.special("automagic", [line], indent)
        special.command = line.strip()
        lines[body[0]] = special.python(_ending(line) or "\n")[0]


def to_python(source: str) -> str:
    """The cell's Python, placeholders in (for checks that only read it)."""
    return read_cell(source).python


@dataclass
class Restored:
    text: str | None  # None: a placeholder was edited or moved, the cell cannot be put back
    why: str = ""


def restore(python: str, cell: Cell, replacements: dict[int, list[str] | None] | None = None) -> Restored:
    """The cell's source again: each placeholder line gives back its original lines (re-indented when the
    codemod moved the statement into a block), or ``replacements[number]`` (None: the line goes; a
    `pass` stands in when it was the only statement of its block)."""
    if python == cell.python and not replacements:
        return Restored(cell.source)
    if cell.cleanup is not None:
        return Restored(None, f"the cell is {_CLEANUP_WORDS[cell.cleanup]}; {_CLEANUP_FIX[cell.cleanup]}, then rerun")
    replacements = replacements or {}
    lonely = _only_statements(python, {n for n, r in replacements.items() if r is None})
    out: list[str] = []
    for line in _lines(python):
        bare = line.rstrip("\r\n")
        if _CONTINUED.match(bare):
            continue
        match = _PLACEHOLDER.search(bare)
        if match is None:
            out.append(line)
            continue
        special = cell.specials.get(int(match.group(1)))
        if special is None:
            return Restored(None, "an IPython line was edited by the rewrite")
        placed = _placed(bare, special)
        if placed is None:
            return Restored(None, f"the rewrite edited the IPython line `{special.original[0].strip()}`")
        indent = placed
        if special.number in replacements:
            new = replacements[special.number]
            if new is None:
                if special.number in lonely:
                    out.append(indent + "pass" + (_ending(line) or "\n"))
                continue
            out.extend(_reindent(new, special, indent))
            continue
        out.extend(_reindent(special.original, special, indent))
    text = "".join(out)
    if cell.source and not cell.source.endswith(("\n", "\r")) and text.endswith("\n"):
        text = text[:-1]
    return Restored(text)


_CLEANUP_WORDS = {"indented": "indented as a whole", "prompts": "a pasted session with `>>>`/`In [n]:` prompts"}
_CLEANUP_FIX = {"indented": "dedent it", "prompts": "remove the prompts"}


def _placed(bare: str, special: Special) -> str | None:
    """The indentation the placeholder line has now, or None when its text was edited."""
    expected = special.head.lstrip() + special.name
    stripped = bare.lstrip()
    if stripped.rstrip() != expected.rstrip():
        return None
    return bare[: len(bare) - len(stripped)]


def _reindent(lines: list[str], special: Special, indent: str) -> list[str]:
    """The original lines, moved to ``indent`` when the statement was moved into (or out of) a block."""
    head = special.head
    old = head[: len(head) - len(head.lstrip())]
    if indent == old or not lines:
        return list(lines)
    first = indent + lines[0][len(old) :] if lines[0].startswith(old) else lines[0]
    rest = [indent + line[len(old) :] if line.startswith(old) and line.strip() else line for line in lines[1:]]
    return [first, *rest]


def _only_statements(python: str, dropped: set[int]) -> set[int]:
    """Of the placeholders that go, those that would leave their block empty (the first of each such block)."""
    if not dropped:
        return set()
    try:
        tree = parse_quietly(python)
    except SyntaxError:
        return set(dropped)  # cannot tell: a `pass` where each went is always valid
    lonely: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module):
            continue
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if not isinstance(body, list) or not body:
                continue
            numbers = [_placeholder_number(s) for s in body]
            if all(n is not None and n in dropped for n in numbers):
                first = numbers[0]
                assert first is not None
                lonely.add(first)
    return lonely


def _placeholder_number(statement: ast.stmt) -> int | None:
    value = statement.value if isinstance(statement, ast.Expr | ast.Assign) else None
    if isinstance(value, ast.Name):
        match = _PLACEHOLDER.fullmatch(value.id)
        return int(match.group(1)) if match else None
    return None
