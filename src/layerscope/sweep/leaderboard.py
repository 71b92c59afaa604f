"""The sweep's HTML leaderboard: per target and mode, the models ranked by latency; then the cells that failed.

Contract: one self-contained page (no script, no external resource); every string that comes from a model, a
profile, a path or an error is escaped by Jinja's autoescape; a cell ranks by its measured latency (profile) or its
estimated latency (estimate); cells without a latency (failed, missing) are listed apart with their error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2

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
{% endif %}<table><thead><tr><th>#</th><th class="l">model</th><th class="l">settings</th>
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


def render_leaderboard(rows: Sequence[Mapping[str, Any]]) -> str:
    """The page for the run rows of :func:`layerscope.sweep.dataset.gather`."""
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    failed: list[dict[str, Any]] = []
    for row in rows:
        if row.get("cell.status") != "ok":
            failed.append({"model": row["cell.model_name"], "target": row["cell.target"], "mode": row["cell.mode"],
                           "settings": _settings(row), "status": row["cell.status"],
                           "error": row.get("cell.error") or ""})
            continue
        latency = _latency_us(row)
        groups.setdefault((str(row["cell.target"]), str(row["cell.mode"])), []).append({
            "sort": latency if latency is not None else float("inf"),
            "model": row["cell.model_name"], "settings": _settings(row), "latency": _ms(latency),
            "estimate": _ms(row.get("summary.est_latency_us")),
            "k": f"{row['k.value']:.2f}" if isinstance(row.get("k.value"), float) else "",
            "gmacs": _num(row.get("summary.macs"), 1e-9), "layers": row.get("summary.layer_count", ""),
            "run_file": row.get("cell.run_file") or ""})
    ordered: list[dict[str, Any]] = [
        {"target": t, "mode": m, "rows": sorted(g, key=lambda r: (r["sort"], str(r["model"])))}
        for (t, m), g in sorted(groups.items())]
    counts = {"ok": sum(len(g) for g in groups.values()),
              "failed": sum(1 for f in failed if f["status"] == "failed"),
              "missing": sum(1 for f in failed if f["status"] == "missing"), "total": len(rows)}
    return env.from_string(_TEMPLATE).render(groups=ordered, failed=failed, counts=counts)


def _latency_us(row: Mapping[str, Any]) -> float | None:
    key = "summary.meas_latency_us" if row.get("cell.mode") == "profile" else "summary.est_latency_us"
    value = row.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _settings(row: Mapping[str, Any]) -> str:
    keys = ("dtype",) if row.get("cell.mode") == "estimate" else ("threads", "opt_level", "runs")
    parts = {k: row.get(f"cell.{k}") for k in keys if row.get(f"cell.{k}") is not None}
    if row.get("cell.shapes"):
        parts["shapes"] = json.loads(row["cell.shapes"])
    return ", ".join(f"{k}={v}" for k, v in parts.items()) or "defaults"


def _ms(value_us: Any) -> str:
    return f"{value_us / 1000:.3f}" if isinstance(value_us, int | float) and not isinstance(value_us, bool) else ""


def _num(value: Any, scale: float) -> str:
    return f"{value * scale:.3g}" if isinstance(value, int | float) and not isinstance(value, bool) else ""
