"""Rewrite SageMaker Profiler (`smprof` / `smppy`) training scripts to `torch.profiler`.

The rewrite is syntax-aware (Python's `ast` finds the calls, edits are applied to the
original text by position), so formatting and comments outside the edited spans are kept.
What it maps:

    import smprof / import smppy as smprof           -> import torch.profiler (+ import os)
    P = smprof.SMProfiler.instance()                 -> P = torch.profiler.profile(...)  (CPU+CUDA,
                                                        traces to the TensorBoard output dir)
    cfg = smprof.Config(); cfg.profiler = {...}      -> removed (settings move into profile(...))
    P.configure(cfg)                                 -> removed
    P.start_profiling() / P.stop_profiling()         -> P.start() / P.stop()
    with smprof.annotate("x"):                       -> with torch.profiler.record_function("x"):
    smprof.annotation_begin("x") / annotation_end("x") -> record_function("x").__enter__() / __exit__

Anything else that touches the module is reported as a finding that needs a human.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

SMPROF_MODULES = frozenset({"smprof", "smppy"})
TRACE_DIR_EXPRESSION = 'os.environ.get("PROFSTACK_TRACE_DIR", "/opt/ml/output/tensorboard")'
PROFILE_CALL = (
    "torch.profiler.profile(\n"
    "{indent}    activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],\n"
    "{indent}    on_trace_ready=torch.profiler.tensorboard_trace_handler({trace_dir}),\n"
    "{indent}    record_shapes=False,\n"
    "{indent})"
)


_TENSORBOARD_HINT = (
    "pass tensorboard_output_config=TensorBoardOutputConfig(s3_output_path='s3://<trace-bucket>/tensorboard/<user>/', "
    "container_local_output_path='/opt/ml/output/tensorboard') and the tag profstack:user=<user>; "
    "ProfStack analyses the traces when the job ends"
)
LAUNCHER_GUIDANCE: dict[str, str] = {
    "ProfilerConfig": f"SageMaker ProfilerConfig is going away (end of support 2027-06-30): {_TENSORBOARD_HINT}",
    "profiler_config": f"drop profiler_config=...: {_TENSORBOARD_HINT}",
    "FrameworkProfile": "Debugger framework profiling is closed to new customers; use torch.profiler in the script",
    "ProfilerRule": "Debugger profiler rules are replaced by ProfStack's rules (findings in report.html and SNS)",
    "ProfilerReport": "the ProfilerReport rule is replaced by ProfStack's report.html under reports/<user>/<job>/",
    "disable_profiler": "disable_profiler is no longer needed once profiler_config is removed",
}


class RewriteError(ValueError):
    """The script cannot be parsed, so nothing was rewritten."""


@dataclass(frozen=True)
class Finding:
    line: int
    message: str


@dataclass
class RewriteResult:
    source: str
    changed: bool
    edits: list[Finding] = field(default_factory=list)  # what was rewritten
    manual: list[Finding] = field(default_factory=list)  # what a person must look at


@dataclass(frozen=True, order=True)
class _Edit:
    start: tuple[int, int]  # (line, col), 1-based lines
    end: tuple[int, int]
    text: str


class _Collector(ast.NodeVisitor):
    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines()
        self.module_aliases: set[str] = set()
        self.profiler_names: set[str] = set()
        self.config_names: set[str] = set()
        self.edits: list[_Edit] = []
        self.done: list[Finding] = []
        self.manual: list[Finding] = []
        self.needs_os = False
        self.annotation_counter = 0
        self.open_annotations: dict[str, list[str]] = {}
        self.sole_statements: set[int] = set()

    def index_blocks(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            for name in ("body", "orelse", "finalbody"):
                block = getattr(node, name, None)
                if isinstance(block, list) and len(block) == 1 and isinstance(block[0], ast.stmt):
                    self.sole_statements.add(id(block[0]))

    # --- helpers -------------------------------------------------------------------------
    def _indent(self, node: ast.stmt) -> str:
        line = self.lines[node.lineno - 1]
        return line[: len(line) - len(line.lstrip())]

    def _replace(self, node: ast.stmt | ast.expr, text: str) -> None:
        self.edits.append(
            _Edit((node.lineno, node.col_offset), (node.end_lineno or node.lineno, node.end_col_offset or 0), text)
        )

    def _remove_statement(self, node: ast.stmt, why: str) -> None:
        # A comment keeps the reader informed; `pass` keeps a block valid if this was its only statement.
        keep_block_valid = id(node) in self.sole_statements
        prefix = "pass  " if keep_block_valid else ""
        self._replace(node, f"{prefix}# profstack-migrate: removed {why}")
        self.done.append(Finding(node.lineno, f"removed {why}"))

    def _is_module(self, node: ast.expr) -> bool:
        return isinstance(node, ast.Name) and node.id in self.module_aliases

    def _module_attr(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Attribute) and self._is_module(node.value):
            return node.attr
        return None

    # --- imports -------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        names = [alias for alias in node.names if alias.name.split(".")[0] in SMPROF_MODULES]
        if not names:
            return
        if len(names) != len(node.names):
            self.manual.append(Finding(node.lineno, "import mixes smprof with other modules; split it by hand"))
            return
        for alias in names:
            self.module_aliases.add(alias.asname or alias.name)
        self._replace(node, "import torch.profiler")
        self.needs_os = True
        self.done.append(Finding(node.lineno, "import smprof -> import torch.profiler"))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module and node.module.split(".")[0] in SMPROF_MODULES:
            self.manual.append(
                Finding(node.lineno, f"`from {node.module} import ...` is not rewritten; use torch.profiler names")
            )

    def visit_Try(self, node: ast.Try) -> None:
        # The documented fallback: try: import smprof / except ImportError: import smppy as smprof
        handlers_import_smppy = all(
            len(h.body) == 1 and isinstance(h.body[0], ast.Import)
            and all(a.name in SMPROF_MODULES for a in h.body[0].names)
            for h in node.handlers
        )  # fmt: skip
        body_imports_smprof = (
            len(node.body) == 1
            and isinstance(node.body[0], ast.Import)
            and all(a.name in SMPROF_MODULES for a in node.body[0].names)
        )
        if node.handlers and handlers_import_smppy and body_imports_smprof and not node.orelse and not node.finalbody:
            for statement in (node.body[0], *(h.body[0] for h in node.handlers)):
                if isinstance(statement, ast.Import):
                    for alias in statement.names:
                        self.module_aliases.add(alias.asname or alias.name)
            self._replace(node, "import torch.profiler")
            self.needs_os = True
            self.done.append(Finding(node.lineno, "try/except smprof|smppy import -> import torch.profiler"))
            return
        self.generic_visit(node)

    # --- statements ----------------------------------------------------------------------
    def visit_Assign(self, node: ast.Assign) -> None:
        value = node.value
        target = node.targets[0] if len(node.targets) == 1 else None
        # P = smprof.SMProfiler.instance()
        if (
            isinstance(target, ast.Name)
            and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "instance"
            and self._module_attr(value.func.value) == "SMProfiler"
        ):
            self.profiler_names.add(target.id)
            indent = self._indent(node)
            self._replace(value, PROFILE_CALL.format(indent=indent, trace_dir=TRACE_DIR_EXPRESSION))
            self.done.append(Finding(node.lineno, "SMProfiler.instance() -> torch.profiler.profile(...)"))
            return
        # cfg = smprof.Config()
        if isinstance(target, ast.Name) and isinstance(value, ast.Call) and self._module_attr(value.func) == "Config":
            self.config_names.add(target.id)
            self._remove_statement(node, "smprof.Config(); profiler settings are arguments of profile(...)")
            return
        # cfg.profiler = {...}
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id in self.config_names
        ):
            self._remove_statement(node, f"smprof config setting `{target.attr}`")
            return
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        call = node.value
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            self.generic_visit(node)
            return
        owner, method = call.func.value, call.func.attr
        if isinstance(owner, ast.Name) and owner.id in self.profiler_names:
            if method == "configure":
                self._remove_statement(node, "SMProfiler.configure(...)")
                return
            mapping = {"start_profiling": "start", "stop_profiling": "stop"}
            if method in mapping:
                self._replace(call.func, f"{owner.id}.{mapping[method]}")
                self.done.append(Finding(node.lineno, f"{method}() -> {mapping[method]}()"))
                return
        if self._is_module(owner) and method in {"annotation_begin", "annotation_end"}:
            self._annotation_call(node, call, begin=method == "annotation_begin")
            return
        self.generic_visit(node)

    def _annotation_call(self, node: ast.Expr, call: ast.Call, *, begin: bool) -> None:
        segment = ast.get_source_segment(self.source, call.args[0]) if call.args else None
        label = segment or '"annotation"'
        if begin:
            self.annotation_counter += 1
            handle = f"_profstack_range_{self.annotation_counter}"
            self.open_annotations.setdefault(label, []).append(handle)
            self._replace(node, f"{handle} = torch.profiler.record_function({label}); {handle}.__enter__()")
            self.done.append(Finding(node.lineno, "annotation_begin -> record_function(...).__enter__()"))
            return
        handles = self.open_annotations.get(label)
        if not handles:
            self.manual.append(Finding(node.lineno, f"annotation_end({label}) has no matching annotation_begin"))
            return
        handle = handles.pop()
        self._replace(node, f"{handle}.__exit__(None, None, None)")
        self.done.append(Finding(node.lineno, "annotation_end -> record_function(...).__exit__()"))

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            expr = item.context_expr
            if isinstance(expr, ast.Call) and self._module_attr(expr.func) == "annotate":
                self._replace(expr.func, "torch.profiler.record_function")
                self.done.append(Finding(node.lineno, "smprof.annotate -> torch.profiler.record_function"))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        # The launcher side: Debugger/Profiler configuration of the estimator.
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in LAUNCHER_GUIDANCE:
            self.manual.append(Finding(node.lineno, LAUNCHER_GUIDANCE[name]))
        for keyword in node.keywords:
            if keyword.arg in LAUNCHER_GUIDANCE:
                self.manual.append(Finding(node.lineno, LAUNCHER_GUIDANCE[keyword.arg]))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # Any other use of the module is something we did not map.
        if self._is_module(node.value) and node.attr not in {"annotate", "SMProfiler", "Config"}:
            self.manual.append(Finding(node.lineno, f"`{ast.unparse(node)}` has no automatic torch.profiler mapping"))
        self.generic_visit(node)


def _apply(source: str, edits: list[_Edit]) -> str:
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode("utf-8")))
    data = source.encode("utf-8")

    def absolute(position: tuple[int, int]) -> int:
        return offsets[position[0] - 1] + position[1]  # ast col offsets are UTF-8 byte offsets

    for edit in sorted(edits, reverse=True):
        data = data[: absolute(edit.start)] + edit.text.encode("utf-8") + data[absolute(edit.end) :]
    return data.decode("utf-8")


def _ensure_import_os(source: str, tree: ast.Module) -> str:
    has_os = any(
        isinstance(node, ast.Import) and any(alias.name == "os" and alias.asname is None for alias in node.names)
        for node in tree.body
    )
    if has_os:
        return source
    # Put it after the module docstring and any __future__ imports.
    insert_after = 0
    for node in tree.body:
        is_docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if is_docstring or is_future:
            insert_after = node.end_lineno or node.lineno
        else:
            break
    lines = source.splitlines(keepends=True)
    separator = "\n" if insert_after and lines[insert_after - 1].strip() else ""
    lines.insert(insert_after, f"{separator}import os\n")
    return "".join(lines)


def rewrite_source(source: str, *, filename: str = "<script>") -> RewriteResult:
    """Rewrite one script's text. Raises RewriteError when it does not parse."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise RewriteError(f"{filename}:{exc.lineno}: cannot parse: {exc.msg}") from None
    collector = _Collector(source)
    collector.index_blocks(tree)
    collector.visit(tree)
    for label, handles in collector.open_annotations.items():
        if handles:
            collector.manual.append(Finding(0, f"annotation_begin({label}) is never ended"))
    if not collector.edits:
        return RewriteResult(source=source, changed=False, manual=collector.manual)
    rewritten = _apply(source, collector.edits)
    if collector.needs_os:
        rewritten = _ensure_import_os(rewritten, tree)
    if collector.profiler_names:
        collector.manual.append(
            Finding(
                0,
                "consider torch.profiler.schedule(wait=1, warmup=1, active=3) and calling "
                f"{sorted(collector.profiler_names)[0]}.step() once per training step to bound trace size",
            )
        )
    try:
        ast.parse(rewritten, filename=filename)
    except SyntaxError as exc:  # our own bug: never hand back code that does not parse
        raise RewriteError(
            f"{filename}: rewrite produced invalid Python at line {exc.lineno}; file left as is"
        ) from None
    return RewriteResult(source=rewritten, changed=True, edits=collector.done, manual=collector.manual)
