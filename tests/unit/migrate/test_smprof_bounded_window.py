"""#35 item 4, adversarially: every converted program steps its profile once per training step.

Generated programs vary where the profiler lives (module, function local, `self.prof`), where start()
stands (plain, under `if profile:`), where stop() stands (after the loop, in a `finally:`, under
`if profile:`) and where the loop is (same block, inside an `if`, epoch and batch loops nested, in a
function or method called after start()). Each rewrite runs against a recording stand-in for
torch.profiler: it must build the profile with a schedule and call step() exactly once per batch,
between start() and stop(), or be refused with the change to make. Never an unbounded recording; and
with profiling switched off, no step() at all (torch's schedule starts tracing on step() by itself).
"""

from __future__ import annotations

import re
import sys
import textwrap
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profstack.migrate.smprof import rewrite_source


def _indent(code: str) -> str:
    return textwrap.indent(code, "    ")


@st.composite
def programs(draw: st.DrawFn) -> tuple[str, int, bool]:
    """(source, batches run, whether a conversion is possible)."""
    style = draw(st.sampled_from(["module", "local", "method"]))
    loop_kinds = ["same", "wrapped", "nested", "function"] + (["method"] if style == "method" else [])
    loop_kind = draw(st.sampled_from(loop_kinds))
    start_in_if = draw(st.booleans())
    stop_kind = draw(st.sampled_from(["plain", "finally", "if"]))
    epochs, batches = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    ref = {"module": "P", "local": "p", "method": "self.prof"}[style]
    inner = f"for b in range({batches}):\n    opt.step()\n"
    loop = {
        "same": inner,
        "wrapped": "if True:\n" + _indent(inner),
        "nested": f"for e in range({epochs}):\n    x = e\n" + _indent(inner),
        "function": f"run({batches})\n",
        "method": f"self.run_epoch({batches})\n",
    }[loop_kind]
    iterations = batches * (epochs if loop_kind == "nested" else 1)
    start = f"{ref}.start_profiling()\n"
    body = ("if profile:\n" + _indent(start)) if start_in_if else start
    stop = f"{ref}.stop_profiling()\n"
    if stop_kind == "finally":
        body += "try:\n" + _indent(loop) + "finally:\n" + _indent(stop)
    else:
        body += loop + (("if profile:\n" + _indent(stop)) if stop_kind == "if" else stop)
    if style == "local":
        body = "p = smprof.SMProfiler.instance()\n" + body
    source = "import smprof\n\nprofile = True\n"
    source += "P = smprof.SMProfiler.instance()\n" if style == "module" else ""
    source += "\n\ndef run(n):\n    for b in range(n):\n        opt.step()\n"
    if style == "method":
        source += (
            "\n\nclass T:\n    def __init__(self):\n        self.prof = smprof.SMProfiler.instance()\n\n"
            "    def run_epoch(self, n):\n        for b in range(n):\n            opt.step()\n\n"
            "    def main(self):\n" + _indent(_indent(body)) + "\n\nT().main()\n"
        )
    else:
        source += "\n\ndef main():\n" + _indent(body) + "\n\nmain()\n"
    # refused: a loop the profiler cannot reach; a start under `if profile:` whose step would go in another
    # function, where `profile` is not known
    convertible = not (loop_kind == "function" and style != "module") and not (
        start_in_if and loop_kind in {"function", "method"}
    )
    return source, iterations, convertible


class _Profile:
    def __init__(self, log: list[str], kwargs: dict[str, Any]) -> None:
        self.log, self.kwargs = log, kwargs

    def start(self) -> None:
        self.log.append("start")

    def step(self) -> None:
        self.log.append("step")

    def stop(self) -> None:
        self.log.append("stop")


@contextmanager
def _fake_torch(log: list[str], profiles: list[_Profile]) -> Iterator[None]:
    profiler = types.ModuleType("torch.profiler")

    def profile(**kwargs: Any) -> _Profile:
        profiles.append(_Profile(log, kwargs))
        return profiles[-1]

    profiler.__dict__.update(
        profile=profile,
        schedule=lambda **kwargs: dict(kwargs),
        tensorboard_trace_handler=lambda directory: None,
        record_function=None,
        ProfilerActivity=types.SimpleNamespace(CPU=1, CUDA=2),
    )
    torch = types.ModuleType("torch")
    torch.__dict__["profiler"] = profiler
    saved = {name: sys.modules.get(name) for name in ("torch", "torch.profiler")}
    sys.modules.update({"torch": torch, "torch.profiler": profiler})
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


class _Optimizer:
    def step(self) -> None:
        pass


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_every_conversion_steps_once_per_batch_under_a_schedule(program: tuple[str, int, bool]) -> None:
    source, iterations, convertible = program
    # WHEN rewritten
    result = rewrite_source(source)
    if not convertible:
        # THEN a loop the profiler cannot reach is refused, saying what to change, and nothing is edited
        assert not result.changed, result.source
        reasons = ("pass the profiler to that function or make it module-level", "runs only under `if profile:`")
        assert any(r in f.message for f in result.manual for r in reasons), result.manual
        return
    assert result.changed, (source, result.manual)
    assert result.manual == [], result.manual
    # THEN the rewrite runs, builds one profile with a bounded schedule, and steps once per batch inside the window
    log: list[str] = []
    profiles: list[_Profile] = []
    with _fake_torch(log, profiles):
        exec(compile(result.source, "<program>", "exec"), {"opt": _Optimizer()})
    assert len(profiles) == 1, result.source
    assert profiles[0].kwargs["schedule"] == {"wait": 1, "warmup": 1, "active": 3, "repeat": 1}
    assert log == ["start", *["step"] * iterations, "stop"], result.source
    # AND with profiling off, a step never records on its own (torch's schedule would start tracing)
    log.clear()
    with _fake_torch(log, profiles):
        exec(
            compile(result.source.replace("profile = True", "profile = False"), "<off>", "exec"), {"opt": _Optimizer()}
        )
    if re.search(r"if profile:\n\s+\S+\.start_profiling\(\)", source):  # the start is conditional
        assert "start" not in log
        assert "step" not in log, result.source
