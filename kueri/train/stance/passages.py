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
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kueri import resources
from kueri.cli.script import script_parser
from kueri.encoders.bert_graph import FloatLinear
from kueri.encoders.cross import TunedWeights
from kueri.records import STANCES as LABELS
from kueri.stance.encoders import SENTENCE_MODEL
from kueri.stance.features import in_training_half
from kueri.train.blas import kernel_note
from kueri.train.data import WEB
from kueri.train.folds import FOLDS, group_folds
from kueri.train.reports import by_length_third, confusion, f1_report, indented, paired_bootstrap, summarise
from kueri.train.stance.heads import (
    C_GRID,
    COMPOSED_WEIGHTS,
    SOURCE_WEIGHTS,
    C,
    Head,
    bag_of_words,
    baseline_labels,
    class_mix,
    decide,
    fit_head,
)
from kueri.train.stance.passage_data import (
    EXTRA_TRAINING_PARTS,
    FROZEN_PARTS,
    MAX_TOKENS,
    Data,
    States,
    answer_items,
    composed_items,
    compsent_items,
    load,
    outside,
    training_part,
    web_items,
    with_votes,
)
from kueri.train.stance.surroundings import SNIPPETS

MODEL = resources.path("models", "stance-v3.npz")
#: The passage model labels a topic's top hits; stance-v1 the rest (the default run's cost: docs/stance.md).
DEPTH = 10


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
            fold = group_folds([item.group for item in target.items], assignment)
            for k in range(FOLDS):
                held = [i for i in range(len(target.items)) if fold[i] == k]
                kept = [i for i in range(len(target.items)) if fold[i] != k and seen[i]]
                part = target.take(held)
                trained_on = target.take(kept) + rest.take(outside(rest.items, {target.items[i].group for i in held}))
                head = fit_head(trained_on, c)
                labels = decide(head.probabilities(part.forward, part.backward), part.items, head.train_priors,
                                shift_to)
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
        print(indented(best_confusion))


def report_frozen(head: Head, frozen: Data, shift_to: np.ndarray, models: Sequence[str] = (), part: str = "frozen") \
        -> None:
    """A frozen part, once: the model fitted on everything else, beside stance-v1, stance-v2 and ``models`` (names or
    files)."""
    gold = [item.label for item in frozen.items]
    labels = decide(head.probabilities(frozen.forward, frozen.backward), frozen.items, head.train_priors, shift_to)
    given = {n: baseline_labels(frozen.items, n) for n in models}
    for name, predicted in (*((n, baseline_labels(frozen.items, n)) for n in ("stance-v1", "stance-v2")),
                            *given.items(), ("passage head", labels)):
        print(summarise(f"{part}: {name}", [f1_report(gold, predicted, LABELS)]))
        print(indented(confusion(gold, predicted)))
    if len(given) >= 2:
        first, *others = given
        for other in others:
            print(paired_bootstrap(gold, [item.pair for item in frozen.items], given[first], given[other],
                                   f"{other} minus {first}"))
    words = [sum(any(c.isalnum() for c in token) for token in item.passage.tokens) for item in frozen.items]
    for line in by_length_third(words, gold, given):
        print(line)


