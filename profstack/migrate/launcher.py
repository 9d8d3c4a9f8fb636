"""Take SageMaker Profiler out of training-job launchers (SageMaker Python SDK v2 and v3, boto3).

What it removes:

    from sagemaker.debugger import ProfilerConfig, Profiler, ProfilerRule, ...   (v2; also `from
    from sagemaker.core.debugger import ...` / `sagemaker.core.shapes` (v3)       sagemaker import ...`)
    pc = ProfilerConfig(...) / rules = [ProfilerRule.sagemaker(rule_configs.ProfilerReport()), ...]
    profiler_config=..., profiler_rule_configurations=... (v3 TrainingJob.create, ModelTrainer),
    ProfilerConfig=..., ProfilerRuleConfigurations=... (boto3 create_training_job)
    estimator.update_profiler(...) / enable_default_profiling() / disable_profiling()

and, on each call it took them from (unless LauncherOptions.tensorboard is False), adds the
TensorBoard output ProfStack reads (`s3://<trace bucket>/tensorboard/<user>/`, profstack.layout)
and the owner tag, when missing. A v2 estimator also gets `disable_profiler=True`: without a
ProfilerConfig, SDK v2 turns default Profiler monitoring (and its report rule) back on.

Every edit is proven first (profstack.migrate.provenance): the call is a SageMaker estimator,
ModelTrainer, TrainingJob.create or a boto3 SageMaker client's create_training_job, and a removed
class comes from `sagemaker`, by where the names were imported from. Keyword dicts spread into a
launcher (`PyTorch(**kw)`) are followed within the module; the Profiler keys leave the dict, and the
added keywords go where they cannot reach a call twice. Anything unproven is left as it is; anything
unsafe blocks the launcher part of the rewrite (nothing changes there) and is reported with what to
change.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import libcst as cst
from libcst.metadata import FunctionScope, GlobalScope, ImportAssignment, MetadataWrapper, PositionProvider, Scope

from profstack.layout import user_tensorboard_prefix
from profstack.migrate._cst import (
    CELL_MARKER,
    Finding,
    PlannedTransformer,
    StatementPlan,
    dotted,
    parse_statements,
)
from profstack.migrate.provenance import (
    BOTO_KEYWORDS,
    IGNORES_DISABLE_PROFILER,
    PROFILER_CLASSES,
    PROFILER_METHODS,
    PROFILER_RULE_CONFIGS,
    SDK_KEYWORDS,
    UNKNOWN,
    DictFlow,
    DictValue,
    Entry,
    Provenance,
    all_of,
    imported_path,
    is_attached_instance,
    is_estimator_instance,
    is_profiler_class,
    is_profiler_value,
    launcher_flavour,
    literal_entries,
    sagemaker_dict,
)
from profstack.migrate.sagemaker_paths import TENSORBOARD_DIR

USER_TAG = "profstack:user"
_MAX_PRUNE_ROUNDS = 8  # locals that only removed locals used, followed this many steps
LOWER_KEYWORDS = SDK_KEYWORDS
#: a word every launcher edit needs: a Profiler keyword, class, rule or method
_MENTIONS = re.compile(
    r"\b(?:"
    + "|".join(sorted(SDK_KEYWORDS | BOTO_KEYWORDS | PROFILER_CLASSES | PROFILER_METHODS | PROFILER_RULE_CONFIGS))
    + r")\b"
)


@dataclass(frozen=True)
class LauncherOptions:
    user: str | None = None  # ProfStack user the jobs belong to (else read from $PROFSTACK_USER at launch)
    trace_bucket: str | None = None  # ProfStack trace bucket (else $PROFSTACK_TRACE_BUCKET at launch)
    tensorboard: bool = True  # add TensorBoardOutputConfig and the owner tag
    # where the ProfStack constants go: "imports" (after the opening imports) or "first-use" (just above the
    # first statement that uses them: a notebook's launcher cell)
    constants_at: str = "imports"


class _Analysis:
    """Decides every launcher edit, each proven by provenance (see profstack.migrate.provenance)."""

    def __init__(self, module: cst.Module, wrapper: MetadataWrapper) -> None:
        self.module = module
        self.prov = Provenance(wrapper)
        self.positions = wrapper.resolve(PositionProvider)
        self.flow = DictFlow(self.prov)
        self.plan = StatementPlan()
        self.drop_aliases: set[cst.CSTNode] = set()  # ImportAliases to drop
        self.drop_args: set[cst.CSTNode] = set()
        self.drop_elements: set[cst.CSTNode] = set()  # Element / DictElement nodes
        self.calls: dict[cst.CSTNode, str] = {}  # call -> flavour, for the calls we took profiler settings from
        self.present: dict[cst.CSTNode, set[str]] = {}  # call -> keywords it gets from explicit args and dicts
        self.dict_tags: dict[cst.CSTNode, tuple[str, int]] = {}  # the List of a dict's tags -> (flavour, line)
        self.dict_true: set[cst.CSTNode] = set()  # the Name False of a dict's disable_profiler -> True
        self.handled: set[cst.CSTNode] = set()
        self.edits: list[Finding] = []
        self.blocking: list[Finding] = []
        self.unproven: list[Finding] = []  # reported only when the file is a launcher being rewritten
        self.manual: list[Finding] = []
        self.bound: set[str] = set()
        self.nodes = list(_walk(module))
        self.entry_nodes: set[cst.CSTNode] = set()
        # sagemaker imports that go when every use of them was removed (`rule_configs`, `dbg`)
        self.droppable_imports: list[tuple[cst.Import | cst.ImportFrom, cst.ImportAlias, str]] = []
        self.removed_vars: list[cst.Name] = []
        self.options_tensorboard = True
        self._lines: list[str] | None = None
        # every import alias of the module: one goes when every use of it was removed (no new ruff F401)
        self.all_imports: list[tuple[cst.Import | cst.ImportFrom, cst.ImportAlias, str]] = []
        # estimator calls that set no Profiler but get disable_profiler=True (SDK v2 profiles every job by
        # default) -> the keywords they get from explicit arguments and dicts
        self.disable_only: dict[cst.CSTNode, set[str]] = {}
        self.replace_values: dict[cst.CSTNode, str] = {}  # Arg -> its new value (update_training_job)
        # names the rewrite introduces -> the nodes (calls, statements) that use them
        self.sites: dict[str, list[cst.CSTNode]] = {}
        self.exported: set[str] = set()  # names listed in a module-level __all__

    def line(self, node: cst.CSTNode) -> int:
        try:
            return int(self.positions[node].start.line)
        except KeyError:
            return 0

    def indent_of(self, node: cst.CSTNode) -> str:
        """The indentation of the line a node starts on."""
        if self._lines is None:
            self._lines = self.module.code.splitlines()
        lines = self._lines
        number = self.line(node)
        text = lines[number - 1] if 0 < number <= len(lines) else ""
        return text[: len(text) - len(text.lstrip())]

    def code(self, node: cst.CSTNode) -> str:
        text = self.module.code_for_node(node).strip()
        return text if len(text) <= 60 else text[:57] + "..."

    def mark(self, node: cst.CSTNode) -> None:
        for n in _walk(node):
            self.handled.add(n)

    def is_profiler(self, expr: cst.BaseExpression) -> bool:
        return all_of(self.prov.origins(expr), is_profiler_value)

    def profiler_rules(self, expr: cst.BaseExpression) -> bool:
        """`rules=` holding only profiler rules (a proven rule, or a list of them)."""
        if isinstance(expr, cst.List | cst.Tuple):
            return bool(expr.elements) and all(self.is_profiler(e.value) for e in expr.elements)
        return self.is_profiler(expr)

    def flavour(self, call: cst.Call) -> str | None:
        return launcher_flavour(self.prov, call)

    def run(self) -> None:
        for node in self.nodes:
            if isinstance(node, cst.Import | cst.ImportFrom):
                self._import(node)
        for node in self.nodes:
            if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
                self._statement(node)
            elif isinstance(node, cst.Element) and self.is_profiler(node.value):
                self.drop_elements.add(node)
                self.mark(node)
                self.edits.append(Finding(self.line(node), "removed a profiler rule"))
        self.flow.build_all(self.nodes)
        self.entry_nodes = {e.node for dv in self.flow.values() for e in dv.entries}
        for node in self.nodes:
            if isinstance(node, cst.Call) and not _is_builtin_dict(node, self.prov):
                self._call(node)
        self._dicts()
        self._running_calls_as_values()
        if self.edits or self.calls:  # a launcher being rewritten: every SDK v2 job it starts stops profiling
            for node in self.nodes:
                if isinstance(node, cst.Call) and node not in self.calls and self.flavour(node) == "estimator":
                    self._disable_only(node)
        self._finish()

    # --- imports
    def _import(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            local = _local_name(alias)
            self.bound.add(local)
            if local:
                self.all_imports.append((node, alias, local))
            if isinstance(node, cst.Import):
                if alias.asname is not None and (dotted(alias.name) or "").startswith("sagemaker."):
                    self.droppable_imports.append((node, alias, local))  # `import sagemaker.debugger as dbg`
                continue
            path = imported_path(node, _local_name(alias))
            if is_profiler_class(path):
                self.drop_aliases.add(alias)
                self.mark(alias)
            elif path.startswith("sagemaker.") and isinstance(node, cst.ImportFrom):
                self.droppable_imports.append((node, alias, local))  # goes if the removals leave it unused

    # --- statements: `pc = ProfilerConfig(...)`, `estimator.disable_profiling()`
    def _statement(self, node: cst.SimpleStatementLine) -> None:
        small = node.body[0]
        if (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and self.is_profiler(small.value)
        ):
            self.mark(node)
            self.plan.remove[node] = None
            self.removed_vars.append(small.targets[0].target)
            self.edits.append(Finding(self.line(node), f"removed {small.targets[0].target.value} (Profiler settings)"))
            return
        if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
            return
        func = small.value.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in PROFILER_METHODS):
            return
        receiver = self.prov.origins(func.value)
        if all_of(receiver, is_estimator_instance):
            self._running_job(node, small.value, func)
        elif UNKNOWN in receiver and func.attr.value != "disable_profiling":
            self.unproven.append(
                Finding(
                    self.line(node),
                    f".{func.attr.value}() on `{self.code(func.value)}`, which profstack cannot prove is a "
                    "SageMaker estimator: if it is one, replace the call by `.disable_profiling()`",
                )
            )

    def _running_job(self, node: cst.SimpleStatementLine, call: cst.Call, func: cst.Attribute) -> None:
        """`.update_profiler()` / `.enable_default_profiling()` / `.disable_profiling()` on an estimator.
        A job this file launches now runs with disable_profiler=True: the call goes (disable_profiling()
        would raise "Profiler is already disabled", the others would turn it on). A job started elsewhere
        (`Estimator.attach(name)`) may still be profiling: `.disable_profiling()` stays, the others become
        it (the SDK's way to stop a running job's Profiler), inside `contextlib.suppress(ValueError)`, the
        error the SDK raises when that job's Profiler is off already."""
        method = func.attr.value
        real = self.prov.origins(func.value) - {"builtins.None"}
        attached = {o for o in real if is_attached_instance(o)}
        line = self.line(node)
        if not attached:
            self.mark(node)
            self.plan.remove[node] = None
            self.edits.append(Finding(line, f"removed .{method}(): its job runs with disable_profiler=True"))
            return
        if method == "disable_profiling" and attached == real:
            return  # stops the running job's Profiler: kept as it is
        for arg in call.args:
            self.mark(arg)
        receiver = self.module.code_for_node(func.value).strip()
        self.plan.replace[node] = [
            "with contextlib.suppress(ValueError):  # ProfStack: its Profiler may be off already\n"
            f"    {receiver}.disable_profiling()\n"
        ]
        self.sites.setdefault("contextlib", []).append(node)
        self.edits.append(
            Finding(line, f".{method}() -> .disable_profiling() on the running job (ValueError: it is off already)")
        )

    def _running_calls_as_values(self) -> None:
        """A running-job call used as a value (`r = est.update_profiler(...)`) has no statement to convert."""
        for node in self.nodes:
            if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
                continue
            if node.func.attr.value not in PROFILER_METHODS or node.func.attr.value == "disable_profiling":
                continue
            if node in self.handled or not all_of(self.prov.origins(node.func.value), is_estimator_instance):
                continue
            parent = self.prov.parent(node)
            if isinstance(parent, cst.Expr) and isinstance(self.prov.parent(parent), cst.SimpleStatementLine):
                continue  # a statement of its own: converted by _running_job
            self.blocking.append(
                Finding(
                    self.line(node),
                    f"`.{node.func.attr.value}(...)` is used as a value: call it as a statement of its own, "
                    "then rerun (it becomes `.disable_profiling()`)",
                )
            )

    def _disable_only(self, call: cst.Call) -> None:
        """An SDK v2 estimator call that set no Profiler: it gets disable_profiler=True all the same (SDK v2
        monitors every job by default), where a keyword can reach it."""
        line = self.line(call)
        names = {o.rsplit(".", 1)[-1] for o in self.prov.origins(call.func)}
        if names & IGNORES_DISABLE_PROFILER:
            self.manual.append(
                Finding(
                    line,
                    "AlgorithmEstimator drops disable_profiler=: set `estimator.disable_profiler = True` before "
                    "fit(), or SDK v2 monitors the job by default",
                )
            )
            return
        local = self.prov.local_class(call.func)
        if local is not None and not _takes_keywords(local):
            self.manual.append(
                Finding(
                    line,
                    f"`{local.name.value}.__init__` takes no **kwargs: pass disable_profiler=True to the estimator "
                    "it builds by hand (SDK v2 profiles every job by default)",
                )
            )
            return
        present: set[str] = set()
        dicts: list[DictValue] = []
        for arg in call.args:
            if arg.keyword is not None:
                present.add(arg.keyword.value)
            elif arg.star == "**":
                dv = self.flow.of_spread(arg.value)
                if dv is None:
                    self.manual.append(
                        Finding(
                            self.line(arg),
                            f"`**{self.code(arg.value)}`: profstack cannot see whether it sets disable_profiler; "
                            "make sure the job gets disable_profiler=True (SDK v2 profiles every job by default)",
                        )
                    )
                    return
                dicts.append(dv)
                present |= dv.key_names()
        for dv in dicts:
            self._dict_additions(dv, "estimator", line, tags=False)
        self.disable_only[call] = present

    # --- calls
    def _call(self, call: cst.Call) -> None:
        flavour = self.flavour(call)
        keywords = BOTO_KEYWORDS if flavour == "boto3" else LOWER_KEYWORDS
        line = self.line(call)
        if flavour is None:
            self._foreign_call(call)
            return
        explicit = [
            a
            for a in call.args
            if a.keyword is not None
            and (
                (a.keyword.value in keywords and not _disables_profiler(a.value))
                or (a.keyword.value == "rules" and flavour == "estimator" and self.profiler_rules(a.value))
            )
        ]
        spreads: list[tuple[cst.Arg, DictValue | None]] = [
            (a, self.flow.of_spread(a.value)) for a in call.args if a.star == "**"
        ]
        from_dicts = [
            (d, e)
            for _, dv in spreads
            if dv is not None
            for d, e in dv.all_entries()
            if not e.removes
            and (e.key in keywords or e.key == "rules")
            and self._profiler_entry(e)
            and not self._removed_before(dv, e.key, call)
        ]
        if not explicit and not from_dicts:
            return
        method = call.func.attr.value if isinstance(call.func, cst.Attribute) else ""
        if method == "update_training_job":
            self._update_training_job(call, explicit, bool(from_dicts))
            return
        unknown = [(a, dv) for a, dv in spreads if dv is None]
        if unknown:
            for arg, _ in unknown:
                why = self._why_unknown(arg.value)
                self.blocking.append(
                    Finding(
                        self.line(arg),
                        f"`**{self.code(arg.value)}` in a launcher call that sets the Profiler: {why}, so profstack "
                        "cannot see whether it sets tags/disable_profiler/TensorBoard output; build it as a dict "
                        "literal or dict(...) in this module, or pass those keywords explicitly, then rerun",
                    )
                )
            return
        for arg in explicit:
            assert arg.keyword is not None
            self.drop_args.add(arg)
            self.mark(arg)
            self.edits.append(Finding(self.line(arg), f"removed {arg.keyword.value}="))
        present = {a.keyword.value for a in call.args if a.keyword is not None and a not in self.drop_args}
        for _, dv in spreads:
            assert dv is not None
            present |= {k for k in dv.key_names() if k not in keywords}
        self.calls[call] = flavour
        self.present[call] = present
        for _, dv in spreads:
            assert dv is not None
            self._dict_additions(dv, flavour, line)

    def _update_training_job(self, call: cst.Call, explicit: list[cst.Arg], from_dicts: bool) -> None:
        """UpdateTrainingJob on a running job: its ProfilerConfig becomes {"DisableProfiler": True} (how the
        API stops a running job's Profiler; the SDK's disable_profiling() sends the same), and its
        ProfilerRuleConfigurations go. It takes no TensorBoardOutputConfig or Tags: nothing is added."""
        if from_dicts:
            self.blocking.append(
                Finding(
                    self.line(call),
                    "update_training_job(**...) sets the Profiler through a dict: pass "
                    'ProfilerConfig={"DisableProfiler": True} explicitly, then rerun',
                )
            )
            return
        for arg in explicit:
            assert arg.keyword is not None
            self.mark(arg.value)
            if arg.keyword.value == "ProfilerConfig":
                self.replace_values[arg] = '{"DisableProfiler": True}'
                self.edits.append(
                    Finding(self.line(arg), 'update_training_job: ProfilerConfig -> {"DisableProfiler": True}')
                )
            else:
                self.drop_args.add(arg)
                self.edits.append(Finding(self.line(arg), f"update_training_job: removed {arg.keyword.value}="))
        if not any(a.keyword is not None and a.keyword.value == "ProfilerConfig" for a in explicit):
            self.blocking.append(
                Finding(
                    self.line(call),
                    "update_training_job sets Profiler rules without a ProfilerConfig: pass "
                    'ProfilerConfig={"DisableProfiler": True} instead, then rerun',
                )
            )

    def _removed_before(self, dv: DictValue, key: str, call: cst.Call) -> bool:
        """The key was popped or deleted earlier in the same block as the call (and not set again
        in between): the call does not get it. `kw.pop("profiler_config")` before the second job."""
        here = self._statement_in_block(call)
        if here is None:
            return False
        block, index = here
        removed_at = -1
        for _, entry in dv.all_entries():
            if entry.key != key or entry.statement is None:
                continue
            where = self._statement_in_block(entry.statement)
            if where is None or where[0] is not block or where[1] >= index:
                continue
            if entry.removes:
                removed_at = max(removed_at, where[1])
        if removed_at < 0:
            return False
        return not any(
            e.key == key
            and not e.removes
            and e.statement is not None
            and (w := self._statement_in_block(e.statement)) is not None
            and w[0] is block
            and removed_at < w[1] < index
            for _, e in dv.all_entries()
        )

    def _statement_in_block(self, node: cst.CSTNode) -> tuple[cst.CSTNode, int] | None:
        """The block (Module or IndentedBlock) holding the statement that contains node, and its index."""
        current: cst.CSTNode | None = node
        while current is not None:
            parent = self.prov.parent(current)
            if isinstance(parent, cst.Module | cst.IndentedBlock):
                index = next((i for i, s in enumerate(parent.body) if s is current), None)
                return (parent, index) if index is not None else None
            current = parent
        return None

    def _why_unknown(self, expr: cst.BaseExpression) -> str:
        described = self.flow.describe(expr)
        if described is not None and described.all_unknown():
            node, why = described.all_unknown()[0]
            return f"line {self.line(node)}: {why}"
        if self.flow.too_deep:
            return "it comes through a chain of dicts too long to follow"
        if isinstance(expr, cst.Name):
            return f"`{expr.value}` is not bound once to a dict literal or dict(...) in this module"
        return "it is not a dict profstack can follow"

    def _dict_additions(self, dv: DictValue, flavour: str, line: int, *, tags: bool = True) -> None:
        """Keys the launcher call takes from a dict: its tags list gets the owner tag, its
        disable_profiler=False becomes True."""
        for _, entry in dv.all_entries():
            if entry.removes or entry.read:
                continue
            if entry.key in {"tags", "Tags"} and self.options_tensorboard and tags:
                if isinstance(entry.value, cst.List):
                    previous = self.dict_tags.get(entry.value)
                    if previous is not None and previous[0] != flavour:
                        self.blocking.append(
                            Finding(
                                self.line(entry.node),
                                "one tags list feeds launchers of different SDKs (dict tags and Tag objects): "
                                "give each its own tags, then rerun",
                            )
                        )
                    self.dict_tags[entry.value] = (flavour, line)
                else:
                    self.manual.append(
                        Finding(self.line(entry.node), f"tags are not a list literal: add the {USER_TAG} tag by hand")
                    )
            elif entry.key == "disable_profiler" and flavour == "estimator":
                if isinstance(entry.value, cst.Name) and entry.value.value == "False":
                    self.dict_true.add(entry.value)
                elif not (isinstance(entry.value, cst.Name) and entry.value.value == "True"):
                    self.manual.append(
                        Finding(
                            self.line(entry.node),
                            "disable_profiler is an expression: it must be True, or SDK v2 turns its Profiler on",
                        )
                    )

    def _foreign_call(self, call: cst.Call) -> None:
        """A call profstack cannot prove is a SageMaker launcher: its profiler keywords stay."""
        for arg in call.args:
            if arg.keyword is None or arg.keyword.value not in LOWER_KEYWORDS | BOTO_KEYWORDS:
                continue
            if arg in self.entry_nodes:
                continue  # `d.update(profiler_config=...)` of a followed dict: decided with the dict
            callee = self.prov.origins(call.func)
            if self.is_profiler(arg.value):
                self.blocking.append(
                    Finding(
                        self.line(arg),
                        f"a SageMaker {arg.keyword.value} goes to `{self.code(call.func)}(...)`, which profstack "
                        "cannot prove is a SageMaker estimator, ModelTrainer or create_training_job: call the "
                        "launcher directly with it, or remove it by hand",
                    )
                )
            elif UNKNOWN in callee and arg.keyword.value in LOWER_KEYWORDS:
                self.unproven.append(
                    Finding(
                        self.line(arg),
                        f"{arg.keyword.value}= on `{self.code(call.func)}(...)`, which profstack cannot prove is a "
                        "SageMaker launcher: left as it is",
                    )
                )

    # --- keyword dicts that hold profiler settings
    def _dicts(self) -> None:
        self.flow.build_all(self.nodes)  # every dict bound to a name, also those no launcher spreads
        built = {dv.expr for dv in self.flow.values()}
        for node in self.nodes:  # a dict holding a SageMaker ProfilerConfig that could not be followed
            if node in built or not (isinstance(node, cst.Dict) or _is_builtin_dict_node(node, self.prov)):
                continue
            for key, value, where in literal_entries(node):
                if key in LOWER_KEYWORDS | BOTO_KEYWORDS and self.is_profiler(value):
                    self.blocking.append(
                        Finding(
                            self.line(where),
                            f"{key} in a dict profstack cannot follow (bound to a name more than once, or used "
                            "other than as `**` into a SageMaker launcher): bind it once and spread it into the "
                            "launcher, or remove the setting by hand",
                        )
                    )
        for dv in self.flow.values():
            direct = [e for e in dv.entries if self._profiler_entry(e)]
            if not direct or not sagemaker_dict(self.prov, self.flow, dv):
                continue  # not SageMaker's: a `profiler_config` key of another library's settings
            blocked = self._check_flow(dv, direct[0])
            if blocked:
                continue
            for entry in direct:
                self._remove_entry(entry)
            for entry in dv.entries:
                if entry.read and entry.key in LOWER_KEYWORDS | BOTO_KEYWORDS:
                    self.blocking.append(
                        Finding(
                            self.line(entry.node),
                            f"`{dv.name}`'s {entry.key} is read here: the codemod removes it; change this line "
                            "so it does not need the Profiler setting, then rerun",
                        )
                    )

    def _profiler_entry(self, entry: Entry) -> bool:
        if entry.read:
            return False
        if entry.key in LOWER_KEYWORDS | BOTO_KEYWORDS:
            return entry.value is None or not _disables_profiler(entry.value)
        return entry.key == "rules" and entry.value is not None and self.profiler_rules(entry.value)

    def _check_flow(self, dv: DictValue, entry: Entry) -> bool:
        """Every place a dict holding profiler settings flows to must be a proven launcher."""
        what = f"`{dv.name}`" if dv.name else "a dict"
        line = self.line(entry.node)
        start = len(self.blocking)
        calls, escapes = self.flow.consumers(dv)
        for node, why in escapes:
            self.blocking.append(
                Finding(
                    self.line(node),
                    f"{what} holds {entry.key} (line {line}) and {why} here: profstack cannot follow it; "
                    "pass the dict only as `**` to SageMaker launchers in this module, or remove the setting "
                    "by hand",
                )
            )
        for target in calls:
            flavour = self.flavour(target)
            keys = BOTO_KEYWORDS if flavour == "boto3" else LOWER_KEYWORDS
            if flavour is None or (entry.key != "rules" and entry.key not in keys):
                self.blocking.append(
                    Finding(
                        self.line(target),
                        f"{what} holds {entry.key} (line {line}) and is spread into "
                        f"`{self.code(target.func)}(...)`, which profstack cannot prove is a SageMaker "
                        "launcher taking it: remove the setting by hand",
                    )
                )
        return len(self.blocking) > start

    def _remove_entry(self, entry: Entry) -> None:
        line = self.line(entry.node)
        if entry.statement is not None and not isinstance(entry.node, cst.Arg):
            self.plan.remove[entry.statement] = None
            self.mark(entry.statement)
        elif isinstance(entry.node, cst.DictElement):
            self.drop_elements.add(entry.node)
            self.mark(entry.node)
        elif isinstance(entry.node, cst.Arg):
            call = self.prov.parent(entry.node)
            statement = entry.statement
            if statement is not None and isinstance(call, cst.Call) and all(self._profiler_arg(a) for a in call.args):
                self.plan.remove[statement] = None  # `d.update(profiler_config=pc)` alone
                self.mark(statement)
            else:
                self.drop_args.add(entry.node)
                self.mark(entry.node)
        else:
            return
        self.edits.append(Finding(line, f"removed {entry.key} from a launcher's keyword dict"))

    def _profiler_arg(self, arg: cst.Arg) -> bool:
        return arg.keyword is not None and arg.keyword.value in LOWER_KEYWORDS | BOTO_KEYWORDS

    # --- what a removal leaves behind
    def _finish(self) -> None:
        if self.blocking:
            return
        if self.edits or self.calls:  # a launcher being rewritten: what its removals leave unused goes
            self.exported = _exported_names(self.module)
            for _ in range(_MAX_PRUNE_ROUNDS):
                if not self._prune_locals():
                    break
            for importer, alias, local in self.all_imports:
                refs = self._references(importer, local)
                if local not in self.exported and refs and all(ref in self.handled for ref in refs):
                    self.drop_aliases.add(alias)
        self._plan_imports()
        for node in self.nodes:
            if isinstance(node, cst.Import | cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
                for alias in node.names:
                    if alias in self.drop_aliases:
                        self._still_used(node, _local_name(alias))
        for target in self.removed_vars:
            self._still_used(target, target.value)

    def _prune_locals(self) -> bool:
        """A function's local whose every use was removed goes too (`interval = 500` used only by the
        removed ProfilerConfig), so the rewrite adds no unused variable (ruff F841); only a value without
        side effects (literals, names, attributes, f-strings, SageMaker Profiler objects). Whether any went."""
        changed = False
        for node in self.nodes:
            if not (isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1) or self.plan.touches(node):
                continue
            small = node.body[0]
            if not (
                isinstance(small, cst.Assign)
                and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Name)
                and isinstance(self.prov.scope(small.targets[0].target), FunctionScope)
            ):
                continue
            target = small.targets[0].target
            refs = self._references(target, target.value)
            if not refs or not all(ref in self.handled for ref in refs):
                continue
            if self._pure(small.value):
                self.plan.remove[node] = None
                self.mark(node)
                self.edits.append(Finding(self.line(node), f"removed `{target.value}` (only the Profiler used it)"))
            else:  # the value may do something (a call): it stays, as a statement of its own
                self.plan.replace[node] = [self.module.code_for_node(small.value).strip() + "\n"]
                self.mark(target)
                self.edits.append(
                    Finding(
                        self.line(node), f"`{target.value} = ...` -> `...`: only the Profiler used `{target.value}`"
                    )
                )
            changed = True
        return changed

    def _pure(self, expr: cst.BaseExpression) -> bool:
        if self.is_profiler(expr):
            return True
        if isinstance(expr, cst.Name | cst.SimpleString | cst.Integer | cst.Float | cst.Imaginary):
            return True
        if isinstance(expr, cst.Attribute):
            return self._pure(expr.value)
        if isinstance(expr, cst.ConcatenatedString):
            return self._pure(expr.left) and self._pure(expr.right)
        if isinstance(expr, cst.FormattedString):
            return all(
                self._pure(part.expression) for part in expr.parts if isinstance(part, cst.FormattedStringExpression)
            )
        if isinstance(expr, cst.UnaryOperation):
            return self._pure(expr.expression)
        if isinstance(expr, cst.BinaryOperation):
            return self._pure(expr.left) and self._pure(expr.right)
        if isinstance(expr, cst.List | cst.Tuple | cst.Set):
            return all(isinstance(e, cst.Element) and self._pure(e.value) for e in expr.elements)
        if isinstance(expr, cst.Dict):
            return all(
                isinstance(e, cst.DictElement) and self._pure(e.key) and self._pure(e.value) for e in expr.elements
            )
        return False

    def _references(self, binder: cst.CSTNode, local: str) -> list[cst.CSTNode]:
        scope = self.prov.scope(binder)
        if scope is None:
            return []
        out: list[cst.CSTNode] = []
        for assignment in scope.assignments[local]:
            node = getattr(assignment, "node", None)
            if node is binder:
                out.extend(access.node for access in assignment.references)
        return out

    def _still_used(self, binder: cst.CSTNode, local: str) -> None:
        for ref in self._references(binder, local):
            if ref not in self.handled:
                self.blocking.append(
                    Finding(
                        self.line(ref),
                        f"`{local}` is still used here after its removal (Profiler settings this line needs): "
                        "change the line so it does not need them, then rerun",
                    )
                )

    # --- the names the added code uses
    def _site_nodes(self, name: str) -> list[cst.CSTNode]:
        """Where the added code will use ``name`` (the launcher calls, a keyword dict's tags list, the
        converted running-job statements)."""
        if name == "contextlib":
            return list(self.sites.get("contextlib", []))
        if not self.options_tensorboard:
            return []
        calls = [c for c, f in self.calls.items() if name != "Tag" or f in {"core", "trainer"}]
        lists = [
            node
            for node, (f, _) in self.dict_tags.items()
            if name != "TensorBoardOutputConfig" and (name != "Tag" or f in {"core", "trainer"})
        ]
        return [*calls, *lists]

    def _expected(self, name: str, path: str) -> bool:
        """An import of ``name`` from where the added code needs it."""
        if name in {"os", "contextlib"}:
            return path == name or path.startswith(name + ".")
        if not (path.startswith("sagemaker.") and path.rsplit(".", 1)[-1] == name):
            return False
        flavours = set(self.calls.values()) | {f for f, _ in self.dict_tags.values()}
        v3 = path.startswith(("sagemaker.core.", "sagemaker.train."))
        return ("estimator" in flavours and not v3) or (bool(flavours & {"core", "trainer"}) and v3)

    def _bindings(self, name: str) -> list[tuple[Scope, object]]:
        scopes = {id(scope): scope for scope in self.prov.scopes.values() if scope is not None}
        return [(scope, a) for scope in scopes.values() for a in scope.assignments[name]]

    def check_names(self, options: LauncherOptions) -> None:
        """The names the added code uses must mean what it means: TensorBoardOutputConfig / Tag imported from
        the SDK of the launchers (one SDK per file), contextlib and os the modules, the constants not bound
        to something else where they are used. A clash blocks the rewrite, with what to rename."""
        flavours = {f for f in self.calls.values() if f in {"estimator", "core", "trainer"}}
        if options.tensorboard and len({"v2" if f == "estimator" else f for f in flavours}) > 1:
            line = min(self.line(c) for c in self.calls)
            self.blocking.append(
                Finding(
                    line,
                    "launchers of different SageMaker SDKs in one file need different TensorBoardOutputConfig "
                    "classes: split the file by SDK, then rerun",
                )
            )
            return
        for name in ("TensorBoardOutputConfig", "Tag", "contextlib", "os", *_CONSTANTS):
            sites = self._site_nodes(name) if name not in {"os", *_CONSTANTS} else self._site_nodes("PROFSTACK_USER")
            if not sites:
                continue
            for scope, assignment in self._bindings(name):
                node = getattr(assignment, "node", None)
                if isinstance(assignment, ImportAssignment) and node is not None:
                    if self._expected(name, imported_path(node, name)) or name in _CONSTANTS:
                        continue
                elif name in _CONSTANTS and isinstance(scope, GlobalScope):
                    continue  # the module's own constants: used as they are
                elif not isinstance(scope, GlobalScope) and not any(self._within(site, scope) for site in sites):
                    continue  # a local of a function the added code is not in
                where = self.line(node) if isinstance(node, cst.CSTNode) else 0
                self.blocking.append(
                    Finding(
                        where,
                        f"`{name}` is bound to something else here, and the rewrite adds code that uses that name: "
                        "rename yours, then rerun",
                    )
                )

    def _within(self, node: cst.CSTNode, scope: Scope) -> bool:
        current = self.prov.scope(node)
        while current is not None and not isinstance(current, GlobalScope):
            if current is scope:
                return True
            current = current.parent
        return False

    def covered_locally(self) -> set[str]:
        """Names every use of which sits in a function that imports them itself: no module import for those."""
        out: set[str] = set()
        for name in ("TensorBoardOutputConfig", "Tag", "contextlib"):
            sites = self._site_nodes(name)
            if sites and all(self._local_import(site, name) for site in sites):
                out.add(name)
        return out

    def _local_import(self, node: cst.CSTNode, name: str) -> bool:
        current = self.prov.scope(node)
        while current is not None and not isinstance(current, GlobalScope):
            bindings = list(current.assignments[name])
            if bindings:
                return all(
                    isinstance(b, ImportAssignment) and self._expected(name, imported_path(b.node, name))
                    for b in bindings
                )
            current = current.parent
        return False

    def first_site(self) -> cst.CSTNode | None:
        """The top-level statement holding the first use of a name the added code introduces."""
        nodes = [*self._site_nodes("PROFSTACK_USER"), *self.sites.get("contextlib", [])]
        best: tuple[int, cst.CSTNode] | None = None
        positions = {id(statement): i for i, statement in enumerate(self.module.body)}
        for node in nodes:
            current: cst.CSTNode | None = node
            while current is not None and id(current) not in positions:
                current = self.prov.parent(current)
            if current is not None and (best is None or positions[id(current)] < best[0]):
                best = (positions[id(current)], current)
        return best[1] if best is not None else None

    def _plan_imports(self) -> None:
        for node in self.nodes:
            if not (isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1):
                continue
            small = node.body[0]
            if not isinstance(small, cst.Import | cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
                continue
            if all(a in self.drop_aliases for a in small.names):
                self.plan.remove[node] = None
                self.edits.append(Finding(self.line(node), "removed an import only the Profiler used"))
            elif any(a in self.drop_aliases for a in small.names):
                self.edits.append(Finding(self.line(node), "dropped names only the Profiler used from the import"))


class _Rewrite(PlannedTransformer):
    def __init__(
        self, analysis: _Analysis, options: LauncherOptions, edits: list[Finding], manual: list[Finding]
    ) -> None:
        super().__init__(analysis.plan)
        self.a = analysis
        self.options = options
        self.edits = edits
        self.manual = manual
        self.needed_imports: set[tuple[str, str]] = set()
        self.introduced: set[str] = set()  # PROFSTACK_USER / PROFSTACK_TENSORBOARD_URI

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> cst.Import:
        kept = _filter(original_node.names, updated_node.names, self.a.drop_aliases)
        return updated_node.with_changes(names=kept) if kept else updated_node

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom) -> cst.ImportFrom:
        if isinstance(original_node.names, cst.ImportStar):
            return updated_node
        kept = _filter(original_node.names, cast(Sequence[cst.ImportAlias], updated_node.names), self.a.drop_aliases)
        return updated_node.with_changes(names=kept) if kept else updated_node

    def leave_List(self, original_node: cst.List, updated_node: cst.List) -> cst.List:
        elements, opening = _filter_items(
            original_node.elements, updated_node.elements, self.a.drop_elements, updated_node.lbracket.whitespace_after
        )
        if original_node.elements and not elements:  # emptied: `[]`, without the dropped items' comments
            updated_node = updated_node.with_changes(
                elements=[], lbracket=cst.LeftSquareBracket(), rbracket=cst.RightSquareBracket()
            )
        else:
            assert opening is not None
            updated_node = updated_node.with_changes(
                elements=elements, lbracket=updated_node.lbracket.with_changes(whitespace_after=opening)
            )
        tagged = self.a.dict_tags.get(original_node)
        if tagged is not None:
            flavour, line = tagged
            if USER_TAG not in self.a.module.code_for_node(original_node):
                indent = self.a.indent_of(original_node)
                updated_node = _append_element(updated_node, _tag_element(flavour), indent)
                self.edits.append(Finding(line, f"added the {USER_TAG} tag (to the tags of its keyword dict)"))
                self._introduce(flavour, tag=True)
        return updated_node

    def leave_Tuple(self, original_node: cst.Tuple, updated_node: cst.Tuple) -> cst.Tuple:
        elements = _filter(original_node.elements, updated_node.elements, self.a.drop_elements)
        if original_node.elements and not elements:  # emptied: `()` (a bare `a, b` needs the parentheses)
            return updated_node.with_changes(elements=[], lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return updated_node.with_changes(elements=elements)

    def leave_Dict(self, original_node: cst.Dict, updated_node: cst.Dict) -> cst.Dict:
        elements, opening = _filter_items(
            original_node.elements, updated_node.elements, self.a.drop_elements, updated_node.lbrace.whitespace_after
        )
        if original_node.elements and not elements:
            return updated_node.with_changes(elements=[], lbrace=cst.LeftCurlyBrace(), rbrace=cst.RightCurlyBrace())
        assert opening is not None
        return updated_node.with_changes(
            elements=elements, lbrace=updated_node.lbrace.with_changes(whitespace_after=opening)
        )

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        if original_node in self.a.dict_true:
            self.edits.append(
                Finding(self.a.line(original_node), "disable_profiler=False -> True (SDK v2 profiles by default)")
            )
            return updated_node.with_changes(value="True")
        return updated_node

    def _replaced_values(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        """`update_training_job(ProfilerConfig=...)`: the values planned to be replaced."""
        if not any(a in self.a.replace_values for a in original.args):
            return updated
        return updated.with_changes(
            args=[
                u.with_changes(value=cst.parse_expression(self.a.replace_values[o]))
                if o in self.a.replace_values
                else u
                for o, u in zip(original.args, updated.args, strict=True)
            ]
        )

    def _kept_args(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        args, opening = _filter_items(original.args, updated.args, self.a.drop_args, updated.whitespace_before_args)
        if original.args and not args:
            opening = cst.SimpleWhitespace("")
        assert opening is not None
        return updated.with_changes(args=args, whitespace_before_args=opening)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        updated_node = self._kept_args(original_node, self._replaced_values(original_node, updated_node))
        line = self.a.line(original_node)
        if original_node in self.a.disable_only:
            return self._disable_only(original_node, updated_node, line)
        flavour = self.a.calls.get(original_node)
        if flavour is None:
            return updated_node
        keywords = {a.keyword.value for a in updated_node.args if a.keyword} | self.a.present.get(original_node, set())
        new: list[str] = []
        if flavour == "estimator" and "disable_profiler" not in keywords:
            new.append("disable_profiler=True")
            self.edits.append(Finding(line, "added disable_profiler=True (SDK v2 profiles by default)"))
        elif flavour == "estimator" and any(
            a.keyword and a.keyword.value == "disable_profiler" for a in updated_node.args
        ):
            updated_node = self._disable_profiler(updated_node, line)
        wrap = False
        if self.options.tensorboard:
            tb_keyword = {
                "estimator": "tensorboard_output_config",
                "core": "tensor_board_output_config",
                "boto3": "TensorBoardOutputConfig",
            }.get(flavour)
            if tb_keyword is not None and tb_keyword not in keywords:
                new.append(_tensorboard_arg(flavour, tb_keyword))
                self.edits.append(Finding(line, f"added {tb_keyword}= (the ProfStack TensorBoard prefix)"))
                self._introduce(flavour, tensorboard=True)
            wrap = flavour == "trainer"
            tags_keyword = "Tags" if flavour == "boto3" else "tags"
            tag = _tag_element(flavour)
            existing = next((a for a in updated_node.args if a.keyword and a.keyword.value == tags_keyword), None)
            if existing is None and tags_keyword in keywords:
                pass  # the tags come from a keyword dict: its list gets the tag (leave_List)
            elif existing is None:
                new.append(f"{tags_keyword}=[{tag}]")
                self.edits.append(Finding(line, f"added the {USER_TAG} tag"))
                self._introduce(flavour, tag=True)
            elif isinstance(existing.value, cst.List):
                if USER_TAG not in cst.Module(body=[]).code_for_node(existing.value):
                    indent = _separator(updated_node)[1] if _multi_line(updated_node) else "    "
                    updated_node = _append_tag(updated_node, existing, tag, indent)
                    self.edits.append(Finding(line, f"added the {USER_TAG} tag"))
                    self._introduce(flavour, tag=True)
            else:
                self.manual.append(Finding(line, f"tags are not a list literal: add the {USER_TAG} tag by hand"))
        updated_node = _append_args(updated_node, new)
        if wrap:
            self._introduce(flavour, tensorboard=True)
            self.edits.append(Finding(line, "added .with_tensorboard_output_config(...) (the ProfStack prefix)"))
            chained = cst.parse_expression(
                "x.with_tensorboard_output_config(\n"
                "    TensorBoardOutputConfig(\n"
                "        s3_output_path=PROFSTACK_TENSORBOARD_URI,\n"
                f'        local_path="{TENSORBOARD_DIR}",\n'
                "    )\n"
                ")"
            )
            assert isinstance(chained, cst.Call)
            assert isinstance(chained.func, cst.Attribute)
            return chained.with_changes(func=chained.func.with_changes(value=updated_node))
        return updated_node

    def _disable_profiler(self, call: cst.Call, line: int) -> cst.Call:
        """An explicit `disable_profiler=False` would keep SDK v2's default Profiler on once
        profiler_config is gone: it becomes True; an expression is reported."""
        arg = next(a for a in call.args if a.keyword and a.keyword.value == "disable_profiler")
        if isinstance(arg.value, cst.Name) and arg.value.value == "True":
            return call
        if isinstance(arg.value, cst.Name) and arg.value.value == "False":
            self.edits.append(Finding(line, "disable_profiler=False -> True (SDK v2 profiles by default)"))
            new_arg = arg.with_changes(value=cst.Name("True"))
            return call.with_changes(args=[new_arg if a is arg else a for a in call.args])
        self.manual.append(
            Finding(line, "disable_profiler= is an expression: it must be True, or SDK v2 turns its Profiler on")
        )
        return call

    def _disable_only(self, original: cst.Call, call: cst.Call, line: int) -> cst.Call:
        """An SDK v2 estimator that set no Profiler: disable_profiler=True all the same (or False -> True)."""
        explicit = {a.keyword.value for a in call.args if a.keyword is not None}
        if "disable_profiler" in explicit:
            return self._disable_profiler(call, line)
        if "disable_profiler" in self.a.disable_only[original]:
            return call  # from its keyword dict (False there became True)
        self.edits.append(Finding(line, "added disable_profiler=True (SDK v2 profiles every job by default)"))
        return _append_args(call, ["disable_profiler=True"])

    def _introduce(self, flavour: str, *, tensorboard: bool = False, tag: bool = False) -> None:
        """Record the names the added code uses: the constants, and what must be imported for them."""
        module = {
            "estimator": "sagemaker.debugger",
            "core": "sagemaker.core.shapes",
            "trainer": "sagemaker.train.configs",
        }.get(flavour)
        if tensorboard:
            self.introduced.add("PROFSTACK_TENSORBOARD_URI")
            self.introduced.add("PROFSTACK_USER")  # the URI is built from it
            if module is not None:
                self.needed_imports.add((module, "TensorBoardOutputConfig"))
        if tag:
            self.introduced.add("PROFSTACK_USER")
            if module is not None and flavour != "estimator":
                self.needed_imports.add((module, "Tag"))


def _tensorboard_arg(flavour: str, keyword: str) -> str:
    if flavour == "boto3":
        return (
            f'{keyword}={{\n    "S3OutputPath": PROFSTACK_TENSORBOARD_URI,\n    "LocalPath": "{TENSORBOARD_DIR}",\n}}'
        )
    local = "container_local_output_path" if flavour == "estimator" else "local_path"
    return (
        f"{keyword}=TensorBoardOutputConfig(\n"
        "    s3_output_path=PROFSTACK_TENSORBOARD_URI,\n"
        f'    {local}="{TENSORBOARD_DIR}",\n'
        ")"
    )


def _tag_element(flavour: str) -> str:
    if flavour in {"core", "trainer"}:
        return f'Tag(key="{USER_TAG}", value=PROFSTACK_USER)'
    return f'{{"Key": "{USER_TAG}", "Value": PROFSTACK_USER}}'


def _filter(original: Sequence[Any], updated: Sequence[Any], drop: set[cst.CSTNode]) -> list[Any]:
    """Drop items by original identity (see _filter_items); the opening whitespace is not touched."""
    return _filter_items(original, updated, drop, None)[0]


def _filter_items(
    original: Sequence[Any],
    updated: Sequence[Any],
    drop: set[cst.CSTNode],
    opening: cst.BaseParenthesizableWhitespace | None,
) -> tuple[list[Any], cst.BaseParenthesizableWhitespace | None]:
    """Drop items (list/tuple/dict elements, call arguments, import names) by original identity, and the
    comments that were theirs: the lines above a dropped item and the comment at the end of its line go;
    the comments above the next kept item, and a kept item's own end-of-line comment, stay. Returns the
    kept items and the whitespace after the opening bracket (``opening``: what to put there, None: not
    tracked)."""
    keep = [o not in drop for o in original]
    items = list(updated)
    kept: list[Any] = []
    index = 0
    while index < len(items):
        if keep[index]:
            kept.append(items[index])
            index += 1
            continue
        end = index
        while end + 1 < len(items) and not keep[end + 1]:
            end += 1
        last = items[end]
        tail = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
        if kept and end == len(items) - 1:  # the run ends the sequence: the kept item before it is last now
            kept[-1] = _take_ending(kept[-1], last)
        elif kept:
            previous = kept[-1]
            if isinstance(previous.comma, cst.Comma):
                comma = previous.comma.with_changes(whitespace_after=_merge_ws(previous.comma.whitespace_after, tail))
                kept[-1] = previous.with_changes(comma=comma)
        elif opening is not None and end < len(items) - 1:
            opening = _merge_ws(opening, tail)
        index = end + 1
    return kept, opening


def _merge_ws(
    own: cst.BaseParenthesizableWhitespace, tail: cst.BaseParenthesizableWhitespace | None
) -> cst.BaseParenthesizableWhitespace:
    """The whitespace after a kept item (or the opening bracket) when the items after it went: its own
    end-of-line comment, then what came after the last dropped item (the comments above the next one)."""
    if isinstance(own, cst.ParenthesizedWhitespace) and isinstance(tail, cst.ParenthesizedWhitespace):
        return own.with_changes(empty_lines=tail.empty_lines, indent=tail.indent, last_line=tail.last_line)
    return own


def _take_ending(item: Any, last: Any) -> Any:
    """A kept item that is the last one now: the dropped last item's comma (trailing or none) and what
    followed it, with the kept item's own end-of-line comment."""
    comma = last.comma
    mine = item.comma.whitespace_after if isinstance(item.comma, cst.Comma) else None
    if (
        isinstance(comma, cst.Comma)
        and isinstance(mine, cst.ParenthesizedWhitespace)
        and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)
    ):
        comma = comma.with_changes(whitespace_after=comma.whitespace_after.with_changes(first_line=mine.first_line))
    changes: dict[str, Any] = {"comma": comma}
    if isinstance(item, cst.Arg):
        changes["whitespace_after_arg"] = last.whitespace_after_arg
    return item.with_changes(**changes)


def _separator(call: cst.Call) -> tuple[cst.BaseParenthesizableWhitespace, str]:
    """The whitespace between the call's arguments, and the indent of an argument (relative)."""
    for arg in call.args[:-1]:
        if isinstance(arg.comma, cst.Comma):
            ws = arg.comma.whitespace_after
            if isinstance(ws, cst.ParenthesizedWhitespace):
                return ws, ws.last_line.value
    ws = call.whitespace_before_args
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return ws, ws.last_line.value
    return _newline("    "), ""


def _newline(indent: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), last_line=cst.SimpleWhitespace(indent), indent=True
    )


def _parse_arg(code: str, indent: str) -> cst.Arg:
    call = cst.parse_expression("f(" + code.replace("\n", "\n" + indent) + ")")
    assert isinstance(call, cst.Call)
    return call.args[0]


def _multi_line(call: cst.Call) -> bool:
    return isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace) or any(
        isinstance(a.comma, cst.Comma) and isinstance(a.comma.whitespace_after, cst.ParenthesizedWhitespace)
        for a in call.args
    )


