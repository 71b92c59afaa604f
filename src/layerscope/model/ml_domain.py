"""The classical-ML ops of a model (the ``ai.onnx.ml`` domain: tree ensembles, ZipMap, scalers, linear models), and
the error for a runtime that has no conversion for them.

OpenVINO's ONNX frontend converts no ``ai.onnx.ml`` op (openvinotoolkit/openvino issues #21168, #23778 and #26700:
"OpenVINO does not support the following ONNX operations: ai.onnx.ml.ZipMap, ai.onnx.ml.TreeEnsembleClassifier").
It fails in two ways: "No conversion rule found for operations: ai.onnx.ml.X" and, for an op whose output is a map
or a sequence of maps (ZipMap), "Unsupported value_info type" naming the output, not the op. :func:`openvino_ml_failure`
turns either into one line naming the ops, in place of OpenVINO's reason and its precision hint (another precision
does not help).

Contracts: :func:`ml_domain_ops` reads only node domains and op types (attributes are parsed, external data is not
loaded); a file that is not a readable model has none.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from layerscope.errors import ModelError

#: The ONNX domain of the classical-ML ops.
ML_DOMAIN = "ai.onnx.ml"


def ml_domain_ops(path: str | os.PathLike[str]) -> tuple[str, ...]:
    """The op types of the ``ai.onnx.ml`` nodes of the model at ``path`` (main graph and subgraphs), each once, in
    the order they first occur; ``()`` when it has none or cannot be read."""
    import onnx

    try:
        model = onnx.load(os.fspath(path), load_external_data=False)
    except Exception:  # onnx raises several types for a file it cannot parse; the caller's own error stands
        return ()
    return tuple(dict.fromkeys(_ml_ops(model.graph)))


def _ml_ops(graph: object) -> Iterable[str]:
    """The ``ai.onnx.ml`` op types of ``graph`` (an onnx.GraphProto) and of its nodes' subgraphs, depth first."""
    import onnx

    for node in getattr(graph, "node", ()):
        if node.domain == ML_DOMAIN:
            yield node.op_type
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _ml_ops(attribute.g)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for sub in attribute.graphs:
                    yield from _ml_ops(sub)


def openvino_ml_failure(name: str, path: str | os.PathLike[str], device: str) -> ModelError | None:
    """The error (exit 2) for OpenVINO failing to read or compile model ``name`` (at ``path``) for ``device`` when the
    model holds ``ai.onnx.ml`` ops, which OpenVINO cannot convert: one line naming them and what to use instead;
    ``None`` when it holds none (OpenVINO's own reason then stands)."""
    ops = ml_domain_ops(path)
    if not ops:
        return None
    listed = ", ".join(ops)
    return ModelError(f"{name}: OpenVINO has no conversion for the {ML_DOMAIN} op{'s' if len(ops) > 1 else ''} "
                      f"{listed} (classical-ML ops; its ONNX frontend converts none), so it cannot run the model on "
                      f"{device}", hint="profile it with ONNX Runtime: --backend onnxruntime, the default")
