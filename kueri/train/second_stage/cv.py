"""The second stage's cross-validation: 2-fold over topics (:func:`kueri.train.folds.split_topics`), repeated over
:data:`SPLITS` splits, held-out nDCG@5 on the inherited judgments; and the fixed baselines beside it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from kueri.evaluate import evaluate_run
from kueri.records import Hit, Run
from kueri.second_stage.model import SecondStageModel
from kueri.second_stage.ranking import reorder_head
from kueri.train.folds import split_topics
from kueri.train.second_stage.data import Data
from kueri.train.second_stage.fit import LAMBDAS, fit_offset, score

SPLITS = 5


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


def offset_penalties(data: Data, eval_topics: Sequence[str], depth: int | None,
                     lambdas: Sequence[float] = LAMBDAS) -> tuple[float, dict[float, dict[str, float]]]:
    """The offset model cross-validated at each penalty, and the chosen one: the best mean held-out nDCG@5, ties
    to the stronger penalty."""
    figures = {lam: cross_validate(data, eval_topics, lambda rows, lam=lam: fit_offset(data, rows, lam), depth=depth)
               for lam in lambdas}
    return max(lambdas, key=lambda v: (figures[v]["ndcg5"], v)), figures


def baseline(data: Data, eval_topics: Sequence[str], column: str | None) -> dict[str, float]:
    """A fixed ranking (no training): the lexical run (None) or the lexical score x quality (``"quality"``)."""
    scores = -data.rank.astype(np.float64)
    if column == "quality":
        # log(bm25 / max) + log(quality) ranks as bm25 x quality, the original's rerank.
        scores = (data.matrix[:, data.features.index("log_bm25_rel")]
                  + data.matrix[:, data.features.index("log_quality")])
    run = reranked_run(data, scores, eval_topics)
    return {"ndcg5": ndcg5(run, data.qrels), "ndcg5_sd": 0.0, "ndcg5_condensed": ndcg5(run, data.qrels, True)}
