"""Weights by identity: a tensor several layers read (tied embeddings, an unrolled recurrence's matrix) counts once in
the summary's params and weight bytes, and the estimate loads it from DDR once when it fits the on-chip weight budget,
else at every use, and says which."""

from __future__ import annotations

import dataclasses
import gc
import weakref
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from conftest import F32, I64, ModelWriter, zoo
from layerscope.cli.main import main
from layerscope.costs import cost_graph
from layerscope.costs.weights import (
    learned_tensors,
    shared_weights,
    unique_params,
    unique_weight_bytes,
    weight_identities,
)
from layerscope.estimator import estimate_graph
from layerscope.estimator.memory import static_bytes
from layerscope.estimator.roofline import plan_shared_weights
from layerscope.model import load_model
from layerscope.run import estimate_run
from layerscope.runfile import load_document
from layerscope.targets import load_profile
from layerscope.targets.rules import consumers

S = 16  # tokens
D = 64  # embedding width


def _tied_gemm(write_model: ModelWriter, vocab: int) -> Path:
    """One [vocab, D] table read by a Gather (the embedding) and by a Gemm with transB (the output head), with a
    [vocab] bias: vocab * D + vocab learned params."""
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["x"], name="embed"),
             helper.make_node("Relu", ["x"], ["y"], name="act"),
             helper.make_node("Gemm", ["y", "emb", "bias"], ["logits"], name="head", transB=1)]
    rng = np.random.default_rng(0)
    return write_model(nodes, [("ids", I64, [S])], [("logits", F32, [S, vocab])],
                       {"emb": rng.standard_normal((vocab, D)).astype(np.float32),
                        "bias": np.zeros(vocab, np.float32)}, name=f"tied{vocab}.onnx")


def _tied_transpose(write_model: ModelWriter, vocab: int) -> Path:
    """The same table read by the Gather and, through a Transpose the loader folds into a constant, by a MatMul."""
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["x"], name="embed"),
             helper.make_node("Transpose", ["emb"], ["emb_t"], name="tr", perm=[1, 0]),
             helper.make_node("MatMul", ["x", "emb_t"], ["logits"], name="head")]
    return write_model(nodes, [("ids", I64, [1, S])], [("logits", F32, [1, S, vocab])],
                       {"emb": np.ones((vocab, D), np.float32)}, name=f"tied_t{vocab}.onnx")


def _unrolled(write_model: ModelWriter, hidden: int, *, tied: bool = True, steps: int = 4) -> Path:
    """``steps`` MatMul + Tanh steps, each MatMul reading one [hidden, hidden] matrix ``W`` (``tied``) or its own
    copy of it."""
    nodes, prev, weights = [], "x", {}
    for i in range(steps):
        w = "W" if tied else f"W{i}"
        weights[w] = np.full((hidden, hidden), 0.01, np.float32)
        nodes += [helper.make_node("MatMul", [prev, w], [f"m{i}"], name=f"step{i}"),
                  helper.make_node("Tanh", [f"m{i}"], [f"h{i}"], name=f"tanh{i}")]
        prev = f"h{i}"
    return write_model(nodes, [("x", F32, [1, hidden])], [(prev, F32, [1, hidden])], weights,
                       name=f"rnn{hidden}{'' if tied else 'u'}.onnx")


def _summary(path: Path, target: str = "rdk-x5") -> dict:
    graph, profile = load_model(path), load_profile(target)
    return estimate_run(graph, estimate_graph(graph, profile), profile).to_json()["summary"]


# --------------------------------------------------------------------------------------------------- params, bytes


def test_tied_embedding_counts_its_table_once(write_model: ModelWriter) -> None:
    vocab = 1000
    summary = _summary(_tied_gemm(write_model, vocab))
    assert summary["params"] == vocab * D + vocab  # the table once, the bias
    assert summary["params_per_use"] == 2 * vocab * D + vocab  # the Gather's and the Gemm's counts summed
    assert summary["weight_bytes"] == (vocab * D + vocab) * 4  # float32, as stored in the file


