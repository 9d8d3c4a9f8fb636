"""Rewrite SageMaker Profiler (`smprof` / `smppy`) training scripts to `torch.profiler`, on LibCST.

LibCST keeps comments and formatting: only the statements below change. What it maps:

    import smprof / import smppy as smprof / try-except fallback  -> import torch.profiler (+ import os)
    from smprof import annotate, SMProfiler as P ...             -> the same, by local name
    P = smprof.SMProfiler.instance()          -> P = torch.profiler.profile(activities, schedule,
                                                 on_trace_ready=tensorboard_trace_handler(<TB dir>))
    cfg = smprof.Config(); cfg.x = ...; P.configure(cfg)      -> removed (settings live in profile(...))
    P.start_profiling() / P.stop_profiling()  -> P.start() / P.stop(), and P.step() at the end of
                                                 the training loop the profiler runs over
    with smprof.annotate("x"): / @smprof.annotate("x")        -> torch.profiler.record_function("x")
    smprof.annotation_begin(x) ... annotation_end(x)          -> `with record_function(x):` around the
                                                 statements between, when both sit in one block;
                                                 else `h = record_function(x)` / `h.__enter__()` /
                                                 `h.__exit__(None, None, None)`, one statement a line
    h = smprof.annotation_begin(x) ... annotation_end(h)      -> the same, keeping the handle

A file is converted whole or not at all: a use with no safe mapping (an unknown attribute, an
annotation_end without its begin, a begin in one function and its end in another, ...) leaves the
file untouched and is reported as `line: why`. Launchers (SageMaker SDK ProfilerConfig) are
handled by `profstack.migrate.launcher`; `rewrite_source` runs both.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider, ScopeProvider

from profstack.migrate import _steps
from profstack.migrate._cst import Finding, PlannedTransformer, StatementPlan, dotted, parse_quietly
from profstack.migrate.sagemaker_paths import TENSORBOARD_DIR, TRACE_DIR_ENV

SMPROF_MODULES = frozenset({"smprof", "smppy"})
KNOWN_MEMBERS = frozenset({"SMProfiler", "Config", "annotate", "annotation_begin", "annotation_end"})
SCHEDULE = "wait=1, warmup=1, active=3, repeat=1"
# one step() per call of the code between start() and stop() (no loop in sight): record the first call only
CALLS_SCHEDULE = "wait=0, warmup=0, active=1, repeat=1"
# every use either codemod acts on, or --check reports, contains one of these words
_MENTIONS_PROFILER = re.compile(r"smprof|smppy|smdebug|profiler|profiling", re.IGNORECASE)

__all__ = ["Finding", "RewriteError", "RewriteResult", "rewrite_script", "rewrite_source"]


class RewriteError(ValueError):
    """The file cannot be parsed, so nothing was rewritten."""


@dataclass
class RewriteResult:
    source: str
    changed: bool
    edits: list[Finding] = field(default_factory=list)  # what was rewritten
    manual: list[Finding] = field(default_factory=list)  # what a person must look at (nothing rewritten there)


def profile_call(*, schedule: str | None = SCHEDULE) -> str:
    schedule_arg = f"    schedule=torch.profiler.schedule(\n        {schedule}\n    ),\n" if schedule else ""
    return (
        "torch.profiler.profile(\n"
        "    activities=[\n"
        "        torch.profiler.ProfilerActivity.CPU,\n"
        "        torch.profiler.ProfilerActivity.CUDA,\n"
        "    ],\n"
        f"{schedule_arg}"
        "    on_trace_ready=torch.profiler.tensorboard_trace_handler(\n"
        "        os.environ.get(\n"
        f'            "{TRACE_DIR_ENV}", "{TENSORBOARD_DIR}"\n'
        "        )\n"
        "    ),\n"
        ")"
    )


class _NewerSyntax(RewriteError):
    """Valid Python (LibCST reads it) that this interpreter's `ast` cannot: PEP 695 on 3.11, ..."""


def _parse(source: str, filename: str) -> cst.Module:
    try:
        parse_quietly(source, filename=filename)
    except RecursionError:
        raise RewriteError(f"{filename}: nested too deeply for the codemod to walk; left as is") from None
    except SyntaxError as exc:
        try:
            cst.parse_module(source)
        except cst.ParserSyntaxError:
            raise RewriteError(f"{filename}:{exc.lineno}: cannot parse: {exc.msg}") from None
        version = ".".join(map(str, sys.version_info[:2]))
        raise _NewerSyntax(
            f"{filename}:{exc.lineno}: uses Python syntax newer than this Python ({version}) reads: "
            "run profstack under the Python version the code is written for"
        ) from None
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise RewriteError(f"{filename}:{exc.raw_line}: cannot parse: {exc.message}") from None


# --------------------------------------------------------------------------------------------
# analysis


@dataclass
class _Annotation:
    stmt: cst.SimpleStatementLine
    line: int
    begin: bool
    arg: str  # label code (begin) or argument code (end)
    handle: str | None  # begin: the variable it is assigned to
    block: cst.CSTNode
    index: int
    scope: cst.CSTNode | None  # enclosing function (None: module)
    blocks: tuple[cst.CSTNode, ...]  # enclosing blocks, innermost first
    guarded: bool = False  # inside an `if smprof:` that goes: ``block`` is the guard's own block


@dataclass
class _Profiler:
    code: str  # the expression that holds it: a variable name, `self.prof`, or the module singleton
    assign: cst.SimpleStatementLine | None
    loops: list[cst.CSTNode] = field(default_factory=list)
    started: bool = False


