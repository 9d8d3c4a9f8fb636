"""#35 items 1-2: rewrites only where names provably are SageMaker Profiler's; guards, factories, refusals."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from profstack.migrate.scan import remaining_uses
from profstack.migrate.smprof import rewrite_source

DECOYS = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "smprof_round2" / "decoys").glob("*.py"))


def _rewrite(text: str) -> tuple[str, list[str]]:
    result = rewrite_source(textwrap.dedent(text))
    return result.source, [f.message for f in result.manual]


@pytest.mark.parametrize("decoy", DECOYS, ids=lambda p: p.stem)
def test_decoys_are_left_byte_identical_and_pass_the_check(decoy: Path) -> None:
    # GIVEN a file that names smprof/smppy/profiler things that are not SageMaker Profiler's
    text = decoy.read_text()
    # WHEN rewritten THEN not a byte changes, nothing is reported, and --check has nothing to say
    result = rewrite_source(text, filename=str(decoy))
    assert not result.changed
    assert result.source == text
    assert result.manual == []
    assert remaining_uses(text) == []


def test_decoy_corpus_covers_each_kind() -> None:
    assert len(DECOYS) >= 7


def test_a_relative_import_of_the_projects_own_smprof_is_not_the_profiler() -> None:
    # GIVEN `from .smprof import annotate` (before: rewritten to torch.profiler, a confident wrong edit)
    source, manual = _rewrite('from .smprof import annotate\n\nwith annotate("x"):\n    pass\n')
    # THEN untouched
    assert source == 'from .smprof import annotate\n\nwith annotate("x"):\n    pass\n'
    assert manual == []


def test_a_parameter_shadowing_the_module_is_someone_elses_object() -> None:
    # GIVEN the Profiler imported and used, and a function whose parameter is called smprof
    source, manual = _rewrite(
        """
        import smprof


        def train(loader, opt):
            with smprof.annotate("epoch"):
                for batch in loader:
                    opt.step()


        def helper(smprof):
            smprof.annotation_begin("mine")
            smprof.annotation_end("mine")
        """
    )
    # THEN the real uses are converted and the parameter's uses are left exactly as written
    assert manual == []
    assert 'with torch.profiler.record_function("epoch"):' in source
    assert 'def helper(smprof):\n    smprof.annotation_begin("mine")\n    smprof.annotation_end("mine")\n' in source


def test_a_from_imported_name_shadowed_by_a_parameter_is_left_alone() -> None:
    source, _ = _rewrite(
        """
        from smprof import annotate


        def f(annotate):
            with annotate("x"):
                return 1


        with annotate("y"):
            pass
        """
    )
    assert 'def f(annotate):\n    with annotate("x"):' in source
    assert 'with torch.profiler.record_function("y"):' in source


def test_a_module_name_rebound_to_something_else_blocks_the_file() -> None:
    # GIVEN the module name re-bound at module level: each use could be either object
    source, manual = _rewrite("import smprof\nsmprof = wrap(smprof)\nwith smprof.annotate('x'):\n    pass\n")
    # THEN nothing is rewritten and the reason is given
    assert source.startswith("import smprof\n")
    assert any("no safe torch.profiler mapping" in m for m in manual)


def test_optional_import_guards_go_and_the_profiler_always_imports() -> None:
    source, manual = _rewrite(
        """
        try:
            import smprof
        except ImportError:
            smprof = None

        if not smprof:
            print("profiling off")
        else:
            with smprof.annotate("x"):
                work()
        ctx = smprof.annotate("y") if smprof else None
        """
    )
    assert manual == []
    assert "profiling off" not in source  # the branch for a missing profiler is dead: torch.profiler imports
    assert 'with torch.profiler.record_function("x"):\n    work()\n' in source
    assert 'ctx = torch.profiler.record_function("y")\n' in source
    assert "smprof" not in source
    ast.parse(source)


def test_a_loop_the_profiler_cannot_see_is_refused_with_the_change_to_make() -> None:
    # GIVEN a local profiler and the loop in another function it is not passed to
    source, manual = _rewrite(
        """
        import smprof


        def train(loader, opt):
            for batch in loader:
                opt.step()


        def main():
            p = smprof.SMProfiler.instance()
            p.start_profiling()
            train(data, opt)
            p.stop_profiling()
        """
    )
    # THEN refused (no unbounded recording), saying what to change
    assert source.lstrip().startswith("import smprof")
    assert any("cannot see `p`: pass the profiler to that function or make it module-level" in m for m in manual)


def test_nothing_to_step_is_refused_not_recorded_unbounded() -> None:
    source, manual = _rewrite(
        """
        import smprof

        p = smprof.SMProfiler.instance()


        def run():
            p.start_profiling()
            p.stop_profiling()
        """
    )
    assert "smprof" in source
    assert any("no training loop, step-end hook or call after p.start()" in m for m in manual)


def test_a_profiler_passed_positionally_is_converted_in_the_callee() -> None:
    source, manual = _rewrite(
        """
        import smprof


        def train(prof, loader, opt):
            prof.start_profiling()
            for batch in loader:
                opt.step()
            prof.stop_profiling()


        def main():
            p = smprof.SMProfiler.instance()
            train(p, data, opt)
        """
    )
    assert manual == []
    assert (
        "    prof.start()\n    for batch in loader:\n        opt.step()\n        prof.step()\n    prof.stop()\n"
        in source
    )
    assert "p = torch.profiler.profile(" in source


def test_a_step_end_hook_with_returns_steps_before_each_return() -> None:
    source, manual = _rewrite(
        """
        import smprof


        class CB:
            def __init__(self):
                self.p = smprof.SMProfiler.instance()

            def on_train_begin(self, args, state, control):
                self.p.start_profiling()

            def on_step_end(self, args, state, control):
                if state is None:
                    return None
                return control

            def on_train_end(self, args, state, control):
                self.p.stop_profiling()
        """
    )
    assert manual == []
    assert (
        "            self.p.step()\n            return None\n        self.p.step()\n        return control\n" in source
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('import smprof as sp\nsmprof = sp\nwith smprof.annotate("a"):\n    pass\n', 'record_function("a")'),
        ('from smprof import annotate\nregion = annotate\nwith region("b"):\n    pass\n', 'record_function("b")'),
        ('import smppy\nmark = smppy.annotate\n\n\n@mark("c")\ndef f():\n    pass\n', 'record_function("c")'),
    ],
)
def test_reexports_resolve_to_the_profiler(text: str, expected: str) -> None:
    # GIVEN another module-level name for the module or one of its members (before: refused)
    result = rewrite_source(text)
    # THEN it is followed: converted whole, and the re-export goes with the import
    assert result.manual == []
    assert expected in result.source
    assert "smprof" not in result.source
    assert "smppy" not in result.source


def test_a_reexport_bound_twice_is_not_followed() -> None:
    result = rewrite_source("import smprof\nsp = smprof\nsp = other\n")
    assert not result.changed
    assert any("no safe torch.profiler mapping" in f.message for f in result.manual)


def test_an_expression_nested_too_deeply_is_a_one_line_error() -> None:
    from profstack.migrate.smprof import RewriteError

    # GIVEN a generated file with a 400-term sum (Python parses it; LibCST's recursive walk cannot)
    source = "import smprof\nx = " + " + ".join(["1"] * 400) + "\n"
    # WHEN rewritten THEN a RewriteError says so (before: a RecursionError traceback)
    with pytest.raises(RewriteError, match="nested too deeply"):
        rewrite_source(source, filename="gen.py")
