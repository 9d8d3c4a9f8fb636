"""Remove what installs SageMaker Profiler (smprof / smppy) from requirements, Dockerfiles, pyproject
(PEP 621 arrays and Poetry tables), setup.cfg, Pipfile and conda environment files.

Names are compared as PEP 503 normalises them (`SMPROF`, `smprof` are the Profiler; `smppy_lint`, which
normalises to `smppy-lint`, is another project), requirement strings are read as PEP 508 says (extras,
markers, `name @ url`), wheels by their file name's project, and indexes by their URL's host: the
Profiler's `smppy` S3 bucket, never a path that merely contains `smppy-`.

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
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

from profstack.migrate._cst import Finding

PACKAGES = ("smprof", "smppy")
#: the Profiler's distributions, as PEP 503 normalises them (`SMPROF`, `smprof` match; `smppy_lint`,
#: `smppy-lint`, `smprofiler-tools` are other projects)
PROFILER_DISTRIBUTIONS = frozenset(PACKAGES)
#: the S3 bucket the Profiler's wheels and index are served from (https://smppy.s3.amazonaws.com/...)
PROFILER_BUCKET = "smppy"
# S3 endpoints: virtual-hosted (`smppy.s3.amazonaws.com`, `smppy.s3.us-west-2.amazonaws.com`,
# `smppy.s3-us-west-2.amazonaws.com`, `.amazonaws.com.cn`) and path-style (`s3.amazonaws.com/smppy/...`)
_S3_ENDPOINT = r"s3(?:[.-][a-z0-9-]+)*\.amazonaws\.com(?:\.cn)?"
_BUCKET_HOST = re.compile(rf"{PROFILER_BUCKET}\.{_S3_ENDPOINT}")
_S3_HOST = re.compile(_S3_ENDPOINT)
# a word that could be a project name (PEP 508: letters, digits, `.`, `_`, `-`), a URL, or a `$VAR`
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9._+-]*://[^\s\"'<>|;&]+|\$\{?\w+\}?|[A-Za-z0-9][A-Za-z0-9._-]*")
_EGG = re.compile(r"[#&]egg=([A-Za-z0-9._-]+)")


def is_profiler_name(name: str) -> bool:
    """A distribution name that is the Profiler's, compared as PEP 503 normalises names."""
    return canonicalize_name(name) in PROFILER_DISTRIBUTIONS


def requirement_name(text: str) -> str | None:
    """The project a PEP 508 requirement names (`SMPROF[x] >= 0.3; python_version < "3.10"`,
    `smprof @ https://...`), or None when the text is not a requirement."""
    try:
        return Requirement(text.strip()).name
    except InvalidRequirement:
        return None


def is_requirement(text: str) -> bool:
    """A requirement specifier for the Profiler's distributions (PEP 508 name, PEP 503 normalised)."""
    name = requirement_name(text)
    return name is not None and is_profiler_name(name)


def _host(value: str) -> tuple[str, str]:
    """(host, path) of a URL, or (the value as a host, "") for `--trusted-host host[:port]`."""
    bare = value.strip("\"'")
    try:
        parsed = urlsplit(bare if "://" in bare else "//" + bare)
        host = (parsed.hostname or "").lower()
    except ValueError:  # a malformed port or IPv6 literal: not the Profiler's host
        return "", ""
    return host, parsed.path


def is_profiler_index(value: str) -> bool:
    """The Profiler's package index, wheel folder or host: by the URL's host (the `smppy` S3 bucket,
    virtual-hosted or path-style), never by a substring of its path (`https://mirror/smppy-simple/`)."""
    host, path = _host(value)
    if _BUCKET_HOST.fullmatch(host):
        return True
    return bool(_S3_HOST.fullmatch(host)) and path.lstrip("/").split("/", 1)[0] == PROFILER_BUCKET


def _archive_name(filename: str) -> str | None:
    """The project a wheel or sdist file name is of (`smprof-0.3.334-cp311-...whl` -> smprof)."""
    base = filename.rsplit("/", 1)[-1]
    try:
        if base.endswith(".whl"):
            return str(parse_wheel_filename(base)[0])
        if base.endswith((".tar.gz", ".zip")):
            return str(parse_sdist_filename(base)[0])
    except (InvalidWheelFilename, InvalidSdistFilename):
        head = re.match(r"([A-Za-z0-9][A-Za-z0-9._]*?)-\d", base)  # a wheel with a local tag, ...
        return head.group(1) if head else None
    return None


