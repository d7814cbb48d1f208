#!/usr/bin/env python3
"""Cross-validate and train kueri's passage-level stance model on the web-passage set (docs/stance.md).

    .venv/bin/pip install -e '.[train]'
    .venv/bin/python scripts/train_stance_passages.py --cache DIR bow       # a bag of words on the set and the answers
    .venv/bin/python scripts/train_stance_passages.py --cache DIR cv        # the cross-validation, both data sets
    .venv/bin/python scripts/train_stance_passages.py --cache DIR frozen    # the frozen fifth, once, at the end
    .venv/bin/python scripts/train_stance_passages.py --cache DIR --part second-frozen frozen   # the next adoption's
    .venv/bin/python scripts/train_stance_passages.py --cache DIR write     # kueri/resources/models/stance-v3.npz
    .venv/bin/python scripts/train_stance_passages.py --cache DIR --encoder FILE cv   # on another sentence encoder

The model reads a whole passage: kueri's stance cross-encoder (``stance-encoder-v1.npz``, MiniLM fine-tuned on
CompSent-19's sentences) over the pair ("x is better than y", the passage with the topic's objects masked as x
and y, up to :data:`MAX_TOKENS` word pieces), with a new linear head on its first token: P(FIRST, SECOND,
NEUTRAL, NO). Symmetric by construction (both orders of the objects averaged, FIRST and SECOND exchanged back),
trained on both orders. Training data: the web-passage set's training part (never its frozen fifth), the
stance training set's answers and CompSent-19's training half (BETTER = FIRST, WORSE = SECOND, NONE = NO: a
sentence naming both objects without comparing them takes no position); never the 2022 judgments, never the
shipped sample's passages.

The encoder's states are computed once per text (kueri's own graph) and kept in ``--cache``: the heads of every
fold and fold assignment are fitted on them (``--encoder``: another sentence encoder's, such as one tuned from e5 by
``train_stance_encoder.py --base e5``, kept apart). The decision shifts the probabilities from the training data's
class balance to the web-passage set's (its README: an assumption about the web, not tuned).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_stance import confusion, f1_report, load_compsent, load_stance_train  # noqa: E402

from kueri import resources  # noqa: E402
from kueri.cli.script import run_script, script_parser  # noqa: E402
from kueri.encoders.bert_graph import FloatLinear  # noqa: E402
from kueri.encoders.cross import CrossEncoder, TunedWeights, pair_tokenizer  # noqa: E402
from kueri.objects import OBJ1, OBJ2, MaskedPassage, ObjectMatcher, mask_passage  # noqa: E402
from kueri.records import STANCES as LABELS  # noqa: E402
from kueri.stance.encoders import HYPOTHESIS, SENTENCE_MODEL, masked_text  # noqa: E402
from kueri.stance.family import load_model  # noqa: E402
from kueri.stance.features import in_training_half  # noqa: E402

WEB = resources.path("training", "web-passages")
MODEL = resources.path("models", "stance-v3.npz")
#: Training parts of the web set beside ``train.jsonl``, read with ``--with-part`` (stance-v3 read train.jsonl alone).
EXTRA_TRAINING_PARTS = ("second-train",)
#: The head's inverse regularisation, chosen by the cross-validation on the web-passage set (docs/stance.md).
C = 0.1
#: The passage model labels a topic's top hits; stance-v1 the rest (the default run's cost: docs/stance.md).
DEPTH = 10
#: Word pieces of one input, hypothesis included: most web passages of 40-250 words fit.
MAX_TOKENS = 256
SWAP = [1, 0, 2, 3]
COMPSENT_LABELS = {"BETTER": "FIRST", "WORSE": "SECOND", "NONE": "NO"}
FOLDS = 5
#: How much each source's examples count in the head's loss (CompSent-19's short sentences are many).
SOURCE_WEIGHTS = {"web": 1.0, "answers": 1.0, "compsent": 0.5}
C_GRID = (0.03, 0.1, 0.3, 1.0)


@dataclass(frozen=True)
class Item:
    key: str
    group: str
    source: str
    passage: MaskedPassage
    label: str
    pair: str = ""  # the web set's object pair (the frozen parts' bootstrap draws pairs)


def web_items(split: str, folder: Path = WEB) -> list[Item]:
    """The web-passage set's ``train`` or ``frozen`` part; group = its domain (each domain's pairs were written by
    the same writers, so its pairs and writing batches fall in one fold together)."""
    items = []
    with open(folder / f"{split}.jsonl", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            passage = mask_passage(row["text"], ObjectMatcher(row["object_1"], row["object_2"]))
            items.append(Item(row["id"], row["domain"], "web", passage, row["stance"],
                              f"{row['object_1']} | {row['object_2']}".lower()))
    return items


def answer_items() -> list[Item]:
    return [Item(f"answer:{i}", qid, "answers", passage, label)
            for i, (qid, passage, label) in enumerate(load_stance_train())]


def compsent_items(training_half: bool) -> list[Item]:
    return [Item(f"compsent:{sid}", sid, "compsent", MaskedPassage([tokens]), COMPSENT_LABELS[label])
            for sid, tokens, label in load_compsent() if in_training_half(sid) == training_half]


def names_an_object(item: Item) -> bool:
    tokens = item.passage.tokens
    return OBJ1 in tokens or OBJ2 in tokens


class States:
    """The stance encoder's first-token states of items, both orders, computed once and kept in a cache folder."""

    def __init__(self, cache: Path, encoder: Path = SENTENCE_MODEL) -> None:
        self.cache = cache
        cache.mkdir(parents=True, exist_ok=True)
        self.encoder = CrossEncoder(encoder, "`python scripts/train_stance_encoder.py`")
        self.encoder.tokenizer = pair_tokenizer(MAX_TOKENS, self.encoder.base_name)  # whole passages, not sentences
        # The shipped encoder's states keep their names; another's are named after its file's bytes.
        self.prefix = "" if encoder == SENTENCE_MODEL else hashlib.sha256(encoder.read_bytes()).hexdigest()[:12] + "-"

    def of(self, name: str, items: Sequence[Item]) -> tuple[np.ndarray, np.ndarray]:
        texts = [masked_text(item.passage.tokens) for item in items]
        swapped = [masked_text(item.passage.swapped().tokens) for item in items]
        digest = hashlib.sha1("\0".join(texts).encode()).hexdigest()[:16]
        path = self.cache / f"{self.prefix}{name}-{MAX_TOKENS}-{digest}.npz"
        if path.exists():
            saved = np.load(path)
            return saved["forward"], saved["backward"]
        started = time.perf_counter()
        both = self.encoder.states([(HYPOTHESIS, text) for text in [*texts, *swapped]])
        forward, backward = both[: len(texts)], both[len(texts):]
        np.savez(path, forward=forward, backward=backward)
        print(f"  {name}: states of {len(texts)} texts x 2 in {time.perf_counter() - started:.0f} s", flush=True)
        return forward, backward


