"""One option vocabulary, round two: ``-o/--output`` on ``sweep`` (``--out`` deprecated) and ``lint``, ``--format
table`` in ``report`` (``terminal`` deprecated), ``profile --ov-streams`` (``--streams`` deprecated: it means
concurrent requests in ``bench``); a model ONNX Runtime rejects is bad input (exit 2) in a sweep cell; the numbers
on screen say what they are: a sweep's k on another device than the target is named, ``reconcile`` names each
run's runtime and a vendor's statistic as the vendor names it, stress's buffer-to-cache ratio is rounded to
meaning, and ``calibrate`` refuses a fit outside physical bounds without ``--force``."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from conftest import ModelWriter
from layerscope.cli.main import main
from layerscope.run import save_run
from layerscope.runfile import load_document

DEPRECATED = "is deprecated and will be removed in the next release; use"
HORIZON = Path(__file__).parent / "fixtures" / "importers" / "horizon"
LINT = Path(__file__).parent / "fixtures" / "lint"


@pytest.fixture()
def tiny(write_model: ModelWriter) -> Path:
    """y = relu(x + x): one input, two layers; cheap to run."""
    nodes = [helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    return write_model(nodes, [("x", TensorProto.FLOAT, [1, 8])], [("y", TensorProto.FLOAT, [1, 8])])


@pytest.fixture()
def rejected(tmp_path: Path) -> Path:
    """A valid ONNX graph (the checker accepts an op of a custom domain) that ONNX Runtime refuses to load: no
    kernel is registered for com.acme:Frobnicate."""
    graph = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.acme")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.acme", 1)])
    path = tmp_path / "rejected.onnx"
    onnx.save(model, str(path))
    return path


def _deprecation_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if DEPRECATED in line]


# --- renamed options: the new spelling, and the old one with its one line ---------------------------------------

def test_sweep_output_and_the_old_out(tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("-o", "--output"):
        assert main(["sweep", str(tiny), flag, str(tmp_path / flag.strip("-")), "--dry-run"]) == 0
        printed = capsys.readouterr()
        assert "1 cells" in printed.out and not _deprecation_lines(printed.err)
    assert main(["sweep", str(tiny), "--out", str(tmp_path / "old"), "--no-ray"]) == 0
    printed = capsys.readouterr()
    assert (tmp_path / "old" / "runs.parquet").is_file()
    assert _deprecation_lines(printed.err) == [f"layerscope: warning: --out {DEPRECATED} -o/--output"]
    assert main(["sweep", str(tiny), "--dry-run"]) == 2
    assert "Missing option '-o' / '--output'" in capsys.readouterr().err
    assert main(["sweep", str(tiny), "-o", str(tmp_path / "a"), "--out", str(tmp_path / "b"), "--dry-run"]) == 2
    assert "not both" in capsys.readouterr().err


def test_sweep_help_explains_itself(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--help"]) == 0
    text = capsys.readouterr().out
    assert "layerscope sweep --help" not in text and "-o, --output DIR" in text and "--out " not in text


def test_lint_output_writes_the_report_or_the_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(LINT / "bad_s100.yaml"), "-o", str(tmp_path / "lint.txt")]) == 1  # errors: still 1
    assert capsys.readouterr().out.strip() == f"lint report: {tmp_path / 'lint.txt'}"
    text = (tmp_path / "lint.txt").read_text()
    assert text.startswith(f"{LINT / 'bad_s100.yaml'}: 4 error(s)") and "[error] lint.core-num" in text
    assert main(["lint", str(LINT / "bad_s100.yaml"), "--format", "json", "--output", str(tmp_path / "l.json")]) == 1
    assert json.loads((tmp_path / "l.json").read_text())["by_severity"]["error"] == 4
    assert main(["lint", str(LINT / "good_s100.yaml"), "-o", str(tmp_path / "good.txt")]) == 0


def test_report_format_table_and_the_old_terminal(tiny: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run.json"
    assert main(["estimate", str(tiny), "-o", str(run)]) == 0
    capsys.readouterr()
    assert main(["report", str(run), "--format", "table"]) == 0
    new = capsys.readouterr()
    assert "estimate" in new.out and "Add" in new.out and not _deprecation_lines(new.err)
    assert main(["report", str(run), "--format", "terminal"]) == 0
    old = capsys.readouterr()
    assert old.out == new.out
    assert _deprecation_lines(old.err) == [f"layerscope: warning: --format terminal {DEPRECATED} --format table"]
    assert main(["report", "--help"]) == 0
    assert "[table|html|csv|md|trace|onnx]" in " ".join(capsys.readouterr().out.split())


def test_profile_ov_streams_and_the_old_streams(tiny: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("openvino")
    common = ["--backend", "openvino", "--precision", "f32", "--runs", "2", "--warmup", "0", "--top", "0"]
    assert main(["profile", str(tiny), *common, "--ov-streams", "2", "-o", str(tmp_path / "new.json")]) == 0
    assert not _deprecation_lines(capsys.readouterr().err)
    assert main(["profile", str(tiny), *common, "--streams", "1", "-o", str(tmp_path / "old.json")]) == 0
    assert _deprecation_lines(capsys.readouterr().err) == [f"layerscope: warning: --streams {DEPRECATED} --ov-streams"]
    assert load_document(tmp_path / "new.json")["measurement"]["streams"] == 2  # NUM_STREAMS as OpenVINO set it
    assert load_document(tmp_path / "old.json")["measurement"]["streams"] == 1


# --- exit codes: a model the runtime rejects is bad input -----------------------------------------------------------

def test_a_sweep_cell_on_a_model_onnx_runtime_rejects_records_exit_2(rejected: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    assert main(["sweep", str(rejected), "--mode", "profile", "--runs", "1", "--warmup", "0", "--no-ray",
                 "-o", str(out)]) == 2
    (record_path,) = (out / "failed").iterdir()
    record = json.loads(record_path.read_text())
    assert record["exit_code"] == 2 and "com.acme:Frobnicate" in record["error"]
    assert "Frobnicate" in capsys.readouterr().err


def test_an_unwrapped_onnx_runtime_rejection_is_bad_input(rejected: Path) -> None:
    import onnxruntime as ort

    from layerscope.sweep.tasks import exit_code_of

    with pytest.raises(Exception) as raised:
        ort.InferenceSession(str(rejected), providers=["CPUExecutionProvider"])
    assert type(raised.value).__module__.startswith("onnxruntime")
    assert exit_code_of(raised.value) == 2
    assert exit_code_of(ValueError("a bug of ours")) == 1


# --- numbers on screen -----------------------------------------------------------------------------------------------

def test_sweep_names_k_that_compares_two_devices(tiny: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep"
    assert main(["sweep", str(tiny), "-t", "host,rdk-s100", "--mode", "profile", "--runs", "2", "--warmup", "0",
                 "--no-ray", "-o", str(out)]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1  # the rdk-s100 cell; the host cell measures its own target
    assert "1 cell(s)" in warnings[0] and "'rdk-s100'" in warnings[0] and "k compares two devices" in warnings[0]
    page = (out / "leaderboard.html").read_text()
    assert page.count("WARNING:") == 1 and "k compares two devices" in page
    import pyarrow.parquet as pq

    rows = pq.read_table(out / "runs.parquet").to_pylist()
    mismatch = {row["cell.target"]: row["k.device_mismatch"] for row in rows}
    assert mismatch["host"] is None and "rdk-s100" in mismatch["rdk-s100"]


def test_reconcile_of_one_model_on_two_runtimes_names_each(tiny: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("openvino")
    ort_run, ov_run = tmp_path / "ort.json", tmp_path / "ov.json"
    common = ["--runs", "3", "--warmup", "1", "--top", "0"]
    assert main(["profile", str(tiny), *common, "-o", str(ort_run)]) == 0
    assert main(["profile", str(tiny), *common, "--backend", "openvino", "--precision", "f32", "-o", str(ov_run)]) == 0
    capsys.readouterr()
    assert main(["reconcile", str(ort_run), str(ov_run), "--save"]) == 0
    out = capsys.readouterr().out
    spread = [line.split() for line in out[out.index("k across runs"):].splitlines() if line.strip()]
    assert spread[1] == ["model", "(measured", "by)", "k"]
    # one model (its graph is named g) twice, told apart by what measured it
    assert [row[:-1] for row in spread[3:5]] == [["g", "(ONNX", "Runtime", "CPUExecutionProvider)"],
                                                 ["g", "(OpenVINO", "CPU", "f32)"]]
    assert main(["report", str(ov_run), "--format", "table"]) == 0  # the saved spread names them too
    assert "g (OpenVINO CPU f32)" in capsys.readouterr().out


def test_reconcile_of_a_horizon_import_names_the_vendors_mean(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "h.json"
    assert main(["import", str(HORIZON / "s100_profiler.log"), str(HORIZON / "s100_model.json"), "-o", str(run)]) == 0
    capsys.readouterr()
    assert main(["reconcile", str(run), "-o", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    # hrt_model_exec reports average_latency 4297.14 µs (a mean), no median
    assert "latency mean 4.30 ms" in out and "P50" not in out
    assert "(profile ?)" not in out and "no target profile in the run" in out
    assert main(["report", str(tmp_path / "r.json"), "--format", "table"]) == 0
    assert "latency mean 4.30 ms" in capsys.readouterr().out


def test_stress_states_the_buffer_against_the_cache_to_one_decimal() -> None:
    from layerscope.report.views.stress import _stress_context
    from layerscope.runfile.models import Stress

    rows = _stress_context(Stress(processes=2, buffer_bytes=1024 * 2**20, llc_bytes=480 * 2**20))
    text = " ".join(str(cell) for row in rows for cell in (row if isinstance(row, tuple) else (row,)))
    assert "2.1x the 480.00 MiB last-level cache" in text and "2.13333" not in text


def test_calibrate_refuses_a_fit_outside_physical_bounds(write_model: ModelWriter, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Runs whose measured times are exactly the S100 roofline under known multipliers (test_calibrate's
    construction; the fit recovers them): every time x1000 (a device a thousand times slower than the S100, as
    when a host measurement is fitted to the NPU's profile) is refused naming the factors; test_calibrate's truth
    (compute x1.5-3, memory x1.7) is written."""
    from layerscope.analysis import calibrate as C
    from test_calibrate import S100, TRUTH, _measured_run, _model

    shapes = [(16, 32), (32, 64), (64, 32), (128, 16), (8, 128)]
    models = [_model(write_model, f"m{c}_{s}.onnx", c, s) for c, s in shapes]

    def runs(truth: C.Params, folder: str) -> list[str]:
        (tmp_path / folder).mkdir()
        return [str(save_run(_measured_run(m, truth), tmp_path / folder / f"{m.stem}.json")) for m in models]

    slow = C.Params({"TAE/tensor": 1000.0, "VAE/vector": 1000.0, "AAE/aux": 1000.0}, {}, 1000.0)
    wild, sane = runs(slow, "wild"), runs(TRUTH, "sane")
    profile = tmp_path / "fit.toml"
    assert main(["calibrate", *wild, "--base", S100, "-o", str(profile)]) == 2
    (error,) = capsys.readouterr().err.splitlines()  # a refusal is one line
    assert error.startswith("layerscope: error:") and "--force" in error
    assert "not written: the fit has AAE/aux compute x1000 (outside 0.01-100) (and 1 more)" in error
    assert not profile.exists()
    assert main(["calibrate", *wild, "--base", S100, "-o", str(profile), "--force"]) == 0
    (warning,) = [line for line in capsys.readouterr().err.splitlines() if "outside physical bounds" in line]
    assert warning.startswith("layerscope: warning:")
    # the scales this fit sets out of bounds, each x1000 (the pooling's unit, and the memory)
    assert warning.endswith("bounds: AAE/aux compute x1000 (outside 0.01-100); memory time x1000 (outside 0.01-100)")
    assert profile.is_file()
    assert main(["calibrate", *sane, "--base", S100, "-o", str(tmp_path / "ok.toml")]) == 0
    assert "outside physical bounds" not in capsys.readouterr().err


