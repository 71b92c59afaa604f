"""Names from a model, a vendor file, a profile or a file name cannot drive the terminal: every command that
prints is run (in a child process, colour off, so any escape in its output was injected) on inputs whose node,
tensor, graph, trace-point, profile and file names carry ESC sequences, C1 controls, DEL and bidirectional
overrides, and its stdout and stderr must hold none of them; rich markup in a name prints as it is.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tests._cli_subprocess import CliResult, run_cli

from layerscope.targets.profile import __file__ as _profile_module
from layerscope.textsafe import has_unsafe, terminal_json, terminal_text

#: Clears the screen, sets the window title, C1 CSI (red), DEL, a right-to-left override and an isolate.
EVIL = "\x1b[2J\x1b]0;pwned\x07\x9b31m\x7f\u202eevil\u2066\u200f"
MARKUP = "[bold]b[/bold]"
#: Everything that may appear in output: printable text and line breaks.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
PROFILES_DIR = Path(_profile_module).parent / "profiles"


def _hostile_model(path: Path, channels: int) -> Path:
    """Conv -> Relu -> Add, every node, tensor and the graph named with :data:`EVIL` and :data:`MARKUP`."""
    rng = np.random.default_rng(0)
    x, w, c, r, y = (f"{n}{EVIL}" for n in ("in", "weight", "conv_out", "relu_out", "out"))
    nodes = [helper.make_node("Conv", [x, w], [c], name=f"conv{EVIL}{MARKUP}", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", [c], [r], name=f"relu{EVIL}"),
             helper.make_node("Add", [r, c], [y], name=f"add{MARKUP}{EVIL}")]
    graph = helper.make_graph(nodes, f"graph{EVIL}", [helper.make_tensor_value_info(x, TensorProto.FLOAT,
                                                                                    [1, 3, 32, 32])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, channels, 32, 32])],
                              initializer=[numpy_helper.from_array(
                                  rng.standard_normal((channels, 3, 3, 3)).astype(np.float32), w)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name=f"p{EVIL}")
    onnx.save_model(model, str(path))
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The hostile inputs, and the run files the later commands read (made by the CLI itself)."""
    folder = tmp_path_factory.mktemp("hostile")
    model = _hostile_model(folder / f"model{EVIL}.onnx", 8)
    other = _hostile_model(folder / f"other{EVIL}.onnx", 16)
    script = folder / f"pipe{EVIL}.py"
    script.write_text(textwrap.dedent(f"""
        import layerscope

        def pipeline(model):
            with layerscope.trace_point({(f"pre{EVIL}{MARKUP}")!r}):
                feeds = dict(model.example_inputs)
            model.run(None, feeds)
    """))
    profile = (PROFILES_DIR / "rdk-x3.toml").read_text()
    name_line = next(line for line in profile.splitlines() if line.startswith("name"))
    toml_evil = json.dumps(f"board{EVIL}{MARKUP}")  # a TOML basic string: JSON's escapes are TOML's
    (folder / "board.toml").write_text(profile.replace(name_line, f"name = {toml_evil}"))
    runs = {}
    for name, path in (("model", model), ("other", other)):
        runs[name] = folder / f"{name}{EVIL}.json"
        result = run_cli(["profile", path, "--runs", "3", "--warmup", "1", "--target", "rdk-x3", "--top", "0",
                          "-o", runs[name]])
        assert result.returncode == 0, result.describe()
    ort_profile = _ort_profile(model, folder)
    return {"model": model, "other": other, "script": script, "run": runs["model"], "other_run": runs["other"],
            "board": folder / "board.toml", "ort_profile": ort_profile, "folder": folder}


