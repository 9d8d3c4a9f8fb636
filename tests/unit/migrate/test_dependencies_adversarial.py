"""#35 item 5, adversarially: a `RUN pip install` spread over lines in any order keeps exactly what is not the
Profiler's (packages, flags, other indexes, in order) and loses its packages and index options with values."""

from __future__ import annotations

import shlex

from hypothesis import given, settings
from hypothesis import strategies as st

from profstack.migrate.dependencies import rewrite_dependencies

PROFILER_INDEX = "https://smppy.s3.amazonaws.com/simple"
OTHER_INDEX = "https://download.pytorch.org/whl/cu121"
# (tokens, whether they are the Profiler's)
ITEMS = st.sampled_from(
    [
        (["smprof"], True),
        (["smppy==0.3.334"], True),
        (["https://smppy.s3.amazonaws.com/pytorch/cu121/smprof-0.3.334-cp311-cp311-linux_x86_64.whl"], True),
        (["--extra-index-url", PROFILER_INDEX], True),
        ([f"--extra-index-url={PROFILER_INDEX}"], True),
        (["-f", "https://smppy.s3.amazonaws.com/pytorch/cu121/"], True),
        (["--trusted-host", "smppy.s3.amazonaws.com"], True),
        (["torch==2.3.1"], False),
        (['"numpy>=1.26"'], False),
        (["transformers"], False),
        (["--no-cache-dir"], False),
        (["-U"], False),
        (["--extra-index-url", OTHER_INDEX], False),
        (["smprofiler-tools"], False),
    ]
)


@settings(max_examples=300, deadline=None)
@given(items=st.lists(ITEMS, min_size=1, max_size=8), breaks=st.lists(st.booleans(), min_size=8, max_size=8))
def test_pip_install_keeps_exactly_the_rest(items: list[tuple[list[str], bool]], breaks: list[bool]) -> None:
    # GIVEN `RUN pip install` with the items in this order, a `\` line break after some of them
    lines = ["RUN pip install"]
    for (tokens, _mine), wrap in zip(items, breaks, strict=False):
        if wrap:
            lines[-1] += " \\"
            lines.append("    " + " ".join(tokens))
        else:
            lines[-1] += " " + " ".join(tokens)
    text = "FROM python:3.11\n" + "\n".join(lines) + "\n"
    # WHEN rewritten
    result = rewrite_dependencies("dockerfile", text)
    # THEN the other tokens stay, in order; the Profiler's go
    kept = [t for tokens, mine in items if not mine for t in tokens]
    installs = [tokens for tokens, mine in items if not mine and not tokens[0].startswith("-")]
    profilers = any(mine for _tokens, mine in items)
    if not profilers:
        assert result.source == text
        assert result.edits == result.manual == []
        return
    assert result.manual == []
    if not installs:  # nothing else installed: the RUN goes
        assert result.source == "FROM python:3.11\n"
        return
    run = result.source.split("\n", 1)[1]
    assert shlex.split(run.replace("\\\n", " ")) == ["RUN", "pip", "install", *(shlex.split(" ".join(kept)))]
    # AND every line is still a continuation but the last, and a second run changes nothing
    body = run.rstrip("\n").split("\n")
    assert all(line.endswith(" \\") for line in body[:-1])
    assert not body[-1].endswith("\\")
    assert not rewrite_dependencies("dockerfile", result.source).changed
