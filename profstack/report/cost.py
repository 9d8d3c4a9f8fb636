"""The report's "GPU cost" card: what the job's GPUs cost and what the idle causes cost (summary ``cost``,
schema 1.2). Nothing is shown for a summary without it (``profstack analyze`` has no instance type).

Every row says what explains it: the finding that covers the cause, or, when no rule fired on it, why not (the
largest loss is never left unexplained: profstack.report.findings.top_causes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from profstack.report.findings import Cause, explanation_html
from profstack.report.format import esc, get, num


def _usd(value: object) -> str:
    v = num(value)
    return f"${v:,.2f}" if v is not None else "—"


def _hours(value: object) -> str:
    v = num(value)
    return f"{v:,.2f} h" if v is not None else "—"


def _sentence(text: object) -> str:
    """The first letter upper-case, the rest as written (`GPU` stays `GPU`)."""
    s = str(text or "")
    return s[:1].upper() + s[1:]


def render_cost(summary: Mapping[str, Any], causes: Sequence[Cause] = ()) -> str:
    cost = get(summary, "cost")
    if not isinstance(cost, Mapping):
        return ""
    hours = num(get(cost, "gpu_hours"))
    head = (
        f"{_usd(get(cost, 'total_usd'))} for {hours:,.1f} GPU-hours" if hours is not None else "GPU-hours unknown"
    ) + f" on {get(cost, 'instance_count') or '?'} × {get(cost, 'instance_type') or '?'}"
    explained = {c.cause: c for c in causes}
    shares = [s for s in get(cost, "attribution") or [] if isinstance(s, Mapping)]
    shares.sort(key=lambda s: -(num(get(s, "share_pct")) or 0.0))
    rows = []
    for share in shares:
        pct = num(get(share, "share_pct"))
        shown = f"{pct:.1f}%" if pct is not None else "—"
        cause = explained.get(str(get(share, "cause")))
        why = explanation_html(cause) if cause is not None else ('<span class="muted">—</span>' if not pct else "")
        rows.append(
            f"<tr><td>{esc(get(share, 'label'))}</td><td class=n>{esc(shown)}</td>"
            f"<td class=n>{esc(_hours(get(share, 'gpu_hours')))}</td>"
            f"<td class=n>{esc(_usd(get(share, 'usd')))}</td><td class=why>{why}</td></tr>"
        )
    price = get(cost, "price") or {}
    source = (
        f"On-demand prices of {esc(get(price, 'as_of'))}, {esc(get(price, 'region'))} "
        f"({'from the config' if get(price, 'overridden') else 'pinned table'}"
        f"{'' if get(price, 'verified') else ', not verified against the AWS Price List'}). "
        f"{esc(_sentence(get(cost, 'basis')))}."
    )
    notes = "".join(f"<li>{esc(n)}</li>" for n in get(cost, "notes") or [])
    table = (
        '<table class="cost"><thead><tr><th>GPU time lost</th><th class=n>Share of GPU time</th>'
        "<th class=n>GPU-hours</th><th class=n>Cost</th><th>What explains it</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        if rows
        else ""
    )
    return (
        '<h2 id="cost">GPU cost</h2><div class="card">'
        f"<p><b>{esc(head)}</b> · about {esc(_usd(get(cost, 'lost_usd')))} of it lost to the causes below</p>"
        f'{table}<p class="hint">{source}</p>{f"<ul>{notes}</ul>" if notes else ""}</div>'
    )