def _append_args(call: cst.Call, codes: list[str]) -> cst.Call:
    if not codes:
        return call
    sep, indent = _separator(call)
    if not _multi_line(call):  # one argument a line from now on, so that the new ones fit
        indent = "    "
        sep = _newline(indent)
        call = call.with_changes(
            whitespace_before_args=sep,
            args=[a.with_changes(comma=cst.Comma(whitespace_after=sep)) for a in call.args],
        )
        closing: cst.BaseParenthesizableWhitespace = _newline("")
        last_comma: cst.Comma | cst.MaybeSentinel = cst.Comma(whitespace_after=closing)
        last_ws: cst.BaseParenthesizableWhitespace = cst.SimpleWhitespace("")
    else:
        old_last = call.args[-1] if call.args else None
        last_comma = old_last.comma if old_last is not None else cst.MaybeSentinel.DEFAULT
        last_ws = old_last.whitespace_after_arg if old_last is not None else cst.SimpleWhitespace("")
        if not isinstance(last_comma, cst.Comma):
            last_comma = cst.Comma(whitespace_after=last_ws)
            last_ws = cst.SimpleWhitespace("")
    args = list(call.args)
    if args:
        args[-1] = args[-1].with_changes(
            comma=cst.Comma(whitespace_after=sep), whitespace_after_arg=cst.SimpleWhitespace("")
        )
    new_args = [_parse_arg(code, indent) for code in codes]
    for i, arg in enumerate(new_args):
        if i < len(new_args) - 1:
            new_args[i] = arg.with_changes(comma=cst.Comma(whitespace_after=sep))
        else:
            new_args[i] = arg.with_changes(comma=last_comma, whitespace_after_arg=last_ws)
    return call.with_changes(args=[*args, *new_args])


