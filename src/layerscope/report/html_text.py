"""What the HTML report says beside its numbers: the category colours its charts share, the names of its timeline
tracks, the labels and formats of a layer's details, and the definitions of the utilisation figures it shows.

Pure data and pure functions (no run loading, no markup): :mod:`layerscope.report.html` puts their results in the
page's data, and the page's script formats each value with the formatter named here (its ``fmt*`` functions give
the text of :mod:`layerscope.report.units`' functions, which the terminal uses).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

# --------------------------------------------------------------------------------------------------- colours

#: Colours of the categories a chart colours by, in order of the categories' time (the first the slowest).
PALETTE: tuple[str, ...] = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
                            "#ff9da7", "#9c755f", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                            "#17becf")
#: The colour of the categories beyond :data:`PALETTE` (drawn as one legend entry, :data:`OTHER_LABEL`).
OTHER_COLOUR = "#bab0ac"
OTHER_LABEL = "other op types"
#: The colour of a span that belongs to no layer (a kernel the fusion map did not map).
NO_LAYER_COLOUR = "#d5d9e0"
NO_LAYER_LABEL = "no layer (unmapped kernel)"


@dataclass(frozen=True)
class CategoryColours:
    """The one colour map of the report's charts that colour by op type: ``colours`` (category, colour) for the
    slowest categories, every other category :data:`OTHER_COLOUR`; the page's timelines, scatter and their legends
    all read it."""

    by: str
    colours: tuple[tuple[str, str], ...]
    other: str = OTHER_COLOUR
    other_label: str = OTHER_LABEL
    none: str = NO_LAYER_COLOUR
    none_label: str = NO_LAYER_LABEL

    def colour(self, category: str | None) -> str:
        """The colour a chart draws ``category`` in (``None``: a span of no layer)."""
        if category is None:
            return self.none
        return dict(self.colours).get(category, self.other)

    def as_data(self) -> dict[str, Any]:
        """The map as the page's data carries it."""
        return {"by": self.by, "colours": [list(c) for c in self.colours], "other": self.other,
                "other_label": self.other_label, "none": self.none, "none_label": self.none_label}


def category_colours(categories: Sequence[str], by: str = "op type") -> CategoryColours:
    """Colours for ``categories`` given slowest first: the first ``len(PALETTE)`` get a colour each (one of the
    others would be confused with the grey "other" entry), the rest share :data:`OTHER_COLOUR`."""
    return CategoryColours(by, tuple(zip(categories, PALETTE, strict=False)))


# --------------------------------------------------------------------------------------------------- tracks

#: The DDR tracks of an estimated timeline, as the reader knows them.
DDR_TRACKS = {"LOAD": "DDR load", "STORE": "DDR store"}
#: A unit name the run uses for "no unit": zero-copy views (Reshape, Squeeze...) take no unit and no time.
NO_UNIT = "-"
NO_UNIT_TRACK = "no unit (zero-copy views)"
UNKNOWN_UNIT = "?"
UNKNOWN_UNIT_TRACK = "unit not stated in the run"
_CORE_UNIT = re.compile(r"^core (\d+) · (.*)$", re.DOTALL)


def unit_track_name(unit: str, cpu_units: Iterable[str] = ()) -> str:
    """The name a track of ``unit`` shows: DDR's tracks named as such, the unit that ran CPU-fallback layers
    marked so, a unit the run leaves unnamed (``-``, ``?``, empty) named for what it holds."""
    name = unit.strip()
    if name in DDR_TRACKS:
        return DDR_TRACKS[name]
    if name == NO_UNIT:
        return NO_UNIT_TRACK
    if name in ("", UNKNOWN_UNIT):
        return UNKNOWN_UNIT_TRACK
    return f"{name} (CPU fallback)" if name in set(cpu_units) else name