class _Analysis(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider, ParentNodeProvider, ScopeProvider)

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.module = module
        self.aliases: set[str] = set()  # names bound to the module
        self.members: dict[str, str] = {}  # local name -> module attribute
        self.import_stmts: list[cst.SimpleStatementLine | cst.Try] = []
        self.handled: set[cst.CSTNode] = set()  # Name nodes whose use is mapped
        self.blocking: list[Finding] = []
        self.edits: list[Finding] = []
        self.plan = StatementPlan()
        self.expr_replace: dict[cst.CSTNode, str] = {}  # expr node -> new code
        self.profilers: dict[str, _Profiler] = {}
        self.config_names: set[str] = set()
        self.annotations: list[_Annotation] = []
        self.singleton_needed = False
        self.instance_sites = 0  # SMProfiler.instance() calls: more than one share one profile object
        self.uses_os = False
        self.uses_torch = False
        self._starts: list[tuple[str, cst.SimpleStatementLine]] = []
        self._stops: set[cst.CSTNode] = set()
        self.range_counter = 0
        self.value_begins = False
        self.bindings: set[cst.CSTNode] = set()  # the import nodes (and fallback `= None` targets) binding the module
        self.none_fallback: set[str] = set()  # `except ImportError: smprof = None`: names guarded by `if smprof:`
        self.unwrap: dict[cst.CSTNode, bool] = {}  # if / if-expression on the module name -> keep body (else orelse)
        # `G and X` / `G or X` with G a guard on the optional import: "right" (X stands in) or the literal it is
        self.bool_pick: dict[cst.CSTNode, str] = {}
        self.flow: set[str] = set()  # names a profiler is handed on to (returned, passed as an argument)
        self.factories: set[str] = set()  # functions that return a profiler
        self.returned: set[str] = set()  # names of profilers handed on (returned, passed as an argument)
        self.per_call = False  # a step() after each call between start() and stop(): CALLS_SCHEDULE
        self.functions: dict[str, cst.FunctionDef] = {}

    # --- helpers
    def line(self, node: cst.CSTNode) -> int:
        return int(self.get_metadata(PositionProvider, node).start.line)

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node).strip()

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        try:
            return self.get_metadata(ParentNodeProvider, node)
        except KeyError:
            return None

    def block(self, stmt: cst.CSTNode) -> tuple[cst.CSTNode, int]:
        parent = self.parent(stmt)
        assert isinstance(parent, cst.IndentedBlock | cst.Module)
        return parent, next(i for i, s in enumerate(parent.body) if s is stmt)

    def ancestors(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        out = []
        current = self.parent(node)
        while current is not None:
            out.append(current)
            current = self.parent(current)
        return out

    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef | cst.Lambda):
                return ancestor
        return None

    def block_chain(self, node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
        return tuple(a for a in self.ancestors(node) if isinstance(a, cst.IndentedBlock | cst.Module))

    def member(self, expr: cst.BaseExpression) -> str | None:
        """`smprof.X` or a from-imported X: the module attribute it names, when the name provably is the
        Profiler's import where it is used (not a parameter, local or other import of the same name)."""
        if (
            isinstance(expr, cst.Attribute)
            and isinstance(expr.value, cst.Name)
            and expr.value.value in self.aliases
            and self.provenance(expr.value) == "profiler"
        ):
            return expr.attr.value
        if isinstance(expr, cst.Name) and expr.value in self.members and self.provenance(expr) == "profiler":
            return self.members[expr.value]
        return None

    def provenance(self, name: cst.Name) -> str:
        """ "profiler": every binding of ``name`` visible where it is used is the Profiler's import (or the
        fallback's `= None`); "other": none is (a parameter, a local, another module); "mixed": both."""
        try:
            scope = self.get_metadata(ScopeProvider, name)
        except KeyError:
            return "other"
        if scope is None:
            return "other"
        ours = [_binds(a, self.bindings) for a in scope[name.value]]
        if ours and all(ours):
            return "profiler"
        return "mixed" if any(ours) else "other"

    def mark(self, expr: cst.BaseExpression) -> None:
        for node in _names(expr):
            self.handled.add(node)

    def block_use(self, node: cst.CSTNode, why: str) -> None:
        self.blocking.append(Finding(self.line(node), why))

    def is_instance_call(self, expr: cst.BaseExpression) -> bool:
        """smprof.SMProfiler.instance()"""
        return (
            isinstance(expr, cst.Call)
            and not expr.args
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value == "instance"
            and self.member(expr.func.value) == "SMProfiler"
        )

    def sole_small(self, stmt: cst.SimpleStatementLine) -> cst.BaseSmallStatement | None:
        return stmt.body[0] if len(stmt.body) == 1 else None

    # --- imports (first pass, see collect_imports)
    def collect_imports(self) -> None:
        for node in _walk(self.module):
            if isinstance(node, cst.Try) and self._is_fallback_import(node):
                self.import_stmts.append(node)
                for stmt in _try_statements(node) or []:
                    none = _none_assignment(stmt.body[0])
                    if none is not None:  # `except ImportError: smprof = None`
                        self.none_fallback.add(none.value)
                        self.bindings.add(none)
                    else:
                        self._bind_import(stmt.body[0])
                continue
            if isinstance(node, cst.SimpleStatementLine):
                for small in node.body:
                    if isinstance(small, cst.Import | cst.ImportFrom) and _imports_smprof(small):
                        if len(node.body) != 1:
                            self.block_use(node, "import shares its line with other statements; split it")
                            continue
                        if any(node is s for s in self.import_stmts) or self._inside_fallback(node):
                            continue
                        self.import_stmts.append(node)
                        self._bind_import(small)
        if self.import_stmts:
            self._collect_reexports()

    def _collect_reexports(self) -> None:
        """Module-level `sp = smprof` / `region = smprof.annotate` / `region = annotate`: another name for the
        module or one of its members (a re-export). The name is bound once, so it is the Profiler's wherever
        used; the assignment goes with the imports."""
        targets = [
            t.target.value
            for n in _walk(self.module)
            if isinstance(n, cst.Assign)
            for t in n.targets
            if isinstance(t.target, cst.Name)
        ]
        for stmt in self.module.body:
            if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
                continue
            small = stmt.body[0]
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
                continue
            target, value = small.targets[0].target, small.value
            if not isinstance(target, cst.Name) or targets.count(target.value) != 1:
                continue
            if isinstance(value, cst.Name) and value.value in self.aliases and self.provenance(value) == "profiler":
                self.aliases.add(target.value)
            elif (attr := self.member(value)) in KNOWN_MEMBERS and attr != "SMProfiler":
                self.members[target.value] = str(attr)
            else:
                continue
            self.bindings.add(target)
            self.import_stmts.append(stmt)

    def _inside_fallback(self, node: cst.CSTNode) -> bool:
        return any(isinstance(a, cst.Try) and a in self.import_stmts for a in self.ancestors(node))

    def _is_fallback_import(self, node: cst.Try) -> bool:
        if node.orelse is not None or node.finalbody is not None or not node.handlers:
            return False
        statements = _try_statements(node)
        if statements is None:
            return False
        for handler in node.handlers:
            kinds = {dotted(e) for e in _handler_types(handler.type)} if handler.type else set()
            if not kinds or not kinds <= {"ImportError", "ModuleNotFoundError"}:
                return False
        first, *fallbacks = statements
        if not _is_module_import(first.body[0]):
            return False
        bound = _bound_names(first.body[0])
        return all(
            _is_module_import(s.body[0]) or getattr(_none_assignment(s.body[0]), "value", None) in bound
            for s in fallbacks
        )

    def _bind_import(self, small: cst.BaseSmallStatement) -> None:
        self.bindings.add(small)
        if isinstance(small, cst.Import):
            for alias in small.names:
                if _root(alias) in SMPROF_MODULES and alias.asname and "." in (dotted(alias.name) or ""):
                    # `import smppy.x as p` binds the submodule: its API is not the one mapped here
                    self.block_use(small, f"`{dotted(alias.name)}` is a submodule with no known torch.profiler mapping")
                    continue
                if _root(alias) in SMPROF_MODULES:
                    name = alias.asname.name if alias.asname else None
                    bound = dotted(name) if isinstance(name, cst.Name) else (dotted(alias.name) or "").split(".")[0]
                    self.aliases.add(bound or "")
            return
        assert isinstance(small, cst.ImportFrom)
        module = dotted(small.module) if small.module is not None else ""
        if module and "." in module:
            self.block_use(small, f"`from {module} import ...`: a submodule with no known torch.profiler mapping")
            return
        if isinstance(small.names, cst.ImportStar):
            self.block_use(small, "`from ... import *` of the profiler module: name what you use")
            return
        for alias in small.names:
            attr = dotted(alias.name) or ""
            local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else attr
            if attr not in KNOWN_MEMBERS:
                self.block_use(small, f"`{attr}` has no torch.profiler mapping")
                continue
            self.members[local] = attr

    # --- statements
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if any(node is s for s in self.import_stmts) or self._inside_fallback(node):
            for name in _names(node):
                self.handled.add(name)
            return
        small = self.sole_small(node)
        if small is None:
            return
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            self._assign(node, small.targets[0].target, small.value)
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            self._call_statement(node, small.value)

    def conditional_instance(self, value: cst.BaseExpression) -> str | None:
        """`SMProfiler.instance() if args.profile else None` (either way round): the branch that builds it."""
        if not isinstance(value, cst.IfExp) or self._guard_peek(value.test) is not None:
            return None
        if self.is_instance_call(value.body) and dotted(value.orelse) == "None":
            return "body"
        if self.is_instance_call(value.orelse) and dotted(value.body) == "None":
            return "orelse"
        return None

    def _guard_peek(self, test: cst.BaseExpression) -> bool | None:
        """Whether a test is a guard on the optional import, without marking it handled."""
        handled = set(self.handled)
        result = self._guard(test)
        self.handled = handled
        return result

    def unguarded(self, value: cst.BaseExpression) -> cst.BaseExpression:
        """`X if smprof else None` -> X (the guard goes)."""
        if isinstance(value, cst.IfExp) and self._guard(value.test) is True:
            return value.body
        return value

    def _assign(
        self, stmt: cst.SimpleStatementLine, target: cst.BaseAssignTargetExpression, value: cst.BaseExpression
    ) -> None:
        value = self.unguarded(value)
        target_code = self.code(target)
        branch = self.conditional_instance(value)
        if branch is not None and isinstance(target, cst.Name | cst.Attribute):
            self.mark(getattr(value, branch))
            self.mark(target)
            self.profilers[target_code] = _Profiler(code=target_code, assign=stmt)
            self.instance_sites += 1
            self.edits.append(Finding(self.line(stmt), "SMProfiler.instance() -> torch.profiler.profile(...)"))
            return
        if self.is_instance_call(value) and isinstance(target, cst.Name | cst.Attribute):
            assert isinstance(value, cst.Call)
            self.mark(value)
            self.mark(target)
            self.profilers[target_code] = _Profiler(code=target_code, assign=stmt)
            self.instance_sites += 1
            self.edits.append(Finding(self.line(stmt), "SMProfiler.instance() -> torch.profiler.profile(...)"))
            return
        if isinstance(value, cst.Call) and self.member(value.func) == "Config" and isinstance(target, cst.Name):
            self.mark(value)
            self.mark(target)
            self.config_names.add(target_code)
            self.plan.remove[stmt] = "settings moved into torch.profiler.profile(...)"
            self.edits.append(Finding(self.line(stmt), "removed Config(); its settings map to profile(...)"))
            return
        if (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value in self.config_names
        ):
            self.mark(target)
            self.plan.remove[stmt] = None
            self.edits.append(Finding(self.line(stmt), f"removed config setting `{target.attr.value}`"))
            return
        if (
            isinstance(value, cst.Call)
            and self.member(value.func) == "annotation_begin"
            and isinstance(target, cst.Name)
        ):
            self._annotation(stmt, value, begin=True, handle=target.value)

    def _call_statement(self, stmt: cst.SimpleStatementLine, call: cst.Call) -> None:
        func = call.func
        what = self.member(func)
        if what in {"annotation_begin", "annotation_end"}:
            self._annotation(stmt, call, begin=what == "annotation_begin", handle=None)
            return
        if not isinstance(func, cst.Attribute):
            return
        owner = func.value
        owner_code = self.code(owner)
        method = func.attr.value
        if owner_code in self.flow and owner_code not in self.profilers:  # handed over from another function
            self.profilers[owner_code] = _Profiler(code=owner_code, assign=None)
        is_profiler = owner_code in self.profilers or self.is_instance_call(owner)
        if not is_profiler:
            return
        if self.is_instance_call(owner):
            self.singleton_needed = True
            self.instance_sites += 1
            self.mark(owner)
            self.expr_replace[owner] = "_profiler"
            owner_code = "_profiler"
            self.profilers.setdefault("_profiler", _Profiler(code="_profiler", assign=None))
        else:
            self.mark(owner)
        if method == "configure":
            for arg in call.args:
                if dotted(arg.value) in self.config_names:
                    self.mark(arg.value)
                else:
                    self.block_use(stmt, "configure(...) with an argument other than a Config() variable")
                    return
            self.plan.remove[stmt] = None
            self.edits.append(Finding(self.line(stmt), "removed configure(...)"))
        elif method in {"start_profiling", "stop_profiling"} and not call.args:
            new = "start" if method == "start_profiling" else "stop"
            self.expr_replace[func.attr] = new
            self.edits.append(Finding(self.line(stmt), f"{method}() -> {new}()"))
            if new == "start":
                self._starts.append((owner_code, stmt))
            else:
                self._stops.add(stmt)
        else:
            self.block_use(stmt, f"`{self.code(func)}` has no torch.profiler mapping")

    def _annotation(self, stmt: cst.SimpleStatementLine, call: cst.Call, *, begin: bool, handle: str | None) -> None:
        self.mark(call.func)
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            self.block_use(stmt, "annotation_begin/annotation_end with other than one positional argument")
            return
        block, index = self.block(stmt)
        guarded = False
        holder = self.parent(block)
        while (
            isinstance(holder, cst.If)
            and self.unwrap.get(holder) is True
            and holder.body is block
            and isinstance(self.parent(holder), cst.IndentedBlock | cst.Module)
        ):  # `if smprof: annotation_begin(...)`: once the guard goes, the begin stands in the guard's block
            block, index = self.block(holder)
            guarded = True
            holder = self.parent(block)
        self.annotations.append(
            _Annotation(
                stmt=stmt,
                line=self.line(stmt),
                begin=begin,
                arg=self.code(call.args[0].value),
                handle=handle,
                block=block,
                index=index,
                scope=self.scope_of(stmt),
                blocks=self.block_chain(stmt),
                guarded=guarded,
            )
        )
        if handle is not None:
            small = stmt.body[0]
            assert isinstance(small, cst.Assign)
            for name in _names(small.targets[0].target):
                self.handled.add(name)

    # --- `if smprof:` guards of the optional import: torch.profiler always imports
    def visit_If(self, node: cst.If) -> None:
        test = node.test
        if (
            isinstance(test, cst.BooleanOperation)
            and isinstance(test.operator, cst.And)
            and not any(n.value in self.aliases | set(self.members) for n in _names(test.right))
            and self._guard(test.left) is True
        ):  # `if smprof is not None and args.profile:` -> `if args.profile:`
            self.expr_replace[test] = self.code(test.right)
            self.edits.append(Finding(self.line(node), "removed the guard on the optional profiler import"))
            return
        keep = self._guard(test)
        if keep is None:
            return
        if not keep and isinstance(node.orelse, cst.If):
            self.block_use(
                node, "an `elif` after a guard on the missing profiler: write it as `else:` + `if`, then rerun"
            )
            return
        self.unwrap[node] = keep
        self.edits.append(Finding(self.line(node), "removed the guard on the optional profiler import"))

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        """A guard on the optional import inside any boolean expression: `PROFILE = smprof is not None and
        os.environ.get("PROFILE")` -> `PROFILE = os.environ.get("PROFILE")`. Exact in value, not only in truth:
        a guard on the left decides the operation (`True and X` is X, `True or X` is True, ...); a guard on
        the right becomes the literal it now always is (`X and True`)."""
        if node in self.expr_replace:
            return  # `if G and X:`, done by visit_If
        conjunction = isinstance(node.operator, cst.And)
        left = self._guard(node.left)
        if left is not None:
            self.bool_pick[node] = "right" if left == conjunction else str(left)
            self.edits.append(Finding(self.line(node), "removed the guard on the optional profiler import"))
            return
        right = self._guard(node.right)
        if right is not None:
            self.expr_replace[node.right] = str(right)
            self.edits.append(Finding(self.line(node), "removed the guard on the optional profiler import"))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._guard_as_value(node)

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        self._guard_as_value(node)

    def _guard_as_value(self, node: cst.Comparison | cst.UnaryOperation) -> None:
        """`has_profiler = smprof is not None`, `return not smprof`: the literal the test now always is.
        Tests of `if` / `while` / `x if G else y` and operands of `and` / `or` / `not` are handled above."""
        parent = self.parent(node)
        if node in self.expr_replace or isinstance(parent, cst.BooleanOperation | cst.UnaryOperation):
            return
        if isinstance(parent, cst.If | cst.While | cst.IfExp) and parent.test is node:
            return
        value = self._guard(node)
        if value is not None:
            self.expr_replace[node] = str(value)
            self.edits.append(Finding(self.line(node), "removed the guard on the optional profiler import"))

    def visit_IfExp(self, node: cst.IfExp) -> None:
        keep = self._guard(node.test)
        if keep is not None:
            self.unwrap[node] = keep
            self.edits.append(Finding(self.line(node), "removed the guard on the optional profiler import"))

    def _guard(self, test: cst.BaseExpression) -> bool | None:
        """For a test on the fallback's `smprof = None` name: whether it holds once the profiler always
        imports (`if smprof:` / `is not None`: True; `if not smprof:` / `is None`: False); None otherwise."""
        negate = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
        if isinstance(test, cst.UnaryOperation) and negate:
            test = test.expression
        present = True
        if isinstance(test, cst.Comparison):
            if len(test.comparisons) != 1 or dotted(test.comparisons[0].comparator) != "None":
                return None
            operator = test.comparisons[0].operator
            if not isinstance(operator, cst.Is | cst.IsNot):
                return None
            present = isinstance(operator, cst.IsNot)
            test = test.left
        if isinstance(test, cst.Name) and test.value in self.none_fallback and self.provenance(test) == "profiler":
            self.handled.add(test)
            return present != negate
        return None

    # --- a profiler handed between functions (first pass, before the walk)
    def collect_flow(self) -> None:
        """Names a profiler travels to: `return p` makes its function a factory, `x = factory()` a profiler,
        `train(p)` / `train(prof=p)` to a function of this module makes that parameter one."""
        self.functions = {s.name.value: s for s in self.module.body if isinstance(s, cst.FunctionDef)}
        built = {
            n.targets[0].target.value
            for n in _walk(self.module)
            if isinstance(n, cst.Assign)
            and len(n.targets) == 1
            and isinstance(n.targets[0].target, cst.Name)
            and self.is_instance_call(self.unguarded(n.value))
        }
        flow = set(built)
        for _ in range(8):  # to a fixpoint: each round follows one more hand-over
            size = (len(flow), len(self.factories))
            for node in _walk(self.module):
                self._hand_over(node, flow)
            if (len(flow), len(self.factories)) == size:
                break
        self.flow = flow - built

    def _hand_over(self, node: cst.CSTNode, flow: set[str]) -> None:
        if isinstance(node, cst.Return) and isinstance(node.value, cst.Name) and node.value.value in flow:
            function = self.scope_of(node)
            if isinstance(function, cst.FunctionDef):
                self.factories.add(function.name.value)
                self.returned.add(node.value.value)
                self.handled.add(node.value)
        elif (
            isinstance(node, cst.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and isinstance(node.value, cst.Call)
            and dotted(node.value.func) in self.factories
        ):
            flow.add(node.targets[0].target.value)
            self.handled.add(node.targets[0].target)
        elif isinstance(node, cst.Call) and dotted(node.func) in self.functions:
            callee = self.functions[str(dotted(node.func))]
            names = [p.name.value for p in (*callee.params.posonly_params, *callee.params.params)]  # positional
            keywords = _steps.params(callee)
            for index, arg in enumerate(node.args):
                if not (isinstance(arg.value, cst.Name) and arg.value.value in flow) or arg.star:
                    continue
                param = arg.keyword.value if arg.keyword is not None else (names[index] if index < len(names) else "")
                if param in keywords:
                    flow.add(param)
                    self.returned.add(arg.value.value)
                    self.handled.add(arg.value)
                    self.handled.update(p.name for p in _all_params(callee) if p.name.value == param)

    def visit_Global(self, node: cst.Global) -> None:
        for name in _names(node):
            self.handled.add(name)

    # --- expressions
    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            if node.asynchronous is not None and self._is_annotate(item.item):
                # record_function has no __aenter__/__aexit__: `async with` on it is a TypeError
                self.mark(item.item)
                self.block_use(node, "`async with annotate(...)`: record_function is not an async context manager")
                continue
            self._annotate_call(item.item)

    def _is_annotate(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Call) and self.member(expr.func) == "annotate"

    def visit_Decorator(self, node: cst.Decorator) -> None:
        if self.member(node.decorator) == "annotate":  # bare @smprof.annotate
            function = self.parent(node)
            name = function.name.value if isinstance(function, cst.FunctionDef) else "annotation"
            self.mark(node.decorator)
            self.expr_replace[node.decorator] = f'torch.profiler.record_function("{name}")'
            self.edits.append(Finding(self.line(node), "@annotate -> @torch.profiler.record_function(...)"))
            return
        self._annotate_call(node.decorator)

    def visit_Call(self, node: cst.Call) -> None:
        self._annotate_call(node)
        if self.member(node.func) == "annotation_begin" and node.func not in self.handled:
            # its value is used (returned, passed on): entering returns the range, the handle to exit
            if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
                return
            self.mark(node.func)
            self.value_begins = True
            label = self.code(node.args[0].value)
            self.expr_replace[node] = f"torch.profiler.record_function({label}).__enter__()"
            self.edits.append(Finding(self.line(node), "annotation_begin(...) -> record_function(...).__enter__()"))

    def _annotate_call(self, expr: cst.BaseExpression) -> None:
        if not isinstance(expr, cst.Call) or self.member(expr.func) != "annotate" or expr.func in self.expr_replace:
            return
        if len(expr.args) != 1 or expr.args[0].keyword is not None or expr.args[0].star:
            self.block_use(expr, "annotate(...) with other than one positional argument")
            return
        self.mark(expr.func)
        self.expr_replace[expr.func] = "torch.profiler.record_function"
        self.edits.append(Finding(self.line(expr), "annotate -> torch.profiler.record_function"))

    # --- after the walk
    def finish(self) -> None:
        self._pair_annotations()
        self._find_step_loops()
        self._unmapped_names()

    def _pair_annotations(self) -> None:
        by_scope: dict[cst.CSTNode | None, list[_Annotation]] = {}
        for a in self.annotations:
            by_scope.setdefault(a.scope, []).append(a)
        handles_anywhere = {a.handle for a in self.annotations if a.begin and a.handle}
        labels = {a.arg for a in self.annotations if a.begin and a.handle is None}
        groups: list[tuple[_Annotation, list[_Annotation]]] = []
        handle_ends: list[_Annotation] = []
        lone_begins: list[_Annotation] = []
        lone_ends: list[_Annotation] = []
        for items in by_scope.values():
            open_: list[tuple[_Annotation, list[_Annotation]]] = []
            closed: list[tuple[_Annotation, list[_Annotation]]] = []
            for a in sorted(items, key=lambda x: x.line):
                if a.begin:
                    open_.append((a, []))
                    continue
                group = next((g for g in reversed(open_) if g[0].handle is not None and g[0].handle == a.arg), None)
                if group is None:
                    group = next((g for g in reversed(open_) if g[0].handle is None and g[0].arg == a.arg), None)
                if group is not None:
                    open_.remove(group)
                    closed.append(group)
                    group[1].append(a)
                    continue
                # one begin, several ends (an if and its else): the same range, exited on each path
                group = next(
                    (
                        g
                        for g in reversed(closed)
                        if g[0].handle is None and g[0].arg == a.arg and g[0].block in a.blocks
                    ),
                    None,
                )
                if group is not None:
                    group[1].append(a)
                    continue
                if a.arg in handles_anywhere or (self.value_begins and a.arg not in labels):
                    handle_ends.append(a)  # the user's handle travels; exit it where it ends
                    continue
                lone_ends.append(a)
            lone_begins += [b for b, _ends in open_ if b.handle is None]
            groups += closed
        self._pair_across_methods(lone_begins, lone_ends)
        pairs = [
            (b, ends[0])
            for b, ends in groups
            if len(ends) == 1 and b.block is ends[0].block and not b.guarded and not ends[0].guarded
        ]
        for b, ends in groups:
            e = ends[0]
            if (b, e) in pairs and self._nests(b, e, pairs) and self._handle_only_here(b, e):
                self.plan.wrap[b.stmt] = (e.stmt, f"torch.profiler.record_function({b.arg})")
                self.edits.append(Finding(b.line, f"annotation_begin/end -> with record_function({b.arg}): block"))
                continue
            outside = [x for x in ends if b.handle is None and b.block not in x.blocks]
            if outside:
                for x in outside:
                    self.blocking.append(
                        Finding(x.line, f"annotation_end({x.arg}) is not inside the block of its begin (line {b.line})")
                    )
                continue
            handle = b.handle or self._new_range_name()
            self._enter(b, handle)
            for x in ends:
                self.plan.replace[x.stmt] = [f"{handle}.__exit__(None, None, None)\n"]
                self.edits.append(Finding(x.line, "annotation_end -> __exit__ of its record_function"))
        for e in handle_ends:
            self.plan.replace[e.stmt] = [f"{e.arg}.__exit__(None, None, None)\n"]
            self.edits.append(Finding(e.line, "annotation_end(handle) -> handle.__exit__(...)"))
        for b in (a for a in self.annotations if a.begin and a.handle):
            if b.stmt not in self.plan.replace and b.stmt not in self.plan.wrap:
                self._enter(b, b.handle or "")

    def _pair_across_methods(self, begins: list[_Annotation], ends: list[_Annotation]) -> None:
        """A label begun in one method and ended in another of the same class (a callback's begin/end
        hooks): the range lives on `self`, entered in the one hook and exited in the other."""
        for b in begins:
            klass = _steps.is_method(b.scope, self.parent) if isinstance(b.scope, cst.FunctionDef) else None
            match = [
                e
                for e in ends
                if klass is not None
                and e.arg == b.arg
                and isinstance(e.scope, cst.FunctionDef)
                and _steps.is_method(e.scope, self.parent) is klass
            ]
            if not match:
                self.blocking.append(
                    Finding(
                        b.line,
                        f"annotation_begin({b.arg}) is never ended in this function: end it in the same function "
                        f"(`with torch.profiler.record_function({b.arg}):`) or in a method of the same class, "
                        "then rerun",
                    )
                )
                continue
            attr = "self." + self._new_range_name()
            self.plan.replace[b.stmt] = [
                f"{attr} = torch.profiler.record_function({b.arg})\n",
                f"{attr}.__enter__()\n",
            ]
            self.edits.append(Finding(b.line, f"annotation_begin -> {attr}.__enter__() (ended in another method)"))
            for e in match:
                ends.remove(e)
                self.plan.replace[e.stmt] = [f"{attr}.__exit__(None, None, None)\n"]
                self.edits.append(Finding(e.line, f"annotation_end -> {attr}.__exit__(...)"))
        for e in ends:
            self.blocking.append(Finding(e.line, f"annotation_end({e.arg}) has no matching annotation_begin"))

    def _enter(self, b: _Annotation, handle: str) -> None:
        self.plan.replace[b.stmt] = [
            f"{handle} = torch.profiler.record_function({b.arg})\n",
            f"{handle}.__enter__()\n",
        ]
        self.edits.append(Finding(b.line, "annotation_begin -> record_function(...).__enter__()"))

    def _new_range_name(self) -> str:
        taken = {n.value for n in _walk(self.module) if isinstance(n, cst.Name)}
        while True:
            self.range_counter += 1
            name = f"_prof_range_{self.range_counter}"
            if name not in taken:
                return name

    def _nests(self, b: _Annotation, e: _Annotation, pairs: Sequence[tuple[_Annotation, _Annotation]]) -> bool:
        for ob, oe in pairs:
            if ob is b or ob.block is not b.block:
                continue
            inside = [b.index < ob.index < e.index, b.index < oe.index < e.index]
            if inside[0] != inside[1]:
                return False
        return True

    def _handle_only_here(self, b: _Annotation, e: _Annotation) -> bool:
        if b.handle is None:
            return True
        uses = [n for n in _walk(self.module) if isinstance(n, cst.Name) and n.value == b.handle]
        return len(uses) == 2  # the assignment and the annotation_end argument

    def _find_step_loops(self) -> None:
        for owner, stmt in self._starts:
            profiler = self.profilers.get(owner)
            if profiler is not None:
                profiler.started = True
                self._place_step(profiler, owner, stmt)

    def _place_step(self, profiler: _Profiler, owner: str, stmt: cst.SimpleStatementLine) -> None:
        """A step() where the training step repeats, so the schedule bounds the recording (see _steps)."""
        loop, unreachable = self._loop_reached(owner, stmt)
        if loop is not None:
            same_function = self.scope_of(loop) is self.scope_of(stmt)
            if not same_function and self._refuse_conditional(owner, stmt, "the training loop's function"):
                return
            if all(loop is not existing for existing in profiler.loops):
                profiler.loops.append(loop)
                step = self._guarded(f"{owner}.step()", self._conditions(stmt, loop))
                self.plan.append.setdefault(loop, []).append(step)
                self.edits.append(Finding(self.line(loop), f"added {owner}.step() at the end of the training loop"))
            return
        if unreachable is not None:
            where, name = unreachable
            self.block_use(
                stmt,
                f"the training loop (line {self.line(where)}, in {name}()) cannot see `{owner}`: pass the profiler "
                "to that function or make it module-level, then rerun",
            )
            return
        if self._step_after_callers(profiler, owner, stmt):
            return
        hook = self._step_hook(owner, stmt) or self._work_function(owner, stmt)
        if hook is not None:
            if not self._refuse_conditional(owner, stmt, f"{hook.name.value}()"):
                self._step_per_call(owner, hook)
            return
        calls = self._calls_between(stmt)
        if not calls:
            self.block_use(
                stmt,
                f"no training loop, step-end hook or call after {owner}.start(): add {owner}.step() once per "
                "training step (it bounds the recording), then rerun",
            )
            return
        self.per_call = True
        for call in calls:
            self.plan.insert_after.setdefault(call, []).append(f"{owner}.step()\n")
        self.edits.append(
            Finding(self.line(stmt), f"no loop in sight: {owner}.step() after each call; the first call is recorded")
        )

    def _conditions(self, stmt: cst.CSTNode, target: cst.CSTNode | None) -> list[str]:
        """The `if` conditions ``stmt`` (a start) runs under that do not also hold where its step goes
        (``target``; None: another function): `if args.profile: P.start()` then the loop -> ["args.profile"].
        Without them the step would start recording on its own (torch.profiler's schedule starts tracing
        when step() reaches the warmup, started or not), or name a profiler that was never built."""
        around = set(self.ancestors(target)) if target is not None else set()
        out: list[str] = []
        previous: cst.CSTNode = stmt
        for ancestor in self.ancestors(stmt):
            if isinstance(ancestor, cst.FunctionDef | cst.ClassDef | cst.Lambda):
                break
            if (
                isinstance(ancestor, cst.If)
                and ancestor not in around
                and ancestor not in self.unwrap
                and not _is_main_guard(ancestor.test)
            ):
                test = self.expr_replace.get(ancestor.test) or self.code(ancestor.test)
                out.append(test if ancestor.body is previous else f"not ({test})")
            previous = ancestor
        return out

    def _guarded(self, call: str, conditions: list[str]) -> str:
        if not conditions:
            return call + "\n"
        test = conditions[0] if len(conditions) == 1 else " and ".join(f"({c})" for c in reversed(conditions))
        return f"if {test}:\n    {call}\n"

    def _refuse_conditional(self, owner: str, stmt: cst.SimpleStatementLine, where: str) -> bool:
        conditions = self._conditions(stmt, None)
        if conditions:
            self.block_use(
                stmt,
                f"{owner}.start() runs only under `if {conditions[0]}:` but its step() would go in {where}, where "
                "that is not known: start it unconditionally, or add the step() there under the same condition, "
                "then rerun",
            )
        return bool(conditions)

    def _step_after_callers(self, profiler: _Profiler, owner: str, stmt: cst.SimpleStatementLine) -> bool:
        """`def begin(): P.start()` then `begin()` and a loop: the loop after the call, when the profiler is
        visible there (module-level, or the shared `_profiler` every instance() site becomes)."""
        scope = self.scope_of(stmt)
        if not isinstance(scope, cst.FunctionDef) or self.functions.get(scope.name.value) is not scope:
            return False
        shared = self.instance_sites > 1
        visible = "_profiler" if shared else owner
        if not shared and not self._reaches_module(owner):
            return False
        for node in _walk(self.module):
            if not (isinstance(node, cst.Call) and dotted(node.func) == scope.name.value):
                continue
            line = next((a for a in self.ancestors(node) if isinstance(a, cst.SimpleStatementLine)), None)
            if line is None or not isinstance(self.parent(line), cst.IndentedBlock | cst.Module):
                continue
            for later in self._statements_after(line):
                loop = _steps.first_loop(later)
                if loop is not None and self._refuse_conditional(owner, stmt, "the loop after the call"):
                    return True
                if loop is not None:
                    training = _steps.innermost_training_loop(loop)
                    if all(training is not existing for existing in profiler.loops):
                        profiler.loops.append(training)
                        self.plan.append.setdefault(training, []).append(f"{visible}.step()\n")
                        self.edits.append(
                            Finding(self.line(training), f"added {visible}.step() at the end of the loop")
                        )
                    return True
        return False

    def _reaches_module(self, owner: str) -> bool:
        profiler = self.profilers.get(owner)
        return owner == "_profiler" or (
            profiler is not None and profiler.assign is not None and self.scope_of(profiler.assign) is None
        )

    def _statements_after(self, stmt: cst.CSTNode) -> list[cst.CSTNode]:
        """What runs after ``stmt`` until the profiler stops: the rest of its block, then the rest of each
        enclosing if/try/with block (`if args.profile: P.start()` then the loop), not leaving a function or
        loop; a statement holding the stop (a try/finally) is the last."""
        out: list[cst.CSTNode] = []
        node = stmt
        while True:
            block, index = self.block(node)
            for later in getattr(block, "body", [])[index + 1 :]:
                stops = any(n in self._stops for n in _steps.children_in_scope(later))
                if not (stops and isinstance(later, cst.SimpleStatementLine)):
                    out.append(later)
                if stops:
                    return out
            holder = next(
                (a for a in self.ancestors(block) if isinstance(self.parent(a), cst.IndentedBlock | cst.Module)), None
            )
            if holder is None or isinstance(holder, cst.FunctionDef | cst.ClassDef | cst.For | cst.While):
                return out
            node = holder

    def _loop_reached(
        self, owner: str, stmt: cst.SimpleStatementLine
    ) -> tuple[cst.CSTNode | None, tuple[cst.CSTNode, str] | None]:
        """(the training loop after the start, or None; a loop found where the profiler cannot be seen)."""
        after = self._statements_after(stmt)
        for later in after:
            loop = _steps.first_loop(later)
            if loop is not None:
                return _steps.innermost_training_loop(loop), None
        enclosing = self._enclosing_loop(stmt)
        if enclosing is not None:
            return enclosing, None
        return self._loop_through_calls(owner, stmt, after)

    def _loop_through_calls(
        self, owner: str, stmt: cst.SimpleStatementLine, after: list[cst.CSTNode]
    ) -> tuple[cst.CSTNode | None, tuple[cst.CSTNode, str] | None]:
        """The loop of a function or method of this module called after the start (three calls deep): the
        first that does a training step (backward()/step()), else the first."""
        caller = self.scope_of(stmt)
        frontier = [(caller, call) for later in after for call in _steps.calls_in(later)]
        seen: set[cst.FunctionDef] = set()
        found: list[tuple[cst.CSTNode, cst.FunctionDef]] = []
        for _depth in range(3):
            following: list[tuple[cst.CSTNode | None, cst.Call]] = []
            for context, call in frontier:
                callee = self._callee(context, call)
                if callee is None or callee in seen:
                    continue
                seen.add(callee)
                loop = _steps.first_loop(callee.body)
                if loop is not None:
                    found.append((_steps.innermost_training_loop(loop), callee))
                following += [(callee, c) for c in _steps.calls_in(callee.body)]
            frontier = following
        found.sort(key=lambda item: not _steps.calls_step(item[0]))  # stable: a training loop first
        for training_loop, callee in found:
            if self._reaches(owner, stmt, callee):
                return training_loop, None
        return None, ((found[0][0], found[0][1].name.value) if found else None)

    def _callee(self, context: cst.CSTNode | None, call: cst.Call) -> cst.FunctionDef | None:
        """`train(...)` (a function of this module) or `self.train_epoch(...)` (a method of the caller's class)."""
        if isinstance(call.func, cst.Name):
            return self.functions.get(call.func.value)
        if (
            isinstance(context, cst.FunctionDef)
            and dotted(call.func.value if isinstance(call.func, cst.Attribute) else call.func) == "self"
        ):
            klass = _steps.is_method(context, self.parent)
            assert isinstance(call.func, cst.Attribute)
            return _steps.methods(klass).get(call.func.attr.value) if klass is not None else None
        return None

    def _reaches(self, owner: str, stmt: cst.SimpleStatementLine, function: cst.FunctionDef) -> bool:
        """Whether ``owner`` (the profiler started at ``stmt``) is the same object inside ``function``."""
        start_scope = self.scope_of(stmt)
        if function is start_scope:
            return True
        if owner.startswith("self."):
            klass = _steps.is_method(start_scope, self.parent) if isinstance(start_scope, cst.FunctionDef) else None
            return "." not in owner[5:] and klass is not None and _steps.is_method(function, self.parent) is klass
        if "." in owner:
            return False
        if owner in self.flow and owner in _steps.params(function):
            return True
        return self._reaches_module(owner) and not _steps.binds_locally(function, owner)

    def _step_hook(self, owner: str, stmt: cst.SimpleStatementLine) -> cst.FunctionDef | None:
        """The step-end hook of the callback class whose hook starts the profile."""
        scope = self.scope_of(stmt)
        klass = _steps.is_method(scope, self.parent) if isinstance(scope, cst.FunctionDef) else None
        if klass is None:
            return None
        hooks = _steps.methods(klass)
        for name in _steps.STEP_END_HOOKS:
            if name in hooks and self._reaches(owner, stmt, hooks[name]):
                return hooks[name]
        return None

    def _work_function(self, owner: str, stmt: cst.SimpleStatementLine) -> cst.FunctionDef | None:
        """The one function of this module that does a training step and has no loop (called per step from
        elsewhere), when the profiler is visible in it."""
        start_scope = self.scope_of(stmt)
        candidates = [
            f
            for f in _walk(self.module)
            if isinstance(f, cst.FunctionDef)
            and f is not start_scope
            and (f.name.value in _steps.WORK_FUNCTIONS or _steps.calls_step(f.body))
            and _steps.first_loop(f.body) is None
        ]
        if len(candidates) == 1 and self._reaches(owner, stmt, candidates[0]):
            return candidates[0]
        return None

    def _step_per_call(self, owner: str, function: cst.FunctionDef) -> None:
        """`owner.step()` at the end of ``function`` and before each of its returns: one step per call."""
        step = f"{owner}.step()\n"
        for ret in _steps.own_returns(function):
            line = self.parent(ret)
            if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
                self.block_use(
                    ret, f"a return that shares its line: put it on its own line, then rerun ({owner}.step())"
                )
                return
            self.plan.replace[line] = [step, self.module.code_for_node(ret).strip() + "\n"]
        body = function.body.body if isinstance(function.body, cst.IndentedBlock) else []
        last = body[-1] if body else None
        ends_in_return = (
            isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1 and isinstance(last.body[0], cst.Return)
        )
        if not ends_in_return:
            self.plan.append.setdefault(function, []).append(step)
        self.edits.append(Finding(self.line(function), f"added {owner}.step() per call of {function.name.value}()"))

    def _calls_between(self, stmt: cst.SimpleStatementLine) -> list[cst.CSTNode]:
        """The call statements after the start in its block, up to the stop; for calls inside an annotation
        that becomes a `with` block, its end (the step goes after the block, not inside the range)."""
        block, index = self.block(stmt)
        body = list(getattr(block, "body", []))
        out: list[cst.CSTNode] = []
        position = index + 1
        while position < len(body) and body[position] not in self._stops:
            later = body[position]
            wrap = self.plan.wrap.get(later)
            if wrap is not None:
                end = next(i for i in range(position + 1, len(body)) if body[i] is wrap[0])
                if any(self._is_call_statement(s) for s in body[position + 1 : end]):
                    out.append(body[end])
                position = end + 1
                continue
            if self._is_call_statement(later):
                out.append(later)
            position += 1
        return out

    def _is_call_statement(self, stmt: cst.CSTNode) -> bool:
        small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
        value = small.value if isinstance(small, cst.Expr | cst.Assign) else None
        watched = self.aliases | set(self.members) | set(self.profilers)
        return isinstance(value, cst.Call) and not any(n.value in watched for n in _names(value))

    def _enclosing_loop(self, stmt: cst.CSTNode) -> cst.CSTNode | None:
        for ancestor in self.ancestors(stmt):
            if isinstance(ancestor, cst.FunctionDef):
                return None
            if isinstance(ancestor, cst.For | cst.While):
                return ancestor
        return None

    def _strings(self) -> None:
        """The module, or a name imported from it, named in a string: the rewrite would remove what it names."""
        exported = self.aliases | set(self.members)
        for node in _walk(self.module):
            if not isinstance(node, cst.SimpleString | cst.ConcatenatedString):
                continue
            value = node.evaluated_value
            if isinstance(value, bytes):
                continue
            if value in SMPROF_MODULES or (value in exported and self._in_all(node)):
                where = "`__all__` exports" if self._in_all(node) else "a string names"
                self.block_use(node, f'{where} "{value}", which the rewrite removes: drop it, then rerun')

    def _in_all(self, node: cst.CSTNode) -> bool:
        statement = next((a for a in self.ancestors(node) if isinstance(a, cst.SimpleStatementLine)), None)
        return statement is not None and any(n.value == "__all__" for n in _names(statement))

    def _unmapped_names(self) -> None:
        self._strings()
        watched = self.aliases | set(self.members) | set(self.config_names)
        for node in _walk(self.module):
            if isinstance(node, cst.Name) and node.value in watched and node not in self.handled:
                parent = self.parent(node)
                if isinstance(parent, cst.Attribute) and parent.attr is node:
                    continue  # `x.smprof` is an attribute of something else
                if node.value not in self.config_names and self.provenance(node) == "other":
                    continue  # a parameter or local of the same name: someone else's object
                shown = self.code(parent) if isinstance(parent, cst.Attribute | cst.Call) else node.value
                self.blocking.append(
                    Finding(
                        self.line(node),
                        f"`{shown}` has no safe torch.profiler mapping: remove or replace that use, then rerun",
                    )
                )
        for code in self.profilers:
            for node in _walk(self.module):
                if (
                    isinstance(node, cst.Name | cst.Attribute)
                    and self.code(node) == code
                    and any(n not in self.handled for n in _names(node))
                    and not self._truth_test(node)
                ):
                    self.blocking.append(
                        Finding(
                            self.line(node),
                            f"`{code}` is used in a way with no mapping (what converts: its start/stop/configure "
                            "calls, `if` tests, handing it to a function of this file): change that use, then rerun",
                        )
                    )

    def _truth_test(self, node: cst.CSTNode) -> bool:
        """`if prof:`, `prof is None`, `not prof`: as true of a torch.profiler.profile as of the old object;
        and `self.prof = None` (its value before the profiler is built, in `__init__`): as valid for one."""
        parent = self.parent(node)
        if isinstance(parent, cst.AssignTarget) and parent.target is node:
            assign = self.parent(parent)
            if isinstance(assign, cst.Assign) and dotted(assign.value) == "None":
                return True
        if isinstance(parent, cst.AnnAssign) and parent.target is node and dotted(parent.value or node) == "None":
            return True
        if isinstance(parent, cst.If | cst.While | cst.IfExp) and parent.test is node:
            return True
        if isinstance(parent, cst.Arg) and parent.keyword is node:
            return True  # `train(prof=...)`: the keyword's name, not the profiler
        if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
            return True
        return (
            isinstance(parent, cst.Comparison)
            and parent.left is node
            and len(parent.comparisons) == 1
            and isinstance(parent.comparisons[0].operator, cst.Is | cst.IsNot)
            and dotted(parent.comparisons[0].comparator) == "None"
        )


class _Rewrite(PlannedTransformer):
    def __init__(self, analysis: _Analysis, *, schedule: str, shared: bool = False) -> None:
        super().__init__(analysis.plan)
        self.a = analysis
        self.schedule = schedule
        self.shared = shared  # every instance() site is the module-level `_profiler`

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        value = self.a.unguarded(original_node.value)
        branch = self.a.conditional_instance(value)
        if branch is not None and isinstance(updated_node.value, cst.IfExp):
            built = cst.Name("_profiler") if self.shared else cst.parse_expression(profile_call(schedule=self.schedule))
            return updated_node.with_changes(value=updated_node.value.with_changes(**{branch: built}))
        if self.a.is_instance_call(value) and self.shared:
            return updated_node.with_changes(value=cst.Name("_profiler"))
        if self.a.is_instance_call(value):
            return updated_node.with_changes(value=cst.parse_expression(profile_call(schedule=self.schedule)))
        return updated_node

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        keep = self.a.unwrap.get(original_node)
        if keep is None:
            return updated_node
        return updated_node.body if keep else updated_node.orelse

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        keep = self.a.unwrap.get(original_node)
        if keep is not None:  # the guard goes: its kept branch stands in its place (see rebuild_body)
            branch = updated_node.body if keep else getattr(updated_node.orelse, "body", None)
            if isinstance(branch, cst.IndentedBlock):
                self.plan.inline[original_node] = list(branch.body)
            elif isinstance(branch, cst.SimpleStatementSuite):
                self.plan.inline[original_node] = [cst.SimpleStatementLine(body=branch.body)]
            else:
                self.plan.inline[original_node] = []
        return updated_node

    def leave_BooleanOperation(
        self, original_node: cst.BooleanOperation, updated_node: cst.BooleanOperation
    ) -> cst.BaseExpression:
        pick = self.a.bool_pick.get(original_node)
        if pick is None:
            return updated_node
        if pick == "right":
            right = updated_node.right
            if original_node.lpar and not right.lpar:  # `(G and X)`: the parentheses stay around X
                right = right.with_changes(lpar=updated_node.lpar, rpar=updated_node.rpar)
            return right
        return cst.Name(pick)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        new = self.a.expr_replace.get(original_node)
        if new is not None:
            if isinstance(original_node, cst.Name) and new.isidentifier():
                return original_node.with_changes(value=new)
            return cst.parse_expression(new)
        return super().on_leave(original_node, updated_node)


def _import_replacement(analysis: _Analysis, *, needs_torch: bool) -> list[str]:
    lines = []
    for stmt in analysis.import_stmts:  # `import os, smprof`: the other modules stay
        if isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Import):
            others = [a for a in stmt.body[0].names if _root(a) not in SMPROF_MODULES]
            if others:
                lines.append("import " + ", ".join(_alias_code(analysis.module, a) for a in others) + "\n")
    if not needs_torch:
        return lines
    has_os = any(
        isinstance(s, cst.SimpleStatementLine)
        and isinstance(s.body[0], cst.Import)
        and any(dotted(a.name) == "os" and a.asname is None for a in s.body[0].names)
        for s in analysis.module.body
    )
    if analysis.profilers and not has_os:
        lines.append("import os\n")
    lines.append("import torch.profiler\n")
    return lines


def rewrite_script(module: cst.Module) -> tuple[cst.Module, list[Finding], list[Finding]]:
    """(new module, edits, blocking findings). With blocking findings the module is returned as is."""
    if not any(isinstance(n, cst.Import | cst.ImportFrom) and _imports_smprof(n) for n in _walk(module)):
        return module, [], []  # nothing of the Profiler imported: no metadata to resolve (scopes cost time)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    analysis = _Analysis(module)
    with analysis.resolve(wrapper):
        return _rewrite_resolved(module, analysis)


def _rewrite_resolved(module: cst.Module, analysis: _Analysis) -> tuple[cst.Module, list[Finding], list[Finding]]:
    analysis.collect_imports()
    if not analysis.import_stmts:
        return module, [], sorted(set(analysis.blocking))
    analysis.collect_flow()
    module.visit(analysis)
    analysis.finish()
    if analysis.blocking:
        return module, [], sorted(set(analysis.blocking))
    manual: list[Finding] = []
    # SMProfiler.instance() is a singleton: with more than one call site (a start in one function and
    # the stop in another, an instance in a variable and one inline) every site must be the same
    # profile object, or stop() lands on a profiler that never started and no trace is written
    shared = analysis.instance_sites > 1
    schedule = (
        CALLS_SCHEDULE if analysis.per_call and not any(p.loops for p in analysis.profilers.values()) else SCHEDULE
    )
    if shared:
        analysis.singleton_needed = True
    for code, profiler in analysis.profilers.items():
        handed_on = code in analysis.returned and any(p.started for p in analysis.profilers.values())
        if not profiler.started and not handed_on and profiler.assign is not None:
            manual.append(
                Finding(
                    analysis.line(profiler.assign),
                    f"`{code}` is not started in this file: where it runs, call {code}.step() once per training "
                    "step, or its schedule records nothing",
                )
            )
        for loop in profiler.loops:
            for skip in _own_continues(loop):
                manual.append(
                    Finding(
                        analysis.line(skip),
                        f"`continue` skips the {code}.step() added at the end of this loop: call {code}.step() "
                        "before it too, or the profiler's schedule counts fewer steps than ran",
                    )
                )
    # the imports
    replacement = _import_replacement(analysis, needs_torch=bool(analysis.edits))
    first = True
    for stmt in analysis.import_stmts:
        flags = _try_flags(module, stmt)
        if first and replacement:
            analysis.plan.replace[stmt] = replacement + flags
            first = False
        elif flags:
            analysis.plan.replace[stmt] = flags
        else:
            analysis.plan.remove[stmt] = None
        analysis.edits.append(Finding(analysis.line(stmt), "profiler import -> import torch.profiler"))
    if analysis.singleton_needed:
        anchor = _singleton_anchor(module, analysis)
        if anchor is None:
            line = analysis.line(analysis.import_stmts[0])
            why = "the profiler is imported inside a block but its singleton is used: import it at the top, then rerun"
            return module, [], [Finding(line, why)]
        analysis.plan.insert_after[anchor] = ["\n_profiler = " + profile_call(schedule=schedule) + "\n"]
    new = module.visit(_Rewrite(analysis, schedule=schedule, shared=shared))
    return new, sorted(set(analysis.edits)), manual


# --------------------------------------------------------------------------------------------
# small CST utilities


def _own_continues(loop: cst.CSTNode) -> list[cst.Continue]:
    """The `continue` statements of ``loop`` itself (not of a loop, function or class inside it); its `else`
    block runs after the loop, so it is not searched either."""
    found: list[cst.Continue] = []
    body = getattr(loop, "body", None)
    stack: list[cst.CSTNode] = [body] if body is not None else []
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Continue):
            found.append(node)
        elif not isinstance(node, cst.For | cst.While | cst.FunctionDef | cst.ClassDef | cst.Lambda):
            stack.extend(node.children)
    return found


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(reversed(current.children))
    return out