def _append_tag(call: cst.Call, tags: cst.Arg, tag: str, indent: str) -> cst.Call:
    """Add one element to a tags list; a one-line list becomes one element a line, so it stays short."""
    assert isinstance(tags.value, cst.List)
    elements = list(tags.value.elements)
    new = cst.Element(value=cst.parse_expression(tag))
    multi_line = isinstance(tags.value.lbracket.whitespace_after, cst.ParenthesizedWhitespace)
    if multi_line:
        last = elements[-1]
        sep = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else _newline(indent + "    ")
        closing = last.comma if isinstance(last.comma, cst.Comma) else cst.MaybeSentinel.DEFAULT
        elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=_newline(indent + "    ")))
        del sep
        value = tags.value.with_changes(elements=[*elements, new.with_changes(comma=closing)])
    else:
        inner = _newline(indent + "    ")
        elements = [e.with_changes(comma=cst.Comma(whitespace_after=inner)) for e in elements]
        new = new.with_changes(comma=cst.Comma(whitespace_after=_newline(indent)))
        value = tags.value.with_changes(
            lbracket=cst.LeftSquareBracket(whitespace_after=inner),
            elements=[*elements, new],
            rbracket=cst.RightSquareBracket(),
        )
    return call.with_changes(args=[a.with_changes(value=value) if a is tags else a for a in call.args])


