"""Seeded mutation fuzzing of what layerscope reads from untrusted files: vendor profiles and ONNX models.

Usage: ``.venv/bin/python benchmarks/fuzz_inputs.py [--cases 3000] [--seed 0] [--budget-s 2] [--memory-gb 3]``

Each case mutates one seed input with a seeded mutator and reads it in this process:

- importers (about 2/3 of the cases): a fixture of tests/fixtures/importers mutated at the byte or text level
  (bit flips, deleted/duplicated/swapped spans, inserted hostile tokens: long runs of blanks, ``...``,
  ``ID OpType``, ``ucp_version``, deep brackets, huge or non-finite numbers, cut short), parsed with
  ``parse_text`` under its own format and under ``auto``;
- ONNX models (the rest): a small model (from the zoo or built with ``onnx.helper``; one of 1.2 MB, whose weight
  ONNX's checker is given as a typed input only) mutated at the protobuf level (dims, data sizes, external-data
  offsets and lengths, values in a second field or strings in ``raw_data``, opsets, duplicated names, node order,
  attribute values, nested local functions, raw bytes) and loaded with ``load_model``.

Counted per family: ``ok`` (a result), ``refused`` (a ``LayerscopeError``: exit 2 or 3, one line),
``internal`` (any other exception: a crash the CLI would report as exit 1, with its type), and
``over budget`` (a case past ``--budget-s`` seconds, stopped by SIGALRM, or past the ``--memory-gb``
address-space limit, i.e. ``MemoryError``). The goal: 0 internal errors, 0 over budget. Exit status 0
when that holds, 1 otherwise. The first few failures of each kind are printed with a reproducer file
under ``benchmarks/.cache/fuzz/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import collections
import random
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from layerscope.errors import LayerscopeError  # noqa: E402
from layerscope.importers.detect import PARSERS, parse_text  # noqa: E402
from layerscope.model import load_model  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "importers"
CACHE = ROOT / "benchmarks" / ".cache" / "fuzz"
ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"

#: Fixture -> format.
IMPORTER_SEEDS = {
    "horizon/x3_profiler.log": "horizon-profiler", "horizon/s100_profiler.log": "horizon-profiler",
    "horizon/s100_profiler_truncated.log": "horizon-profiler", "horizon/s100_profiler.csv": "horizon-profiler",
    "horizon/s100_model.json": "horizon-static", "horizon/bayes_model.json": "horizon-static",
    "trtexec/yolov5s.profile.json": "trtexec", "trtexec/yolov5s.layer.json": "trtexec",
    "trtexec/yolov5s.times.json": "trtexec", "ort/conv_relu_add_sigmoid.profile.json": "ort",
    "openvino/benchmark_average_counters_report.csv": "openvino",
    "openvino/benchmark_average_counters_report.json": "openvino",
    "rknn/eval_perf_rk3588.txt": "rknn", "rknn/eval_perf_v2.txt": "rknn",
}

#: Tokens that used to make a parser backtrack or crash; inserted many times over.
HOSTILE_TOKENS = [" " * 4096, "\t \t" * 1024, "..." * 2048, "ID OpType " * 512, "ucp_version: ", "{" * 3000,
                  "[" * 3000, '"k": {' * 1000, "1e999", "NaN", "-1", "5e-324", "1" * 400, "\x00", "\u202e",
                  "ForeignNode[", "PWN(" * 200, " + " * 500, "us (" * 300, "%" * 100, "\r\n" * 100]


class OverBudget(BaseException):
    """Raised by the SIGALRM handler: the case ran past its time budget (a BaseException, so that no
    ``except Exception`` in the code under test turns it into an ordinary refusal)."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise OverBudget


def mutate_text(text: str, rng: random.Random) -> str:
    """One to four text mutations of ``text``."""
    for _ in range(rng.randint(1, 4)):
        n = len(text)
        a, b = sorted((rng.randrange(n + 1), rng.randrange(n + 1)))
        op = rng.randrange(7)
        if op == 0:
            text = text[:a] + rng.choice(HOSTILE_TOKENS) * rng.randint(1, 64) + text[a:]
        elif op == 1:
            text = text[:a] + text[b:]
        elif op == 2:
            text = text[:b] + text[a:b] * rng.randint(2, 50) + text[b:]
        elif op == 3:
            text = text[:a]
        elif op == 4 and n:
            chars = list(text)
            for _ in range(rng.randint(1, 16)):
                k = rng.randrange(n)
                chars[k] = chr(ord(chars[k]) ^ (1 << rng.randrange(7)))
            text = "".join(chars)
        elif op == 5:
            numbers = [str(x) for x in (-1, 0, 1e308, -1e308, 5e-324, 2**63, "NaN", "Infinity", '"1,2,3"')]
            text = text[:a] + rng.choice(numbers) + text[b:b + 1] + text[b + 1:]
        else:
            text = text[:a] + text[b:] + text[a:b]
    return text


