"""The layout-Transpose class (``layout_transpose_efficiency``): which Transposes belong to it (a 4-D Transpose that
moves the channel axis to or from the last position for a last-axis LayerNorm, fused or as opset 11 exports it), how
the NPU roofline prices them, and the board fit recovering a known factor for them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerscope.analysis.board import BoardEntry, board_runs, derive_profile, fit_board
from layerscope.analysis.calibrate import Params, base_overheads, calibrated_profile, predict_us, profile_toml
from layerscope.estimator import estimate_graph
from layerscope.estimator.layout import dropped_transposes, last_axis_normalisations, layout_transposes
from layerscope.model import load_model
from layerscope.targets import load_profile
from layerscope.targets.schema import load_profile_file

DATASHEET = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "profiles"
NHWC, NCHW = [0, 2, 3, 1], [0, 3, 1, 2]


class _Net:
    """A graph under construction with ``onnx.helper``: nodes named ``t1``, ``n1``..., float32 initializers."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def node(self, name: str, op: str, inputs: list[str], **attrs: object) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def const(self, name: str, value: np.ndarray | float) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    def layernorm(self, tag: str, x: str, channels: int, *, decomposed: bool, axis: int = -1) -> str:
        """LayerNorm over ``axis``: one ``LayerNormalization``, or torch's opset-11 ops."""
        weight = self.const(f"{tag}.w", np.ones(channels))
        bias = self.const(f"{tag}.b", np.zeros(channels))
        if not decomposed:
            return self.node(tag, "LayerNormalization", [x, weight, bias], axis=axis, epsilon=1e-6)
        mean = self.node(f"{tag}.mean", "ReduceMean", [x], axes=[axis], keepdims=1)
        centred = self.node(f"{tag}.sub", "Sub", [x, mean])
        square = self.node(f"{tag}.pow", "Pow", [centred, self.const(f"{tag}.two", 2.0)])
        variance = self.node(f"{tag}.var", "ReduceMean", [square], axes=[axis], keepdims=1)
        shifted = self.node(f"{tag}.eps", "Add", [variance, self.const(f"{tag}.e", 1e-6)])
        std = self.node(f"{tag}.sqrt", "Sqrt", [shifted])
        normed = self.node(f"{tag}.div", "Div", [centred, std])
        return self.node(f"{tag}.bias", "Add", [self.node(f"{tag}.mul", "Mul", [normed, weight]), bias])

    def save(self, path: Path, x: str, shape: tuple[int, ...]) -> Path:
        """The model from input ``"x"`` of ``shape`` to output ``x`` of the same shape, checked and saved."""
        graph = helper.make_graph(self.nodes, "layout", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)], initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        onnx.checker.check_model(model)
        onnx.save(model, str(path))
        return path


def _norm_block(path: Path, *, decomposed: bool, axis: int = -1, shape: tuple[int, ...] = (1, 8, 6, 6)) -> Path:
    """x -> t1 (to NHWC) -> LayerNorm over ``axis`` -> t2 (back to NCHW) -> t3 (to NHWC) -> Relu -> t4 (back):
    t1 and t2 wrap the norm, t3 and t4 the same shapes around a Relu."""
    net = _Net()
    y = net.node("t1", "Transpose", ["x"], perm=NHWC)
    y = net.node("t2", "Transpose", [net.layernorm("n1", y, shape[1], decomposed=decomposed, axis=axis)], perm=NCHW)
    y = net.node("t3", "Transpose", [y], perm=NHWC)
    y = net.node("t4", "Transpose", [net.node("r", "Relu", [y])], perm=NCHW)
    return net.save(path, y, shape)


@pytest.mark.parametrize("decomposed", [False, True], ids=["fused", "decomposed"])
def test_the_transposes_around_a_last_axis_layernorm_are_layout_transposes(tmp_path: Path, decomposed: bool) -> None:
    graph = load_model(_norm_block(tmp_path / "m.onnx", decomposed=decomposed))
    norm, = last_axis_normalisations(graph)
    assert (norm.input, norm.output) == ("t1", "n1.bias" if decomposed else "n1")
    assert len(norm.layers) == (9 if decomposed else 1)
    # t3 and t4 have the same permutations and shapes, around a Relu: ordinary Transposes
    assert layout_transposes(graph) == {"t1", "t2"}