def write(head: Head, shift_to: np.ndarray, out: Path, encoder: TunedWeights | None = None,
          settings: dict[str, object] | None = None, parts: Sequence[str] = (), composed: bool = False) -> None:
    """The shipped file: the sentence encoder's layers (or ``encoder``'s, with its head) with the passage head, and
    the decision, in one header (with the digests of the training files: ``train.jsonl``, the ``parts`` and, when
    ``composed``, the surroundings)."""
    tuned = encoder
    encoder = encoder or TunedWeights.load(SENTENCE_MODEL, "`python scripts/train_stance_encoder.py`")
    training = {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in (
        *((f"web-passages/{part}.jsonl", WEB / f"{part}.jsonl") for part in ("train", *parts)),
        ("touche2022-stance-train.tsv", resources.path("training", "touche2022-stance-train.tsv")),
        ("compsent19-train.csv", resources.path("training", "compsent19-train.csv")),
        *((("surroundings/snippets.jsonl", SNIPPETS),) if composed else ()))}
    meta = {**{k: v for k, v in encoder.meta.items() if k not in ("training", "format", "layers")},
            "kind": "passage-encoder", "labels": list(LABELS), "max_tokens": MAX_TOKENS,
            "train_priors": head.train_priors.tolist(), "target_priors": shift_to.tolist(), "neutral_gate": 0.0,
            "below": "stance-v1.npz", "encoder_depth": DEPTH, "head_c": C,
            "source_weights": {**SOURCE_WEIGHTS, **(COMPOSED_WEIGHTS if composed else {})},
            "sentence_encoder": SENTENCE_MODEL.name, "training": training, **(settings or {})}
    weights = tuned.head if tuned else FloatLinear(head.weight.astype(np.float32), head.bias.astype(np.float32))
    TunedWeights(meta, encoder.layers, weights).save(out)
    print(f"wrote {out}: sha256 {hashlib.sha256(out.read_bytes()).hexdigest()} ({out.stat().st_size / 1e6:.1f} MB)")
    if note := kernel_note("stance-v4.npz" if tuned else "stance-v3.npz"):
        print(note)


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--cache", type=Path, required=True, help="folder for the encoder's states (outside the repo)")
    parser.add_argument("--assignments", type=int, default=5, help="fold assignments of the web set (%(default)s)")
    parser.add_argument("--c", type=float, nargs="*", default=list(C_GRID), help="inverse regularisation grid")
    parser.add_argument("--out", type=Path, default=MODEL, help="the model file to write (%(default)s)")
    parser.add_argument("--web", type=Path, default=WEB, help="the web-passage set's folder (%(default)s)")
    parser.add_argument("--model", nargs="*", default=[], help="frozen: also these models (names or files)")
    parser.add_argument("--part", default="frozen", choices=FROZEN_PARTS,
                        help="frozen: the frozen part to read (%(default)s: the frozen fifth; third-frozen: the part "
                        "written for the next adoption, read once)")
    parser.add_argument("--composed", action="store_true",
                        help="train on the stance answers and CompSent-19's sentences set inside page surroundings too")
    parser.add_argument("--votes", action="store_true", help="cv: the sentence encoder's votes as inputs too")
    parser.add_argument("--with-part", nargs="*", default=[], choices=EXTRA_TRAINING_PARTS,
                        help="training parts of the set beside train.jsonl (cv measures on train.jsonl's passages)")
    parser.add_argument("--web-share", type=float, default=1.0,
                        help="cv: the heads see this share of the web set's training pairs (a learning curve)")
    parser.add_argument("--encoder", type=Path, default=SENTENCE_MODEL,
                        help="cv: the sentence encoder whose states the head reads (%(default)s)")
    parser.add_argument("what", choices=("bow", "cv", "frozen", "write"))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.what == "bow":
        print(summarise("bag of words, web-passage set", bag_of_words(web_items("train", args.web), args.assignments)))
        for part in args.with_part:  # each training part on its own, its folds by domain as the set's
            print(summarise(f"bag of words, {part}", bag_of_words(web_items(part, args.web), args.assignments)))
        print(summarise("bag of words, stance answers", bag_of_words(answer_items(), 3)))
        return 0
    if args.encoder != SENTENCE_MODEL and args.what != "cv":
        parser.error("--encoder is for cv: the shipped model and the frozen fifth read the shipped encoder")
    states = States(args.cache, args.encoder)
    web, measured = training_part(states, args.web, args.with_part)
    answers = load(states, "answers", answer_items())
    compsent = load(states, "compsent-train", compsent_items(True))
    if args.composed:  # beside CompSent-19 in every fit: "compsent" below stands for both
        compsent = compsent + load(states, "composed", composed_items())
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
        write(fit_head(web + answers + compsent, C), shift_to, args.out, parts=args.with_part, composed=args.composed)
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0
