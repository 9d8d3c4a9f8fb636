"""The report's "GPU cost" card: what the job's GPUs cost and what the idle causes cost (summary ``cost``,
schema 1.2). Nothing is shown for a summary without it (``profstack analyze`` has no instance type)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from profstack.report.format import esc, get, num


def _usd(value: object) -> str:
    v = num(value)
    return f"${v:,.2f}" if v is not None else "—"


def render_cost(summary: Mapping[str, Any]) -> str:
    cost = get(summary, "cost")
    if not isinstance(cost, Mapping):
        return ""
    hours = num(get(cost, "gpu_hours"))
    head = (
        f"{_usd(get(cost, 'total_usd'))} for {hours:,.1f} GPU-hours" if hours is not None else "GPU-hours unknown"
    ) + f" on {esc(get(cost, 'instance_count') or '?')} × {esc(get(cost, 'instance_type') or '?')}"
    rows = []
    for share in get(cost, "attribution") or []:
        if not isinstance(share, Mapping):
            continue
        pct = num(get(share, "share_pct"))
        shown = f"{pct:.1f} %" if pct is not None else "—"
        rows.append(
            f"<tr><td>{esc(get(share, 'label'))}</td><td class=num>{esc(shown)}</td>"
            f"<td class=num>{esc(_usd(get(share, 'usd')))}</td></tr>"
        )
    price = get(cost, "price") or {}
    source = (
        f"On-demand prices of {esc(get(price, 'as_of'))}, {esc(get(price, 'region'))} "
        f"({'from the config' if get(price, 'overridden') else 'pinned table'}"
        f"{'' if get(price, 'verified') else ', not verified against the AWS Price List'}). {esc(get(cost, 'basis'))}."
    )
    notes = "".join(f"<li>{esc(n)}</li>" for n in get(cost, "notes") or [])
    table = (
        "<table><thead><tr><th>GPU time lost</th><th>share</th><th>about</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        if rows
        else ""
    )
    return (
        '<h2>GPU cost</h2><div class="card">'
        f"<p><b>{esc(head)}</b> · about {esc(_usd(get(cost, 'lost_usd')))} of it lost to the causes below</p>"
        f'{table}<p class="hint">{source}</p>{f"<ul>{notes}</ul>" if notes else ""}</div>'
    )