@dataclass
class Data:
    items: list[Item]
    forward: np.ndarray
    backward: np.ndarray

    def __add__(self, other: Data) -> Data:
        return Data([*self.items, *other.items], np.vstack([self.forward, other.forward]),
                    np.vstack([self.backward, other.backward]))

    def take(self, indices: Sequence[int]) -> Data:
        chosen = list(indices)
        return Data([self.items[i] for i in chosen], self.forward[chosen], self.backward[chosen])


def load(states: States, name: str, items: list[Item]) -> Data:
    return Data(items, *states.of(name, items))


def training_part(states: States, folder: Path, parts: Sequence[str]) -> tuple[Data, list[bool] | None]:
    """The web set's training passages (``train.jsonl`` and the ``parts``), and which of them a CV measures on:
    ``train.jsonl``'s (its figures stay comparable), None when there are no other parts (all)."""
    web = load(states, "web-train", web_items("train", folder))
    count = len(web.items)
    for part in parts:
        web = web + load(states, f"web-{part}", web_items(part, folder))
    return web, [i < count for i in range(len(web.items))] if parts else None


def with_votes(data: Data, cache: Path) -> Data:
    """``data`` with the sentence encoder's votes on its sentences naming both objects appended to each order's
    state: the largest P(BETTER) and P(WORSE), their mean difference, and whether any sentence votes (the other
    order's with BETTER and WORSE exchanged). Kept in ``cache``."""
    from kueri.stance.encoders import SentenceEncoder

    voting = sorted({tuple(s) for item in data.items for s in item.passage.sentences if OBJ1 in s and OBJ2 in s})
    digest = hashlib.sha1("\0".join(" ".join(s) for s in voting).encode()).hexdigest()[:16]
    path = cache / f"votes-{digest}.npy"
    if not path.exists():
        np.save(path, SentenceEncoder().probabilities([list(s) for s in voting]))
    vote = dict(zip(voting, np.load(path), strict=True))
    forward, backward = np.zeros((len(data.items), 4)), np.zeros((len(data.items), 4))
    for row, item in enumerate(data.items):
        votes = np.array([vote[tuple(s)] for s in item.passage.sentences if OBJ1 in s and OBJ2 in s])
        if len(votes):
            difference = float(np.mean(votes[:, 0] - votes[:, 1]))
            forward[row] = votes[:, 0].max(), votes[:, 1].max(), difference, 1.0
            backward[row] = votes[:, 1].max(), votes[:, 0].max(), -difference, 1.0
    return Data(data.items, np.hstack([data.forward, forward]), np.hstack([data.backward, backward]))


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