def _ort_profile(model: Path, folder: Path) -> Path:
    """ONNX Runtime's own profiler output for the hostile model: a vendor file whose names are the model's."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(folder / "ort")
    options.log_severity_level = 3
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: np.zeros((1, 3, 32, 32), dtype=np.float32)}
    for _ in range(3):
        session.run(None, feed)
    path = Path(session.end_profiling())
    assert EVIL in path.read_text(encoding="utf-8") or "\\u001b" in path.read_text(encoding="utf-8")
    return path


#: Every command that prints, with what it is given; the expected exit code (2: an error line that quotes).
COMMANDS: dict[str, tuple[list[str], int]] = {
    "estimate": (["estimate", "{model}", "--target", "rdk-x3", "--timeline"], 0),
    "profile": (["profile", "{model}", "--runs", "3", "--warmup", "1", "--target", "rdk-x3"], 0),
    "profile-trace": (["profile", "{model}", "--runs", "2", "--warmup", "0", "--format", "trace"], 0),
    "bench": (["bench", "{model}", "--runs", "3", "--warmup", "1"], 0),
    "bisect": (["bisect", "{model}", "--target", "rdk-x3", "--no-cache", "--segments", "2", "--pilot", "1",
                "--repeats", "2"], 0),
    "pipeline": (["pipeline", "{script}:pipeline", "{model}", "--runs", "2", "--warmup", "0"], 0),
    "report": (["report", "{run}", "-o", "{folder}/r{evil}.html", "--csv", "{folder}/r{evil}.csv"], 0),
    "report-terminal": (["report", "{run}", "--format", "table"], 0),
    "report-md": (["report", "{run}", "--format", "md"], 0),
    "compare": (["compare", "{run}", "{other_run}"], 0),
    "compare-markdown": (["compare", "{run}", "{other_run}", "--markdown", "-"], 0),
    "advise": (["advise", "{run}"], 0),
    "advise-json": (["advise", "{run}", "-o", "-"], 0),
    "reconcile": (["reconcile", "{run}", "{other_run}"], 0),
    "calibrate": (["calibrate", "{run}", "{other_run}", "-o", "{folder}/cal{evil}.toml", "--force"], 0),
    "import": (["import", "{ort_profile}", "--model", "{model}"], 0),
    "targets": (["targets", "--show", "{board}"], 0),
    "estimate-on-board": (["estimate", "{model}", "--target", "{board}", "--top", "5"], 0),
    "error-missing-file": (["estimate", "{folder}/missing{evil}.onnx"], 2),
    "error-bad-option": (["estimate", "{model}", "--shape", "x{evil}"], 2),
}


def _args(template: list[str], hostile: dict[str, Path]) -> list[str]:
    values = {key: str(value) for key, value in hostile.items()} | {"evil": EVIL}
    return [part.format(**values) for part in template]


def _unsafe(result: CliResult) -> list[str]:
    text = result.stdout.decode("utf-8") + result.stderr.decode("utf-8")
    return sorted({f"U+{ord(ch):04X}" for ch in UNSAFE.findall(text)})


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_name_reaches_the_terminal_as_control_characters(name: str, hostile: dict[str, Path]) -> None:
    template, expected = COMMANDS[name]
    result = run_cli(_args(template, hostile))
    assert result.returncode == expected, result.describe()
    assert _unsafe(result) == [], result.describe()
    assert "Traceback" not in result.err
    if expected == 2:
        assert len(result.err_lines) == 1 and result.err_lines[0].startswith("layerscope: error: "), result.describe()
    if name in {"estimate", "profile", "compare", "estimate-on-board", "targets", "pipeline", "report-terminal"}:
        assert MARKUP in result.out, result.describe()  # markup in a name is printed, not applied
    if name.endswith("json") or name == "profile-trace":
        json.loads(result.out)  # still JSON, and the same values: the escapes only spell them differently
    if name == "profile-trace":  # the names come back whole once the JSON is read
        trace = json.loads(result.out)
        assert trace["model_info"]["path"] == str(hostile["model"])
        assert f"conv{EVIL}{MARKUP}" in {entry["layer_name"] for entry in trace["execution_trace"]}


def test_the_sanitiser_removes_exactly_the_dangerous_characters() -> None:
    assert terminal_text(f"a{EVIL}b{MARKUP}\n\tc") == "a[2J]0;pwned31mevilb[bold]b[/bold]c"
    assert terminal_text("x\ny\r", keep_newlines=True) == "x\ny"
    kept = "é ü ß 中文 ∑ 😀 \u00a0 \u05d0\u05d1 (Hebrew letters are not overrides)"
    assert terminal_text(kept) == kept and not has_unsafe(kept)
    assert all(has_unsafe(ch) for ch in "\x00\x1b\x7f\x80\x9b\x9f\u061c\u200e\u200f\u202a\u202e\u2066\u2069")
    text = json.dumps({"name": f"n{EVIL}"}, ensure_ascii=False)
    safe = terminal_json(text)
    assert not UNSAFE.search(safe) and json.loads(safe) == json.loads(text)
