"""Take SageMaker Profiler out of training-job launchers (SageMaker Python SDK v2 and v3, boto3).

What it removes:

    from sagemaker.debugger import ProfilerConfig, Profiler, ProfilerRule, ...   (v2; also `from
    from sagemaker.core.debugger import ...` / `sagemaker.core.shapes` (v3)       sagemaker import ...`)
    pc = ProfilerConfig(...) / rules = [ProfilerRule.sagemaker(rule_configs.ProfilerReport()), ...]
    profiler_config=..., profiler_rule_configurations=... (v3 TrainingJob.create),
    ProfilerConfig=..., ProfilerRuleConfigurations=... (boto3 create_training_job)
    estimator.update_profiler(...) / enable_default_profiling() / disable_profiling()

and, on each call it took them from (unless LauncherOptions.tensorboard is False), adds the
TensorBoard output ProfStack reads (`s3://<trace bucket>/tensorboard/<user>/`, profstack.layout)
and the owner tag, when missing. A v2 estimator also gets `disable_profiler=True`: without a
ProfilerConfig, SDK v2 turns default Profiler monitoring (and its report rule) back on.

Anything that still refers to a removed name afterwards blocks the launcher part of the rewrite
(nothing changes there) and is reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from profstack.layout import user_tensorboard_prefix
from profstack.migrate._cst import (
    Finding,
    PlannedTransformer,
    StatementPlan,
    dotted,
    import_module_name,
    parse_statements,
)
from profstack.migrate.sagemaker_paths import TENSORBOARD_DIR
from profstack.migrate.scan import PROFILER_CLASSES, PROFILER_METHODS, TRAINING_JOB_CALLS

USER_TAG = "profstack:user"
PROFILER_RULE_CONFIGS = frozenset(
    {
        "ProfilerReport",
        "BatchSize",
        "CPUBottleneck",
        "GPUMemoryIncrease",
        "IOBottleneck",
        "LoadBalancing",
        "LowGPUUtilization",
        "MaxInitializationTime",
        "OverallSystemUsage",
        "StepOutlier",
        "Dataloader",
        "OverallFrameworkMetrics",
        "DetailedProfilerProcessing",
    }
)
LOWER_KEYWORDS = frozenset({"profiler_config", "profiler_rule_configurations"})
BOTO_KEYWORDS = frozenset({"ProfilerConfig", "ProfilerRuleConfigurations"})


@dataclass(frozen=True)
class LauncherOptions:
    user: str | None = None  # ProfStack user the jobs belong to (else read from $PROFSTACK_USER at launch)
    trace_bucket: str | None = None  # ProfStack trace bucket (else $PROFSTACK_TRACE_BUCKET at launch)
    tensorboard: bool = True  # add TensorBoardOutputConfig and the owner tag


class _Analysis(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider, ParentNodeProvider)

    def __init__(self, module: cst.Module) -> None:
        super().__init__()
        self.module = module
        self.names: set[str] = set()  # local names of profiler classes
        self.sagemaker_modules: set[str] = set()  # local names bound to sagemaker modules
        self.rule_configs: set[str] = set()
        self.rule_config_aliases: list[tuple[str, cst.ImportAlias]] = []
        self.import_froms: list[cst.SimpleStatementLine] = []  # sagemaker from-imports, decided in finish()
        self.vars: set[str] = set()  # variables holding profiler configuration
        self.plan = StatementPlan()
        self.drop_aliases: set[int] = set()  # ImportAlias ids to drop
        self.drop_args: set[int] = set()
        self.drop_elements: set[int] = set()
        self.calls: dict[int, str] = {}  # id(call) -> flavour, for the calls we took profiler settings from
        self.handled: set[int] = set()
        self.edits: list[Finding] = []
        self.blocking: list[Finding] = []
        self.v3 = False
        self.last_import: cst.CSTNode | None = None
        self.bound: set[str] = set()
        # what the file imports (before the walk): only a file that imports sagemaker (or boto3, for
        # create_training_job's ProfilerConfig=) is a launcher; another library's `profiler_config=`
        # or `disable_profiling()` is not SageMaker's
        roots = _imported_roots(module)
        self.uses_sagemaker = "sagemaker" in roots
        self.uses_boto = bool(roots & {"boto3", "botocore", "aiobotocore", "aioboto3"})

    def line(self, node: cst.CSTNode) -> int:
        return int(self.get_metadata(PositionProvider, node).start.line)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        try:
            return self.get_metadata(ParentNodeProvider, node)
        except KeyError:
            return None

    def mark(self, node: cst.CSTNode) -> None:
        for n in _walk(node):
            self.handled.add(id(n))

    # --- imports
    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = import_module_name(node)
        if not (module == "sagemaker" or module.startswith("sagemaker.")):
            return
        if module.startswith(("sagemaker.core", "sagemaker.train")):
            self.v3 = True
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = dotted(alias.name) or ""
            local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
            self.bound.add(local)
            if name in PROFILER_CLASSES:
                self.names.add(local)
                self.drop_aliases.add(id(alias))
                self.mark(alias)
            elif name == "rule_configs":
                self.rule_configs.add(local)
                self.rule_config_aliases.append((local, alias))
            elif name in {"debugger", "shapes"}:
                self.sagemaker_modules.add(local)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = dotted(alias.name) or ""
            if name == "sagemaker" or name.startswith("sagemaker."):
                local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
                self.sagemaker_modules.add(local.split(".")[0] if not alias.asname else local)
                if name.startswith(("sagemaker.core", "sagemaker.train")):
                    self.v3 = True
            self.bound.add((dotted(alias.asname.name) if alias.asname else name.split(".")[0]) or "")

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
        node = original_node
        if len(node.body) == 1 and isinstance(node.body[0], cst.ImportFrom):
            self.import_froms.append(node)  # what goes is known once every use has been seen: finish()

    def _drop_unused_rule_configs(self) -> None:
        """`rule_configs` used only inside removed profiler rules goes too (an unused import, F401)."""
        for local, alias in self.rule_config_aliases:
            own = {id(n) for n in _walk(alias)}
            live = [
                n
                for n in _walk(self.module)
                if isinstance(n, cst.Name) and n.value == local and id(n) not in own and id(n) not in self.handled
            ]
            if not live:
                self.drop_aliases.add(id(alias))

    def _plan_imports(self) -> None:
        for node in self.import_froms:
            small = node.body[0]
            assert isinstance(small, cst.ImportFrom)
            if isinstance(small.names, cst.ImportStar) or not small.names:
                continue
            if all(id(a) in self.drop_aliases for a in small.names):
                self.plan.remove[id(node)] = None
                self.edits.append(Finding(self.line(node), "removed the SageMaker Profiler import"))
            elif any(id(a) in self.drop_aliases for a in small.names):
                self.edits.append(Finding(self.line(node), "dropped SageMaker Profiler names from the import"))

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if isinstance(self.parent(node), cst.Module) and any(
            isinstance(s, cst.Import | cst.ImportFrom) for s in node.body
        ):
            self.last_import = node
        if len(node.body) != 1:
            return
        small = node.body[0]
        if (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and self.is_profiler(small.value)
        ):
            self.vars.add(small.targets[0].target.value)
            self.mark(node)
            self.plan.remove[id(node)] = None
            self.edits.append(Finding(self.line(node), f"removed {small.targets[0].target.value} (Profiler settings)"))
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = small.value.func
            if isinstance(func, cst.Attribute) and func.attr.value in PROFILER_METHODS and self.uses_sagemaker:
                self.mark(node)
                self.plan.remove[id(node)] = None
                self.edits.append(Finding(self.line(node), f"removed .{func.attr.value}(...)"))

    def is_profiler(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name):
            return expr.value in self.vars or expr.value in self.names
        if isinstance(expr, cst.Attribute):
            root = dotted(expr.value)
            if (
                expr.attr.value in PROFILER_CLASSES
                and root is not None
                and root.split(".")[0] in self.sagemaker_modules
            ):
                return True
            if expr.attr.value in PROFILER_RULE_CONFIGS and root in self.rule_configs:
                return True
            return isinstance(expr.value, cst.Name) and expr.value.value in self.names  # ProfilerRule.sagemaker
        if isinstance(expr, cst.Call):
            return self.is_profiler(expr.func)
        return False

    def visit_Element(self, node: cst.Element) -> None:
        if self.is_profiler(node.value):
            self.drop_elements.add(id(node))
            self.mark(node)
            self.edits.append(Finding(self.line(node), "removed a profiler rule"))

    def visit_Call(self, node: cst.Call) -> None:
        method = node.func.attr.value if isinstance(node.func, cst.Attribute) else ""
        for arg in node.args:
            keyword = arg.keyword.value if arg.keyword else None
            drop = (keyword in LOWER_KEYWORDS and self.uses_sagemaker) or (
                keyword in BOTO_KEYWORDS and (self.uses_boto or self.uses_sagemaker or method in TRAINING_JOB_CALLS)
            )
            if drop and keyword == "ProfilerConfig" and _disables_profiler(arg.value):
                continue  # `ProfilerConfig={"DisableProfiler": True}` turns the Profiler off: keep it
            if drop and method == "update_training_job":
                # UpdateTrainingJob takes no TensorBoardOutputConfig or Tags: nothing to swap it for
                self.blocking.append(
                    Finding(
                        self.line(arg),
                        f"update_training_job({keyword}=...) changes a running job's Profiler: remove it by hand "
                        '(ProfilerConfig={"DisableProfiler": True} turns it off)',
                    )
                )
                continue
            if drop and dotted(node.func) == "dict":
                # keywords gathered for `**kw`: the tags/TensorBoard ones added here could clash with the
                # call's own (`tags` twice is a TypeError at launch), so a person moves them
                self.blocking.append(
                    Finding(
                        self.line(arg),
                        f"{keyword}= in dict(...) spread into a call: move it into the launcher call, then rerun",
                    )
                )
                continue
            if keyword == "rules" and (
                self.is_profiler(arg.value)
                or (
                    isinstance(arg.value, cst.List)
                    and arg.value.elements
                    and all(self.is_profiler(e.value) for e in arg.value.elements)
                )
            ):
                drop = True
            if drop and any(a.star == "**" for a in node.args):
                # `f(**kw, profiler_config=...)`: the keywords this adds (tags, disable_profiler,
                # TensorBoard output) may be in kw already, a TypeError at launch; a person decides
                self.blocking.append(
                    Finding(
                        self.line(arg),
                        f"{keyword}= in a call that also spreads **: profstack cannot see whether the spread "
                        "sets tags/disable_profiler/TensorBoard output; pass those explicitly, then rerun",
                    )
                )
                continue
            if drop:
                self.drop_args.add(id(arg))
                self.mark(arg)
                self.calls[id(node)] = self._flavour(node, boto=keyword in BOTO_KEYWORDS)
                self.edits.append(Finding(self.line(arg), f"removed {keyword}="))

    def _flavour(self, call: cst.Call, *, boto: bool) -> str:
        if boto:
            return "boto3"
        name = dotted(call.func) or ""
        if name.split(".")[-1] == "ModelTrainer":
            return "trainer"
        if name.endswith(".create") and self.v3:
            return "core"
        return "estimator"

    def finish(self) -> None:
        if self.edits or self.calls:  # a launcher being rewritten: an import its removals leave unused goes
            self._drop_unused_rule_configs()
        self._plan_imports()
        watched = self.names | self.vars
        for node in _walk(self.module):
            if isinstance(node, cst.Name) and node.value in watched and id(node) not in self.handled:
                parent = self.parent(node)
                if isinstance(parent, cst.Attribute) and parent.attr is node:
                    continue
                self.blocking.append(Finding(self.line(node), f"`{node.value}` is still used after its removal"))


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

    def leave_ImportFrom(self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom) -> cst.ImportFrom:
        if isinstance(original_node.names, cst.ImportStar):
            return updated_node
        kept = _filter(original_node.names, cast(Sequence[cst.ImportAlias], updated_node.names), self.a.drop_aliases)
        return updated_node.with_changes(names=kept) if kept else updated_node

    def leave_List(self, original_node: cst.List, updated_node: cst.List) -> cst.List:
        return updated_node.with_changes(
            elements=_filter(original_node.elements, updated_node.elements, self.a.drop_elements)
        )

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        args = _filter(original_node.args, updated_node.args, self.a.drop_args)
        updated_node = updated_node.with_changes(args=args)
        flavour = self.a.calls.get(id(original_node))
        if flavour is None:
            return updated_node
        line = self.a.line(original_node)
        keywords = {a.keyword.value for a in updated_node.args if a.keyword}
        new: list[str] = []
        if flavour == "estimator" and "disable_profiler" not in keywords:
            new.append("disable_profiler=True")
            self.edits.append(Finding(line, "added disable_profiler=True (SDK v2 profiles by default)"))
        elif flavour == "estimator":
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
            wrap = flavour == "trainer"
            tags_keyword = "Tags" if flavour == "boto3" else "tags"
            tag = _tag_element(flavour)
            existing = next((a for a in updated_node.args if a.keyword and a.keyword.value == tags_keyword), None)
            if existing is None:
                new.append(f"{tags_keyword}=[{tag}]")
                self.edits.append(Finding(line, f"added the {USER_TAG} tag"))
            elif isinstance(existing.value, cst.List):
                if USER_TAG not in cst.Module(body=[]).code_for_node(existing.value):
                    updated_node = _append_tag(updated_node, existing, tag, _separator(updated_node)[1])
                    self.edits.append(Finding(line, f"added the {USER_TAG} tag"))
            else:
                self.manual.append(Finding(line, f"tags are not a list literal: add the {USER_TAG} tag by hand"))
            self._imports_for(flavour)
        updated_node = _append_args(updated_node, new)
        if wrap:
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

    def _imports_for(self, flavour: str) -> None:
        module = {
            "estimator": "sagemaker.debugger",
            "core": "sagemaker.core.shapes",
            "trainer": "sagemaker.train.configs",
        }
        if flavour in module:
            self.needed_imports.add((module[flavour], "TensorBoardOutputConfig"))
            if flavour != "estimator":
                self.needed_imports.add((module[flavour], "Tag"))


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


def _filter(original: Sequence[Any], updated: Sequence[Any], drop: set[int]) -> list[Any]:
    """Drop items by original identity; the new last item keeps the old last item's comma/whitespace."""
    kept = [u for o, u in zip(original, updated, strict=True) if id(o) not in drop]
    if kept and updated and id(original[-1]) in drop:
        last_old = updated[-1]
        changes = {"comma": last_old.comma}
        if isinstance(last_old, cst.Arg):
            changes["whitespace_after_arg"] = last_old.whitespace_after_arg
        kept[-1] = kept[-1].with_changes(**changes)
    return kept


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


