"""ProfStack vs HTA 0.5.0 and 0.6.1 vs a bare msgspec decode, on generated 100 MB / 500 MB / 1 GB traces.

    python -m bench.run                       # the full run (make bench)
    python -m bench.run --quick               # small sizes, fewer repeats (a few minutes)
    python -m bench.run --tools profstack,msgspec --formats json

ProfStack is measured with its default options, as every delivery form runs it (#44): ``profstack`` (this checkout,
what ``make install`` gives), ``profstack-wheel`` (the wheel ``pip wheel .`` builds, installed into
build/bench-wheel), ``profstack-lambda`` (the trace processor's Lambda bundle as ``cdk synth`` writes it,
stacks/components/python_function.write_bundle, in build/bench-lambda, run with ``python -I -S`` on the bundle alone)
and ``cli`` / ``processing`` (the ``profstack analyze`` command: ``--format json``, and the Processing job's
``--format json,perfetto``); a faster flag configuration (``profstack-no-op-types``) is measured beside them, never
instead. The delivery forms run at ``--delivery-sizes``; the record_shapes rows (``--shapes-sizes``) compare a real
trace recorded with record_shapes against the same events without the shape args (bench/generate.py --no-shapes).

Every measurement runs in a fresh child process pinned to CPU 0 with single-threaded math libraries (the
--jobs measurement: CPUs 0 and 1). Time is measured inside the child around the work (imports excluded), as
wall time and as the child's CPU time; peak RSS is the child's own VmHWM (imports included; os.wait4's
ru_maxrss for a child that did not finish). Throughput is MB (10^6 bytes) of uncompressed JSON per second, for
.json and .json.gz alike. The tools of one cell run interleaved (one run of each, then the next round), so a
change in the machine's load hits them alike. Children that exceed the time or memory cap are killed and
reported as not finished. HTA 0.5.0 and HTA 0.6.1 (`traceinsight`, which also imports as `hta`) each run from
a virtualenv of their own, build/bench-hta050 (requirements/bench.txt) and build/bench-hta061
(requirements/hta061.txt), created on first use."""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.generate import DEFAULT_SOURCE, EVENT_SEP, MB, SHAPES_SOURCE, generate, load_source

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
DATA_DIR = BENCH_DIR / "data"
RESULTS = BENCH_DIR / "results" / "latest.json"
README = BENCH_DIR / "README.md"
TABLE_START, TABLE_END = "<!-- bench-table:start -->", "<!-- bench-table:end -->"

REQUIREMENTS = REPO_ROOT / "requirements"
#: tool -> (its virtualenv, pinned requirements, constraints): both HTA releases are the `hta` package, so each
#: gets a venv of its own (and the project's .venv none of HTA's jupyterlab closure)
HTA_VENVS: dict[str, tuple[Path, Path, Path | None]] = {
    "hta": (REPO_ROOT / "build" / "bench-hta050", REQUIREMENTS / "bench.txt", REQUIREMENTS / "constraints.txt"),
    "hta061": (REPO_ROOT / "build" / "bench-hta061", REQUIREMENTS / "hta061.txt", None),
}
#: cheap tools, measured interleaved and best-of-N; HTA runs once per cell (minutes at 1 GB)
FAST_TOOLS = (
    "profstack",
    "profstack-no-op-types",
    "profstack-zlib",
    "decode",
    "inflate-isal",
    "inflate-zlib",
    "msgspec",
)
GZ_ONLY = frozenset({"profstack-zlib", "inflate-isal", "inflate-zlib"})
HTA_TOOLS = ("hta", "hta061")
PARALLEL_TOOLS = ("profstack-jobs1", "profstack-jobs2")
#: ProfStack as it is delivered (module docstring), each with its default options; measured at --delivery-sizes
DELIVERY_TOOLS = ("profstack-wheel", "profstack-lambda", "cli", "processing")
SHAPES_TOOLS = ("profstack", "msgspec")  # the record_shapes rows
FORMATS = ("json", "gz")  # the generated trace's two files; the --jobs and record_shapes rows have labels of their own
DEFAULT_TOOLS = (
    "profstack,profstack-no-op-types,profstack-zlib,profstack-heap,decode,inflate-isal,inflate-zlib,msgspec,hta,hta061,"
    + ",".join(DELIVERY_TOOLS)
)
WHEEL_DIR = REPO_ROOT / "build" / "bench-wheel"
LAMBDA_DIR = REPO_ROOT / "build" / "bench-lambda"
LAMBDA_HANDLER = "lambdas.trace_processor.handler"  # the function that runs the engine on one file

SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "POLARS_MAX_THREADS": "1",
    "PYTHONHASHSEED": "0",
}


@dataclass
class Measurement:
    tool: str
    size_mb: int
    fmt: str
    file: str
    json_bytes: int
    status: str  # ok | timeout | memory-cap | failed | skipped
    seconds: float | None = None
    wall_seconds: float | None = None
    mb_per_s: float | None = None
    peak_rss_mb: float | None = None
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def trace_paths(size_mb: int) -> dict[str, Path]:
    # HTA loads a directory, one trace per rank: give each file a directory of its own.
    name = "rank-0.pt.trace.json"
    return {
        "json": DATA_DIR / f"{size_mb}MB-json" / name,
        "gz": DATA_DIR / f"{size_mb}MB-gz" / f"{name}.gz",
    }


