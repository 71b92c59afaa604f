"""Findings view: the run's findings as rows, most severe first.

Pure functions of a saved run; the contract is :mod:`layerscope.report.views.common`'s."""

from __future__ import annotations

from dataclasses import dataclass

from layerscope.report.units import human_us
from layerscope.report.views.common import Run

# --------------------------------------------------------------------------------------------------- findings


@dataclass(frozen=True)
class FindingRow:
    """A finding as the reports list it (``run.findings``, when an analysis added them)."""

    severity: str
    rule: str
    layers: tuple[str, ...]
    hazard: str
    mitigation: str
    expected_gain: str


_SEVERITY_ORDER = {"critical": 0, "high": 1, "error": 1, "medium": 2, "warning": 2, "low": 3, "info": 4}


def findings(run: Run, top: int | None = None) -> list[FindingRow]:
    """The run's findings (``findings.items``, read by :meth:`Finding.from_item`: the one stored form), most
    severe first, then in the run's order. An expected gain in µs reads as a time."""
    from layerscope.analysis.findings import Finding

    items = run.findings.items if run.findings is not None else []
    rows = []
    for item in items:
        finding = Finding.from_item(item)
        rows.append(FindingRow(
            severity=finding.severity.value,
            rule=finding.rule_id,
            layers=finding.layer_ids,
            hazard=finding.hazard,
            mitigation=finding.mitigation,
            expected_gain="" if finding.expected_gain_us is None else human_us(finding.expected_gain_us) + (
                " (measured)" if finding.evidence.get("gain_source") == "measured" else ""),
        ))
    rows.sort(key=lambda f: _SEVERITY_ORDER.get(f.severity.lower(), 5))
    return rows[:top] if top is not None else rows
