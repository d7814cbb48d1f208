"""Cross-validate today's stance model against passage models that also read the encoders.

    .venv/bin/python scripts/cv_stance_encoders.py --cache DIR [--repeats 3] [--folds 5] [--inner 2]
        [--candidates today +both today-dense dense+enc votes votes-dense today+votes] [--sentence-probe]

Only data the project may train on: the stance training set (445 usable answers) and CompSent-19 (the
sentence model, trained on all of it as shipped: it never sees a stance-train answer). Never the 2022
judgments.

The encoder features are what a run could compute from embeddings it already has: the second stage
embeds every top candidate with e5 (``passage: `` + head) and MiniLM, so a passage's features are cosine
similarities of *that* embedding to short statements built from the topic's two objects (a few per
topic, embedded once): "OBJ1 is better than OBJ2" and paraphrases, the same with the objects exchanged
(so the features come in twins and the model stays symmetric), neutral statements, off-topic statements,
and the question itself. Per encoder: mean and max similarity to each object's "better" statements,
mean to the neutral and off-topic ones, and to the question (7 features).

Models compared (all fitted like ``scripts/train_stance.py``'s passage model: object-swapped twins,
TF-IDF of masked n-grams beside standardised dense features, logistic regression C=1):

* ``today``: the shipped features (TF-IDF + 19 dense);
* ``+e5``, ``+minilm``, ``+both``: the shipped features plus the encoder features;
* ``today-dense`` and ``dense+enc``: the same without TF-IDF (19 dense features; 19 + 14), cheap to fit;
* ``votes``: the shipped features with the sentence votes (P(BETTER, WORSE, NONE) of each sentence naming both
  objects) of kueri's fine-tuned stance encoder (:mod:`kueri.stance.encoders`, ``--stance-encoder``) in place of
  the TF-IDF sentence model's; ``votes-dense``: the same without TF-IDF; ``today+votes``: the shipped features
  plus the encoder votes' five aggregates (sums, maxima, comparative maximum) beside the TF-IDF model's.
  The stance encoder is trained on CompSent-19 only, so it has never seen a stance-train answer; the NEUTRAL
  gate of these candidates reads its votes (at its own CompSent-19 comparative base rate).

Each is scored with two decisions: ``shipped`` (uniform priors, NEUTRAL gate at CompSent-19's comparative
rate, NO for a passage naming neither object: what ``kueri stance`` does) and ``tuned`` (priors and gate
chosen inside each training fold by an inner ``--inner``-fold cross-validation over a small grid). Folds group the
answers by question id; ``--repeats`` different fold assignments give the spread over splits.

Embeddings are cached in ``--cache`` (outside the repository: a few minutes of encoding on 2 cores).
Deterministic.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kueri.cli.script import script_parser
from kueri.stance.decision import Decision
from kueri.stance.model import LABELS
from kueri.train.data import load_compsent, load_stance_train
from kueri.train.folds import md5_fold, question_folds
from kueri.train.reports import decide, f1_report
from kueri.train.stance.similarity import ENCODER_SWAP, embed_all, raw_rows, sentence_probe
from kueri.train.stance.v1 import _logreg, _tfidf, fit_sentence_model, neutral_gate, training_inputs

#: The dense features that read the sentence votes (the rest are counts, positions and sentiment).
VOTE_FEATURES = ("better_sum", "worse_sum", "better_max", "worse_max", "comparative_max")
EMBEDDING_CANDIDATES = {"+e5", "+minilm", "+both", "dense+enc"}
CANDIDATES = ["today", "+e5", "+minilm", "+both", "today-dense", "dense+enc", "votes", "votes-dense", "today+votes"]


def encoder_votes(path: Path, passages: list) -> list[list[np.ndarray | None]]:
    """The stance encoder's votes for each sentence naming both objects of each passage (None for the others)."""
    from kueri.stance.encoders import SentenceEncoder
    from kueri.stance.features import OBJ1, OBJ2

    both = sorted({tuple(s) for p in passages for s in p.sentences if OBJ1 in s and OBJ2 in s})
    started = time.perf_counter()
    probabilities = SentenceEncoder(path).probabilities([list(s) for s in both]) if both else np.zeros((0, 3))
    print(f"  stance encoder: {len(both)} sentences in {time.perf_counter() - started:.0f} s", flush=True)
    found = dict(zip(both, probabilities, strict=True))
    return [[found.get(tuple(s)) for s in p.sentences] for p in passages]