def _constants(options: LauncherOptions) -> str:
    if options.user is not None and options.trace_bucket is not None:
        uri = f"s3://{options.trace_bucket}/{user_tensorboard_prefix(options.user)}"
        return (
            "\n# ProfStack: the job's owner, and the TensorBoard prefix its pipeline analyses.\n"
            f'PROFSTACK_USER = "{options.user}"\n'
            f'PROFSTACK_TENSORBOARD_URI = "{uri}"\n'
        )
    return (
        "\n# ProfStack: the job's owner, and the TensorBoard prefix its pipeline analyses.\n"
        'PROFSTACK_USER = os.environ["PROFSTACK_USER"]\n'
        "PROFSTACK_TENSORBOARD_URI = (\n"
        "    f\"s3://{os.environ['PROFSTACK_TRACE_BUCKET']}/tensorboard/{PROFSTACK_USER}/\"\n"
        ")\n"
    )


_ANCHOR = "_profstack_block_here_"
_CONSTANTS = ("PROFSTACK_USER", "PROFSTACK_TENSORBOARD_URI")


def rewrite_launcher(module: cst.Module, options: LauncherOptions) -> tuple[cst.Module, list[Finding], list[Finding]]:
    if not _MENTIONS.search(module.code):
        return module, [], []  # nothing Profiler-looking: no scope analysis needed
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    analysis = _Analysis(module, wrapper)
    analysis.options_tensorboard = options.tensorboard
    analysis.run()
    if not analysis.blocking and (analysis.edits or analysis.calls):
        analysis.check_names(options)
    if analysis.blocking:
        return module, [], sorted(set(analysis.blocking + analysis.unproven))
    if not (analysis.edits or analysis.calls):
        return module, [], []
    edits = list(analysis.edits)
    manual: list[Finding] = list(analysis.manual) + analysis.unproven
    anchor = analysis.first_site()
    if anchor is not None:  # where the first added name is used: the block goes above it, or higher
        analysis.plan.insert_before.setdefault(anchor, []).insert(0, _ANCHOR + "\n")
    rewrite = _Rewrite(analysis, options, edits, manual)
    new = module.visit(rewrite)
    covered = analysis.covered_locally()
    imports = {(m, n) for m, n in rewrite.needed_imports if n not in covered}
    if analysis.sites.get("contextlib") and "contextlib" not in covered:
        imports.add(("", "contextlib"))
    constants = bool(rewrite.introduced)
    env = constants and (options.user is None or options.trace_bucket is None)
    if env:
        imports.add(("", "os"))
        manual.append(Finding(0, "reads $PROFSTACK_USER and $PROFSTACK_TRACE_BUCKET at launch (--user/--trace-bucket)"))
    new = _place_block(new, sorted(imports), _constants(options) if constants else "", options)
    return new, sorted(set(edits)), manual