@pytest.mark.parametrize("decomposed", [False, True], ids=["fused", "decomposed"])
def test_a_norm_over_another_axis_is_not_one(tmp_path: Path, decomposed: bool) -> None:
    # after t1 the tensor is (N, H, W, C): a norm over axis 2 (W) is no channel norm
    graph = load_model(_norm_block(tmp_path / "m.onnx", decomposed=decomposed, axis=2))
    assert last_axis_normalisations(graph) == ()
    assert layout_transposes(graph) == frozenset()


def test_a_transpose_whose_output_another_layer_reads_and_a_3d_one_are_not(tmp_path: Path) -> None:
    net = _Net()
    y = net.node("t1", "Transpose", ["x"], perm=NHWC)
    z = net.node("t2", "Transpose", [net.layernorm("n1", y, 8, decomposed=True)], perm=NCHW)
    side = net.node("t3", "Transpose", [net.node("s", "Sigmoid", [y])], perm=NCHW)  # t1's output read by a Sigmoid
    out = net.node("sum", "Add", [z, side])
    graph = load_model(net.save(tmp_path / "m.onnx", out, (1, 8, 6, 6)))
    assert layout_transposes(graph) == {"t2"}
    # tokens (N, C, L) -> (N, L, C) around a LayerNorm: not a 4-D feature map
    net = _Net()
    y = net.node("t1", "Transpose", ["x"], perm=[0, 2, 1])
    y = net.node("t2", "Transpose", [net.layernorm("n1", y, 8, decomposed=False)], perm=[0, 2, 1])
    graph = load_model(net.save(tmp_path / "tokens.onnx", y, (1, 8, 36)))
    assert len(last_axis_normalisations(graph)) == 1
    assert layout_transposes(graph) == frozenset()


def test_the_npu_roofline_prices_them_at_their_own_efficiency(tmp_path: Path) -> None:
    graph = load_model(_norm_block(tmp_path / "m.onnx", decomposed=True, shape=(1, 32, 64, 64)))
    profile = load_profile_file(DATASHEET / "rdk-x5.toml")
    assert profile.layout_transpose_efficiency == 1.0 and profile.efficiency_for("Transpose") == 0.002
    est = {layer.layer_id: layer for layer in estimate_graph(graph, profile).layers}
    # t1 and t3 have one cost class (same shapes): the layout one moves at BPU-move's rate, the other at 0.002 of it
    assert est["t3"].compute_us == pytest.approx(500 * est["t1"].compute_us)
    assert est["t4"].compute_us == pytest.approx(500 * est["t2"].compute_us)
    assert est["t3"].compute_us == pytest.approx(32 * 64 * 64 / 1e3)  # one ns per element
    plain = {layer.layer_id: layer for layer in
             estimate_graph(graph, dataclasses.replace(profile, layout_transpose_efficiency=None)).layers}
    assert plain["t1"].compute_us == pytest.approx(est["t3"].compute_us)
    assert all(plain[k] == est[k] for k in est if k not in ("t1", "t2"))


def _stack(path: Path, norms: int, others: int, hw: int) -> Path:
    """``norms`` LayerNorm2d blocks (decomposed) and ``others`` Transpose-Relu-Transpose blocks on (1, 32, hw, hw)."""
    net = _Net()
    y = "x"
    for i in range(norms):
        t = net.node(f"a{i}", "Transpose", [y], perm=NHWC)
        y = net.node(f"b{i}", "Transpose", [net.layernorm(f"n{i}", t, 32, decomposed=True)], perm=NCHW)
    for i in range(others):
        t = net.node(f"c{i}", "Transpose", [y], perm=NHWC)
        y = net.node(f"d{i}", "Transpose", [net.node(f"r{i}", "Relu", [t])], perm=NCHW)
    return net.save(path, y, (1, 32, hw, hw))