def dense_with_votes(rows: list, votes: list[list[np.ndarray | None]]) -> np.ndarray:
    """The 19 dense features of each row, then of its object-swapped twin, with the given votes."""
    from kueri.stance.features import dense_features, sentence_sentiments

    forward, backward = [], []
    for (_, passage, _), passage_votes in zip(rows, votes, strict=True):
        sentiments = sentence_sentiments(passage)
        forward.append(dense_features(passage, passage_votes, sentiments))
        swapped = [v[[1, 0, 2]] if v is not None else None for v in passage_votes]
        backward.append(dense_features(passage.swapped(), swapped, sentiments))
    return np.array(forward + backward, dtype=np.float64)


def fit_predict(terms: list[list[str]], dense: np.ndarray, labels: list[str], n: int, train: list[int],
                test: list[int], use_tfidf: bool, tol: float) -> np.ndarray:
    """P(FIRST, SECOND, NEUTRAL, NO) of the ``test`` rows, symmetric: rows i and i + n are twins."""
    from scipy.sparse import csr_matrix, hstack
    from sklearn.preprocessing import StandardScaler

    both = train + [i + n for i in train]
    scaler = StandardScaler().fit(dense[both])
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    vectorizer = _tfidf(2)

    def matrix(indices: list[int], fitting: bool = False):
        scaled = csr_matrix((dense[indices] - scaler.mean_) / scale)
        if not use_tfidf:
            return scaled
        batch = [terms[i] for i in indices]
        words = vectorizer.fit_transform(batch) if fitting else vectorizer.transform(batch)
        return hstack([words, scaled]).tocsr()

    classifier = _logreg(1.0)
    classifier.tol = tol
    classifier.fit(matrix(both, fitting=True), [labels[i] for i in both])
    order = [list(classifier.classes_).index(label) for label in LABELS]
    forward = classifier.predict_proba(matrix(test))[:, order]
    backward = classifier.predict_proba(matrix([i + n for i in test]))[:, order]
    return (forward + backward[:, [1, 0, 2, 3]]) / 2.0


def train_priors(labels: Sequence[str]) -> np.ndarray:
    """The priors of the doubled (swapped-twin) training data, as fit_stance_model computes them."""
    counts = np.array([labels.count(label) for label in LABELS], dtype=np.float64)
    doubled = counts + counts[[1, 0, 2, 3]]
    return doubled / doubled.sum()


def decision_of(priors: str, train_labels: list[str], gate: float) -> Decision:
    """The decision a candidate is scored with: the ``uniform`` priors (the shipped decision) or the ``training``
    ones (no shift), and the NEUTRAL gate ``gate``."""
    if priors == "uniform":
        return Decision(train_priors(train_labels), np.full(4, 0.25), gate)
    return Decision(np.ones(4), np.ones(4), gate)


@dataclass
class Inputs:
    """The stance answers as every candidate reads them: rows, then their object-swapped twins."""

    rows: list
    terms: list[list[str]]
    labels: list[str]
    gold: list[str]
    gate: float
    named: np.ndarray  # the passage names an object (else it is NO)
    candidates: dict[str, tuple[np.ndarray, bool, np.ndarray]]  # name: (dense features, TF-IDF too, comparative)