def track_names(names: Sequence[str], kind: Literal["est", "meas"], cpu_units: Iterable[str] = ()) -> list[str]:
    """Display names of a timeline's tracks (``names`` as the view made them: ``core N · UNIT`` or ``UNIT`` for an
    estimate, ``thread T`` for kernels): every one named, none ``-`` or empty; a name that says nothing becomes
    ``track i`` with what it is (``estimated unit`` / ``measured thread``)."""
    cpu = tuple(cpu_units)
    out = []
    for i, raw in enumerate(names):
        if kind == "est":
            match = _CORE_UNIT.match(raw)
            text = (f"core {match.group(1)} · {unit_track_name(match.group(2), cpu)}" if match
                    else unit_track_name(raw, cpu))
        else:
            text = raw.strip()
            if text in ("", NO_UNIT, UNKNOWN_UNIT, "thread", "thread None"):
                text = f"track {i + 1}: measured thread not stated in the run"
        out.append(text)
    return out


# --------------------------------------------------------------------------------------------------- details

#: How the page formats a detail value (``report.js``'s ``FORMATS``): ``us`` :func:`~layerscope.report.units.human_us`,
#: ``bytes`` :func:`~layerscope.report.units.human_bytes`, ``count`` :func:`~layerscope.report.units.human_count`,
#: ``pct`` a fraction in percent to 1 decimal, ``x2`` a ratio to 2 decimals, ``int`` a whole number, ``num`` a number
#: to 3 decimals (a whole one as it is), ``yesno`` a boolean, ``text`` as it is (lists joined by commas).
DetailFormat = Literal["us", "bytes", "count", "pct", "x2", "int", "num", "yesno", "text"]

#: The groups of a layer's details, titled for the reader (``{target}``: the estimate's profile).
GROUP_TITLES: dict[str, str] = {
    "layer": "Layer", "cost": "Cost (from the graph)", "estimate": "Estimate on {target}",
    "timeline": "Estimated schedule on {target} (µs from the frame's start)", "measured": "Measured",
    "memory": "Memory (measured)", "kernel": "Kernel (as the runtime names it)", "predicted": "Predicted",
}

#: Keys whose label or format no rule below finds: (label, format).
DETAIL_LABELS: dict[str, tuple[str, DetailFormat]] = {
    "name": ("name", "text"), "op_type": ("op type", "text"), "domain": ("domain", "text"),
    "inputs": ("inputs", "text"), "outputs": ("outputs", "text"), "shape_source": ("shapes from", "text"),
    "parent": ("parent", "text"), "executions": ("executions per run", "int"),
    "macs": ("MACs", "count"), "flops": ("FLOPs", "count"), "params": ("parameters", "count"),
    "bytes_read": ("bytes read", "bytes"), "bytes_read_act": ("bytes read, activations", "bytes"),
    "bytes_read_weight": ("bytes read, weights", "bytes"), "bytes_written": ("bytes written", "bytes"),
    "weight_bytes": ("weight bytes", "bytes"), "dtype": ("data type", "text"), "unit_kind": ("unit kind", "text"),
    "known": ("cost known", "yesno"),
    "ddr_read_bytes": ("DDR bytes read", "bytes"), "ddr_write_bytes": ("DDR bytes written", "bytes"),
    "weight_passes": ("passes over the weights", "num"), "fallback_reason": ("CPU fallback reason", "text"),
    "method": ("method", "text"), "bound": ("bound by", "text"), "unit": ("unit", "text"), "core": ("core", "int"),
    "latency_us": ("latency", "us"), "median_us": ("median", "us"), "mean_us": ("mean", "us"),
    "min_us": ("fastest", "us"), "max_us": ("slowest", "us"), "std_us": ("standard deviation", "us"),
    "cv": ("run-to-run CV", "pct"), "samples": ("samples", "int"), "status": ("status", "text"),
    "kernel": ("kernel", "text"), "kernels": ("kernels", "text"), "fused_group": ("fused with", "text"),
    "fused_group_size": ("layers in the fused kernel", "int"), "split": ("kernel time split by estimate", "yesno"),
    "ci_low_us": ("95% interval, low", "us"), "ci_high_us": ("95% interval, high", "us"),
    "stress_baseline_us": ("baseline (stress test)", "us"), "stress_median_us": ("under stress", "us"),
    "stress_ratio": ("stressed / baseline", "x2"), "stress_ratio_min": ("stressed / baseline, least", "x2"),
    "memory_sensitive": ("memory sensitive", "yesno"), "output_bytes": ("output bytes", "bytes"),
    "activation_bytes": ("activation bytes", "bytes"), "parameter_bytes": ("parameter bytes", "bytes"),
    "load_bytes": ("bytes loaded", "bytes"), "store_bytes": ("bytes stored", "bytes"),
    "active_start_us": ("holds its unit from", "us"), "active_end_us": ("holds its unit until", "us"),
    "compute_start_us": ("computes from", "us"), "compute_end_us": ("computes until", "us"),
    "load_start_us": ("loads from", "us"), "load_end_us": ("loads until", "us"),
    "store_start_us": ("stores from", "us"), "store_end_us": ("stores until", "us"),
    "exec_type": ("implementation", "text"), "precision": ("precision", "text"), "device": ("device", "text"),
    "tactic": ("tactic", "text"), "input_formats": ("input formats", "text"),
    "output_formats": ("output formats", "text"), "reformats": ("reformat kernels", "text"),
    "reformat_us": ("reformat time (not in the layer's)", "us"),
    "measured output_bytes": ("output bytes, measured", "bytes"),
    "estimated bytes_written": ("bytes written, estimated", "bytes"),
    "live at measured peak": ("live at the measured peak", "yesno"),
    "family": ("kernel family", "text"),
}
#: Words a snake_case key is read as (``ddr`` -> ``DDR``).
_WORDS = {"ddr": "DDR", "cpu": "CPU", "npu": "NPU", "macs": "MACs", "flops": "FLOPs", "ci": "CI", "cv": "CV",
          "sram": "SRAM", "id": "id"}


