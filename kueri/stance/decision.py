"""How a stance model turns class probabilities into a label, and which sentence decided it: data of the model.

A model's probabilities are learnt at its training data's class balance; retrieved web passages have another.
:class:`Decision` holds what the model's header says of that (training priors, target priors, the NEUTRAL gate)
and applies it: the probabilities are divided by the training priors and multiplied by the target priors; below the
gate (how clearly the passage's best sentence compares the objects) NEUTRAL's share goes to NO. The label is the
class with the highest score (ties: the earlier of :data:`LABELS`). :func:`explain` finds the deciding sentence
for any model that can score a masked passage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from kueri.errors import KueriError, SetupError
from kueri.objects import OBJ1, OBJ2, MaskedPassage, ObjectMatcher, sentences, tokens
from kueri.stance.facts import LABELS

_NEUTRAL, _NO = LABELS.index("NEUTRAL"), LABELS.index("NO")


@dataclass(frozen=True)
class Decision:
    """Prior shift and NEUTRAL gate (see the module); :meth:`from_meta` reads them from a model's header."""

    train_priors: np.ndarray
    target_priors: np.ndarray
    neutral_gate: float = 0.0
    shift: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shift", self.target_priors / self.train_priors)

    @classmethod
    def from_meta(cls, meta: Mapping[str, object], rebuild: str) -> Decision:
        train = np.asarray(meta["train_priors"], dtype=np.float64)
        target = np.asarray(meta["target_priors"], dtype=np.float64)
        if train.shape != (len(LABELS),) or target.shape != (len(LABELS),) or (train <= 0).any() or (target < 0).any():
            raise SetupError(f"stance model priors are malformed: rebuild it with {rebuild}")
        return cls(train, target, float(meta.get("neutral_gate", 0.0)))  # type: ignore[arg-type]

    def changed_meta(self, target_priors: Sequence[float] | None = None,
                     neutral_gate: float | None = None) -> dict[str, object]:
        """The header entries of the same model with other target priors (FIRST, SECOND, NEUTRAL, NO) and/or gate."""
        meta: dict[str, object] = {}
        if target_priors is not None:
            priors = [float(x) for x in target_priors]
            if len(priors) != len(LABELS) or any(x < 0 for x in priors) or sum(priors) <= 0:
                raise KueriError(f"stance priors must be {len(LABELS)} non-negative numbers (FIRST SECOND NEUTRAL "
                                 f"NO), not {list(target_priors)}")
            meta["target_priors"] = [x / sum(priors) for x in priors]
        if neutral_gate is not None:
            if not 0.0 <= neutral_gate <= 1.0:
                raise KueriError(f"stance NEUTRAL gate must be in [0, 1], not {neutral_gate}")
            meta["neutral_gate"] = float(neutral_gate)
        return meta

    def scores(self, probabilities: np.ndarray, comparative: float = 1.0) -> np.ndarray:
        """Prior-shifted, NEUTRAL-gated scores of P(FIRST, SECOND, NEUTRAL, NO)."""
        shifted = np.asarray(probabilities, dtype=np.float64) * self.shift
        if comparative < self.neutral_gate:
            # After the shift: the passages that would be NEUTRAL become NO, no more and no fewer (moved
            # before it, NEUTRAL's mass would be scaled up by NO's much larger factor).
            shifted[_NO] += shifted[_NEUTRAL]
            shifted[_NEUTRAL] = 0.0
        return shifted

    def label(self, probabilities: np.ndarray, comparative: float = 1.0) -> str:
        return LABELS[int(np.argmax(self.scores(probabilities, comparative)))]


class Explanation(NamedTuple):
    """A passage's stance and the sentence that decided it (a model's ``explain``)."""

    label: str
    #: The deciding sentence as it stands in the passage (None: the passage names neither object).
    sentence: str | None
    #: Its position among the passage's non-empty sentences.
    index: int | None


def lead(scores: np.ndarray, chosen: int) -> float:
    """How far class ``chosen`` leads the runner-up in ``scores``, normalised to their sum."""
    total = float(scores.sum())
    others = max(float(x) for i, x in enumerate(scores) if i != chosen)
    return (float(scores[chosen]) - others) / total if total > 0 else 0.0


def masked_sentences(text: str, matcher: ObjectMatcher) -> list[tuple[str, list[str]]]:
    """The non-empty sentences of ``text`` with their masked tokens (together: what ``mask_passage`` gives)."""
    return [(piece, masked) for piece in sentences(text) if (masked := matcher.mask(tokens(piece)))]


def names_an_object(passage: MaskedPassage) -> bool:
    words = passage.tokens
    return OBJ1 in words or OBJ2 in words


def explain(text: str, matcher: ObjectMatcher, label_of: Callable[[MaskedPassage], str],
            scores_of: Callable[[MaskedPassage], np.ndarray]) -> Explanation:
    """The label of ``text`` (``label_of`` its masked passage) and the sentence that decided it.

    The deciding sentence is found by leaving each sentence out in turn: the one whose absence most lowers the
    label's lead over the runner-up (``scores_of`` the rest, normalised to sum 1) decided it; ties go to the
    earlier sentence. A passage of one sentence is decided by it; one naming neither object by none (it is NO
    without asking the model). Costs one passage analysis per sentence.
    """
    kept = masked_sentences(text, matcher)
    passage = MaskedPassage([masked for _, masked in kept])  # what mask_passage(text, matcher) gives
    label = label_of(passage)
    if not names_an_object(passage):
        return Explanation(label, None, None)
    chosen = LABELS.index(label)
    if len(kept) == 1:
        return Explanation(label, kept[0][0].strip(), 0)
    drops = []
    for left_out in range(len(kept)):
        rest = MaskedPassage([m for i, (_, m) in enumerate(kept) if i != left_out])
        if not names_an_object(rest):  # the rest would be NO, surely
            drops.append(-1.0 if label == "NO" else 1.0)
        else:
            drops.append(-lead(scores_of(rest), chosen))
    deciding = max(range(len(kept)), key=lambda i: (drops[i], -i))
    return Explanation(label, kept[deciding][0].strip(), deciding)