def fit_head(data: Data, c: float) -> Head:
    """Multinomial logistic regression on both orders of every item (the swapped twin with FIRST and SECOND
    exchanged), each weighted by its source."""
    from sklearn.linear_model import LogisticRegression

    x = np.vstack([data.forward, data.backward]).astype(np.float64)
    labels = [item.label for item in data.items]
    y = np.array([LABELS.index(label) for label in labels] + [SWAP[LABELS.index(label)] for label in labels])
    weights = np.array([SOURCE_WEIGHTS[item.source] for item in data.items] * 2)
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


def decide(probabilities: np.ndarray, items: Sequence[Item], shift: np.ndarray) -> list[str]:
    """Prior-shifted argmax; a passage naming neither object is NO (it cannot favour one)."""
    labels = [LABELS[int(np.argmax(row * shift))] for row in probabilities]
    return [label if names_an_object(item) else "NO" for label, item in zip(labels, items, strict=True)]


def class_mix(items: Sequence[Item]) -> np.ndarray:
    """The share of each label, FIRST and SECOND pooled and split evenly (which object is first is arbitrary)."""
    counts = np.array([sum(item.label == label for item in items) for label in LABELS], dtype=np.float64)
    counts[:2] = counts[:2].sum() / 2
    return counts / counts.sum()


def folds(items: Sequence[Item], assignment: int) -> list[int]:
    """Each item's fold: its group's place in an order drawn by ``assignment`` (MD5), dealt round the folds, so
    that a few large groups (the web set's 14 writing batches) still fill every fold."""
    groups = sorted({item.group for item in items}, key=lambda g: hashlib.md5(f"{assignment}:{g}".encode()).digest())
    fold = {group: rank % FOLDS for rank, group in enumerate(groups)}
    return [fold[item.group] for item in items]


def baseline_labels(items: Sequence[Item], name: str) -> list[str]:
    model = load_model(name)
    model.prefetch([item.passage for item in items])
    return [model.label_masked(item.passage) for item in items]


def summarise(name: str, reports: list[dict[str, float]]) -> str:
    macro = [r["macro"] for r in reports]
    cells = " ".join(f"{label} {np.mean([r[label] for r in reports]):.3f}" for label in LABELS)
    return f"{name:34s} macro-F1 {np.mean(macro):.3f} +- {np.std(macro):.3f}  ({cells})"


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
        fold = folds(target, assignment)
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


def cross_validate(target: Data, rest: Data, shift_to: np.ndarray, assignments: int, c_grid: Sequence[float],
                   baselines: dict[str, list[str]], measured: Sequence[bool] | None = None, share: float = 1.0) -> None:
    """Grouped k-fold over ``target`` (its items' groups), the heads trained on the other folds plus all of
    ``rest``; macro-F1 per fold assignment, beside the fixed baselines on the same items (only the ``measured``
    ones: the answers' held-out half, where stance-v1's own split measures it). ``share``: the heads see only that
    share of the other folds' object pairs (the same pairs in every fold: a learning curve)."""
    seen = [share >= 1.0 or int(hashlib.md5(item.pair.encode()).hexdigest(), 16) / 16 ** 32 < share
            for item in target.items]
    keep = [i for i in range(len(target.items)) if measured is None or measured[i]]
    gold = [target.items[i].label for i in keep]
    for name, predicted in baselines.items():
        print(summarise(name, [f1_report(gold, [predicted[i] for i in keep], LABELS)]))
    best: tuple[float, float] | None = None
    for c in c_grid:
        reports, pooled_gold, pooled = [], [], []
        for assignment in range(assignments):
            predicted = [""] * len(target.items)
            fold = folds(target.items, assignment)
            for k in range(FOLDS):
                held = [i for i in range(len(target.items)) if fold[i] == k]
                kept = [i for i in range(len(target.items)) if fold[i] != k and seen[i]]
                part = target.take(held)
                head = fit_head(target.take(kept) + rest, c)
                labels = decide(head.probabilities(part.forward, part.backward), part.items,
                                shift_to / head.train_priors)
                for i, label in zip(held, labels, strict=True):
                    predicted[i] = label
            predicted = [predicted[i] for i in keep]
            reports.append(f1_report(gold, predicted, LABELS))
            pooled_gold += gold
            pooled += predicted
        print(summarise(f"passage head C={c}", reports), flush=True)
        for name, base in baselines.items():
            gains = [r["macro"] - f1_report(gold, [base[i] for i in keep], LABELS)["macro"] for r in reports]
            print(f"    gain over {name}: {np.mean(gains):+.3f} +- {np.std(gains):.3f}")
        mean = float(np.mean([r["macro"] for r in reports]))
        if best is None or mean > best[0]:
            best = (mean, c)
            best_confusion = confusion(pooled_gold, pooled)
    if best is not None:
        print(f"  best C={best[1]} ({best[0]:.3f}); its confusion, pooled over the assignments:")
        print("    " + best_confusion.replace("\n", "\n    "))


