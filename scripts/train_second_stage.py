#!/usr/bin/env python3
"""Train the second stage (``kueri/resources/models/second-stage-v2.json``) on the earlier years' judgments.

    .venv/bin/python scripts/train_second_stage.py                     # rebuild the default model (~5 min)
    .venv/bin/python scripts/train_second_stage.py --features minilm   # second-stage-v1.json
    .venv/bin/python scripts/train_second_stage.py --features lexical  # second-stage-lexical-v1.json
    .venv/bin/python scripts/train_second_stage.py --depth-curve 50,100,200,300,1000 --out /tmp/m.json

Data: the lexical run of Table 1 row 15 (kueristopv2 + Porter, BM25, title query) on the shipped
sample (``kueri/resources/sample``: 2,607 real passages, the 50 topics of 2022), its top ``--depth`` hits
per topic with their features (:mod:`kueri.second_stage.features`). Labels come ONLY from the earlier
years' judgments, Touché 2020 (topics 1-50) and 2021 (topics 51-100), which judge whole ClueWeb12
documents: a passage inherits the grade its document got for the same topic (doc id = passage id
before ``___``). Candidates without a judged document count as grade 0, as an evaluator counts them.
The 2022 judgments are refused here: they are kept for measuring the final system only.

Features (``--features``): ``minilm-e5`` (the default model: every feature, with the MiniLM and e5
similarities and MiniLM pseudo-relevance feedback), ``minilm`` (MiniLM similarity only), ``lexical``
(no neural feature).

Model (``--kind offset``, the default): the original's score x quality, corrected by a learned linear
function of the other features: a pairwise logistic regression (RankNet with a linear scorer) over
pairs of candidates with different grades, with ``log bm25_rel + log quality`` as a fixed offset, so
the model starts from what the original did and learns only the correction. ``--kind ridge`` fits a
free pointwise ridge regression of the grade instead (the report shows both; the offset model is
kept for both shipped models: its weights stay close to the original's tested ranking). The penalty is
chosen by 2-fold cross-validation over topics, repeated over 5 splits (split 0: topics whose
number's MD5 starts with an even byte; splits 1-4: seeded permutations), by the mean nDCG@5 of the
held-out topics. The report also gives the baselines (the lexical run, the original's score x
quality rerank), the feature groups' contributions and, with ``--depth-curve``, the effect of the
depth. Everything is deterministic: the same inputs give the same model file.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kueri import resources
from kueri.cli import configure_logging
from kueri.cli.script import run_script, script_parser
from kueri.config import get_config
from kueri.errors import KueriError
from kueri.evaluate import evaluate_run
from kueri.parse import read_topics
from kueri.pipeline import Pipeline
from kueri.quality.offline import DEFAULT_MODEL as QUALITY_MODEL
from kueri.quality.offline import OfflineQualityModel
from kueri.records import Hit, Run
from kueri.runcontext import RunContext
from kueri.runfile import read_qrels
from kueri.second_stage.candidates import Candidates, CandidateTimes, collect
from kueri.second_stage.features import FEATURES, NEURAL_FEATURES, TEXT_FEATURES, TITLE_FEATURES
from kueri.second_stage.model import (
    DEFAULT_MODEL,
    LEXICAL_MODEL,
    MINILM_MODEL,
    WHOLE_TOPIC_MODEL,
    SecondStageModel,
)
from kueri.second_stage.ranking import load_encoders, reorder_head

ROOT = Path(__file__).resolve().parent.parent

SAMPLE = resources.sample()
QRELS = resources.qrels()
EARLIER_QRELS = (QRELS / "touche2020-task2-relevance.qrels", QRELS / "touche-task2-51-100-relevance.qrels")
FORBIDDEN_QRELS = "touche-task2-2022-relevance.qrels"
BASE_CONFIG = "row-15"
ALPHAS = (100.0, 300.0, 1000.0, 3000.0, 10000.0)
LAMBDAS = (0.001, 0.01, 0.03, 0.1, 0.3, 1.0)
CANDIDATES = 1000  # the lexical run's hits per topic that features are computed for (all of them)
DENSE_DEPTH = 100  # cross-validated as good as deeper, and the neural features' cost grows with it
LEXICAL_DEPTH = 1000
_LEXICAL = tuple(f for f in TITLE_FEATURES if f not in NEURAL_FEATURES)
#: The features each model weighs, and the file it is written to by default.
FEATURE_SETS: dict[str, tuple[tuple[str, ...], Path]] = {
    "minilm-e5": (TITLE_FEATURES, DEFAULT_MODEL),
    "whole-topic": (FEATURES, WHOLE_TOPIC_MODEL),
    "minilm": ((*_LEXICAL, "dense_title"), MINILM_MODEL),
    "lexical": (_LEXICAL, LEXICAL_MODEL),
}
KINDS = {
    "offset": "the original's BM25 x quality times exp(learned linear correction): pairwise logistic regression "
              "with log(bm25_rel) + log(quality) as a fixed offset",
    "ridge": "ridge regression of the inherited relevance grade on standardised features",
}
SPLITS = 5
#: Feature groups for the ablation in the report (the rest of FEATURES is "text").
LEXICAL_QUALITY = ("log_bm25_rel", "log_rank", "objects_bm25_rel", "comparative_bm25_rel", "log_quality")
OBJECT_FEATURES = TEXT_FEATURES[:6] + ("object_proximity",)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Data:
    """All candidates of all topics as one matrix, with topic and label of each row."""

    candidates: dict[str, Candidates]
    features: tuple[str, ...]  # the names of the matrix's columns
    matrix: np.ndarray
    topic: np.ndarray  # topic number of each row
    grade: np.ndarray  # inherited grade, 0 where the document is not judged
    judged: np.ndarray  # bool: the document is judged for the topic
    rank: np.ndarray  # 0-based rank in the lexical run
    qrels: dict[str, dict[str, int]]  # inherited passage qrels of the sample, for the evaluator


def inherited_qrels(paths: Sequence[Path], passage_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """Passage qrels: each passage gets its document's grade for each topic that judged the document."""
    for path in paths:
        if Path(path).name == FORBIDDEN_QRELS:
            raise KueriError(f"{path}: the 2022 judgments measure the final system; never train on them")
    by_doc: dict[str, dict[str, int]] = {}
    for path in paths:
        for qid, docs in read_qrels(path).items():
            by_doc.setdefault(qid, {}).update(docs)
    qrels: dict[str, dict[str, int]] = {}
    for pid in passage_ids:
        doc = pid.split("___")[0]
        for qid, docs in by_doc.items():
            if doc in docs:
                qrels.setdefault(qid, {})[pid] = docs[doc]
    return qrels