def is_profiler_source(token: str) -> bool:
    """A package source that installs the Profiler: a requirement for it, a file from its bucket, its
    wheel or sdist by file name (any host or path), or a VCS/URL requirement with `#egg=smprof`."""
    bare = token.strip("\"'")
    if not bare:
        return False
    if is_requirement(bare):
        return True
    if "://" in bare and is_profiler_index(bare):
        return True
    egg = _EGG.search(bare)
    if egg is not None:
        return is_profiler_name(egg.group(1))
    name = _archive_name(bare.split("#", 1)[0].split("?", 1)[0])
    return name is not None and is_profiler_name(name)


def mentions_profiler(text: str) -> bool:
    """Free text (a Dockerfile instruction, a magic line) that names what installs the Profiler: a word
    that is its distribution name, its wheel, a URL on its host, or a `$VARIABLE` with SMPROF/SMPPY as a
    word of its name (`${SMPROF_WHEEL}`). `smppy_lint`, `smprofiler-tools`, `/mirror/smppy-docs/` do not."""
    for match in _WORD.finditer(text):
        word = match.group(0)
        if word.startswith("$"):
            parts = re.split(r"_+", word.strip("${}").lower())
            if any(p in PROFILER_DISTRIBUTIONS for p in parts):
                return True
        elif "://" in word:
            if is_profiler_source(word) or is_profiler_index(word):
                return True
        elif is_profiler_name(word) or is_profiler_source(word) or ("." in word and is_profiler_index(word)):
            return True  # the name, its wheel, or its bucket's host (`--trusted-host smppy.s3.amazonaws.com`)
    return False


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


def logical_lines(text: str) -> list[tuple[int, list[str]]]:
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


def _index_options(tokens: list[_Token]) -> list[str]:
    """Mark `--extra-index-url <the Profiler's index>` (and -i, -f, --trusted-host, `--opt=value`) for removal."""
    removed = []
    for position, token in enumerate(tokens):
        option, inline = _split_option(token.value)
        if option not in INDEX_OPTIONS:
            continue
        value_token = tokens[position + 1] if inline is None and position + 1 < len(tokens) else None
        value = inline if inline is not None else (value_token.value if value_token else "")
        if is_profiler_index(value):
            token.drop = True
            if value_token is not None:
                value_token.drop = True
            removed.append(f"{option} {value}")
    return removed


def _requirement_options(lines: list[str]) -> tuple[list[str], list[str]] | None:
    """A requirements line holding the Profiler's index options: (the line without them, what went)."""
    code = [line.split(" #", 1)[0] if not line.lstrip().startswith("#") else "" for line in lines]
    comments = [line.rstrip("\r\n")[len(c.rstrip("\r\n")) :] for line, c in zip(lines, code, strict=True)]
    tokens = _tokens(code)
    if not tokens or not tokens[0].value.startswith("-"):
        return None
    removed = _index_options(tokens)
    if not removed:
        return None
    if all(t.drop for t in tokens):
        return [], removed
    return _rebuild(lines, tokens, comments), removed


_COMMENT = re.compile(r"(?:^|\s)#.*$")  # pip: a `#` at the start or after whitespace begins a comment
_OPTION = re.compile(r"(?:^|\s)--?[A-Za-z]")


def _strip_comment(line: str) -> str:
    return _COMMENT.sub("", line.rstrip("\r\n"))


def _requirement_part(lines: list[str]) -> str:
    """The requirement of a requirements-file line, its comments, continuations and per-requirement
    options (`--hash=...`) taken off: `smppy ; python_version < "3.10" \\` + `--hash=sha256:...` -> the marker form."""
    code = " ".join(_strip_comment(line).rstrip("\\").strip() for line in lines).strip()
    option = _OPTION.search(code)
    return (code[: option.start()] if option else code).strip()


def _installs_profiler(lines: list[str]) -> str | None:
    """What a requirements-file line installs of the Profiler (the requirement, a wheel or a URL from its
    bucket, `-e <its source>`), or None."""
    code = " ".join(_strip_comment(line).rstrip("\\").strip() for line in lines).strip()
    editable = re.match(r"(?:-e|--editable)(?:\s*=\s*|\s+)(\S+)", code)
    if editable is not None:
        return editable.group(1) if is_profiler_source(editable.group(1)) else None
    requirement = _requirement_part(lines)
    if not requirement:
        return None
    if is_requirement(requirement):
        return requirement
    first = requirement.split()[0]
    return first if is_profiler_source(first) else None


