"""The same comparison on traces replicated from several real traces: how much the ratios depend on the trace.

    python -m bench.sources                      # every source at 100 MB, .json and .json.gz, HTA included
    python -m bench.sources --sources trace_diff,cpu_shapes --formats json --tools profstack,msgspec

``bench.run`` measures one source (HTA's ns_resolution_trace) at 100 MB to 1 GB. The targets of the
performance issue are ratios to a typed msgspec decode and to HTA, and both depend on what a trace is made of:
a CPU op with ``record_shapes`` args costs the floor (which decodes every args dict) far more than ProfStack
(which skips the args it does not read), a flow event costs both alike and a GPU kernel costs ProfStack most.
So this runs the fast tools (interleaved, best of ``--repeat``) and both HTAs on each source, with the same
child process, pinning and caps as ``bench.run`` (its ``measure``), and writes ``bench/results/sources.json``
and the table between the ``bench-sources`` markers of bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.generate import EVENT_SEP, generate, load_source
from bench.run import (
    DATA_DIR,
    HTA_TOOLS,
    README,
    REPO_ROOT,
    Measurement,
    _cell,
    _fmt,
    _hta_cell,
    _ms_per_mb,
    _ratio,
    _rss,
    _speed,
    log,
    machine_info,
)

SAMPLES = REPO_ROOT / "samples" / "traces"
RESULTS = REPO_ROOT / "bench" / "results" / "sources.json"
START, END = "<!-- bench-sources:start -->", "<!-- bench-sources:end -->"

#: tag -> (source trace under samples/traces, what it is); samples/traces/README.md gives each file's origin
SOURCES: dict[str, tuple[str, str]] = {
    "ns_resolution": (
        "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
        "V100 training, no shapes; bench.run's source",
    ),
    "trace_diff": ("hta/trace_diff/test/test.json.gz", "GPU training, shapes, many flows"),
    "df_index_resolver": ("hta/df_index_resolver/df_index_resolver.json.gz", "GPU training, kernel-dense"),
    "nccl": ("hta/nccl_parser_config/nccl_data.json.gz", "GPU, NCCL collectives"),
    "amd_mi250": ("hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "ROCm 6.2, MI250"),
    "cpu_shapes": ("own/cpu_train_loop_rank0.pt.trace.json", "torch 2.x, CPU only, record_shapes"),
    "cpu_memory": (
        "own/cpu_train_loop_mem_stack_rank0.pt.trace.json.gz",
        "torch 2.x, CPU only, profile_memory + with_stack",
    ),
}
FAST = ("profstack", "msgspec")


def composition(path: Path) -> dict[str, Any]:
    """What one copy of the source is made of: events, bytes per event and the share of each kind."""
    src = load_source(path)
    import msgspec

    events = msgspec.json.decode(("[{" + "},{".join(src.events) + "}]").encode()) if src.events else []
    cats = Counter(str(e.get("cat", "")) if isinstance(e, dict) else "" for e in events)
    flows = sum(1 for e in events if isinstance(e, dict) and e.get("ph") in ("s", "f", "t"))
    n = max(len(events), 1)
    gpu = sum(v for k, v in cats.items() if k.lower() in ("kernel", "gpu_memcpy", "gpu_memset"))
    cpu = sum(v for k, v in cats.items() if k in ("cpu_op", "Operator"))
    return {
        "events": len(events),
        "bytes_per_event": round(sum(len(e.encode()) + len(EVENT_SEP) for e in src.events) / n),
        "gpu_ops_pct": round(100 * gpu / n, 1),
        "cpu_ops_pct": round(100 * cpu / n, 1),
        "flows_pct": round(100 * flows / n, 1),
    }


def ensure_trace(tag: str, size_mb: int) -> dict[str, Path]:
    source = SAMPLES / SOURCES[tag][0]
    folder = DATA_DIR / "sources" / f"{tag}-{size_mb}MB"
    paths = {"json": folder / "json" / "rank-0.pt.trace.json", "gz": folder / "gz" / "rank-0.pt.trace.json.gz"}
    stamp = folder / "generated.json"
    want = {"size_mb": size_mb, "source": str(source.relative_to(REPO_ROOT)), "source_bytes": source.stat().st_size}
    if not (stamp.exists() and json.loads(stamp.read_text()) == want and all(p.exists() for p in paths.values())):
        log(f"generating {size_mb} MB from {source.name}")
        generate(paths["json"], size_mb, source, gzip_copy=True)
        paths["gz"].parent.mkdir(parents=True, exist_ok=True)
        paths["json"].with_name(paths["json"].name + ".gz").replace(paths["gz"])
        stamp.write_text(json.dumps(want))
    return paths


def _hta_speed(m: Measurement | None) -> str:
    """HTA's MB/s, or why it has none (HTA raises on a trace without GPU ops, e.g. an IndexError)."""
    if m is not None and m.status == "failed":
        parts = m.detail.split(": ")
        return f"fails ({parts[1]})" if len(parts) > 2 else "fails"
    return _speed(m)