def ensure_traces(size_mb: int, source: Path) -> dict[str, Path]:
    paths = trace_paths(size_mb)
    stamp = paths["json"].with_name("generated.json")
    want = {"size_mb": size_mb, "source": str(source), "source_bytes": source.stat().st_size}
    fresh = stamp.exists() and json.loads(stamp.read_text()) == want
    if not (fresh and paths["json"].exists() and paths["gz"].exists()):
        log(f"generating {size_mb} MB trace from {source.name}")
        start = time.perf_counter()
        generate(paths["json"], size_mb, source, gzip_copy=True)
        paths["gz"].parent.mkdir(parents=True, exist_ok=True)
        paths["json"].with_name(paths["json"].name + ".gz").replace(paths["gz"])
        stamp.write_text(json.dumps(want))
        log(f"  done in {time.perf_counter() - start:.0f} s")
    return paths


def ensure_shapes_traces(size_mb: int) -> dict[str, Path]:
    """A real record_shapes trace (``SHAPES_SOURCE``) replicated to ``size_mb`` MB, and the same events without the
    shape args (bench/generate.py --no-shapes): {"shapes": ..., "noshapes": ...}."""
    folder = DATA_DIR / f"{size_mb}MB-shapes"
    paths = {"shapes": folder / "shapes.pt.trace.json", "noshapes": folder / "noshapes.pt.trace.json"}
    stamp = folder / "generated.json"
    want = {"size_mb": size_mb, "source": str(SHAPES_SOURCE), "source_bytes": SHAPES_SOURCE.stat().st_size}
    if stamp.exists() and json.loads(stamp.read_text()) == want and all(p.exists() for p in paths.values()):
        return paths
    log(f"generating {size_mb} MB record_shapes traces from {SHAPES_SOURCE.name}")
    generate(paths["shapes"], size_mb, SHAPES_SOURCE)
    events = paths["shapes"].read_bytes().count(EVENT_SEP.encode()) + 1 - len(load_source(SHAPES_SOURCE).metadata)
    generate(paths["noshapes"], size_mb, SHAPES_SOURCE, shapes=False, max_events=events)
    stamp.write_text(json.dumps(want))
    return paths


