"""The second stage: rerank the top of a lexical run by the learned model.

For each topic the top ``depth`` hits of the run (the model's depth unless given) are scored by
:class:`~kueri.second_stage.model.SecondStageModel` over their features
(:mod:`kueri.second_stage.features`) and sorted by that score; hits below the depth keep their
lexical order after them. Nothing is dropped, so a run keeps its length (at most 1000 hits, as the
lexical run).

Scores written to a run file have 6 decimals, and evaluators order ties by doc id, not by rank. So the
new scores are the model's scores rounded to 6 decimals and made *strictly* decreasing (a step of
0.000001 where two would tie or the tail meets the head): the file then ranks exactly as the model
says, under any tie rule. Stance labels are kept with their hits.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from kueri.errors import KueriError
from kueri.lucene import LuceneIndex
from kueri.records import Hit, Run, Topic
from kueri.second_stage.candidates import CandidateTimes, Encoders, TextEncoder, collect
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
    given = given or Encoders()
    loaded: dict[str, TextEncoder | None] = {}
    for field in dataclasses.fields(Encoders):
        encoder = getattr(given, field.name) if field.name in needed else None
        if field.name in needed and encoder is None:
            entry = registry.get(field.name)
            if cache_dir is not None:
                encoder = entry.stored(cache_dir, progress)
            else:
                encoder = entry.load()
                encoder.progress = progress  # type: ignore[attr-defined]
        loaded[field.name] = encoder
    return Encoders(**loaded)


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
) -> Run:
    """``run`` with each topic's top ``depth`` hits reranked by the second-stage model.

    ``index``: the open index the run was searched on (texts and the extra queries come from it; its
    analyzer must be the run's). ``depth``: None for the model's own (the depth it was trained and
    measured at). ``model``: an open model, a model file, or None for the shipped one. ``quality``: the
    offline quality model file (None: the shipped one, :data:`kueri.quality.offline.DEFAULT_MODEL`).
    ``times``, when given, is filled with the time spent per part. ``encoders``: the neural encoders the
    model needs (None, or one left None: :func:`load_encoders` loads it). Topic order is kept.
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
    encoders = load_encoders(model.encoders, encoders)
    times = times if times is not None else CandidateTimes()
    candidates = collect(run, topics, index, depth, quality_model.score, times, progress=progress,
                         encoders=encoders, wanted=model.features)
    reranked: Run = {}
    for qid, hits in run.items():
        if qid in candidates:
            reranked[qid] = reorder_head(hits, model.score(candidates[qid].features).tolist())
        else:
            reranked[qid] = list(hits)
    times.seconds["total"] = time.perf_counter() - started
    log.info("second stage: %s; %.1f s in all", times.summary(), times.seconds["total"])
    return reranked