def _vs_hta(ps: Measurement | None, hta: Measurement | None) -> str:
    """Wall-clock ratio (the issue's measure) and, beside it, the CPU-time ratio (less moved by a shared machine)."""
    wall = _ratio(ps, hta)
    if hta is None or hta.status != "ok":
        return wall
    return f"{wall} ({_ratio(ps, hta, cpu=True)} CPU)"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| source | what it is | bytes/event | GPU ops / CPU ops / flows % | format | ProfStack MB/s | floor MB/s "
        "| ProfStack / floor (CPU time) | HTA 0.5.0 MB/s | HTA 0.6.1 MB/s | ProfStack / HTA 0.5.0 (wall; CPU) "
        "| ProfStack / HTA 0.6.1 (wall; CPU) | ProfStack CPU ms/MB | ProfStack peak RSS MB |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for row in rows:
        comp = row["composition"]
        by = {(m.tool, m.fmt): m for m in (Measurement(**r) for r in row["results"])}
        for fmt in ("json", "gz"):
            ps, floor = by.get(("profstack", fmt)), by.get(("msgspec", fmt))
            hta, hta6 = by.get(("hta", fmt)), by.get(("hta061", fmt))
            if ps is None and floor is None:
                continue
            cells = [
                row["tag"],
                SOURCES.get(row["tag"], ("", ""))[1],
                str(comp["bytes_per_event"]),
                f"{comp['gpu_ops_pct']:g} / {comp['cpu_ops_pct']:g} / {comp['flows_pct']:g}",
                ".json" if fmt == "json" else ".json.gz",
                _speed(ps),
                _speed(floor),
                _ratio(ps, floor, cpu=True),
                _hta_speed(hta),
                _hta_speed(hta6),
                _vs_hta(ps, hta),
                _vs_hta(ps, hta6),
                _fmt(_ms_per_mb(ps), ".2f"),
                _rss(ps),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write(rows: list[dict[str, Any]], info: dict[str, Any], size_mb: int) -> None:
    date = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"date": date, "machine": info, "size_mb": size_mb, "sources": rows}, indent=2))
    header = (
        f"Measured {date} on {info['cpu']} ({info['logical_cpus']} logical CPUs, load average "
        f"{info.get('load_average', ['?'])[0]} at the start), {size_mb} MB of uncompressed JSON per trace, one "
        "core per tool. Raw numbers: `bench/results/sources.json`."
    )
    block = f"{START}\n{header}\n\n{table(rows)}\n{END}"
    text = README.read_text()
    if START in text and END in text:
        pre, rest = text.split(START, 1)
        text = pre + block + rest.split(END, 1)[1]
    else:
        text += "\n" + block + "\n"
    README.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", default=",".join(SOURCES))
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--formats", default="json,gz")
    parser.add_argument("--tools", default="profstack,msgspec,hta,hta061")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hta-repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--hta-timeout", type=float, default=900)
    parser.add_argument("--mem-cap-gb", type=float, default=18)
    parser.add_argument("--merge", action="store_true", help="keep the cells of sources.json this run does not redo")
    parser.add_argument("--render", action="store_true", help="only rewrite the README table from sources.json")
    args = parser.parse_args(argv)
    if args.render:
        saved = json.loads(RESULTS.read_text())
        write(saved["sources"], saved["machine"], saved["size_mb"])
        return 0
    tags = [t for t in args.sources.split(",") if t]
    unknown = [t for t in tags if t not in SOURCES]
    if unknown:
        parser.error(f"unknown source(s) {', '.join(unknown)}; known: {', '.join(SOURCES)}")
    tools = [t for t in args.tools.split(",") if t]
    formats = [f for f in args.formats.split(",") if f]
    info = machine_info()
    rows: list[dict[str, Any]] = []
    earlier: dict[str, list[dict[str, Any]]] = {}
    if args.merge and RESULTS.exists():
        saved = json.loads(RESULTS.read_text())["sources"]
        rows = [r for r in saved if r["tag"] not in tags]
        earlier = {r["tag"]: r["results"] for r in saved if r["tag"] in tags}
    ok = True
    for tag in tags:
        started = time.perf_counter()
        paths = ensure_trace(tag, args.size_mb)
        json_bytes = paths["json"].stat().st_size
        results: list[Measurement] = []
        gave_up: dict[str, str] = {}
        for fmt in formats:
            fast = [t for t in FAST if t in tools]
            results += _cell(fast, paths[fmt], size=args.size_mb, fmt=fmt, json_bytes=json_bytes, args=args)
            for tool in (t for t in HTA_TOOLS if t in tools):
                results.append(
                    _hta_cell(
                        tool, paths[fmt], size=args.size_mb, fmt=fmt, json_bytes=json_bytes, args=args, gave_up=gave_up
                    )
                )
        ok = ok and all(m.status in ("ok", "timeout", "memory-cap", "skipped") for m in results)
        comp = composition(SAMPLES / SOURCES[tag][0])
        redone = {(m.tool, m.fmt) for m in results}
        kept = [r for r in earlier.get(tag, []) if (r["tool"], r["fmt"]) not in redone]  # --merge: other tools' cells
        rows.append({"tag": tag, "composition": comp, "results": kept + [asdict(m) for m in results]})
        rows.sort(key=lambda r: list(SOURCES).index(r["tag"]) if r["tag"] in SOURCES else len(SOURCES))
        write(rows, info, args.size_mb)
        log(f"{tag}: {time.perf_counter() - started:.0f} s")
    print(table(rows))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
