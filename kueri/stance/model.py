"""The shipped stance model: which object of a comparative topic a passage favours, if any.

Two linear models over object-masked text (:mod:`kueri.stance.features`), stored together in
``kueri/resources/models/stance-v1.npz`` (plain arrays and a JSON header, no pickle) and rebuilt by
``scripts/train_stance.py``:

* a **sentence** model, trained on CompSent-19 (web sentences naming two objects, labelled BETTER /
  WORSE / NONE): TF-IDF of masked uni- and bigrams -> softmax; it reads every sentence of a passage that
  names both objects, and says whether it ranks OBJ1 over OBJ2, the reverse, or neither;
* a **passage** model, trained on the Touché 2022 stance training set (StackExchange answers labelled
  FIRST / SECOND / NEUTRAL / NO): TF-IDF of the whole masked passage plus dense features (how often and
  where each object is named, the sentence model's votes and VADER sentiment of the sentences naming
  each object, aggregated over the passage) -> softmax.

Both are made exactly symmetric in the objects: the probability of a text is averaged with that of the
text with OBJ1 and OBJ2 exchanged, with the labels exchanged back (BETTER/WORSE, FIRST/SECOND). So
swapping a topic's objects swaps FIRST and SECOND and changes nothing else.

The decision is made for **retrieved web passages**, which differ from the training answers: an answer
to "A or B?" nearly always takes a side (only 9 % NO), a retrieved passage that names A and B often just
describes them (a product list, a news item). Three steps, in this order:

1. a passage that names neither object cannot favour one: NO, without asking the model;
2. **prior shift**: the probabilities, learnt at the training balance, are divided by the training priors
   and multiplied by the target priors stored with the model (uniform: every class equally likely a
   priori, the neutral choice for macro-F1 when the target balance is unknown; it lifts NO about 2.8x);
3. **NEUTRAL gate**: NEUTRAL ("weighs both, no winner") needs at least one sentence naming both objects
   that the web-trained sentence model finds comparative (P(BETTER) + P(WORSE)) at least as often as an
   average CompSent-19 sentence does (its base rate, ~0.27). Otherwise the passage discusses both without
   comparing them, which on the web is no stance: NEUTRAL's (shifted) probability goes to NO. On the
   training answers, which discuss options in the abstract, this gate would be wrong (it is reported
   separately by the training script); on retrieved passages it is what makes NO the usual label.

The label is the class with the highest resulting score. Both knobs can be changed at run time
(:meth:`StanceModel.with_decision`, ``kueri stance --priors/--neutral-gate``).

**Where the sentence votes come from.** ``stance-v1.npz`` takes them from its TF-IDF sentence model;
``stance-v2.npz`` (header ``"votes": "encoder"``) from kueri's fine-tuned cross-encoder
(:class:`kueri.stance.encoders.SentenceEncoder`, the file named by its ``"encoder"`` header beside it), which
reads the whole masked sentence and sees which object it favours; its passage model was trained on those votes. The
encoder scores every distinct sentence naming both objects once (:meth:`StanceModel.prefetch` takes a
topic's passages in one batch).

Prediction is plain numpy (and onnxruntime for the encoder's votes); scikit-learn and JAX only train.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kueri.arithmetic import exps, row_dots
from kueri.errors import SetupError
from kueri.model_files import load_model_file, write_model_file
from kueri.objects import OBJ1, OBJ2, MaskedPassage, ObjectMatcher, mask_passage, swap_tokens
from kueri.stance.decision import Decision, Explanation, explain, names_an_object
from kueri.stance.encoders import sentence_votes
from kueri.stance.facts import (
    LABELS,
    MODELS_DIR,
    PASSAGE_SWAP,
    SENTENCE_LABELS,  # noqa: F401 - the training code reads it here
    SENTENCE_SWAP,
)
from kueri.stance.features import DENSE_FEATURES, dense_features, ngrams, sentence_sentiments
from kueri.tfidf import TfidfBlock, block_arrays, read_block

#: stance-v1's file: the TF-IDF model (the fast model below the others).
STANCE_V1_FILE = MODELS_DIR / "stance-v1.npz"
#: Its name in the training code (kueri/train, scripts/): the file :meth:`StanceModel.load` reads unless told, not the
#: default model (that is :data:`kueri.stance.facts.DEFAULT`).
DEFAULT_MODEL = STANCE_V1_FILE
MODEL_FORMAT = 1
#: Where a model's sentence votes come from: its TF-IDF sentence model, or kueri's stance encoder.
VOTE_SOURCES = ("tfidf", "encoder")


@dataclass(frozen=True)
class LinearSoftmax:
    """A multinomial logistic regression over one TF-IDF block and (optionally) standardised dense features.

    ``coef`` is classes x (vocabulary + dense); dense features enter as ``(x - mean) / scale``.
    """

    tfidf: TfidfBlock
    coef: np.ndarray
    intercept: np.ndarray
    dense_mean: np.ndarray
    dense_scale: np.ndarray

    def __post_init__(self) -> None:
        n_terms, n_dense = len(self.tfidf.vocabulary), len(self.dense_mean)
        if self.coef.shape != (len(self.intercept), n_terms + n_dense) or len(self.dense_scale) != n_dense:
            raise ValueError(f"inconsistent shapes: coef {self.coef.shape}, {len(self.intercept)} classes, "
                             f"{n_terms} terms, {n_dense} dense features")

    def probabilities(self, terms: Sequence[str], dense: Sequence[float] = ()) -> np.ndarray:
        ids, weights = self.tfidf.transform(terms)
        logits = self.intercept + row_dots(self.coef[:, ids], weights)
        if len(self.dense_mean):
            scaled = (np.asarray(dense, dtype=np.float64) - self.dense_mean) / self.dense_scale
            logits = logits + row_dots(self.coef[:, len(self.tfidf.vocabulary):], scaled)
        logits = logits - logits.max()
        exp = exps(logits)
        return exp / exp.sum()


def companion_file(folder: Path, name: str) -> Path:
    """A file a model's header names (an encoder, a fast model): beside the model's file, else the shipped one (a
    model written elsewhere, e.g. ``train_stance.py --out``)."""
    beside = folder / name
    return beside if beside.is_file() else MODELS_DIR / beside.name


class StanceModel:
    """The shipped stance model; :meth:`label` maps (passage text, first object, second object) to a label."""

    def __init__(self, meta: Mapping[str, object], sentence: LinearSoftmax, passage: LinearSoftmax,
                 folder: Path | None = None) -> None:
        if meta.get("format") != MODEL_FORMAT:
            raise SetupError(f"stance model format {meta.get('format')!r} is not {MODEL_FORMAT}: "
                             "rebuild it with `python scripts/train_stance.py`")
        if tuple(meta.get("dense_features", ())) != DENSE_FEATURES or tuple(meta.get("labels", ())) != LABELS:
            raise SetupError("stance model was trained with other features or labels than kueri/stance computes: "
                             "rebuild it with `python scripts/train_stance.py`")
        self.meta = dict(meta)
        self.sentence = sentence
        self.passage = passage
        self.decision = Decision.from_meta(meta, "`python scripts/train_stance.py`")
        self.votes_from = str(meta.get("votes", "tfidf"))
        if self.votes_from not in VOTE_SOURCES:
            raise SetupError(f"stance model votes from {self.votes_from!r}, not one of {', '.join(VOTE_SOURCES)}: "
                             "rebuild it with `python scripts/train_stance.py`")
        # The encoder's file, beside the model's; it is opened on first use, in the process that labels.
        self.folder = folder if folder is not None else MODELS_DIR
        self.votes = sentence_votes(self.companion("encoder")) if self.votes_from == "encoder" else None

    def companion(self, key: str) -> Path:
        """The file a header entry names (the sentence encoder): :func:`companion_file`."""
        return companion_file(self.folder, str(self.meta[key]))

    def at_rank(self, rank: int) -> StanceModel:
        """The model that labels a topic's hit at ``rank``: this one, at every rank (:class:`kueri.stance.family.
        Cascade` composes two)."""
        return self

    # -- files ---------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path = STANCE_V1_FILE) -> StanceModel:
        def build(meta: dict[str, object], arrays: dict[str, np.ndarray]) -> StanceModel:
            parts = {name: LinearSoftmax(read_block(arrays, name), arrays[f"{name}_coef"], arrays[f"{name}_intercept"],
                                         arrays[f"{name}_dense_mean"], arrays[f"{name}_dense_scale"])
                     for name in ("sentence", "passage")}
            return cls(meta, parts["sentence"], parts["passage"], Path(path).parent)

        return load_model_file(path, "stance model", "`python scripts/train_stance.py`", build)

    def save(self, path: str | Path) -> None:
        """Write the model as an ``.npz`` whose bytes depend only on its contents (no timestamps)."""
        arrays: dict[str, np.ndarray] = {}
        for name, part in (("sentence", self.sentence), ("passage", self.passage)):
            arrays.update(block_arrays(name, part.tfidf))
            arrays[f"{name}_coef"], arrays[f"{name}_intercept"] = part.coef, part.intercept
            arrays[f"{name}_dense_mean"], arrays[f"{name}_dense_scale"] = part.dense_mean, part.dense_scale
        write_model_file(path, self.meta, arrays)

    # -- prediction ----------------------------------------------------------------------------

    def sentence_probabilities(self, masked: Sequence[str]) -> np.ndarray:
        """P(BETTER, WORSE, NONE) of one masked sentence, symmetric in the objects."""
        forward = self.sentence.probabilities(ngrams(masked))
        backward = self.sentence.probabilities(ngrams(swap_tokens(masked)))
        return (forward + backward[SENTENCE_SWAP]) / 2.0

    def prefetch(self, passages: Sequence[MaskedPassage]) -> None:
        """Vote on the sentences naming both objects of ``passages`` that have no vote yet, in one batch (a model
        whose votes come from the encoder; the others need none)."""
        if self.votes is not None:
            self.votes.add(s for passage in passages for s in passage.sentences if OBJ1 in s and OBJ2 in s)

    def sentence_votes(self, passage: MaskedPassage) -> list[np.ndarray | None]:
        """P(BETTER, WORSE, NONE) of each sentence naming both objects, None for the others."""
        if self.votes is not None:
            self.prefetch([passage])
            return [self.votes[s] if OBJ1 in s and OBJ2 in s else None for s in passage.sentences]
        return [self.sentence_probabilities(s) if OBJ1 in s and OBJ2 in s else None for s in passage.sentences]

    def _one_way(self, passage: MaskedPassage, votes: Sequence[np.ndarray | None],
                 sentiments: Sequence[float | None]) -> np.ndarray:
        dense = dense_features(passage, votes, sentiments)
        return self.passage.probabilities(ngrams(passage.tokens), dense)

    def _analyse(self, passage: MaskedPassage) -> tuple[np.ndarray, float]:
        """(P(FIRST, SECOND, NEUTRAL, NO) at the training priors, the strongest sentence comparison)."""
        votes = self.sentence_votes(passage)
        sentiments = sentence_sentiments(passage)  # the same both ways
        # The sentence model is symmetric: the swapped passage's votes are the votes with BETTER/WORSE swapped.
        swapped_votes = [v[SENTENCE_SWAP] if v is not None else None for v in votes]
        forward = self._one_way(passage, votes, sentiments)
        backward = self._one_way(passage.swapped(), swapped_votes, sentiments)
        comparative = max((float(v[0] + v[1]) for v in votes if v is not None), default=0.0)
        return (forward + backward[PASSAGE_SWAP]) / 2.0, comparative

    def passage_probabilities(self, passage: MaskedPassage) -> np.ndarray:
        """P(FIRST, SECOND, NEUTRAL, NO) at the training priors, symmetric in the objects."""
        return self._analyse(passage)[0]

    def probabilities(self, text: str, first: str, second: str) -> np.ndarray:
        """P(FIRST, SECOND, NEUTRAL, NO) of a passage for a topic with objects ``first``, ``second``."""
        return self.passage_probabilities(mask_passage(text, ObjectMatcher(first, second)))

    @property
    def train_priors(self) -> np.ndarray:
        return self.decision.train_priors

    @property
    def target_priors(self) -> np.ndarray:
        return self.decision.target_priors

    def decide(self, probabilities: np.ndarray, comparative: float = 1.0) -> str:
        """The label of P(FIRST, SECOND, NEUTRAL, NO) at the training priors (:class:`Decision`).

        ``comparative``: how clearly the passage's best sentence compares the objects (P(BETTER) + P(WORSE)).
        Below the model's ``neutral_gate`` NEUTRAL's probability goes to NO: on the web, a passage that
        discusses both objects without comparing them takes no stance (see the module docstring).
        """
        return self.decision.label(probabilities, comparative)

    def label_masked(self, passage: MaskedPassage) -> str:
        if not names_an_object(passage):
            return "NO"  # names neither object: it cannot favour one
        return self.decide(*self._analyse(passage))

    def label(self, text: str, first: str, second: str) -> str:
        """The stance of ``text`` towards the objects: FIRST, SECOND, NEUTRAL or NO."""
        return self.label_masked(mask_passage(text, ObjectMatcher(first, second)))

    def explain(self, text: str, matcher: ObjectMatcher) -> Explanation:
        """The label of ``text`` (:meth:`label_masked`'s) and the sentence that decided it
        (:func:`kueri.stance.decision.explain`)."""
        return explain(text, matcher, self.label_masked, lambda rest: self.decision.scores(*self._analyse(rest)))

    def prefetch_explanations(self, texts: Sequence[str], matcher: ObjectMatcher) -> None:
        """The sentence votes :meth:`explain` reads (a passage's parts have no sentence the passage lacks)."""
        self.prefetch([mask_passage(text, matcher) for text in texts])

    def with_decision(self, target_priors: Sequence[float] | None = None,
                      neutral_gate: float | None = None) -> StanceModel:
        """The same model with other target priors (FIRST, SECOND, NEUTRAL, NO) and/or NEUTRAL gate."""
        meta = {**self.meta, **self.decision.changed_meta(target_priors, neutral_gate)}
        return StanceModel(meta, self.sentence, self.passage, self.folder)