def _words(key: str) -> str:
    return " ".join(_WORDS.get(w, w) for w in key.replace("_", " ").split())


def _looks(values: Iterable[Any]) -> set[type]:
    return {type(v) for v in values if v is not None}


def detail_label(key: str, values: Sequence[Any] = ()) -> tuple[str, DetailFormat]:
    """The label and format of detail ``key`` whose values (over the layers) are ``values``: a known key's from
    :data:`DETAIL_LABELS`; else by its name (``*_us`` a time, ``*bytes*`` a size, ``*_share`` / ``*_ratio``...) and
    its values (booleans yes/no, whole numbers, numbers, text); the label never snake_case (``a_b`` reads
    ``a b``)."""
    if key in DETAIL_LABELS:
        return DETAIL_LABELS[key]
    if key.startswith("observed "):
        label, fmt = detail_label(key[len("observed "):], values)
        return f"observed {label}", fmt
    kinds = _looks(values)
    if key.endswith("_us"):
        return _words(key[:-3]), "us"
    if "bytes" in key:
        return _words(key), "bytes"
    if kinds == {bool}:
        return _words(key), "yesno"
    if kinds and kinds <= {int, float} and (key.endswith("_share") or key.endswith("_fraction")):
        return _words(key), "pct"
    if kinds and kinds <= {int}:
        return _words(key), "int"
    if kinds and kinds <= {int, float}:
        return _words(key), "num"
    return _words(key), "text"


def group_title(group: str, target: str | None) -> str:
    """The heading of detail group ``group`` (``target``: the profile the estimate is on)."""
    title = GROUP_TITLES.get(group, _words(group))
    return title.replace("{target}", target or "the run's profile")


# --------------------------------------------------------------------------------------------------- utilisation

#: What the Temporal tab's unit curves show, and what the terminal's units table calls "busy": two different things,
#: named differently wherever either is shown.
UNIT_COMPUTE_TITLE = "compute utilisation"
UNIT_COMPUTE_DEFINITION = ("compute utilisation: the share of each interval a unit spends computing (its layers' "
                           "compute time only; the overhead and the waits for DDR data are not counted)")
UNIT_BUSY_TITLE = "busy"
UNIT_BUSY_DEFINITION = ("busy: the share of the frame a unit is held by a layer, from the layer taking the unit to "
                        "its compute's end (overhead and waits for DDR data included; the terminal's units table "
                        "shows the same figure)")
DDR_EFFECTIVE_DEFINITION = ("DDR % of effective: the share of each interval the DDR channel is busy, moving data at "
                            "the profile's attainable rate")
DDR_NOMINAL_DEFINITION = ("DDR % of nominal: load + store rate over the part's stated peak bandwidth, the scale the "
                          "vendor's own charts use")
