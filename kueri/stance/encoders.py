"""The stance models' cross-encoders: what their text pairs are, and how both orders of the objects are averaged.

A stance cross-encoder (:class:`kueri.encoders.cross.CrossEncoder`, MiniLM fine-tuned by kueri) reads the pair
(:data:`HYPOTHESIS`, a text with the topic's objects masked as kueri masks them, ``OBJ1`` and ``OBJ2`` read as
:data:`PLACEHOLDERS`), so it learns the comparison, never the objects. Each is symmetric in the objects by
construction: a text's probabilities are averaged with those of the text with the objects exchanged, the classes
that name a side exchanged back.

- :class:`SentenceEncoder` (``stance-encoder-v1.npz``, ``scripts/train_stance_encoder.py``): P(BETTER, WORSE,
  NONE) of a sentence naming both objects: the hypothesis holds, the reverse holds, or it compares nothing;
  :func:`sentence_votes` keeps them for a model's life (:class:`KeptProbabilities`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kueri import resources
from kueri.errors import SetupError
from kueri.objects import swap_tokens

if TYPE_CHECKING:  # the encoders' modules load when a model first needs an encoder, not with every stance model
    from kueri.encoders.cross import CrossEncoder

SENTENCE_MODEL = resources.path("models", "stance-encoder-v1.npz")
#: What the masked objects read as: one word piece each, as unlike as two words can be (``obj1`` / ``obj2`` are
#: three pieces that differ only in the last, and a model fine-tuned on them could not tell which was which).
PLACEHOLDERS = {"OBJ1": "x", "OBJ2": "y"}
#: The first text of every pair: the second says whether it holds, the reverse, or neither.
HYPOTHESIS = "x is better than y"
SENTENCE_LABELS = ("BETTER", "WORSE", "NONE")
#: Exchanging the objects exchanges these probabilities.
SENTENCE_SWAP = [1, 0, 2]
SENTENCE_REBUILD = "`python scripts/train_stance_encoder.py` (pip install -e '.[train]')"


def masked_text(masked: Sequence[str]) -> str:
    """Masked tokens (:mod:`kueri.objects`) as the text a stance cross-encoder reads: OBJ1 and OBJ2 as
    :data:`PLACEHOLDERS`, the rest lower-cased."""
    return " ".join(PLACEHOLDERS.get(token, token.lower()) for token in masked)


def stance_cross_encoder(path: str | Path, labels: Sequence[str], rebuild: str,
                         threads: int | None = None) -> CrossEncoder:
    """The cross-encoder in ``path``, checked to answer ``labels`` for :data:`HYPOTHESIS`."""
    from kueri.encoders.cross import CrossEncoder

    encoder = CrossEncoder(path, rebuild, threads)
    if encoder.labels != tuple(labels) or encoder.meta.get("hypothesis") != HYPOTHESIS:
        raise SetupError(f"stance encoder {path} has labels {list(encoder.labels)} and hypothesis "
                         f"{encoder.meta.get('hypothesis')!r}, not what kueri computes: rebuild it with {rebuild}")
    return encoder


def symmetric(encoder: CrossEncoder, texts: Sequence[Sequence[str]], swap: Sequence[int]) -> np.ndarray:
    """P(classes) of masked texts, averaged over both orders of the objects (``swap``: the classes' order once the
    objects are exchanged)."""
    both = encoder.predict([(HYPOTHESIS, masked_text(t)) for t in [*texts, *(swap_tokens(t) for t in texts)]])
    forward, backward = both[: len(texts)], both[len(texts):]
    return (forward + backward[:, list(swap)]) / 2.0


class SentenceEncoder:
    """P(BETTER, WORSE, NONE) of masked sentences, symmetric in the objects (see the module).

    ``probabilities(sentences)``: one row per sentence, each a list of masked tokens (OBJ1 / OBJ2).
    """

    labels = SENTENCE_LABELS

    def __init__(self, path: str | Path = SENTENCE_MODEL, threads: int | None = None) -> None:
        self.cross = stance_cross_encoder(path, SENTENCE_LABELS, SENTENCE_REBUILD, threads)

    def probabilities(self, sentences: Sequence[Sequence[str]]) -> np.ndarray:
        """P(BETTER, WORSE, NONE) of each masked sentence, averaged over both orders of the objects."""
        return symmetric(self.cross, sentences, SENTENCE_SWAP)


#: Texts whose probabilities one :class:`KeptProbabilities` keeps (a full-size run has a few tens of thousands of
#: sentences naming both objects).
KEPT_TEXTS = 200_000


class KeptProbabilities:
    """A stance cross-encoder's probabilities of masked texts (:func:`symmetric`), each computed once and kept (up to
    :data:`KEPT_TEXTS` texts) for this object's life; the encoder is opened on first use.

    Like the encoder, it pickles as its file: a worker process or a Ray task opens its own and starts with none kept.
    """

    def __init__(self, path: str | Path, labels: Sequence[str], swap: Sequence[int], rebuild: str) -> None:
        self.path, self.labels, self.swap, self.rebuild = Path(path), tuple(labels), list(swap), rebuild
        self._encoder: CrossEncoder | None = None
        self._kept: dict[tuple[str, ...], np.ndarray] = {}

    def __reduce__(self) -> tuple[object, ...]:
        return KeptProbabilities, (self.path, self.labels, self.swap, self.rebuild)

    def __len__(self) -> int:
        return len(self._kept)

    def __getitem__(self, text: Sequence[str]) -> np.ndarray:
        return self._kept[tuple(text)]

    @property
    def encoder(self) -> CrossEncoder:
        """The cross-encoder (opened on first use)."""
        if self._encoder is None:
            self._encoder = stance_cross_encoder(self.path, self.labels, self.rebuild)
        return self._encoder

    def add(self, texts: Iterable[Sequence[str]]) -> None:
        """Compute the ``texts`` (masked tokens) not kept yet, in one batch."""
        new = list(dict.fromkeys(key for t in texts if (key := tuple(t)) not in self._kept))
        if not new:
            return
        if len(self._kept) + len(new) > KEPT_TEXTS:
            self._kept.clear()
        self._kept.update(zip(new, symmetric(self.encoder, new, self.swap), strict=True))


def sentence_votes(path: str | Path = SENTENCE_MODEL) -> KeptProbabilities:
    """The :class:`SentenceEncoder`'s votes, P(BETTER, WORSE, NONE) of sentences naming both objects, kept."""
    return KeptProbabilities(path, SENTENCE_LABELS, SENTENCE_SWAP, SENTENCE_REBUILD)
