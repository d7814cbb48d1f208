"""Would the stance encoder's "does this text compare the two objects" score help the second stage?

    .venv/bin/python scripts/cv_comparative_feature.py --workdir DIR [--cache DIR] [--stance-encoder PATH]

Issue 45, item 6. Touché's relevant passages are comparative arguments, and kueri's stance encoder
(:mod:`kueri.stance.encoders`, trained on CompSent-19 only: no 2022 data) says of a masked sentence how likely it
compares the topic's two objects (P(BETTER) + P(WORSE), against NONE). This measures that as candidate features of
the second stage with the second stage's own cross-validation on the 2020/2021 judgments:

* the data are ``scripts/train_second_stage.py``'s for the shipped default model (``build_data`` with the
  ``minilm-e5`` features, the lexical run's top candidates, labels inherited from the 2020/2021 document
  judgments; that script refuses the 2022 ones), reranked at the model's depth;
* candidate columns, computed for each candidate within that depth from the sentences that name both of the
  topic's objects (:class:`kueri.objects.ObjectMatcher`, :func:`kueri.objects.mask_passage`: the masking the
  features and the stance stage use): ``comparative_max``, the largest P(BETTER) + P(WORSE) of those sentences
  (0 when there is none), and ``comparative_sum_log``, log1p of their sum (the expected number of comparative
  sentences). The count of those sentences (log1p) is already a shipped feature, ``both_sentences_log``: the
  script checks that it recomputes the same values and does not add it again;
* each feature set is fitted with ``fit_offset`` and cross-validated with ``cross_validate`` (2-fold over topics x
  5 splits, held-out nDCG@5 over the topics with a relevant judged passage), its penalty chosen from the script's
  grid as the script chooses it (best mean, ties to the stronger penalty). The table gives each split's nDCG@5,
  the mean and sd over splits, and the paired difference to the shipped set (mean +- sd over the splits). The
  issue's rule: adopt only at +0.01 nDCG@5 or more.

The new columns travel in the matrix under the names of whole-topic features the shipped set does not weigh
(:data:`CARRIERS`), so the script's fit, scoring and cross-validation run unchanged: those only read the columns by
position and check that the names are second-stage features, in order.

Every distinct masked sentence is scored once, in one batch; the probabilities are kept in ``--cache`` (outside
the repository) in a file named by the encoder file's SHA-256, so a rerun scores only sentences it has not seen.
Nothing shipped is written. Deterministic.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from kueri.cli.script import script_parser, start
from kueri.errors import KueriError
from kueri.files import write_bytes_atomic
from kueri.objects import OBJ1, OBJ2, ObjectMatcher, mask_passage
from kueri.parse import read_topics
from kueri.second_stage.features import FEATURES
from kueri.second_stage.model import DEFAULT_MODEL, SecondStageModel
from kueri.stance.encoders import SENTENCE_MODEL as STANCE_ENCODER
from kueri.train.reports import ADOPT, adopts
from kueri.train.second_stage.cv import SPLITS, held_out_run, ndcg5, offset_penalties
from kueri.train.second_stage.data import (
    DENSE_DEPTH,
    FEATURE_SETS,
    ROOT,
    SAMPLE,
    Data,
    file_sha256,
    log,
    sample_data,
)
from kueri.train.second_stage.fit import LAMBDAS, fit_offset

SHIPPED = "minilm-e5"
NEW_COLUMNS = ("comparative_max", "comparative_sum_log")
#: Feature sets measured: the shipped one, and it with candidate columns.
VARIANTS: dict[str, tuple[str, ...]] = {
    "shipped (minilm-e5)": (),
    "+ comparative_max": ("comparative_max",),
    "+ comparative_max + comparative_sum_log": ("comparative_max", "comparative_sum_log"),
}
#: Second-stage feature names the shipped set does not weigh, after all of its features: the slots the new
#: columns travel in (see the module docstring).
CARRIERS = FEATURES[len(FEATURE_SETS[SHIPPED][0]):][: len(NEW_COLUMNS)]
Sentence = tuple[str, ...]


def both_sentences(data: Data, topics_path: Path, depth: int) -> list[list[Sentence]]:
    """For each row of ``data`` within ``depth``, its masked sentences that name both objects (empty beyond it)."""
    matchers = {t.number: ObjectMatcher(*t.objects) for t in read_topics(topics_path)}
    found: list[list[Sentence]] = []
    for qid, cand in data.candidates.items():  # the order of data's rows (build_data stacks them so)
        for position, text in enumerate(cand.texts):
            if position >= depth:
                found.append([])
                continue
            masked = mask_passage(text or "", matchers[qid])
            found.append([tuple(s) for s in masked.sentences if OBJ1 in s and OBJ2 in s])
    if len(found) != len(data.rank):
        raise KueriError(f"{len(found)} candidate texts for {len(data.rank)} rows")
    return found


def sentence_probabilities(sentences: Sequence[Sentence], encoder: Path, cache: Path) -> dict[Sentence, np.ndarray]:
    """P(BETTER, WORSE, NONE) of each distinct sentence, from ``cache/stance-probabilities-<sha256>.npz`` where
    known; the others scored in one batch by the encoder and added to the file."""
    path = cache / f"stance-probabilities-{file_sha256(encoder)}.npz"
    known: dict[Sentence, np.ndarray] = {}
    if path.is_file():
        with np.load(path, allow_pickle=False) as stored:
            known = {tuple(s.split(" ")): p for s, p in zip(stored["sentences"].tolist(), stored["probabilities"],
                                                             strict=True)}
    missing = sorted(set(sentences) - set(known))
    log(f"stance encoder {encoder.name}: {len(set(sentences))} distinct sentences naming both objects, "
        f"{len(missing)} not in {path}")
    if missing:
        from kueri.stance.encoders import SentenceEncoder

        started = time.perf_counter()
        scored = SentenceEncoder(encoder).probabilities([list(s) for s in missing])
        log(f"  scored {len(missing)} sentences in {time.perf_counter() - started:.0f} s")
        known.update(zip(missing, scored, strict=True))
        order = sorted(known)
        buffer = io.BytesIO()
        np.savez(buffer, sentences=np.array([" ".join(s) for s in order], dtype=str),
                 probabilities=np.array([known[s] for s in order], dtype=np.float64))
        cache.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, buffer.getvalue())
    return known


def new_columns(rows: Sequence[Sequence[Sentence]], probabilities: dict[Sentence, np.ndarray]) -> dict[str, np.ndarray]:
    """The candidate columns (:data:`NEW_COLUMNS`) and the recomputed count of sentences naming both objects."""
    comparative = [[float(probabilities[s][0] + probabilities[s][1]) for s in row] for row in rows]
    return {
        "comparative_max": np.array([max(c, default=0.0) for c in comparative]),
        "comparative_sum_log": np.array([math.log1p(sum(c)) for c in comparative]),
        "both_sentences_log": np.array([math.log1p(len(row)) for row in rows]),
    }


def with_columns(data: Data, columns: dict[str, np.ndarray], names: Sequence[str]) -> Data:
    """``data`` with the columns ``names`` added in the carrier slots (the shipped columns unchanged)."""
    if not names:
        return data
    matrix = np.column_stack([data.matrix, *(columns[name] for name in names)])
    return dataclasses.replace(data, features=(*data.features, *CARRIERS[: len(names)]), matrix=matrix)


def per_split(data: Data, eval_topics: Sequence[str], fit: Callable[[np.ndarray], SecondStageModel], depth: int
              ) -> list[float]:
    """Each split's held-out nDCG@5, as ``cross_validate`` computes them (checked against it)."""
    return [ndcg5(held_out_run(data, eval_topics, fit, depth, split), data.qrels) for split in range(SPLITS)]


