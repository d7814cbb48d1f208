"""The second stage: rerank the top of a lexical run by the learned model.

For each topic the top ``depth`` hits of the run (the model's depth unless given) are scored by
:class:`~kueri.second_stage.model.SecondStageModel` over their features
(:mod:`kueri.second_stage.features`) and sorted by that score; hits below the depth keep their
lexical order after them. Nothing is dropped, so a run keeps its length (at most 1000 hits, as the
lexical run).

A *cascade* spends the encoders on fewer candidates: cheaper models (:class:`Cascade`, e.g. the lexical model,
then MiniLM's) rank the top ``depth`` hits first, and each next model reorders only the top ``keep`` of the
ranking before it, so a model's neural features are computed only for the candidates it reorders; the rest of
each ranking stays below, in its order.

Scores written to a run file have 6 decimals, and evaluators order ties by doc id, not by rank. So the
new scores are the model's scores rounded to 6 decimals and made *strictly* decreasing (a step of
0.000001 where two would tie or the tail meets the head): the file then ranks exactly as the model
says, under any tie rule. Stance labels are kept with their hits.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from kueri.errors import KueriError
from kueri.lucene import LuceneIndex
from kueri.records import Hit, Run, Topic
from kueri.second_stage.candidates import Candidates, CandidateTimes, Encoders, add_neural, collect
from kueri.second_stage.features import NEURAL_COLUMNS
from kueri.second_stage.model import DEFAULT_MODEL, SecondStageModel

log = logging.getLogger(__name__)

_MICRO = 1_000_000  # run files keep 6 decimals


def strictly_decreasing(scores: Sequence[float]) -> list[float]:
    """``scores`` (in the order wanted) rounded to 6 decimals and lowered where needed so each is below the last.

    Works in integer micro-units, so the result prints and reads back exactly, without float surprises.
    """
    out: list[float] = []
    previous: int | None = None
    for score in scores:
        if not np.isfinite(score):
            raise KueriError(f"second stage: non-finite score {score}")
        micro = round(score * _MICRO)
        if previous is not None and micro >= previous:
            micro = previous - 1
        out.append(micro / _MICRO)
        previous = micro
    return out


def reorder_head(hits: Sequence[Hit], scores: Sequence[float]) -> list[Hit]:
    """The first ``len(scores)`` hits sorted by ``scores`` (descending; ties keep the lexical order), then the
    rest of ``hits`` in their order, all with strictly decreasing 6-decimal scores."""
    if len(scores) > len(hits):
        raise KueriError(f"second stage: {len(scores)} scores for {len(hits)} hits")
    head = sorted(range(len(scores)), key=lambda i: -scores[i])  # stable: ties keep the lexical order
    order = [*head, *range(len(scores), len(hits))]
    # The tail keeps its order below the head: its scores only continue the sequence downwards.
    head_scores = [float(scores[i]) for i in head]
    tail_start = head_scores[-1] if head_scores else 0.0
    wanted = head_scores + [tail_start] * (len(hits) - len(scores))
    return [Hit(hits[i].doc, score, hits[i].stance) for i, score in zip(order, strictly_decreasing(wanted),
                                                                       strict=True)]


def cascade_head(hits: Sequence[Hit], order: Sequence[int], scores: Sequence[float],
                 levels: Sequence[int]) -> list[Hit]:
    """The hits at positions ``order`` (the cascade's ranking of the head, best first), then the rest of ``hits`` in
    their order, with strictly decreasing 6-decimal scores.

    ``scores[i]`` and ``levels[i]`` are the score of ``order[i]`` and the number of the model that gave it (deeper
    models rank above): each model's scores are moved down as a block where they would not stay below the model's
    above, so the file keeps each model's differences and ranks exactly as the cascade says.
    """
    wanted: list[float] = []
    shift = 0.0
    for i, (score, level) in enumerate(zip(scores, levels, strict=True)):
        if i and level != levels[i - 1]:  # a block's first score is its best: the block is in its model's order
            shift = min(0.0, wanted[-1] - 1.0 / _MICRO - float(score))
        wanted.append(float(score) + shift)
    chosen = set(order)
    rest = [i for i in range(len(hits)) if i not in chosen]
    wanted += [wanted[-1] if wanted else 0.0] * len(rest)
    positions = [*order, *rest]
    return [Hit(hits[i].doc, score, hits[i].stance) for i, score in zip(positions, strictly_decreasing(wanted),
                                                                          strict=True)]


def _warn_if_other_quality_model(model: SecondStageModel, quality_path: Path) -> None:
    """The quality score is one of the features: a quality model other than the one the second stage was
    trained with shifts it. Still usable (the run stays valid), so a warning, not an error."""
    trained = model.meta.get("quality_model_sha256")
    if trained and hashlib.sha256(quality_path.read_bytes()).hexdigest() != trained:
        log.warning("second stage: quality model %s is not the one the second-stage model was trained with; "
                    "retrain it: python scripts/train_second_stage.py", quality_path)


def load_encoders(needed: Iterable[str], given: Encoders | None = None, cache_dir: Path | None = None,
                  progress: bool = False) -> Encoders:
    """The encoders named in ``needed`` (names of :mod:`kueri.encoders`' registry): those ``given``, the others
    loaded (their passage embeddings read from and added to their stores in the work folder ``cache_dir`` when
    given; ``progress``: a bar while they embed). Encoders not needed are left out, so their features are not
    computed."""
    from kueri import encoders as registry

    needed = set(needed)
    unknown = needed - set(registry.names())
    if unknown:
        raise KueriError(f"second stage: unknown encoder(s) {sorted(unknown)}")
    given = given or {}
    return {name: given[name] if given.get(name) is not None else registry.open_encoder(name, cache_dir, progress)
            for name in NEURAL_COLUMNS if name in needed}


def second_stage(
    run: Run,
    topics: Iterable[Topic],
    index: LuceneIndex,
    *,
    depth: int | None = None,
    model: SecondStageModel | str | Path | None = None,
    quality: str | Path | None = None,
    times: CandidateTimes | None = None,
    progress: bool = False,
    encoders: Encoders | None = None,
    cascade: Sequence[tuple[SecondStageModel | str | Path, int]] = (),
) -> Run:
    """``run`` with each topic's top ``depth`` hits reranked by the second-stage model.

    ``index``: the open index the run was searched on (texts and the extra queries come from it; its
    analyzer must be the run's). ``depth``: None for the model's own (the depth it was trained and
    measured at). ``model``: an open model, a model file, or None for the shipped one. ``quality``: the
    offline quality model file (None: the shipped one, :data:`kueri.quality.offline.DEFAULT_MODEL`).
    ``times``, when given, is filled with the time spent per part. ``encoders``: the neural encoders the
    model needs (None, or one left None: :func:`load_encoders` loads it). ``cascade``: cheaper models, each with
    the number of its top candidates per topic that the next one (the last: ``model``) reorders; the first ranks
    the top ``depth``. Topic order is kept.
    """
    from kueri.quality.offline import DEFAULT_MODEL as QUALITY_MODEL
    from kueri.quality.offline import OfflineQualityModel

    started = time.perf_counter()
    if not isinstance(model, SecondStageModel):
        model = SecondStageModel.load(model if model is not None else DEFAULT_MODEL)
    depth = model.depth if depth is None else depth
    if depth < 1:
        raise KueriError(f"second stage: depth must be at least 1, not {depth}")
    quality_path = Path(quality) if quality is not None else QUALITY_MODEL
    quality_model = OfflineQualityModel.load(quality_path)
    _warn_if_other_quality_model(model, quality_path)
    levels = [*(SecondStageModel.load(m) if not isinstance(m, SecondStageModel) else m for m, _ in cascade), model]
    keeps = [keep for _, keep in cascade]
    if any(keep < 1 for keep in keeps):
        raise KueriError(f"second stage: a cascade keeps at least 1 candidate per topic, not {min(keeps)}")
    encoders = load_encoders(frozenset().union(*(level.encoders for level in levels)), encoders)
    times = times if times is not None else CandidateTimes()
    if not cascade:
        candidates = collect(run, topics, index, depth, quality_model.score, times, progress=progress,
                             encoders=encoders, wanted=model.features)
        heads = {qid: reorder_head(run[qid], model.score(c.features).tolist()) for qid, c in candidates.items()}
    else:
        topics = list(topics)
        candidates = collect(run, topics, index, depth, quality_model.score, times, progress=progress,
                             encoders={}, wanted=model.features)
        heads = _cascade(run, candidates, topics, index, levels, keeps, encoders, times)
    reranked: Run = {qid: heads.get(qid, list(hits)) for qid, hits in run.items()}
    times.seconds["total"] = time.perf_counter() - started
    log.info("second stage: %s; %.1f s in all", times.summary(), times.seconds["total"])
    return reranked


def _cascade(run: Run, candidates: dict[str, Candidates], topics: list[Topic], index: LuceneIndex,
             levels: Sequence[SecondStageModel], keeps: Sequence[int], encoders: Encoders,
             times: CandidateTimes) -> dict[str, list[Hit]]:
    """Each topic's head as the cascade ranks it (see :func:`cascade_head`): ``levels[0]`` ranks every candidate,
    ``levels[n]`` the top ``keeps[n - 1]`` of the ranking before; an encoder embeds only the candidates of the first
    level that needs it."""
    ranking = {qid: list(range(len(c.hits))) for qid, c in candidates.items()}
    score_of = {qid: np.zeros(len(c.hits)) for qid, c in candidates.items()}
    level_of = {qid: np.zeros(len(c.hits), dtype=np.int64) for qid, c in candidates.items()}
    embedded: set[str] = set()
    for number, level in enumerate(levels):
        reached = {qid: rows[: keeps[number - 1]] if number else rows for qid, rows in ranking.items()}
        new = sorted(level.encoders - embedded)
        if new:
            only = {name: encoders[name] for name in new if name in encoders}
            add_neural(candidates, reached, run, topics, index, only, times, wanted=level.features)
            embedded.update(new)
        for qid, rows in reached.items():
            scores = level.score(candidates[qid].features[rows]) if rows else np.zeros(0)
            ordered = sorted(range(len(rows)), key=lambda i: -scores[i])  # stable: ties keep the order before
            ranking[qid] = [rows[i] for i in ordered] + ranking[qid][len(rows):]
            score_of[qid][rows] = scores
            level_of[qid][rows] = number
    return {qid: cascade_head(run[qid], order, score_of[qid][order].tolist(), level_of[qid][order].tolist())
            for qid, order in ranking.items()}
