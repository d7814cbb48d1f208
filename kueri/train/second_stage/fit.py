"""The second stage's fits: a free ridge regression of the grade, and the offset model (the original's BM25 x
quality corrected by a pairwise logistic regression), both closed-form or Newton: exact and deterministic."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kueri.errors import KueriError
from kueri.second_stage.features import FEATURES
from kueri.second_stage.model import SecondStageModel
from kueri.train.second_stage.data import Data

ALPHAS = (100.0, 300.0, 1000.0, 3000.0, 10000.0)
LAMBDAS = (0.001, 0.01, 0.03, 0.1, 0.3, 1.0)
KINDS = {
    "offset": "the original's BM25 x quality times exp(learned linear correction): pairwise logistic regression "
              "with log(bm25_rel) + log(quality) as a fixed offset",
    "ridge": "ridge regression of the inherited relevance grade on standardised features",
}


def standardise(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = matrix.mean(axis=0)
    scale = matrix.std(axis=0)
    scale[scale == 0] = 1.0  # a constant feature: any scale; its coefficient will be 0
    return mean, scale


def fit_ridge(data: Data, rows: np.ndarray, alpha: float, columns: Sequence[int] | None = None
              ) -> SecondStageModel:
    """Ridge of the grade on the standardised features of ``rows`` (closed form); ``columns``: only these
    features (the others weigh 0)."""
    matrix, target = data.matrix[rows], data.grade[rows]
    mean, scale = standardise(matrix)
    cols = list(range(matrix.shape[1])) if columns is None else list(columns)
    x = (matrix[:, cols] - mean[cols]) / scale[cols]
    coef = np.zeros(matrix.shape[1])
    coef[cols] = np.linalg.solve(x.T @ x + alpha * np.eye(len(cols)), x.T @ (target - target.mean()))
    return SecondStageModel(coef, float(target.mean()), mean, scale, depth=1, features=data.features)


def preference_pairs(data: Data, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(better, worse, weight): every pair of one topic's candidates among ``rows`` whose grades differ.

    Each topic weighs the same in all (its pairs share weight 1), so topics with many candidates or
    judgments do not dominate.
    """
    better, worse, weight = [], [], []
    for qid in sorted(set(data.topic[rows].tolist()), key=int):
        members = np.flatnonzero((data.topic == qid) & rows)
        grades = data.grade[members]
        a, b = np.nonzero(grades[:, None] > grades[None, :])
        if len(a):
            better.append(members[a])
            worse.append(members[b])
            weight.append(np.full(len(a), 1.0 / len(a)))
    if not better:
        raise KueriError("no pair of candidates with different grades to learn from")
    w = np.concatenate(weight)
    return np.concatenate(better), np.concatenate(worse), w / w.sum()


def fit_offset(data: Data, rows: np.ndarray, lam: float) -> SecondStageModel:
    """The original's ``BM25 x quality`` times a learned correction: pairwise logistic regression
    (RankNet with a linear scorer) with ``log bm25_rel + log quality`` as a fixed offset.

    P(i above j) = sigmoid(offset_i - offset_j + w . (z_i - z_j)), z the standardised features except
    log_quality (its exponent stays the original's 1); L2 penalty ``lam``; solved by Newton's method (a
    convex problem with ~25 unknowns: exact and deterministic, no solver library needed).
    """
    mean, scale = standardise(data.matrix[rows])
    z = (data.matrix - mean) / scale
    bm25, quality = data.features.index("log_bm25_rel"), data.features.index("log_quality")
    offset = data.matrix[:, bm25] + data.matrix[:, quality]
    learned = [j for j in range(len(data.features)) if j != quality]
    better, worse, weight = preference_pairs(data, rows)
    dz = z[better][:, learned] - z[worse][:, learned]
    doff = offset[better] - offset[worse]
    w = np.zeros(len(learned))
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(doff + dz @ w)))
        gradient = dz.T @ (weight * (p - 1.0)) + 2.0 * lam * w
        hessian = (dz * (weight * p * (1.0 - p))[:, None]).T @ dz + 2.0 * lam * np.eye(len(learned))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-12:
            break
    # As one linear model: log bm25 = scale * z + mean (the same for quality), so the offset's coefficient 1
    # on the raw feature is its scale on the standardised one.
    coef = np.zeros(len(data.features))
    coef[learned] = w
    coef[bm25] += scale[bm25]
    coef[quality] += scale[quality]
    return SecondStageModel(coef, float(mean[bm25] + mean[quality]), mean, scale, depth=1, features=data.features)


def score(model: SecondStageModel, data: Data, rows: np.ndarray | None = None) -> np.ndarray:
    """The model's scores of ``rows`` of the data (all rows when None); the data holds the model's columns."""
    matrix = data.matrix if rows is None else data.matrix[rows]
    full = np.zeros((len(matrix), len(FEATURES)))
    full[:, [FEATURES.index(f) for f in data.features]] = matrix
    return model.score(full)