def prepare(args) -> Inputs:  # noqa: ANN001
    """The answers' features for every candidate of ``args.candidates`` (see the module)."""
    started = time.perf_counter()
    compsent = load_compsent()
    rows = load_stance_train()
    raw = raw_rows()
    assert len(raw) == len(rows)
    gate = neutral_gate(compsent)
    sentence = fit_sentence_model(compsent)  # all of CompSent-19, as shipped: no stance-train row in it
    terms, dense, labels = training_inputs(sentence, rows)  # rows, then their object-swapped twins
    # What the shipped decision reads besides the probabilities (the same both ways).
    from kueri.stance.features import OBJ1, OBJ2
    from kueri.stance.model import StanceModel

    holder = StanceModel.load()
    comparative = np.array([max((float(v[0] + v[1]) for v in holder.sentence_votes(p) if v is not None), default=0.0)
                            for _, p, _ in rows])
    named = np.array([OBJ1 in p.tokens or OBJ2 in p.tokens for _, p, _ in rows])

    features = embed_all(args.cache, raw) if EMBEDDING_CANDIDATES & set(args.candidates) else {}
    print(f"encoder features ready after {time.perf_counter() - started:.0f} s", flush=True)
    vote_dense, vote_comparative = dense, comparative
    if {"votes", "votes-dense", "today+votes"} & set(args.candidates):
        from kueri.stance.encoders import SENTENCE_MODEL as MODEL

        path = args.stance_encoder or MODEL
        votes = encoder_votes(path, [p for _, p, _ in rows])
        vote_dense = dense_with_votes(rows, votes)
        vote_comparative = np.array([max((float(v[0] + v[1]) for v in vs if v is not None), default=0.0)
                                     for vs in votes])
    from kueri.stance.features import DENSE_FEATURES

    vote_columns = [DENSE_FEATURES.index(name) for name in VOTE_FEATURES]

    def with_encoders(*names: str) -> np.ndarray:
        blocks = [dense]
        for name in names:
            forward = features[name]
            blocks.append(np.vstack([forward, forward[:, ENCODER_SWAP]]))
        return np.hstack(blocks)

    every = {
        "today": (lambda: dense, True, comparative),
        "today-dense": (lambda: dense, False, comparative),
        "+e5": (lambda: with_encoders("e5"), True, comparative),
        "+minilm": (lambda: with_encoders("minilm"), True, comparative),
        "+both": (lambda: with_encoders("e5", "minilm"), True, comparative),
        "dense+enc": (lambda: with_encoders("e5", "minilm"), False, comparative),
        "votes": (lambda: vote_dense, True, vote_comparative),
        "votes-dense": (lambda: vote_dense, False, vote_comparative),
        "today+votes": (lambda: np.hstack([dense, vote_dense[:, vote_columns]]), True, vote_comparative),
    }
    candidates = {name: (every[name][0](), *every[name][1:]) for name in args.candidates}
    return Inputs(rows, terms, labels, [y for *_, y in rows], gate, named, candidates)


def fold_labels(data: Inputs, matrix: np.ndarray, use_tfidf: bool, compares: np.ndarray, train: list[int],
                test: list[int], inner: list[int], inner_folds: int, tol: float
                ) -> tuple[list[str], list[str], tuple[str, float]]:
    """The labels of one fold's ``test`` rows with the shipped decision and with the tuned one, and the tuned
    decision (priors and gate chosen by the ``inner`` folds of the training part)."""
    n, named = len(data.rows), data.named
    grid = [(priors, g) for priors, g in itertools.product(("uniform", "training"), (0.0, data.gate, 0.5))]
    train_labels = [data.gold[i] for i in train]
    p = fit_predict(data.terms, matrix, data.labels, n, train, test, use_tfidf, tol)
    shipped = decide(p, decision_of("uniform", train_labels, data.gate), named[test], compares[test])
    # Inner CV: out-of-fold probabilities of the training part choose priors and gate.
    inner_p = np.zeros((n, 4))
    for j in range(inner_folds):
        inner_train = [i for i, fold in zip(train, inner, strict=True) if fold != j]
        inner_test = [i for i, fold in zip(train, inner, strict=True) if fold == j]
        inner_p[inner_test] = fit_predict(data.terms, matrix, data.labels, n, inner_train, inner_test, use_tfidf, tol)
    inner_scores = [f1_report(train_labels, decide(inner_p[train], decision_of(priors, train_labels, g),
                                                   named[train], compares[train]), LABELS)["macro"]
                    for priors, g in grid]
    best = grid[int(np.argmax(inner_scores))]  # ties: the grid's first (uniform, no gate)
    tuned = decide(p, decision_of(best[0], train_labels, best[1]), named[test], compares[test])
    return shipped, tuned, best


