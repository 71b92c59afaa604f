"""Measured memory per layer: the sizes a runtime's profiler reports for its kernels, given to source layers, and
the peak of the tensors live at once along the kernels' execution order.

Contract of :func:`measured_memory`:

- a kernel's sizes (:class:`~layerscope.measure.kernel_trace.KernelMemory`, bytes) go to the source layer whose
  output the kernel writes: the one layer of its fused group whose outputs no other layer of the group reads (the
  other layers of the group wrote no tensor of their own and get none); a group with several such layers gets
  none (its output size cannot be split between them); a layer covered by several kernels gets the output of the
  last one to run, the sum of their parameters and the activations the first one read;
- the peak is over the kernels' execution order (the order they first ran in the profile): a layer's output is
  live from the kernel that writes it to the last kernel that reads it (through layers the runtime removed, whose
  outputs are their inputs), to the end when it is a graph output. ``peak_bytes`` is the largest sum of live
  outputs at one kernel; the graph's inputs, which no kernel writes, are not in it;
- ``arena_peak_bytes``: the runtime's own figure, the largest bytes in use its allocator reported after a kernel
  (``None`` when the runtime reports none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from layerscope.measure.kernel_trace import KernelMemory
from layerscope.model.types import Graph

if TYPE_CHECKING:  # profile.py calls this module
    from layerscope.measure.profile import KernelResult

#: How :func:`measured_memory` reads OpenVINO's compiled model, as the run file states it.
OPENVINO_SOURCE = ("OpenVINO compiled model: each executed node's output shapes and runtime precision (its plugin "
                   "reports no allocation per node); peak = the largest sum of layer outputs live at one node in "
                   "execution order (graph inputs not included)")
#: How :func:`measured_memory` reads ONNX Runtime's profile, as the run file states it.
ORT_SOURCE = ("ONNX Runtime profiler: per-kernel output_size, activation_size, parameter_size; peak = the largest "
              "sum of layer outputs live at one kernel in execution order (graph inputs not included)")


@dataclass(frozen=True)
class LayerMemory:
    """One source layer's measured sizes (bytes); ``None`` where the runtime reported none for it."""

    output_bytes: int | None = None
    activation_bytes: int | None = None
    parameter_bytes: int | None = None


@dataclass(frozen=True)
class MeasuredMemory:
    """Measured sizes per layer and the peak of live outputs (see the module docstring)."""

    layers: Mapping[str, LayerMemory]
    peak_bytes: int
    #: The layers whose outputs are live at the peak, largest output first.
    peak_layers: tuple[str, ...]
    #: The layers of the kernel that runs at the peak.
    peak_at: tuple[str, ...]
    arena_peak_bytes: int | None
    source: str = ORT_SOURCE


def measured_memory(graph: Graph, kernels: Sequence[KernelResult], source: str = ORT_SOURCE) -> MeasuredMemory | None:
    """The measured memory of ``graph`` from ``kernels`` in execution order; ``None`` when no kernel reports sizes.
    ``source``: how the runtime's sizes were read (:data:`ORT_SOURCE`, :data:`OPENVINO_SOURCE`)."""
    if not any(k.samples.memory is not None for k in kernels):
        return None
    readers = _readers(graph)
    steps: dict[str, list[int]] = {}  # layer -> the execution indices of the layer kernels that cover it
    writes: dict[str, list[KernelMemory]] = {}  # layer -> the sizes of the kernels whose output it is
    for index, kernel in enumerate(kernels):
        if kernel.category != "layer" or not kernel.layers:
            continue
        for layer_id in kernel.layers:
            steps.setdefault(layer_id, []).append(index)
        exits = _exits(kernel.layers, graph, readers)
        if kernel.samples.memory is not None and len(exits) == 1:
            writes.setdefault(exits[0], []).append(kernel.samples.memory)
    layers = {layer_id: _layer_memory(sizes) for layer_id, sizes in writes.items()}
    peak = _peak(graph, readers, steps, layers, len(kernels))
    arena = [m.in_use_bytes for k in kernels if (m := k.samples.memory) is not None and m.in_use_bytes is not None]
    return MeasuredMemory(layers=layers, peak_bytes=peak[0], peak_layers=peak[1],
                          peak_at=kernels[peak[2]].layers if peak[2] >= 0 else (),
                          arena_peak_bytes=max(arena) if arena else None, source=source)


def _readers(graph: Graph) -> dict[str, list[str]]:
    """Tensor name -> the layers that read it, in graph order."""
    readers: dict[str, list[str]] = {}
    for node in graph.layers:
        for name in node.inputs:
            if name:
                readers.setdefault(name, []).append(node.id)
    return readers


def _exits(group: Sequence[str], graph: Graph, readers: Mapping[str, list[str]]) -> list[str]:
    """The layers of ``group`` whose outputs no other layer of the group reads (or that the graph outputs)."""
    if len(group) == 1:
        return list(group)
    members = set(group)
    nodes = {node.id: node for node in graph.layers}
    outputs = {t.name for t in graph.outputs}
    return [lid for lid in group if lid in nodes and any(
        name in outputs or not members.intersection(readers.get(name, ())) for name in nodes[lid].outputs if name)]


def _layer_memory(sizes: Sequence[KernelMemory]) -> LayerMemory:
    """A layer's sizes from the kernels that write it, in execution order (see the module docstring)."""
    params = [s.parameter_bytes for s in sizes if s.parameter_bytes is not None]
    return LayerMemory(output_bytes=sizes[-1].output_bytes, activation_bytes=sizes[0].activation_bytes,
                       parameter_bytes=sum(params) if params else None)


def _peak(graph: Graph, readers: Mapping[str, list[str]], steps: Mapping[str, list[int]],
          layers: Mapping[str, LayerMemory], count: int) -> tuple[int, tuple[str, ...], int]:
    """(peak bytes, the layers whose outputs are live then, largest first; the kernel index of the peak, -1 for
    none) over ``count`` kernels."""
    nodes = {node.id: node for node in graph.layers}
    outputs = {t.name for t in graph.outputs}

    def last_read(tensors: Sequence[str], seen: set[str]) -> int:
        """The last kernel reading any of ``tensors``, through removed layers (their outputs are their inputs)."""
        end = -1
        for name in tensors:
            if name in outputs:
                return count - 1
            for reader in readers.get(name, ()):
                if reader in steps:
                    end = max(end, *steps[reader])
                elif reader not in seen:
                    seen.add(reader)
                    end = max(end, last_read(nodes[reader].outputs, seen))
        return end

    spans: list[tuple[int, int, int, str]] = []  # (start, end, bytes, layer)
    for layer_id, memory in layers.items():
        if memory.output_bytes is None or layer_id not in steps:
            continue
        start = max(steps[layer_id])
        spans.append((start, max(start, last_read(nodes[layer_id].outputs, set())), memory.output_bytes, layer_id))
    best, best_at = 0, -1
    holders: tuple[str, ...] = ()
    for step in range(count):
        live = [s for s in spans if s[0] <= step <= s[1]]
        total = sum(s[2] for s in live)
        if total > best:
            best, best_at = total, step
            holders = tuple(s[3] for s in sorted(live, key=lambda s: (-s[2], s[0])))
    return best, holders, best_at
