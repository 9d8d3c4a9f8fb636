"""SHA-256 of the summary.json that `profstack analyze` writes, for every sample trace and option variant.

    .venv/bin/python scripts/summary_digest.py --out digests.json [--samples samples/traces] [--quick]

Run it before and after a refactor and compare the two files (`--compare OLD.json NEW.json`): every
digest must match. Cases (each a separate `profstack.cli.main(["analyze", ...])` run, in this process):

* every trace file alone, and every folder holding traces as a whole (including the samples root,
  whose reference_values/*.json are not traces: the "some input failed" path);
* every trace with ProfilerSteps again with `--steps A:B` (the middle of its steps, chosen from its
  own first summary) and, through the library (the CLI has no flag for it), with the last step dropped
  (`AnalysisOptions(include_last_step=False)`, serialised exactly as the CLI does);
* `--no-merge-ranks`, `--top 3`, `--threshold`, an empty step window, and derived unreadable inputs
  (a truncated copy, a non-Kineto JSON) written to a fixed temporary folder so names are stable;
* a few folders with `--format perfetto`: the output names and each trimmed file's digest.

Next to the CLI digest, each case also records the digest of what the trace-processor Lambda would
store for it ("lambda_sha256": `publish_report`'s finding added and the Lambda's own JSON serialisation),
when the Lambda module can be imported, and the engine's summary in that serialisation with nothing added
("engine_as_lambda_sha256"): where the two agree, `profstack analyze` and the Lambda report the same.
Input paths are passed as given (relative names), so run it from the repository root in both trees.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the tree this script sits in, not an installed profstack

DERIVED = Path("/tmp/profstack-summary-digest-derived")  # noqa: S108 - fixed so file names are stable


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _lambda_view() -> Callable[[dict[str, Any]], bytes] | None:
    """What the Lambda stores as summary.json for an engine summary (None: Lambda not importable)."""
    try:
        from lambdas.trace_processor import logic
    except Exception:
        return None
    flag = getattr(logic, "_flag_unreadable", None)

    def view(summary: dict[str, Any]) -> bytes:
        if flag is not None:
            flag(summary)
        return json.dumps(summary, indent=2, sort_keys=True, default=str).encode()

    return view


def _run_cli(args: Sequence[str], out: Path) -> tuple[int, str]:
    from profstack.cli import main

    shutil.rmtree(out, ignore_errors=True)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(["analyze", *args, "--out", str(out)])
    return rc, err.getvalue()


def _record(
    name: str, args: Sequence[str], work: Path, view: Callable[[dict[str, Any]], bytes] | None
) -> dict[str, Any]:
    out = work / "out"
    rc, err = _run_cli([*args, "--format", "json"], out)
    entry: dict[str, Any] = {"case": name, "args": list(args), "rc": rc}
    path = out / "summary.json"
    if path.exists():
        data = path.read_bytes()
        entry["summary_sha256"] = _sha(data)
        # the engine's summary in the Lambda's serialisation, before the Lambda adds anything
        entry["engine_as_lambda_sha256"] = _sha(json.dumps(json.loads(data), indent=2, sort_keys=True).encode())
        if view is not None:
            entry["lambda_sha256"] = _sha(view(json.loads(data)))
        entry["_summary"] = json.loads(data)
    else:
        entry["stderr_sha256"] = _sha(err.encode())
        entry["stderr"] = err.strip()
    return entry


def _record_api(name: str, paths: Sequence[str], include_last_step: bool) -> dict[str, Any]:
    from profstack.analysis import AnalysisOptions, analyze, discover_sources

    result = analyze(discover_sources(list(paths)), AnalysisOptions(include_last_step=include_last_step))
    data = (json.dumps(result.summary, indent=2, allow_nan=False) + "\n").encode()
    return {"case": name, "args": [*paths, f"include_last_step={include_last_step}"], "summary_sha256": _sha(data)}


def _record_perfetto(name: str, args: Sequence[str], work: Path) -> dict[str, Any]:
    out = work / "out"
    rc, _ = _run_cli([*args, "--format", "perfetto"], out)
    files = sorted((out / "perfetto").glob("*")) if (out / "perfetto").exists() else []
    return {
        "case": name,
        "args": list(args),
        "rc": rc,
        "perfetto": {p.name: _sha(gzip.decompress(p.read_bytes())) for p in files},
    }


def _derived(samples: Path) -> dict[str, Path]:
    """Unreadable inputs built from the samples, at fixed paths."""
    shutil.rmtree(DERIVED, ignore_errors=True)
    (DERIVED / "mixed").mkdir(parents=True)
    raw = (samples / "own" / "cpu_train_loop_rank0.pt.trace.json").read_bytes()
    truncated = DERIVED / "mixed" / "truncated_rank1.pt.trace.json"
    truncated.write_bytes(raw[: len(raw) // 2])
    shutil.copy(samples / "hta" / "trace_filter" / "sampled_rank-0.json.gz", DERIVED / "mixed" / "good_rank0.json.gz")
    (DERIVED / "mixed" / "not_kineto.json").write_bytes(b'{"hello": "world"}\n')
    (DERIVED / "dup").mkdir()
    for name in ("sampled_rank-0.json.gz", "sampled_rank-0-copy.json.gz"):  # one rank twice, overlapping
        shutil.copy(samples / "hta" / "trace_filter" / "sampled_rank-0.json.gz", DERIVED / "dup" / name)
    return {"truncated": truncated, "mixed": DERIVED / "mixed", "dup": DERIVED / "dup"}


def cases(samples: Path, work: Path, quick: bool) -> list[dict[str, Any]]:
    view = _lambda_view()
    files = sorted(p for p in samples.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))
    traces = [p for p in files if "reference_values" not in p.parts]
    folders = sorted({p.parent for p in traces} | {a for p in traces for a in p.parents if samples in (a, *a.parents)})
    if quick:
        traces = traces[:3]
        folders = folders[:2]
    out: list[dict[str, Any]] = []

    def add(entry: dict[str, Any]) -> None:
        entry.pop("_summary", None)
        out.append(entry)
        print(f"{entry['case']}: {entry.get('summary_sha256') or entry.get('perfetto') or entry.get('stderr')}")
        sys.stdout.flush()

    for path in traces:
        rel = str(path)
        first = _record(f"file {rel}", [rel], work, view)
        steps = [int(s) for r in (first.get("_summary") or {}).get("ranks", []) for s in r["window"]["steps"]]
        add(first)
        if len(steps) >= 2:
            lo, hi = (steps[1], steps[-2]) if len(steps) >= 4 else (steps[0], steps[0])
            add(_record(f"file {rel} --steps {lo}:{hi}", [rel, "--steps", f"{lo}:{hi}"], work, view))
            add(_record_api(f"file {rel} last step dropped", [rel], include_last_step=False))
    for folder in folders:
        add(_record(f"folder {folder}", [str(folder)], work, view))
    filt = str(samples / "hta" / "trace_filter")
    one = str(samples / "hta" / "ns_resolution_trace")
    add(_record_api(f"folder {filt} last step dropped", [filt], include_last_step=False))
    add(_record(f"folder {filt} --no-merge-ranks", [filt, "--no-merge-ranks"], work, view))
    add(_record(f"folder {samples} --no-merge-ranks", [str(samples), "--no-merge-ranks"], work, view))
    add(_record(f"folder {one} --top 3", [one, "--top", "3"], work, view))
    add(
        _record(
            f"folder {one} --threshold",
            [one, "--threshold", "low_gpu_util_busy_pct=99", "--threshold", "tiny_kernel_share_pct=1"],
            work,
            view,
        )
    )
    add(_record(f"folder {one} --steps 99999:99999", [one, "--steps", "99999:99999"], work, view))
    add(_record(f"folder {one} --threshold typo", [one, "--threshold", "no_such_rule=1"], work, view))
    derived = _derived(samples)
    add(_record("derived truncated file", [str(derived["truncated"])], work, view))
    add(_record("derived mixed folder", [str(derived["mixed"])], work, view))
    add(_record("derived one rank twice", [str(derived["dup"])], work, view))
    add(_record_perfetto(f"perfetto {filt}", [filt], work))
    add(_record_perfetto(f"perfetto {samples / 'own'}", [str(samples / "own")], work))
    add(_record_perfetto(f"perfetto {filt} --no-merge-ranks", [filt, "--no-merge-ranks"], work))
    add(_record_perfetto("perfetto derived mixed", [str(derived["mixed"])], work))
    add(_record_perfetto("perfetto derived one rank twice", [str(derived["dup"])], work))
    return out


def compare(old_path: Path, new_path: Path) -> int:
    old = {c["case"]: c for c in json.loads(old_path.read_text())["cases"]}
    new = {c["case"]: c for c in json.loads(new_path.read_text())["cases"]}
    differ = 0
    for name in sorted(old.keys() | new.keys()):
        a, b = old.get(name), new.get(name)
        same = a == b
        differ += not same
        print(f"{'same   ' if same else 'DIFFERS'} {name}")
        if not same and a is not None and b is not None:
            for key in sorted(a.keys() | b.keys()):
                if a.get(key) != b.get(key):
                    print(f"          {key}: {a.get(key)} -> {b.get(key)}")
    print(f"{len(old.keys() | new.keys()) - differ} same, {differ} differ")
    return 1 if differ else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, help="write the digests here (JSON)")
    parser.add_argument("--samples", type=Path, default=Path("samples/traces"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/profstack-summary-digest-work"))  # noqa: S108
    parser.add_argument("--quick", action="store_true", help="a few cases only (a smoke test of this script)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("OLD", "NEW"))
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        parser.error("--out is required")
    import profstack

    print(f"profstack from {Path(profstack.__file__).parent}", file=sys.stderr)
    result = {"profstack": profstack.__version__, "cases": cases(args.samples, args.work, args.quick)}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