def test_the_board_fit_recovers_a_known_layout_factor(tmp_path: Path) -> None:
    shapes = [(n, o, hw) for n, o in ((6, 0), (0, 4), (3, 3), (1, 6), (8, 1)) for hw in (32, 64, 128)]
    models = [BoardEntry(str(_stack(tmp_path / f"s{i}.onnx", n, o, hw)), 1.0, family=f"f{i % 5}")
              for i, (n, o, hw) in enumerate(shapes)]
    # the datasheet X5 with no per-inference cost and its layout Transposes priced as every other Transpose (one
    # element per cycle)
    profile = dataclasses.replace(load_profile_file(DATASHEET / "rdk-x5.toml"), task_overhead_us=0.0,
                                  output_bytes_per_s=None, layout_transpose_efficiency=0.002)
    runs = board_runs(models, profile)
    marked = {t.layer_id for r in runs for t in r.layers if t.layout}
    assert marked == {f"{c}{i}" for c in "ab" for i in range(8)}
    groups = sorted({t.group for r in runs for t in r.layers})
    base = base_overheads(profile, groups)
    # a board that moves a layout Transpose 4x faster than other Transposes (still above its DDR time), everything
    # else as profiled
    truth = Params(dict.fromkeys(groups, 1.0), base, 1.0, base, layout_scale=0.25)
    board = [dataclasses.replace(r, latency_us=predict_us(r, truth)) for r in runs]
    assert min(r.latency_us / r.base_estimate_us for r in board) < 0.5  # the norm-heavy stacks
    fitted = fit_board(board, base)
    # the prior (sd 2 in log around the profile's 1) keeps 15 models' fit a little above the truth
    assert fitted.layout_scale == pytest.approx(0.25, rel=0.25)
    assert fitted.compute_scale["BPU-move/move"] == pytest.approx(1.0, rel=0.1)
    # the calibrated profile writes it as the efficiency and estimates what the fit predicts
    path = tmp_path / "fitted.toml"
    path.write_text(profile_toml(calibrated_profile(profile, fitted, name="fitted", models=["m"])), encoding="utf-8")
    written = load_profile_file(path)
    assert written.layout_transpose_efficiency == pytest.approx(0.002 / fitted.layout_scale)
    assert "layout Transpose compute time x" in (written.source_for("layout_transpose_efficiency") or "")
    for run, again in zip(board, board_runs(models, written), strict=True):
        assert again.base_estimate_us == pytest.approx(predict_us(run, fitted), rel=1e-4)
    # a profile that does not price them apart marks none and fits no factor
    plain = dataclasses.replace(profile, layout_transpose_efficiency=None)
    runs = board_runs(models[:3], plain)
    assert not any(t.layout for r in runs for t in r.layers)
    assert fit_board(runs, base_overheads(plain, groups)).layout_scale == 1.0


def test_the_derived_chip_keeps_the_layout_efficiency(tmp_path: Path) -> None:
    parent = dataclasses.replace(load_profile("rdk-s100"), layout_transpose_efficiency=0.5)
    path = tmp_path / "rdk-s100p.toml"
    path.write_text(derive_profile(parent, "rdk-s100p"), encoding="utf-8")
    child = load_profile_file(path)
    assert child.layout_transpose_efficiency == 0.5
    assert "derived from rdk-s100" in (child.source_for("layout_transpose_efficiency") or "")


def _save_any(net: _Net, path: Path, x: str, shape: tuple[int, ...], out_shape: tuple[int, ...]) -> Path:
    """``net`` from input ``"x"`` of ``shape`` to output ``x`` of ``out_shape``, checked and saved."""
    graph = helper.make_graph(net.nodes, "layout", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, out_shape)],
                              initializer=net.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def test_a_permute_of_a_reshape_is_dropped_and_a_head_permute_is_not(tmp_path: Path) -> None:
    # x.reshape(B, H, W, C).permute(0, 3, 1, 2) (t3) against the same permute of a Relu's output (t4)
    net = _Net()
    shape = net.inits.append(numpy_helper.from_array(np.array([1, 6, 6, 8], dtype=np.int64), "bhwc")) or "bhwc"
    t3 = net.node("t3", "Transpose", [net.node("rs", "Reshape", ["x", shape])], perm=NCHW)
    t4 = net.node("t4", "Transpose", [net.node("r", "Relu", [net.node("rs2", "Reshape", ["x", shape])])], perm=NCHW)
    out = net.node("sum", "Add", [t3, t4])
    graph = load_model(_save_any(net, tmp_path / "reshape.onnx", out, (1, 36, 8), (1, 8, 6, 6)))
    assert dropped_transposes(graph) == {"t3"}
    # a detection head's permute(0, 2, 3, 1) to a model output stays priced (the float32 hand-over it stands for)
    net = _Net()
    head = net.node("t1", "Transpose", [net.node("r", "Relu", ["x"])], perm=NHWC)
    graph = load_model(_save_any(net, tmp_path / "head.onnx", head, (1, 8, 6, 6), (1, 6, 6, 8)))
    assert dropped_transposes(graph) == frozenset()


