#!/usr/bin/env python3
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

import csv
import hashlib
import itertools
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_stance import (  # noqa: E402
    COMPSENT,
    STANCE_TRAIN,
    _logreg,
    _tfidf,
    f1_report,
    fit_sentence_model,
    load_compsent,
    load_stance_train,
    neutral_gate,
    training_inputs,
)

from kueri.cli.script import run_script, script_parser  # noqa: E402
from kueri.stance.model import LABELS  # noqa: E402

# "OBJ1 is better than OBJ2" and paraphrases; {a} is the winner. Both orders are embedded.
BETTER = (
    "{a} is better than {b}.", "{a} is superior to {b}.", "I prefer {a} over {b}.", "{b} is worse than {a}.",
    "Choose {a} rather than {b}.", "{a} beats {b}.", "{a} is the better choice compared to {b}.",
    "{a} has clear advantages over {b}.", "Go with {a}, not {b}.", "{b} is inferior to {a}.",
)
NEUTRAL = (
    "{a} and {b} are equally good.", "Both {a} and {b} have their pros and cons; it depends.",
    "There is no clear winner between {a} and {b}.", "{a} and {b} are about the same.",
)
OFF_TOPIC = (
    "How to store {a} at home.", "Where to buy {b} and how much it costs.", "A list of products including {a}.",
    "Copyright, privacy policy and contact information.", "Click here to subscribe to our newsletter.",
)
ENCODER_FEATURES = ("better1_mean", "better2_mean", "better1_max", "better2_max", "neutral", "off_topic",
                    "question")
# Columns exchanged by swapping the objects.
ENCODER_SWAP = [1, 0, 3, 2, 4, 5, 6]
#: The dense features that read the sentence votes (the rest are counts, positions and sentiment).
VOTE_FEATURES = ("better_sum", "worse_sum", "better_max", "worse_max", "comparative_max")
EMBEDDING_CANDIDATES = {"+e5", "+minilm", "+both", "dense+enc"}