def _tree_hash(*roots: str) -> str:
    """A digest of the files under ``roots`` (relative to the repository) that a build of them depends on."""
    h = hashlib.sha256()
    for root in roots:
        base = REPO_ROOT / root
        files = sorted(base.rglob("*")) if base.is_dir() else [base]
        for f in files:
            if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".so", ".pyc"):
                h.update(str(f.relative_to(REPO_ROOT)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def ensure_wheel() -> Path:
    """The folder holding profstack as ``pip install`` of its wheel lays it out (C module built by setup.py)."""
    site = WHEEL_DIR / "site"
    stamp = WHEEL_DIR / ".sources-sha256"
    want = _tree_hash("profstack", "setup.py", "pyproject.toml")
    if site.is_dir() and stamp.exists() and stamp.read_text() == want:
        return site
    log("building the profstack wheel into build/bench-wheel (once per source change)")
    shutil.rmtree(WHEEL_DIR, ignore_errors=True)
    dist = WHEEL_DIR / "dist"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", ".", "--no-deps", "--no-build-isolation", "-w", str(dist)], cwd=REPO_ROOT, check=True
    )
    wheels = sorted(dist.glob("profstack-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheels[-1])], check=True)
    stamp.write_text(want)
    return site


def ensure_lambda_bundle() -> Path:
    """The trace processor's Lambda bundle, as ``cdk synth`` bundles it (its requirements for Lambda's platform,
    its code files and the built C module: stacks/components/python_function.write_bundle)."""
    stamp = LAMBDA_DIR / ".sources-sha256"
    want = _tree_hash("profstack", "lambdas", "requirements/runtime.txt", "stacks/components")
    if stamp.exists() and stamp.read_text() == want:
        return LAMBDA_DIR
    log("bundling the trace processor's Lambda into build/bench-lambda (once per source change)")
    from stacks.components import python_function as pf
    from stacks.components.bundle_plan import plan_bundle

    shutil.rmtree(LAMBDA_DIR, ignore_errors=True)
    pf.write_bundle(pf.with_engine(plan_bundle(LAMBDA_HANDLER)), LAMBDA_DIR)
    stamp.write_text(want)
    return LAMBDA_DIR


def _command(tool: str, path: Path) -> tuple[list[str], Path, dict[str, str]]:
    """(argv, working directory, environment) of the child that measures ``tool`` on ``path``."""
    env = {**os.environ, **SINGLE_THREAD_ENV, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PROFSTACK_INFLATE", None)
    if tool in HTA_VENVS:
        return [str(ensure_hta_venv(tool)), "-m", "bench.workers", "hta", str(path)], REPO_ROOT, env
    if tool == "profstack-wheel":  # the installed wheel first on sys.path (the working directory), bench after it
        return [sys.executable, "-m", "bench.workers", "profstack", str(path)], ensure_wheel(), env
    if tool == "profstack-lambda":  # the bundle alone, as Lambda's runtime sees it (no site-packages, no cwd)
        bundle, repo = str(ensure_lambda_bundle()), str(REPO_ROOT)
        boot = (
            f"import sys, runpy; sys.path[:0] = [{bundle!r}]; sys.path.append({repo!r}); "
            "sys.argv = ['bench.workers', *sys.argv[1:]]; runpy.run_module('bench.workers', run_name='__main__')"
        )
        return [sys.executable, "-I", "-S", "-B", "-c", boot, "profstack", str(path)], REPO_ROOT, env
    return [sys.executable, "-m", "bench.workers", tool, str(path)], REPO_ROOT, env


#: where each delivery form's child must have imported profstack from (checked: a wrong path fails the cell)
def _repo_relative(path: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(REPO_ROOT.resolve())) if resolved.is_relative_to(REPO_ROOT.resolve()) else path.name


def _expected_root(tool: str) -> Path | None:
    return {"profstack-wheel": WHEEL_DIR / "site", "profstack-lambda": LAMBDA_DIR, "profstack": REPO_ROOT}.get(tool)


def ensure_hta_venv(tool: str) -> Path:
    """The interpreter of the virtualenv that holds the HTA release `tool` measures (created on first use)."""
    venv, requirements, constraints = HTA_VENVS[tool]
    python = venv / "bin" / "python"
    stamp = venv / ".requirements-sha256"
    pins = requirements.read_bytes() + (constraints.read_bytes() if constraints else b"")
    want = hashlib.sha256(pins).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return python
    log(f"creating {venv.relative_to(REPO_ROOT)} from {requirements.relative_to(REPO_ROOT)} (a few minutes, once)")
    # the stamp is written last: an interrupted install is redone from scratch (--clear)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(requirements)]
    subprocess.run([*pip, *(["-c", str(constraints)] if constraints else [])], check=True)
    stamp.write_text(want)
    return python


def ensure_rank_traces(size_mb: int, source: Path, ranks: int = 2) -> Path:
    """A folder of `ranks` files of `size_mb` each: the .json trace with distributedInfo.rank = 0..ranks-1."""
    single = ensure_traces(size_mb, source)["json"]
    folder = DATA_DIR / f"{size_mb}MB-{ranks}ranks"
    stamp = folder / "generated.json"
    want = {"from": str(single), "bytes": single.stat().st_size, "ranks": ranks}
    if stamp.exists() and json.loads(stamp.read_text()) == want:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    head_len = 1 << 16
    old = b'"rank": 0, "world_size": 1'
    for rank in range(ranks):
        out = folder / f"rank-{rank}.pt.trace.json"
        with single.open("rb") as fin, out.open("wb") as fout:
            head = fin.read(head_len)
            if old not in head:
                raise RuntimeError(f"{single}: no distributedInfo {old!r} in its header")
            new = f'"rank": {rank}, "world_size": {ranks}'.encode()
            fout.write(head.replace(old, new, 1))
            while chunk := fin.read(1 << 22):
                fout.write(chunk)
    stamp.write_text(json.dumps(want))
    return folder


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _session_rss_bytes(sid: int) -> int:
    """Resident memory of every process in the child's session (HTA may fork workers)."""
    total = 0
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[3]) == sid:  # field 6 (session) counting from state
                total += int(fields[21]) * page  # field 24 (rss pages)
        except (OSError, ValueError, IndexError):
            continue
    return total


def measure(
    tool: str,
    path: Path,
    size_mb: int,
    fmt: str,
    *,
    json_bytes: int,
    args: argparse.Namespace,
    cpus: set[int] | None = None,
) -> Measurement:
    cap_s = args.hta_timeout if tool in HTA_TOOLS else args.timeout
    cap_bytes = int(args.mem_cap_gb * 1024**3)
    m = Measurement(tool, size_mb, fmt, str(path.relative_to(REPO_ROOT)), json_bytes, "failed")
    cmd, cwd, env = _command(tool, path)
    pinned = cpus if cpus is not None else {0}
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: os.sched_setaffinity(0, pinned),  # noqa: PLW1509 - set before exec
    )
    out_chunks: list[bytes] = []
    err_chunks: list[bytes] = []
    readers = [
        threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True),  # type: ignore[union-attr]
        threading.Thread(target=lambda: err_chunks.append(proc.stderr.read()), daemon=True),  # type: ignore[union-attr]
    ]
    for t in readers:
        t.start()
    killed = ""
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        elapsed = time.perf_counter() - start
        if elapsed > cap_s:
            killed = f"did not finish within {cap_s:.0f} s"
        elif _session_rss_bytes(proc.pid) > cap_bytes:
            killed = f"exceeded the {args.mem_cap_gb:g} GiB memory cap"
        if killed:
            os.killpg(proc.pid, signal.SIGKILL)
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join(timeout=5)
    m.wall_seconds = round(time.perf_counter() - start, 2)
    m.peak_rss_mb = round(usage.ru_maxrss / 1024, 1)  # Linux reports KiB
    if killed:
        m.status = "timeout" if "within" in killed else "memory-cap"
        m.detail = killed
        return m
    stdout = b"".join(out_chunks).decode(errors="replace")
    line = next((ln for ln in stdout.splitlines() if ln.startswith("BENCH-RESULT ")), None)
    if proc.returncode != 0 or line is None:
        tail = b"".join(err_chunks).decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        m.detail = f"exit {proc.returncode}: {tail[0][:300]}"
        return m
    return _read_result(m, json.loads(line.removeprefix("BENCH-RESULT ")))


def _read_result(m: Measurement, result: dict[str, Any]) -> Measurement:
    """``m`` completed from a child's BENCH-RESULT line (failed where its profstack came from the wrong place)."""
    tool, json_bytes = m.tool, m.json_bytes
    root, got = _expected_root(tool), result.get("profstack_file")
    if root is not None and got is not None and not Path(got).resolve().is_relative_to(root.resolve()):
        m.detail = f"profstack imported from {got}, not from {root}"
        return m
    if got is not None:  # kept relative to the checkout: a results file names no machine's paths
        result["profstack_file"] = _repo_relative(Path(got))
    hwm = result.pop("vm_hwm_mb", None)
    if hwm:  # the child's own peak; ru_maxrss also holds the parent's pages copied by the fork before exec
        result["ru_maxrss_mb"] = m.peak_rss_mb
        m.peak_rss_mb = round(hwm, 1)
    m.status = "ok"
    m.seconds = round(result.pop("seconds"), 3)
    m.mb_per_s = round(json_bytes / MB / m.seconds, 2)
    if result.get("cpu_seconds"):
        result["cpu_mb_per_s"] = round(json_bytes / MB / result["cpu_seconds"], 2)
    m.extra = result
    return m


def best_of(tries: list[Measurement]) -> Measurement:
    """Fastest successful run (the machine is shared: noise only ever slows a run down); peak RSS is the
    largest of all runs, since memory does not benefit from luck."""
    ok = [t for t in tries if t.status == "ok"]
    if not ok:
        return tries[-1]
    best = min(ok, key=lambda t: t.seconds or float("inf"))
    best.peak_rss_mb = max(t.peak_rss_mb or 0.0 for t in tries)
    best.extra = {**best.extra, "runs": len(tries), "all_mb_per_s": [t.mb_per_s for t in ok]}
    cpu = [t.extra["cpu_seconds"] for t in ok if t.extra.get("cpu_seconds")]
    if cpu:  # CPU time is far less disturbed by other jobs than wall time: its best is kept beside
        best.extra["best_cpu_seconds"] = round(min(cpu), 3)
        best.extra["cpu_mb_per_s"] = round(best.json_bytes / MB / min(cpu), 2)
    return best


def machine_info() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3

    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    return {
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "memory_gib": round(mem_gib, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "packages": {
            d: version(d) for d in ("profstack", "msgspec", "isal", "HolisticTraceAnalysis", "pandas", "numpy")
        },
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _speed(m: Measurement | None) -> str:
    if m is None:
        return "not run"
    if m.status != "ok":
        return m.detail or m.status
    return _fmt(m.mb_per_s, ".1f")


def _rss(m: Measurement | None) -> str:
    return "—" if m is None else _fmt(m.peak_rss_mb, ".0f")


def _ratio(a: Measurement | None, b: Measurement | None, *, cpu: bool = False) -> str:
    if a is None or b is None or a.mb_per_s is None:
        return "—"
    if b.mb_per_s is None:
        if b.status in ("timeout", "memory-cap") and b.wall_seconds:
            return f"> {a.mb_per_s * b.wall_seconds / (a.json_bytes / MB):.1f}× (unfinished)"
        return "—"
    if cpu:
        ca, cb = a.extra.get("cpu_mb_per_s"), b.extra.get("cpu_mb_per_s")
        return f"{ca / cb:.2f}×" if ca and cb else "—"
    return f"{a.mb_per_s / b.mb_per_s:.2f}×"


def _ms_per_mb(m: Measurement | None) -> float | None:
    """CPU milliseconds per uncompressed MB (wall where the child did not report CPU time)."""
    if m is None or m.status != "ok" or not m.seconds:
        return None
    seconds = m.extra.get("best_cpu_seconds") or m.seconds
    return 1000.0 * float(seconds) / (m.json_bytes / MB)


def markdown_table(results: list[Measurement]) -> str:
    index = {(m.tool, m.size_mb, m.fmt): m for m in results}
    keys = sorted({(m.size_mb, m.fmt) for m in results if m.fmt in FORMATS}, key=lambda k: (k[0], k[1] != "json"))
    rows = [
        "| trace | format | ProfStack MB/s | ProfStack, zlib inflate MB/s | msgspec floor MB/s | HTA 0.5.0 MB/s "
        "| HTA 0.6.1 MB/s | ProfStack / floor | ProfStack / floor (CPU time) | ProfStack / HTA 0.5.0 "
        "| ProfStack / HTA 0.6.1 | ProfStack peak RSS MB | ProfStack heap peak MB | floor peak RSS MB "
        "| HTA 0.5.0 / 0.6.1 peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, fmt in keys:
        ps, psz, heap, floor, hta, hta6 = (
            index.get((t, size, fmt)) for t in ("profstack", "profstack-zlib", "profstack-heap", "msgspec", *HTA_TOOLS)
        )
        any_m = ps or floor or hta or hta6
        actual = f"{any_m.json_bytes / MB:.0f} MB" if any_m else f"{size} MB"
        heap_mb = heap.extra.get("heap_peak_mb") if heap is not None and heap.status == "ok" else None
        cells = [actual, ".json" if fmt == "json" else ".json.gz", _speed(ps), _speed(psz) if fmt == "gz" else "—"]
        cells += [_speed(floor), _speed(hta), _speed(hta6)]
        cells += [_ratio(ps, floor), _ratio(ps, floor, cpu=True), _ratio(ps, hta), _ratio(ps, hta6)]
        cells += [_rss(ps), _fmt(heap_mb, ".1f"), _rss(floor), f"{_rss(hta)} / {_rss(hta6)}"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def breakdown_table(results: list[Measurement]) -> str:
    """CPU ms per uncompressed MB: inflate (zlib, ISA-L), ProfStack's read (read, cut, and the C reader with the
    per-event loop, or msgspec's typed decode without the C module) and the rest of the analysis."""
    index = {(m.tool, m.size_mb, m.fmt): m for m in results}
    keys = sorted({(m.size_mb, m.fmt) for m in results if m.fmt in FORMATS}, key=lambda k: (k[0], k[1] != "json"))
    rows = [
        "| trace | format | inflate, zlib | inflate, ISA-L | read + cut + decode and per-event loop (after inflate) "
        "| column work and analysis | ProfStack total | msgspec floor total |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size, fmt in keys:
        ps, dec, iz, ii, floor = (
            _ms_per_mb(index.get((t, size, fmt)))
            for t in ("profstack", "decode", "inflate-zlib", "inflate-isal", "msgspec")
        )
        inflate = ii if fmt == "gz" else 0.0
        decode = dec - inflate if dec is not None and inflate is not None else None
        analysis = ps - dec if ps is not None and dec is not None else None
        any_m = next(
            (index.get((t, size, fmt)) for t in ("profstack", "decode", "msgspec") if index.get((t, size, fmt))), None
        )
        actual = f"{any_m.json_bytes / MB:.0f} MB" if any_m else f"{size} MB"
        cells = [actual, ".json" if fmt == "json" else ".json.gz"]
        cells += [_fmt(iz, ".2f") if fmt == "gz" else "—", _fmt(ii, ".2f") if fmt == "gz" else "—"]
        cells += [_fmt(decode, ".2f"), _fmt(analysis, ".2f"), _fmt(ps, ".2f"), _fmt(floor, ".2f")]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def delivery_table(results: list[Measurement]) -> str:
    """ProfStack as each delivery form runs it, default options, beside a faster flag configuration and the floor."""
    index = {(m.tool, m.size_mb, m.fmt): m for m in results}
    forms = ("profstack", "profstack-no-op-types", "profstack-wheel", "profstack-lambda", "cli", "processing")
    keys = sorted(
        {(m.size_mb, m.fmt) for m in results if m.fmt in FORMATS and m.tool in forms[2:]},
        key=lambda k: (k[0], k[1] != "json"),
    )
    rows = [
        "| trace | format | checkout MB/s | `--no-op-types` MB/s | wheel MB/s | Lambda bundle MB/s "
        "| `profstack analyze --format json` MB/s | Processing command (`json,perfetto`) MB/s | floor MB/s "
        "| checkout / floor (CPU) | wheel / floor (CPU) | Lambda / floor (CPU) | `analyze` command / floor (CPU) "
        "| the command's imports s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, fmt in keys:
        ms = [index.get((t, size, fmt)) for t in forms]
        floor = index.get(("msgspec", size, fmt))
        actual = next((f"{m.json_bytes / MB:.0f} MB" for m in [*ms, floor] if m is not None), f"{size} MB")
        cells = [actual, ".json" if fmt == "json" else ".json.gz", *(_speed(m) for m in ms), _speed(floor)]
        cells += [_ratio(ms[i], floor, cpu=True) for i in (0, 2, 3, 4)]
        cli = ms[4]
        cells.append(_fmt(cli.extra.get("import_seconds") if cli is not None else None, ".2f"))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def shapes_table(results: list[Measurement]) -> str:
    """What record_shapes costs: the same events with and without the shape args (CPU time, best of the rounds)."""
    index = {(m.tool, m.size_mb, m.fmt): m for m in results}
    rows = [
        "| trace | with record_shapes: MB, ProfStack CPU s | without: MB, ProfStack CPU s "
        "| with / without (same events) | floor CPU s, with / without | ProfStack / floor (CPU), with / without |",
        "|---|---|---|---|---|---|",
    ]

    def cpu(m: Measurement | None) -> float | None:
        return m.extra.get("best_cpu_seconds") if m is not None and m.status == "ok" else None

    for size in sorted({m.size_mb for m in results if m.fmt == "shapes"}):
        ps, pn = index.get(("profstack", size, "shapes")), index.get(("profstack", size, "noshapes"))
        fs, fn = index.get(("msgspec", size, "shapes")), index.get(("msgspec", size, "noshapes"))
        cs, cn, cfs, cfn = cpu(ps), cpu(pn), cpu(fs), cpu(fn)
        mb_s, mb_n = (f"{m.json_bytes / MB:.0f}" if m else "—" for m in (ps, pn))
        rows.append(
            f"| {size} MB ({SHAPES_SOURCE.name}) | {mb_s} MB, {_fmt(cs, '.3f')} | {mb_n} MB, {_fmt(cn, '.3f')} "
            f"| {_fmt(cs / cn if cs and cn else None, '.2f')}× | {_fmt(cfs, '.3f')} / {_fmt(cfn, '.3f')} "
            f"| {_ratio(ps, fs, cpu=True)} / {_ratio(pn, fn, cpu=True)} |"
        )
    return "\n".join(rows)


def _round_seconds(m: Measurement | None) -> list[float]:
    """The wall time of each of a cell's rounds (from ``all_mb_per_s``)."""
    if m is None:
        return []
    return [m.json_bytes / MB / v for v in (m.extra.get("all_mb_per_s") or []) if v]


def parallel_table(results: list[Measurement]) -> str:
    """The --jobs rows: the best round's ratio (as every other cell) and, beside it, the ratio of the
    medians over the interleaved rounds: on a noisy machine one lucky serial round moves the best ratio by
    0.1 or more (12-02: 0.73x best, 0.56x median, same run), the medians much less."""
    index = {(m.tool, m.size_mb): m for m in results if m.fmt == "2ranks"}
    rows = [
        "| job | --jobs 1 s | --jobs 2 s | --jobs 2 / --jobs 1 | same ratio, medians of the rounds (rounds) "
        "| same summary | peak RSS MB (jobs 1 / jobs 2 parent) |",
        "|---|---|---|---|---|---|---|",
    ]
    for size in sorted({k[1] for k in index}):
        one, two = index.get(("profstack-jobs1", size)), index.get(("profstack-jobs2", size))
        ratio = f"{two.seconds / one.seconds:.2f}×" if one and two and one.seconds and two.seconds else "—"
        r1, r2 = _round_seconds(one), _round_seconds(two)
        median = f"{statistics.median(r2) / statistics.median(r1):.2f}× ({min(len(r1), len(r2))})" if r1 and r2 else "—"
        same = "—"
        if one and two and one.extra.get("summary_sha") and two.extra.get("summary_sha"):
            same = "yes" if one.extra["summary_sha"] == two.extra["summary_sha"] else "**no**"
        cells = [
            f"2 ranks × {size} MB .json",
            _fmt(one.seconds if one else None, ".2f"),
            _fmt(two.seconds if two else None, ".2f"),
            ratio,
            median,
            same,
            f"{_rss(one)} / {_rss(two)}",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def write_outputs(
    results: list[Measurement], info: dict[str, Any], args: argparse.Namespace, date: str | None = None
) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "date": date or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": info,
        "method": {
            "source_trace": str(Path(args.source).name),
            "single_core": "child pinned to CPU 0 (sched_setaffinity), OMP/BLAS threads = 1; --jobs rows: CPUs 0-1",
            "time": "inside the child, around the work; interpreter start-up and imports excluded; wall and CPU",
            "repeats": f"best of {args.repeat} (interleaved) / {args.hta_repeat} (HTA); peak RSS = max",
            "peak_rss": "the child's VmHWM (/proc/self/status, imports included); ru_maxrss from os.wait4 where the "
            "child did not finish",
            "heap_peak": "profstack-heap: tracemalloc peak of one separate, untimed ProfStack run",
            "throughput": "uncompressed JSON MB (10^6 B) / seconds, for .json and .json.gz alike",
            "caps": {
                "hta_timeout_s": args.hta_timeout,
                "timeout_s": args.timeout,
                "memory_cap_gib": args.mem_cap_gb,
            },
        },
        "results": [asdict(m) for m in results],
    }
    tmp = RESULTS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    tmp.replace(RESULTS)
    pk = info["packages"]
    htas = sorted({v for m in results if m.tool in HTA_TOOLS for v in (m.extra.get("versions") or {}).values()})
    header = (
        f"Measured {payload['date']} on {info['cpu']} ({info['logical_cpus']} logical CPUs, "
        f"{info['memory_gib']} GiB RAM, load average {info.get('load_average', ['?'])[0]} at the start), "
        f"Python {info['python']}, msgspec {pk['msgspec']}, isal {pk.get('isal', '?')}, "
        f"HTA {' and '.join(htas) or 'not run'} (0.6.1 is PyPI's `traceinsight`, in its own venv). "
        "Raw numbers: `bench/results/latest.json`."
    )
    block = (
        f"{TABLE_START}\n{header}\n\n{markdown_table(results)}\n\n"
        f"CPU milliseconds per uncompressed MB (best of the runs):\n\n{breakdown_table(results)}\n\n"
        f"Every delivery form with its default options, a faster flag configuration beside (one core):\n\n"
        f"{delivery_table(results)}\n\n"
        f"What `record_shapes` costs (one core, the same events with and without the shape args):\n\n"
        f"{shapes_table(results)}\n\n"
        f"`profstack analyze --jobs`, wall time on CPUs 0-1:\n\n{parallel_table(results)}\n{TABLE_END}"
    )
    text = README.read_text() if README.exists() else f"# Benchmarks\n\n{TABLE_START}\n{TABLE_END}\n"
    if TABLE_START in text and TABLE_END in text:
        pre, rest = text.split(TABLE_START, 1)
        post = rest.split(TABLE_END, 1)[1]
        text = pre + block + post
    else:
        text += "\n" + block + "\n"
    README.write_text(text)


def _cell(
    tools: list[str],
    path: Path,
    *,
    size: int,
    fmt: str,
    json_bytes: int,
    args: argparse.Namespace,
    cpus: set[int] | None = None,
) -> list[Measurement]:
    """The fast tools of one cell, interleaved: round r runs each tool once, so load changes hit all alike."""
    tries: dict[str, list[Measurement]] = {t: [] for t in tools}
    for r in range(max(args.repeat, 1)):
        for tool in tools:
            if tries[tool] and tries[tool][-1].status != "ok":
                continue
            log(f"{tool:16s} {size:5d} MB {fmt:7s} run {r + 1}/{args.repeat} ...")
            tries[tool].append(measure(tool, path, size, fmt, json_bytes=json_bytes, args=args, cpus=cpus))
    out = []
    for tool in tools:
        m = best_of(tries[tool])
        log(
            f"  {tool}: {m.status}: {_fmt(m.mb_per_s, '.1f')} MB/s (CPU {_fmt(m.extra.get('cpu_mb_per_s'), '.1f')}), "
            f"peak RSS {_fmt(m.peak_rss_mb, '.0f')} MB {m.detail}"
        )
        out.append(m)
    return out


def _hta_cell(
    tool: str, path: Path, *, size: int, fmt: str, json_bytes: int, args: argparse.Namespace, gave_up: dict[str, str]
) -> Measurement:
    """One HTA cell (best of --hta-repeat); once HTA fails a size, larger sizes are not attempted."""
    if tool in gave_up:
        m = Measurement(tool, size, fmt, str(path.relative_to(REPO_ROOT)), json_bytes, "skipped")
        m.detail = f"not attempted: {gave_up[tool]}"
        return m
    log(f"{tool:16s} {size:5d} MB {fmt} ...")
    tries = []
    for _ in range(max(args.hta_repeat, 1)):
        tries.append(measure(tool, path, size, fmt, json_bytes=json_bytes, args=args))
        if tries[-1].status != "ok":
            break
    m = best_of(tries)
    log(f"  {m.status}: {_fmt(m.mb_per_s, '.1f')} MB/s, peak RSS {_fmt(m.peak_rss_mb, '.0f')} MB {m.detail}")
    if m.status in ("timeout", "memory-cap"):
        gave_up[tool] = f"{tool} {m.detail} at {size} MB"
    return m


def _kept(
    args: argparse.Namespace,
    tools: list[str],
    sizes: list[int],
    formats: list[str],
    par_sizes: list[int],
    *,
    shapes_sizes: list[int] = [],  # noqa: B006 - read only
) -> list[Measurement]:
    """With --merge: earlier cells of latest.json that this run does not re-measure (e.g. re-running HTA alone)."""
    if not (args.merge and RESULTS.exists()):
        return []
    redo = {(t, sz, f) for t in tools for sz in sizes for f in formats}
    redo |= {(t, sz, "2ranks") for t in PARALLEL_TOOLS for sz in par_sizes}
    redo |= {(t, sz, f) for t in SHAPES_TOOLS for sz in shapes_sizes for f in ("shapes", "noshapes")}
    rows = (Measurement(**row) for row in json.loads(RESULTS.read_text()).get("results", []))
    return [m for m in rows if (m.tool, m.size_mb, m.fmt) not in redo]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,500,1000", help="comma-separated MB, e.g. 100,500,1000")
    parser.add_argument("--formats", default="json,gz")
    parser.add_argument("--tools", default=DEFAULT_TOOLS)
    parser.add_argument(
        "--parallel-sizes", default="100", help="MB per rank of the 2-rank --jobs measurement ('' = none)"
    )
    parser.add_argument("--delivery-sizes", default="100", help="sizes (MB) at which the delivery forms run")
    parser.add_argument("--shapes-sizes", default="100", help="MB of the record_shapes rows ('' = none)")
    parser.add_argument("--quick", action="store_true", help="sizes 50 (and --jobs at 50 MB per rank), 2 repeats")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--timeout", type=float, default=1800, help="cap for ProfStack and msgspec (s)")
    parser.add_argument("--hta-timeout", type=float, default=900, help="cap for one HTA run (s)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds per cell (best kept)")
    parser.add_argument("--hta-repeat", type=int, default=1, help="runs per HTA cell (best kept)")
    parser.add_argument("--merge", action="store_true", help="keep cells of latest.json this run does not redo")
    parser.add_argument("--mem-cap-gb", type=float, default=18, help="kill a child above this RSS (GiB)")
    parser.add_argument("--render", action="store_true", help="only rewrite the README table from latest.json")
    return parser


def _ints(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s]


class _Run:
    """One bench run: what it measures, and the results so far (written out after each cell)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tools = [t for t in args.tools.split(",") if t]
        self.formats = [f for f in args.formats.split(",") if f]
        self.sizes, self.par_sizes = _ints(args.sizes), _ints(args.parallel_sizes)
        self.delivery_sizes, self.shapes_sizes = set(_ints(args.delivery_sizes)), _ints(args.shapes_sizes)
        self.info = machine_info()
        self.results: list[Measurement] = []
        self.kept = _kept(args, self.tools, self.sizes, self.formats, self.par_sizes, shapes_sizes=self.shapes_sizes)
        self.gave_up: dict[str, str] = {}

    def save(self) -> None:
        write_outputs(self.kept + self.results, self.info, self.args)

    def size(self, size: int) -> None:
        """The generated trace of ``size`` MB, each format: the fast tools interleaved (the delivery forms too at
        the delivery sizes), the heap peak, HTA."""
        args, tools = self.args, self.tools
        paths = ensure_traces(size, args.source)
        json_bytes = paths["json"].stat().st_size
        for fmt in self.formats:
            fast = [t for t in FAST_TOOLS if t in tools and (fmt == "gz" or t not in GZ_ONLY)]
            if size in self.delivery_sizes:  # interleaved with the checkout and the floor: ratios of one run
                fast += [t for t in DELIVERY_TOOLS if t in tools]
            self.results.extend(_cell(fast, paths[fmt], size=size, fmt=fmt, json_bytes=json_bytes, args=args))
            self.save()  # keep partial results if interrupted
            if "profstack-heap" in tools:
                log(f"profstack-heap   {size:5d} MB {fmt} ...")
                self.results.append(measure("profstack-heap", paths[fmt], size, fmt, json_bytes=json_bytes, args=args))
            for tool in (t for t in HTA_TOOLS if t in tools):
                cell = _hta_cell(
                    tool, paths[fmt], size=size, fmt=fmt, json_bytes=json_bytes, args=args, gave_up=self.gave_up
                )
                self.results.append(cell)
                self.save()

    def shapes(self, size: int) -> None:
        """The record_shapes rows: ProfStack and the floor on both files, interleaved round by round."""
        shapes = ensure_shapes_traces(size)
        tries: dict[tuple[str, str], list[Measurement]] = {}
        for r in range(max(self.args.repeat, 1)):
            for label, path in shapes.items():
                for tool in SHAPES_TOOLS:
                    log(f"{tool:16s} {size:5d} MB {label:8s} run {r + 1}/{self.args.repeat} ...")
                    m = measure(tool, path, size, label, json_bytes=path.stat().st_size, args=self.args)
                    tries.setdefault((tool, label), []).append(m)
        self.results.extend(best_of(t) for t in tries.values())
        self.save()

    def parallel(self, size: int) -> None:
        folder = ensure_rank_traces(size, self.args.source)
        json_bytes = sum(p.stat().st_size for p in folder.glob("rank-*.json"))
        tools = list(PARALLEL_TOOLS)
        self.results.extend(
            _cell(tools, folder, size=size, fmt="2ranks", json_bytes=json_bytes, args=self.args, cpus={0, 1})
        )
        self.save()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.render:
        saved = json.loads(RESULTS.read_text())
        rows = [Measurement(**row) for row in saved["results"]]
        write_outputs(rows, saved["machine"], args, saved["date"])
        print(markdown_table(rows))
        return 0
    if args.quick:
        args.sizes, args.parallel_sizes, args.repeat = "50", "50", min(args.repeat, 2)
        args.delivery_sizes, args.shapes_sizes = "50", "50"
    run = _Run(args)
    for size in run.sizes:
        run.size(size)
    for size in run.shapes_sizes:
        run.shapes(size)
    for size in run.par_sizes:
        run.parallel(size)
    run.save()
    everything = run.kept + run.results
    for table in (markdown_table, breakdown_table, delivery_table, shapes_table, parallel_table):
        print(table(everything))
        print()
    return 0 if all(m.status in ("ok", "timeout", "memory-cap", "skipped") for m in run.results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
