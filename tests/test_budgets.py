"""Budgets before work (:mod:`layerscope.limits`): a model over a budget is refused with one line naming the file,
what was counted and how to raise the budget (exit 2), before the work that would exhaust the machine; a run
stopped at its time budget or by a signal comes back promptly.

Classes: a node count over the budget (counted in the file, before parsing), declared dims whose product
overflows 64-bit sizes, a ``Loop`` with a constant trip count of 2**62, a ``Loop`` whose trip count is an input
(bounded by time), a budget set to nonsense.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from _limits import assert_one_line_error, run_limited
from layerscope import limits
from layerscope.limits import OverBudget
from layerscope.model.bounded import run_bounded

F32 = TensorProto.FLOAT


def _save(path: Path, graph: onnx.GraphProto) -> Path:
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return path


def _chain(path: Path, nodes: int) -> Path:
    """``nodes`` Relu nodes in a row on a 1x4 input."""
    names = ["x", *[f"t{i}" for i in range(nodes - 1)], "y"]
    made = [helper.make_node("Relu", [names[i]], [names[i + 1]], name=f"r{i}") for i in range(nodes)]
    return _save(path, helper.make_graph(made, "g", [helper.make_tensor_value_info("x", F32, [1, 4])],
                                         [helper.make_tensor_value_info("y", F32, [1, 4])]))


def _loop(trips: int | None) -> onnx.GraphProto:
    """``y = Loop(M, true, x)`` whose body is a Relu: ``M`` a constant ``trips``, or the graph input ``M``."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["co"]), helper.make_node("Relu", ["v"], ["vo"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("v", F32, [1])],
        [helper.make_tensor_value_info("co", TensorProto.BOOL, []), helper.make_tensor_value_info("vo", F32, [1])])
    inits = [helper.make_tensor("C", TensorProto.BOOL, [], [True])]
    inputs = [helper.make_tensor_value_info("x", F32, [1])]
    if trips is None:
        inputs.insert(0, helper.make_tensor_value_info("M", TensorProto.INT64, []))
    else:
        inits.append(helper.make_tensor("M", TensorProto.INT64, [], [trips]))
    return helper.make_graph([helper.make_node("Loop", ["M", "C", "x"], ["y"], body=body, name="steps")], "g",
                             inputs, [helper.make_tensor_value_info("y", F32, [1])], initializer=inits)


def test_a_model_over_the_node_budget_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    model = _chain(tmp_path / "chain.onnx", 50)
    env = dict(os.environ, LAYERSCOPE_LIMIT_NODES="49")
    line = assert_one_line_error(run_limited(["estimate", str(model)], env=env), "chain.onnx", "50 nodes",
                                 "budget of 49 nodes", "--limit nodes=N")
    assert "LAYERSCOPE_LIMIT_NODES" in line
    env["LAYERSCOPE_LIMIT_NODES"] = "50"  # at the budget: estimated
    assert run_limited(["estimate", str(model), "--top", "0"], env=env).returncode == 0


@pytest.mark.parametrize("dims", [[2**31, 2**31], [2**40], [1, 3, 2**20, 2**20]])
def test_declared_dims_over_the_element_budget_are_refused_naming_the_tensor(tmp_path: Path,
                                                                             dims: list[int]) -> None:
    model = _save(tmp_path / "huge.onnx", helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [helper.make_tensor_value_info("x", F32, dims)],
        [helper.make_tensor_value_info("y", F32, None)]))
    elements = int(np.prod(np.array(dims, dtype=object)))
    assert_one_line_error(run_limited(["estimate", str(model), "--timeline", "-t", "rdk-x5"]), "huge.onnx",
                          "tensor 'x'", f"{elements:,} elements", "--limit elements=N")


def test_a_loop_with_a_constant_trip_count_over_the_budget_is_refused_before_it_runs(tmp_path: Path) -> None:
    model = _save(tmp_path / "loop.onnx", _loop(2**62))
    result = run_limited(["estimate", str(model)])
    assert_one_line_error(result, "loop.onnx", "Loop 'steps'", f"{2**62:,} iterations", "--limit loop_trips=N")


def test_a_loop_within_the_budget_is_estimated(tmp_path: Path) -> None:
    model = _save(tmp_path / "loop.onnx", _loop(5))
    result = run_limited(["estimate", str(model), "--top", "0"])
    assert result.returncode == 0, result.stderr


def _session(graph: onnx.GraphProto) -> object:
    import onnxruntime as ort

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


ENDLESS = {"M": np.array(2**62, dtype=np.int64), "x": np.ones(1, dtype=np.float32)}


def test_a_run_over_its_time_budget_is_stopped_with_one_line() -> None:
    session = _session(_loop(None))
    start = time.monotonic()
    with pytest.raises(OverBudget, match=r"the model ran for .* over the budget of 0.5 s.*--limit run_s=N"):
        run_bounded(session, ENDLESS, what="the model", budget_s=0.5)
    assert time.monotonic() - start < 20  # stopped at the budget, not after 2**62 iterations
    finite = run_bounded(session, {"M": np.array(3, dtype=np.int64), "x": np.array([-2.0], dtype=np.float32)},
                         what="the model")
    assert finite[0].tolist() == [0.0]  # a run within the budget gives the model's result