def rewrite_requirements(text: str) -> DependencyResult:
    result = DependencyResult(source=text, changed=False)
    kept: list[str] = []
    for number, lines in logical_lines(text):
        installed = _installs_profiler(lines)
        if installed is not None:
            result.edits.append(Finding(number, f"removed `{installed}`"))
            continue
        options = _requirement_options(lines)
        if options is not None:
            result.edits.append(Finding(number, "removed " + ", ".join(options[1])))
            kept.extend(options[0])
            continue
        if mentions_profiler(" ".join(_strip_comment(line) for line in lines)):
            result.manual.append(Finding(number, "names the SageMaker Profiler package; remove it by hand"))
        kept.extend(lines)
    result.source = "".join(kept)
    result.changed = result.source != text
    return result


# the Profiler's package index / wheel location (smppy's S3 bucket): an option pointing there goes with its value
INDEX_OPTIONS = frozenset({"--index-url", "-i", "--extra-index-url", "--find-links", "-f", "--trusted-host"})
# options whose value installs something: `pip install -r requirements.txt smprof` still installs
SOURCE_OPTIONS = frozenset({"-r", "--requirement", "-e", "--editable"})
_RAW_TOKEN = re.compile(r"""(?:[^\s"']+|"[^"]*"|'[^']*')+""")
_SHELL_SEPARATORS = frozenset({"&&", "||", ";", "|"})


def _split_option(token: str) -> tuple[str, str | None]:
    """`--index-url=URL` -> ("--index-url", "URL"); `--pre` -> ("--pre", None)."""
    if token.startswith("--") and "=" in token:
        name, value = token.split("=", 1)
        return name, value
    return token, None


def _takes_value(option: str) -> bool:
    return option.startswith("-") and option not in PIP_FLAGS


@dataclass
class _Token:
    raw: str
    value: str
    line: int  # index of the physical line
    drop: bool = False


def _plan_pip_drops(tokens: list[_Token]) -> list[str] | None:
    """Mark the Profiler's packages and index options of each `pip install` in ``tokens`` for removal.
    The names removed; None when a `pip install` would be left installing nothing while other commands
    share the RUN (a person decides), or a shell comment follows (the codemod cannot tell its extent)."""
    removed: list[str] = []
    index = 0
    while index < len(tokens):
        if tokens[index].value == "install" and index and "pip" in tokens[index - 1].value:
            end = next((i for i in range(index + 1, len(tokens)) if tokens[i].value in _SHELL_SEPARATORS), len(tokens))
            outcome = _plan_one_install(tokens[index + 1 : end])
            if outcome is None:
                return None
            gone, sources = outcome
            removed += gone
            shared = any(t.value in _SHELL_SEPARATORS for t in tokens)
            if gone and not sources:
                if shared:
                    return None
                for token in tokens:
                    token.drop = True  # the RUN did nothing but install the Profiler
            index = end
        index += 1
    return removed


def _plan_one_install(args: list[_Token]) -> tuple[list[str], int] | None:
    """(what goes, how many package sources stay) for one `pip install`'s arguments."""
    if any(t.value.startswith("#") for t in args):
        return None
    gone: list[str] = []
    sources = 0
    position = 0
    while position < len(args):
        token = args[position]
        option, inline = _split_option(token.value)
        if option.startswith("-") and _takes_value(option):
            value_token = None if inline is not None or position + 1 >= len(args) else args[position + 1]
            value = inline if inline is not None else (value_token.value if value_token else "")
            if option in INDEX_OPTIONS and is_profiler_index(value):
                token.drop = True
                if value_token is not None:
                    value_token.drop = True
                gone.append(f"{option} {value}")
            elif is_profiler_source(value):
                return None  # `-c <profiler thing>`: an option of its own, not ours to drop
            elif option in SOURCE_OPTIONS:
                sources += 1
            position += 1 if inline is not None else 2
            continue
        if not option.startswith("-"):
            if is_profiler_source(token.value):
                token.drop = True
                gone.append(token.value)
            else:
                sources += 1
        position += 1
    return gone, sources


def _tokens(lines: list[str]) -> list[_Token] | None:
    out: list[_Token] = []
    for number, line in enumerate(lines):
        body = line.rstrip("\r\n")
        body = body[:-1] if body.endswith("\\") else body
        for raw in _RAW_TOKEN.findall(body):
            try:
                parts = shlex.split(raw)
            except ValueError:
                return None
            out.append(_Token(raw=raw, value=parts[0] if parts else "", line=number))
    return out


