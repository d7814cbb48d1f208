"""TF-IDF blocks and the model-file format shared by the offline quality and the stance models.

A block is scikit-learn's ``TfidfVectorizer`` at prediction time (sublinear tf, the fitted idf,
l2-normalised row), re-implemented in numpy so scikit-learn is needed only for training. A model file
is an ``.npz`` of plain arrays (no pickle) plus a JSON header, written so its bytes depend only on
its contents.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import TypeVar

import numpy as np

from kueri.arithmetic import dot, logs
from kueri.errors import SetupError
from kueri.files import pack_strings, unpack_strings, write_bytes_atomic

T = TypeVar("T")


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


def load_model_file(path: str | Path, what: str, rebuild: str,
                    build: Callable[[dict[str, object], dict[str, np.ndarray]], T],
                    arrays: Sequence[str] | None = None) -> T:
    """``build(JSON header, arrays)`` of the model file at ``path`` (only the named ``arrays``, else all); a missing
    or unreadable file is a :class:`SetupError` naming ``what`` and the command that rebuilds it."""
    path = Path(path)
    if not path.is_file():
        raise SetupError(f"{what} {path} not found: kueri ships kueri/resources/models/; rebuild it with {rebuild}")
    try:
        with np.load(path, allow_pickle=False) as data:
            read = {name: data[name] for name in (data.files if arrays is None else arrays)}
        return build(json.loads(read.pop("meta").tobytes().decode("utf-8")), read)
    except (KeyError, ValueError, OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise SetupError(f"{what} {path} is unreadable ({exc}): rebuild it with {rebuild}") from None


def read_model_header(path: str | Path, what: str, rebuild: str) -> dict[str, object]:
    """The JSON header of the model file at ``path`` (its arrays are not read); errors as :func:`load_model_file`'s."""
    return load_model_file(path, what, rebuild, lambda meta, arrays: meta, arrays=("meta",))


def write_model_file(path: str | Path, meta: Mapping[str, object], arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``meta`` and ``arrays`` as an ``.npz`` whose bytes depend only on its contents (no timestamps)."""
    arrays = {"meta": np.frombuffer(json.dumps(meta, sort_keys=True).encode("utf-8"), dtype=np.uint8), **arrays}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, member.getvalue(), compresslevel=9)
    write_bytes_atomic(path, buffer.getvalue())