def test_a_folded_transpose_of_the_table_is_the_same_tensor(write_model: ModelWriter) -> None:
    vocab = 1000
    path = _tied_transpose(write_model, vocab)
    graph = load_model(path)
    assert [n.op_type for n in graph.folded] == ["Transpose"] and len(graph.constants) >= 2
    assert graph.weight_bytes == 2 * vocab * D * 4  # the graph's own count sees two constants
    identities = weight_identities(graph)
    assert identities["emb_t"] == identities["emb"] == "emb"
    assert shared_weights(graph) == {"emb": (0, 1)}
    summary = _summary(path)
    assert summary["params"] == vocab * D
    assert summary["weight_bytes"] == vocab * D * 4
    assert unique_weight_bytes(graph) == vocab * D * 4
    # the memory plan's static weights: the table once, at the deployed int8
    assert static_bytes(graph, estimate_graph(graph, load_profile("rdk-x5"))) == vocab * D


def test_unrolled_recurrence_counts_its_matrix_once(write_model: ModelWriter) -> None:
    hidden = 64
    graph = load_model(_unrolled(write_model, hidden))
    costs = cost_graph(graph)
    assert sum(c.params for c in costs) == 4 * hidden * hidden
    assert unique_params(graph) == hidden * hidden
    assert unique_weight_bytes(graph) == hidden * hidden * 4


def test_a_model_without_shared_weights_keeps_its_counts(write_model: ModelWriter) -> None:
    hidden = 64
    path = _unrolled(write_model, hidden, tied=False)
    summary = _summary(path)
    assert summary["params"] == 4 * hidden * hidden
    assert summary["weight_bytes"] == 4 * hidden * hidden * 4 == load_model(path).weight_bytes
    assert "params_per_use" not in summary and "shared_weights" not in summary


# --------------------------------------------------------------------------------------------------- DDR loads


def _weight_reads(path: Path, target: str = "rdk-x5") -> int:
    """DDR bytes the estimate reads over all layers."""
    graph, profile = load_model(path), load_profile(target)
    return sum(e.ddr_read_bytes for e in estimate_graph(graph, profile).layers)


def test_a_shared_matrix_that_fits_sram_is_loaded_once(write_model: ModelWriter) -> None:
    hidden = 64  # int8 on rdk-x5: 4 KiB, within the 256 KiB weight share of its 1 MiB SRAM
    tied, untied = _unrolled(write_model, hidden), _unrolled(write_model, hidden, tied=False)
    # the untied copy loads each of its 4 matrices; the tied model loads its one matrix once
    assert _weight_reads(untied) - _weight_reads(tied) == 3 * hidden * hidden
    graph, profile = load_model(tied), load_profile("rdk-x5")
    estimate = estimate_graph(graph, profile)
    reads = {e.layer_id: e.ddr_read_bytes for e in estimate.layers}
    assert reads["step1"] == reads["step2"] == reads["step3"] == 0  # the matrix on chip, the activations too
    assert reads["step0"] >= hidden * hidden
    plan = plan_shared_weights(graph, profile, estimate.dtype, estimate.costs, [False] * len(graph.layers))
    (shared,) = plan.weights
    assert shared.resident and shared.layer_ids == ("step0", "step1", "step2", "step3")
    assert plan.budget_bytes == profile.weight_budget_bytes == 256 * 1024 and shared.nbytes == hidden * hidden
    summary = _summary(tied)
    assert summary["shared_weights"] == {"tensors": 1, "layers": 4, "resident": 1,
                                         "budget_bytes": profile.weight_budget_bytes,
                                         "ddr_bytes_saved": 3 * hidden * hidden}


def test_a_shared_matrix_bigger_than_sram_is_loaded_per_use(write_model: ModelWriter) -> None:
    hidden = 1024  # int8: 1 MiB, four times the 256 KiB weight budget of rdk-x5
    budget = load_profile("rdk-x5").weight_budget_bytes
    assert hidden * hidden > budget
    tied, untied = _unrolled(write_model, hidden), _unrolled(write_model, hidden, tied=False)
    assert _weight_reads(tied) == _weight_reads(untied) >= 4 * hidden * hidden
    summary = _summary(tied)
    assert summary["shared_weights"]["resident"] == 0 and summary["shared_weights"]["tensors"] == 1
    assert summary["shared_weights"]["ddr_bytes_saved"] == 0