def build_data(corpus: Path, topics_path: Path, qrels_paths: Sequence[Path], workdir: Path, depth: int,
               features: Sequence[str], base: str = BASE_CONFIG) -> Data:
    """The candidates of the first stage ``base`` (a named configuration) with their features and labels."""
    topics = read_topics(topics_path)
    started = time.perf_counter()
    with Pipeline(corpus, topics, RunContext(workdir, progress=False)) as pipeline:
        config = get_config(base)
        run = pipeline.run(config)
        index = pipeline.index(config.analyzer)
        quality = OfflineQualityModel.load()
        times = CandidateTimes()
        encoders = load_encoders({NEURAL_FEATURES[f] for f in features if f in NEURAL_FEATURES}, cache_dir=workdir)
        candidates = collect(run, topics, index, depth, quality.score, times, encoders=encoders, wanted=features)
        passage_ids = list(index.ids)
    log(f"features: {times.summary()} ({time.perf_counter() - started:.1f} s with the lexical run)")
    qrels = inherited_qrels(qrels_paths, passage_ids)
    rows, topic, grade, judged, rank = [], [], [], [], []
    for qid, cand in candidates.items():
        labels = qrels.get(qid, {})
        for position, hit in enumerate(cand.hits):
            topic.append(qid)
            grade.append(max(labels.get(hit.doc, 0), 0))
            judged.append(hit.doc in labels)
            rank.append(position)
        rows.append(cand.features)
    columns = [FEATURES.index(f) for f in features]
    return Data(candidates, tuple(features), np.vstack(rows)[:, columns], np.array(topic),
                np.array(grade, dtype=np.float64), np.array(judged), np.array(rank), qrels)


