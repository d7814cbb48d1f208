"""A stance model that reads the whole passage: a stance cross-encoder with a passage head.

The cross-encoder (:mod:`kueri.stance.encoders`) reads the pair ("x is better than y", the passage with the topic's
objects masked as x and y, cut to the word pieces its file allows) and its head answers P(FIRST, SECOND, NEUTRAL,
NO) directly, averaged over both orders of the objects (symmetric by construction). Its file
(``scripts/train_stance_passages.py``) is a cross-encoder file whose header also holds the decision
(:class:`~kueri.stance.decision.Decision`: the training data's class balance and the web's, as assumed by the
web-passage set) and ``"kind": "passage-encoder"``. A passage naming neither object is NO without asking the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from kueri.objects import MaskedPassage, ObjectMatcher, mask_passage
from kueri.records import STANCES as LABELS
from kueri.stance.decision import Decision, Explanation, explain, names_an_object
from kueri.stance.encoders import KeptProbabilities

KIND = "passage-encoder"
#: Exchanging the objects exchanges these probabilities.
SWAP = [1, 0, 2, 3]
REBUILD = "`python scripts/train_stance_passages.py write` (pip install -e '.[train]')"


class PassageEncoderModel:
    """P(FIRST, SECOND, NEUTRAL, NO) of whole masked passages from a stance cross-encoder (see the module)."""

    def __init__(self, path: str | Path, meta: Mapping[str, object]) -> None:
        self.path, self.meta = Path(path), dict(meta)
        self.decision = Decision.from_meta(self.meta, REBUILD)
        self.kept = KeptProbabilities(self.path, LABELS, SWAP, REBUILD)

    def at_rank(self, rank: int) -> PassageEncoderModel:
        return self

    def prefetch(self, passages: Sequence[MaskedPassage]) -> None:
        """The probabilities of ``passages`` naming an object, in one batch."""
        self.kept.add(p.tokens for p in passages if names_an_object(p))

    def passage_probabilities(self, passage: MaskedPassage) -> np.ndarray:
        """P(FIRST, SECOND, NEUTRAL, NO) at the training priors, symmetric in the objects."""
        self.kept.add([passage.tokens])
        return self.kept[passage.tokens]

    def probabilities(self, text: str, first: str, second: str) -> np.ndarray:
        return self.passage_probabilities(mask_passage(text, ObjectMatcher(first, second)))

    def label_masked(self, passage: MaskedPassage) -> str:
        if not names_an_object(passage):
            return "NO"  # names neither object: it cannot favour one
        return self.decision.label(self.passage_probabilities(passage))

    def label(self, text: str, first: str, second: str) -> str:
        return self.label_masked(mask_passage(text, ObjectMatcher(first, second)))

    def explain(self, text: str, matcher: ObjectMatcher) -> Explanation:
        """The label and the sentence that decided it (:func:`kueri.stance.decision.explain`): one encoder call per
        sentence."""
        return explain(text, matcher, self.label_masked,
                       lambda rest: self.decision.scores(self.passage_probabilities(rest)))

    def with_decision(self, target_priors: Sequence[float] | None = None,
                      neutral_gate: float | None = None) -> PassageEncoderModel:
        return PassageEncoderModel(self.path, {**self.meta, **self.decision.changed_meta(target_priors, neutral_gate)})
