"""tune_malloc: glibc's mmap threshold fixed, so that big blocks freed go back to the system (allocator.py)."""

from __future__ import annotations

import ast
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profstack.analysis import AnalysisOptions, allocator
from tests.unit.analysis.synth import busy_steps

HANDLERS = [
    Path(__file__).resolve().parents[3] / "lambdas" / "trace_processor" / f"{name}.py"
    for name in ("handler", "analyze_file")
]
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"

# 16 blocks of 3 MB (above the threshold set), all freed but the last, after an 8 MB block freed (which, by
# default, lifts glibc's threshold to 8 MB, so the 3 MB blocks live in the heap, below the one kept, and the heap
# cannot shrink)
_CHILD = textwrap.dedent(
    """
    import sys
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 1e6
    if sys.argv[1] == "tune":
        from profstack.analysis.allocator import tune_malloc
        assert tune_malloc() and tune_malloc()  # once per process; the second call reports the first
    x = b"\\1" * (8 << 20)
    del x
    base = rss()
    blocks = [b"\\1" * (3 << 20) for _ in range(16)]
    keep = blocks[-1]
    del blocks
    print(rss() - base)
    """
)


def _retained_mb(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", _CHILD, mode], capture_output=True, text=True, check=True)
    return float(out.stdout)


@pytest.mark.skipif(not GLIBC, reason="mallopt's threshold is glibc's")
def test_big_blocks_freed_go_back_to_the_system_once_tuned() -> None:
    # GIVEN a process that freed an 8 MB block, then 15 of 16 blocks of 3 MB
    # WHEN glibc is left to itself, THEN the heap keeps them (the reason allocator.py exists)
    assert _retained_mb("none") > 32
    # WHEN tune_malloc ran first, THEN each block was its own mapping and went back on free
    assert _retained_mb("tune") < 10


def test_elsewhere_it_changes_nothing_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a C library that is not glibc (musl, macOS)
    monkeypatch.setattr(allocator, "_done", None)
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("", ""))
    # WHEN tuned, THEN nothing is called and the answer is False, once and after
    assert allocator.tune_malloc() is False
    assert allocator.tune_malloc() is False


def _count_calls(monkeypatch: pytest.MonkeyPatch, *targets: object) -> list[int]:
    calls: list[int] = []
    for target in targets:
        monkeypatch.setattr(target, "tune_malloc", lambda: calls.append(1) or True)
    return calls


def test_the_cli_tunes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import profstack.cli

    # GIVEN the command line, WHEN it runs any sub-command, THEN it tuned malloc first
    calls = _count_calls(monkeypatch, profstack.cli)
    with pytest.raises(SystemExit):
        profstack.cli.main(["--version"])
    assert calls == [1]


def test_a_jobs_worker_tunes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from profstack.analysis import parallel

    # GIVEN a --jobs worker (a spawned or forkserver one inherits nothing), WHEN it starts, THEN it tunes malloc
    calls = _count_calls(monkeypatch, parallel)

    class _Tasks:
        def get(self) -> None:
            return None

    class _Out:
        closed = False

        def close(self) -> None:
            self.closed = True

    out = _Out()
    parallel._worker(
        parallel._Job(sources=[], opts=AnalysisOptions(), predicted=[], groups=[]), _Tasks(), out, None, None
    )
    assert calls == [1]
    assert out.closed


def test_the_bench_tunes_it_as_the_cli_does(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from bench import workers

    # GIVEN the bench's ProfStack runner, WHEN it measures a trace, THEN the process was tuned as the CLI's is
    calls = _count_calls(monkeypatch, allocator)
    trace = tmp_path / "rank-0.pt.trace.json"
    trace.write_bytes(busy_steps().to_bytes())
    assert workers.run_profstack(trace)["ranks"] == 1
    assert calls == [1]


@pytest.mark.parametrize("handler", HANDLERS, ids=lambda p: p.stem)
def test_the_lambda_handlers_tune_it_at_cold_start(handler: Path) -> None:
    # GIVEN the trace processor's and the fan-out's handler modules (importing them needs the deployment's
    # environment, which the functional tests set up), THEN a statement at the top level, run at cold start,
    # calls tune_malloc
    tree = ast.parse(handler.read_text(encoding="utf-8"))
    top = [
        n.value.func.id
        for n in tree.body
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
    ]
    assert "tune_malloc" in top