def _last_top_level_import(module: cst.Module) -> cst.CSTNode | None:
    last: cst.CSTNode | None = None
    for stmt in module.body:
        simple_import = isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body
        )
        fallback_import = isinstance(stmt, cst.Try) and all(
            isinstance(s.body[0], cst.Import) for s in _try_statements(stmt) or []
        )
        if simple_import or fallback_import:
            last = stmt
        elif last is not None or not (isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr)):
            break
    return last


def _singleton_anchor(module: cst.Module, analysis: _Analysis) -> cst.CSTNode | None:
    """The module-level statement after which `_profiler = torch.profiler.profile(...)` goes: after the
    leading imports, unless the profiler import (which becomes `import torch.profiler`) comes later
    (`sys.path.insert(...)` first), then right after it. None when that import is not at module level
    (inside a function or an `if`): the module-level singleton could not see torch there."""
    first = analysis.import_stmts[0]
    body = list(module.body)
    position = next((i for i, stmt in enumerate(body) if stmt is first), None)
    if position is None:
        return None
    last = _last_top_level_import(module)
    if last is None or next(i for i, stmt in enumerate(body) if stmt is last) < position:
        return first
    return last


def _binds(assignment: object, bindings: set[cst.CSTNode]) -> bool:
    """Whether a scope assignment's node is one of ``bindings`` (an import binding the Profiler's module)."""
    node = getattr(assignment, "node", None)
    return isinstance(node, cst.CSTNode) and node in bindings