def test_out_of_bounds_names_each_value_outside() -> None:
    from layerscope.analysis.calibrate import Params, out_of_bounds
    from layerscope.targets import load_profile

    base = load_profile("rdk-s100")
    unit = base.units[0]
    group = f"{unit.name}/{unit.kinds[0].value}"
    assert out_of_bounds(base, Params({group: 1.0}, {}, 1.0)) == ()
    found = out_of_bounds(base, Params({group: 250.0}, {}, 0.005, op_scale={"Conv": 2.0}))
    assert found == (f"{group} compute x250 (outside 0.01-100)", "memory time x0.005 (outside 0.01-100)")
    faster = unit.efficiency / 2  # efficiency 2: twice the unit's peak
    (line,) = out_of_bounds(base, Params({group: faster}, {}, 1.0))
    assert line == f"{group} efficiency 2 (above 1: faster than the unit's peak)"


def test_import_and_pipeline_write_the_html_report(tiny: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "import.html"
    assert main(["import", str(HORIZON / "s100_profiler.log"), str(HORIZON / "s100_model.json"),
                 "--html", str(html)]) == 0
    assert f"report: {html}" in capsys.readouterr().out
    assert html.read_text().startswith("<!DOCTYPE html>") and "yolov5s" in html.read_text()
    script = tmp_path / "pipe.py"
    script.write_text("def run_once(model):\n    return model.run(None, model.example_inputs)\n")
    html = tmp_path / "pipeline.html"
    assert main(["pipeline", f"{script}:run_once", str(tiny), "--runs", "1", "--warmup", "0", "--no-layers",
                 "--html", str(html)]) == 0
    assert f"report: {html}" in capsys.readouterr().out and html.stat().st_size > 0