def cross_validate(data: Inputs, repeats: int, folds: int, inner_folds: int, tol: float, started: float
                   ) -> dict[str, dict[str, list]]:
    """Each candidate's reports per fold assignment with both decisions, and the tuned decisions chosen."""
    n = len(data.rows)
    results: dict[str, dict[str, list]] = {name: {"shipped": [], "tuned": [], "choices": []}
                                           for name in data.candidates}
    for repeat in range(repeats):
        fold_of = question_folds([qid for qid, _, _ in data.rows], repeat, folds)
        for name, (matrix, use_tfidf, compares) in data.candidates.items():
            predicted = {"shipped": [""] * n, "tuned": [""] * n}
            for k in range(folds):
                train = [i for i in range(n) if fold_of[i] != k]
                test = [i for i in range(n) if fold_of[i] == k]
                inner = [md5_fold(f"inner{repeat}:{k}:{data.rows[i][0]}", inner_folds) for i in train]
                shipped, tuned, best = fold_labels(data, matrix, use_tfidf, compares, train, test, inner, inner_folds,
                                                   tol)
                results[name]["choices"].append(best)
                for i, first, second in zip(test, shipped, tuned, strict=True):
                    predicted["shipped"][i], predicted["tuned"][i] = first, second
            for decision in ("shipped", "tuned"):
                results[name][decision].append(f1_report(data.gold, predicted[decision], LABELS))
        print(f"repeat {repeat + 1}/{repeats} done after {time.perf_counter() - started:.0f} s", flush=True)
    return results


def print_results(results: dict[str, dict[str, list]], candidates: Sequence[str], repeats: int, folds: int,
                  n: int) -> None:
    print(f"\n{repeats} x {folds}-fold CV on {n} stance-train answers (folds by question id); "
          "mean +- std over repeats")
    for decision in ("shipped", "tuned"):
        print(f"\ndecision: {decision}")
        base = np.array([r["macro"] for r in results[candidates[0]][decision]])
        for name in candidates:
            reports = results[name][decision]
            macro = np.array([r["macro"] for r in reports])
            per_class = " ".join(f"{label} {np.mean([r[label] for r in reports]):.3f}" for label in LABELS)
            gain = macro - base
            print(f"  {name:9s} macro-F1 {macro.mean():.3f} +- {macro.std():.3f} (min {macro.min():.3f} max "
                  f"{macro.max():.3f})  vs {candidates[0]} {gain.mean():+.3f} +- {gain.std():.3f}  ({per_class})")
    for name in candidates:
        chosen: dict[str, int] = {}
        for priors, g in results[name]["choices"]:
            key = f"{priors}/gate {g}"
            chosen[key] = chosen.get(key, 0) + 1
        print(f"  tuned decisions chosen for {name}: {chosen}")


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--cache", type=Path, required=True, help="folder for the embeddings (outside the repo)")
    parser.add_argument("--repeats", type=int, default=3, help="fold assignments (%(default)s)")
    parser.add_argument("--inner", type=int, default=2, help="inner folds choosing the decision (%(default)s)")
    parser.add_argument("--tol", type=float, default=1e-3,
                        help="the regressions' tolerance (%(default)s; the shipped fit uses 1e-6, 8x slower, "
                        "probabilities within about 0.01)")
    parser.add_argument("--candidates", nargs="+", default=["today", "+both", "today-dense", "dense+enc"],
                        choices=CANDIDATES,
                        help="models to compare; the first is the baseline (%(default)s)")
    parser.add_argument("--folds", type=int, default=5, help="folds per assignment (%(default)s)")
    parser.add_argument("--stance-encoder", type=Path, default=None,
                        help="the stance encoder file (default: the shipped one)")
    parser.add_argument("--sentence-probe", action="store_true",
                        help="only the sentence probe: do the encoders tell a CompSent-19 sentence's direction?")
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.sentence_probe:
        sentence_probe(args.cache)
        return 0
    started = time.perf_counter()
    data = prepare(args)
    results = cross_validate(data, args.repeats, args.folds, args.inner, args.tol, started)
    print_results(results, list(data.candidates), args.repeats, args.folds, len(data.rows))
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0
