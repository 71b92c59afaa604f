"""The sweep's HTML leaderboard: per target and mode, the models ranked by latency; then the cells that failed.

Contract: one self-contained page (no script, no external resource); every string that comes from a model, a
profile, a path or an error is escaped by Jinja's autoescape; a cell ranks by its measured latency (profile) or its
estimated latency (estimate); cells without a latency (failed, missing) are listed apart with their error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from layerscope.sweep.dataset import SweepRow
from layerscope.sweep.plan import Cell

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>layerscope sweep leaderboard</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}
th,td{padding:.25rem .6rem;border-bottom:1px solid #ddd;text-align:right;font-variant-numeric:tabular-nums}
th{background:#f4f4f4}td.l,th.l{text-align:left}
.bad{color:#a00}
</style></head><body>
<h1>Sweep leaderboard</h1>
<p>{{ counts.ok }} cells done, {{ counts.failed }} failed, {{ counts.missing }} not run;
{{ counts.total }} in the plan. Latencies in ms; estimates are roofline estimates, not measurements.</p>
{% for group in groups %}
<h2>{{ group.target }} &middot; {{ group.mode }}</h2>
{% if group.mode == "profile" %}<p>Measured on ONNX Runtime on the machine that ran each cell, beside the estimate
on {{ group.target }}; k = measured / estimated compares two devices unless the target is that machine (host).</p>
{% endif %}{% for line in group.mismatches %}<p class="bad">WARNING: {{ line }}.</p>
{% endfor %}<table><thead><tr><th>#</th><th class="l">model</th><th class="l">settings</th>
<th>{{ "measured ms" if group.mode == "profile" else "estimated ms" }}</th>
{% if group.mode == "profile" %}<th>estimated ms</th><th>k</th>{% endif %}
<th>GMACs</th><th>layers</th><th class="l">run file</th></tr></thead><tbody>
{% for row in group.rows %}<tr><td>{{ loop.index }}</td><td class="l">{{ row.model }}</td>
<td class="l">{{ row.settings }}</td><td>{{ row.latency }}</td>
{% if group.mode == "profile" %}<td>{{ row.estimate }}</td><td>{{ row.k }}</td>{% endif %}
<td>{{ row.gmacs }}</td><td>{{ row.layers }}</td>
<td class="l"><a href="{{ row.run_file }}">{{ row.run_file }}</a></td></tr>
{% endfor %}</tbody></table>
{% endfor %}
{% if failed %}<h2 class="bad">Cells without a result</h2>
<table><thead><tr><th class="l">model</th><th class="l">target</th><th class="l">mode</th><th class="l">settings</th>
<th class="l">status</th><th class="l">error</th></tr></thead><tbody>
{% for row in failed %}<tr><td class="l">{{ row.model }}</td><td class="l">{{ row.target }}</td>
<td class="l">{{ row.mode }}</td><td class="l">{{ row.settings }}</td><td class="l">{{ row.status }}</td>
<td class="l bad">{{ row.error }}</td></tr>
{% endfor %}</tbody></table>{% endif %}
</body></html>
"""


def render_leaderboard(rows: Sequence[SweepRow]) -> str:
    """The page for the rows of :func:`layerscope.sweep.dataset.gather`."""
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    groups: dict[tuple[str, str], list[_Ranked]] = {}
    failed: list[_Failed] = []
    for row in rows:
        cell = row.cell
        name = Path(cell.model).stem
        if row.status != "ok" or row.run is None:
            failed.append(_Failed(name, cell.target, cell.mode, _settings(cell), row.status, row.error or ""))
            continue
        summary, factor = row.run.summary, row.run.k_factor
        latency = summary.meas_latency_us if cell.mode == "profile" else summary.est_latency_us
        groups.setdefault((cell.target, cell.mode), []).append(_Ranked(
            sort=latency if latency is not None else float("inf"), model=name, settings=_settings(cell),
            latency=_ms(latency), estimate=_ms(summary.est_latency_us),
            k=(f"{factor.k:.2f}" + (" *" if factor.mismatch else "")) if factor is not None and factor.estimated_us
            else "", mismatch=factor.mismatch if factor is not None else None,
            gmacs=_num(summary.macs, 1e-9), layers=summary.layer_count if summary.layer_count is not None else "",
            run_file=row.run_file or ""))
    ordered = [_Group(t, m, sorted(g, key=lambda r: (r.sort, r.model)),
                      tuple(dict.fromkeys(r.mismatch for r in g if r.mismatch)))
               for (t, m), g in sorted(groups.items())]
    counts = {"ok": sum(len(g) for g in groups.values()),
              "failed": sum(1 for r in rows if r.status == "failed"),
              "missing": sum(1 for r in rows if r.status == "missing"), "total": len(rows)}
    return env.from_string(_TEMPLATE).render(groups=ordered, failed=failed, counts=counts)


@dataclass(frozen=True)
class _Ranked:
    """A done cell's row: ``sort`` its latency in µs (infinite without one), the rest the cells' texts."""

    sort: float
    model: str
    settings: str
    latency: str
    estimate: str
    k: str
    mismatch: str | None
    gmacs: str
    layers: int | str
    run_file: str


@dataclass(frozen=True)
class _Group:
    target: str
    mode: str
    rows: list[_Ranked]
    #: The device-mismatch lines of the group's k (a k marked ``*`` compares two devices).
    mismatches: tuple[str, ...]


@dataclass(frozen=True)
class _Failed:
    """A cell without a result (``status`` ``failed`` or ``missing``)."""

    model: str
    target: str
    mode: str
    settings: str
    status: str
    error: str


def _settings(cell: Cell) -> str:
    keys = ("dtype",) if cell.mode == "estimate" else ("threads", "opt_level", "runs")
    parts: dict[str, Any] = {k: getattr(cell, k) for k in keys if getattr(cell, k) is not None}
    if cell.shapes:
        parts = {**parts, "shapes": {n: list(d) for n, d in cell.shapes}}
    return ", ".join(f"{k}={v}" for k, v in parts.items()) or "defaults"


def _ms(value_us: float | None) -> str:
    return f"{value_us / 1000:.3f}" if value_us is not None else ""


def _num(value: float | None, scale: float) -> str:
    return f"{value * scale:.3g}" if value is not None else ""