def _names(node: cst.CSTNode) -> list[cst.Name]:
    return [n for n in _walk(node) if isinstance(n, cst.Name)]


def _alias_code(module: cst.Module, alias: cst.ImportAlias) -> str:
    code = module.code_for_node(alias.name)
    if alias.asname is not None:
        code += " as " + module.code_for_node(alias.asname.name)
    return code


def _root(alias: cst.ImportAlias) -> str:
    return (dotted(alias.name) or "").split(".")[0]


def _imports_smprof(small: cst.Import | cst.ImportFrom) -> bool:
    if isinstance(small, cst.Import):
        return any(_root(a) in SMPROF_MODULES for a in small.names)
    if small.relative:  # `from .smprof import annotate`: the project's own module, not the Profiler
        return False
    module = dotted(small.module) if small.module is not None else ""
    return (module or "").split(".")[0] in SMPROF_MODULES


def _is_module_import(small: cst.BaseSmallStatement) -> bool:
    return isinstance(small, cst.Import) and all(_root(a) in SMPROF_MODULES for a in small.names)


def _bound_names(small: cst.BaseSmallStatement) -> set[str]:
    if not isinstance(small, cst.Import):
        return set()
    out = set()
    for alias in small.names:
        name = alias.asname.name if alias.asname else None
        out.add(name.value if isinstance(name, cst.Name) else _root(alias))
    return out


