"""Signal processing: DFT, STFT, the window generators (HannWindow, HammingWindow, BlackmanWindow) and
MelWeightMatrix, on the vector unit.

Sources: the ONNX operator specs (onnx/docs/Operators.md, DFT-17/20, STFT-17, HannWindow-17, HammingWindow-17,
BlackmanWindow-17, MelWeightMatrix-17). Signals carry a trailing axis of 1 (real) or 2 (real, imaginary).

A transform of length N costs a radix-2 FFT: N/2·log2 N butterflies of one complex multiply (6 real FLOPs) and
two complex adds (4), i.e. :func:`fft_flops` = 5·N·⌈log2 N⌉ real FLOPs (the FFTW/benchFFT convention). The count
is the same for a real input (runtimes promote it to complex; a real-to-complex kernel does about half) and for a
length that is not a power of two (⌈log2 N⌉: a mixed-radix or Bluestein FFT is O(N log N); assumption: ONNX
Runtime's CPU kernel runs such lengths as a naive O(N²) DFT).
"""

from __future__ import annotations

import math

from layerscope.costs._common import (
    CostTable,
    has_input,
    in_shape,
    layer_cost,
    out_shape,
    per_output_cost,
    table,
    tensor_of,
)
from layerscope.costs.types import LayerCost, UnitKind
from layerscope.errors import LayerscopeError
from layerscope.model.types import Graph, Node

#: Hann/Hamming w[n] = a0 - a1·cos(2πn/N): index to float + scale by 2π/N (2) + cos + multiply + subtract = 5.
COSINE_WINDOW = 5
#: Blackman w[n] = a0 - a1·cos(2πn/N) + a2·cos(4πn/N): the angle (2) + doubling it + 2 cos + 2 multiplies +
#: subtract + add = 9.
BLACKMAN_WINDOW = 9
#: One MelWeightMatrix entry, the bin's frequency already on the mel scale (one conversion per row): distance to
#: the band's lower and upper edges (2 subtracts), the two slopes (2 divides), min of the slopes, clamp at 0 = 6.
MEL_WEIGHT = 6


def fft_flops(n: int) -> int:
    """Real FLOPs of one complex FFT of length ``n``: 5·n·⌈log2 n⌉ (radix-2; 0 for n ≤ 1)."""
    return 5 * n * math.ceil(math.log2(n)) if n > 1 else 0


def _scalar_value(node: Node, graph: Graph, index: int) -> int | None:
    """The value of the scalar input ``index`` when it is present and a known constant, else ``None``."""
    if not has_input(node, index):
        return None
    value = graph.value(node.inputs[index])
    return int(value.reshape(-1)[0]) if value is not None and value.size == 1 else None


def _length_from_output(bins: int, onesided: bool) -> int:
    """The transform length behind ``bins`` output frequencies: ``bins``, or 2·(bins - 1) when one-sided (a
    one-sided output of n//2 + 1 bins; the odd length it may also come from costs the same to 1 part in n)."""
    return max(2 * (bins - 1), 1) if onesided else bins


def _dft_axis(node: Node, graph: Graph, rank: int) -> int:
    """DFT's transformed axis: input 2 (opset 20), else the ``axis`` attribute (opset 17, default 1), else -2."""
    axis = _scalar_value(node, graph, 2)
    if axis is None:
        axis = int(node.attr("axis", 1 if graph.opset < 20 else -2))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank - 1:
        raise LayerscopeError(f"layer {node.id!r} (DFT): axis {axis} out of range for an input of rank {rank}")
    return axis


def _dft(node: Node, graph: Graph) -> LayerCost:
    """DFT(input [..., n_axis, ..., 1|2], dft_length?, axis?) -> [..., bins, ..., 2].

    FLOPs = transforms × :func:`fft_flops` (N) (+ 1 scale per output value for ``inverse``), where transforms =
    input elements / (n_axis × the trailing 1|2) and N = ``dft_length`` (a constant), else the output's extent
    along the axis (2·(bins - 1) when ``onesided``).
    """
    shape = in_shape(node, graph, 0)
    axis = _dft_axis(node, graph, len(shape))
    onesided = bool(node.attr("onesided", 0))
    n = _scalar_value(node, graph, 1) or _length_from_output(out_shape(node, graph)[axis], onesided)
    transforms = math.prod(shape) // max(shape[axis] * shape[-1], 1)
    flops = transforms * fft_flops(n)
    if node.attr("inverse", 0):
        flops += math.prod(out_shape(node, graph))
    return layer_cost(node, graph, UnitKind.VECTOR, flops=flops, params_from=())


def _stft(node: Node, graph: Graph) -> LayerCost:
    """STFT(signal [B, L, 1|2], frame_step, window? [n], frame_length?) -> [B, frames, bins, 2].

    Per frame: the window multiply (n per real signal, 2·n per complex one; none without a window) and one FFT of
    N = n = ``frame_length`` (a constant), else the window's length, else from the output's bins (2·(bins - 1)
    when ``onesided``, the default). FLOPs = B × frames × (window + :func:`fft_flops` (N)). The window is a
    setting (not a param); each signal sample is counted read once (overlapping frames hit the cache).
    """
    batch, frames, bins = out_shape(node, graph)[:3]
    n = _scalar_value(node, graph, 3)
    if n is None and has_input(node, 2):
        n = tensor_of(graph, node.inputs[2], node).shape[0]
    if n is None:
        n = _length_from_output(bins, bool(node.attr("onesided", 1)))
    window = n * in_shape(node, graph, 0)[-1] if has_input(node, 2) else 0
    return layer_cost(node, graph, UnitKind.VECTOR, flops=batch * frames * (window + fft_flops(n)), params_from=())


COSTS: CostTable = {
    **table(("DFT",), _dft),
    **table(("STFT",), _stft),
    # The generators read only scalar settings and write [size] (windows) or [dft_length//2 + 1, mel bins].
    **table(("HannWindow", "HammingWindow"), per_output_cost(COSINE_WINDOW, params_from=())),
    **table(("BlackmanWindow",), per_output_cost(BLACKMAN_WINDOW, params_from=())),
    **table(("MelWeightMatrix",), per_output_cost(MEL_WEIGHT, params_from=())),
}
