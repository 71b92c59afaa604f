"""Fitted tree ensembles as plain JSON, evaluated with numpy: the predictor file's model format.

Why our own JSON dump rather than pickle/joblib, ``skops`` or ONNX (``skl2onnx``): pickle runs code on load
(never for a file a user may have been sent); ``skops`` is safe but needs scikit-learn, in a compatible version,
wherever the file is loaded; ``skl2onnx`` adds a converter dependency and an ONNX Runtime session per family. A
regression tree is five arrays (``tree_.feature``, ``threshold``, ``children_left``, ``children_right``,
``value``): dumped as JSON they load anywhere, diff as text, and evaluate in a few lines of numpy, so that
predicting needs neither scikit-learn nor pickle. :func:`dump_gbr` / :func:`dump_forest` write, :class:`Ensemble`
reads and evaluates (the same numbers as scikit-learn's ``predict``, tested).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from layerscope.errors import InputError


@dataclass(frozen=True)
class Tree:
    """One regression tree: node ``i`` splits on ``feature[i]`` at ``threshold[i]`` (go ``left[i]`` when
    ``x <= threshold``, else ``right[i]``); a leaf has ``left[i] == -1`` and predicts ``value[i]``."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The leaf value for each row of ``x`` (``[rows, features]``)."""
        node = np.zeros(len(x), dtype=np.int64)
        rows = np.arange(len(x))
        while True:
            inner = self.left[node] != -1
            if not inner.any():
                return np.asarray(self.value[node], dtype=np.float64)
            f = self.feature[node[inner]]
            go_left = x[rows[inner], f] <= self.threshold[node[inner]]
            node[inner] = np.where(go_left, self.left[node[inner]], self.right[node[inner]])

    def to_json(self) -> dict[str, Any]:
        return {"feature": self.feature.tolist(), "threshold": [float(v) for v in self.threshold],
                "left": self.left.tolist(), "right": self.right.tolist(),
                "value": [float(v) for v in self.value]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Tree:
        try:
            arrays = {k: np.asarray(data[k]) for k in ("feature", "threshold", "left", "right", "value")}
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"predictor file: a tree is malformed ({exc})") from None
        n = len(arrays["value"])
        if n == 0 or any(len(a) != n for a in arrays.values()):
            raise InputError("predictor file: a tree's arrays differ in length")
        left, right = arrays["left"].astype(np.int64), arrays["right"].astype(np.int64)
        inner = np.flatnonzero(left != -1)
        if (left[inner] <= inner).any() or (right[inner] <= inner).any() or (left >= n).any() or (right >= n).any():
            raise InputError("predictor file: a tree's children do not point forward")  # no cycles: the walk ends
        return cls(arrays["feature"].astype(np.int64), arrays["threshold"].astype(np.float64), left, right,
                   arrays["value"].astype(np.float64))


@dataclass(frozen=True)
class Ensemble:
    """``base + scale * combine(tree predictions)``, ``combine`` ``"sum"`` (gradient boosting) or ``"mean"``
    (random forest), over ``features`` inputs."""

    base: float
    scale: float
    combine: str
    features: int
    trees: tuple[Tree, ...]

    def predict(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        if x.shape[1] != self.features:
            raise ValueError(f"expected {self.features} features, got {x.shape[1]}")
        total = np.sum([t.predict(x) for t in self.trees], axis=0)
        if self.combine == "mean":
            total = total / len(self.trees)
        return np.asarray(self.base + self.scale * total, dtype=np.float64)

    def to_json(self) -> dict[str, Any]:
        return {"base": self.base, "scale": self.scale, "combine": self.combine, "features": self.features,
                "trees": [t.to_json() for t in self.trees]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Ensemble:
        try:
            combine = str(data["combine"])
            ensemble = cls(float(data["base"]), float(data["scale"]), combine, int(data["features"]),
                           tuple(Tree.from_json(t) for t in data["trees"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"predictor file: a model is malformed ({exc})") from None
        if combine not in ("sum", "mean") or not ensemble.trees:
            raise InputError("predictor file: a model has no trees or an unknown combine rule")
        if any(((t.feature >= ensemble.features) & (t.left != -1)).any() for t in ensemble.trees):
            raise InputError("predictor file: a tree splits on a feature the model does not have")
        return ensemble


def _tree(estimator: Any) -> Tree:
    t = estimator.tree_
    return Tree(np.asarray(t.feature, dtype=np.int64), np.asarray(t.threshold, dtype=np.float64),
                np.asarray(t.children_left, dtype=np.int64), np.asarray(t.children_right, dtype=np.int64),
                np.asarray(t.value, dtype=np.float64).reshape(len(t.feature), -1)[:, 0])


def dump_gbr(model: Any) -> Ensemble:
    """A fitted ``GradientBoostingRegressor`` (squared-error loss, constant init) as an :class:`Ensemble`."""
    base = float(np.asarray(model.init_.constant_).ravel()[0])
    trees: Sequence[Any] = [row[0] for row in model.estimators_]
    return Ensemble(base, float(model.learning_rate), "sum", int(model.n_features_in_),
                    tuple(_tree(t) for t in trees))


def dump_forest(model: Any) -> Ensemble:
    """A fitted ``RandomForestRegressor`` (or ``ExtraTreesRegressor``) as an :class:`Ensemble`."""
    return Ensemble(0.0, 1.0, "mean", int(model.n_features_in_), tuple(_tree(t) for t in model.estimators_))