def _rebuild(lines: list[str], tokens: list[_Token], comments: list[str] | None = None) -> list[str]:
    """The physical lines without the dropped tokens: untouched lines verbatim, a line left empty gone, and
    the last line left without a `\\` continuation. ``comments``: each line's trailing comment, kept."""
    out: list[str] = []
    for number, line in enumerate(lines):
        mine = [t for t in tokens if t.line == number]
        if not any(t.drop for t in mine):
            out.append(line)
            continue
        kept = [t.raw for t in mine if not t.drop]
        if not kept:
            continue
        ending = line[len(line.rstrip("\r\n")) :]
        indent = line[: len(line) - len(line.lstrip())]
        continued = line.rstrip("\r\n").endswith("\\")
        comment = comments[number].strip() if comments else ""
        tail = (" \\" if continued else "") + (f"  {comment}" if comment else "")
        out.append(indent + " ".join(kept) + tail + ending)
    if out:
        last = out[-1]
        ending = last[len(last.rstrip("\r\n")) :]
        body = last.rstrip("\r\n")
        if body.endswith("\\") and not lines[-1].rstrip("\r\n").endswith("\\"):
            out[-1] = body[:-1].rstrip() + ending
    return out


def rewrite_install_lines(lines: list[str]) -> tuple[list[str], list[str]] | None:
    """A RUN instruction (its physical lines) without the Profiler's packages and index options.
    (new lines, what was removed); None: not safely editable (reported)."""
    tokens = _tokens(lines)
    if tokens is None or any("$" in t.raw and mentions_profiler(t.raw) for t in tokens):
        return None
    removed = _plan_pip_drops(tokens)
    if removed is None or not removed:
        return None
    if all(t.drop for t in tokens[1:]) or all(t.drop for t in tokens):
        return [], removed
    return _rebuild(lines, tokens), removed


def rewrite_dockerfile(text: str) -> DependencyResult:
    """`RUN pip install` (one line or `\\`-continued) loses the Profiler's packages and index options where
    they stand, the rest of each line kept; a RUN that installed nothing else goes. The rest that names
    the Profiler (an ARG holding the wheel URL, a COPY of it, `${VAR}` installs) is reported."""
    result = DependencyResult(source=text, changed=False)
    out: list[str] = []
    for number, lines in logical_lines(text):
        joined = "".join(lines)
        if joined.lstrip().startswith("#") or not mentions_profiler(joined):  # a comment installs nothing
            out.extend(lines)
            continue
        instruction = joined.split(None, 1)[0].upper() if joined.strip() else ""
        rewritten = rewrite_install_lines(lines) if instruction == "RUN" else None
        if rewritten is None:
            result.manual.append(
                Finding(number, f"{instruction or 'line'} names the SageMaker Profiler; edit it by hand")
            )
            out.extend(lines)
            continue
        new, removed = rewritten
        what = "removed the RUN that installs " if not new else "dropped from pip install: "
        result.edits.append(Finding(number, what + ", ".join(removed)))
        out.extend(new)
    result.source = "".join(out)
    result.changed = result.source != text
    return result


