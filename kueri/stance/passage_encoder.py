"""A stance model that reads the whole passage: a stance cross-encoder with a passage head.

The cross-encoder (:mod:`kueri.stance.encoders`) reads the pair ("x is better than y", the passage with the topic's
objects masked as x and y, cut to the word pieces its file allows) and its head answers P(FIRST, SECOND, NEUTRAL,
NO) directly, averaged over both orders of the objects (symmetric by construction). Its file
(``scripts/train_stance_passages.py``) is a cross-encoder file whose header also holds the decision
(:class:`~kueri.stance.decision.Decision`: the training data's class balance and the web's, as assumed by the
web-passage set) and ``"kind": "passage-encoder"``. A passage naming neither object is NO without asking the model.

A file whose header says ``"votes"`` has a head that also reads the sentence encoder's votes on the passage's
sentences naming both objects (:class:`~kueri.stance.encoders.SentenceVoteFeatures`; the encoder its
``"sentence_encoder"`` names, beside it): its passages are kept by their sentences, not only their tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from kueri.objects import MaskedPassage, ObjectMatcher, mask_passage
from kueri.stance.decision import Decision, Explanation, lead, masked_sentences, names_an_object
from kueri.stance.encoders import KeptProbabilities, SentenceVoteFeatures, sentence_votes
from kueri.stance.facts import LABELS, PASSAGE_SWAP
from kueri.stance.model import companion_file

KIND = "passage-encoder"
REBUILD = "`python scripts/train_stance_passages.py write` (pip install -e '.[train]')"


class PassageEncoderModel:
    """P(FIRST, SECOND, NEUTRAL, NO) of whole masked passages from a stance cross-encoder (see the module)."""

    def __init__(self, path: str | Path, meta: Mapping[str, object]) -> None:
        self.path, self.meta = Path(path), dict(meta)
        self.decision = Decision.from_meta(self.meta, REBUILD)
        votes = None
        if self.meta.get("votes"):  # the sentence encoder its header names, beside it (else the shipped one)
            votes = SentenceVoteFeatures(sentence_votes(companion_file(self.path.parent,
                                                                       str(self.meta["sentence_encoder"]))))
        self.kept = KeptProbabilities(self.path, LABELS, PASSAGE_SWAP, REBUILD, votes)

    def _text(self, passage: MaskedPassage) -> list[str] | list[list[str]]:
        """What the kept probabilities are keyed by: the masked tokens, or the sentences if the head reads votes."""
        return passage.sentences if self.kept.beside is not None else passage.tokens

    def at_rank(self, rank: int) -> PassageEncoderModel:
        return self

    def prefetch(self, passages: Sequence[MaskedPassage]) -> None:
        """The probabilities of ``passages`` naming an object, in one batch."""
        self.kept.add(self._text(p) for p in passages if names_an_object(p))

    def passage_probabilities(self, passage: MaskedPassage) -> np.ndarray:
        """P(FIRST, SECOND, NEUTRAL, NO) at the training priors, symmetric in the objects."""
        self.kept.add([self._text(passage)])
        return self.kept[self._text(passage)]

    def probabilities(self, text: str, first: str, second: str) -> np.ndarray:
        return self.passage_probabilities(mask_passage(text, ObjectMatcher(first, second)))

    def label_masked(self, passage: MaskedPassage) -> str:
        if not names_an_object(passage):
            return "NO"  # names neither object: it cannot favour one
        return self.decision.label(self.passage_probabilities(passage))

    def label(self, text: str, first: str, second: str) -> str:
        return self.label_masked(mask_passage(text, ObjectMatcher(first, second)))

    def explain(self, text: str, matcher: ObjectMatcher) -> Explanation:
        """The label of ``text`` and the sentence that decided it: of the sentences naming an object, the one that,
        read alone by the model, most favours the label (its lead over the runner-up); ties go to the earlier.

        Not the leave-one-out of :func:`kueri.stance.decision.explain`: that reads the whole passage again once per
        sentence, and the encoder's cost grows with a text's length; a sentence alone is short.
        """
        kept = masked_sentences(text, matcher)
        passage = MaskedPassage([masked for _, masked in kept])
        label = self.label_masked(passage)
        if not names_an_object(passage):
            return Explanation(label, None, None)
        naming = [i for i, (_, masked) in enumerate(kept) if names_an_object(MaskedPassage([masked]))]
        alone = {i: self._text(MaskedPassage([kept[i][1]])) for i in naming}
        self.kept.add(alone.values())  # none left to compute after prefetch_explanations
        chosen = LABELS.index(label)
        deciding = max(naming, key=lambda i: (lead(self.decision.scores(self.kept[alone[i]]), chosen), -i))
        return Explanation(label, kept[deciding][0].strip(), deciding)

    def prefetch_explanations(self, texts: Sequence[str], matcher: ObjectMatcher) -> None:
        """What :meth:`explain` reads of ``texts`` (each sentence naming an object, alone), in one batch: the
        encoder's calls run side by side over many short batches instead of a few per passage."""
        self.kept.add(self._text(MaskedPassage([masked])) for text in texts
                      for _, masked in masked_sentences(text, matcher) if names_an_object(MaskedPassage([masked])))

    def with_decision(self, target_priors: Sequence[float] | None = None,
                      neutral_gate: float | None = None) -> PassageEncoderModel:
        return PassageEncoderModel(self.path, {**self.meta, **self.decision.changed_meta(target_priors, neutral_gate)})
