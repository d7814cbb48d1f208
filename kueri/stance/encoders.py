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

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kueri.errors import SetupError
from kueri.objects import OBJ1, OBJ2, swap_tokens
from kueri.stance.facts import MODELS_DIR, SENTENCE_LABELS, SENTENCE_SWAP

if TYPE_CHECKING:  # the encoders' modules load when a model first needs an encoder, not with every stance model
    from kueri.encoders.cross import CrossEncoder

SENTENCE_MODEL = MODELS_DIR / "stance-encoder-v1.npz"
#: What the masked objects read as: one word piece each, as unlike as two words can be (``obj1`` / ``obj2`` are
#: three pieces that differ only in the last, and a model fine-tuned on them could not tell which was which).
PLACEHOLDERS = {"OBJ1": "x", "OBJ2": "y"}
#: The first text of every pair: the second says whether it holds, the reverse, or neither.
HYPOTHESIS = "x is better than y"
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


def symmetric(encoder: CrossEncoder, texts: Sequence[Sequence[str]], swap: Sequence[int],
              beside: np.ndarray | Future[np.ndarray] | None = None) -> np.ndarray:
    """P(classes) of masked texts, averaged over both orders of the objects (``swap``: the classes' order once the
    objects are exchanged). ``beside``: what the head also reads of each text, in each order (texts x 2 x k), or
    its future (computed while the encoder reads the texts)."""
    pairs = [(HYPOTHESIS, masked_text(t)) for t in [*texts, *(swap_tokens(t) for t in texts)]]
    states = encoder.states(pairs)
    if isinstance(beside, Future):
        beside = beside.result()
    both = encoder.head_probabilities(states, None if beside is None else np.vstack([beside[:, 0], beside[:, 1]]))
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

    A text is its masked tokens; for an encoder whose head also reads something of the text's sentences
    (``beside``, e.g. :class:`SentenceVoteFeatures`), its masked sentences.

    Like the encoder, it pickles as its file: a worker process or a Ray task opens its own and starts with none kept.
    """

    def __init__(self, path: str | Path, labels: Sequence[str], swap: Sequence[int], rebuild: str,
                 beside: Callable[[list[tuple]], np.ndarray] | None = None) -> None:
        self.path, self.labels, self.swap, self.rebuild = Path(path), tuple(labels), list(swap), rebuild
        self.beside = beside
        self._encoder: CrossEncoder | None = None
        self._kept: dict[tuple, np.ndarray] = {}

    def __reduce__(self) -> tuple[object, ...]:
        return KeptProbabilities, (self.path, self.labels, self.swap, self.rebuild, self.beside)

    def __len__(self) -> int:
        return len(self._kept)

    def _key(self, text: Sequence) -> tuple:
        return tuple(tuple(sentence) for sentence in text) if self.beside is not None else tuple(text)

    def __getitem__(self, text: Sequence) -> np.ndarray:
        return self._kept[self._key(text)]

    @property
    def encoder(self) -> CrossEncoder:
        """The cross-encoder (opened on first use)."""
        if self._encoder is None:
            self._encoder = stance_cross_encoder(self.path, self.labels, self.rebuild)
        return self._encoder

    def add(self, texts: Iterable[Sequence]) -> None:
        """Compute the ``texts`` (masked tokens, or sentences: see the class) not kept yet, in one batch."""
        new = list(dict.fromkeys(key for t in texts if (key := self._key(t)) not in self._kept))
        if not new:
            return
        if len(self._kept) + len(new) > KEPT_TEXTS:
            self._kept.clear()
        if self.beside is None:
            computed = symmetric(self.encoder, new, self.swap)
        else:
            tokens = [[token for sentence in text for token in sentence] for text in new]
            # what is beside (e.g. another encoder's votes) is computed on a thread of its own meanwhile: the encoders
            # run a batch per core and release the GIL, and a core the last batch leaves idle reads it
            with ThreadPoolExecutor(1) as pool:
                computed = symmetric(self.encoder, tokens, self.swap, pool.submit(self.beside, new))
        self._kept.update(zip(new, computed, strict=True))


def sentence_votes(path: str | Path = SENTENCE_MODEL) -> KeptProbabilities:
    """The :class:`SentenceEncoder`'s votes, P(BETTER, WORSE, NONE) of sentences naming both objects, kept."""
    return KeptProbabilities(path, SENTENCE_LABELS, SENTENCE_SWAP, SENTENCE_REBUILD)


class SentenceVoteFeatures:
    """What a passage head whose file says ``"votes"`` reads beside the cross-encoder's state: the sentence
    encoder's votes on the passage's sentences naming both objects (the largest P(BETTER), the largest P(WORSE),
    their mean difference, 1.0 if any sentence votes; all 0.0 if none), and in the other order of the objects the
    same with BETTER and WORSE exchanged. Pickles as the votes' file."""

    width = 4

    def __init__(self, votes: KeptProbabilities) -> None:
        self.votes = votes

    def __call__(self, texts: Sequence[Sequence[Sequence[str]]]) -> np.ndarray:
        """Each text's features in both orders (texts x 2 x :attr:`width`); a text is its masked sentences."""
        voting = [[s for s in text if OBJ1 in s and OBJ2 in s] for text in texts]
        self.votes.add(s for sentences in voting for s in sentences)
        features = np.zeros((len(texts), 2, self.width))
        for row, sentences in enumerate(voting):
            if sentences:
                votes = [self.votes[s] for s in sentences]
                better, worse = max(float(v[0]) for v in votes), max(float(v[1]) for v in votes)
                difference = sum(float(v[0]) - float(v[1]) for v in votes) / len(votes)  # in order: same bits anywhere
                features[row] = (better, worse, difference, 1.0), (worse, better, -difference, 1.0)
        return features