def report_frozen(head: Head, frozen: Data, shift_to: np.ndarray, models: Sequence[str] = (), part: str = "frozen") \
        -> None:
    """A frozen part, once: the model fitted on everything else, beside stance-v1, stance-v2 and ``models`` (names or
    files)."""
    gold = [item.label for item in frozen.items]
    labels = decide(head.probabilities(frozen.forward, frozen.backward), frozen.items, shift_to / head.train_priors)
    given = {n: baseline_labels(frozen.items, n) for n in models}
    for name, predicted in (*((n, baseline_labels(frozen.items, n)) for n in ("stance-v1", "stance-v2")),
                            *given.items(), ("passage head", labels)):
        print(summarise(f"{part}: {name}", [f1_report(gold, predicted, LABELS)]))
        print("    " + confusion(gold, predicted).replace("\n", "\n    "))
    if len(given) >= 2:
        first, *others = given
        for other in others:
            print(paired_bootstrap(frozen.items, given[first], given[other], f"{other} minus {first}"))


def paired_bootstrap(items: Sequence[Item], a: Sequence[str], b: Sequence[str], name: str,
                     draws: int = 10_000) -> str:
    """The gain in macro-F1 of labels ``b`` over ``a``, and how it varies when the part's object pairs are drawn
    again with replacement (a pair's passages together: what another part written the same way could give)."""
    def macro_f1(gold: np.ndarray, predicted: np.ndarray, counts: np.ndarray) -> float:
        """f1_report's macro-F1 of label indices, each passage counted ``counts`` times."""
        f1s = []
        for k in range(len(LABELS)):
            tp = counts[(gold == k) & (predicted == k)].sum()
            n_gold, n_pred = counts[gold == k].sum(), counts[predicted == k].sum()
            if n_gold or n_pred:
                f1s.append(2 * tp / (n_gold + n_pred))
        return float(np.mean(f1s))

    gold = np.array([LABELS.index(item.label) for item in items])
    first, second = (np.array([LABELS.index(label) for label in labels]) for labels in (a, b))
    pairs = sorted({item.pair for item in items})
    pair_of = np.array([pairs.index(item.pair) for item in items])
    rng = np.random.default_rng(20222)
    gains = []
    for _ in range(draws):
        counts = np.bincount(rng.integers(len(pairs), size=len(pairs)), minlength=len(pairs))[pair_of]
        gains.append(macro_f1(gold, second, counts) - macro_f1(gold, first, counts))
    ones = np.ones(len(items), dtype=np.int64)
    gain = macro_f1(gold, second, ones) - macro_f1(gold, first, ones)
    low, high = np.percentile(gains, [5, 95])
    return (f"  {name}: {gain:+.3f}; over {draws} draws of the {len(pairs)} pairs, 90 % between {low:+.3f} and "
            f"{high:+.3f}, above zero in {np.mean(np.array(gains) > 0):.1%}")


def write(head: Head, shift_to: np.ndarray, out: Path, encoder: TunedWeights | None = None,
          settings: dict[str, object] | None = None, parts: Sequence[str] = ()) -> None:
    """The shipped file: the sentence encoder's layers (or ``encoder``'s, with its head) with the passage head, and
    the decision, in one header (with the digests of the training files: ``train.jsonl`` and the ``parts``)."""
    tuned = encoder
    encoder = encoder or TunedWeights.load(SENTENCE_MODEL, "`python scripts/train_stance_encoder.py`")
    training = {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in (
        *((f"web-passages/{part}.jsonl", WEB / f"{part}.jsonl") for part in ("train", *parts)),
        ("touche2022-stance-train.tsv", resources.path("training", "touche2022-stance-train.tsv")),
        ("compsent19-train.csv", resources.path("training", "compsent19-train.csv")))}
    meta = {**{k: v for k, v in encoder.meta.items() if k not in ("training", "format", "layers")},
            "kind": "passage-encoder", "labels": list(LABELS), "max_tokens": MAX_TOKENS,
            "train_priors": head.train_priors.tolist(), "target_priors": shift_to.tolist(), "neutral_gate": 0.0,
            "below": "stance-v1.npz", "encoder_depth": DEPTH, "head_c": C, "source_weights": SOURCE_WEIGHTS,
            "sentence_encoder": SENTENCE_MODEL.name, "training": training, **(settings or {})}
    weights = tuned.head if tuned else FloatLinear(head.weight.astype(np.float32), head.bias.astype(np.float32))
    TunedWeights(meta, encoder.layers, weights).save(out)
    print(f"wrote {out}: sha256 {hashlib.sha256(out.read_bytes()).hexdigest()} ({out.stat().st_size / 1e6:.1f} MB)")


