"""Advice rules: each a small function from a :class:`RuleContext` to a list of :class:`Finding`.

The rules follow Horizon's performance-tuning guide and the users' own write-ups (``shared/seeds``): CPU
operators and where they sit, Focus stems, data-inflating movement ops, weights that do not fit on chip,
bandwidth-bound layers, fp32 where a faster dtype exists, channels off the lane width, depthwise convolutions,
constants outside the fp16/int16 range, subnormal weights, Softmax/LayerNorm-heavy blocks on the vector units, and
the runtime's float32 hand-over of large outputs.

Contract:
- a rule never raises on a well-formed run; it returns ``[]`` when it does not apply (including when it needs
  the model graph and :attr:`RuleContext.graph` is ``None``; :func:`run_rules` reports those as skipped);
- times are the layer's measured median when the run has measurements, else its estimate
  (:meth:`layerscope.runfile.models.Layer.time_us`); shares are of the sum over all layers;
- ``expected_gain_us`` is an estimate on the run's profile, sized by re-estimating the rewritten layer or
  model where the rule can build it (bottleneck, dtype), else from the layers' own estimates, else ``None``;
  the one exception, subnormal-weights with :attr:`RuleContext.measure_config` set, measures it on ONNX Runtime
  and says so in the evidence's ``gain_source``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from layerscope.analysis.findings import Finding, Severity, group_findings, sort_findings
from layerscope.analysis.weights import TINY, WeightStats, measure_flush_gain, scan_weights
from layerscope.costs.types import UnitKind
from layerscope.measure.session import SessionConfig
from layerscope.model.types import Graph, Node
from layerscope.runfile.models import Layer, RunFile
from layerscope.targets.profile import Profile
from layerscope.tempdirs import scratch

#: Horizon's docs: hb_compile ``remove_node_type`` removes only these op types at the model's inputs/outputs.
REMOVABLE_IO_OPS = ("Quantize", "Transpose", "Dequantize", "Cast", "Reshape", "Softmax")
FP16_MAX = 65504.0
MOVEMENT_OPS = frozenset({"Concat", "Pad", "Slice", "Split", "Expand", "Tile", "Transpose"})
INFLATING_OPS = frozenset({"Pad", "Expand", "Tile"})
NORM_OPS = frozenset({"Softmax", "LogSoftmax", "LayerNormalization", "SimplifiedLayerNormalization",
                      "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "GroupNormalization",
                      "InstanceNormalization"})
TENSOR_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})

#: Thresholds (shares are of all layer time).
FALLBACK_ERROR_SHARE = 0.05
BANDWIDTH_SHARE = 0.02
BANDWIDTH_MAX_FINDINGS = 10
MOVEMENT_SHARE = 0.10
INFLATION_RATIO = 1.1
LANE_WASTE = 0.10
LANE_MIN_SHARE = 0.002
#: Channel counts below this are set by the task (score maps, box coordinates, DFL), not by the designer.
LANE_MIN_CHANNELS = 8
NORM_SHARE = 0.05
#: Bytes per element of the profiles' dtypes (as :func:`layerscope.estimator.roofline.deployed_bytes` stores them).
DEPLOYED_SIZE: Mapping[str, int] = {"int8": 1, "uint8": 1, "int4": 1, "fp8": 1, "int16": 2, "fp16": 2, "bf16": 2,
                                    "fp32": 4, "tf32": 4}

#: What to do about a CPU-fallback op, by op type (Horizon's J6 tuning guide, "common CPU operators").
FALLBACK_MITIGATIONS: Mapping[str, str] = {
    "ScatterND": "rewrite the update without ScatterND (e.g. Concat of the kept and new slices, or Where with a "
                 "mask); the toolchain runs ScatterND on the BPU only for fp16/fp32 inputs on some J6 chips",
    "TopK": "export int32 indices (or convert after qat with model.replace_index_tensor_type()) so no int64 "
            "tensor and Cast is left; or move TopK into post-processing",
    "ArgMax": "export int32 indices (or model.replace_index_tensor_type() after qat) so the Cast disappears; or "
              "move ArgMax into post-processing",
    "ArgMin": "export int32 indices so the Cast disappears; or move it into post-processing",
    "Cast": "remove the int64 path that needs this Cast (int32 indices), or move it to the model's boundary and "
            "drop it with remove_node_type",
    "Resize": "use a nearest resize by a power-of-2 factor (2x/4x/8x), or a ConvTranspose for other factors",
    "Upsample": "use a nearest upsample by a power-of-2 factor (2x/4x/8x), or a ConvTranspose for other factors",
    "Softmax": "move the Softmax into post-processing (remove_node_type: Softmax) when it is the last layer",
    "Reshape": "keep the tensor rank and layout the accelerator supports, or move the Reshape to the boundary "
               "and drop it with remove_node_type",
    "NonMaxSuppression": "run NMS in post-processing on the CPU, outside the model",
    "NonZero": "avoid data-dependent shapes inside the model (mask with Where instead), or move it to "
               "post-processing",
}
DEFAULT_FALLBACK_MITIGATION = ("bring the op's parameters inside the accelerator's constraints (check the "
                               "toolchain's op-support list), replace the op, or move it to pre/post-processing")
TUNING_GUIDE = ("Horizon OpenExplorer toolchain manual, model performance tuning ('parameters that affect "
                "performance'): ")
#: Words in a profile's name or description that mark a Horizon (D-Robotics) BPU target.
HORIZON_MARKS = ("D-Robotics", "Horizon", "RDK")
#: Channel alignment on GPUs (tensor cores).
GPU_ALIGNMENT_GUIDE = ("NVIDIA Deep Learning Performance guide, 'Tensor Core requirements' (channel and matrix "
                       "dimensions multiples of 8 for fp16, 16 for int8)")


def is_horizon(profile: Profile | None) -> bool:
    """Whether ``profile`` is a Horizon / D-Robotics BPU target (its name starts with ``rdk``, or its name or
    description names the vendor): only these get Horizon's toolchain advice (hb_compile options, BPU notes,
    links to Horizon's tuning guide)."""
    if profile is None:
        return False
    text = f"{profile.name} {profile.description}".lower()
    return profile.name.lower().startswith("rdk") or any(mark.lower() in text for mark in HORIZON_MARKS)


def _guide(ctx: RuleContext, section: str) -> str:
    """The Horizon tuning guide's ``section`` as a finding's help on Horizon profiles; empty elsewhere (the
    guide's advice is the rule's, its sections and terms are Horizon's)."""
    return TUNING_GUIDE + section if is_horizon(ctx.profile) else ""


@dataclass(frozen=True)
class RuleContext:
    """What every rule sees: the run, the profile it was estimated on, and the model graph when it is loaded."""

    run: RunFile
    profile: Profile | None
    graph: Graph | None = None
    by_id: Mapping[str, Layer] = field(default_factory=dict)
    total_us: float = 0.0
    measured: bool = False
    #: When set, rules that can measure their mitigation on ONNX Runtime do (subnormal-weights), with this
    #: session config and this many paired rounds; ``None``: they never measure.
    measure_config: SessionConfig | None = None
    measure_runs: int = 20
    #: ``--input`` specs the measured model is fed (seeded random values for the rest).
    input_specs: tuple[str, ...] = ()

    @classmethod
    def of(cls, run: RunFile, profile: Profile | None, graph: Graph | None = None, *,
           measure_config: SessionConfig | None = None, measure_runs: int = 20,
           input_specs: Sequence[str] = ()) -> RuleContext:
        """The context of ``run``."""
        measured = run.has_measurement
        total = sum(layer.time_us(prefer_measured=measured) for layer in run.layers)
        return cls(run, profile, graph, run.layer_by_id, total, measured, measure_config, measure_runs,
                   tuple(input_specs))

    @cached_property
    def weights(self) -> Mapping[str, WeightStats]:
        """The model file's float weights, read once (:func:`~layerscope.analysis.weights.scan_weights`), each
        with the layers that read it as data (not in :data:`PARAMETER_INPUTS`); empty without the graph."""
        return scan_weights(self.graph, PARAMETER_INPUTS) if self.graph is not None else {}

    @property
    def layers(self) -> Sequence[Layer]:
        return self.run.layers

    def time_us(self, layer: Layer) -> float:
        return layer.time_us(prefer_measured=self.measured)

    def share(self, time_us: float) -> float:
        return time_us / self.total_us if self.total_us > 0 else 0.0

    @property
    def dtype(self) -> str:
        return str(self.run.target_or_empty.dtype or (self.profile.default_dtype if self.profile else "fp32"))

    def node(self, layer_id: str) -> Node | None:
        if self.graph is None:
            return None
        return next((n for n in self.graph.layers if n.id == layer_id), None)


RuleFn = Callable[[RuleContext], list[Finding]]


@dataclass(frozen=True)
class Rule:
    """A rule: stable id, one-line title, the function, and whether it needs the model graph."""

    rule_id: str
    title: str
    fn: RuleFn
    needs_graph: bool = False


@dataclass(frozen=True)
class _Times:
    """The time of a set of layers: µs (measured, else estimated), its share of the run's total, which it was."""

    time_us: float
    share: float
    time_source: str

    def evidence(self, **more: Any) -> dict[str, Any]:
        """A finding's evidence: these times (``time_us``, ``share``, ``time_source``), then ``more``."""
        return {"time_us": self.time_us, "share": self.share, "time_source": self.time_source, **more}


