"""The second stage's model: one linear function of the standardised features, stored as JSON.

``score = intercept + sum_j coef_j * (x_j - mean_j) / scale_j`` over the features the model names (a
subset of :data:`~kueri.second_stage.features.FEATURES`, in their order; see
``scripts/train_second_stage.py``). Plain numbers in a small text file: no pickle, nothing
version-specific, readable in a review, and prediction is one matrix-vector product in numpy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kueri import resources
from kueri.arithmetic import dot, row_dots
from kueri.errors import SetupError
from kueri.files import write_bytes_atomic
from kueri.second_stage.features import FEATURES, NEURAL_FEATURES

MODEL_DIR = resources.models()
#: MiniLM and e5 similarities and MiniLM pseudo-relevance feedback: the default configuration's.
DEFAULT_MODEL = MODEL_DIR / "second-stage-v2.json"
#: MiniLM similarity only (no e5 weights to install).
MINILM_MODEL = MODEL_DIR / "second-stage-v1.json"
#: No neural feature: for installs without onnxruntime and the model packages.
LEXICAL_MODEL = MODEL_DIR / "second-stage-lexical-v1.json"
#: The whole topic: v2's features plus the description's and the narrative's (BM25, MiniLM, e5).
WHOLE_TOPIC_MODEL = MODEL_DIR / "second-stage-whole-topic-v1.json"
#: Model names accepted instead of paths.
SHIPPED_MODELS = {"second-stage-v2": DEFAULT_MODEL, "second-stage-v1": MINILM_MODEL,
                  "second-stage-lexical-v1": LEXICAL_MODEL, "second-stage-whole-topic-v1": WHOLE_TOPIC_MODEL}
MODEL_FORMAT = 1
TRAIN_HINT = "rebuild it with: .venv/bin/python scripts/train_second_stage.py"


class SecondStageModel:
    """A linear scorer over some of :data:`~kueri.second_stage.features.FEATURES` plus the stage's settings."""

    def __init__(self, coef: Sequence[float], intercept: float, mean: Sequence[float], scale: Sequence[float],
                 depth: int, meta: Mapping[str, Any] | None = None, features: Sequence[str] = FEATURES) -> None:
        features = tuple(features)
        positions = [FEATURES.index(name) for name in features if name in FEATURES]
        if len(positions) != len(features) or positions != sorted(set(positions)):
            raise SetupError(f"second-stage model weighs features {list(features)} that are not, in this order, "
                             f"among those kueri/second_stage/features.py computes: {TRAIN_HINT}")
        arrays = [np.asarray(v, dtype=np.float64) for v in (coef, mean, scale)]
        if any(a.shape != (len(features),) for a in arrays):
            raise SetupError(f"second-stage model has {[a.shape for a in arrays]} weights for {len(features)} "
                             f"features: {TRAIN_HINT}")
        if not all(np.isfinite(a).all() for a in arrays) or not math.isfinite(intercept) or (arrays[2] <= 0).any():
            raise SetupError(f"second-stage model has non-finite weights or non-positive scales: {TRAIN_HINT}")
        if depth < 1:
            raise SetupError(f"second-stage model depth must be at least 1, not {depth}: {TRAIN_HINT}")
        self.features = features
        self._columns = np.array(positions, dtype=np.int64)
        self.coef, self.mean, self.scale = arrays
        self.intercept = float(intercept)
        self.depth = int(depth)
        self.meta = dict(meta or {})
        # Fold the standardisation into the weights once: score = offset + x . weights.
        self._weights = self.coef / self.scale
        self._offset = self.intercept - dot(self._weights, self.mean)

    def score(self, features: np.ndarray) -> np.ndarray:
        """One score per feature row (``n`` x ``len(FEATURES)``: all features, the model picks its own)."""
        matrix = np.asarray(features, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[1] != len(FEATURES):
            raise ValueError(f"expected an n x {len(FEATURES)} feature matrix, got shape {matrix.shape}")
        return self._offset + row_dots(matrix[:, self._columns], self._weights)

    @property
    def encoders(self) -> frozenset[str]:
        """The neural encoders the model's weighted features need (``minilm``, ``e5``; empty: none)."""
        return frozenset(NEURAL_FEATURES[name] for name, weight in self.weights().items()
                         if name in NEURAL_FEATURES and weight != 0.0)

    def weights(self) -> dict[str, float]:
        """Each feature's coefficient on the standardised scale (comparable with one another)."""
        return dict(zip(self.features, self.coef.tolist(), strict=True))

    # -- files -----------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "format": MODEL_FORMAT,
            "features": list(self.features),
            "coef": self.coef.tolist(),
            "intercept": self.intercept,
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "depth": self.depth,
            "meta": self.meta,
        }

    def save(self, path: str | Path) -> None:
        """Write the model atomically; the bytes depend only on its contents (sorted keys, no dates)."""
        text = json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n"
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(target, text.encode("utf-8"))

    @classmethod
    def load(cls, path: str | Path = DEFAULT_MODEL) -> SecondStageModel:
        """A model file, or a shipped model's name (:data:`SHIPPED_MODELS`)."""
        path = SHIPPED_MODELS.get(str(path), Path(path))
        if not path.is_file():
            shipped = ", ".join(p.name for p in SHIPPED_MODELS.values())
            raise SetupError(f"second-stage model {path} not found (the repository ships {shipped} in "
                             f"kueri/resources/models): {TRAIN_HINT}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SetupError(f"second-stage model {path} is unreadable ({exc}): {TRAIN_HINT}") from None
        if not isinstance(data, dict) or data.get("format") != MODEL_FORMAT:
            raise SetupError(f"second-stage model {path} is not format {MODEL_FORMAT}: {TRAIN_HINT}")
        features = data.get("features")
        if not isinstance(features, list) or not set(features) <= set(FEATURES):
            raise SetupError(f"second-stage model {path} was trained on other features than kueri/second_stage/"
                             f"features.py computes: {TRAIN_HINT}")
        try:
            return cls(data["coef"], float(data["intercept"]), data["mean"], data["scale"], int(data["depth"]),
                       data.get("meta", {}), features)
        except (KeyError, TypeError, ValueError) as exc:
            raise SetupError(f"second-stage model {path} lacks or mangles {exc}: {TRAIN_HINT}") from None
