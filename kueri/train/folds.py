"""The cross-validations' folds, each rule written once: by question or sentence (MD5 of a key), by object pair, by
group dealt round the folds (the web-passage set's domains), and by topic (the second stage's two halves).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

FOLDS = 5


def md5_fold(key: str, folds: int) -> int:
    """The fold of ``key``: the first byte of its MD5 (UTF-8), modulo ``folds``."""
    return hashlib.md5(key.encode("utf-8")).digest()[0] % folds


def question_folds(keys: Sequence[str], repeat: int, folds: int) -> list[int]:
    """Each key's fold in fold assignment ``repeat``: MD5 of ``"repeat:key"``."""
    return [md5_fold(f"{repeat}:{key}", folds) for key in keys]


def pair_fold(first: str, second: str, folds: int) -> int:
    """The fold of an unordered, lower-cased object pair (a pair's sentences fall in one fold, in either order)."""
    return md5_fold("\t".join(sorted((first.lower(), second.lower()))), folds)


def group_folds(groups: Sequence[str], assignment: int, folds: int = FOLDS) -> list[int]:
    """Each item's fold from its group: the groups' place in an order drawn by ``assignment`` (MD5), dealt round
    the folds, so that a few large groups (the web set's 14 writing batches) still fill every fold."""
    order = sorted(set(groups), key=lambda g: hashlib.md5(f"{assignment}:{g}".encode()).digest())
    fold = {group: rank % folds for rank, group in enumerate(order)}
    return [fold[group] for group in groups]


def split_topics(topics: Sequence[str], split: int) -> tuple[list[str], list[str]]:
    """Two folds of topics: split 0 by MD5 parity of the number, the others by a seeded permutation."""
    if split == 0:
        first = [t for t in topics if md5_fold(t, 2) == 0]
    else:
        order = np.random.RandomState(split).permutation(len(topics))
        first = [topics[i] for i in sorted(order[: len(topics) // 2])]
    return first, [t for t in topics if t not in first]