def measure(data: Data, eval_topics: Sequence[str], depth: int
            ) -> tuple[float, list[float], dict[str, float], dict[str, float]]:
    """(chosen penalty, each split's nDCG@5 with it, ``cross_validate``'s figures with it, the standardised weights
    of the new columns when fitted on all topics with it) for ``data``'s features."""
    lam, cv = offset_penalties(data, eval_topics, depth)  # as train_second_stage.py chooses it
    splits = per_split(data, eval_topics, lambda rows: fit_offset(data, rows, lam), depth)
    if abs(float(np.mean(splits)) - cv[lam]["ndcg5"]) > 1e-12:
        raise KueriError(f"per-split nDCG@5 {np.mean(splits)} differs from cross_validate's {cv[lam]['ndcg5']}")
    weights = fit_offset(data, data.rank < depth, lam).weights()
    return lam, splits, cv[lam], {name: weights[carrier] for name, carrier in zip(NEW_COLUMNS, CARRIERS, strict=False)
                                  if carrier in weights}


def main(argv: Sequence[str] | None = None) -> int:
    parser = script_parser(__doc__, whole_doc=True)
    parser.add_argument("--workdir", type=Path, default=None,
                        help="index and embedding cache of train_second_stage.py (default: a temporary folder)")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "kueri-comparative",
                        help="folder for the sentence probabilities, outside the repository (default: %(default)s)")
    parser.add_argument("--stance-encoder", type=Path, default=STANCE_ENCODER,
                        help="stance encoder file (default: kueri/resources/models/stance-encoder-v1.npz)")
    args = start(parser.parse_args(argv))
    if args.cache.resolve().is_relative_to(ROOT):
        raise KueriError(f"--cache {args.cache} is inside the repository; keep the probabilities outside it")
    if not args.stance_encoder.is_file():
        raise KueriError(f"stance encoder {args.stance_encoder} not found")
    if set(CARRIERS) & set(FEATURE_SETS[SHIPPED][0]) or len(CARRIERS) < len(NEW_COLUMNS):
        raise KueriError(f"no free feature slots for the new columns: {CARRIERS}")
    shipped = SecondStageModel.load(DEFAULT_MODEL)
    depth = DENSE_DEPTH  # train_second_stage.py's depth for a set with neural features
    if shipped.depth != depth or shipped.features != FEATURE_SETS[SHIPPED][0]:
        raise KueriError(f"{DEFAULT_MODEL.name} is not the {SHIPPED} set at depth {depth}")

    started = time.perf_counter()
    topics_path = SAMPLE / "topics.xml"
    data = sample_data(args.workdir, FEATURE_SETS[SHIPPED][0])
    built = time.perf_counter()
    topics = sorted(data.candidates, key=int)
    eval_topics = data.evaluated_topics()

    rows = both_sentences(data, topics_path, depth)
    probabilities = sentence_probabilities([s for row in rows for s in row], args.stance_encoder, args.cache)
    scored = time.perf_counter()
    columns = new_columns(rows, probabilities)
    inside = data.rank < depth
    shipped_count = data.matrix[inside, data.features.index("both_sentences_log")]
    if not np.allclose(columns["both_sentences_log"][inside], shipped_count, rtol=0, atol=1e-12):
        raise KueriError("the sentences naming both objects differ from those of the shipped both_sentences_log")
    with_any = int((columns["both_sentences_log"][inside] > 0).sum())
    print(f"{int(inside.sum())} candidates within depth {depth} ({len(topics)} topics, {len(eval_topics)} evaluated); "
          f"{with_any} have a sentence naming both objects; comparative_max among them: mean "
          f"{columns['comparative_max'][inside & (columns['both_sentences_log'] > 0)].mean():.3f}")

    results = {}
    for name, added in VARIANTS.items():
        results[name] = measure(with_columns(data, columns, added), eval_topics, depth)
        log(f"  {name}: lambda {results[name][0]:g}, nDCG@5 {np.mean(results[name][1]):.4f}")
    base = np.array(results[next(iter(VARIANTS))][1])

    print(f"\nHeld-out nDCG@5 on the 2020/2021 judgments ({len(eval_topics)} topics), 2-fold CV over topics x {SPLITS} "
          f"splits, depth {depth}, penalty chosen per feature set from {list(LAMBDAS)}; stance encoder "
          f"{args.stance_encoder.name} (sha256 {file_sha256(args.stance_encoder)[:12]})")
    head = " ".join(f"{'split ' + str(s):>8s}" for s in range(SPLITS))
    print(f"{'feature set':42s} {'lambda':>6s} {head} {'mean':>7s} {'sd':>7s} {'judged':>7s} "
          f"{'diff (mean +- sd)':>18s}")
    for name, (lam, splits, cv, _) in results.items():
        diff = np.array(splits) - base
        cells = " ".join(f"{v:8.4f}" for v in splits)
        print(f"{name:42s} {lam:6g} {cells} {np.mean(splits):7.4f} {np.std(splits):7.4f} "
              f"{cv['ndcg5_condensed']:7.4f} {np.mean(diff):+8.4f} +- {np.std(diff):.4f}")
    print("(sd: over the splits, as train_second_stage.py reports it; judged: the judged-only nDCG@5; diff: paired "
          "by split against the shipped set)")
    for name, (lam, _, _, weights) in list(results.items())[1:]:
        print(f"weights fitted on all topics ({name}, lambda {lam:g}; standardised): "
              + ", ".join(f"{column} {weight:+.4f}" for column, weight in weights.items()))
    best = max(list(VARIANTS)[1:], key=lambda name: float(np.mean(np.array(results[name][1]) - base)))
    gain = float(np.mean(np.array(results[best][1]) - base))
    verdict = "adopt" if adopts(gain) else "do not adopt"
    print(f"\nbest candidate: {best}, {gain:+.4f} nDCG@5 against the shipped set; the rule is +{ADOPT} or more: "
          f"{verdict}")
    print(f"time: {time.perf_counter() - started:.0f} s (data {built - started:.0f} s, stance encoder "
          f"{scored - built:.0f} s, cross-validation {time.perf_counter() - scored:.0f} s); load average at the end "
          + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    return 0

