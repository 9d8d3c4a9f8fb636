"""What still uses SageMaker Profiler in a Python file, after any rewrite: the `--check` gate.

Reads the syntax tree (not comments): imports of smprof/smppy, SageMaker SDK profiler classes
(ProfilerConfig, Profiler, ProfilerRule, ...), the launcher keywords that configure the Profiler,
and `importlib.import_module("smprof")`-style strings. Each is a Finding with its line.
"""

from __future__ import annotations

import ast

from profstack.migrate._cst import Finding

SMPROF_MODULES = frozenset({"smprof", "smppy"})
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
PROFILER_KEYWORDS = frozenset(
    {"profiler_config", "profiler_rule_configurations", "ProfilerConfig", "ProfilerRuleConfigurations"}
)
PROFILER_METHODS = frozenset({"update_profiler", "enable_default_profiling", "disable_profiling"})


def _sagemaker_module(module: str | None) -> bool:
    return bool(module) and (module == "sagemaker" or str(module).startswith("sagemaker."))


def remaining_uses(source: str) -> list[Finding]:
    """Every line that still uses the Profiler. Unparsable text gives one finding at its error line."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [Finding(exc.lineno or 0, f"cannot parse: {exc.msg}")]
    found: list[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in SMPROF_MODULES:
                    found.append(Finding(node.lineno, f"imports {alias.name}"))
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in SMPROF_MODULES:
                found.append(Finding(node.lineno, f"imports from {node.module}"))
            elif _sagemaker_module(node.module):
                for alias in node.names:
                    if alias.name in PROFILER_CLASSES:
                        found.append(Finding(node.lineno, f"imports {alias.name} from {node.module}"))
        elif isinstance(node, ast.Attribute) and node.attr in PROFILER_CLASSES:
            found.append(Finding(node.lineno, f"uses {ast.unparse(node)}"))
        elif isinstance(node, ast.Attribute) and node.attr in PROFILER_METHODS:
            found.append(Finding(node.lineno, f"calls {node.attr}()"))
        elif isinstance(node, ast.keyword) and node.arg in PROFILER_KEYWORDS:
            found.append(Finding(node.lineno, f"passes {node.arg}="))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in SMPROF_MODULES:
            found.append(Finding(node.lineno, f'names the module "{node.value}"'))
        elif isinstance(node, ast.Name) and node.id in PROFILER_CLASSES:
            found.append(Finding(node.lineno, f"uses {node.id}"))
    return sorted(set(found))
