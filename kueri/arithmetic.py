"""Floating-point arithmetic whose bits do not depend on the CPU: what the scoring stages compute with.

A run must be the same file on every machine. numpy hands some operations to code picked at run time
for the processor: a matrix or vector product goes to OpenBLAS, whose kernels for AVX2 and AVX-512 add
the products in different orders, and ``np.log`` / ``np.exp`` have AVX-512 versions that differ from
the others in the last bit. Measured (``docs/reproducibility.md``): ``P @ Q.T`` moved by 7e-7 and
``np.log`` by 1e-16 between this machine (AVX-512) and an emulated AVX2 CPU, while an element-wise
product followed by numpy's ``sum`` (one fixed pairwise order, whatever the vector width), and
Python's ``math.log`` / ``math.exp``, came out bit for bit the same. So the stages use these helpers
instead of ``@``, ``np.dot``, ``np.linalg.norm`` of a vector, ``np.log`` and ``np.exp``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """``a . b`` of two vectors, added in numpy's fixed pairwise order (not BLAS's)."""
    return float(np.multiply(a, b).sum())


def row_dots(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` row by row, each row's products added in numpy's fixed order (not BLAS's)."""
    return np.multiply(matrix, vector).sum(axis=-1)


def unit(vector: np.ndarray) -> np.ndarray:
    """``vector`` scaled to length 1 (a zero vector stays zero)."""
    return vector / max(math.sqrt(dot(vector, vector)), 1e-12)


def logs(values: Iterable[float]) -> np.ndarray:
    """Natural logarithms, one by one with Python's ``math.log`` (numpy's AVX-512 ``log`` differs)."""
    return np.array([math.log(v) for v in values], dtype=np.float64)


def exps(values: Iterable[float]) -> np.ndarray:
    """``e ** v``, one by one with Python's ``math.exp`` (numpy's AVX-512 ``exp`` differs)."""
    return np.array([math.exp(v) for v in values], dtype=np.float64)
