"""Remove what installs SageMaker Profiler (smprof / smppy) from requirements, Dockerfiles, pyproject
(PEP 621 arrays and Poetry tables), setup.cfg, Pipfile and conda environment files.

A line is removed only when it installs nothing else: a requirement line for smprof/smppy (with its
`\\` continuation lines, e.g. `--hash=`), a wheel URL from smppy's S3 bucket, a Dockerfile
`RUN pip install` whose packages are all Profiler packages, a pyproject/setup.cfg dependency entry on
a line of its own. In a `pip install` that also installs other packages, only the Profiler tokens go.
Anything else that names the Profiler (an ARG/ENV holding the wheel URL, a COPY of the wheel, an
inline TOML array, a `RUN` chain with other commands) is reported, not edited.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath

from profstack.migrate._cst import Finding

PACKAGES = ("smprof", "smppy")
_NAME = r"(?:smprof|smppy)"
# smppy's wheels: https://smppy.s3.amazonaws.com/<framework>/<cuda>/smprof-<ver>-<tags>.whl
_WHEEL = re.compile(r"(?:https?://[^\s\"']*smppy[^\s\"']*|[^\s\"']*\b" + _NAME + r"-[^\s\"']*\.whl)", re.I)
_REQUIREMENT = re.compile(r"^\s*" + _NAME + r"(?![\w.-])\s*(?:\[[^\]]*\])?\s*(?:[<>=!~;@].*)?$", re.I)
_MENTION = re.compile(_NAME, re.I)  # anywhere: `SMPROF_WHEEL` in an ARG counts
# pip install options that take no value: a Profiler token after one of these is a package; after any
# other option (`-i`, `--index-url`, `-f`, `-c`, ...) it is that option's value and the line is reported
PIP_FLAGS = frozenset(
    {
        "-U",
        "--upgrade",
        "--user",
        "-q",
        "--quiet",
        "-v",
        "--verbose",
        "--no-cache-dir",
        "--no-deps",
        "--force-reinstall",
        "--pre",
        "-I",
        "--ignore-installed",
        "--no-build-isolation",
        "--break-system-packages",
        "--no-compile",
        "--compile",
        "--no-warn-script-location",
        "--disable-pip-version-check",
        "--require-hashes",
        "--no-index",
        "--isolated",
        "--prefer-binary",
    }
)


@dataclass
class DependencyResult:
    source: str
    changed: bool
    edits: list[Finding] = field(default_factory=list)
    manual: list[Finding] = field(default_factory=list)


def kind_of(path: PurePath) -> str | None:
    """Which rewriter a file needs, from its name."""
    name = path.name.lower()
    if name == "pyproject.toml":
        return "pyproject"
    if name == "setup.cfg":
        return "setup.cfg"
    if name == "pipfile":
        return "pipfile"
    if name in {"environment.yml", "environment.yaml"} or (name.endswith((".yml", ".yaml")) and "conda" in name):
        return "conda"
    if name == "dockerfile" or name.startswith("dockerfile.") or name.endswith(".dockerfile"):
        return "dockerfile"
    if name.endswith((".txt", ".in")) and ("requirements" in name or "constraints" in name):
        return "requirements"
    return None


_INCLUDE = re.compile(r"^\s*(?:-r|-c|--requirement|--constraint)(?:\s*=\s*|\s+)(?P<path>[^\s#]+)")


def included_files(text: str) -> list[str]:
    """The files a requirements file includes (`-r base.txt`, `--constraint=pins.txt`), as written.
    URLs are not files."""
    out = []
    for line in text.splitlines():
        match = _INCLUDE.match(line)
        if match and "://" not in match.group("path"):
            out.append(match.group("path"))
    return out


def is_requirement(text: str) -> bool:
    """A requirement specifier for smprof/smppy (`smprof>=0.3`, `smppy==0.3; python_version<'3.10'`)."""
    return bool(_REQUIREMENT.match(text))


def _is_profiler_token(token: str) -> bool:
    bare = token.strip("\"'")
    return bool(_WHEEL.fullmatch(bare) or _REQUIREMENT.match(bare))


def _logical_lines(text: str) -> list[tuple[int, list[str]]]:
    """(first line number, physical lines) of each `\\`-continued logical line."""
    out: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 1
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if not current:
            start = number
        current.append(line)
        if not line.rstrip("\r\n").endswith("\\"):
            out.append((start, current))
            current = []
    if current:
        out.append((start, current))
    return out


def rewrite_requirements(text: str) -> DependencyResult:
    result = DependencyResult(source=text, changed=False)
    kept: list[str] = []
    for number, lines in _logical_lines(text):
        first = lines[0].split("#", 1)[0].strip().rstrip("\\").strip()
        if first and _is_profiler_token(first.split()[0]):
            result.edits.append(Finding(number, f"removed `{first.split()[0]}`"))
            continue
        if _MENTION.search("".join(lines).split("#", 1)[0]):
            result.manual.append(Finding(number, "names the SageMaker Profiler package; remove it by hand"))
        kept.extend(lines)
    result.source = "".join(kept)
    result.changed = result.source != text
    return result


def _rewrite_pip_segment(segment: str) -> tuple[str | None, list[str]]:
    """A `pip install ...` command without its Profiler packages: None if nothing is left to install."""
    try:
        tokens = shlex.split(segment)
    except ValueError:
        return segment, []
    pip = next((i for i, t in enumerate(tokens) if t == "install"), None)
    if pip is None or not any("pip" in t for t in tokens[:pip]):
        return segment, []
    args = tokens[pip + 1 :]
    if any(t.startswith("#") for t in args):
        return segment, []  # a shell comment: shlex.join would quote it into a package named '#'
    removed = [t for t in args if _is_profiler_token(t)]
    if not removed:
        return segment, []
    for i, token in enumerate(args):
        before = args[i - 1] if i else ""
        if _is_profiler_token(token) and before.startswith("-") and "=" not in before and before not in PIP_FLAGS:
            return segment, []  # the value of an option (`--index-url <smppy URL>`, `-f <dir>`): not a package
    packages = [t for t in tokens[pip + 1 :] if not t.startswith("-") and not _is_profiler_token(t)]
    if not packages:
        return None, removed
    kept = tokens[: pip + 1] + [t for t in tokens[pip + 1 :] if not _is_profiler_token(t)]
    return shlex.join(kept), removed


def rewrite_dockerfile(text: str) -> DependencyResult:
    result = DependencyResult(source=text, changed=False)
    out: list[str] = []
    for number, lines in _logical_lines(text):
        joined = "".join(lines)
        if not _MENTION.search(joined) and not _WHEEL.search(joined):
            out.extend(lines)
            continue
        logical = " ".join(line.rstrip("\r\n").rstrip("\\").strip() for line in lines)
        instruction = logical.split(None, 1)[0].upper() if logical.strip() else ""
        body = logical.split(None, 1)[1] if len(logical.split(None, 1)) == 2 else ""
        if instruction == "RUN" and "&&" not in body and ";" not in body and "|" not in body:
            new, removed = _rewrite_pip_segment(body)
            if removed and new is None:
                result.edits.append(Finding(number, "removed the RUN that installs " + ", ".join(removed)))
                continue
            if removed and new is not None and "$" not in body:
                out.append(f"RUN {new}\n")
                result.edits.append(Finding(number, "dropped " + ", ".join(removed) + " from pip install"))
                continue
        result.manual.append(Finding(number, f"{instruction or 'line'} names the SageMaker Profiler; edit it by hand"))
        out.extend(lines)
    result.source = "".join(out)
    result.changed = result.source != text
    return result


_TOML_ENTRY = re.compile(r"""^\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)')\s*,?\s*(?:#.*)?$""")
# `smprof = "^0.3"` / `smppy = { version = "0.3", optional = true }` in a Poetry or Pipfile table
_TOML_KEY = re.compile(
    r"""^\s*["']?(?P<name>""" + _NAME + r""")["']?\s*=\s*(?:"[^"]*"|'[^']*'|\{[^{}]*\})\s*(?:#.*)?$""", re.I
)
_TOML_TABLE = re.compile(r"^\s*\[\[?\s*(?P<name>[^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_PIPFILE_NOT_PACKAGES = frozenset({"source", "requires", "scripts", "pipenv"})


def _package_table(table: str, kind: str) -> bool:
    """A TOML table whose keys are package names: Poetry's (dev-)dependencies and groups, Pipfile's
    packages, dev-packages and custom categories."""
    if kind == "pipfile":
        return bool(table) and table not in _PIPFILE_NOT_PACKAGES
    return table.startswith("tool.poetry") and table.endswith(("dependencies", "dev-dependencies"))


def rewrite_pyproject(text: str, kind: str = "pyproject") -> DependencyResult:
    """Array entries on lines of their own (`"smprof>=0.3",`) and Poetry/Pipfile table entries
    (`smprof = "^0.3"`); inline arrays are reported."""
    result = DependencyResult(source=text, changed=False)
    out: list[str] = []
    table = ""
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        header = _TOML_TABLE.match(line)
        if header:
            table = header.group("name").strip().replace('"', "").replace("'", "")
        key = _TOML_KEY.match(line)
        if key and _package_table(table, kind):
            result.edits.append(Finding(number, f"removed `{key.group('name')}` from [{table}]"))
            continue
        match = _TOML_ENTRY.match(line)
        requirement = (match.group("dq") or match.group("sq") or "") if match else ""
        if requirement and _REQUIREMENT.match(requirement):
            result.edits.append(Finding(number, f"removed `{requirement}`"))
            continue
        if _MENTION.search(line.split("#", 1)[0]):
            result.manual.append(
                Finding(number, "names the SageMaker Profiler package (inline array or other table); edit by hand")
            )
        out.append(line)
    result.source = "".join(out)
    result.changed = result.source != text
    return result


def _drop_lines(text: str, removable: Callable[[str], str | None]) -> DependencyResult:
    """Drop each line ``removable`` names an item of (it returns the item, for the edit); any other line that
    still names the Profiler's package is reported, not edited."""
    result = DependencyResult(source=text, changed=False)
    out: list[str] = []
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        item = removable(line)
        if item:
            result.edits.append(Finding(number, f"removed `{item}`"))
            continue
        if _MENTION.search(line.split("#", 1)[0]):
            result.manual.append(Finding(number, "names the SageMaker Profiler package; edit it by hand"))
        out.append(line)
    result.source = "".join(out)
    result.changed = result.source != text
    return result


def _setup_cfg_requirement(line: str) -> str | None:
    stripped = line.split("#", 1)[0].strip()
    return stripped if line[:1].isspace() and stripped and _REQUIREMENT.match(stripped) else None


def rewrite_setup_cfg(text: str) -> DependencyResult:
    """Indented requirement lines (install_requires, extras) naming only smprof/smppy."""
    return _drop_lines(text, _setup_cfg_requirement)


def rewrite_pipfile(text: str) -> DependencyResult:
    return rewrite_pyproject(text, kind="pipfile")


_CONDA_ITEM = re.compile(r"""^\s*-\s+(?P<item>[^#]*?)\s*(?:#.*)?$""")


def _conda_item(line: str) -> str | None:
    match = _CONDA_ITEM.match(line)
    item = match.group("item").strip("\"'") if match else ""
    return item if item and _is_profiler_token(item) else None


def rewrite_conda(text: str) -> DependencyResult:
    """conda environment files: a list item (conda or its `pip:` list) that installs only
    smprof/smppy or its wheel goes; anything else naming them is reported."""
    return _drop_lines(text, _conda_item)


REWRITERS = {
    "requirements": rewrite_requirements,
    "dockerfile": rewrite_dockerfile,
    "pyproject": rewrite_pyproject,
    "setup.cfg": rewrite_setup_cfg,
    "pipfile": rewrite_pipfile,
    "conda": rewrite_conda,
}


def rewrite_dependencies(kind: str, text: str) -> DependencyResult:
    return REWRITERS[kind](text)