def _times(ctx: RuleContext, layers: Sequence[Layer]) -> _Times:
    time_us = sum(ctx.time_us(layer) for layer in layers)
    return _Times(round(time_us, 3), round(ctx.share(time_us), 6), "measured" if ctx.measured else "estimated")


def _evidence_times(ctx: RuleContext, layers: Sequence[Layer]) -> dict[str, Any]:
    return _times(ctx, layers).evidence()


# ------------------------------------------------------------------------------------------ CPU fallback
def _accelerator_us(layer: Layer, profile: Profile, dtype: str) -> float:
    """Rough estimate of the layer on the accelerator: its ops on the unit for its kind, its bytes through DDR
    at the deployed dtype (bytes scaled from fp32 by the dtype's size), plus the unit's overhead."""
    try:
        kind = UnitKind(str(layer.unit_kind or "vector"))
    except ValueError:
        kind = UnitKind.VECTOR
    unit = profile.unit_for(kind, dtype)
    ops = float(max(layer.flops or 0, 2 * (layer.macs or 0)))
    size = DEPLOYED_SIZE.get(dtype, 4)
    moved = float((layer.bytes_read or 0) + (layer.bytes_written or 0)) * size / 4
    compute_us = ops / unit.attainable_ops_per_s(dtype) * 1e6
    memory_us = moved / profile.attainable_ddr_bytes_per_s * 1e6
    return max(compute_us, memory_us) + unit.overhead_us


def cpu_fallback(ctx: RuleContext) -> list[Finding]:
    """Layers the profile runs on the CPU, grouped by op type and reason, with the profile's reason."""
    groups: dict[tuple[str, str], list[Layer]] = {}
    for layer in ctx.layers:
        reason = layer.est.fallback_reason
        if reason:
            groups.setdefault((str(layer.op_type), _generic_reason(str(reason))), []).append(layer)
    findings = []
    for (op, _), layers in sorted(groups.items()):
        times = _times(ctx, layers)
        gain = None
        if ctx.profile is not None:
            gain = sum(max(0.0, float(layer.est.latency_us or 0.0) -
                           _accelerator_us(layer, ctx.profile, ctx.dtype)) for layer in layers)
        reasons = sorted({str(layer.est.fallback_reason) for layer in layers})
        evidence = times.evidence(reasons=reasons[:3], count=len(layers))
        severity = Severity.ERROR if times.share >= FALLBACK_ERROR_SHARE else Severity.WARNING
        findings.append(Finding(
            "cpu-fallback", severity,
            f"{len(layers)} {op} layer(s) run on the CPU: {reasons[0]}; each hand-off between the accelerator "
            "and the CPU costs time on top of the slow CPU kernel",
            FALLBACK_MITIGATIONS.get(op, DEFAULT_FALLBACK_MITIGATION),
            tuple(str(layer.id) for layer in layers), evidence, gain,
            _guide(ctx, "'Handling CPU operators'")))
    return findings


def _generic_reason(reason: str) -> str:
    """A reason without its layer-specific prefix (``"Resize by 3.0x ...: the BPU ..."``) for grouping."""
    return reason.split(": ", 1)[-1]


def _producers(ctx: RuleContext) -> dict[str, Layer]:
    return {str(name): layer for layer in ctx.layers for name in layer.outputs}


def _model_names(ctx: RuleContext, key: str) -> set[str]:
    tensors = ctx.run.model.inputs if key == "inputs" else ctx.run.model.outputs
    return {t.name for t in tensors}


def _at_inputs(ctx: RuleContext, edge_ok: Callable[[Layer], bool]) -> set[str]:
    """Layers whose every activation input is a model input or the output of another such edge layer."""
    producers = _producers(ctx)
    inputs = _model_names(ctx, "inputs")
    edge: set[str] = set()
    for layer in ctx.layers:  # graph order: producers come first
        if not edge_ok(layer):
            continue
        acts = [n for n in layer.inputs if n and (n in inputs or n in producers)]
        if acts and all(n in inputs or str(producers[n].id) in edge for n in acts):
            edge.add(str(layer.id))
    return edge


def _at_outputs(ctx: RuleContext, edge_ok: Callable[[Layer], bool]) -> set[str]:
    """Layers whose every output is a model output or read only by other such edge layers."""
    outputs = _model_names(ctx, "outputs")
    readers: dict[str, list[str]] = {}
    for layer in ctx.layers:
        for name in layer.inputs:
            readers.setdefault(str(name), []).append(str(layer.id))
    edge: set[str] = set()
    for layer in reversed(list(ctx.layers)):
        if not edge_ok(layer):
            continue
        outs = [str(n) for n in layer.outputs if n]
        if outs and all(n in outputs or (readers.get(n) and all(r in edge for r in readers[n])) for n in outs):
            edge.add(str(layer.id))
    return edge


def cpu_at_io(ctx: RuleContext) -> list[Finding]:
    """CPU-fallback layers (with the views around them) at the model's inputs or outputs: move them into
    pre/post-processing, as hb_compile's ``remove_node_type`` does."""
    def on_cpu(layer: Layer) -> bool:
        return bool(layer.est.fallback_reason)

    def edge_ok(layer: Layer) -> bool:
        return on_cpu(layer) or layer.unit_kind == UnitKind.ZERO_COPY.value

    findings = []
    for where, ids in (("inputs", _at_inputs(ctx, edge_ok)), ("outputs", _at_outputs(ctx, edge_ok))):
        layers = [ctx.by_id[i] for i in sorted(ids) if on_cpu(ctx.by_id[i])]
        if not layers:
            continue
        ops = sorted({str(layer.op_type) for layer in layers})
        removable = [op for op in ops if op in REMOVABLE_IO_OPS]
        how = (f"hb_compile can drop {', '.join(removable)} with model_parameters.remove_node_type"
               if removable else "remove_node_type accepts only " + ", ".join(REMOVABLE_IO_OPS) +
               "; cut these layers out of the ONNX model (or remove_io_op in the PTQ API / QAT)")
        if not is_horizon(ctx.profile):
            how = "cut these layers out of the ONNX model (onnx.utils.extract_model with the inner tensors as ends)"
        evidence = _evidence_times(ctx, layers) | {"ops": ops, "edge": where}
        findings.append(Finding(
            "cpu-at-io", Severity.WARNING,
            f"{len(layers)} CPU layer(s) ({', '.join(ops)}) sit at the model's {where}: the model pays a CPU "
            "kernel and an accelerator hand-off for work the application can do in its own "
            f"{'pre' if where == 'inputs' else 'post'}-processing",
            f"move them into {'pre' if where == 'inputs' else 'post'}-processing and remove them from the model; {how}",
            tuple(str(layer.id) for layer in layers), evidence,
            sum(float(layer.est.latency_us or 0.0) for layer in layers),
            _guide(ctx, "'CPU operators at the beginning or end of the model'")))
    return findings


#: Share of the estimate (the layers and the hand-over) from which the outputs' float32 hand-over is reported: as
#: :data:`NORM_SHARE` and :data:`FALLBACK_ERROR_SHARE`, 5%, about the estimate's own median error on the RDK boards
#: (docs/accuracy.md), below which removing it is no clear gain.
HANDOVER_SHARE = 0.05
#: From this share the hand-over is most of what the model could gain: an error.
HANDOVER_ERROR_SHARE = 0.25
HANDOVER_SOURCE = (
    "Horizon X3M toolchain docs, model accuracy and performance ('remove the Dequantize node at the model's outputs "
    "and dequantize in post-processing': EfficientDet 66 -> 100 FPS), https://developer.horizon.ai/api/v1/fileData/"
    "documents_pi/ai_toolchain_develop/model_accuracy.html; RDK X5 OE docs, hb_model_modifier (--all Dequantize), "
    "https://developer.d-robotics.cc/api/v1/fileData/x5_doc-v126cn/oe_mapper/source/ptq/ptq_tool/"
    "hb_model_modifier.html; the RDK X5 zoo's FCOS-EfficientNet-B0 ships so ('all the inverse quantization nodes "
    "are removed': D-Robotics/rdk_model_zoo@be4f89bd178ffe9b668bd3d431e0499df6b37fb1:samples/vision/FCOS/README.md)")


