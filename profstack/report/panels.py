"""Report panels over time and for memory, timelines, CUDA graphs and communication (summary schema 1.2).

Like html.py these only format: every number comes from the summary, and a missing section (an older
summary) leaves its panel out or says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from profstack.analysis.memory import is_accelerator
from profstack.analysis.perfetto_plan import perfetto_plan
from profstack.report.format import count, dur, dur_tick, esc, get, nbytes, num, pct, short_kernel_name
from profstack.report.style import COLORS
from profstack.report.svg import Series, columns, heat_row, strip, time_chart

STRIP_MAX_STEPS = 10  # fewer steps than this: a dot per step with its value instead of a histogram


def _card(title: str, body: str, *, full: bool = False, hint: str = "", cls: str = "") -> str:
    h = f"<h3>{esc(title)}{f' <span class=muted>· {esc(hint)}</span>' if hint else ''}</h3>"
    return f'<div class="card{" full" if full else ""}{" " + cls if cls else ""}">{h}{body}</div>'


def _legend(items: Sequence[tuple[str, str, str]]) -> str:
    return (
        '<div class="legend">'
        + "".join(f'<span><i style="background:{c}"></i>{esc(lab)} <b>{esc(v)}</b></span>' for c, lab, v in items)
        + "</div>"
    )


def _floats(values: object) -> list[float]:
    return [num(v) or 0.0 for v in values] if isinstance(values, list) else []


def _ticks(start: float, bin_us: float, n: int, parts: int = 5) -> list[tuple[float, str]]:
    """Time since the window start at a few evenly spaced positions."""
    total = bin_us * n
    return [(i / parts, dur_tick(total * i / parts) if i else "0") for i in range(parts + 1)]


def _bin_hint(tl: Mapping[str, Any], i: int, text: str) -> str:
    b = num(get(tl, "bin_us")) or 0.0
    return f"{dur(b * i)} – {dur(b * (i + 1))}: {text}"


# ------------------------------------------------------------------------------------------ over time


def panel_gpu_over_time(rank: Mapping[str, Any]) -> str:
    tl = get(rank, "timeline")
    if not isinstance(tl, Mapping):
        return ""
    busy = _floats(get(tl, "gpu_busy_pct"))
    if not busy or not any(busy):
        return ""
    comp = _floats(get(tl, "computation_pct"))
    comm = _floats(get(tl, "communication_pct"))
    mem = _floats(get(tl, "memory_pct"))
    n = len(busy)
    series = [
        Series("GPU busy (any kernel, memcpy or memset)", busy, COLORS["idle"], fill=True),
        Series("computation kernels", comp, COLORS["COMPUTATION"]),
    ]
    if any(comm):
        series.append(Series("communication kernels", comm, COLORS["COMMUNICATION"]))
    if any(mem):
        series.append(Series("memcpy / memset", mem, COLORS["MEMORY"]))

    def hint(i: int) -> str:
        text = f"busy {busy[i]:.0f}%, computation {comp[i]:.0f}%"
        if any(comm):
            text += f", communication {comm[i]:.0f}%"
        return _bin_hint(tl, i, text)

    chart = time_chart(
        series,
        x_ticks=_ticks(0.0, num(get(tl, "bin_us")) or 0.0, n),
        y_max=100.0,
        y_label=lambda v: "100% of the bin",
        hint=hint,
        label=f"Rank {get(rank, 'label')}: GPU utilisation over time",
        x_title="time since the start of the analysed window",
    )
    legend = _legend(
        [(COLORS["idle"], "busy (any GPU op)", f"mean {sum(busy) / n:.1f}%")]
        + [(COLORS["COMPUTATION"], "computation", f"mean {sum(comp) / n:.1f}%")]
        + ([(COLORS["COMMUNICATION"], "communication", f"mean {sum(comm) / n:.1f}%")] if any(comm) else [])
        + ([(COLORS["MEMORY"], "memcpy / memset", f"mean {sum(mem) / n:.1f}%")] if any(mem) else [])
    )
    hint_txt = f"{n} bins of {dur(get(tl, 'bin_us'))} over the analysed window"
    return _card("GPU utilisation over time", chart + legend, full=True, hint=hint_txt, cls="p-gpu-time")


def panel_cpu_over_time(rank: Mapping[str, Any]) -> str:
    tl = get(rank, "timeline")
    if not isinstance(tl, Mapping):
        return ""
    ops = _floats(get(tl, "cpu_ops_per_ms"))
    launches = _floats(get(tl, "launches_per_ms"))
    launch_t = _floats(get(tl, "launch_time_pct"))
    dl = _floats(get(tl, "dataloader_pct"))
    sync = _floats(get(tl, "sync_pct"))
    if not any(ops) and not any(launches) and not any(dl) and not any(sync):
        return ""
    n = max(len(ops), len(launches), 1)
    ticks = _ticks(0.0, num(get(tl, "bin_us")) or 0.0, n)
    body = ""
    rates = [Series("CPU operators started per ms", ops, COLORS["cpu_ops"], fill=True)] if any(ops) else []
    if any(launches):
        rates.append(Series("kernel launches per ms", launches, COLORS["launches"]))

    def rate_hint(i: int) -> str:
        text = f"{ops[i] if i < len(ops) else 0:,.1f} ops/ms"
        if any(launches) and i < len(launches):
            text += f", {launches[i]:,.1f} launches/ms"
        return _bin_hint(tl, i, text)

    if rates:
        body += '<h3 style="margin-top:2px">Operators and launches per ms</h3>' + time_chart(
            rates,
            x_ticks=ticks,
            y_label=lambda v: f"{v:,.0f} per ms",
            hint=rate_hint,
            height=100,
            label=f"Rank {get(rank, 'label')}: CPU operators and kernel launches per ms",
            x_title="time since the start of the analysed window",
        )
        body += _legend(
            ([(COLORS["cpu_ops"], "CPU ops started", f"peak {max(ops):,.0f}/ms")] if any(ops) else [])
            + ([(COLORS["launches"], "kernel launches", f"peak {max(launches):,.0f}/ms")] if any(launches) else [])
        )
    shares = [
        Series(lab, vals, color)
        for lab, vals, color in (
            ("host time in launch calls", launch_t, COLORS["launches"]),
            ("DataLoader", dl, COLORS["dataloader"]),
            ("host synchronisation", sync, COLORS["sync"]),
        )
        if any(vals)
    ]
    if shares:
        body += '<h3 style="margin-top:12px">Share of each bin</h3>' + time_chart(
            shares,
            x_ticks=ticks,
            y_max=100.0,
            y_label=lambda v: "100% of the bin",
            height=90,
            label=f"Rank {get(rank, 'label')}: share of each time bin on the host",
            x_title="time since the start of the analysed window",
        )
        body += _legend([(s.color, s.label, f"mean {sum(s.values) / max(len(s.values), 1):.1f}%") for s in shares])
    hint = "same bins as the GPU chart" if get(rank, "has_gpu") else "over the analysed window"
    return _card("CPU-side activity over time", body, full=True, hint=hint, cls="p-cpu-time")


def utilisation_overview(ranks: Sequence[Mapping[str, Any]]) -> str:
    """One heat row per rank: GPU busy share over time, so ranks that idle together stand out."""
    rows = []
    for r in ranks:
        tl = get(r, "timeline")
        busy = _floats(get(tl, "gpu_busy_pct"))
        if not busy or not any(busy):
            continue
        label = get(r, "label") or get(r, "rank")
        tl_map: Mapping[str, Any] = tl if isinstance(tl, Mapping) else {}

        def heat_hint(i: int, b: list[float] = busy, t: Mapping[str, Any] = tl_map, lab: object = label) -> str:
            return _bin_hint(t, i, f"rank {lab}: GPU busy {b[i]:.0f}%")

        rows.append(
            f"<span>rank {esc(label)}</span>"
            + heat_row(busy, color=COLORS["compute"], hint=heat_hint, label=f"Rank {label}: GPU busy share over time")
        )
    if not rows:
        return ""
    axis = (
        '<span></span><div class="strip-axis"><span>start of the analysed window</span>'
        "<span>time →</span><span>end</span></div>"
    )
    return (
        '<h2 id="utilisation">GPU utilisation over time <span class="hint">busy share per time bin, darker = busier; '
        "each rank over its own analysed window</span></h2>"
        f'<div class="card p-util-ranks"><div class="heatrows">{"".join(rows)}{axis}</div></div>'
    )


# ------------------------------------------------------------------------------------------ steps


def step_strip(rank: Mapping[str, Any]) -> str:
    """For fewer than STRIP_MAX_STEPS steps: each step's duration as a labelled dot (a histogram of two or
    three values says nothing)."""
    st = get(rank, "steps")
    durations = [d for d in (get(st, "durations") or []) if isinstance(d, Mapping)]
    if not durations or len(durations) >= STRIP_MAX_STEPS:
        return ""
    outliers = {get(o, "step") for o in (get(st, "outliers") or [])}
    vals = [num(get(d, "duration_us")) or 0.0 for d in durations]
    labels = [f"#{get(d, 'step')}" for d in durations]
    colors = [COLORS["outlier"] if get(d, "step") in outliers else COLORS["bar"] for d in durations]
    return '<h3 style="margin-top:10px">Each step</h3>' + strip(vals, labels, fmt=dur, colors=colors)


# ------------------------------------------------------------------------------------------ annotations


#: an annotation needs this many occurrences for its histogram to say something
MIN_HIST_COUNT = 10


def annotation_histograms(items: Sequence[Mapping[str, Any]], limit: int = 8) -> str:
    """The duration histogram of each of the longest-running annotations seen at least MIN_HIST_COUNT
    times (equal-width bins); rarer ones show their durations' range in the table instead."""
    blocks = []
    for a in [a for a in items if (num(get(a, "count")) or 0) >= MIN_HIST_COUNT][:limit]:
        hist = get(a, "durations_histogram")
        counts_ = [int(num(c) or 0) for c in (get(hist, "counts") or [])]
        edges = _floats(get(hist, "edges_us"))
        if not counts_ or len(edges) != len(counts_) + 1:
            continue
        name = str(get(a, "name") or "")
        labels = [f"{dur(edges[i])} – {dur(edges[i + 1])}" for i in range(len(counts_))]
        chart = columns(
            [float(c) for c in counts_],
            labels,
            colors=[COLORS["bar"]] * len(counts_),
            hints=[f"{labels[i]}: {counts_[i]:,}" for i in range(len(counts_))],
            height=70,
            ticks=[dur_tick(edges[0]), *([""] * (len(edges) - 2)), dur_tick(edges[-1])],
            label=f"{name}: occurrences by duration",
            y_label=lambda v: f"{v:,.0f} ×",
        )
        blocks.append(
            f'<div><span class="k" title="{esc(name)}">{esc(name)}</span>'
            f'<span class="muted" style="font-size:11px">{count(get(a, "count"))} × · mean {dur(get(a, "mean_us"))}'
            f"</span>{chart}</div>"
        )
    if not blocks:
        return ""
    return '<h3 style="margin-top:12px">Duration histograms</h3><div class="minihist">' + "".join(blocks) + "</div>"