def _is_anchor(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, cst.Name)
        and statement.body[0].value.value == _ANCHOR
    )


def _lead_end(body: Sequence[cst.BaseStatement]) -> int:
    """The index after the module docstring and the imports that open the module."""
    index = 0
    for i, statement in enumerate(body):
        if isinstance(statement, cst.SimpleStatementLine) and all(
            isinstance(s, cst.Import | cst.ImportFrom) for s in statement.body
        ):
            index = i + 1
        elif i == 0 and isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Expr):
            index = 1  # after the docstring
        else:
            break
    return index


def _binds(statement: cst.BaseStatement, module: str, name: str) -> bool:
    """A top-level import statement that binds ``name`` to ``module``'s ``name`` (or the module ``name``)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Import) and not module:
            for alias in small.names:
                full = dotted(alias.name) or ""
                local = _local_name(alias)
                if local == name and (full == name or (alias.asname is None and full.startswith(name + "."))):
                    return True
        elif (
            isinstance(small, cst.ImportFrom)
            and module
            and not small.relative
            and not isinstance(small.names, cst.ImportStar)
        ):
            if (dotted(small.module) if small.module else "") != module:
                continue
            if any(dotted(a.name) == name and _local_name(a) == name for a in small.names):
                return True
    return False


def _assigns(statement: cst.BaseStatement, name: str) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    return any(
        isinstance(small, cst.Assign)
        and any(isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets)
        for small in statement.body
    )


def _place_block(
    module: cst.Module, imports: list[tuple[str, str]], constants: str, options: LauncherOptions
) -> cst.Module:
    """Put the imports and constants the rewrite needs where every name they use is bound and above their
    first use: after the opening imports (a notebook: in the cell of the first use, above it), below any
    top-level import of theirs that comes later but still before that use, and without an import that is
    already there. The anchor statement planned above the first use marks that use and goes."""
    body = list(module.body)
    first_use = next((i for i, statement in enumerate(body) if _is_anchor(statement)), None)
    if first_use is None:
        first_use = len(body)
    else:
        anchor = body.pop(first_use)
        carried = list(anchor.leading_lines)  # comments of statements removed above it
        if carried and first_use < len(body):
            following = body[first_use]
            body[first_use] = following.with_changes(leading_lines=[*carried, *following.leading_lines])
    if not imports and not constants:
        return module.with_changes(body=body)
    at = first_use if options.constants_at == "first-use" else min(_lead_end(body), first_use)
    needed: list[tuple[str, str]] = []
    for source, name in imports:
        where = next((i for i, statement in enumerate(body) if _binds(statement, source, name)), None)
        if where is not None and where < first_use:
            at = max(at, where + 1)  # bound above its first use already: the block goes below that import
            continue
        needed.append((source, name))
    if constants and all(any(_assigns(st, c) for st in body[:first_use]) for c in _CONSTANTS):
        constants = ""  # the module defines them itself
    lines = [f"from {source} import {name}\n" if source else f"import {name}\n" for source, name in needed]
    if not lines and not constants:
        return module.with_changes(body=body)
    statements = parse_statements(["".join(lines) + constants])
    if at < len(body):  # a notebook's cell marker stays above the block: the block stays in that cell
        following = body[at]
        leading = list(following.leading_lines)
        cut = max((i + 1 for i, line in enumerate(leading) if _is_cell_marker(line)), default=0)
        if cut:
            statements[0] = statements[0].with_changes(leading_lines=[*leading[:cut], *statements[0].leading_lines])
            body[at] = following.with_changes(leading_lines=leading[cut:])
    return module.with_changes(body=[*body[:at], *statements, *body[at:]])


def _is_cell_marker(line: cst.EmptyLine) -> bool:
    return line.comment is not None and line.comment.value.startswith(CELL_MARKER)


def _exported_names(module: cst.Module) -> set[str]:
    """The names a module-level `__all__` lists: an import it names stays even when nothing else uses it."""
    out: set[str] = set()
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else []
            if isinstance(small, cst.AugAssign | cst.AnnAssign):
                targets = [small.target]
            value = small.value if isinstance(small, cst.Assign | cst.AugAssign | cst.AnnAssign) else None
            if not any(isinstance(t, cst.Name) and t.value == "__all__" for t in targets):
                continue
            if isinstance(value, cst.List | cst.Tuple):
                for element in value.elements:
                    if isinstance(element.value, cst.SimpleString) and isinstance(element.value.evaluated_value, str):
                        out.add(element.value.evaluated_value)
    return out


def _takes_keywords(node: cst.ClassDef) -> bool:
    """A class of the file whose __init__ takes **kwargs (or disable_profiler), or that has no __init__."""
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else []
    for statement in body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
            params = statement.params
            named = [p.name.value for p in (*params.params, *params.kwonly_params)]
            return isinstance(params.star_kwarg, cst.Param) or "disable_profiler" in named
    return True


def _disables_profiler(value: cst.BaseExpression) -> bool:
    """`{"DisableProfiler": True}`: the one ProfilerConfig that is not a use of the Profiler."""
    if not isinstance(value, cst.Dict) or len(value.elements) != 1:
        return False
    element = value.elements[0]
    return (
        isinstance(element, cst.DictElement)
        and isinstance(element.key, cst.SimpleString)
        and element.key.evaluated_value == "DisableProfiler"
        and isinstance(element.value, cst.Name)
        and element.value.value == "True"
    )


def _local_name(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return (dotted(alias.name) or "").split(".")[0] if alias.asname is None else ""


def _is_builtin_dict_node(node: cst.CSTNode, prov: Provenance) -> bool:
    return isinstance(node, cst.Call) and _is_builtin_dict(node, prov)


def _is_builtin_dict(call: cst.Call, prov: Provenance) -> bool:
    return prov.origins(call.func) == frozenset({"builtins.dict"})


def _append_element(value: cst.List, code: str, indent: str) -> cst.List:
    """Add one element to a list literal, in its style (one line, or one element a line)."""
    new = cst.Element(value=cst.parse_expression(code))
    elements = list(value.elements)
    if not elements:
        return value.with_changes(elements=[new])
    last = elements[-1]
    if isinstance(value.lbracket.whitespace_after, cst.ParenthesizedWhitespace):
        sep = value.lbracket.whitespace_after
        closing = last.comma if isinstance(last.comma, cst.Comma) else cst.MaybeSentinel.DEFAULT
        elements[-1] = last.with_changes(comma=cst.Comma(whitespace_after=sep))
        return value.with_changes(elements=[*elements, new.with_changes(comma=closing)])
    # a one-line list becomes one element a line, so that it stays short
    inner = _newline(indent + "    ")
    elements = [e.with_changes(comma=cst.Comma(whitespace_after=inner)) for e in elements]
    new = new.with_changes(comma=cst.Comma(whitespace_after=_newline(indent)))
    return value.with_changes(
        lbracket=cst.LeftSquareBracket(whitespace_after=inner),
        elements=[*elements, new],
        rbracket=cst.RightSquareBracket(),
    )


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(reversed(current.children))
    return out