def _append_args(call: cst.Call, codes: list[str]) -> cst.Call:
    if not codes:
        return call
    sep, indent = _separator(call)
    multi_line = isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace) or any(
        isinstance(a.comma, cst.Comma) and isinstance(a.comma.whitespace_after, cst.ParenthesizedWhitespace)
        for a in call.args
    )
    if not multi_line:  # one argument a line from now on, so that the new ones fit
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


def _constants(options: LauncherOptions, *, needs_os: bool) -> list[str]:
    lines = []
    if needs_os:
        lines.append("import os\n")
    if options.user is not None and options.trace_bucket is not None:
        uri = f"s3://{options.trace_bucket}/{user_tensorboard_prefix(options.user)}"
        lines.append(
            "\n# ProfStack: the job's owner, and the TensorBoard prefix its pipeline analyses.\n"
            f'PROFSTACK_USER = "{options.user}"\n'
            f'PROFSTACK_TENSORBOARD_URI = "{uri}"\n'
        )
    else:
        lines.append(
            "\n# ProfStack: the job's owner, and the TensorBoard prefix its pipeline analyses.\n"
            'PROFSTACK_USER = os.environ["PROFSTACK_USER"]\n'
            "PROFSTACK_TENSORBOARD_URI = (\n"
            "    f\"s3://{os.environ['PROFSTACK_TRACE_BUCKET']}/tensorboard/{PROFSTACK_USER}/\"\n"
            ")\n"
        )
    return lines