# ------------------------------------------------------------------------------------------ timelines


def timelines_section(summary: Mapping[str, Any]) -> str:
    """Links to the trimmed timelines, and one line on how to open them."""
    listed = get(summary, "timelines")
    howto = (
        '<p class="howto">Open <b>ui.perfetto.dev</b> in a browser '
        "and drag a <code>.trace.json.gz</code> file onto the page (it stays on your machine). HolisticTraceAnalysis "
        "reads the same files.</p>"
    )
    if isinstance(listed, list):
        if not listed:
            return (
                '<h2 id="timelines">Timelines</h2><div class="card p-timelines"><p class="empty">'
                "No timeline files were written "
                "with this report (<code>profstack analyze --format perfetto</code> writes them).</p></div>"
            )
        rows = []
        for t in listed:
            if not isinstance(t, Mapping):
                continue
            f = str(get(t, "file") or "")
            dropped = get(t, "dropped") or {}
            drop_txt = (
                ", ".join(f"{count(v)} {esc(k)}" for k, v in dropped.items()) if isinstance(dropped, Mapping) else ""
            )
            steps = get(t, "steps") or []
            which = esc(get(t, "window")) + (": steps " + esc(", ".join(f"#{s}" for s in steps)) if steps else "")
            rows.append(
                f'<tr><td><a href="{esc(f)}" download>{esc(f)}</a></td><td>{esc(get(t, "rank"))}</td>'
                f"<td>{which}</td>"
                f'<td class="n">{count(get(t, "events"))}</td><td>{drop_txt or "—"}</td></tr>'
            )
        table = (
            '<table><thead><tr><th>File</th><th>Rank</th><th>Window</th><th class="n">Events</th>'
            f"<th>Dropped by the cap</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
        return f'<h2 id="timelines">Timelines</h2><div class="card p-timelines">{table}{howto}</div>'
    plan = perfetto_plan(
        {
            "inputs": [i for i in (get(summary, "inputs") or []) if isinstance(i, Mapping)],
            "ranks": [r for r in (get(summary, "ranks") or []) if isinstance(r, Mapping)],
        }
    )
    if not plan.outputs:
        return ""
    links = "".join(
        f'<li><a href="perfetto/{esc(o.file_name)}" download>perfetto/{esc(o.file_name)}</a> '
        f'<span class="muted">rank {esc(o.rank)}</span></li>'
        for o in plan.outputs
    )
    return (
        '<h2 id="timelines">Timelines</h2><div class="card p-timelines">'
        "<p>Trimmed timelines are written next to this report "
        "(a representative window of steps):</p>"
        f'<ul style="margin:4px 0 0 0;padding-left:18px">{links}</ul>{howto}</div>'
    )


# ------------------------------------------------------------------------------------------ CUDA graphs


def panel_cuda_graphs(rank: Mapping[str, Any]) -> str:
    cg = get(rank, "cuda_graphs")
    if not isinstance(cg, Mapping) or not num(get(cg, "graph_launches")):
        return ""
    apis = ", ".join(str(a) for a in (get(cg, "launch_apis") or [])) or "a graph launch"
    stats = (
        '<div class="stat-row">'
        f"<div>graph launches<b>{count(get(cg, 'graph_launches'))}</b></div>"
        f"<div>distinct graphs<b>{count(get(cg, 'distinct_graphs'))}</b></div>"
        f"<div>kernels in graphs<b>{count(get(cg, 'kernels'))}</b></div>"
        f"<div>GPU time<b>{dur(get(cg, 'gpu_time_us'))}</b></div></div>"
    )
    rows = "".join(
        f"<tr><td style='white-space:nowrap'>{esc(get(g, 'graph'))}</td>"
        f'<td class="name"><span class="k" title="{esc(get(g, "first_kernel"))}">'
        f"{esc(short_kernel_name(str(get(g, 'first_kernel') or '—')))}</span></td>"
        f'<td class="n">{count(get(g, "launches"))}</td><td class="n">{count(get(g, "kernels_per_launch"))}</td>'
        f'<td class="n">{dur(get(g, "mean_launch_us"))}</td><td class="n">{dur(get(g, "gpu_time_us"))}</td></tr>'
        for g in (get(cg, "graphs") or [])
        if isinstance(g, Mapping)
    )
    note = (
        f'<p class="muted" style="font-size:12px">Launched with {esc(apis)}: one launch, several kernels. Graphs '
        "are told apart by their sequence of kernels.</p>"
    )
    if get(cg, "complete") is False:
        note += (
            '<p class="muted" style="font-size:12px">Some launches could not be followed whole; '
            "counts are a lower bound.</p>"
        )
    table = (
        '<table><thead><tr><th>Graph</th><th>First kernel</th><th class="n">Launches</th>'
        '<th class="n">Kernels / launch</th><th class="n">GPU time / launch</th><th class="n">GPU time</th></tr>'
        f"</thead><tbody>{rows}</tbody></table>"
    )
    return _card("CUDA graphs", stats + table + note, full=True, cls="p-graphs")


# ------------------------------------------------------------------------------------------ memory


def _memory_empty(mem: Mapping[str, Any]) -> str:
    if get(mem, "header_profile_memory"):  # schema 1.6: it was on, and nothing was written
        return _card(
            "Memory",
            '<p class="empty">The trace header says profile_memory was on, but no memory event was recorded '
            "in the analysed window: nothing was allocated or freed there (a CUDA / HIP graph replay allocates "
            "nothing), or the profile ended before an active step (then a warning says so).</p>",
            cls="p-memory",
        )
    return _card(
        "Memory",
        '<p class="empty">This trace has no memory events. Profile with '
        "<code>torch.profiler.profile(profile_memory=True)</code> to see allocations per device, peaks over "
        "time and the operators that allocate most.</p>",
        cls="p-memory",
    )


def panel_memory(rank: Mapping[str, Any]) -> str:
    mem = get(rank, "memory")
    if not isinstance(mem, Mapping):
        return ""
    devices = [d for d in (get(mem, "devices") or []) if isinstance(d, Mapping)]
    if not num(get(mem, "events")) or not devices:
        return _memory_empty(mem)
    total_mem = num(get(rank, "device", "total_global_mem_bytes"))
    blocks = []
    for d in sorted(devices, key=lambda d: (not is_accelerator(str(get(d, "device"))), str(get(d, "device")))):
        peak = num(get(d, "peak_allocated_bytes"))
        if peak is not None and peak < 0:  # -1: no event carried the allocator's totals (MemoryAllocatorUnknown)
            peak = None
        res = num(get(d, "peak_reserved_bytes"))
        is_gpu = is_accelerator(str(get(d, "device")))
        stats = [
            ("peak allocated", nbytes(peak) if peak is not None else "unknown (no allocator totals)"),
            ("peak reserved", nbytes(res) if res else "—"),  # the CPU allocator reserves nothing
            ("allocations", count(get(d, "allocations"))),
            ("allocated in total", nbytes(get(d, "allocated_bytes"))),
            ("rise over the steps", pct(get(d, "increase_pct"))),
        ]
        if is_gpu and total_mem and peak is not None:
            stats.insert(2, ("of device memory", pct(100.0 * (res or peak) / total_mem)))
        tl = get(d, "timeline")
        alloc = _floats(get(tl, "max_allocated_bytes"))
        reserved = _floats(get(tl, "max_reserved_bytes"))
        chart = ""
        if alloc:
            series = []
            if reserved and any(reserved):
                series.append(Series("reserved", reserved, COLORS["reserved"]))
            series.append(Series("allocated", alloc, COLORS["allocated"], fill=True))
            tl_map: Mapping[str, Any] = tl if isinstance(tl, Mapping) else {}

            def mem_hint(i: int, a: list[float] = alloc, t: Mapping[str, Any] = tl_map) -> str:
                return _bin_hint(t, i, f"allocated up to {nbytes(a[i])}")

            chart = time_chart(
                series,
                x_ticks=_ticks(0.0, num(get(tl, "bin_us")) or 0.0, len(alloc)),
                y_label=nbytes,
                height=100,
                hint=mem_hint,
                label=f"Rank {get(rank, 'label')}: memory on {get(d, 'device')} over time",
                x_title="time since the start of the analysed window",
            )
            chart += _legend(
                [(COLORS["allocated"], "allocated (max per bin)", nbytes(max(alloc)))]
                + ([(COLORS["reserved"], "reserved", nbytes(max(reserved)))] if reserved and any(reserved) else [])
            )
        blocks.append(
            f'<h3 style="margin-top:6px">{esc(get(d, "device"))}</h3><div class="stat-row">'
            + "".join(f"<div>{esc(k)}<b>{esc(v)}</b></div>" for k, v in stats)
            + "</div>"
            + chart
        )
    ops = [o for o in (get(mem, "top_operators") or []) if isinstance(o, Mapping)]
    table = ""
    if ops:
        top = max((num(get(o, "bytes")) or 0 for o in ops), default=0) or 1
        rows = "".join(
            f'<tr><td class="name"><span class="k" title="{esc(get(o, "name"))}">{esc(get(o, "name"))}</span>'
            f'<div class="bar" style="width:{(num(get(o, "bytes")) or 0) / top * 100:.1f}%;'
            f'background:{COLORS["allocated"]}"></div></td><td>{esc(get(o, "device"))}</td>'
            f'<td class="n">{count(get(o, "allocations"))}</td><td class="n">{nbytes(get(o, "bytes"))}</td></tr>'
            for o in ops
        )
        table = (
            '<h3 style="margin-top:12px">Operators that allocate most</h3><table><thead><tr><th>Operator</th>'
            '<th>Device</th><th class="n">Allocations</th><th class="n">Bytes</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>"
        )
    notes = []
    if get(mem, "complete") is False:
        notes.append("more memory events than the analysis keeps: peaks and totals cover the first ones")
    if get(mem, "attributed") is False:
        notes.append("the trace could not be read to the end to find every allocating operator")
    note = f'<p class="muted" style="font-size:12px">{esc("; ".join(notes))}.</p>' if notes else ""
    return _card("Memory", "".join(blocks) + table + note, full=True, hint="from profile_memory events", cls="p-memory")


# ------------------------------------------------------------------------------------------ communication


def comm_breakdown(rank: Mapping[str, Any]) -> tuple[float, float, float]:
    """(communication time, exposed communication, memory-only time) in µs, by the summary's one definition:
    communication time is when any communication kernel runs; exposed is the part without computation."""
    cm = get(rank, "communication") or {}
    tb = get(rank, "temporal_breakdown") or {}
    comm = num(get(cm, "comm_time_us")) or 0.0
    exposed = num(get(cm, "exposed_time_us"))
    if exposed is None:
        exposed = max(comm - (num(get(cm, "overlap_time_us")) or 0.0), 0.0)
    non_compute = num(get(tb, "non_compute_time_us")) or 0.0
    return comm, exposed, max(non_compute - exposed, 0.0)