def _none_assignment(small: cst.BaseSmallStatement) -> cst.Name | None:
    """The target of `name = None`, else None."""
    if (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and isinstance(small.value, cst.Name)
        and small.value.value == "None"
    ):
        return small.targets[0].target
    return None


def _all_params(function: cst.FunctionDef) -> list[cst.Param]:
    p = function.params
    return [*p.posonly_params, *p.params, *p.kwonly_params]


def _try_statements(node: cst.Try) -> list[cst.SimpleStatementLine] | None:
    """The first statement of the try body and of each handler, when every other statement there is an
    availability flag (`HAS_SMPROF = True`); else None."""
    out = []
    for block in (node.body, *(h.body for h in node.handlers)):
        if not isinstance(block, cst.IndentedBlock) or not block.body:
            return None
        stmt = block.body[0]
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None
        if not all(_is_flag(s) for s in block.body[1:]):
            return None
        out.append(stmt)
    return out


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """`__name__ == "__main__"`: the script runs as a program, not a switch for profiling."""
    return (
        isinstance(test, cst.Comparison)
        and dotted(test.left) == "__name__"
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Equal)
        and isinstance(test.comparisons[0].comparator, cst.SimpleString)
        and test.comparisons[0].comparator.evaluated_value == "__main__"
    )