def rewrite_launcher(module: cst.Module, options: LauncherOptions) -> tuple[cst.Module, list[Finding], list[Finding]]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    analysis = _Analysis(module)
    with analysis.resolve(wrapper):
        module.visit(analysis)
        analysis.finish()
        if analysis.blocking:
            return module, [], sorted(set(analysis.blocking))
        if not (analysis.edits or analysis.calls):
            return module, [], []
        edits = list(analysis.edits)
        manual: list[Finding] = []
        rewrite = _Rewrite(analysis, options, edits, manual)
        new = module.visit(rewrite)
    if options.tensorboard and analysis.calls:
        imports = [
            f"from {mod} import {name}\n" for mod, name in sorted(rewrite.needed_imports) if name not in analysis.bound
        ]
        if options.user is None or options.trace_bucket is None:
            manual.append(
                Finding(0, "reads $PROFSTACK_USER and $PROFSTACK_TRACE_BUCKET at launch (--user/--trace-bucket)")
            )
        needs_os = (options.user is None or options.trace_bucket is None) and "os" not in analysis.bound
        block = imports + _constants(options, needs_os=needs_os)
        new = _insert_after_imports(new, analysis, block)
    return new, sorted(set(edits)), manual


def _insert_after_imports(module: cst.Module, analysis: _Analysis, sources: list[str]) -> cst.Module:
    statements = parse_statements(["".join(sources)])
    body = list(module.body)
    index = 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, cst.Import | cst.ImportFrom) for s in stmt.body
        ):
            index = i + 1
        elif i == 0 and isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr):
            index = 1  # after the docstring
        else:
            break
    del analysis
    return module.with_changes(body=[*body[:index], *statements, *body[index:]])


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


def _imported_roots(module: cst.Module) -> set[str]:
    """The top-level packages the module imports anywhere (`sagemaker`, `boto3`, ...)."""
    roots: set[str] = set()
    for node in _walk(module):
        if isinstance(node, cst.Import):
            roots.update((dotted(a.name) or "").split(".")[0] for a in node.names)
        elif isinstance(node, cst.ImportFrom) and not node.relative:
            roots.add(import_module_name(node).split(".")[0])
    return roots


def _walk(node: cst.CSTNode) -> list[cst.CSTNode]:
    out: list[cst.CSTNode] = []
    stack = [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(reversed(current.children))
    return out