def output_handover(ctx: RuleContext) -> list[Finding]:
    """The runtime's hand-over of the model's float outputs as float32 after the accelerator finishes (the
    Dequantize at the outputs, CPU work in proportion to their bytes), where the profile prices it
    (``output_bytes_per_s``: :func:`layerscope.estimator.roofline.output_conversion_us`) and it is at least
    :data:`HANDOVER_SHARE` of the layers' time and it together. Not for a run estimated with its outputs handed over
    quantized (``estimate_info.quantized_outputs``), nor a model without float outputs (nothing to dequantize).
    ``expected_gain_us``: the whole hand-over, what ``estimate --quantized-outputs`` removes from the estimate."""
    from layerscope.estimator.roofline import is_float, output_conversion_us, output_handover_bytes

    graph, profile = ctx.graph, ctx.profile
    info = ctx.run.estimate_info
    if graph is None or profile is None or (info is not None and info.quantized_outputs):
        return []
    floats = [t.name for t in graph.outputs if is_float(t)]
    handover_us = output_conversion_us(graph, profile)
    share = handover_us / (ctx.total_us + handover_us) if handover_us > 0 else 0.0
    if not floats or share < HANDOVER_SHARE:
        return []
    sizes = output_handover_bytes(graph)
    listed = sorted(floats, key=lambda name: -sizes[name])
    named = ", ".join(f"'{name}' ({sizes[name] / 1e6:.2f} MB)" for name in listed[:5])
    more = f" and {len(listed) - 5} more" if len(listed) > 5 else ""
    producers = _producers(ctx)
    layer_ids = tuple(dict.fromkeys(str(producers[name].id) for name in listed if name in producers))
    float_bytes = sum(sizes[name] for name in floats)
    evidence = {"handover_us": round(handover_us, 3), "share": round(share, 6), "time_source": "estimated",
                "output_bytes": {name: sizes[name] for name in listed[:20]}, "float32_output_bytes": float_bytes,
                "output_bytes_per_s": profile.output_bytes_per_s}
    if is_horizon(profile):
        how = ("remove the Dequantize nodes at the outputs (hb_mapper yaml model_parameters.remove_node_type: "
               "\"Dequantize\", or hb_model_modifier model.bin --all Dequantize on a compiled model) and dequantize "
               "in post-processing only what the application reads (the scores first, then the boxes of the "
               "candidates above the score threshold), with the scales hb_model_info lists")
    else:
        how = ("hand the outputs over as the accelerator writes them (remove the output dequantization from the "
               "deployed model) and dequantize in post-processing only what the application reads (the scores "
               "first, then the boxes of the candidates above the score threshold)")
    return [Finding(
        "output-handover", Severity.ERROR if share >= HANDOVER_ERROR_SHARE else Severity.WARNING,
        f"the runtime hands the model's {len(floats)} float output(s) over as float32, {float_bytes / 1e6:.2f} MB "
        f"per inference ({named}{more}): {handover_us / 1e3:.2f} ms of CPU work after the accelerator finishes, "
        f"{share:.0%} of the estimate, in proportion to the outputs' size, whether or not the application reads "
        "them all",
        f"{how}; `layerscope estimate --quantized-outputs` estimates the model deployed so",
        layer_ids, evidence, handover_us, HANDOVER_SOURCE)]


# ---------------------------------------------------------------------------------------- structure
#: How many chained Slices one Concat input may pass through back to the stem's tensor (YOLOv5's export slices
#: H, then W: two).
FOCUS_MAX_CHAIN = 3


def _slice_chain(producers: Mapping[str, Layer], name: str) -> tuple[list[Layer], str] | None:
    """The Slices that produce ``name`` one from the other (last first) and the tensor the first one reads;
    ``None`` when ``name`` is not a Slice's output."""
    chain: list[Layer] = []
    while (layer := producers.get(name)) is not None and layer.op_type == "Slice" \
            and len(chain) < FOCUS_MAX_CHAIN:
        chain.append(layer)
        name = str((layer.inputs or [""])[0])
    return (chain, name) if chain else None


def _strided(ctx: RuleContext, layer: Layer) -> bool | None:
    """Whether a Slice steps by more than 1 on some axis; ``None`` when its steps are not known (no graph, or
    steps computed at run time)."""
    if ctx.graph is None:
        return None
    inputs = list(layer.inputs)
    if len(inputs) < 5 or not inputs[4]:
        return False  # no steps input: step 1 (and opset < 10 Slices cannot stride)
    steps = ctx.graph.value(str(inputs[4]))
    return None if steps is None else bool(np.any(np.abs(np.asarray(steps)) > 1))


def focus_stem(ctx: RuleContext) -> list[Finding]:
    """A Concat whose inputs are all strided Slices of one tensor (YOLOv5's Focus / space-to-depth stem): one
    Slice with steps on H and W per input, or, as YOLOv5 exports ``x[..., ::2, ::2]``, a Slice on H then a
    Slice on W. A Concat of unstrided slices (a split and re-join) is not a Focus; without the graph the steps
    are unknown and four or more inputs are required."""
    producers = _producers(ctx)
    findings = []
    for layer in ctx.layers:
        names = [str(n) for n in layer.inputs if n]
        if layer.op_type != "Concat" or len(names) < 2:
            continue
        chains = [_slice_chain(producers, n) for n in names]
        if any(c is None for c in chains) or len({c[1] for c in chains if c}) != 1:
            continue
        strided = [[_strided(ctx, s) for s in c[0]] for c in chains if c]
        if any(all(step is False for step in chain) for chain in strided):
            continue  # some input is not strided: a split and re-join, not space-to-depth
        if any(step is None for chain in strided for step in chain) and len(names) < 4:
            continue
        source = next(c[1] for c in chains if c)
        slices = list({str(s.id): s for c in chains if c for s in reversed(c[0])}.values())
        pairs = max(len(c[0]) for c in chains if c) > 1
        involved = [*slices, layer]
        form = "chained slices, one axis each" if pairs else "one slice each"
        evidence = _evidence_times(ctx, involved) | {"slices": len(slices), "source_tensor": source,
                                                     "concat_inputs": len(names), "form": form}
        findings.append(Finding(
            "focus-stem", Severity.WARNING,
            f"Focus-style stem: {len(names)} strided slices of '{source}' ({len(slices)} Slice layers) joined by "
            f"Concat '{layer.id}': the slices are data movement the accelerator does poorly (and may run on "
            "the CPU), and they quadruple the channels of a full-resolution tensor",
            "replace the Focus block by one Conv 6x6 stride 2 padding 2 (what YOLOv5 v6.0 did; same receptive "
            "field and output shape), or a SpaceToDepth the toolchain supports",
            tuple(str(s.id) for s in involved), evidence,
            sum(float(s.est.latency_us or 0.0) for s in involved),
            "a Journey 6 profiling case study with hb_perf and trace (45 ms to 28 ms): focus_slice -> 6x6 "
            "stride-2 conv saved 7 ms"))
    return findings


def _act_bytes_in(layer: Layer) -> int:
    return int(layer.bytes_read_act or layer.bytes_read or 0)


def data_inflation(ctx: RuleContext) -> list[Finding]:
    """Pad/Expand/Tile whose output is larger than their input, and movement ops (concat, pad, slice, ...) that
    together take a large share of the time."""
    findings = []
    inflating = [layer for layer in ctx.layers if layer.op_type in INFLATING_OPS
                 and _act_bytes_in(layer) > 0
                 and (layer.bytes_written or 0) > INFLATION_RATIO * _act_bytes_in(layer)]
    if inflating:
        ratio = max((layer.bytes_written or 0) / _act_bytes_in(layer) for layer in inflating)
        findings.append(Finding(
            "data-inflation", Severity.WARNING,
            f"{len(inflating)} Pad/Expand/Tile layer(s) write up to {ratio:.1f}x the data they read: the inflated "
            "tensors cost DDR bandwidth in every layer that reads them",
            "let elementwise broadcasting do the expansion instead of Expand/Tile, fold padding into the "
            "convolution's pads attribute, and avoid materializing the larger tensor",
            tuple(str(layer.id) for layer in inflating),
            _evidence_times(ctx, inflating) | {"max_inflation": round(ratio, 3)},
            sum(ctx.time_us(layer) for layer in inflating), _guide(ctx, "'bandwidth-bound: concat, pad, slice'")))
    movement = [layer for layer in ctx.layers if layer.op_type in MOVEMENT_OPS]
    times = _times(ctx, movement)
    if movement and times.share >= MOVEMENT_SHARE:
        top = sorted(movement, key=lambda layer: -ctx.time_us(layer))[:10]
        ops = sorted({str(layer.op_type) for layer in movement})
        findings.append(Finding(
            "data-inflation", Severity.WARNING,
            f"data-movement layers ({', '.join(ops)}) take {times.share:.0%} of the time: layout-sensitive "
            "ops inflate traffic and break the accelerator's tiling",
            "reduce and avoid Concat/Pad/Slice/Transpose: use broadcasting instead of expanding tensors by hand, "
            "merge parallel branches before concatenating, keep one layout end to end",
            tuple(str(layer.id) for layer in top), times.evidence(count=len(movement), ops=ops), None,
            _guide(ctx, "'bandwidth-bound: concat, pad, slice'")))
    return findings


# ------------------------------------------------------------------------------------------- memory
def _bottleneck_us(ctx: RuleContext, node: Node) -> tuple[float, int] | None:
    """Estimated µs of the 1x1 -> kxk -> 1x1 bottleneck replacing ``node`` (a Conv), and its middle width."""
    graph, profile = ctx.graph, ctx.profile
    if graph is None or profile is None or node.op_type != "Conv" or len(node.inputs) < 2:
        return None
    x, w, y = graph.tensor(node.inputs[0]), graph.tensor(node.inputs[1]), graph.tensor(node.outputs[0])
    if x is None or w is None or y is None or len(w.shape) != 4 or int(node.attr("group", 1)) != 1:
        return None
    cout, cin, kh, kw = w.shape
    if kh * kw == 1:
        return None
    lane = max(1, profile.lane_width)
    mid = max(lane, int(math.ceil(min(cin, cout) / 2 / lane) * lane))
    return _estimate_bottleneck(ctx, node, x.shape, (cin, mid, cout), (kh, kw)), mid