#: Run in a child process: a real SIGINT to the test process, once OpenVINO has run in it, can crash it in native
#: code. Prints the seconds from the signal to the end of the run, and the names of the threads left.
INTERRUPT_CHILD = """
import os, signal, sys, threading, time
import numpy as np
sys.path[:0] = sys.argv[1:3]
from test_budgets import ENDLESS, _loop, _session
from layerscope.model.bounded import run_bounded
session = _session(_loop(None))
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
start = time.monotonic()
try:
    run_bounded(session, ENDLESS, what="the model")
except KeyboardInterrupt:
    print(round(time.monotonic() - start - 0.5, 2), [t.name for t in threading.enumerate()])
"""


def test_an_interrupt_stops_a_run_inside_the_runtime() -> None:
    tests = Path(__file__).resolve().parent
    done = subprocess.run([sys.executable, "-c", INTERRUPT_CHILD, str(tests), str(tests.parent / "src")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-800:]
    seconds, threads = done.stdout.split(" ", 1)
    assert float(seconds) < 10  # stopped at the signal, not after 2**62 iterations
    assert "layerscope-run" not in threads  # the worker stopped too


@pytest.mark.parametrize("value", ["0", "-3", "lots", "inf", "nan"])
def test_a_budget_that_is_not_a_positive_number_is_bad_input(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("LAYERSCOPE_LIMIT_NODES", value)
    with pytest.raises(limits.InputError, match=r"LAYERSCOPE_LIMIT_NODES.*positive number of nodes"):
        limits.limit("nodes")


def test_every_budget_is_documented_in_the_module() -> None:
    for name in limits.BUDGETS:
        assert f"\n{name} " in (limits.__doc__ or ""), name


def test_a_small_gzip_run_file_reads_in_little_memory(tmp_path: Path) -> None:
    """Decompression reads a piece at a time: nothing sized by the 4 GiB limit on run files is reserved up front
    (a 4 KB ``run.json.gz`` read under a 1.5 GB address-space limit)."""
    model = _chain(tmp_path / "chain.onnx", 3)
    run = tmp_path / "run.json.gz"
    assert run_limited(["estimate", str(model), "--top", "0", "-o", str(run)]).returncode == 0
    assert run.stat().st_size < 16_000
    result = run_limited(["report", str(run), "--format", "csv", "-o", str(tmp_path / "layers.csv")])
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "layers.csv").read_text().count("\n") == 4  # a header and the 3 layers


def test_a_vendor_file_over_the_line_budget_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    log = tmp_path / "profiler.log"
    log.write_text("garbage that no parser reads\n" * 1000)
    env = dict(os.environ, LAYERSCOPE_LIMIT_IMPORT_LINES="999")
    assert_one_line_error(run_limited(["import", str(log)], env=env), "profiler.log", "1,000 lines",
                          "budget of 999 lines", "--limit import_lines=N")


def test_observing_shapes_is_stopped_at_the_time_budget(tmp_path: Path) -> None:
    """A Loop whose trip count is an input, on a model whose shapes the loader must observe by running it: the
    run stops at the ``run_s`` budget with one line, instead of running for 2**62 iterations."""
    model = _save(tmp_path / "steps.onnx", _loop(None))
    trips = tmp_path / "trips.npy"
    np.save(trips, np.array(2**62, dtype=np.int64))
    env = dict(os.environ, LAYERSCOPE_LIMIT_RUN_S="1")
    result = run_limited(["estimate", str(model), "--input", f"M={trips}"], env=env)
    assert_one_line_error(result, "observe its shapes", "budget of 1 s", "--limit run_s=N")


def test_the_limit_option_raises_a_budget_and_refuses_nonsense(tmp_path: Path) -> None:
    model = _chain(tmp_path / "chain.onnx", 50)
    env = dict(os.environ, LAYERSCOPE_LIMIT_NODES="10")
    assert run_limited(["--limit", "nodes=50", "estimate", str(model), "--top", "0"], env=env).returncode == 0
    assert_one_line_error(run_limited(["--limit", "nodes=5", "estimate", str(model)]), "budget of 5 nodes")
    assert_one_line_error(run_limited(["--limit", "nodes=many", "estimate", str(model)]),
                          "LAYERSCOPE_LIMIT_NODES", "positive number")
    assert_one_line_error(run_limited(["--limit", "bogus=1", "estimate", str(model)]), "--limit", "nodes, elements")


def test_a_small_file_read_under_a_large_limit_reserves_no_more_than_it_holds(tmp_path: Path) -> None:
    """The vendor-file reader's 512 MiB cap is a limit, not an allocation: a 3-byte file reads under a 400 MiB
    address-space limit (``read(limit + 1)`` reserved the whole limit up front)."""
    small = tmp_path / "small.txt"
    small.write_text("hi\n")
    code = ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (400 << 20, 400 << 20))\n"
            "from layerscope.fileio import read_text_limited\n"
            f"print(repr(read_text_limited({str(small)!r}, 512 << 20)))\n")
    env = dict(os.environ, PYTHONPATH=str(Path(limits.__file__).parents[1]))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "'hi\\n'", done.stderr[-400:]