def _small_models() -> list[onnx.ModelProto]:
    models = [onnx.load(str(ZOO / f"light_{name}.onnx")) for name in ("squeezenet", "inception_v1")
              if (ZOO / f"light_{name}.onnx").exists()]
    f32 = TensorProto.FLOAT
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Shape", ["r"], ["s"], name="shape"),
             helper.make_node("Reshape", ["r", "s"], ["y"], name="reshape")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", f32, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", f32, None)], initializer=[w])
    models.append(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    # over 1 MB, with a weight over 16 KB: the checker is given that weight as a typed input, its fields are
    # checked by the loader (layerscope.model.validate.checker_reads_values)
    big = numpy_helper.from_array(np.ones((128, 256, 3, 3), np.float32), "w_big")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w_big"], ["y"], pads=[1, 1, 1, 1], name="conv")], "g",
                              [helper.make_tensor_value_info("x", f32, [1, 256, 8, 8])],
                              [helper.make_tensor_value_info("y", f32, [1, 128, 8, 8])], initializer=[big])
    models.append(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    return models


def mutate_model(model: onnx.ModelProto, rng: random.Random, folder: Path) -> bytes:
    """A protobuf-level mutation of a copy of ``model`` (or its bytes, flipped), serialized."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    op = rng.randrange(13)
    if op == 0 and g.initializer:
        t = rng.choice(g.initializer)
        t.dims[rng.randrange(len(t.dims))] = rng.choice([0, 1, 2**31, 10**9, 3])
    elif op == 1 and g.initializer:
        t = rng.choice(g.initializer)
        if t.raw_data:
            t.raw_data = t.raw_data[:rng.randrange(len(t.raw_data) + 1)]
    elif op == 2 and g.initializer:
        t = rng.choice(g.initializer)
        data = numpy_helper.to_array(t).tobytes()
        (folder / "w.bin").write_bytes(data)
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "w.bin"), ("offset", rng.choice(["0", "-1", "abc", "99999999", "4"])),
                           ("length", rng.choice([str(len(data)), "0", "-5", str(2**62), "8"]))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
    elif op == 3:
        m.opset_import[0].version = rng.choice([1, 5, 99, 2**40])
    elif op == 4 and len(g.node) > 1:
        a, b = rng.sample(range(len(g.node)), 2)
        if g.node[b].output and g.node[a].output:
            g.node[b].output[0] = g.node[a].output[0]
    elif op == 5:
        nodes = list(g.node)
        rng.shuffle(nodes)
        del g.node[:]
        g.node.extend(nodes)
    elif op == 6 and g.node:
        node = rng.choice(g.node)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.INTS and attr.ints:
                attr.ints[rng.randrange(len(attr.ints))] = rng.choice([-(2**40), 0, 2**40, 7])
            elif attr.type == onnx.AttributeProto.INT:
                attr.i = rng.choice([-(2**40), 0, 2**40, 7])
    elif op == 7:
        g.output.extend([g.output[0]])
    elif op == 8:
        depth = rng.randint(2, 40)
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
        funcs = [helper.make_function("local", "f0", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])], opsets)]
        for k in range(1, depth):
            funcs.append(helper.make_function("local", f"f{k}", ["a"], ["b"], [
                helper.make_node(f"f{k - 1}", ["a"], ["t"], domain="local"),
                helper.make_node(f"f{k - 1}", ["t"], ["b"], domain="local")], opsets))
        m.functions.extend(funcs)
        del m.opset_import[:]
        m.opset_import.extend(opsets)
        g.node.append(helper.make_node(f"f{depth - 1}", [g.output[0].name], ["fz"], domain="local"))
    elif op == 9:
        big = rng.choice([[60_000, 1], [1, 3 * 10**8], [2**31]])
        g.node.insert(0, helper.make_node("ConstantOfShape", ["cs"], ["cz"], name="cos"))
        g.node.insert(0, helper.make_node("Constant", [], ["cs"], value=numpy_helper.from_array(
            np.array(big, np.int64))))
    elif op == 10 and g.input:
        dim = g.input[0].type.tensor_type.shape.dim
        if dim:
            dim[rng.randrange(len(dim))].dim_value = rng.choice([0, 2**31, 10**5])
    elif op == 12 and g.initializer:  # values in a second field, or strings in raw_data
        t = rng.choice(g.initializer)
        kind = rng.randrange(3)
        if kind == 0:
            t.float_data.extend([1.0] * rng.choice([1, 4]))
        elif kind == 1:
            t.int64_data.extend([1] * rng.choice([1, 4]))
        else:
            t.data_type = TensorProto.STRING
    data = bytearray(m.SerializeToString())
    if op == 11 and data:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data)


Case = Callable[[], object]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=2.0, help="time budget of one case")
    parser.add_argument("--memory-gb", type=float, default=3.0, help="address-space limit of this process")
    parser.add_argument("--model-share", type=float, default=1 / 3, help="share of the cases that are models")
    args = parser.parse_args(argv)

    limit = int(args.memory_gb * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _alarm)
    rng = random.Random(args.seed)
    texts = {name: (FIXTURES / name).read_text(encoding="utf-8") for name in IMPORTER_SEEDS}
    models = _small_models()
    CACHE.mkdir(parents=True, exist_ok=True)
    counts: dict[str, collections.Counter[str]] = {"importer": collections.Counter(), "model": collections.Counter()}
    kinds: collections.Counter[str] = collections.Counter()
    shown: collections.Counter[str] = collections.Counter()
    slowest = (0.0, "")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for case in range(args.cases):
            is_model = rng.random() < args.model_share
            family = "model" if is_model else "importer"
            if is_model:
                payload = mutate_model(rng.choice(models), rng, folder)
                path = folder / "m.onnx"
                path.write_bytes(payload)
                run: Case = lambda path=path: load_model(path)  # noqa: E731
                suffix = ".onnx"
            else:
                name = rng.choice(list(IMPORTER_SEEDS))
                text = mutate_text(texts[name], rng)
                fmt = IMPORTER_SEEDS[name] if rng.random() < 0.7 else "auto"
                run = lambda text=text, fmt=fmt: parse_text(text, "fuzz", fmt)  # noqa: E731
                payload = text.encode("utf-8", "surrogatepass")
                suffix = f".{fmt}.txt"
            t0 = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, args.budget_s)
            outcome, detail = "ok", ""
            try:
                run()
            except OverBudget:
                outcome, detail = "over budget", "time"
            except MemoryError:
                outcome, detail = "over budget", "memory"
            except LayerscopeError:
                outcome = "refused"
            except Exception as exc:  # what the CLI would report as an internal error (exit 1)
                outcome, detail = "internal", f"{type(exc).__name__}: {str(exc)[:120]}"
                detail += " @ " + traceback.extract_tb(exc.__traceback__)[-1].name
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            took = time.perf_counter() - t0
            slowest = max(slowest, (took, f"case {case} ({family})"))
            counts[family][outcome] += 1
            if outcome in ("internal", "over budget"):
                kinds[f"{family} {outcome}: {detail.split(':')[0]}"] += 1
                if shown[outcome] < 5:
                    shown[outcome] += 1
                    keep = CACHE / f"case{case}{suffix}"
                    keep.write_bytes(payload)
                    print(f"{outcome}: {family} case {case}: {detail} ({took:.2f} s) -> {keep}", file=sys.stderr)
    wall = time.perf_counter() - start
    print(f"{args.cases} cases, seed {args.seed}, {wall:.0f} s; budget {args.budget_s} s and {args.memory_gb} GB "
          f"per case; slowest {slowest[0]:.2f} s ({slowest[1]})")
    print(f"{'family':10} {'cases':>6} {'ok':>6} {'refused':>8} {'internal':>9} {'over budget':>12}")
    for family, c in counts.items():
        print(f"{family:10} {sum(c.values()):6} {c['ok']:6} {c['refused']:8} {c['internal']:9} {c['over budget']:12}")
    for kind, n in kinds.most_common(12):
        print(f"  {n:5} x {kind}")
    bad = sum(c["internal"] + c["over budget"] for c in counts.values())
    print("PASS: no internal errors, nothing over budget" if bad == 0 else f"FAIL: {bad} cases")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    assert set(IMPORTER_SEEDS.values()) <= set(PARSERS)
    sys.exit(main())