def _estimate_bottleneck(ctx: RuleContext, node: Node, in_shape: tuple[int, ...], channels: tuple[int, int, int],
                         kernel: tuple[int, int]) -> float:
    """Estimated µs of Conv 1x1 (cin->mid), Conv kxk (mid->mid, ``node``'s strides/pads), Conv 1x1 (mid->cout)."""
    cin, mid, cout = channels
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from layerscope.estimator import estimate_graph
    from layerscope.model import load_model

    assert ctx.profile is not None
    attrs = {k: node.attr(k) for k in ("strides", "pads", "dilations") if node.attr(k) is not None}

    def weight(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array(np.zeros(shape, np.float32), name)

    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="reduce"),
             helper.make_node("Conv", ["a", "w2"], ["b"], name="spatial", kernel_shape=list(kernel), **attrs),
             helper.make_node("Conv", ["b", "w3"], ["y"], name="expand")]
    graph = helper.make_graph(nodes, "bottleneck", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                  list(in_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [weight("w1", (mid, cin, 1, 1)), weight("w2", (mid, mid, *kernel)),
                               weight("w3", (cout, mid, 1, 1))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with scratch("advise") as folder:
        path = Path(folder) / "bottleneck.onnx"
        onnx.save_model(model, str(path))
        rewritten = load_model(path)
    return estimate_graph(rewritten, ctx.profile, ctx.dtype).layers_us  # three layers: no per-inference task


def _mib(count: int) -> str:
    return f"{count / 2**20:.2f} MiB"


def _deployed_weight_bytes(ctx: RuleContext, layer: Layer, dtype: str) -> int:
    """The layer's weights as the target stores them: float weights at ``dtype`` (the dtype they are stored at:
    :func:`_weight_dtype`), integer ones at their own size, as the estimate counts them; from the graph when it is
    loaded, else scaled from the model's bytes by the layer's dtype."""
    from layerscope.costs import constant_elements_read
    from layerscope.estimator.roofline import deployed_bytes

    node, graph = ctx.node(str(layer.id)), ctx.graph
    if node is not None and graph is not None:
        infos = [t for t in (graph.tensor(i) for i in node.inputs) if t is not None and graph.is_constant(t.name)]
        return sum(deployed_bytes(t, dtype, constant_elements_read(node, graph, t)) for t in infos)
    model_bytes = int(layer.weight_bytes or 0)
    own = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}.get(str(layer.dtype or "float32"))
    return model_bytes * DEPLOYED_SIZE.get(dtype, 4) // own if own else model_bytes


def _weight_dtype(ctx: RuleContext, layer: Layer) -> str:
    """The dtype the target stores ``layer``'s float weights at: its deployed dtype, narrowed to the profile's
    ``weight_dtype`` (:func:`layerscope.estimator.roofline.weight_dtype`), as the estimate loads them."""
    from layerscope.estimator.roofline import weight_dtype

    dtype = str(layer.est.dtype or ctx.dtype)
    return dtype if ctx.profile is None else weight_dtype(ctx.profile, dtype)


def weights_exceed_sram(ctx: RuleContext) -> list[Finding]:
    """Layers whose weights exceed the on-chip SRAM share for weights and are streamed in several passes."""
    if ctx.profile is None or ctx.profile.sram_bytes <= 0:
        return []
    findings = []
    for layer in ctx.layers:
        passes = int(layer.est.weight_passes or 1)
        if passes <= 1:
            continue
        est_us = float(layer.est.latency_us or 0.0)
        node = ctx.node(str(layer.id))
        rewrite = _bottleneck_us(ctx, node) if node is not None else None
        dtype = _weight_dtype(ctx, layer)
        deployed = _deployed_weight_bytes(ctx, layer, dtype)
        budget = ctx.profile.weight_budget_bytes
        evidence = _evidence_times(ctx, [layer]) | {
            "weight_bytes": deployed, "weight_dtype": dtype, "model_weight_bytes": int(layer.weight_bytes or 0),
            "weight_passes": passes, "sram_bytes": ctx.profile.sram_bytes, "sram_weight_bytes": budget,
            "est_us": round(est_us, 3)}
        if rewrite is not None:
            new_us, mid = rewrite
            evidence |= {"bottleneck_mid_channels": mid, "bottleneck_est_us": round(new_us, 3)}
            mitigation = (f"replace it by a bottleneck: 1x1 conv down to {mid} channels, the same spatial conv at "
                          f"{mid} channels, 1x1 conv back up (estimated {new_us:.1f} µs instead of {est_us:.1f} µs "
                          "on this profile; check the accuracy); or let the compiler cache weights across cores")
            gain: float | None = max(0.0, est_us - new_us)
        else:
            mitigation = ("reduce the layer's channels (a 1x1-3x3-1x1 bottleneck for spatial convolutions, a "
                          "low-rank factorization for matrix products) so its weights fit on chip")
            gain = None
        model_bytes = int(layer.weight_bytes or 0)
        model_dtype = str(layer.dtype or "float32")
        in_model = f"; {_mib(model_bytes)} as the model's {model_dtype}" if model_bytes != deployed else ""
        findings.append(Finding(
            "weights-exceed-sram", Severity.WARNING,
            f"{layer.op_type} '{layer.id}' has {_mib(deployed)} of weights in {dtype} (the deployed "
            f"dtype{in_model}), more than the {_mib(budget)} of on-chip SRAM left for weights: they stream from "
            f"DDR in {passes} passes, each reloading the input activations, so bandwidth, not compute, sets its "
            "time",
            mitigation, (str(layer.id),), evidence, gain,
            "a Journey 6 profiling case study with hb_perf and trace (45 ms to 28 ms): a 512-channel 3x3 conv whose "
            "weights SRAM cannot hold; a bottleneck halved its time"))
    return findings


def bandwidth_bound(ctx: RuleContext) -> list[Finding]:
    """The biggest layers the roofline finds bandwidth-bound (DDR time above compute time); layers alike are
    one finding (:func:`~layerscope.analysis.findings.group_findings`), at most :data:`BANDWIDTH_MAX_FINDINGS`.
    Recurrent layers are left to :func:`recurrent_steps`: their weights are reused every step, so their total
    weight bytes do not make them bandwidth-bound."""
    candidates = [layer for layer in ctx.layers if layer.est.bound == "bandwidth"
                  and layer.op_type not in RECURRENT_OPS
                  and ctx.share(ctx.time_us(layer)) >= BANDWIDTH_SHARE]
    candidates.sort(key=lambda layer: -ctx.time_us(layer))
    findings = []
    for layer in candidates:
        e = layer.est
        compute_us = float(e.compute_us or 0.0)
        memory_us = float(e.load_us or 0.0) + float(e.store_us or 0.0)
        overhead = float(e.overhead_us or 0.0)
        halved = max(compute_us, memory_us / 2) + overhead
        share = ctx.share(ctx.time_us(layer))
        evidence = _evidence_times(ctx, [layer]) | {
            "compute_us": round(compute_us, 3), "memory_us": round(memory_us, 3),
            "ddr_bytes": int((e.ddr_read_bytes or 0) + (e.ddr_write_bytes or 0)),
            "gain_assumes": "the layer's DDR traffic halves"}
        kind, op = layer.unit_kind, layer.op_type
        if op in MOVEMENT_OPS or kind == "move":
            mitigation = ("avoid materializing the copy: let the consumers read the parts directly (instead of "
                          "Concat/Slice/Split), fold a Transpose into its neighbour's layout, or keep its tensors "
                          "small enough to stay on chip")
        elif op in NORM_OPS:
            mitigation = ("keep its tensors on chip (smaller tiles or shorter sequences per call) and run it in "
                          "int16/fp16, not fp32")
        elif kind in ("vector", "aux"):
            mitigation = ("fuse it into the layer that produces its input (an activation into its conv) or keep "
                          "its tensors small enough to stay on chip")
        else:
            mitigation = ("cut its DDR traffic: fewer channels or a lower resolution here, a narrower dtype, or "
                          "keep its inputs on chip")
        findings.append(Finding(
            "bandwidth-bound", Severity.WARNING if share >= 0.05 else Severity.INFO,
            f"{layer.op_type} '{layer.id}' is bandwidth-bound: {memory_us:.1f} µs of DDR traffic against "
            f"{compute_us:.1f} µs of compute; the compute units wait for memory",
            mitigation, (str(layer.id),), evidence, max(0.0, float(e.latency_us or 0.0) - halved),
            _guide(ctx, "'Bandwidth analysis'")))
    return group_findings(findings)[:BANDWIDTH_MAX_FINDINGS]


#: Recurrent layers: a cell applied step after step with the same weights (ONNX's LSTM/GRU/RNN, ONNX Runtime's
#: DynamicQuantizeLSTM, and Scan/Loop bodies).
RECURRENT_OPS = frozenset({"LSTM", "GRU", "RNN", "DynamicQuantizeLSTM", "Scan", "Loop"})
#: Share of all layer time from which a recurrent layer is reported.
RECURRENT_SHARE = 0.02


@dataclass(frozen=True)
class _Recurrence:
    """A recurrent layer's shape of work: time steps, batch rows and directions (``None`` when not known)."""

    steps: int | None
    batch: int | None
    directions: int


def _recurrence(ctx: RuleContext, layer: Layer) -> _Recurrence:
    """Steps, batch and directions of an LSTM/GRU/RNN/DynamicQuantizeLSTM from its input X (``(seq, batch, I)``,
    ``(batch, seq, I)`` with ``layout=1``) and ``direction``; unknown for Scan/Loop and without the graph."""
    node, graph = ctx.node(str(layer.id)), ctx.graph
    if node is None or graph is None or layer.op_type in ("Scan", "Loop") or not node.inputs:
        return _Recurrence(None, None, 1)
    directions = 2 if str(node.attr("direction", "forward")) in ("bidirectional", "b'bidirectional'") else 1
    x = graph.tensor(node.inputs[0])
    if x is None or len(x.shape) != 3 or not all(isinstance(d, int) and d > 0 for d in x.shape[:2]):
        return _Recurrence(None, None, directions)
    seq, batch = (x.shape[1], x.shape[0]) if int(node.attr("layout", 0) or 0) == 1 else (x.shape[0], x.shape[1])
    return _Recurrence(int(seq), int(batch), directions)


def recurrent_steps(ctx: RuleContext) -> list[Finding]:
    """Recurrent layers with a share of at least :data:`RECURRENT_SHARE`, classed by the reuse of their weights
    per step, not by their total weight bytes: each step multiplies the same W and R by one vector per batch row
    (``batch`` MACs per weight per step), and steps depend on each other.

    Weights that fit the on-chip budget (half the profile's ``sram_bytes``, as :func:`weights_exceed_sram`
    counts it) are loaded once per inference and stay there: the layer is latency-bound by its sequential steps.
    Weights that do not fit stream from DDR at every step: bandwidth-bound per step. Without a profile the
    residency is unknown and the finding says so."""
    findings = []
    for layer in ctx.layers:
        if layer.op_type not in RECURRENT_OPS or ctx.share(ctx.time_us(layer)) < RECURRENT_SHARE:
            continue
        shape = _recurrence(ctx, layer)
        dtype = _weight_dtype(ctx, layer)
        weights = _deployed_weight_bytes(ctx, layer, dtype) if ctx.graph is not None else int(layer.weight_bytes or 0)
        budget = (ctx.profile.weight_budget_bytes if ctx.profile is not None and ctx.profile.weight_budget_bytes > 0
                  else None)
        params = int(layer.params or 0)
        uses = int(layer.macs or 0) / params if params else None
        resident = None if budget is None else weights <= budget
        steps = f"{shape.steps} dependent time steps" if shape.steps else "its time steps one after the other"
        if shape.directions > 1:
            steps += " in each of 2 directions"
        reuse = (f"each step reuses its {_mib(weights)} of weights {shape.batch}x (one matrix-vector product per "
                 "batch row)" if shape.batch else f"it reuses its {_mib(weights)} of weights at every step"
                 + (f" (about {uses:.0f} uses of each weight per inference)" if uses else ""))
        if resident is False:
            assert budget is not None
            hazard = (f"{layer.op_type} '{layer.id}' runs {steps}; {reuse}, but they exceed the {_mib(budget)} on "
                      "chip, so every step streams them from DDR again: bandwidth-bound per step")
            mitigation = ("make the weights fit on chip (a smaller hidden size, int8 weights), or run several "
                          "sequences per call so each weight load serves more batch rows")
            bound = "bandwidth per step"
        else:
            where = (f"they fit the {_mib(budget)} on chip, so DDR loads them once per inference, not per step"
                     if budget is not None else "whether they stay on chip is unknown without the run's profile")
            hazard = (f"{layer.op_type} '{layer.id}' runs {steps}; {reuse}, and {where}: its time goes to many "
                      "small sequential steps (latency-bound: too little work per step to fill the units, each "
                      "waiting for the previous), not to memory bandwidth")
            mitigation = ("give each step more work or take fewer steps: run several sequences per call (batch), "
                          "shorten the sequence (stride or pool before the recurrence), or replace the recurrence "
                          "by a convolution or attention over the sequence, which has no step-to-step dependency")
            bound = "sequential steps" if budget is not None else "unknown"
        share = ctx.share(ctx.time_us(layer))
        evidence = _evidence_times(ctx, [layer]) | {
            "steps": shape.steps, "batch": shape.batch, "directions": shape.directions, "weight_bytes": weights,
            "weight_dtype": dtype, "onchip_weight_budget_bytes": budget, "weights_resident": resident,
            "weight_uses_per_inference": None if uses is None else round(uses, 3), "class": bound,
            "roofline_bound": layer.est.bound}
        findings.append(Finding(
            "recurrent-steps", Severity.WARNING if share >= 0.05 else Severity.INFO, hazard, mitigation,
            (str(layer.id),), evidence, None,
            "ONNX operator specs (LSTM, GRU, RNN): the same W and R are applied at every time step"))
    return findings


#: Causes an outlier layer's slowness may have, in the order the finding lists them.
class _OutlierCauses(NamedTuple):
    """The candidate causes an outlier-layer finding lists (format fields: ``op``, ``kernel``, ``reason``)."""

    unknown: str
    fused: str
    denormal: str
    kernel: str
    layout: str
    fallback: str


OUTLIER_CAUSES = _OutlierCauses(
    unknown="the estimate has no cost for {op}: it charges only a fixed overhead, so any real work shows as an "
               "outlier (the share of such layers is in `reconcile`'s 'unknown cost' line)",
    fused="its time is its share of a kernel fused with other layers, split by the estimate's weights: the "
             "kernel, not this layer, may be the slow part",
    denormal="subnormal (denormal) values in its inputs or weights: x86 and many ARM cores take a slow path for "
                "each operation on them, 10-100x slower (advise's subnormal-weights rule checks the weights; "
                "activations that decay towards 0 do the same)",
    kernel="a slow kernel choice for this op, shape or dtype (a reference or generic implementation){kernel}",
    layout="a layout conversion (a reorder between NCHW, NHWC or blocked layouts) the runtime inserted next to "
              "it and charged to it",
    fallback="a CPU fallback: the runtime ran it off the accelerator{reason}",
)


def outlier_layers(ctx: RuleContext) -> list[Finding]:
    """Layers whose measured / estimated ratio is an outlier among the run's measured layers
    (:func:`layerscope.analysis.reconcile.find_outliers`: robust z of the log ratio, a minimum factor over the
    median ratio and a minimum share of the measured time), each with its candidate causes. The expected gain is
    the time above what the layer would take at the run's median ratio (an estimate: what it would cost if it
    ran as well as the rest of the model)."""
    from layerscope.analysis.reconcile import find_outliers

    if not ctx.measured:
        return []
    rows = [(str(layer.id), str(layer.op_type), float(layer.est.latency_us or 0.0), float(meas),
             layer.known is not False)
            for layer in ctx.layers if (meas := layer.measured_us) is not None and not layer.eliminated]
    findings = []
    for o in find_outliers(rows):
        layer = ctx.by_id[o.layer_id]
        measured = layer.measured
        kernel = str(measured.kernel) if measured is not None and measured.kernel else ""
        causes = []
        if not o.known:
            causes.append(OUTLIER_CAUSES.unknown.format(op=o.op_type))
        if measured is not None and measured.status == "fused":
            causes.append(OUTLIER_CAUSES.fused)
        causes += [OUTLIER_CAUSES.denormal,
                   OUTLIER_CAUSES.kernel.format(kernel=f"; it ran in kernel '{kernel}'" if kernel else ""),
                   OUTLIER_CAUSES.layout]
        reason = layer.est.fallback_reason
        if reason or (ctx.profile is not None and ctx.profile.kind != "cpu"):
            causes.append(OUTLIER_CAUSES.fallback.format(reason=f" ({reason})" if reason else ""))
        evidence = _evidence_times(ctx, [layer]) | {
            "est_us": round(o.estimated_us, 3), "measured_us": round(o.measured_us, 3),
            "measured_over_estimated": round(o.ratio, 3), "median_ratio": round(o.median_ratio, 6),
            "robust_z": round(o.z, 3) if math.isfinite(o.z) else None, "cost_known": o.known,
            "causes": causes, "gain_assumes": "the layer runs at the run's median measured/estimated ratio"}
        findings.append(Finding(
            "outlier-layer", Severity.ERROR if o.share >= 0.25 else Severity.WARNING,
            f"{o.op_type} '{o.layer_id}' measured {o.measured_us:.1f} µs, {o.ratio:.0f}x its estimate of "
            f"{o.estimated_us:.1f} µs where the run's layers measure {o.median_ratio:.2f}x theirs (median), and it "
            f"holds {o.share:.0%} of the measured time; candidate causes: " +
            "; ".join(f"({i}) {c}" for i, c in enumerate(causes, 1)),
            "find which cause it is: time the layer alone (layerscope bisect around it) and read the kernel the "
            "runtime chose (ONNX Runtime's profile, OpenVINO's execution graph: exec type, layout, device); flush "
            "denormals (ONNX Runtime: session config 'session.set_denormal_as_zero' = '1'); feed it the layout "
            "and dtype its neighbours use; keep it on the accelerator",
            (o.layer_id,), evidence, max(0.0, o.measured_us - o.estimated_us * o.median_ratio),
            "outliers by the modified z-score of log(measured / estimated): Iglewicz and Hoaglin, 'How to Detect "
            "and Handle Outliers' (MAD-based z > 3.5)"))
    return findings


# -------------------------------------------------------------------------------------------- dtype
#: Ops that compute in an integer type: a model holding them is quantized already.
QUANTIZED_OPS = frozenset({"QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger", "QGemm", "QAttention",
                           "DynamicQuantizeLSTM", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QLinearAdd",
                           "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAveragePool",
                           "QLinearGlobalAveragePool", "QLinearConcat", "QLinearSoftmax"})


def _quantized_layers(layers: Sequence[Layer]) -> set[str]:
    """Ids of the layers that compute in an integer type: the :data:`QUANTIZED_OPS`, and in the QDQ form the layers
    that read a ``DequantizeLinear`` output (the runtime fuses the pair into an integer kernel)."""
    dequantized = {str(out) for layer in layers if layer.op_type == "DequantizeLinear"
                   for out in layer.outputs}
    return {str(layer.id) for layer in layers
            if layer.op_type in QUANTIZED_OPS or dequantized.intersection(map(str, layer.inputs))}


def fp32_dtype(ctx: RuleContext) -> list[Finding]:
    """The model is deployed in fp32 (or fp16) where the profile lists a faster dtype."""
    profile = ctx.profile
    if profile is None:
        return []
    current = ctx.dtype
    rate = profile.peak_ops_per_s(current) or 0.0
    faster = [d for d in profile.dtypes if (profile.peak_ops_per_s(d) or 0.0) > rate * 1.2]
    if current not in ("fp32", "fp16", "bf16") or not faster:
        return []
    best = max(faster, key=lambda d: profile.peak_ops_per_s(d) or 0.0)
    quantized = _quantized_layers(ctx.layers)
    layers = [layer for layer in ctx.layers if layer.est.dtype == current
              and not layer.est.fallback_reason and layer.unit_kind != UnitKind.ZERO_COPY.value
              and str(layer.id) not in quantized]
    if quantized and not any(int(layer.macs or 0) > 0 for layer in layers):
        return []  # already quantized where the work is: what is left in float is glue, not a dtype choice
    gain = None
    peak_ratio = round((profile.peak_ops_per_s(best) or 0.0) / rate, 3) if rate else None
    evidence: dict[str, Any] = {"dtype": current, "faster_dtype": best, "peak_ratio": peak_ratio}
    if ctx.graph is not None:
        from layerscope.estimator import estimate_graph

        now = estimate_graph(ctx.graph, profile, current).latency_us
        then = estimate_graph(ctx.graph, profile, best).latency_us
        gain = max(0.0, now - then)
        evidence |= {"est_latency_us": round(now, 3), f"est_latency_{best}_us": round(then, 3)}
    severity = Severity.INFO if profile.kind == "cpu" else Severity.WARNING
    faster_by = f"{peak_ratio:g}x faster" if peak_ratio else "faster"
    bytes_ratio = DEPLOYED_SIZE.get(current, 4) / DEPLOYED_SIZE.get(best, 4)
    moves = f"; {current} also moves {bytes_ratio:g}x the bytes of {best}" if bytes_ratio > 1 else ""
    horizon = " (on Horizon's BPU, fp32 runs only on the slow VPU)" if current == "fp32" and \
        is_horizon(profile) else ""
    return [Finding(
        "fp32-dtype", severity,
        f"{len(layers)} layer(s) run in {current} although profile '{profile.name}' computes {best} "
        f"{faster_by}{moves}{horizon}",
        f"deploy in {best} (quantize: calibrate int8/int16 in the toolchain), keeping only accuracy-critical "
        "layers in a wider type",
        tuple(str(layer.id) for layer in layers[:50]), evidence, gain,
        _guide(ctx, "'avoid fp32 precision'"))]


def lane_alignment(ctx: RuleContext) -> list[Finding]:
    """Convolutions and matrix products whose channel counts are not multiples of the profile's lane width.

    Not counted: the channels of a model input (the image's 3) and counts below :data:`LANE_MIN_CHANNELS`
    (1-channel score maps, YOLOv8's 16->1 DFL conv, 4-value box heads: the task fixes them), and every layer on a
    ``cpu`` profile: a CPU's SIMD kernels handle a remainder of channels at the cost of one partial vector, not
    a padded tile (the lane width there says how wide the vectors are, not how the work is tiled)."""
    profile, graph = ctx.profile, ctx.graph
    if profile is None or graph is None or profile.lane_width <= 1 or profile.kind == "cpu":
        return []
    lane = profile.lane_width
    inputs = {t.name for t in graph.inputs}

    def off_lane(c: int) -> bool:
        return c >= LANE_MIN_CHANNELS and c % lane != 0

    rows: list[tuple[Layer, int, int, float, bool, bool]] = []
    for node in graph.layers:
        if node.op_type not in TENSOR_OPS or node.id not in ctx.by_id:
            continue
        cin, cout = _channels(node, graph)
        cin_off, cout_off = off_lane(cin) and node.inputs[0] not in inputs, off_lane(cout)
        checked = [c for c, off in ((cin, cin_off), (cout, cout_off)) if off]
        if not checked:
            continue
        waste = max(math.ceil(c / lane) * lane / c - 1 for c in checked)
        layer = ctx.by_id[node.id]
        if waste >= LANE_WASTE and ctx.share(ctx.time_us(layer)) >= LANE_MIN_SHARE:
            rows.append((layer, cin, cout, waste, cin_off, cout_off))
    if not rows:
        return []
    rows.sort(key=lambda r: -ctx.time_us(r[0]))
    gain = sum(ctx.time_us(r[0]) * r[3] / (1 + r[3]) for r in rows if r[0].est.bound == "compute")

    def choices(c: int) -> str:
        down, up = c // lane * lane, math.ceil(c / lane) * lane
        return f"{c} -> {down} or {up}" if down else f"{c} -> {up}"

    first, cin, cout, _, cin_off, cout_off = rows[0]
    example = (f"'{first.id}' ({cin}->{cout} channels): "
               + "; ".join(choices(c) for c, off in ((cin, cin_off), (cout, cout_off)) if off))
    examples = [f"'{r[0].id}' {r[1]}->{r[2]} channels" for r in rows[:5]]
    times = _times(ctx, [r[0] for r in rows])
    evidence = times.evidence(lane_width=lane, examples=examples, max_padding_waste=round(max(r[3] for r in rows), 4))
    return [Finding(
        "lane-alignment", Severity.WARNING if times.share >= 0.05 else Severity.INFO,
        f"{len(rows)} conv/matmul layer(s) have channel counts that are not multiples of the lane width {lane}: "
        "the hardware pads them to the next multiple and computes on the padding",
        f"choose channel counts that are multiples of {lane}: rounding down removes the padded work, rounding up "
        f"costs no more than the padding already does (e.g. {example}); for a detection head, pad the class "
        "count or split the head so the big convolutions stay aligned",
        tuple(str(r[0].id) for r in rows), evidence, gain or None,
        _guide(ctx, "'32C alignment'") or (GPU_ALIGNMENT_GUIDE if profile.kind == "gpu" else
                                           f"the lane width {lane} of profile '{profile.name}'"))]


def _channels(node: Node, graph: Graph) -> tuple[int, int]:
    """(input channels, output channels) of a Conv/ConvTranspose/Gemm/MatMul; 0 when not known."""
    w = graph.tensor(node.inputs[1]) if len(node.inputs) > 1 else None
    if w is None or not w.shape:
        return 0, 0
    if node.op_type == "Conv" and len(w.shape) >= 3:
        return w.shape[1] * int(node.attr("group", 1)), w.shape[0]
    if node.op_type == "ConvTranspose" and len(w.shape) >= 3:
        return w.shape[0], w.shape[1] * int(node.attr("group", 1))
    if node.op_type == "Gemm" and len(w.shape) == 2:
        return (w.shape[1], w.shape[0]) if node.attr("transB", 0) else (w.shape[0], w.shape[1])
    if node.op_type == "MatMul" and len(w.shape) >= 2 and graph.is_constant(node.inputs[1]):
        return w.shape[-2], w.shape[-1]
    return 0, 0


def depthwise_conv(ctx: RuleContext) -> list[Finding]:
    """Depthwise convolutions (group == input channels > 1): few MACs per byte, low tensor-engine utilization."""
    graph = ctx.graph
    if graph is None:
        return []
    layers = []
    for node in graph.layers:
        if node.op_type != "Conv" or node.id not in ctx.by_id:
            continue
        group = int(node.attr("group", 1))
        cin, _ = _channels(node, graph)
        if group > 1 and group == cin:
            layers.append(ctx.by_id[node.id])
    if not layers:
        return []
    total_macs = sum(int(layer.macs or 0) for layer in ctx.layers) or 1
    macs = sum(int(layer.macs or 0) for layer in layers)
    times, macs_share = _times(ctx, layers), round(macs / total_macs, 6)
    evidence = times.evidence(count=len(layers), macs_share=macs_share)
    return [Finding(
        "depthwise-conv", Severity.WARNING if times.share >= 0.05 else Severity.INFO,
        f"{len(layers)} depthwise convolution(s) take {times.share:.1%} of the time for "
        f"{macs_share:.1%} of the MACs: tensor engines built for dense convolution reach a low "
        "utilization on them",
        "prefer regular or group convolutions with larger groups (the direction EfficientNetV2 and NFNet took for "
        "accelerators), or fuse the depthwise conv with its pointwise neighbour where the toolchain supports it",
        tuple(str(layer.id) for layer in layers), evidence, None,
        _guide(ctx, "'BPU-oriented efficient models'"))]


#: Inputs of these ops that are parameters, not data: shapes, indices, axes, steps and sentinels (Slice's
#: INT64_MAX "ends"), normalization statistics and affine terms (BatchNorm's running variance is folded into
#: the convolution before deployment), resize scales, clip bounds, pad values, quantization parameters.
PARAMETER_INPUTS: Mapping[str, frozenset[int]] = {
    "Slice": frozenset({1, 2, 3, 4}), "Reshape": frozenset({1}), "Expand": frozenset({1}),
    "Tile": frozenset({1}), "Pad": frozenset({1, 2, 3}), "Resize": frozenset({1, 2, 3}),
    "Upsample": frozenset({1}), "Clip": frozenset({1, 2}), "TopK": frozenset({1}), "Range": frozenset({0, 1, 2}),
    "Gather": frozenset({1}), "GatherElements": frozenset({1}), "GatherND": frozenset({1}),
    "ScatterND": frozenset({1}), "ScatterElements": frozenset({1}), "OneHot": frozenset({1, 2}),
    "Unsqueeze": frozenset({1}), "Squeeze": frozenset({1}), "Split": frozenset({1}),
    "ReduceSum": frozenset({1}), "ReduceMean": frozenset({1}), "ReduceMax": frozenset({1}),
    "ReduceMin": frozenset({1}), "ReduceProd": frozenset({1}), "ReduceL2": frozenset({1}),
    "BatchNormalization": frozenset({1, 2, 3, 4}), "InstanceNormalization": frozenset({1, 2}),
    "LayerNormalization": frozenset({1, 2}), "GroupNormalization": frozenset({1, 2}),
    "QuantizeLinear": frozenset({1, 2}), "DequantizeLinear": frozenset({1, 2}),
    "ConstantOfShape": frozenset({0}), "NonMaxSuppression": frozenset({2, 3, 4}),
}
#: Readers that add a constant to scores: a large constant there is an additive mask.
MASK_READERS = frozenset({"Add", "Sub", "Where"})
#: What may sit between a mask constant's reader and the Add that applies the mask: HF's
#: ``(1 - mask) * finfo.min`` is a Mul, then views and casts, then the Add.
MASK_PATH_OPS = frozenset({"Mul", "Cast", "Reshape", "Unsqueeze", "Squeeze", "Expand", "Transpose", "Identity",
                           "Flatten"})


def _applied_as_mask(graph: Graph, layer_id: str, hops: int = 4) -> bool:
    """Whether layer ``layer_id``'s output reaches an Add/Sub/Where through at most ``hops`` mask-path ops."""
    readers: dict[str, list[Node]] = {}
    for node in graph.layers:
        for name in node.inputs:
            readers.setdefault(name, []).append(node)
    frontier = [n for n in graph.layers if n.id == layer_id]
    for _ in range(hops):
        nxt = [r for n in frontier for out in n.outputs for r in readers.get(out, [])]
        if any(r.op_type in MASK_READERS for r in nxt):
            return True
        frontier = [r for r in nxt if r.op_type in MASK_PATH_OPS]
        if not frontier:
            return False
    return False


def _data_reads(graph: Graph, names: set[str]) -> dict[str, list[tuple[str, str]]]:
    """For each name in ``names``: the (layer id, op type) of the layers that read it as data (not in one of
    :data:`PARAMETER_INPUTS`' slots)."""
    reads: dict[str, list[tuple[str, str]]] = {}
    for node in graph.layers:
        params = PARAMETER_INPUTS.get(node.op_type, frozenset())
        for slot, name in enumerate(node.inputs):
            if name in names and slot not in params:
                reads.setdefault(name, []).append((node.id, node.op_type))
    return reads


def large_constants(ctx: RuleContext) -> list[Finding]:
    """Float constants beyond the fp16 range (|x| > 65504) that flow into the data path: 1e10-style additive
    masks (read by Add/Sub/Where, or scaled by a Mul whose result an Add applies: HF's ``(1 - mask) *
    finfo.min``) and huge weights or operands elsewhere.

    Not counted (they are not data, and a quantizer or fp16 export does not saturate them into wrong results):
    integer constants (shapes, indices, Slice's INT64_MAX / INT32_MAX "to the end" sentinels), and float
    constants read only in a parameter slot (:data:`PARAMETER_INPUTS`: BatchNorm's running mean/variance,
    normalization scales, resize scales, clip bounds)."""
    graph = ctx.graph
    if graph is None:
        return []
    found: dict[str, float] = {}
    for name, value in graph.const_values.items():
        big = _largest_finite(value)
        if big is not None and big > FP16_MAX:
            found[name] = big
    for name, stats in ctx.weights.items():  # weights too large for const_values, read once from the file
        if name not in found and stats.max_abs is not None and stats.max_abs > FP16_MAX:
            found[name] = stats.max_abs
    reads = _data_reads(graph, set(found))
    for node in graph.layers:  # ConstantOfShape(value=-1e10) and the like: a layer that creates the mask
        value = node.attr("value")
        big = _largest_finite(value) if isinstance(value, np.ndarray) else None
        if big is not None and big > FP16_MAX:
            found[f"{node.id}.value"] = big
            reads[f"{node.id}.value"] = [(node.id, node.op_type)]
    used = {name: big for name, big in found.items() if reads.get(name)}
    if not used:
        return []
    masks = sorted(n for n in used if any(op in MASK_READERS or n.endswith(".value") or
                                          (op in MASK_PATH_OPS and _applied_as_mask(graph, i)) for i, op in reads[n]))
    layer_ids = tuple(dict.fromkeys(i for name in sorted(used) for i, _ in reads[name]))
    largest = max(used.values())
    if masks:
        hazard = (f"{len(masks)} additive mask constant(s) hold values up to {max(used[n] for n in masks):.3g}, "
                  "beyond the fp16 range (65504): an fp16 export or a quantizer saturates them to inf or to the "
                  "top of the int range, and the masked scores turn into NaN or stop being masked")
        mitigation = ("use a mask value that still separates but stays in range: about -100 (or -30000, enough for "
                      "Softmax to give 0) instead of -1e10 or finfo(float32).min")
    else:
        hazard = (f"{len(used)} constant(s) in the data path hold values up to {largest:.3g}, beyond the fp16 "
                  "range (65504): fp16 or int8/int16 deployment saturates them and changes the result")
        mitigation = ("rescale the constant and its reader (fold the scale into a neighbouring Mul or Conv) so the "
                      "values fit the fp16 range, or keep this layer in fp32")
    return [Finding(
        "large-constants", Severity.WARNING, hazard, mitigation, layer_ids,
        {"constants": sorted(used)[:10], "masks": masks[:10], "max_abs": largest}, None,
        _guide(ctx, "'masks: do not use 1e10 or 65536'"))]


def _largest_finite(value: np.ndarray) -> float | None:
    """The largest finite |x| of a float array; ``None`` for integer and empty arrays (shapes, indices and
    their INT64_MAX sentinels are not data a quantizer or an fp16 export touches)."""
    if not isinstance(value, np.ndarray) or value.size == 0 or value.dtype.kind != "f":
        return None
    finite = np.abs(value[np.isfinite(value)])
    return float(finite.max()) if finite.size else None


#: A weight tensor counts when at least this fraction of its values is subnormal.
SUBNORMAL_MIN_FRACTION = 0.001
#: A measured gain is clear when the flushed model was faster in this share of the paired rounds (a sign test:
#: 16 of 20 happens by chance 0.6% of the time) and saved at least this share of the latency.
SUBNORMAL_CLEAR_ROUNDS = 0.8
#: A layer measured this many times its estimate is called out in the finding (the case that prompted the rule:
#: two 1x1 convs at 129x).
SUBNORMAL_SLOW_RATIO = 5.0
SUBNORMAL_CLEAR_GAIN = 0.02


def _measured_us(layer: Layer) -> float | None:
    """The measured median (not the mean), ``None`` when there is none or the runtime eliminated the layer."""
    measured = layer.measured
    if measured is None or measured.status == "eliminated" or measured.median_us is None:
        return None
    return float(measured.median_us)


def subnormal_weights(ctx: RuleContext) -> list[Finding]:
    """Weight tensors with subnormal values (0 < |w| < 1.18e-38 in fp32, 6.1e-5 in fp16): CPUs without
    flush-to-zero run every product with them 10-100x slower, which no operation count shows. Only tensors read
    as data count: a BatchNorm running variance (a :data:`PARAMETER_INPUTS` slot) is folded into the conv, its
    subnormals never multiply anything.

    The gain: with :attr:`RuleContext.measure_config`, measured (the model and its flushed copy profiled on
    ONNX Runtime, :func:`~layerscope.analysis.weights.measure_flush_gain`); else, when the run was measured and
    estimated on a CPU profile, estimated as the affected layers' measured time above their estimate; else
    not sized. The evidence's ``gain_source`` says which."""
    if ctx.graph is None:
        return []
    tensors = sorted((t for t in ctx.weights.values() if t.layers and t.subnormal
                      and t.subnormal_fraction >= SUBNORMAL_MIN_FRACTION),
                     key=lambda t: (-t.subnormal, t.name))
    if not tensors:
        return []
    layer_ids = tuple(dict.fromkeys(i for t in tensors for i in t.layers if i in ctx.by_id))
    layers = [ctx.by_id[i] for i in layer_ids]
    count = sum(t.subnormal for t in tensors)
    elements = sum(t.elements for t in tensors)
    evidence: dict[str, Any] = _evidence_times(ctx, layers) | {
        "subnormal_values": count, "subnormal_fraction": round(count / elements, 6) if elements else 0.0,
        "tensors": [{"name": t.name, "dtype": t.dtype, "subnormal": t.subnormal,
                     "fraction": round(t.subnormal_fraction, 6), "layers": list(t.layers[:5])} for t in tensors[:10]],
        "subnormal_below": {t.dtype: f"{TINY[t.dtype]:.8g}" for t in tensors if t.dtype in TINY}}
    slow = [(layer, _measured_us(layer), float(layer.est.latency_us or 0.0)) for layer in layers]
    ratios = {str(layer.id): round(m / e, 3) for layer, m, e in slow if m is not None and e > 0}
    slow_note = ""
    if ratios:
        evidence |= {"measured_over_estimated": ratios}
        worst_id = max(ratios, key=lambda i: ratios[i])
        if ratios[worst_id] >= SUBNORMAL_SLOW_RATIO:
            slow_note = f" (in this run '{worst_id}' measured {ratios[worst_id]:.0f}x its estimate)"
    gain: float | None = None
    if ctx.measure_config is not None:
        measured = measure_flush_gain(ctx.graph, [t.name for t in tensors], ctx.measure_config,
                                      rounds=ctx.measure_runs, input_specs=ctx.input_specs,
                                      weights_us={str(x.id): float(x.est.latency_us or 0.0)
                                                  for x in ctx.layers})
        gain = measured.gain_us
        evidence |= {
            "gain_source": "measured", "latency_us": round(measured.latency_us, 3),
            "flushed_latency_us": round(measured.flushed_latency_us, 3), "paired_gain_us": round(gain, 3),
            "rounds": measured.rounds, "faster_rounds": measured.faster_rounds,
            "provider": measured.provider, "cpu": measured.cpu, "flushed_values": measured.flushed_values,
            "layers_us": {i: round(measured.layer_us[i], 3) for i in layer_ids if i in measured.layer_us},
            "flushed_layers_us": {i: round(measured.flushed_layer_us[i], 3) for i in layer_ids
                                  if i in measured.flushed_layer_us}}
        share = gain / measured.latency_us if measured.latency_us > 0 else 0.0
        clear = measured.faster_rounds >= SUBNORMAL_CLEAR_ROUNDS * measured.rounds and share >= SUBNORMAL_CLEAR_GAIN
        severity = Severity.ERROR if clear and share >= 0.2 else Severity.WARNING if clear else Severity.INFO
        outcome = (f"flushing them to zero measured {measured.latency_us:.1f} -> {measured.flushed_latency_us:.1f} "
                   f"µs per inference on ONNX Runtime ({measured.provider}, {measured.cpu or 'this CPU'}; faster in "
                   f"{measured.faster_rounds} of {measured.rounds} paired rounds)")
        if not clear:
            outcome += (": no clear gain on this CPU (AMD Zen, for one, runs subnormal operands at full speed); "
                        "Intel x86 and many ARM cores do not")
    else:
        if ctx.measured and ctx.profile is not None and ctx.profile.kind == "cpu" and ratios:
            gain = sum(max(0.0, m - e) for _, m, e in slow if m is not None)
            evidence |= {"gain_source": "estimated: the affected layers' measured time above their estimate"}
        else:
            evidence |= {"gain_source": "not sized: run advise with --measure to measure the flushed model"}
        worst = max(t.subnormal_fraction for t in tensors if t.dtype == "float32") if any(
            t.dtype == "float32" for t in tensors) else 0.0
        in_float = ctx.dtype in ("fp32", "fp16", "bf16", "tf32") or (ctx.profile is not None and
                                                                       ctx.profile.kind == "cpu") or any(
            layer.est.fallback_reason for layer in layers)
        severity = Severity.WARNING if worst >= 0.1 and in_float else Severity.INFO
        outcome = "the gain is not measured (advise --measure re-profiles the model with them flushed)"
        if not in_float:
            outcome = (f"deployed in {ctx.dtype} on '{ctx.profile.name if ctx.profile else '?'}' they quantize to "
                       "0 and cost nothing there, only where the model runs in float on a CPU; " + outcome)
    names = ", ".join(f"'{t.name}' ({t.subnormal} of {t.elements})" for t in tensors[:3])
    more = f" and {len(tensors) - 3} more" if len(tensors) > 3 else ""
    readers = ", ".join(f"'{i}'" for i in layer_ids[:3]) + (" ..." if len(layer_ids) > 3 else "")
    return [Finding(
        "subnormal-weights", severity,
        f"{count} weight values are subnormal in {len(tensors)} tensor(s): {names}{more}, read by "
        f"{readers}: CPUs without flush-to-zero take a slow path (a microcode assist on x86) for "
        f"each product with them, 10-100x slower, and the estimate cannot see it{slow_note}; {outcome}",
        "flush them to zero in the model file (per weight: w = numpy_helper.to_array(t); "
        "w[np.abs(w) < np.finfo(w.dtype).tiny] = 0; write it back with numpy_helper.from_array: products of "
        "1e-38 change no output), or on ONNX Runtime's CPU provider set the session config entry "
        "'session.set_denormal_as_zero' to '1' (SessionOptions.add_session_config_entry), which turns on "
        "FTZ/DAZ in its intra-op threads; then find why training left them (dead channels under weight decay)",
        layer_ids, evidence, gain,
        "Intel optimization manual, 'Floating-point exceptions: denormals' (FTZ/DAZ); ONNX Runtime session "
        "option session.set_denormal_as_zero")]


def norm_heavy(ctx: RuleContext) -> list[Finding]:
    """Softmax / LayerNorm (and friends) on the vector units taking a large share of the time."""
    layers = [layer for layer in ctx.layers if layer.op_type in NORM_OPS
              and not layer.est.fallback_reason]
    times = _times(ctx, layers)
    if not layers or times.share < NORM_SHARE:
        return []
    ops = sorted({str(layer.op_type) for layer in layers})
    units = sorted({str(layer.est.unit or "-") for layer in layers})
    return [Finding(
        "norm-on-vector", Severity.WARNING,
        f"{len(layers)} {'/'.join(ops)} layer(s) take {times.share:.0%} of the time on the vector "
        f"unit(s) {', '.join(units)}: exponentials, reductions and divisions run far below the tensor engine's rate",
        "replace Softmax attention by SimA (normalized Q/K, no Softmax) and LayerNorm by DyT (Dynamic Tanh) where "
        "accuracy allows; keep these ops in int16/fp16, never fp32",
        tuple(str(layer.id) for layer in layers), times.evidence(ops=ops, units=units), None,
        _guide(ctx, "'VPU/VAE bottleneck: softmax, layernorm'"))]


RULES: tuple[Rule, ...] = (
    Rule("cpu-fallback", "CPU-fallback ops and why", cpu_fallback),
    Rule("cpu-at-io", "CPU ops at the model's inputs/outputs", cpu_at_io),
    Rule("output-handover", "the runtime's float32 hand-over of the model's outputs", output_handover,
         needs_graph=True),
    Rule("focus-stem", "Focus-style slice+concat stems", focus_stem),
    Rule("data-inflation", "concat/pad/slice that inflate data", data_inflation),
    Rule("weights-exceed-sram", "weights larger than on-chip SRAM", weights_exceed_sram),
    Rule("bandwidth-bound", "bandwidth-bound layers", bandwidth_bound),
    Rule("recurrent-steps", "recurrent layers classed by per-step weight reuse", recurrent_steps),
    Rule("outlier-layer", "layers measured far above their estimate, with candidate causes", outlier_layers),
    Rule("fp32-dtype", "fp32 where the profile has a faster dtype", fp32_dtype),
    Rule("lane-alignment", "channels not aligned to the lane width", lane_alignment, needs_graph=True),
    Rule("depthwise-conv", "depthwise convolutions", depthwise_conv, needs_graph=True),
    Rule("large-constants", "constants outside the fp16/int16 range", large_constants, needs_graph=True),
    Rule("subnormal-weights", "subnormal (denormal) weights", subnormal_weights, needs_graph=True),
    Rule("norm-on-vector", "Softmax/LayerNorm-heavy blocks on vector units", norm_heavy),
)


@dataclass(frozen=True)
class Advice:
    """All findings of a run, sorted, and the rules that could not run (and why)."""

    findings: tuple[Finding, ...]
    skipped: tuple[tuple[str, str], ...]


def run_rules(ctx: RuleContext, rules: Sequence[Rule] = RULES) -> Advice:
    """Every rule on ``ctx``; rules that need the graph are skipped (and listed) when it is not loaded."""
    findings: list[Finding] = []
    skipped: list[tuple[str, str]] = []
    for rule in rules:
        if rule.needs_graph and ctx.graph is None:
            skipped.append((rule.rule_id, "needs the model file"))
            continue
        if ctx.profile is None and rule.rule_id in ("weights-exceed-sram", "fp32-dtype", "lane-alignment"):
            skipped.append((rule.rule_id, "needs the run's hardware profile"))
            continue
        findings.extend(rule.fn(ctx))
    return Advice(tuple(sort_findings(group_findings(findings))), tuple(skipped))
