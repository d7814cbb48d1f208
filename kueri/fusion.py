"""fusion: reciprocal rank fusion (RRF) of runs, as the original's ``rrf`` task (Table 1 row 23).

score(topic, doc) = sum over every input line of 1 / (k + rank), with k = 30 and the *rank column*
(not the position, not the score); no depth cut on the inputs, top ``depth`` of the result.
Exact ties keep first-seen order by default (no JVM). The original sorted a Java ``HashMap``'s
entries with a stable sort: ``tie_order="java"`` reproduces that order through the JVM, for the
configurations that must match the original (Table 1 row 23, ``kueri fuse``).
"""

from __future__ import annotations

from collections.abc import Sequence

from kueri.errors import KueriError
from kueri.records import Hit, Run, topic_key

RankedRun = dict[str, list[tuple[int, Hit]]]  # topic -> (rank column, hit), as runfile.read_run_ranked

DEFAULT_K = 30
TIE_ORDERS = ("java", "first-seen")


def ranked(run: Run) -> RankedRun:
    """An in-memory run with its ranks (1..n, as the run writer numbers them)."""
    return {qid: list(enumerate(hits, start=1)) for qid, hits in run.items()}


def reciprocal_rank_fusion(
    runs: Sequence[RankedRun], k: float = DEFAULT_K, depth: int = 1000, tie_order: str = "first-seen"
) -> Run:
    """Fuse ``runs`` (in the given order: it decides first-seen order and float sums)."""
    if tie_order not in TIE_ORDERS:
        raise KueriError(f"unknown tie order {tie_order!r}: use {', '.join(TIE_ORDERS)}")
    if not runs:
        raise KueriError("nothing to fuse: no runs given")
    fused: Run = {}
    for topic in sorted({t for run in runs for t in run}, key=topic_key):
        scores: dict[str, float] = {}
        for run in runs:
            for rank, hit in run.get(topic, ()):
                scores[hit.doc] = scores.get(hit.doc, 0.0) + 1.0 / (k + rank)
        docs = list(scores)
        if tie_order == "java":
            from kueri.lucene import java_hashmap_order  # starts the JVM: only when asked

            docs = java_hashmap_order(docs)
        docs.sort(key=lambda doc: -scores[doc])  # stable: ties keep the map's order
        fused[topic] = [Hit(doc, scores[doc]) for doc in docs[:depth]]
    return fused


def linear_fusion(runs: Sequence[Run], weights: Sequence[float], depth: int = 1000) -> Run:
    """A weighted sum of each run's min-max normalised scores per topic (a passage a run lacks gets 0 from it).

    Each run's scores of a topic are mapped to [0, 1] by its own minimum and maximum (a run whose scores are all
    equal gives 1 to each): BM25 and cosine scores live on different scales. Exact ties keep first-seen order
    (the runs in the given order, each in rank order); top ``depth`` of the result.
    """
    if len(runs) != len(weights) or not runs:
        raise KueriError(f"linear fusion needs one weight per run: {len(runs)} runs, {len(weights)} weights")
    fused: Run = {}
    for topic in sorted({t for run in runs for t in run}, key=topic_key):
        scores: dict[str, float] = {}
        for run, weight in zip(runs, weights, strict=True):
            hits = run.get(topic, [])
            if not hits:
                continue
            low, high = min(h.score for h in hits), max(h.score for h in hits)
            for hit in hits:
                normalised = (hit.score - low) / (high - low) if high > low else 1.0
                scores[hit.doc] = scores.get(hit.doc, 0.0) + weight * normalised
        docs = sorted(scores, key=lambda doc: -scores[doc])  # stable: ties keep first-seen order
        fused[topic] = [Hit(doc, scores[doc]) for doc in docs[:depth]]
    return fused