def main() -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--cache", type=Path, required=True, help="folder for the encoder's states (outside the repo)")
    parser.add_argument("--assignments", type=int, default=5, help="fold assignments of the web set (%(default)s)")
    parser.add_argument("--c", type=float, nargs="*", default=list(C_GRID), help="inverse regularisation grid")
    parser.add_argument("--out", type=Path, default=MODEL, help="the model file to write (%(default)s)")
    parser.add_argument("--web", type=Path, default=WEB, help="the web-passage set's folder (%(default)s)")
    parser.add_argument("--model", nargs="*", default=[], help="frozen: also these models (names or files)")
    parser.add_argument("--part", default="frozen", choices=("frozen", "second-frozen"),
                        help="frozen: the frozen part to read (%(default)s: the frozen fifth; second-frozen: the part "
                        "written for the next adoption)")
    parser.add_argument("--votes", action="store_true", help="cv: the sentence encoder's votes as inputs too")
    parser.add_argument("--with-part", nargs="*", default=[], choices=EXTRA_TRAINING_PARTS,
                        help="training parts of the set beside train.jsonl (cv measures on train.jsonl's passages)")
    parser.add_argument("--web-share", type=float, default=1.0,
                        help="cv: the heads see this share of the web set's training pairs (a learning curve)")
    parser.add_argument("--encoder", type=Path, default=SENTENCE_MODEL,
                        help="cv: the sentence encoder whose states the head reads (%(default)s)")
    parser.add_argument("what", choices=("bow", "cv", "frozen", "write"))
    args = parser.parse_args()
    started = time.perf_counter()
    if args.what == "bow":
        print(summarise("bag of words, web-passage set", bag_of_words(web_items("train", args.web), args.assignments)))
        print(summarise("bag of words, stance answers", bag_of_words(answer_items(), 3)))
        return 0
    if args.encoder != SENTENCE_MODEL and args.what != "cv":
        parser.error("--encoder is for cv: the shipped model and the frozen fifth read the shipped encoder")
    states = States(args.cache, args.encoder)
    web, measured = training_part(states, args.web, args.with_part)
    answers = load(states, "answers", answer_items())
    compsent = load(states, "compsent-train", compsent_items(True))
    shift_to = class_mix(web.items)
    print(f"web-passage set: {len(web.items)} training passages; class mix (FIRST SECOND NEUTRAL NO) "
          f"{np.round(shift_to, 3).tolist()}")
    if args.votes:
        web, answers, compsent = (with_votes(data, args.cache) for data in (web, answers, compsent))
    if args.what == "cv":
        print(f"\n== web-passage set: {FOLDS} folds by writing batch x {args.assignments} assignments ==")
        baselines = {name: baseline_labels(web.items, name) for name in ("stance-v1", "stance-v2")}
        cross_validate(web, answers + compsent, shift_to, args.assignments, args.c, baselines, measured,
                       args.web_share)
        if args.web_share < 1.0:
            return 0
        print(f"\n== stance training answers: {FOLDS} folds by question x 3 assignments, measured on the held-out "
              "half (the shipped stance-v1 and stance-v2 were refitted on all the answers: their figures here are "
              "on their own training data; docs/stance.md gives stance-v1 refitted per fold) ==")
        baselines = {name: baseline_labels(answers.items, name) for name in ("stance-v1", "stance-v2")}
        cross_validate(answers, web + compsent, shift_to, 3, args.c, baselines,
                       [not in_training_half(item.group) for item in answers.items])
    if args.what == "frozen":
        frozen = load(states, f"web-{args.part}", web_items(args.part, args.web))
        report_frozen(fit_head(web + answers + compsent, C), frozen, shift_to, args.model, args.part)
    if args.what == "write":
        write(fit_head(web + answers + compsent, C), shift_to, args.out, parts=args.with_part)
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    run_script(main)
