"""The codemod preserves behaviour: a generated smprof program, run against a recording stand-in for
smprof, opens and closes the same ranges in the same order as its rewrite run against a recording
stand-in for torch.profiler (record_function enter/exit, profiler start/stop). With the profiler
imported after `sys.path.insert(...)` or inside a function, this is what found the inline singleton
defined above `import torch.profiler` (NameError on load).

The stand-ins are small on purpose: what is compared is the sequence of ("enter", label),
("exit", label), "start" and "stop" events, which is what a trace's ranges are built from.
"""

from __future__ import annotations

import sys
import textwrap
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profstack.migrate.smprof import rewrite_source

Log = list[Any]

_IMPORTS = [
    "import smprof",
    "import smppy as smprof",
    "try:\n    import smppy as smprof\nexcept ImportError:\n    import smprof",
    "from smprof import annotate, annotation_begin, annotation_end, SMProfiler, Config",
]
_FRAGMENTS = [
    "def begin():\n    prof = smprof.SMProfiler.instance()\n    prof.start_profiling()\n\n\n"
    "def end():\n    prof = smprof.SMProfiler.instance()\n    prof.stop_profiling()\n\n\nbegin()\nend()",
    "x = 1",
    'with smprof.annotate("a"):\n    x = 2',
    'with smprof.annotate("a"), smprof.annotate("b"):\n    x = 2',
    'smprof.annotation_begin("r")\nx = 1\nsmprof.annotation_end("r")',
    'smprof.annotation_begin("t")\ntry:\n    x = 1\nfinally:\n    smprof.annotation_end("t")',
    'smprof.annotation_begin("i")\nif flag:\n    smprof.annotation_end("i")\nelse:\n    smprof.annotation_end("i")',
    'h = smprof.annotation_begin("h")\nx = 3\nsmprof.annotation_end(h)',
    'smprof.annotation_begin("x")\nsmprof.annotation_begin("y")\nsmprof.annotation_end("x")\nsmprof.annotation_end("y")',
    "P = smprof.SMProfiler.instance()\nP.start_profiling()\n"
    "for i in range(2):\n    if i:\n        continue\n    loss.backward()\nP.stop_profiling()",
    "cfg = smprof.Config()\ncfg.profile_cuda = True\nQ = smprof.SMProfiler.instance()\nQ.configure(cfg)",
    '@smprof.annotate("f")\ndef f():\n    return 1\nf()',
    "@smprof.annotate\ndef g():\n    return 1\ng()",
    'def gen():\n    with smprof.annotate("g"):\n        yield 1\nlist(gen())',
    "smprof.SMProfiler.instance().start_profiling()\nfor b in data:\n    opt.step()\n"
    "smprof.SMProfiler.instance().stop_profiling()",
    'if True:\n    smprof.annotation_begin("n")\n    for i in range(2):\n        pass\n    smprof.annotation_end("n")',
]


# what comes before the profiler import: nothing, a path tweak first (SageMaker entry points), a
# docstring, a __future__ import
_PRELUDES = [
    "",
    "import sys\nsys.path.insert(0, '/opt/ml/code')\n",
    '"""Train."""\nimport sys\n',
    "from __future__ import annotations\n",
]