def raw_rows() -> list[tuple[str, str, str, str]]:
    """(question, answer, object_1, object_2) of the usable rows, in load_stance_train's order."""
    rows = []
    with open(STANCE_TRAIN, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            if row["answer"].strip().isdigit():
                continue
            rows.append((row["question"], row["answer"], row["object_1"], row["object_2"]))
    return rows


def cached_embeddings(cache: Path, name: str, texts: list[str], encode: Callable[[list[str]], np.ndarray]
                      ) -> np.ndarray:
    """``encode(texts)``, kept in ``cache/name-<digest of texts>.npy``."""
    digest = hashlib.sha1("\0".join(texts).encode()).hexdigest()[:16]
    path = cache / f"{name}-{digest}.npy"
    if path.exists():
        return np.load(path)
    started = time.perf_counter()
    vectors = encode(texts)
    np.save(path, vectors)
    print(f"  embedded {len(texts)} texts with {name} in {time.perf_counter() - started:.0f} s", flush=True)
    return vectors


def statements(first: str, second: str) -> list[str]:
    return ([t.format(a=first, b=second) for t in BETTER] + [t.format(a=second, b=first) for t in BETTER]
            + [t.format(a=first, b=second) for t in NEUTRAL] + [t.format(a=first, b=second) for t in OFF_TOPIC])


def encoder_features(passages: np.ndarray, questions: np.ndarray, proto: np.ndarray) -> np.ndarray:
    """Rows x 7 similarity features; ``proto`` is rows x statements x dimension (see :func:`statements`)."""
    sims = np.einsum("rd,rsd->rs", passages, proto)
    nb = len(BETTER)
    b1, b2 = sims[:, :nb], sims[:, nb:2 * nb]
    neutral = sims[:, 2 * nb:2 * nb + len(NEUTRAL)]
    off = sims[:, 2 * nb + len(NEUTRAL):]
    question = np.einsum("rd,rd->r", passages, questions)
    return np.column_stack([b1.mean(1), b2.mean(1), b1.max(1), b2.max(1), neutral.mean(1), off.mean(1), question])


def embed_all(cache: Path, rows: list[tuple[str, str, str, str]]) -> dict[str, np.ndarray]:
    """Encoder features of each row, per encoder (forward direction)."""
    from kueri.encoders.e5 import E5Encoder
    from kueri.encoders.minilm import MiniLMEncoder

    answers = [answer for _, answer, _, _ in rows]
    questions = [question for question, _, _, _ in rows]
    protos = [statements(o1, o2) for _, _, o1, o2 in rows]
    unique = sorted({s for p in protos for s in p})
    where = {s: i for i, s in enumerate(unique)}
    out = {}
    for name, make in (("e5", E5Encoder), ("minilm", MiniLMEncoder)):
        encoder = None

        def lazy(method: str, name: str = name, make: Callable = make) -> Callable[[list[str]], np.ndarray]:
            def run(texts: list[str]) -> np.ndarray:
                nonlocal encoder
                if encoder is None:
                    encoder = make()
                return getattr(encoder, method)(texts)
            return run

        passage_vectors = cached_embeddings(cache, f"{name}-passages", answers, lazy("passages"))
        question_vectors = cached_embeddings(cache, f"{name}-questions", questions, lazy("queries"))
        statement_vectors = cached_embeddings(cache, f"{name}-statements", unique, lazy("queries"))
        proto = np.stack([statement_vectors[[where[s] for s in p]] for p in protos])
        out[name] = encoder_features(passage_vectors, question_vectors, proto)
    return out


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


def sentence_probe(cache: Path) -> None:
    """Do the encoders tell the direction of a single comparative sentence? CompSent-19's BETTER and WORSE
    sentences: is the sentence closer to "A is better than B" (mean of two templates) than to "B ... A"?"""
    from kueri.encoders.e5 import E5Encoder
    from kueri.encoders.minilm import MiniLMEncoder

    with open(COMPSENT, encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["most_frequent_label"] in ("BETTER", "WORSE")]
    texts = [r["sentence"] for r in rows]
    templates = BETTER[:2]
    forward = [t.format(a=r["object_a"], b=r["object_b"]) for r in rows for t in templates]
    backward = [t.format(a=r["object_b"], b=r["object_a"]) for r in rows for t in templates]
    better = np.array([r["most_frequent_label"] == "BETTER" for r in rows])
    for name, make, method in (("minilm", MiniLMEncoder, "passages"), ("e5", E5Encoder, "queries")):
        encoder = make()
        vectors = cached_embeddings(cache, f"{name}-compsent", texts, getattr(encoder, method))
        f = cached_embeddings(cache, f"{name}-compsent-forward", forward, encoder.queries)
        b = cached_embeddings(cache, f"{name}-compsent-backward", backward, encoder.queries)
        k = len(templates)
        margin = (np.einsum("rd,rkd->r", vectors, f.reshape(len(rows), k, -1))
                  - np.einsum("rd,rkd->r", vectors, b.reshape(len(rows), k, -1))) / k
        accuracy = float(((margin > 0) == better).mean())
        print(f"sentence probe, {name}: {len(rows)} CompSent-19 BETTER/WORSE sentences ({better.mean():.3f} BETTER): "
              f"the closer statement's direction is right for {accuracy:.3f}; mean margin {margin[better].mean():+.4f} "
              f"(BETTER) {margin[~better].mean():+.4f} (WORSE)", flush=True)


# -- fitting and deciding ----------------------------------------------------------------------------


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


def decide(probabilities: np.ndarray, shift: np.ndarray, gate: float, comparative: np.ndarray,
           names_an_object: np.ndarray) -> list[str]:
    """StanceModel.decide (prior shift, NEUTRAL gate) and label_masked's NO for passages naming neither."""
    shifted = probabilities * shift
    gated = comparative < gate
    shifted[gated, 3] += shifted[gated, 2]
    shifted[gated, 2] = 0.0
    labels = [LABELS[int(np.argmax(row))] for row in shifted]
    return [label if named else "NO" for label, named in zip(labels, names_an_object, strict=True)]


def main() -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--cache", type=Path, required=True, help="folder for the embeddings (outside the repo)")
    parser.add_argument("--repeats", type=int, default=3, help="fold assignments (%(default)s)")
    parser.add_argument("--inner", type=int, default=2, help="inner folds choosing the decision (%(default)s)")
    parser.add_argument("--tol", type=float, default=1e-3,
                        help="the regressions' tolerance (%(default)s; the shipped fit uses 1e-6, 8x slower, "
                        "probabilities within about 0.01)")
    parser.add_argument("--candidates", nargs="+", default=["today", "+both", "today-dense", "dense+enc"],
                        choices=["today", "+e5", "+minilm", "+both", "today-dense", "dense+enc", "votes",
                                 "votes-dense", "today+votes"],
                        help="models to compare; the first is the baseline (%(default)s)")
    parser.add_argument("--folds", type=int, default=5, help="folds per assignment (%(default)s)")
    parser.add_argument("--stance-encoder", type=Path, default=None,
                        help="the stance encoder file (default: the shipped one)")
    parser.add_argument("--sentence-probe", action="store_true",
                        help="only the sentence probe: do the encoders tell a CompSent-19 sentence's direction?")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.sentence_probe:
        sentence_probe(args.cache)
        return 0
    started = time.perf_counter()

    compsent = load_compsent()
    rows = load_stance_train()
    raw = raw_rows()
    assert len(raw) == len(rows)
    n = len(rows)
    gate = neutral_gate(compsent)
    sentence = fit_sentence_model(compsent)  # all of CompSent-19, as shipped: no stance-train row in it
    terms, dense, labels = training_inputs(sentence, rows)  # rows, then their object-swapped twins
    gold = [y for *_, y in rows]
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
    grid = [(priors, g) for priors, g in itertools.product(("uniform", "training"), (0.0, gate, 0.5))]

    def shift_of(priors: str, train_labels: list[str]) -> np.ndarray:
        p = train_priors(train_labels)
        return (np.full(4, 0.25) / p) if priors == "uniform" else np.ones(4)

    results: dict[str, dict[str, list]] = {name: {"shipped": [], "tuned": [], "choices": []} for name in candidates}
    for repeat in range(args.repeats):
        fold_of = [hashlib.md5(f"{repeat}:{qid}".encode()).digest()[0] % args.folds for qid, _, _ in rows]
        for name, (matrix, use_tfidf, compares) in candidates.items():
            predicted = {"shipped": [""] * n, "tuned": [""] * n}
            for k in range(args.folds):
                train = [i for i in range(n) if fold_of[i] != k]
                test = [i for i in range(n) if fold_of[i] == k]
                train_labels = [gold[i] for i in train]
                p = fit_predict(terms, matrix, labels, n, train, test, use_tfidf, args.tol)
                for i, label in zip(test, decide(p, shift_of("uniform", train_labels), gate, compares[test],
                                                 named[test]), strict=True):
                    predicted["shipped"][i] = label
                # Inner CV: out-of-fold probabilities of the training part choose priors and gate.
                inner_of = {i: hashlib.md5(f"inner{repeat}:{k}:{rows[i][0]}".encode()).digest()[0] % args.inner
                            for i in train}
                inner_p = np.zeros((n, 4))
                for j in range(args.inner):
                    inner_train = [i for i in train if inner_of[i] != j]
                    inner_test = [i for i in train if inner_of[i] == j]
                    inner_p[inner_test] = fit_predict(terms, matrix, labels, n, inner_train, inner_test, use_tfidf,
                                                      args.tol)

                inner_scores = [f1_report(train_labels, decide(inner_p[train], shift_of(priors, train_labels), g,
                                                               compares[train], named[train]), LABELS)["macro"]
                                for priors, g in grid]
                best = grid[int(np.argmax(inner_scores))]  # ties: the grid's first (uniform, no gate)
                results[name]["choices"].append(best)
                for i, label in zip(test, decide(p, shift_of(best[0], train_labels), best[1], compares[test],
                                                 named[test]), strict=True):
                    predicted["tuned"][i] = label
            for decision in ("shipped", "tuned"):
                results[name][decision].append(f1_report(gold, predicted[decision], LABELS))
        print(f"repeat {repeat + 1}/{args.repeats} done after {time.perf_counter() - started:.0f} s", flush=True)

    print(f"\n{args.repeats} x {args.folds}-fold CV on {n} stance-train answers (folds by question id); "
          "mean +- std over repeats")
    for decision in ("shipped", "tuned"):
        print(f"\ndecision: {decision}")
        base = np.array([r["macro"] for r in results[args.candidates[0]][decision]])
        for name in candidates:
            reports = results[name][decision]
            macro = np.array([r["macro"] for r in reports])
            per_class = " ".join(f"{label} {np.mean([r[label] for r in reports]):.3f}" for label in LABELS)
            gain = macro - base
            print(f"  {name:9s} macro-F1 {macro.mean():.3f} +- {macro.std():.3f} (min {macro.min():.3f} max "
                  f"{macro.max():.3f})  vs {args.candidates[0]} {gain.mean():+.3f} +- {gain.std():.3f}  ({per_class})")
    for name in candidates:
        chosen: dict[str, int] = {}
        for priors, g in results[name]["choices"]:
            key = f"{priors}/gate {g}"
            chosen[key] = chosen.get(key, 0) + 1
        print(f"  tuned decisions chosen for {name}: {chosen}")
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    run_script(main)
