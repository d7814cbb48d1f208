"""The passage model's head: a linear layer over the stance encoder's first-token state, symmetric in the two
objects by construction, its fit, its decision, and the baselines it is measured beside."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kueri.records import STANCES as LABELS
from kueri.stance.decision import Decision, names_an_object
from kueri.stance.family import load_model
from kueri.train.folds import FOLDS, group_folds
from kueri.train.reports import decide as decide_labels
from kueri.train.reports import f1_report
from kueri.train.stance.passage_data import Data, Item

#: The head's inverse regularisation, chosen by the cross-validation on the web-passage set (docs/stance.md).
C = 0.1
SWAP = [1, 0, 2, 3]
#: How much each source's examples count in the head's loss (CompSent-19's short sentences are many).
SOURCE_WEIGHTS = {"web": 1.0, "answers": 1.0, "compsent": 0.5}
#: The same for the answers and CompSent-19's sentences set inside page surroundings (``--composed``).
COMPOSED_WEIGHTS = {"composed-answers": 1.0, "composed-compsent": 0.5}


def weight_of(source: str, source_weights: Mapping[str, float] | None = None) -> float:
    """How much an example of ``source`` counts in a loss: ``source_weights`` (default :data:`SOURCE_WEIGHTS`),
    then :data:`COMPOSED_WEIGHTS`."""
    weights = SOURCE_WEIGHTS if source_weights is None else source_weights
    return weights[source] if source in weights else COMPOSED_WEIGHTS[source]
C_GRID = (0.03, 0.1, 0.3, 1.0)


@dataclass(frozen=True)
class Head:
    """A linear head over the encoder's first-token state (hidden x labels), standardisation folded in."""

    weight: np.ndarray
    bias: np.ndarray
    train_priors: np.ndarray

    def probabilities(self, forward: np.ndarray, backward: np.ndarray) -> np.ndarray:
        return symmetric_probabilities(forward.astype(np.float64) @ self.weight + self.bias,
                                       backward.astype(np.float64) @ self.weight + self.bias)


def symmetric_probabilities(forward: np.ndarray, backward: np.ndarray) -> np.ndarray:
    """P(FIRST, SECOND, NEUTRAL, NO) from the logits of both orders of the objects: each order's softmax, the other
    order's FIRST and SECOND exchanged back, averaged."""
    def softmax(x: np.ndarray) -> np.ndarray:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    return (softmax(forward) + softmax(backward)[:, SWAP]) / 2.0


def fit_head(data: Data, c: float, source_weights: Mapping[str, float] | None = None) -> Head:
    """Multinomial logistic regression on both orders of every item (the swapped twin with FIRST and SECOND
    exchanged), each weighted by its source (:func:`weight_of`)."""
    from sklearn.linear_model import LogisticRegression

    x = np.vstack([data.forward, data.backward]).astype(np.float64)
    labels = [item.label for item in data.items]
    y = np.array([LABELS.index(label) for label in labels] + [SWAP[LABELS.index(label)] for label in labels])
    weights = np.array([weight_of(item.source, source_weights) for item in data.items] * 2)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    classifier = LogisticRegression(C=c, max_iter=1000)
    classifier.fit((x - mean) / scale, y, sample_weight=weights)
    coef = np.zeros((len(LABELS), x.shape[1]))
    intercept = np.zeros(len(LABELS))
    for row, k in enumerate(classifier.classes_):
        coef[k], intercept[k] = classifier.coef_[row], classifier.intercept_[row]
    priors = np.array([weights[y == k].sum() for k in range(len(LABELS))])
    return Head((coef / scale).T, intercept - coef @ (mean / scale), priors / priors.sum())


def decide(probabilities: np.ndarray, items: Sequence[Item], train_priors: np.ndarray, target_priors: np.ndarray
           ) -> list[str]:
    """The passage model's labels: the probabilities shifted from the training data's class balance to
    ``target_priors``, and NO for a passage naming neither object (:func:`kueri.train.reports.decide`)."""
    return decide_labels(probabilities, Decision(train_priors, target_priors),
                         [names_an_object(item.passage) for item in items])


def class_mix(items: Sequence[Item]) -> np.ndarray:
    """The share of each label, FIRST and SECOND pooled and split evenly (which object is first is arbitrary)."""
    counts = np.array([sum(item.label == label for item in items) for label in LABELS], dtype=np.float64)
    counts[:2] = counts[:2].sum() / 2
    return counts / counts.sum()


def baseline_labels(items: Sequence[Item], name: str) -> list[str]:
    model = load_model(name)
    model.prefetch([item.passage for item in items])
    return [model.label_masked(item.passage) for item in items]


def bag_of_words(target: Sequence[Item], assignments: int) -> list[dict[str, float]]:
    """A bag-of-words classifier's grouped-CV figures on ``target`` alone: TF-IDF of the masked passage's uni- and
    bigrams, logistic regression, both orders of the objects. Far above its figure on the stance answers would mean
    a set learnt from its cue words, not its stance."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    from kueri.stance.features import ngrams

    def docs(items: Sequence[Item]) -> list[list[str]]:
        return [ngrams(i.passage.tokens) for i in items] + [ngrams(i.passage.swapped().tokens) for i in items]

    gold = [item.label for item in target]
    reports = []
    for assignment in range(assignments):
        predicted = [""] * len(gold)
        fold = group_folds([item.group for item in target], assignment)
        for k in range(FOLDS):
            held = [i for i in range(len(target)) if fold[i] == k]
            kept = [target[i] for i in range(len(target)) if fold[i] != k]
            vectorizer = TfidfVectorizer(analyzer=lambda terms: terms, min_df=2, sublinear_tf=True)
            labels = [i.label for i in kept] + [LABELS[SWAP[LABELS.index(i.label)]] for i in kept]
            classifier = LogisticRegression(C=1.0, max_iter=3000).fit(vectorizer.fit_transform(docs(kept)), labels)
            part = [target[i] for i in held]
            order = [list(classifier.classes_).index(label) for label in LABELS]
            both = classifier.predict_proba(vectorizer.transform(docs(part)))[:, order]
            probabilities = (both[: len(part)] + both[len(part):][:, SWAP]) / 2.0
            for i, row in zip(held, probabilities, strict=True):
                predicted[i] = LABELS[int(np.argmax(row))]
        reports.append(f1_report(gold, predicted, LABELS))
    return reports