def standardise(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = matrix.mean(axis=0)
    scale = matrix.std(axis=0)
    scale[scale == 0] = 1.0  # a constant feature: any scale; its coefficient will be 0
    return mean, scale


def fit_ridge(data: Data, rows: np.ndarray, alpha: float, columns: Sequence[int] | None = None
              ) -> SecondStageModel:
    """Ridge of the grade on the standardised features of ``rows`` (closed form); ``columns``: only these
    features (the others weigh 0)."""
    matrix, target = data.matrix[rows], data.grade[rows]
    mean, scale = standardise(matrix)
    cols = list(range(matrix.shape[1])) if columns is None else list(columns)
    x = (matrix[:, cols] - mean[cols]) / scale[cols]
    coef = np.zeros(matrix.shape[1])
    coef[cols] = np.linalg.solve(x.T @ x + alpha * np.eye(len(cols)), x.T @ (target - target.mean()))
    return SecondStageModel(coef, float(target.mean()), mean, scale, depth=1, features=data.features)


def preference_pairs(data: Data, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(better, worse, weight): every pair of one topic's candidates among ``rows`` whose grades differ.

    Each topic weighs the same in all (its pairs share weight 1), so topics with many candidates or
    judgments do not dominate.
    """
    better, worse, weight = [], [], []
    for qid in sorted(set(data.topic[rows].tolist()), key=int):
        members = np.flatnonzero((data.topic == qid) & rows)
        grades = data.grade[members]
        a, b = np.nonzero(grades[:, None] > grades[None, :])
        if len(a):
            better.append(members[a])
            worse.append(members[b])
            weight.append(np.full(len(a), 1.0 / len(a)))
    if not better:
        raise KueriError("no pair of candidates with different grades to learn from")
    w = np.concatenate(weight)
    return np.concatenate(better), np.concatenate(worse), w / w.sum()


def fit_offset(data: Data, rows: np.ndarray, lam: float) -> SecondStageModel:
    """The original's ``BM25 x quality`` times a learned correction: pairwise logistic regression
    (RankNet with a linear scorer) with ``log bm25_rel + log quality`` as a fixed offset.

    P(i above j) = sigmoid(offset_i - offset_j + w . (z_i - z_j)), z the standardised features except
    log_quality (its exponent stays the original's 1); L2 penalty ``lam``; solved by Newton's method (a
    convex problem with ~25 unknowns: exact and deterministic, no solver library needed).
    """
    mean, scale = standardise(data.matrix[rows])
    z = (data.matrix - mean) / scale
    bm25, quality = data.features.index("log_bm25_rel"), data.features.index("log_quality")
    offset = data.matrix[:, bm25] + data.matrix[:, quality]
    learned = [j for j in range(len(data.features)) if j != quality]
    better, worse, weight = preference_pairs(data, rows)
    dz = z[better][:, learned] - z[worse][:, learned]
    doff = offset[better] - offset[worse]
    w = np.zeros(len(learned))
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(doff + dz @ w)))
        gradient = dz.T @ (weight * (p - 1.0)) + 2.0 * lam * w
        hessian = (dz * (weight * p * (1.0 - p))[:, None]).T @ dz + 2.0 * lam * np.eye(len(learned))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-12:
            break
    # As one linear model: log bm25 = scale * z + mean (the same for quality), so the offset's coefficient 1
    # on the raw feature is its scale on the standardised one.
    coef = np.zeros(len(data.features))
    coef[learned] = w
    coef[bm25] += scale[bm25]
    coef[quality] += scale[quality]
    return SecondStageModel(coef, float(mean[bm25] + mean[quality]), mean, scale, depth=1, features=data.features)


def score(model: SecondStageModel, data: Data, rows: np.ndarray | None = None) -> np.ndarray:
    """The model's scores of ``rows`` of the data (all rows when None); the data holds the model's columns."""
    matrix = data.matrix if rows is None else data.matrix[rows]
    full = np.zeros((len(matrix), len(FEATURES)))
    full[:, [FEATURES.index(f) for f in data.features]] = matrix
    return model.score(full)


def reranked_run(data: Data, scores: np.ndarray, topics: Sequence[str], depth: int | None = None) -> Run:
    """The run of ``topics`` with the top ``depth`` of each reranked by ``scores`` (rows of data.matrix)."""
    run: Run = {}
    for qid in topics:
        rows = np.flatnonzero(data.topic == qid)
        hits: list[Hit] = data.candidates[qid].hits
        cut = len(rows) if depth is None else min(depth, len(rows))
        run[qid] = reorder_head(hits, scores[rows[:cut]].tolist())
    return run


def judged_only(run: Run, qrels: dict[str, dict[str, int]]) -> Run:
    """The run with only judged passages (the "condensed" lists: insensitive to unjudged passages)."""
    return {qid: [h for h in hits if h.doc in qrels.get(qid, {})] for qid, hits in run.items()}


def ndcg5(run: Run, qrels: dict[str, dict[str, int]], condensed: bool = False) -> float:
    measured = judged_only(run, qrels) if condensed else run
    measured = {qid: hits for qid, hits in measured.items() if hits}
    return float(evaluate_run(measured, qrels, ["nDCG@5"])["nDCG@5"])


def split_topics(topics: Sequence[str], split: int) -> tuple[list[str], list[str]]:
    """Two folds of topics: split 0 by MD5 parity of the number, the others by a seeded permutation."""
    if split == 0:
        first = [t for t in topics if hashlib.md5(t.encode()).digest()[0] % 2 == 0]
    else:
        order = np.random.RandomState(split).permutation(len(topics))
        first = [topics[i] for i in sorted(order[: len(topics) // 2])]
    return first, [t for t in topics if t not in first]


def held_out_run(data: Data, eval_topics: Sequence[str], fit: Callable[[np.ndarray], SecondStageModel],
                 depth: int | None, split: int) -> Run:
    """Split ``split``'s run of 2-fold CV over topics: each half's candidates scored by a model trained on the other
    half (within ``depth``), reranked."""
    inside = np.ones(len(data.rank), dtype=bool) if depth is None else data.rank < depth
    scores = np.zeros(len(data.rank))
    first, second = split_topics(sorted(data.candidates, key=int), split)
    for train, test in ((first, second), (second, first)):
        model = fit(np.isin(data.topic, train) & inside)
        held = np.isin(data.topic, test)
        scores[held] = score(model, data, held)
    return reranked_run(data, scores, eval_topics, depth)


def cross_validate(data: Data, eval_topics: Sequence[str], fit: Callable[[np.ndarray], SecondStageModel],
                   depth: int | None = None, splits: int = SPLITS) -> dict[str, float]:
    """Held-out nDCG@5 (full and judged-only) of 2-fold CV over topics, repeated ``splits`` times: the mean
    over splits of each split's mean over topics, and the sd over splits. ``fit(rows)`` trains on rows."""
    full, condensed = [], []
    for split in range(splits):
        run = held_out_run(data, eval_topics, fit, depth, split)
        full.append(ndcg5(run, data.qrels))
        condensed.append(ndcg5(run, data.qrels, condensed=True))
    return {"ndcg5": float(np.mean(full)), "ndcg5_sd": float(np.std(full)),
            "ndcg5_condensed": float(np.mean(condensed))}


def baseline(data: Data, eval_topics: Sequence[str], column: str | None) -> dict[str, float]:
    """A fixed ranking (no training): the lexical run (None) or the lexical score x quality (``"quality"``)."""
    scores = -data.rank.astype(np.float64)
    if column == "quality":
        # log(bm25 / max) + log(quality) ranks as bm25 x quality, the original's rerank.
        scores = (data.matrix[:, data.features.index("log_bm25_rel")]
                  + data.matrix[:, data.features.index("log_quality")])
    run = reranked_run(data, scores, eval_topics)
    return {"ndcg5": ndcg5(run, data.qrels), "ndcg5_sd": 0.0, "ndcg5_condensed": ndcg5(run, data.qrels, True)}


def feature_check(data: Data, count: int = 3) -> list[dict[str, object]]:
    """Feature rows of a few fixed candidates, stored with the model: a test recomputes them, so a change of
    the features (or of the object matcher / quality model they use) that the model never saw is noticed."""
    checks = []
    for qid in sorted(data.candidates, key=int)[:count]:
        cand = data.candidates[qid]
        values = cand.features[0, [FEATURES.index(f) for f in data.features]]
        checks.append({"topic": qid, "passage": cand.hits[0].doc, "rank": 1,
                       "values": [round(v, 9) for v in values.tolist()]})
    return checks


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    parser = script_parser(__doc__, whole_doc=True, quiet=False)
    parser.add_argument("--corpus", type=Path, default=SAMPLE / "passages.jsonl.gz")
    parser.add_argument("--topics", type=Path, default=SAMPLE / "topics.xml")
    parser.add_argument("--qrels", type=Path, nargs="+", default=list(EARLIER_QRELS),
                        help="earlier years' document judgments (never the 2022 ones)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="index and embedding cache (default: a temporary folder)")
    parser.add_argument("--depth", type=int, default=None,
                        help="the stage's depth: candidates reranked per topic, and the rows of the final fit "
                             f"(default: {DENSE_DEPTH} with the neural feature, whose cost grows with it; "
                             f"{LEXICAL_DEPTH} without)")
    parser.add_argument("--kind", choices=KINDS, default="offset",
                        help="offset: BM25 x quality x learned correction (default); ridge: free linear model")
    parser.add_argument("--alphas", type=float, nargs="+", default=list(ALPHAS), help="ridge penalties to try")
    parser.add_argument("--lambdas", type=float, nargs="+", default=list(LAMBDAS), help="offset penalties to try")
    parser.add_argument("--depth-curve", default="50,100,200,300",
                        help="also cross-validate these depths (default: 50,100,200,300)")
    parser.add_argument("--features", choices=FEATURE_SETS, default="minilm-e5",
                        help="minilm-e5: every feature (the default model); minilm: MiniLM similarity only; lexical: "
                        "no neural feature (no onnxruntime needed)")
    parser.add_argument("--out", type=Path, default=None,
                        help="model file (default: " + ", ".join(f"{name}: {path.name}" for name, (_, path)
                                                                in FEATURE_SETS.items()) + ")")
    args = parser.parse_args(argv)
    configure_logging()
    features, default_out = FEATURE_SETS[args.features]
    neural = any(f in NEURAL_FEATURES for f in features)
    out = args.out or default_out
    depth = args.depth or (DENSE_DEPTH if neural else LEXICAL_DEPTH)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kueri-second-stage-") as tmp:
        data = build_data(args.corpus, args.topics, args.qrels, args.workdir or Path(tmp), CANDIDATES, features)
    topics = sorted(data.candidates, key=int)
    # Topics whose sample passages include no relevant judged one score 0 whatever the ranking: left out.
    eval_topics = [t for t in topics if max(data.qrels.get(t, {}).values(), default=0) > 0]
    coverage = {
        "topics": len(topics),
        "topics_evaluated": len(eval_topics),
        "candidates": len(data.rank),
        "candidates_judged": int(data.judged.sum()),
        "grades": {str(g): int(((data.grade == g) & data.judged).sum()) for g in (0, 1, 2)},
        "sample_passages_judged": sum(len(v) for v in data.qrels.values()),
    }
    print(f"coverage: {coverage['candidates_judged']} of {coverage['candidates']} candidates (topic, passage) "
          f"have a judged document (grades 0/1/2: {coverage['grades']['0']}/{coverage['grades']['1']}/"
          f"{coverage['grades']['2']}); {len(eval_topics)} of {len(topics)} topics have a relevant one")

    results: dict[str, dict[str, float]] = {
        "row 15 (lexical run)": baseline(data, eval_topics, None),
        "row 15 x offline quality (the original's rerank)": baseline(data, eval_topics, "quality"),
    }
    # Penalties are chosen at the stage's depth (training rows and reranked hits as the stage will use them).
    ridge = {a: cross_validate(data, eval_topics, lambda rows, a=a: fit_ridge(data, rows, a), depth=depth)
             for a in args.alphas}
    offset = {lam: cross_validate(data, eval_topics, lambda rows, lam=lam: fit_offset(data, rows, lam), depth=depth)
              for lam in args.lambdas}
    for a, figures in ridge.items():
        results[f"ridge, alpha {a:g}"] = figures
    for lam, figures in offset.items():
        results[f"offset (BM25 x quality x correction), lambda {lam:g}"] = figures
    # The penalty with the best mean held-out nDCG@5; ties go to the stronger one.
    alpha = max(args.alphas, key=lambda a: (ridge[a]["ndcg5"], a))
    lam = max(args.lambdas, key=lambda v: (offset[v]["ndcg5"], v))
    if args.kind == "ridge":
        fit: Callable[[np.ndarray], SecondStageModel] = lambda rows: fit_ridge(data, rows, alpha)  # noqa: E731
        chosen = f"ridge, alpha {alpha:g}"
        groups = {
            "lexical + quality": [data.features.index(f) for f in LEXICAL_QUALITY],
            "lexical + quality + objects": [data.features.index(f) for f in LEXICAL_QUALITY + OBJECT_FEATURES],
        }
        for name, columns in groups.items():
            results[f"ridge, {name} only, alpha {alpha:g}"] = cross_validate(
                data, eval_topics, lambda rows, columns=columns: fit_ridge(data, rows, alpha, columns), depth=depth)
    else:
        fit = lambda rows: fit_offset(data, rows, lam)  # noqa: E731
        chosen = f"offset, lambda {lam:g}"
    curve = sorted({int(d) for d in args.depth_curve.split(",") if d.strip()} | {depth})
    for d in curve:
        results[f"{chosen}, depth {d}"] = cross_validate(data, eval_topics, fit, depth=d)

    model = fit(data.rank < depth)
    training_run = reranked_run(data, score(model, data), eval_topics, depth)
    training = {"ndcg5": ndcg5(training_run, data.qrels), "ndcg5_condensed": ndcg5(training_run, data.qrels, True)}

    print("\nnDCG@5 on the earlier years' judgments (passages inherit their document's grade), "
          f"{len(eval_topics)} topics; CV = 2-fold over topics x {SPLITS} splits (mean, sd over splits); "
          f"penalties at depth {depth}")
    print(f"{'ranking':62s} {'nDCG@5':>8s} {'sd':>7s} {'judged-only':>12s}")
    for name, figures in results.items():
        print(f"{name:62s} {figures['ndcg5']:8.4f} {figures['ndcg5_sd']:7.4f} {figures['ndcg5_condensed']:12.4f}")
    print(f"{'chosen: ' + chosen + f', depth {depth}, fitted on all topics (training set)':62s} "
          f"{training['ndcg5']:8.4f} {'':7s} {training['ndcg5_condensed']:12.4f}")

    meta = {
        "kind": args.kind,
        "feature_set": args.features,
        "model": KINDS[args.kind],
        "penalty": alpha if args.kind == "ridge" else lam,
        "base_run": f"{BASE_CONFIG}: {get_config(BASE_CONFIG).description}",
        "training_corpus": str(args.corpus.relative_to(ROOT) if args.corpus.is_relative_to(ROOT) else args.corpus),
        "training_qrels": [p.name for p in args.qrels],
        "quality_model": QUALITY_MODEL.name,
        "quality_model_sha256": file_sha256(QUALITY_MODEL),
        "coverage": coverage,
        "cross_validation": {name: {k: round(v, 4) for k, v in figures.items()} for name, figures in results.items()},
        "training_set": {k: round(v, 4) for k, v in training.items()},
        "feature_check": feature_check(data),
    }
    final = SecondStageModel(np.round(model.coef, 10), round(model.intercept, 10), np.round(model.mean, 10),
                             np.round(model.scale, 10), depth=depth, meta=meta, features=data.features)
    final.save(out)
    print("\nweights (standardised features; offset: includes the fixed BM25 x quality part):")
    for name, weight in sorted(final.weights().items(), key=lambda kv: -abs(kv[1])):
        print(f"  {name:36s} {weight:+.4f}")
    print(f"\nwrote {out} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    run_script(main)