def _is_flag(stmt: cst.BaseStatement) -> bool:
    """`NAME = True` / `False` / `None`: a flag saying whether the import worked."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    small = stmt.body[0]
    return (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and dotted(small.value) in {"True", "False", "None"}
    )


def _try_flags(module: cst.Module, node: cst.CSTNode) -> list[str]:
    """The flags the try body sets on success (the import always works now): they stay, after the import."""
    if not isinstance(node, cst.Try) or not isinstance(node.body, cst.IndentedBlock):
        return []
    return [
        module.code_for_node(s.body[0]).strip() + "\n"
        for s in node.body.body[1:]
        if isinstance(s, cst.SimpleStatementLine)
    ]


def _handler_types(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.Tuple):
        return [e.value for e in expr.elements]
    return [expr]


def rewrite_source(source: str, *, filename: str = "<script>", launcher: object | None = None) -> RewriteResult:
    """Rewrite one Python file's text (scripts and launchers). Raises RewriteError when it does not parse."""
    from profstack.migrate.launcher import LauncherOptions, rewrite_launcher
    from profstack.migrate.scan import remaining_uses

    try:
        module = _parse(source, filename)
    except _NewerSyntax:
        if not _MENTIONS_PROFILER.search(source):
            return RewriteResult(source=source, changed=False)  # nothing to migrate: no reason to fail
        raise
    options = launcher if isinstance(launcher, LauncherOptions) else LauncherOptions()
    edits: list[Finding] = []
    manual: list[Finding] = []
    try:
        script, script_edits, script_manual = rewrite_script(module)
        edits += script_edits
        manual += script_manual
        if script is not module:
            script = _parse(script.code, filename)
        launched, launch_edits, launch_manual = rewrite_launcher(script, options)
    except RecursionError:  # LibCST walks the tree recursively: a generated 1000-term expression exhausts it
        raise RewriteError(f"{filename}: nested too deeply for the codemod to walk; left as is") from None
    edits += launch_edits
    manual += launch_manual
    new_source = launched.code
    changed = new_source != source
    if changed:
        try:
            parse_quietly(new_source, filename=filename)
        except SyntaxError as exc:  # our bug: never hand back code that does not parse
            raise RewriteError(
                f"{filename}: rewrite produced invalid Python at line {exc.lineno}; left as is"
            ) from None
    reported = {f.line for f in manual}
    manual += [f for f in remaining_uses(new_source) if f.line not in reported or not changed]
    return RewriteResult(source=new_source, changed=changed, edits=edits, manual=sorted(set(manual)))
