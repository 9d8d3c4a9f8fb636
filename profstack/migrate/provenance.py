"""Where a launcher's names come from: the proof every launcher edit needs (issue 35 item 1).

A keyword called `profiler_config`, a class called `ProfilerConfig` or a method called
`disable_profiling` is SageMaker's only when the name was imported from `sagemaker` (or the
call is made on a boto3 SageMaker client). `Provenance.origins(expr)` answers with the dotted
paths an expression can evaluate to, resolved with LibCST's scope analysis through import
aliases (`import sagemaker.debugger as dbg`), package re-exports (`from sagemaker import
ProfilerConfig`), simple assignments (`Est = PyTorch`), local subclasses (`class Job(PyTorch)`),
calls (`PyTorch(...)` -> `sagemaker.pytorch.PyTorch()`) and attributes of those. A name bound by
anything else (a parameter, a loop variable, a rebinding on another branch) is `UNKNOWN`, and an
origin set holding `UNKNOWN` proves nothing. Everything here reads the tree; nothing edits it.

`DictFlow` follows keyword dictionaries within a module: a name bound once to a dict literal,
`dict(...)`, `{**other}` or `other.copy()`, its `d["k"] = v` / `del d["k"]` / `d.pop("k")` /
`d.update(k=v)` / `d.setdefault("k", v)` statements, and where it is spread (`f(**d)`,
`{**d}`). A dict used any other way (passed to a function, returned, reassigned) escapes, and
its keys are unknown.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import (
    Assignment,
    BuiltinAssignment,
    ImportAssignment,
    MetadataWrapper,
    ParentNodeProvider,
    Scope,
    ScopeProvider,
)

from profstack.migrate._cst import dotted

UNKNOWN = "?"

#: SageMaker SDK names that configure the Profiler (v2 sagemaker.debugger, v3 sagemaker.core.shapes)
PROFILER_CLASSES = frozenset(
    {
        "ProfilerConfig",
        "Profiler",
        "FrameworkProfile",
        "ProfilerRule",
        "ProfilerRuleConfiguration",
        "DetailedProfilingConfig",
        "DataloaderProfilingConfig",
        "PythonProfilingConfig",
        "HorovodProfilingConfig",
        "SMDataParallelProfilingConfig",
        "PythonProfiler",
        "cProfileTimer",
        "get_default_profiler_rule",
    }
)
BOTO_KEYWORDS = frozenset({"ProfilerConfig", "ProfilerRuleConfigurations"})
SDK_KEYWORDS = frozenset({"profiler_config", "profiler_rule_configurations"})
PROFILER_KEYWORDS = SDK_KEYWORDS | BOTO_KEYWORDS
TRAINING_JOB_CALLS = frozenset({"create_training_job", "update_training_job"})
PROFILER_METHODS = frozenset({"update_profiler", "enable_default_profiling", "disable_profiling"})
_MAX_DEPTH = 16  # assignments followed for one name
_MAX_FLOW_DEPTH = 24  # dicts followed through spreads and copies

#: rule_configs functions that build a Profiler rule (the others are Debugger rules, which stay)
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

#: SageMaker Python SDK v2 estimators: the names of the sagemaker.estimator.EstimatorBase subclasses (as of
#: SDK 2.257), by the module that defines each; each is also reached through the package that re-exports it
#: (below). Names only, listed here by hand: no SDK code is part of this repository.
ESTIMATOR_DEFINITIONS = {
    "sagemaker.estimator": ("EstimatorBase", "Estimator", "Framework"),
    "sagemaker.algorithm": ("AlgorithmEstimator",),
    "sagemaker.amazon.amazon_estimator": ("AmazonAlgorithmEstimatorBase",),
    "sagemaker.amazon.factorization_machines": ("FactorizationMachines",),
    "sagemaker.amazon.ipinsights": ("IPInsights",),
    "sagemaker.amazon.kmeans": ("KMeans",),
    "sagemaker.amazon.knn": ("KNN",),
    "sagemaker.amazon.lda": ("LDA",),
    "sagemaker.amazon.linear_learner": ("LinearLearner",),
    "sagemaker.amazon.ntm": ("NTM",),
    "sagemaker.amazon.object2vec": ("Object2Vec",),
    "sagemaker.amazon.pca": ("PCA",),
    "sagemaker.amazon.randomcutforest": ("RandomCutForest",),
    "sagemaker.chainer.estimator": ("Chainer",),
    "sagemaker.huggingface.estimator": ("HuggingFace",),
    "sagemaker.jumpstart.estimator": ("JumpStartEstimator",),
    "sagemaker.mxnet.estimator": ("MXNet",),
    "sagemaker.pytorch.estimator": ("PyTorch",),
    "sagemaker.rl.estimator": ("RLEstimator",),
    "sagemaker.sklearn.estimator": ("SKLearn",),
    "sagemaker.tensorflow.estimator": ("TensorFlow",),
    "sagemaker.xgboost.estimator": ("XGBoost",),
}
ESTIMATOR_CLASSES = frozenset(name for names in ESTIMATOR_DEFINITIONS.values() for name in names)


def _estimator_paths() -> frozenset[str]:
    paths = {f"{module}.{name}" for module, names in ESTIMATOR_DEFINITIONS.items() for name in names}
    for module, names in ESTIMATOR_DEFINITIONS.items():
        package = module.rsplit(".", 1)[0]
        if module.endswith(".estimator") and package != "sagemaker":  # sagemaker.pytorch.PyTorch
            paths |= {f"{package}.{name}" for name in names}
        if module.startswith("sagemaker.amazon.") or module == "sagemaker.algorithm":  # sagemaker.KMeans
            paths |= {f"sagemaker.{name}" for name in names}
    paths |= {f"sagemaker.tuner.{name}" for name in ("EstimatorBase", "Framework", "AmazonAlgorithmEstimatorBase")}
    return frozenset(paths)


ESTIMATOR_PATHS = _estimator_paths()
#: estimators whose constructor drops `disable_profiler` (AlgorithmEstimator takes **kwargs and ignores them)
IGNORES_DISABLE_PROFILER = frozenset({"AlgorithmEstimator"})
_BOTO_ROOTS = ("boto3.", "botocore.", "aioboto3.", "aiobotocore.")
_SAGEMAKER_CLIENT = re.compile(r"\.(?:client|create_client)\(sagemaker\)$")
_CLIENT_FACTORIES = ("client", "create_client")


def _is_sagemaker(origin: str) -> bool:
    return origin == "sagemaker" or origin.startswith("sagemaker.")


def _parts(origin: str) -> list[str]:
    """`sagemaker.debugger.ProfilerRule.sagemaker()` -> [sagemaker, debugger, ProfilerRule, sagemaker]."""
    return [re.sub(r"\(.*\)$", "", p) for p in re.split(r"\.(?![^(]*\))", origin)]


def is_profiler_class(origin: str) -> bool:
    """A SageMaker Profiler class itself (`sagemaker.debugger.ProfilerConfig`), not an instance."""
    return _is_sagemaker(origin) and not origin.endswith(")") and _parts(origin)[-1] in PROFILER_CLASSES


def is_profiler_value(origin: str) -> bool:
    """A value built from SageMaker Profiler: `ProfilerConfig(...)`, `ProfilerRule.sagemaker(...)`,
    `rule_configs.ProfilerReport()`, or the class itself."""
    if not _is_sagemaker(origin):
        return False
    parts = _parts(origin)
    if any(p in PROFILER_CLASSES for p in parts):
        return True
    return any(a == "rule_configs" and b in PROFILER_RULE_CONFIGS for a, b in itertools.pairwise(parts))


def is_estimator_class(origin: str) -> bool:
    """A SageMaker SDK v2 estimator class, by where it is defined or re-exported (ESTIMATOR_DEFINITIONS): not
    any SageMaker name that ends in `Estimator` (AutoML's CandidateEstimator is not one)."""
    if not _is_sagemaker(origin) or "(" in origin:
        return False
    return origin in ESTIMATOR_PATHS


def is_model_trainer(origin: str) -> bool:
    return _is_sagemaker(origin) and "(" not in origin and origin.rsplit(".", maxsplit=1)[-1] == "ModelTrainer"


def is_training_job_create(origin: str) -> bool:
    return _is_sagemaker(origin) and "(" not in origin and origin.endswith(".TrainingJob.create")


def is_sagemaker_client(origin: str) -> bool:
    """`boto3.client("sagemaker")`, a session's `.client("sagemaker")`, `sagemaker.Session().sagemaker_client`."""
    if origin.startswith(_BOTO_ROOTS):
        return bool(_SAGEMAKER_CLIENT.search(origin))
    return _is_sagemaker(origin) and origin.endswith(".sagemaker_client")


def is_estimator_instance(origin: str) -> bool:
    """What `PyTorch(...)` or `Estimator.attach(...)` returns."""
    if not origin.endswith("()"):
        return False
    base = origin[:-2]
    if base.endswith(".attach"):
        base = base[: -len(".attach")]
    return is_estimator_class(base)


def is_attached_instance(origin: str) -> bool:
    """What `Estimator.attach(job_name)` returns: an estimator for a job started elsewhere."""
    return is_estimator_instance(origin) and origin.endswith(".attach()")


def all_of(origins: frozenset[str], predicate: object) -> bool:
    """Proven: at least one origin, none unknown, every one satisfying the predicate. A `None`
    binding does not count against it: `try: from sagemaker.pytorch import PyTorch` / `except
    ImportError: PyTorch = None` calls SageMaker's PyTorch whenever the call runs at all."""
    assert callable(predicate)
    real = origins - {"builtins.None"}
    return bool(real) and UNKNOWN not in real and all(predicate(o) for o in real)


def any_of(origins: frozenset[str], predicate: object) -> bool:
    assert callable(predicate)
    return any(predicate(o) for o in origins if o != UNKNOWN)


class Provenance:
    """Origins of expressions in one module (see the module docstring)."""

    def __init__(self, wrapper: MetadataWrapper) -> None:
        self.scopes = wrapper.resolve(ScopeProvider)
        self.parents = wrapper.resolve(ParentNodeProvider)
        self._cache: dict[int, frozenset[str]] = {}

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def scope(self, node: cst.CSTNode) -> Scope | None:
        return self.scopes.get(node)

    def origins(self, expr: cst.BaseExpression) -> frozenset[str]:
        return self._origins(expr, frozenset())

    def _origins(self, expr: cst.BaseExpression, seen: frozenset[int]) -> frozenset[str]:
        key = id(expr)
        if key in self._cache:
            return self._cache[key]
        if key in seen or len(seen) > _MAX_DEPTH:
            return frozenset({UNKNOWN})
        seen = seen | {key}
        out: frozenset[str]
        if isinstance(expr, cst.Name):
            out = self._name_origins(expr, seen)
        elif isinstance(expr, cst.Attribute):
            out = frozenset(
                UNKNOWN if o == UNKNOWN else f"{o}.{expr.attr.value}" for o in self._origins(expr.value, seen)
            )
        elif isinstance(expr, cst.Call):
            out = frozenset(
                UNKNOWN if o == UNKNOWN else f"{o}({_service(o, expr)})" for o in self._origins(expr.func, seen)
            )
        elif isinstance(expr, cst.IfExp):  # `PyTorch if gpu else TensorFlow`: either
            out = self._origins(expr.body, seen) | self._origins(expr.orelse, seen)
        else:
            out = frozenset({UNKNOWN})
        self._cache[key] = out
        return out

    def _name_origins(self, name: cst.Name, seen: frozenset[int]) -> frozenset[str]:
        if name.value in {"None", "True", "False"}:
            return frozenset({f"builtins.{name.value}"})
        scope = self.scope(name)
        if scope is None:
            return frozenset({UNKNOWN})
        referents = [r for access in scope.accesses[name] if access.node is name for r in access.referents]
        if not referents:
            # `import sagemaker.estimator` then `sagemaker.estimator.X`: LibCST records that access
            # under the dotted name; every binding of the name visible here stands in (all must agree)
            referents = list(scope[name.value])
        if not referents:
            return frozenset({UNKNOWN})  # undefined here (a star import, a name made at run time)
        out: set[str] = set()
        for ref in referents:
            out |= self._assignment_origins(ref, name.value, seen)
        return frozenset(out)

    def _assignment_origins(self, ref: object, name: str, seen: frozenset[int]) -> frozenset[str]:
        if isinstance(ref, BuiltinAssignment):
            return frozenset({f"builtins.{name}"})
        if isinstance(ref, ImportAssignment):
            return frozenset({imported_path(ref.node, name)})
        if not isinstance(ref, Assignment):
            return frozenset({UNKNOWN})
        node = ref.node
        if isinstance(node, cst.ClassDef):
            return self._class_origins(node, seen)
        param = node if isinstance(node, cst.Param) else self.parent(node)
        if not isinstance(node, cst.Name | cst.Param):
            return frozenset({UNKNOWN})  # def, a comprehension target, ...
        value = self.assigned_value(node) if isinstance(node, cst.Name) else None
        if value is not None:
            return self._origins(value, seen)
        if isinstance(param, cst.Param) and param.annotation is not None:
            annotated = self._origins(param.annotation.annotation, seen)
            if all_of(annotated, lambda o: o.startswith("mypy_boto3_sagemaker") and o.endswith("SageMakerClient")):
                return frozenset({"boto3.client(sagemaker)"})  # typed with the boto3-stubs SageMaker client
        return frozenset({UNKNOWN})

    def local_class(self, expr: cst.BaseExpression) -> cst.ClassDef | None:
        """The class of this module a name calls (`Job(...)` after `class Job(PyTorch)`), if it is one."""
        if not isinstance(expr, cst.Name):
            return None
        scope = self.scope(expr)
        if scope is None:
            return None
        referents = [r for access in scope.accesses[expr] if access.node is expr for r in access.referents]
        nodes = {getattr(r, "node", None) for r in referents}
        if len(nodes) == 1:
            (node,) = nodes
            return node if isinstance(node, cst.ClassDef) else None
        return None

    def _class_origins(self, node: cst.ClassDef, seen: frozenset[int]) -> frozenset[str]:
        """A class defined here counts as its SageMaker base (`class Job(PyTorch)` is an estimator)."""
        for base in node.bases:
            if base.keyword is not None:
                continue
            origins = self._origins(base.value, seen)
            if all_of(origins, lambda o: is_estimator_class(o) or is_model_trainer(o)):
                return origins
        return frozenset({f"<class {node.name.value}>"})

    def assigned_value(self, target: cst.Name) -> cst.BaseExpression | None:
        """The value of `target = value` (also `a = b = value`, `target: T = value`, `(target := value)`)."""
        parent = self.parent(target)
        if isinstance(parent, cst.AssignTarget):
            assign = self.parent(parent)
            return assign.value if isinstance(assign, cst.Assign) else None
        if isinstance(parent, cst.AnnAssign) and parent.target is target:
            return parent.value
        if isinstance(parent, cst.NamedExpr) and parent.target is target:
            return parent.value
        return None

    def single_assignment(self, name: cst.Name) -> Assignment | None:
        """The one assignment a name refers to, when its scope binds it exactly once."""
        scope = self.scope(name)
        if scope is None:
            return None
        referents = [r for access in scope.accesses[name] if access.node is name for r in access.referents]
        if len(referents) != 1 or not isinstance(referents[0], Assignment):
            return None
        ref = referents[0]
        if len(list(ref.scope.assignments[ref.name])) != 1:
            return None  # rebound somewhere in its scope: which value a use sees depends on the flow
        return ref


def _service(origin: str, call: cst.Call) -> str:
    """The service a `client("sagemaker")` call makes; empty for any other call."""
    if origin.rsplit(".", maxsplit=1)[-1] not in _CLIENT_FACTORIES:
        return ""
    args = [a for a in call.args if a.keyword is None or a.keyword.value == "service_name"]
    if args and isinstance(args[0].value, cst.SimpleString) and args[0].star == "":
        value = args[0].value.evaluated_value
        return value if isinstance(value, str) else "?"
    return "?"


def imported_path(node: cst.CSTNode, local: str) -> str:
    """The dotted path an import binds `local` to; a relative import is the user's own module."""
    if isinstance(node, cst.Import):
        for alias in node.names:
            full = dotted(alias.name) or ""
            if alias.asname is not None:
                if isinstance(alias.asname.name, cst.Name) and alias.asname.name.value == local:
                    return full
            elif full.split(".")[0] == local:
                return local
    elif isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
        module = dotted(node.module) if node.module is not None else ""
        prefix = "." * len(node.relative) + (module or "")
        for alias in node.names:
            name = dotted(alias.name) or ""
            bound = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
            if bound == local:
                return f"{prefix}.{name}" if not prefix.endswith(".") else f"{prefix}{name}"
    return UNKNOWN


# --- keyword dictionaries ------------------------------------------------------------------------


@dataclass
class Entry:
    """One key a dict gets: where it is set (a DictElement, a keyword Arg of dict()/update(), or a
    statement) and its value expression (None for a statement that only removes it)."""

    key: str
    node: cst.CSTNode
    value: cst.BaseExpression | None
    statement: cst.SimpleStatementLine | None = None  # `d["k"] = v`, `del d["k"]`, `d.pop("k")`, ...
    removes: bool = False  # pop/del
    read: bool = False  # `d["k"]`, `d.get("k")`, `x = d.pop("k")`: the value is used


@dataclass
class DictValue:
    """A keyword dict bound once to a name (or written inline as `{...}` / `dict(...)`)."""

    name: str | None
    expr: cst.BaseExpression  # the Dict or dict() call that builds it
    entries: list[Entry] = field(default_factory=list)
    sources: list[DictValue] = field(default_factory=list)  # dicts spread or copied into it
    unknown: list[tuple[cst.CSTNode, str]] = field(default_factory=list)  # (node, why) its keys are not known
    spread_into: list[cst.CSTNode] = field(default_factory=list)  # Calls or Dicts that spread it (`**d`)
    escapes: list[tuple[cst.CSTNode, str]] = field(default_factory=list)  # other uses

    def all_entries(self) -> Iterator[tuple[DictValue, Entry]]:
        seen: set[int] = set()
        stack: list[DictValue] = [self]
        while stack:
            current = stack.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            for entry in current.entries:
                yield current, entry
            stack.extend(current.sources)

    def all_unknown(self) -> list[tuple[cst.CSTNode, str]]:
        out: list[tuple[cst.CSTNode, str]] = []
        seen: set[int] = set()
        stack: list[DictValue] = [self]
        while stack:
            current = stack.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            out.extend(current.unknown)
            stack.extend(current.sources)
        return out

    def key_names(self) -> set[str]:
        return {entry.key for _, entry in self.all_entries() if not (entry.removes or entry.read)}


class DictFlow:
    """Keyword dictionaries of one module and where they flow (see the module docstring)."""

    def __init__(self, prov: Provenance) -> None:
        self.prov = prov
        self._by_expr: dict[int, DictValue] = {}
        self._building: set[int] = set()
        self._uses_done: set[int] = set()
        self._depth = 0
        self.too_deep = False  # some chain of dicts was cut at _MAX_FLOW_DEPTH
        self._container_index: dict[int, list[DictValue]] | None = None
        self._indexed = 0

    def of_spread(self, expr: cst.BaseExpression) -> DictValue | None:
        """The dict a `**expr` spreads, or None when its keys cannot be known."""
        value = self._value(expr)
        if value is None or value.all_unknown():
            return None
        return value

    def describe(self, expr: cst.BaseExpression) -> DictValue | None:
        """Like of_spread, but also a dict whose keys are partly unknown (to say why)."""
        return self._value(expr)

    def of_target(self, target: cst.Name) -> DictValue | None:
        """The dict `target = {...}` / `dict(...)` / `{**d}` / `d.copy()` binds, if bound only there."""
        scope = self.prov.scope(target)
        if scope is None:
            return None
        bindings = list(scope.assignments[target.value])
        if len(bindings) != 1 or not isinstance(bindings[0], Assignment) or bindings[0].node is not target:
            return None
        built = self.prov.assigned_value(target)
        if built is None:
            return None
        return self._value_of_definition(bindings[0], built)

    def note_inline_spreads(self, call: cst.Call) -> None:
        """`f(**{...})` / `f(**dict(...))`: the inline dict flows into the call."""
        if _is_dict_call(call, self.prov):
            return
        for arg in call.args:
            if arg.star == "**" and (isinstance(arg.value, cst.Dict) or _is_dict_call(arg.value, self.prov)):
                value = self._value(arg.value)
                if value is not None and not any(c is call for c in value.spread_into):
                    value.spread_into.append(call)

    def values(self) -> list[DictValue]:
        return list(self._by_expr.values())

    def value_of(self, expr: cst.CSTNode) -> DictValue | None:
        """The dict a Dict literal or dict() call builds, once followed (build_all)."""
        return self._by_expr.get(id(expr))

    def build_all(self, nodes: Iterable[cst.CSTNode]) -> None:
        """Follow every dict bound to a name, and every dict spread inline into a call."""
        for node in nodes:
            if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name):
                self.of_target(node.target)
            elif isinstance(node, cst.Call):
                self.note_inline_spreads(node)

    def consumers(self, value: DictValue) -> tuple[list[cst.Call], list[tuple[cst.CSTNode, str]]]:
        """The calls a dict, or a dict built from it, is spread into, and where any of them escapes."""
        calls: list[cst.Call] = []
        escapes: list[tuple[cst.CSTNode, str]] = []
        seen: set[int] = set()
        stack = [value]
        while stack:
            current = stack.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            escapes.extend(current.escapes)
            calls.extend(t for t in current.spread_into if isinstance(t, cst.Call) and not _is_dict_call(t, self.prov))
            stack.extend(self._containers().get(id(current), []))
        return calls, escapes

    def _containers(self) -> dict[int, list[DictValue]]:
        """id(dict) -> the dicts built from it (spread or copied), indexed once per flow."""
        if self._container_index is None or self._indexed != len(self._by_expr):
            index: dict[int, list[DictValue]] = {}
            for value in self._by_expr.values():
                for source in value.sources:
                    index.setdefault(id(source), []).append(value)
            self._container_index = index
            self._indexed = len(self._by_expr)
        return self._container_index

    def _value(self, expr: cst.BaseExpression) -> DictValue | None:
        if self._depth >= _MAX_FLOW_DEPTH:
            self.too_deep = True
            return None  # a chain of dicts longer than any launcher writes: its keys count as unknown
        self._depth += 1
        try:
            return self._value_at(expr)
        finally:
            self._depth -= 1

    def _value_at(self, expr: cst.BaseExpression) -> DictValue | None:
        if isinstance(expr, cst.Dict) or _is_dict_call(expr, self.prov):
            return self._build(None, expr)
        if isinstance(expr, cst.Call) and _is_copy(expr):
            assert isinstance(expr.func, cst.Attribute)
            return self._value(expr.func.value)
        if isinstance(expr, cst.Name):
            assignment = self.prov.single_assignment(expr)
            if assignment is None or not isinstance(assignment.node, cst.Name):
                return None
            built = self.prov.assigned_value(assignment.node)
            if built is None:
                return None
            value = self._value_of_definition(assignment, built)
            return value
        return None

    def _value_of_definition(self, assignment: Assignment, built: cst.BaseExpression) -> DictValue | None:
        if isinstance(built, cst.Call) and _is_copy(built):
            assert isinstance(built.func, cst.Attribute)
            value = self._by_expr.get(id(built))
            if value is None:
                inner = self._value(built.func.value)
                if inner is None:
                    return None
                value = DictValue(name=assignment.name, expr=built, sources=[inner])
                self._by_expr[id(built)] = value
        elif isinstance(built, cst.Dict) or _is_dict_call(built, self.prov):
            value = self._build(assignment.name, built)
        else:
            return None
        value.name = value.name or assignment.name
        if id(built) not in self._uses_done:
            self._uses_done.add(id(built))
            self._uses(value, assignment)
        return value

    def _container(self, expr: cst.BaseExpression, source: DictValue) -> None:
        """`source` is copied or spread into `expr` (`{**d}`, `dict(**d)`, `dict(d)`, `d.copy()`):
        follow `expr` to where it goes, or record that `source` escapes."""
        if self._depth >= _MAX_FLOW_DEPTH:
            source.escapes.append((expr, "it goes through a chain of dicts too long to follow"))
            return
        self._depth += 1
        try:
            self._container_at(expr, source)
        finally:
            self._depth -= 1

    def _container_at(self, expr: cst.BaseExpression, source: DictValue) -> None:
        parent = self.prov.parent(expr)
        if (
            isinstance(parent, cst.Assign)
            and parent.value is expr
            and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)
        ):
            if self.of_target(parent.targets[0].target) is None:
                source.escapes.append((expr, "it is copied into a name bound more than once"))
            return
        if isinstance(parent, cst.Arg) and parent.star == "**":
            call = self.prov.parent(parent)
            if isinstance(call, cst.Call) and _is_dict_call(call, self.prov):
                self._container(call, source)
                return
            value = self._value(expr)
            if isinstance(call, cst.Call) and value is not None:
                if not any(c is call for c in value.spread_into):
                    value.spread_into.append(call)
                return
        if isinstance(parent, cst.StarredDictElement):
            enclosing = self.prov.parent(parent)
            if isinstance(enclosing, cst.Dict):
                self._container(enclosing, source)
                return
        source.escapes.append((expr, "it is used in a way profstack cannot follow"))

    def _build(self, name: str | None, expr: cst.BaseExpression) -> DictValue:
        existing = self._by_expr.get(id(expr))
        if existing is not None:
            return existing
        value = DictValue(name=name, expr=expr)
        self._by_expr[id(expr)] = value
        if id(expr) in self._building:
            value.unknown.append((expr, "the dict spreads itself"))
            return value
        self._building.add(id(expr))
        if isinstance(expr, cst.Dict):
            for element in expr.elements:
                if isinstance(element, cst.StarredDictElement):
                    self._spread(value, element.value, element)
                elif (
                    isinstance(element, cst.DictElement)
                    and isinstance(element.key, cst.SimpleString)
                    and isinstance(element.key.evaluated_value, str)
                ):
                    value.entries.append(Entry(element.key.evaluated_value, element, element.value))
                else:
                    value.unknown.append((element, "a key that is not a string literal"))
        else:
            assert isinstance(expr, cst.Call)
            for arg in expr.args:
                if arg.star == "**":
                    self._spread(value, arg.value, arg)
                elif arg.keyword is not None:
                    value.entries.append(Entry(arg.keyword.value, arg, arg.value))
                elif arg.star == "":
                    self._spread(value, arg.value, arg)  # dict(other) copies other
                else:
                    value.unknown.append((arg, "dict(*...)"))
        self._building.discard(id(expr))
        return value

    def _spread(self, value: DictValue, source: cst.BaseExpression, where: cst.CSTNode) -> None:
        inner = self._value(source)
        if inner is None:
            code = cst.Module(body=[]).code_for_node(source)
            value.unknown.append((where, f"`{code}` is not a dict profstack can follow"))
        else:
            value.sources.append(inner)
            inner.spread_into.append(value.expr)

    def _uses(self, value: DictValue, assignment: Assignment) -> None:
        """Classify every use of a dict bound to a name: spreads, known edits, or escapes."""
        for access in assignment.references:
            node = access.node
            parent = self.prov.parent(node)
            if node is assignment.node or isinstance(parent, cst.AssignTarget | cst.AnnAssign):
                continue
            if not self._use(value, node, parent):
                value.escapes.append((node, _use_description(parent)))

    def _use(self, value: DictValue, node: cst.CSTNode, parent: cst.CSTNode | None) -> bool:
        """One use of the dict's name; False when it escapes."""
        if isinstance(parent, cst.Arg) and parent.star == "**" and parent.value is node:
            call = self.prov.parent(parent)
            if not isinstance(call, cst.Call):
                return False
            if _is_dict_call(call, self.prov):
                self._container(call, value)  # dict(**d, ...): a dict of its own
            elif not any(c is call for c in value.spread_into):
                value.spread_into.append(call)
            return True
        if isinstance(parent, cst.StarredDictElement):
            enclosing = self.prov.parent(parent)
            if isinstance(enclosing, cst.Dict):
                self._container(enclosing, value)
                return True
            return False
        if isinstance(parent, cst.Arg) and parent.star == "" and parent.keyword is None:
            call = self.prov.parent(parent)
            if isinstance(call, cst.Call) and _is_dict_call(call, self.prov) and call.args[0] is parent:
                self._container(call, value)  # dict(d): a copy
                return True
            return False
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return self._method_use(value, parent)
        if isinstance(parent, cst.Subscript) and parent.value is node:
            return self._subscript_use(value, parent)
        return False

    def _method_use(self, value: DictValue, attr: cst.Attribute) -> bool:
        call = self.prov.parent(attr)
        if not (isinstance(call, cst.Call) and call.func is attr):
            return False
        method = attr.attr.value
        statement = _statement_of(self.prov, call)
        key = _string_arg(call)
        if method == "copy" and not call.args:
            self._container(call, value)
            return True
        if method in {"keys", "items", "values"}:
            return True
        if method == "get" or (method == "pop" and statement is None):
            if key is None:
                return False
            value.entries.append(Entry(key, call, None, removes=method == "pop", read=True))
            return True
        if statement is None:
            return False
        if method == "pop" and key is not None:
            value.entries.append(Entry(key, call, None, statement=statement, removes=True))
            return True
        if method == "setdefault" and key is not None and len(call.args) == 2:
            value.entries.append(Entry(key, call, call.args[1].value, statement=statement))
            return True
        if method == "update" and call.args and all(a.keyword is not None for a in call.args):
            for arg in call.args:
                assert arg.keyword is not None
                value.entries.append(Entry(arg.keyword.value, arg, arg.value, statement=statement))
            return True
        if method == "update":
            value.unknown.append((call, "`.update(...)` with a mapping profstack cannot follow"))
            return True
        return False

    def _subscript_use(self, value: DictValue, sub: cst.Subscript) -> bool:
        key = _subscript_key(sub)
        if key is None:
            value.unknown.append((sub, "a subscript that is not a string literal"))
            return True
        parent = self.prov.parent(sub)
        if isinstance(parent, cst.AssignTarget):
            assign = self.prov.parent(parent)
            statement = _statement_of(self.prov, assign) if isinstance(assign, cst.Assign) else None
            if isinstance(assign, cst.Assign) and statement is not None and len(assign.targets) == 1:
                value.entries.append(Entry(key, sub, assign.value, statement=statement))
                return True
            value.unknown.append((sub, "a chained assignment"))
            return True
        if isinstance(parent, cst.Del):
            statement = _statement_of(self.prov, parent)
            value.entries.append(Entry(key, sub, None, statement=statement, removes=True))
            return True
        value.entries.append(Entry(key, sub, None, read=True))  # d["k"]
        return True