class _Range:
    def __init__(self, log: Log, label: Any) -> None:
        self.log, self.label = log, label

    def __enter__(self) -> _Range:
        self.log.append(("enter", self.label))
        return self

    def __exit__(self, *exc: object) -> None:
        self.log.append(("exit", self.label))

    def __call__(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self:
                return function(*args, **kwargs)

        return wrapped


class _Profiler:
    """Both profilers' rule: stop() only after start(), and no second start() while running."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.running = False

    def start(self) -> None:
        if self.running:
            raise RuntimeError("started twice")
        self.running = True
        self.log.append("start")

    def stop(self) -> None:
        if not self.running:
            raise RuntimeError("stop() on a profiler that never started")
        self.running = False
        self.log.append("stop")

    start_profiling, stop_profiling = start, stop

    def step(self) -> None:
        pass

    def configure(self, config: object) -> None:
        pass


def _smprof(log: Log) -> dict[str, types.ModuleType]:
    module = types.ModuleType("smprof")
    profiler = _Profiler(log)

    def annotate(label: Any = None) -> Any:
        return _Range(log, label.__name__)(label) if callable(label) else _Range(log, label)

    def begin(label: Any) -> _Range:
        log.append(("enter", label))
        return _Range(log, label)

    def end(handle: Any) -> None:
        log.append(("exit", handle.label if isinstance(handle, _Range) else handle))

    module.__dict__.update(
        annotate=annotate,
        annotation_begin=begin,
        annotation_end=end,
        SMProfiler=types.SimpleNamespace(instance=lambda: profiler),
        Config=types.SimpleNamespace,
    )
    return {"smprof": module, "smppy": module}


def _torch(log: Log) -> dict[str, types.ModuleType]:
    profiler = types.ModuleType("torch.profiler")
    profiler.__dict__.update(
        record_function=lambda label: _Range(log, label),
        profile=lambda **kwargs: _Profiler(log),
        schedule=lambda **kwargs: None,
        tensorboard_trace_handler=lambda directory: None,
        ProfilerActivity=types.SimpleNamespace(CPU=1, CUDA=2),
    )
    torch = types.ModuleType("torch")
    torch.__dict__["profiler"] = profiler
    return {"torch": torch, "torch.profiler": profiler}


@contextmanager
def _modules(modules: dict[str, types.ModuleType]) -> Iterator[None]:
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


class _Anything:
    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def _run(source: str, modules: Callable[[Log], dict[str, types.ModuleType]], *, call_main: bool) -> tuple[Log, str]:
    log: Log = []
    namespace: dict[str, Any] = {"loss": _Anything(), "opt": _Anything(), "data": [1, 2], "flag": 1}
    with _modules(modules(log)):
        try:
            exec(compile(source, "<program>", "exec"), namespace)
            if call_main:
                namespace["main"]()
        except Exception as exc:
            return log, type(exc).__name__
    return log, ""


@pytest.mark.slow  # ~10 s on a shared core: run by `make test`
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    imports=st.sampled_from(_IMPORTS),
    fragments=st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=4, unique=True),
    in_function=st.booleans(),
    prelude=st.sampled_from(_PRELUDES),
    import_inside=st.booleans(),
)
def test_rewritten_programs_open_and_close_the_same_ranges(
    imports: str, fragments: list[str], in_function: bool, prelude: str, import_inside: bool
) -> None:
    # GIVEN a program that runs cleanly against smprof: its code at module level or in main(), the
    # profiler imported at the top (after a prelude) or inside main()
    body = "\n".join(fragments)
    if imports.startswith("from smprof"):
        body = body.replace("smprof.", "")
    if in_function and import_inside:
        source = prelude + "def main():\n" + textwrap.indent(imports + "\n" + body, "    ") + "\n"
    elif in_function:
        source = prelude + imports + "\ndef main():\n" + textwrap.indent(body, "    ") + "\n"
    else:
        source = prelude + imports + "\n" + body + "\n"
    before, error = _run(source, _smprof, call_main=in_function)
    if error:
        return
    # WHEN rewritten
    result = rewrite_source(source)
    if not result.changed:
        assert result.manual  # a refusal says why
        return
    # THEN the rewrite runs cleanly against torch.profiler and records the same events, in order
    after, error = _run(result.source, _torch, call_main=in_function)
    assert error == "", result.source
    assert after == before, result.source


@pytest.mark.parametrize(
    "program",
    [
        # start in one function, stop in another, each with its own instance() call
        "import smprof\n\n\ndef begin():\n    prof = smprof.SMProfiler.instance()\n    prof.start_profiling()\n\n\n"
        "def end():\n    prof = smprof.SMProfiler.instance()\n    prof.stop_profiling()\n\n\n"
        "begin()\nfor b in data:\n    opt.step()\nend()\n",
        # an instance in a variable, stopped inline
        "import smprof\n\nP = smprof.SMProfiler.instance()\nP.start_profiling()\nfor b in data:\n    opt.step()\n"
        "smprof.SMProfiler.instance().stop_profiling()\n",
    ],
)
def test_every_instance_call_is_the_same_profiler(program: str) -> None:
    # GIVEN SMProfiler.instance() called at more than one site (it is a singleton)
    # WHEN rewritten and run against a profiler that only stops what it started
    result = rewrite_source(program)
    assert result.changed
    log: Log = []
    created: list[_Profiler] = []

    def profile(**kwargs: Any) -> _Profiler:
        created.append(_Profiler(log))
        return created[-1]

    modules = _torch(log)
    modules["torch.profiler"].__dict__["profile"] = profile
    namespace: dict[str, Any] = {"opt": _Anything(), "data": [1, 2]}
    with _modules(modules):
        exec(compile(result.source, "<program>", "exec"), namespace)
    # THEN one profile object is started and stopped (before: one per site, so stop() went to a
    # profiler that never started and the started one was never stopped: no trace written)
    assert len(created) == 1, result.source
    assert log == ["start", "stop"]
