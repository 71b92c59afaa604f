"""Cost model over the model zoo that ships with the onnx package (``backend/test/data/light``).

Each model gets a cost for every layer, every op is known, and the tensor-engine MACs agree with an
independent count made here from ONNX shape inference of the raw file (not from layerscope's
graph). These light models build their weights with ConstantOfShape from int64 shape
initializers; plain ``infer_shapes`` resolves them (ConstantOfShape reads its initializer input),
so ``data_prop`` is not needed: ``_raw_shapes`` asserts every shape the count reads is static.
"""

from __future__ import annotations

import math
from pathlib import Path

import onnx
import pytest
from onnx import helper, shape_inference

from layerscope.costs import cost_graph, is_known
from layerscope.model import load_model

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = sorted(LIGHT.glob("*.onnx"))
TENSOR_ENGINE_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


def _raw_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    inferred = shape_inference.infer_shapes(model)
    shapes: dict[str, tuple[int, ...]] = {}
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        dims = vi.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = tuple(d.dim_value for d in dims)
    for init in inferred.graph.initializer:
        shapes[init.name] = tuple(init.dims)
    return shapes


def independent_macs(path: Path) -> int:
    """Σ MACs of Conv/ConvTranspose/Gemm/MatMul, straight from the raw ONNX file.

    Conv: output elements × Cin/groups × kernel = out × prod(W.shape[1:]);
    ConvTranspose: input elements × prod(W.shape[1:]); Gemm: output elements × K (A's dim 0 with
    transA, else dim 1); MatMul: output elements × A's last dim.
    """
    model = onnx.load(str(path))
    shapes = _raw_shapes(model)
    total = 0
    for node in model.graph.node:
        if node.op_type not in TENSOR_ENGINE_OPS:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        a, w, y = shapes[node.input[0]], shapes[node.input[1]], shapes[node.output[0]]
        if node.op_type == "Conv":
            total += math.prod(y) * math.prod(w[1:])
        elif node.op_type == "ConvTranspose":
            total += math.prod(a) * math.prod(w[1:])
        elif node.op_type == "Gemm":
            total += math.prod(y) * (a[0] if attrs.get("transA", 0) else a[1])
        else:
            total += math.prod(y) * a[-1]
    return total


@pytest.fixture(scope="module", params=MODELS, ids=[p.stem for p in MODELS])
def zoo(request: pytest.FixtureRequest) -> Path:
    path: Path = request.param
    return path


def test_zoo_is_present() -> None:
    assert len(MODELS) >= 9, f"expected the onnx package's light models under {LIGHT}"


def test_every_layer_costed_and_known(zoo: Path) -> None:
    graph = load_model(zoo)
    costs = cost_graph(graph)
    assert [c.layer_id for c in costs] == [n.id for n in graph.layers]
    unknown = sorted({(n.domain, n.op_type) for n in graph.layers if not is_known(n.domain, n.op_type)})
    assert unknown == []
    assert all(c.known for c in costs)
    assert all(c.flops >= 2 * c.macs >= 0 for c in costs)
    assert all(c.bytes_written > 0 or c.unit_kind.value == "zero_copy" for c in costs)


def test_tensor_macs_match_independent_count(zoo: Path) -> None:
    ours = sum(c.macs for c in cost_graph(load_model(zoo)) if c.op_type in TENSOR_ENGINE_OPS)
    theirs = independent_macs(zoo)
    assert theirs > 0
    assert ours == pytest.approx(theirs, rel=0.01)


def test_resnet50_macs() -> None:
    """ResNet-50 at 224×224: 4.089 GMACs, checked by hand (bottleneck widths w, outputs 4w):

    conv1 7×7 3->64 s2: 112²·64·147                                           =   118,013,952
    stage 2 (56², w 64, 3 blocks): block 1 (1×1 64->64, 3×3, 1×1 ->256, 1×1 shortcut 64->256)
        = 3136·(64·64 + 64·576 + 256·64 + 256·64) = 231,211,008; blocks 2-3 (1×1 256->64, 3×3,
        1×1 ->256) = 2 × 3136·(64·256 + 64·576 + 256·64) = 436,731,904         =   667,942,912
    stage 3 (28², w 128, 4 blocks; stride 2 in the 3×3 and the shortcut): block 1 =
        3136·128·256 + 784·(128·1152 + 512·128 + 512·256) = 372,506,624; blocks 2-4 =
        3 × 784·(128·512 + 128·1152 + 512·128) = 655,097,856                     = 1,027,604,480
    stage 4 (14², w 256, 6 blocks): 372,506,624 + 5 × 218,365,952                = 1,464,336,384
    stage 5 (7², w 512, 3 blocks): 372,506,624 + 2 × 218,365,952                 =   809,238,528
    fc 2048->1000                                                               =     2,048,000
    total                                                                       = 4,089,184,256
    """
    path = LIGHT / "light_resnet50.onnx"
    costs = cost_graph(load_model(path))
    macs = sum(c.macs for c in costs if c.op_type in TENSOR_ENGINE_OPS)
    assert macs == pytest.approx(4.089e9, rel=0.02)
    assert macs == 4_089_184_256
    assert sum(c.macs for c in costs if c.op_type == "Gemm") == 2_048_000