_TOML_ENTRY = re.compile(r"""^\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)')\s*,?\s*(?:#.*)?$""")
# `smprof = "^0.3"` / `smppy = { version = "0.3", optional = true }` in a Poetry or Pipfile table
_TOML_KEY = re.compile(
    r"""^\s*(?P<q>["']?)(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?P=q)\s*=\s*(?:"[^"]*"|'[^']*'|\{[^{}]*\})\s*(?:#.*)?$"""
)
_TOML_TABLE = re.compile(r"^\s*\[\[?\s*(?P<name>[^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_PIPFILE_NOT_PACKAGES = frozenset({"source", "requires", "scripts", "pipenv"})


def _package_table(table: str, kind: str) -> bool:
    """A TOML table whose keys are package names: Poetry's (dev-)dependencies and groups, Pipfile's
    packages, dev-packages and custom categories."""
    if kind == "pipfile":
        return bool(table) and table not in _PIPFILE_NOT_PACKAGES
    return table.startswith("tool.poetry") and table.endswith(("dependencies", "dev-dependencies"))


_TOML_STRING = re.compile(r""""(?:[^"\\\n]|\\.)*"|'[^'\n]*'""")


def _drop_array_items(line: str) -> tuple[str, list[str]]:
    """``line`` without the array items that are Profiler requirements (`profiling = ["smppy>=0.3", "tb"]`
    -> `profiling = ["tb"]`), each with its comma; the rest of the line (other items, comment) kept."""
    strings = list(_TOML_STRING.finditer(line))
    hash_at = next(
        (i for i, c in enumerate(line) if c == "#" and not any(m.start() < i < m.end() for m in strings)), len(line)
    )
    removed: list[str] = []
    for m in reversed([m for m in strings if m.end() <= hash_at]):
        value = m.group(0)[1:-1]
        before, after = line[: m.start()], line[m.end() :]
        in_array = re.search(r"(?:^|[\[,])\s*$", before) and re.match(r"\s*(?:,|\]|$|#)", after)
        if not (in_array and is_requirement(value)):
            continue
        removed.append(value)
        comma_after = re.match(r"\s*,[ \t]*", after)
        comma_before = re.search(r",\s*$", before)
        if comma_after:
            rest = after[comma_after.end() :]
            line = (before.rstrip(" \t") if not rest.strip() else before) + rest
        elif comma_before:
            line = before[: comma_before.start()] + after
        else:
            line = before + after
    return line, removed[::-1]


def rewrite_pyproject(text: str, kind: str = "pyproject") -> DependencyResult:
    """Array entries (`"smprof>=0.3",` on a line of its own, or inside an inline array, where they stand)
    and Poetry/Pipfile table entries (`smprof = "^0.3"`); the rest naming the Profiler is reported."""
    result = DependencyResult(source=text, changed=False)
    out: list[str] = []
    table = ""
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        header = _TOML_TABLE.match(line)
        if header:
            table = header.group("name").strip().replace('"', "").replace("'", "")
        key = _TOML_KEY.match(line)
        if key and is_profiler_name(key.group("name")) and _package_table(table, kind):
            result.edits.append(Finding(number, f"removed `{key.group('name')}` from [{table}]"))
            continue
        match = _TOML_ENTRY.match(line)
        requirement = (match.group("dq") or match.group("sq") or "") if match else ""
        if requirement and is_requirement(requirement):
            result.edits.append(Finding(number, f"removed `{requirement}`"))
            continue
        kept, removed = _drop_array_items(line)
        if removed:
            result.edits.append(Finding(number, "removed " + ", ".join(f"`{r}`" for r in removed) + " from an array"))
            if not kept.strip():
                continue
        if mentions_profiler(kept.split("#", 1)[0]):
            result.manual.append(
                Finding(number, "names the SageMaker Profiler package (inline array or other table); edit by hand")
            )
        out.append(kept)
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
        if mentions_profiler(line.split("#", 1)[0]):
            result.manual.append(Finding(number, "names the SageMaker Profiler package; edit it by hand"))
        out.append(line)
    result.source = "".join(out)
    result.changed = result.source != text
    return result


def _setup_cfg_requirement(line: str) -> str | None:
    stripped = line.split("#", 1)[0].strip()
    return stripped if line[:1].isspace() and stripped and is_requirement(stripped) else None


def rewrite_setup_cfg(text: str) -> DependencyResult:
    """Indented requirement lines (install_requires, extras) naming only smprof/smppy."""
    return _drop_lines(text, _setup_cfg_requirement)


def rewrite_pipfile(text: str) -> DependencyResult:
    return rewrite_pyproject(text, kind="pipfile")


_CONDA_ITEM = re.compile(r"""^\s*-\s+(?P<item>[^#]*?)\s*(?:#.*)?$""")


def _conda_item(line: str) -> str | None:
    match = _CONDA_ITEM.match(line)
    item = match.group("item").strip("\"'") if match else ""
    if item.startswith("-"):  # `- --extra-index-url <the Profiler's index>` in the pip list
        tokens = _tokens([item])
        return item if tokens and _index_options(tokens) and all(t.drop for t in tokens) else None
    if not item:
        return None
    spec = _CONDA_SPEC.match(item)  # a conda match spec: `smprof=0.3`, `conda-forge::smprof 0.3.*`
    return item if is_profiler_source(item) or (spec is not None and is_profiler_name(spec.group(1))) else None


_CONDA_SPEC = re.compile(r"(?:[\w.-]+::)?([A-Za-z0-9][A-Za-z0-9._-]*)(?=\s|[=<>!~\[]|$)")


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