def _softmax_between(path: Path, *, middle: str = "") -> Path:
    """Scores (1, 2, 4, 4) -> t1 (0, 3, 1, 2) -> softmax over axis 1 as the RDK X5 zoo exports it (ReduceMax, Sub,
    Exp, ReduceSum, Div; ``middle``: one more op after Exp) -> t2 (0, 2, 3, 1) -> Relu."""
    net = _Net()
    t = net.node("t1", "Transpose", ["x"], perm=NCHW)
    peak = net.node("max", "ReduceMax", [t], axes=[1], keepdims=1)
    e = net.node("exp", "Exp", [net.node("sub", "Sub", [t, peak])])
    if middle:
        e = net.node("mid", middle, [e])
    axes = net.inits.append(numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")) or "axes"
    total = net.node("sum", "ReduceSum", [e, axes], keepdims=1)
    y = net.node("t2", "Transpose", [net.node("div", "Div", [e, total])], perm=NHWC)
    return _save_any(net, path, net.node("out", "Relu", [y]), (1, 2, 4, 4), (1, 2, 4, 4))


def test_the_transposes_that_wrap_a_decomposed_softmax_cancel(tmp_path: Path) -> None:
    graph = load_model(_softmax_between(tmp_path / "softmax.onnx"))
    assert dropped_transposes(graph) == {"t1", "t2"}
    # a Relu inside is no softmax op: the pair stays
    assert dropped_transposes(load_model(_softmax_between(tmp_path / "relu.onnx", middle="Relu"))) == frozenset()


def test_yolo12_area_attention_keeps_the_transposes_the_compiled_graph_keeps(tmp_path: Path) -> None:
    # rdk_model_zoo hb_mapper_log_yolo12n.txt: 40 Transposes on the BPU, five per area-attention block
    from layerscope.samples import sample_path

    graph = load_model(sample_path("ultralytics_detect", cache_dir=tmp_path, version="12", scale="n",
                                   attention="decomposed"))
    dropped = dropped_transposes(graph)
    kept = [n.name for n in graph.layers if n.op_type == "Transpose" and n.id not in dropped]
    assert len([n for n in kept if "/attn/" not in n]) == 6  # the head's output permutes, priced
    block = sorted(n.rsplit("/", 1)[1] for n in kept if "/model.6/m.0/m.0.0/attn/" in n)
    # exported: Transpose .. Transpose_9; the log keeps Transpose, Transpose_2, Transpose_4 (one N x N), Transpose_5,
    # Transpose_6; here the softmax's pair (Transpose_3, Transpose_4) cancels and Transpose_1 stays
    assert block == ["Transpose", "Transpose_1", "Transpose_2", "Transpose_5", "Transpose_6", "Transpose_7"]
    assert len(kept) == 8 * 6 + 6


def test_the_npu_roofline_leaves_the_dropped_transposes_out_and_the_cpu_one_keeps_them(tmp_path: Path) -> None:
    graph = load_model(_softmax_between(tmp_path / "softmax.onnx"))
    datasheet = load_profile_file(DATASHEET / "rdk-x5.toml")
    npu = {layer.layer_id: layer for layer in estimate_graph(graph, datasheet).layers}
    assert npu["t1"].latency_us == npu["t2"].latency_us == 0.0 and npu["t1"].ddr_read_bytes == 0
    assert npu["div"].latency_us > 0
    host = {layer.layer_id: layer for layer in estimate_graph(graph, load_profile("host")).layers}
    assert host["t1"].latency_us > 0 and host["t2"].latency_us > 0
