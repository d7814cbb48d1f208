"""TF-IDF blocks of the offline quality and the stance models, and how a block is stored in a model file.

A block is scikit-learn's ``TfidfVectorizer`` at prediction time (sublinear tf, the fitted idf,
l2-normalised row), re-implemented in numpy so scikit-learn is needed only for training. A model file
(:mod:`kueri.model_files`) stores a block as a few named arrays (:func:`block_arrays`, :func:`read_block`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

from kueri.arithmetic import dot, logs
from kueri.files import pack_strings, unpack_strings


@dataclass(frozen=True)
class TfidfBlock:
    """Vocabulary and idf of a TF-IDF block; ``coef``: a single-output linear model's weight per term, if any."""

    vocabulary: list[str]
    idf: np.ndarray
    coef: np.ndarray | None = None
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.vocabulary) != len(self.idf) or (self.coef is not None and len(self.coef) != len(self.idf)):
            raise ValueError("vocabulary, idf and coef differ in length")
        object.__setattr__(self, "_index", {term: i for i, term in enumerate(self.vocabulary)})

    def weights(self, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray, float]:
        """(column ids, tf-idf weights, l2 norm) of the known terms (unknown terms dropped), unnormalised.

        Counting and the vocabulary look-up run in C (Counter, map); the arithmetic in numpy.
        """
        counts = Counter(terms)
        ids = np.fromiter(map(self._index.get, counts.keys(), repeat(-1)), dtype=np.int64, count=len(counts))
        tf = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
        known = ids >= 0
        ids = ids[known]
        weights = (1.0 + logs(tf[known])) * self.idf[ids]
        return ids, weights, math.sqrt(dot(weights, weights))

    def transform(self, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(column ids, weights) of the known terms: the non-zero entries of the l2-normalised row."""
        ids, weights, norm = self.weights(terms)
        return ids, (weights / norm if norm > 0.0 else weights)

    def dot(self, terms: Sequence[str]) -> float:
        """coef . tfidf(terms) (0 when no term is known)."""
        ids, weights, norm = self.weights(terms)
        return dot(weights, self.coef[ids]) / norm if norm > 0.0 else 0.0  # type: ignore[index]


def block_arrays(name: str, block: TfidfBlock) -> dict[str, np.ndarray]:
    """The arrays that store ``block`` in a model file, under ``name``."""
    arrays = dict(zip((f"{name}_vocab", f"{name}_offsets"), pack_strings(block.vocabulary), strict=True))
    arrays[f"{name}_idf"] = block.idf
    if block.coef is not None:
        arrays[f"{name}_coef"] = block.coef
    return arrays


def read_block(arrays: Mapping[str, np.ndarray], name: str, with_coef: bool = False) -> TfidfBlock:
    """The block stored under ``name`` (its ``coef`` too when ``with_coef``)."""
    return TfidfBlock(unpack_strings(arrays[f"{name}_vocab"], arrays[f"{name}_offsets"]), arrays[f"{name}_idf"],
                      arrays[f"{name}_coef"] if with_coef else None)