def test_the_tied_table_is_loaded_once_when_it_fits(write_model: ModelWriter) -> None:
    # int8: 64 000 B fit the 256 KiB budget: the Gather loads its 16 rows, the head the rest of the table
    fits = _tied_gemm(write_model, 1000)
    graph, profile = load_model(fits), load_profile("rdk-x5")
    estimate = estimate_graph(graph, profile)
    plan = plan_shared_weights(graph, profile, estimate.dtype, estimate.costs, [False] * 3)
    assert dict(plan.loads) == {"embed": {"emb": S * D}, "head": {"emb": 1000 * D - S * D}}
    # 640 000 B do not fit: both readers load what they read of it
    big = _tied_gemm(write_model, 10_000)
    graph = load_model(big)
    estimate = estimate_graph(graph, profile)
    plan = plan_shared_weights(graph, profile, estimate.dtype, estimate.costs, [False] * 3)
    assert not plan.weights[0].resident and not plan.loads
    assert plan.weights[0].ddr_read_bytes == plan.weights[0].per_use_bytes == S * D + 10_000 * D


def test_no_on_chip_memory_loads_every_use(write_model: ModelWriter) -> None:
    graph = load_model(_unrolled(write_model, 64))
    profile = dataclasses.replace(load_profile("rdk-x5"), sram_bytes=0)
    estimate = estimate_graph(graph, profile)
    plan = plan_shared_weights(graph, profile, estimate.dtype, estimate.costs, [False] * len(graph.layers))
    assert not plan.resident and plan.ddr_bytes_saved == 0
    assert sum(e.ddr_read_bytes for e in estimate.layers) >= 4 * 64 * 64


def test_layers_on_the_cpu_are_not_readers_of_a_resident_weight(write_model: ModelWriter) -> None:
    graph, profile = load_model(_unrolled(write_model, 64)), load_profile("rdk-x5")
    costs = cost_graph(graph)
    # steps 1-3 sent to the CPU: one accelerator reader left, nothing shared on chip
    on_cpu = [node.id in {"step1", "step2", "step3"} for node in graph.layers]
    assert plan_shared_weights(graph, profile, "int8", costs, on_cpu).weights == ()


# --------------------------------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize(("hidden", "says"), [
    (64, "loaded once per inference (resident: fits the 256.00 KiB on-chip weight budget)"),
    (1024, "loaded by every reader (does not fit the 256.00 KiB on-chip weight budget)")])
def test_estimate_says_how_shared_weights_are_loaded(write_model: ModelWriter, hidden: int, says: str,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    model = _unrolled(write_model, hidden)
    out = model.with_suffix(".json")
    assert main(["estimate", str(model), "-t", "rdk-x5", "-o", str(out)]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert f"shared weights 1 tensor read by 4 layers: {says}" in printed
    assert "counted per use by the layers" in printed
    summary = load_document(out)["summary"]
    assert summary["params"] == hidden * hidden and summary["params_per_use"] == 4 * hidden * hidden


def test_what_a_stage_derives_from_a_graph_is_made_once_per_graph_and_goes_with_it() -> None:
    """``Graph.derived``: the learned tensors, weight identities and consumers each made once per graph, shared by
    every caller, and another graph (equal or not) gets its own."""
    made: list[int] = []

    def count(graph: object) -> int:
        made.append(id(graph))
        return len(made)

    path = zoo("squeezenet")
    graph, again = load_model(path), load_model(path)
    assert graph.derived(count) == graph.derived(count) == 1
    assert again.derived(count) == 2  # an equal graph of its own: made again, for it
    assert learned_tensors(graph) is learned_tensors(graph)
    assert weight_identities(graph) is weight_identities(graph)
    assert consumers(graph) is consumers(graph) and consumers(again) is not consumers(graph)
    assert consumers(graph) == consumers(again)
    gone = weakref.ref(graph)
    del graph
    gc.collect()
    assert gone() is None  # nothing outside the graph keeps it (or what was derived from it) alive
