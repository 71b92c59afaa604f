"""A finding: one thing an analysis found, as data (rule id, layers, severity, hazard, mitigation, evidence, gain).

Rules (:mod:`layerscope.analysis.rules`) and the compile-config linter (:mod:`layerscope.analysis.lint`) return
findings; reporters render them; the run file keeps them under ``findings`` (see :func:`findings_section`). The
shape follows TensorRT's engine explorer linters ({hazard, mitigation, help}) plus what a per-layer tool adds:
which layers, how sure, and how much time the change is expected to save.

Contract:
- a :class:`Finding` is immutable and JSON-safe through :meth:`Finding.to_dict` / :meth:`Finding.from_dict`
  (a round trip gives an equal finding);
- ``expected_gain_us`` is an estimate on the run's profile (``None`` when the rule cannot size it), except when
  ``evidence["gain_source"] == "measured"``: then it was measured (the subnormal-weights rule times the model
  and its mitigated copy on ONNX Runtime), and may be negative; ``evidence`` holds the numbers the finding
  rests on, with units in the keys;
- :func:`sort_findings` orders by severity, then expected gain (largest first), then rule id and first layer, so
  the same run always lists its findings in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from layerscope.errors import RunFileError
from layerscope.runfile.io import describe
from layerscope.runfile.models import FindingItem


class Severity(StrEnum):
    """How much a finding matters: ``error`` breaks or badly slows deployment, ``warning`` costs time,
    ``info`` is worth knowing."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for the most severe."""
        return (Severity.ERROR, Severity.WARNING, Severity.INFO).index(self)


@dataclass(frozen=True)
class Finding:
    """One finding of one rule.

    ``rule_id``: the rule's stable id (``"cpu-fallback"``, ``"lint.compile-mode"``). ``layer_ids``: the run's
    layer ids it is about (empty for whole-model or config findings). ``hazard``: what is wrong and why it costs
    time. ``mitigation``: what to change. ``evidence``: the numbers behind it (keys carry units: ``share``,
    ``est_us``, ``weight_bytes``). ``expected_gain_us``: estimated time saved per inference by the mitigation,
    on the run's profile (measured when ``evidence["gain_source"] == "measured"``); ``None`` when not sized.
    ``help``: where to read more (a document or a section).
    """

    rule_id: str
    severity: Severity
    hazard: str
    mitigation: str
    layer_ids: tuple[str, ...] = ()
    evidence: Mapping[str, Any] = field(default_factory=dict)
    expected_gain_us: float | None = None
    help: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The finding as the run file stores it."""
        return {
            "rule": self.rule_id,
            "severity": self.severity.value,
            "layers": list(self.layer_ids),
            "hazard": self.hazard,
            "mitigation": self.mitigation,
            "evidence": {k: _json_safe(v) for k, v in self.evidence.items()},
            "expected_gain_us": None if self.expected_gain_us is None else round(self.expected_gain_us, 3),
            "help": self.help,
        }

    @classmethod
    def from_item(cls, item: FindingItem) -> Finding:
        """A finding from the typed run's ``findings.items`` entry."""
        return cls(rule_id=item.rule, severity=Severity(item.severity), hazard=item.hazard,
                   mitigation=item.mitigation, layer_ids=tuple(item.layers), evidence=dict(item.evidence),
                   expected_gain_us=item.expected_gain_us, help=item.help)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | FindingItem) -> Finding:
        """A finding from its stored form (checked against the run file's schema, or already typed);
        ``RunFileError`` when a required field is missing or wrong."""
        if isinstance(data, FindingItem):
            return cls.from_item(data)
        try:
            return cls.from_item(FindingItem.model_validate(dict(data)))
        except ValidationError as exc:
            raise RunFileError(f"malformed finding in the run file: {describe(exc)}") from None


def _json_safe(value: Any) -> Any:
    """Floats rounded to 6 significant decimals, tuples as lists: stable bytes in the run file."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, tuple | list):
        return [_json_safe(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v) for k, v in value.items()}
    return value


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first, then largest expected gain, then rule id and first layer (deterministic)."""
    return sorted(findings, key=lambda f: (f.severity.rank, -(f.expected_gain_us or 0.0), f.rule_id,
                                           f.layer_ids[:1]))


#: How many of a grouped finding's other layers its hazard names.
GROUP_NAMED = 3


def _without_layers(text: str, layer_ids: Sequence[str]) -> str:
    """``text`` with each quoted layer id of ``layer_ids`` (``'conv1'``) replaced by one placeholder."""
    for layer_id in sorted(layer_ids, key=len, reverse=True):
        text = text.replace(f"'{layer_id}'", "'<layer>'")
    return text


def group_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Identical findings merged: those of one rule whose hazard, mitigation and help are the same text once their
    own layer names are set aside (one per reuse of a layer pattern: an unrolled recurrence, tied weights, a
    repeated block) become one finding over all their layers, in first-seen order.

    The grouped finding keeps the first one's texts, its hazard adding how many more layers it holds (naming
    :data:`GROUP_NAMED` of them); its severity is the most severe; ``expected_gain_us`` is the sum of the known
    gains (``None`` when none is known); evidence is the first finding's, with ``time_us`` and ``share`` summed
    when every finding has them, and ``grouped_layers`` = the number of findings merged. Findings without layers,
    and findings alone in their group, are returned unchanged. Order: first occurrence."""
    groups: dict[tuple[str, str, str, str], list[Finding]] = {}
    ordered: list[list[Finding]] = []
    for finding in findings:
        if not finding.layer_ids:
            ordered.append([finding])
            continue
        key = (finding.rule_id, _without_layers(finding.hazard, finding.layer_ids),
               _without_layers(finding.mitigation, finding.layer_ids), finding.help)
        if key not in groups:
            groups[key] = []
            ordered.append(groups[key])
        groups[key].append(finding)
    return [members[0] if len(members) == 1 else _merge(members) for members in ordered]


def _merge(members: Sequence[Finding]) -> Finding:
    """One finding for ``members`` (alike but for their layers; see :func:`group_findings`)."""
    first = members[0]
    layer_ids = tuple(dict.fromkeys(i for f in members for i in f.layer_ids))
    others = [i for i in layer_ids if i not in first.layer_ids]
    named = ", ".join(f"'{i}'" for i in others[:GROUP_NAMED]) + (" ..." if len(others) > GROUP_NAMED else "")
    hazard = f"{first.hazard} (the same holds for {len(others)} more layer(s) alike: {named})"
    gains = [f.expected_gain_us for f in members if f.expected_gain_us is not None]
    evidence = dict(first.evidence)
    for key in ("time_us", "share"):
        values = [f.evidence.get(key) for f in members]
        if all(isinstance(v, int | float) for v in values):
            evidence[key] = round(sum(float(v) for v in values if v is not None), 6)
    evidence["grouped_layers"] = len(members)
    severity = min((f.severity for f in members), key=lambda s: s.rank)
    return Finding(first.rule_id, severity, hazard, first.mitigation, layer_ids, evidence,
                   sum(gains) if gains else None, first.help)


def findings_section(findings: Iterable[Finding], *, source: str) -> dict[str, Any]:
    """The run file's ``findings`` section: ``{source, count, by_severity, items[]}``."""
    ordered = sort_findings(findings)
    counts = {s.value: sum(1 for f in ordered if f.severity is s) for s in Severity}
    return {"source": source, "count": len(ordered), "by_severity": counts, "items": [f.to_dict() for f in ordered]}
