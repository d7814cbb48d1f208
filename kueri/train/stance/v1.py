"""Rebuild the stance model, ``kueri/resources/models/stance-v1.npz`` (see :mod:`kueri.stance.model`).

    .venv/bin/python scripts/train_stance.py [--cv] [--out PATH] [--no-save] [--votes tfidf|encoder]

``--votes encoder`` rebuilds ``stance-v2.npz`` instead: the same, but its passage model reads the sentence votes
of kueri's stance encoder (``stance-encoder-v1.npz``, ``scripts/train_stance_encoder.py``) in place of the
TF-IDF sentence model's.

Training data (copied into the repository, never read from elsewhere; never the 2022 stance qrels):

* ``kueri/resources/training/compsent19-train.csv``: CompSent-19, 5,759 sentences naming two objects, labelled
  BETTER / WORSE / NONE (object_a better / worse than object_b, or no comparison);
* ``kueri/resources/training/touche2022-stance-train.tsv``: the official Touché 2022 stance training set, 956
  StackExchange question/answer pairs with answer_stance 0=NO 1=NEUTRAL 2=FIRST 3=SECOND. 511 rows hold a
  numeric id instead of the answer text and are dropped: 445 usable rows.

The split is fixed: a row is for training when the first byte of the MD5 of its key is even
(:func:`kueri.stance.features.in_training_half`; the key is the question id for stance-train, the sentence
id for CompSent-19), held out otherwise. The script fits on the training halves and reports macro-F1 and
per-class F1 on the held-out halves; the settings below were chosen by 5-fold cross-validation inside the
training half of stance-train (``--cv`` prints it). The shipped model is then refitted with the same
settings on all usable rows (445 answers are few: the held-out numbers estimate a model fitted on half of
them), and the script checks that kueri's own numpy prediction reproduces scikit-learn's before it writes.

Needs scikit-learn (a development dependency: kueri predicts without it). Deterministic (fixed folds,
lbfgs), a minute or two on two cores.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from kueri import resources
from kueri.cli.script import script_parser
from kueri.stance.decision import Decision
from kueri.stance.features import (
    DENSE_FEATURES,
    MaskedPassage,
    dense_features,
    in_training_half,
    ngrams,
    sentence_sentiments,
    swap_tokens,
)
from kueri.stance.model import (
    DEFAULT_MODEL,
    LABELS,
    MODEL_FORMAT,
    SENTENCE_LABELS,
    LinearSoftmax,
    StanceModel,
)
from kueri.tfidf import TfidfBlock
from kueri.train.blas import kernel_note
from kueri.train.data import COMPSENT, STANCE_TRAIN, SWAP_LABEL, load_compsent, load_stance_train
from kueri.train.folds import question_folds
from kueri.train.reports import confusion, f1_report, format_report

ENCODER_MODEL = resources.path("models", "stance-encoder-v1.npz")
V2_MODEL = resources.path("models", "stance-v2.npz")

# Settings (see --cv). C: inverse l2 strength of the logistic regressions.
SENTENCE_C = 4.0
PASSAGE_C = 1.0
MIN_DF = 2  # a term of one training text says nothing general (and bloats the model)
# Standardised dense features, times this weight, beside the l2-normed TF-IDF row. With 1.0 the passage
# model leans on the object counts, sentence votes and sentiment more than on the answers' vocabulary,
# which is StackExchange's (code, cooking, travel) and will not carry over to web passages.
DENSE_WEIGHT = 1.0
#: Target class priors of the decision (FIRST, SECOND, NEUTRAL, NO): uniform, see kueri.stance.model.
TARGET_PRIORS = (0.25, 0.25, 0.25, 0.25)
# NEUTRAL needs a sentence naming both objects whose P(BETTER) + P(WORSE) reaches CompSent-19's base rate of
# comparative sentences (BETTER + WORSE share, ~0.27), else it is NO (see kueri.stance.model): "compares the
# objects at least as plausibly as an average web sentence naming both". Not 0.5 (CompSent's argmax): a
# passage that weighs both without a winner often has no sentence CompSent calls BETTER or WORSE.


def neutral_gate(rows: list[tuple[str, list[str], str]]) -> float:
    return round(sum(y != "NONE" for *_, y in rows) / len(rows), 4)


# -- fitting -----------------------------------------------------------------------------------------


def _tfidf(min_df: int):
    from sklearn.feature_extraction.text import TfidfVectorizer

    # The documents are already term lists (kueri.stance.features.ngrams): no second tokenisation.
    return TfidfVectorizer(analyzer=lambda terms: terms, sublinear_tf=True, min_df=min_df, dtype=np.float64)


def _logreg(c: float):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, max_iter=3000, tol=1e-6)


def _block(vectorizer) -> TfidfBlock:
    vocabulary = sorted(vectorizer.vocabulary_, key=vectorizer.vocabulary_.__getitem__)
    return TfidfBlock(vocabulary, vectorizer.idf_.astype(np.float64))


def _ordered(classifier, labels: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """coef and intercept with rows in ``labels`` order (scikit-learn sorts its classes)."""
    rows = [list(classifier.classes_).index(label) for label in labels]
    return classifier.coef_[rows].copy(), classifier.intercept_[rows].copy()


def fit_sentence_model(rows: list[tuple[str, list[str], str]], c: float = SENTENCE_C) -> LinearSoftmax:
    """The CompSent-19 sentence model, trained on each sentence and its object-swapped twin."""
    docs = [ngrams(m) for _, m, _ in rows] + [ngrams(swap_tokens(m)) for _, m, _ in rows]
    labels = [y for *_, y in rows] + [SWAP_LABEL.get(y, y) for *_, y in rows]
    vectorizer = _tfidf(MIN_DF)
    classifier = _logreg(c).fit(vectorizer.fit_transform(docs), labels)
    coef, intercept = _ordered(classifier, SENTENCE_LABELS)
    return LinearSoftmax(_block(vectorizer), coef, intercept, np.zeros(0), np.zeros(0))


def passage_inputs(model: StanceModel, passages: list[MaskedPassage]) -> tuple[list[list[str]], np.ndarray]:
    """(terms, dense features) of each passage, with the sentence votes of ``model``."""
    terms, dense = [], []
    for passage in passages:
        terms.append(ngrams(passage.tokens))
        dense.append(dense_features(passage, model.sentence_votes(passage), sentence_sentiments(passage)))
    return terms, np.array(dense, dtype=np.float64)


#: A model's header saying where its sentence votes come from (kueri.stance.model): its TF-IDF sentence model (no
#: key: stance-v1.npz rebuilds to the same bytes), or the stance encoder beside it.
TFIDF_VOTES: dict[str, object] = {}
#: The encoder labels a topic's top ENCODER_DEPTH hits, stance-v1 the others: the most the default run's cost allows
#: (docs/stance.md, "Cost").
ENCODER_DEPTH = 20
ENCODER_VOTES: dict[str, object] = {"votes": "encoder", "encoder": ENCODER_MODEL.name, "below": DEFAULT_MODEL.name,
                                    "encoder_depth": ENCODER_DEPTH}


def placeholder_meta(train_priors: list[float], gate: float = 0.0,
                     votes: dict[str, object] = TFIDF_VOTES) -> dict[str, object]:
    return {"format": MODEL_FORMAT, "labels": list(LABELS), "dense_features": list(DENSE_FEATURES),
            "train_priors": train_priors, "target_priors": list(TARGET_PRIORS), "neutral_gate": gate, **votes}


def training_inputs(sentence: LinearSoftmax, rows: list[tuple[str, MaskedPassage, str]],
                    votes: dict[str, object] = TFIDF_VOTES) -> tuple[list[list[str]], np.ndarray, list[str]]:
    """(terms, dense features, labels) of ``rows`` followed by their object-swapped twins.

    They depend on the sentence model (``votes``) only, so cross-validation computes them once and slices them.
    """
    holder = StanceModel(placeholder_meta([0.25] * 4, votes=votes), sentence, _empty_passage_model(),
                         ENCODER_MODEL.parent)
    holder.prefetch([p for _, p, _ in rows])
    passages = [p for _, p, _ in rows] + [p.swapped() for _, p, _ in rows]
    labels = [y for *_, y in rows] + [SWAP_LABEL.get(y, y) for *_, y in rows]
    terms, dense = passage_inputs(holder, passages)
    return terms, dense, labels


def fit_stance_model(sentence: LinearSoftmax, rows: list[tuple[str, MaskedPassage, str]],
                     c: float = PASSAGE_C, dense_weight: float = DENSE_WEIGHT,
                     meta: dict[str, object] | None = None,
                     inputs: tuple[list[list[str]], np.ndarray, list[str]] | None = None,
                     gate: float = 0.0, votes: dict[str, object] = TFIDF_VOTES) -> tuple[StanceModel, object]:
    """The full model: ``sentence`` plus a passage model fitted on ``rows`` and their object-swapped twins.

    ``inputs``: :func:`training_inputs` of ``rows``, when already computed; ``gate``: the NEUTRAL gate of
    the decision (0: none). Returns the model and a
    scikit-learn ``predict_proba``-like function (for the reproduction check).
    """
    from scipy.sparse import csr_matrix, hstack
    from sklearn.preprocessing import StandardScaler

    counts = Counter(y for *_, y in rows)
    # The swapped twins make FIRST and SECOND equally frequent; the priors are those of the doubled data.
    doubled = {label: counts[label] + counts[SWAP_LABEL.get(label, label)] for label in LABELS}
    train_priors = [doubled[label] / (2 * len(rows)) for label in LABELS]
    terms, dense, labels = inputs if inputs is not None else training_inputs(sentence, rows, votes)
    vectorizer = _tfidf(MIN_DF)
    scaler = StandardScaler().fit(dense)
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)

    def matrix(batch_terms, batch_dense, fitting=False):
        words = vectorizer.fit_transform(batch_terms) if fitting else vectorizer.transform(batch_terms)
        return hstack([words, csr_matrix((batch_dense - scaler.mean_) / scale * dense_weight)]).tocsr()

    classifier = _logreg(c).fit(matrix(terms, dense, fitting=True), labels)
    coef, intercept = _ordered(classifier, LABELS)
    passage = LinearSoftmax(_block(vectorizer), coef, intercept, scaler.mean_.copy(), scale / dense_weight)
    model = StanceModel({**placeholder_meta(train_priors, gate, votes), **(meta or {})}, sentence, passage,
                        ENCODER_MODEL.parent)

    def reference(batch: list[MaskedPassage]) -> np.ndarray:
        batch_terms, batch_dense = passage_inputs(model, batch)
        proba = classifier.predict_proba(matrix(batch_terms, batch_dense))
        return proba[:, [list(classifier.classes_).index(label) for label in LABELS]]

    return model, reference


def _empty_passage_model() -> LinearSoftmax:
    n_dense = len(DENSE_FEATURES)
    return LinearSoftmax(TfidfBlock([], np.zeros(0)), np.zeros((len(LABELS), n_dense)), np.zeros(len(LABELS)),
                         np.zeros(n_dense), np.ones(n_dense))


# -- evaluation --------------------------------------------------------------------------------------


def evaluate_passages(model: StanceModel, rows: list[tuple[str, MaskedPassage, str]],
                      priors: tuple[float, ...] | None = None) -> tuple[list[str], list[str]]:
    """(gold, predicted) of ``rows``: the model's own decision (``label_masked``: its priors, the NEUTRAL
    gate, NO for passages naming neither object), or with ``priors`` the plain prior-shifted argmax."""
    if priors is None:
        predicted = [model.label_masked(passage) for _, passage, _ in rows]
    else:
        decision = Decision(model.train_priors, np.asarray(priors))
        predicted = [decision.label(model.passage_probabilities(p)) for _, p, _ in rows]
    return [y for *_, y in rows], predicted


def cross_validate(sentence: LinearSoftmax, rows: list[tuple[str, MaskedPassage, str]], folds: int = 5,
                   repeats: int = 3, votes: dict[str, object] = TFIDF_VOTES) -> None:
    """Print the cross-validated macro-F1 of a grid of settings, inside the training half.

    ``repeats`` times ``folds``-fold, folds by question id (MD5 of repeat number and id): a single split of
    ~200 answers is too noisy to choose anything by.
    """
    terms, dense, labels = training_inputs(sentence, rows, votes)
    n = len(rows)

    def subset(indices: list[int]) -> tuple[list[list[str]], np.ndarray, list[str]]:
        both = indices + [i + n for i in indices]  # the rows and their swapped twins
        return [terms[i] for i in both], dense[both], [labels[i] for i in both]

    for c in (0.3, 1.0, 3.0):
        for weight in (0.3, 1.0):
            scores: dict[str, list[float]] = {"training": [], "uniform": []}
            for repeat in range(repeats):
                fold_of = question_folds([qid for qid, _, _ in rows], repeat, folds)
                gold_all: list[str] = []
                predicted: dict[str, list[str]] = {"training": [], "uniform": []}
                for k in range(folds):
                    train = [i for i in range(n) if fold_of[i] != k]
                    test = [rows[i] for i in range(n) if fold_of[i] == k]
                    model, _ = fit_stance_model(sentence, [rows[i] for i in train], c=c, dense_weight=weight,
                                                inputs=subset(train), votes=votes)
                    gold, at_train = evaluate_passages(model, test, tuple(model.train_priors))
                    gold_all += gold
                    predicted["training"] += at_train
                    predicted["uniform"] += evaluate_passages(model, test, TARGET_PRIORS)[1]
                for name in scores:
                    scores[name].append(f1_report(gold_all, predicted[name], LABELS)["macro"])
            print(f"  C={c:<4} dense weight {weight:<4} CV macro-F1 {np.mean(scores['training']):.3f} "
                  f"(training priors), {np.mean(scores['uniform']):.3f} +- {np.std(scores['uniform']):.3f} "
                  "(uniform priors)", flush=True)


def sentence_model(sentences: list[tuple[str, list[str], str]]) -> tuple[LinearSoftmax, dict[str, float]]:
    """The sentence model refitted on all of CompSent-19 (it is the passage model's feature extractor;
    stance-train's held-out half is unaffected by CompSent data), and the report of one fitted on its training
    half, measured on the other."""
    s_train = [r for r in sentences if in_training_half(r[0])]
    s_test = [r for r in sentences if not in_training_half(r[0])]
    sentence_half = fit_sentence_model(s_train)
    holder = StanceModel(placeholder_meta([0.25] * 4), sentence_half, _empty_passage_model())
    s_pred = [SENTENCE_LABELS[int(np.argmax(holder.sentence_probabilities(m)))] for _, m, _ in s_test]
    s_report = f1_report([y for *_, y in s_test], s_pred, SENTENCE_LABELS)
    print(format_report(f"CompSent-19 held-out ({len(s_test)})", s_report, SENTENCE_LABELS))
    return fit_sentence_model(sentences), s_report


def held_out_reports(half_model: StanceModel, test: list[tuple[str, MaskedPassage, str]]) -> dict[str, dict]:
    """The model fitted on stance-train's training half, on the held-out half: as shipped and with plain
    priors, beside fixed answers."""
    results: dict[str, dict[str, float]] = {}
    reports = (
        ("as_shipped", "as shipped (uniform priors, NEUTRAL gate)", None),
        ("uniform_priors", "uniform priors, no gate", TARGET_PRIORS),
        ("training_priors", "training priors, no gate", tuple(half_model.train_priors)),
    )
    for key, name, priors in reports:
        gold, predicted = evaluate_passages(half_model, test, priors)
        results[key] = f1_report(gold, predicted, LABELS)
        print(format_report(f"stance held-out ({len(test)}), {name}", results[key], LABELS))
        if key == "as_shipped":
            print(confusion(gold, predicted))
    for name, fixed in (("always NO", "NO"), ("always NEUTRAL", "NEUTRAL")):
        print(format_report(f"stance held-out, {name}", f1_report(gold, [fixed] * len(gold), LABELS), LABELS))
    return results


def save_checked(model: StanceModel, reference, passages: list[MaskedPassage], out: Path | None) -> int:  # noqa: ANN001
    """Check that kueri's own numpy prediction reproduces scikit-learn's, then write ``out`` (None: nothing) and
    check the file labels as the model does."""
    ours = np.array([model._one_way(p, model.sentence_votes(p), sentence_sentiments(p)) for p in passages])
    difference = float(np.abs(ours - reference(passages)).max())
    print(f"numpy vs scikit-learn prediction: max difference {difference:.2e}")
    if difference > 1e-9:
        print("error: kueri's prediction does not reproduce scikit-learn's", file=sys.stderr)
        return 1
    if out is not None:
        model.save(out)
        reloaded = StanceModel.load(out)
        same = all(reloaded.label_masked(p) == model.label_masked(p) for p in passages)
        print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB; reload check {'ok' if same else 'FAILED'})")
        if not same:
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--cv", action="store_true", help="print the cross-validation of the settings")
    parser.add_argument("--votes", choices=["tfidf", "encoder"], default="tfidf",
                        help="the sentence votes the passage model reads (%(default)s; encoder: stance-v2)")
    parser.add_argument("--out", type=Path, default=None, help="model file (stance-v1.npz, with encoder stance-v2.npz)")
    parser.add_argument("--no-save", action="store_true", help="evaluate only")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    votes = ENCODER_VOTES if args.votes == "encoder" else TFIDF_VOTES
    args.out = args.out or (V2_MODEL if args.votes == "encoder" else DEFAULT_MODEL)

    sentences = load_compsent()
    stance_rows = load_stance_train()
    print(f"CompSent-19: {len(sentences)} sentences {dict(Counter(y for *_, y in sentences))}")
    print(f"stance-train: {len(stance_rows)} usable answers {dict(Counter(y for *_, y in stance_rows))}")
    sentence, s_report = sentence_model(sentences)
    gate = neutral_gate(sentences)
    print(f"NEUTRAL gate (CompSent-19 share of BETTER + WORSE): {gate}")

    train = [r for r in stance_rows if in_training_half(r[0])]
    test = [r for r in stance_rows if not in_training_half(r[0])]
    print(f"stance-train split: {len(train)} training, {len(test)} held out "
          f"(held out: {dict(Counter(y for *_, y in test))})")
    if args.cv:
        cross_validate(sentence, train, votes=votes)
    half_model, _ = fit_stance_model(sentence, train, gate=gate, votes=votes)
    results = held_out_reports(half_model, test)

    meta = {
        "trained_on": {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in (STANCE_TRAIN, COMPSENT)},
        **({"encoder_sha256": hashlib.sha256(ENCODER_MODEL.read_bytes()).hexdigest()} if args.votes == "encoder"
           else {}),
        "stance_train_rows": len(stance_rows),
        "settings": {"sentence_c": SENTENCE_C, "passage_c": PASSAGE_C, "min_df": MIN_DF,
                     "dense_weight": DENSE_WEIGHT},
        "held_out": {name: {k: round(v, 4) for k, v in report.items()} for name, report in results.items()},
        "compsent19_held_out": {k: round(v, 4) for k, v in s_report.items()},
    }
    model, reference = fit_stance_model(sentence, stance_rows, meta=meta, gate=gate, votes=votes)
    if save_checked(model, reference, [p for _, p, _ in stance_rows], None if args.no_save else args.out):
        return 1
    if not args.no_save and args.votes == "encoder" and (note := kernel_note("stance-v2.npz")):
        print(note)
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0
