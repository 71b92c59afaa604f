"""A kernel timed alone on OpenVINO pays the conversions its CPU plugin puts at the model's edges (a ``Reorder``
from the caller's plain float32 tensor into the blocked layout and precision the convolution computes in, and
back); in its model a kernel reads and writes its neighbours' layout. Kernels are timed net of theirs, and a
model's prediction adds the reorders its compiled runtime model runs. Whether the plugin reorders at all, and to
which layout and precision, is the CPU's choice: the tests read what it chose."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from _predictors import relu_kernel, roofline_predictor
from layerscope.analysis.predictor import REORDER_FAMILY, ReorderFit, predict_model
from layerscope.estimator import estimate_graph
from layerscope.measure.differential import SampleStore
from layerscope.measure.kernels import TimingConfig, kernel_family, model_kernels, time_kernels
from layerscope.measure.session import SessionConfig
from layerscope.model import load_model
from layerscope.runtimes.openvino.kernels import OpenVinoKernels, openvino_kernel_groups, openvino_reorders
from layerscope.targets import load_profile

pytest.importorskip("openvino")

CONFIG = SessionConfig(threads=1)
#: The chain's tensors: [1, 16, 16, 16] float32.
TENSOR_BYTES = 16 * 16 * 16 * 4


def _chain(path: Path, convs: int = 3) -> Path:
    """``convs`` 3x3 convolutions of 16 channels on 16x16, one after the other."""
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(convs):
        inits.append(numpy_helper.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32), f"w{i}"))
        out = "y" if i == convs - 1 else f"h{i}"
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [out], name=f"conv{i}", pads=[1, 1, 1, 1]))
        x = out
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 16, 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _reorders_or_skip(path: Path) -> list[tuple[str, int, tuple[str, ...]]]:
    found = openvino_reorders(load_model(path), CONFIG)
    if not found:
        pytest.skip("OpenVINO's CPU plugin runs the chain in the caller's layout and precision on this CPU")
    return found


def test_the_chain_runs_its_reorders_at_its_edges_only(tmp_path: Path) -> None:
    path = _chain(tmp_path / "chain.onnx")
    found = _reorders_or_skip(path)
    # the chain stays in the plugin's layout: a reorder from the input (where the first conv does not read the
    # caller's layout), one to the output, none between the convs; each of the float32 side's bytes (the larger of
    # the two element sizes: an f32 -> bf16 reorder is counted at 4 bytes an element)
    assert 1 <= len(found) <= 2
    assert all(nbytes == TENSOR_BYTES for _, nbytes, _ in found)
    # the output's serves the conv that writes it; the input's serves no layer (the caller's tensor taken in:
    # ``runtime_nodes``' contract), yet is predicted, as a kernel of no layer
    assert {layers for _, _, layers in found} <= {(), ("conv2",)}


def test_each_conv_of_the_chain_is_timed_without_the_reorders_it_pays_alone(tmp_path: Path) -> None:
    path = _chain(tmp_path / "chain.onnx")
    _reorders_or_skip(path)
    _, kernels, _ = model_kernels(path, None, CONFIG, OpenVinoKernels())
    convs = [k for k in kernels if k.family == "conv"]
    assert len(convs) == 3
    timings, _, _ = time_kernels(convs, SampleStore(None), TimingConfig(visits=3), runner=OpenVinoKernels())
    assert len(timings) == 3
    for t in timings:
        # alone each conv converts the caller's tensors at its edges: each conversion names the tensor it
        # converts (its bytes come from the kernel model's own tensors), its time taken off the kernel's
        assert t.boundary_kernels >= 1 and t.boundary_bytes == t.boundary_kernels * TENSOR_BYTES
        assert t.boundary_us >= 0.0  # less the counters' floor: a 16 KiB reorder may read as little as it
        assert t.latency_us == pytest.approx(max(float(np.median(t.samples_us)) - t.overhead_us - t.boundary_us,
                                                 0.05))


def test_a_kernel_model_the_plugin_runs_in_place_costs_nothing_at_its_boundary() -> None:
    (timing,), _, _ = time_kernels([relu_kernel()], SampleStore(None), TimingConfig(visits=3), runner=OpenVinoKernels())
    if timing.boundary_kernels:
        pytest.skip("OpenVINO's CPU plugin converts a Relu's tensors on this CPU")
    assert (timing.boundary_us, timing.boundary_bytes) == (0.0, 0)
    assert timing.latency_us == pytest.approx(max(float(np.median(timing.samples_us)) - timing.overhead_us, 0.05))


def test_the_chains_prediction_adds_its_reorders_once(tmp_path: Path) -> None:
    path = _chain(tmp_path / "chain.onnx")
    found = _reorders_or_skip(path)
    graph = load_model(path)
    assert OpenVinoKernels().reorders(graph, CONFIG) == found
    ops = {n.id: n.op_type for n in graph.layers}
    kernels = [(name, kernel_family([ops[i] for i in layers]), layers)
               for name, layers in openvino_kernel_groups(graph, CONFIG)]
    predictor = roofline_predictor(3.0, reorders=ReorderFit(per_kernel_us=10.0, us_per_mib=0.0, samples=5))
    estimate = estimate_graph(graph, load_profile("host"), "fp32")
    without = predict_model(predictor, graph, estimate, kernels, "openvino")
    pred = predict_model(predictor, graph, estimate, kernels, "openvino", reorders=found)
    reorders = [k for k in pred.kernels if k.family == REORDER_FAMILY]
    assert len(reorders) == len(found) and all(k.latency_us == 10.0 for k in reorders)
    assert pred.latency_us == pytest.approx(without.latency_us + 10.0 * len(found))