def _is_dict_call(expr: cst.BaseExpression, prov: Provenance) -> bool:
    return isinstance(expr, cst.Call) and prov.origins(expr.func) == frozenset({"builtins.dict"})


def _is_copy(expr: cst.Call) -> bool:
    return isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "copy" and not expr.args


def _string_arg(call: cst.Call) -> str | None:
    if call.args and call.args[0].keyword is None and isinstance(call.args[0].value, cst.SimpleString):
        value = call.args[0].value.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _subscript_key(sub: cst.Subscript) -> str | None:
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return None
    index = sub.slice[0].slice.value
    if isinstance(index, cst.SimpleString) and isinstance(index.evaluated_value, str):
        return index.evaluated_value
    return None


def _statement_of(prov: Provenance, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
    """The one-statement line `node` is the whole of (`d.pop("k")`, `d["k"] = v`, `del d["k"]`)."""
    parent = prov.parent(node)
    if isinstance(node, cst.Call) and isinstance(parent, cst.Expr):
        node, parent = parent, prov.parent(parent)
    if isinstance(parent, cst.SimpleStatementLine) and len(parent.body) == 1 and parent.body[0] is node:
        return parent
    return None


def _use_description(parent: cst.CSTNode | None) -> str:
    if isinstance(parent, cst.Arg):
        return "it is passed to a function"
    if isinstance(parent, cst.Return):
        return "it is returned"
    return "it is used in a way profstack cannot follow"


def launcher_flavour(prov: Provenance, call: cst.Call) -> str | None:
    """Which SageMaker launcher a call is, proven by provenance: "estimator" (SDK v2), "trainer"
    (ModelTrainer), "core" (v3 TrainingJob.create), "boto3" (create/update_training_job), or None."""
    origins = prov.origins(call.func)
    if all_of(origins, is_estimator_class):
        return "estimator"
    if all_of(origins, is_model_trainer):
        return "trainer"
    if all_of(origins, is_training_job_create):
        return "core"
    func = call.func
    if (
        isinstance(func, cst.Attribute)
        and func.attr.value in TRAINING_JOB_CALLS
        and all_of(prov.origins(func.value), is_sagemaker_client)
    ):
        return "boto3"
    return None


def sagemaker_dict(prov: Provenance, flow: DictFlow, value: DictValue) -> bool:
    """A dict's Profiler-named keys are SageMaker's: a value is a proven SageMaker Profiler object,
    or the dict reaches a proven SageMaker launcher."""
    if any(
        e.key in PROFILER_KEYWORDS and e.value is not None and all_of(prov.origins(e.value), is_profiler_value)
        for e in value.entries
    ):
        return True
    calls, _ = flow.consumers(value)
    return any(launcher_flavour(prov, c) is not None for c in calls)


def _foreign(origins: frozenset[str]) -> bool:
    """Proven to be another library's (or the user's own): every origin known, none SageMaker's or boto's."""
    return (
        bool(origins)
        and UNKNOWN not in origins
        and not any(_is_sagemaker(o) or o.startswith(_BOTO_ROOTS) or o == "builtins.dict" for o in origins)
    )


def foreign_profiler_lines(source: str) -> set[int]:
    """Lines where a Profiler-looking keyword (`profiler_config=`) is passed to, or a Profiler-looking
    method (`.disable_profiling()`) is called on, something proven not to be SageMaker's: the
    --check gate does not count them. Text LibCST cannot parse gives the empty set."""
    from libcst.metadata import PositionProvider

    try:
        module = cst.parse_module(source)
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        prov = Provenance(wrapper)
        positions = wrapper.resolve(PositionProvider)
    except (cst.ParserSyntaxError, RecursionError):
        return set()  # nothing is proven foreign: the gate counts everything, as before
    lines: set[int] = set()
    for node in walk(module):
        if not isinstance(node, cst.Call):
            continue
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in PROFILER_METHODS
            and _foreign(prov.origins(func.value))
        ):
            lines.add(positions[func].start.line)
            lines.add(positions[func.attr].start.line)
        keyword_args = [a for a in node.args if a.keyword is not None and a.keyword.value in PROFILER_KEYWORDS]
        if keyword_args and _foreign(prov.origins(func)):
            lines.update(positions[a.keyword].start.line for a in keyword_args if a.keyword is not None)
    flow = DictFlow(prov)
    flow.build_all(walk(module))
    for node in walk(module):
        if not (isinstance(node, cst.Dict) or (isinstance(node, cst.Call) and _is_dict_call(node, prov))):
            continue
        keys = [(k, v, n) for k, v, n in literal_entries(node) if k in PROFILER_KEYWORDS]
        if keys and not _dict_counts(prov, flow, node, keys):
            lines.update(positions[n].start.line for _, _, n in keys)
    return lines


def _dict_counts(
    prov: Provenance,
    flow: DictFlow,
    node: cst.CSTNode,
    keys: list[tuple[str, cst.BaseExpression, cst.CSTNode]],
) -> bool:
    """Whether the --check gate counts a dict's Profiler-named keys: SageMaker's (sagemaker_dict),
    spread into a callee that is not known, or a boto3-style key (`"ProfilerConfig"`) in a dict not
    proven to go only into other libraries' calls."""
    if any(all_of(prov.origins(v), is_profiler_value) for _, v, _ in keys):
        return True
    value = flow.value_of(node)
    if value is None:
        return any(k in BOTO_KEYWORDS for k, _, _ in keys)
    if sagemaker_dict(prov, flow, value):
        return True
    calls, escapes = flow.consumers(value)
    if any(UNKNOWN in prov.origins(c.func) for c in calls):
        return True
    # `"ProfilerConfig"` is the SageMaker API's spelling: it counts unless the dict provably goes
    # only into other libraries' calls
    only_foreign = bool(calls) and not escapes and all(_foreign(prov.origins(c.func)) for c in calls)
    return any(k in BOTO_KEYWORDS for k, _, _ in keys) and not only_foreign


def literal_entries(node: cst.CSTNode) -> list[tuple[str, cst.BaseExpression, cst.CSTNode]]:
    """(key, value, node) of a dict literal's string keys or a dict() call's keywords."""
    out: list[tuple[str, cst.BaseExpression, cst.CSTNode]] = []
    if isinstance(node, cst.Dict):
        for element in node.elements:
            if (
                isinstance(element, cst.DictElement)
                and isinstance(element.key, cst.SimpleString)
                and isinstance(element.key.evaluated_value, str)
            ):
                out.append((element.key.evaluated_value, element.value, element))
    elif isinstance(node, cst.Call):
        out.extend((a.keyword.value, a.value, a) for a in node.args if a.keyword is not None)
    return out


def walk(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))
