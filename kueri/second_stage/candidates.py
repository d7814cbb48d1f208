"""Gather the second stage's candidates: texts, quality and extra BM25 scores for a run's top hits.

Everything comes from the open index (stored ``contents``, more queries), so the second stage needs
no corpus file: the same code serves the 2,607-passage sample and the 868,655-passage corpus, and
its cost grows with the number of candidates (topics x depth), not with the corpus.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from kueri.arithmetic import row_dots, unit
from kueri.encoders import TextEncoder
from kueri.errors import KueriError
from kueri.lucene import LuceneIndex, PassageScorer
from kueri.progress import progress as with_progress
from kueri.records import Hit, Run, Topic, topic_key
from kueri.second_stage.features import (
    FEATURES,
    NEURAL_COLUMNS,
    NEURAL_FEATURES,
    PRF_DEPTH,
    QUERY_CUES,
    TITLE_FEATURES,
    TOPIC_FIELDS,
    relative,
    topic_features,
)

#: Quality of passage texts, one number each (the offline model's ``score``).
QualityScorer = Callable[[str], float]


#: The encoders of the neural features (:data:`~kueri.second_stage.features.NEURAL_FEATURES`) by their name in
#: :mod:`kueri.encoders`' registry; a feature whose encoder is missing is not computed (its column is 0).
Encoders = dict[str, TextEncoder]


@dataclass
class Candidates:
    """One topic's candidates: the lexical run's top hits, their feature rows and texts."""

    topic: str
    hits: list[Hit]
    features: np.ndarray  # len(hits) x len(FEATURES)
    texts: list[str]  # the passages' contents, aligned with hits


@dataclass
class CandidateTimes:
    """Seconds spent per part (the report of :func:`collect`), to see what the second stage costs."""

    seconds: dict[str, float] = field(default_factory=dict)  # part or encoder name -> seconds
    passages: int = 0  # distinct passages whose text and quality were computed
    embedded: dict[str, int] = field(default_factory=dict)  # encoder name -> distinct passages it was given
    pairs: int = 0  # (topic, passage) feature rows

    @contextmanager
    def timing(self, part: str) -> Iterator[None]:
        """Adds the time spent in the ``with`` block to ``part``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[part] = self.seconds.get(part, 0.0) + time.perf_counter() - start

    def of(self, part: str) -> float:
        return self.seconds.get(part, 0.0)

    def summary(self) -> str:
        from kueri.encoders import names

        encoders = ", ".join(f"{name} {self.of(name):.1f} s for {self.embedded.get(name, 0)} passages"
                             for name in names() if name in self.seconds)
        return (f"{self.pairs} candidates ({self.passages} passages): texts {self.of('texts'):.1f} s, quality "
                f"{self.of('quality'):.1f} s, neural {self.of('neural'):.1f} s{f' ({encoders})' if encoders else ''}, "
                f"queries {self.of('queries'):.1f} s, features {self.of('features'):.1f} s")


def objects_query_text(topic: Topic) -> str:
    """The objects-only query: the two objects' words (the analyzer drops stopwords, as for the title)."""
    return " ".join(topic.objects)


def comparative_query_text(topic: Topic) -> str:
    """The comparative query: the objects' words and comparative cue words (:data:`QUERY_CUES`)."""
    return " ".join((*topic.objects, *QUERY_CUES))


def collect(
    run: Run,
    topics: Iterable[Topic],
    index: LuceneIndex,
    depth: int,
    quality: QualityScorer,
    times: CandidateTimes | None = None,
    progress: bool = False,
    encoders: Encoders | None = None,
    wanted: Collection[str] | None = None,
) -> dict[str, Candidates]:
    """The top ``depth`` hits of every topic of ``run`` with their feature rows.

    Texts, quality and embeddings are computed once per distinct passage (a passage retrieved for
    several topics is read and scored once). Every topic of the run must be among ``topics``.
    ``encoders``: for the neural features (None, or an encoder left None: those columns are 0).
    ``wanted``: the features a model weighs (None: all); the whole-topic ones (description, narrative)
    are computed only when wanted, the others always.
    """
    if depth < 1:
        raise KueriError(f"second stage: depth must be at least 1, not {depth}")
    by_number = {t.number: t for t in topics}
    missing = [qid for qid in run if qid not in by_number]
    if missing:
        raise KueriError(f"second stage: topic {missing[0]} of the run is not among the topics (its title and "
                         "objects are needed)")
    times = times if times is not None else CandidateTimes()
    encoders = encoders or {}
    heads = {qid: hits[:depth] for qid, hits in run.items()}
    pids = sorted({hit.doc for hits in heads.values() for hit in hits})
    numbers = sorted(heads, key=topic_key)
    whole_topic = {f for f in (wanted if wanted is not None else FEATURES) if f not in TITLE_FEATURES}

    with times.timing("texts"):
        text_of = dict(zip(pids, (t or "" for t in index.contents_of(pids, "second stage")), strict=True))
    with times.timing("quality"):
        quality_of = {pid: quality(text_of[pid]) for pid in pids}

    scorer = PassageScorer(index)
    candidates: dict[str, Candidates] = {}
    for qid in with_progress(numbers, "second stage", "topics", enabled=progress):
        hits, topic = heads[qid], by_number[qid]
        ids = [hit.doc for hit in hits]
        with times.timing("queries"):
            # Scored over the whole run (one filtered search each): relative to the run's best, the features are
            # the same at any depth, as the model was trained (on all of the sample's hits).
            every = [hit.doc for hit in run[qid]]
            objects_rel = relative(scorer.scores(objects_query_text(topic), every))[: len(ids)]
            comparative_rel = relative(scorer.scores(comparative_query_text(topic), every))[: len(ids)]
            fields_rel = {f"{key}_bm25_rel": relative(scorer.scores(getattr(topic, attribute), every))[: len(ids)]
                          for key, attribute in TOPIC_FIELDS.items() if f"{key}_bm25_rel" in whole_topic}
        with times.timing("features"):
            texts = [text_of[pid] for pid in ids]
            matrix = topic_features(topic, hits, texts, [quality_of[pid] for pid in ids], objects_rel,
                                    comparative_rel, fields_rel=fields_rel)
        candidates[qid] = Candidates(qid, list(hits), matrix, texts)
    add_neural(candidates, {qid: range(len(c.hits)) for qid, c in candidates.items()}, run, by_number.values(), index,
               encoders, times, wanted)
    times.passages += len(pids)
    times.pairs += sum(len(h) for h in heads.values())
    return candidates


def add_neural(
    candidates: Mapping[str, Candidates],
    rows: Mapping[str, Sequence[int]],
    run: Run,
    topics: Iterable[Topic],
    index: LuceneIndex,
    encoders: Encoders,
    times: CandidateTimes | None = None,
    wanted: Collection[str] | None = None,
) -> None:
    """Fills in, in place, the neural columns of ``encoders`` for some of the candidates: ``rows[topic]``, positions
    in that topic's :attr:`Candidates.hits` (a cascade embeds only what a cheaper model ranks on top).

    :func:`collect` fills them in so for every candidate; a passage's cosine does not depend on the others, and the
    feedback passages are the top of ``run``, the lexical run, whichever rows are given. Texts come from the
    candidates; only feedback passages below the candidates' depth are read from ``index``.
    """
    if not any(encoders.get(name) is not None for name in NEURAL_COLUMNS):
        return
    times = times if times is not None else CandidateTimes()
    by_number = {t.number: t for t in topics}
    numbers = sorted(rows, key=topic_key)
    heads = {qid: [candidates[qid].hits[i] for i in rows[qid]] for qid in numbers}
    pids = sorted({hit.doc for hits in heads.values() for hit in hits})
    # The feedback passages are embedded too when the stage reranks fewer than them.
    feedback = {qid: [hit.doc for hit in run[qid][:PRF_DEPTH]] for qid in numbers}
    text_of = {hit.doc: text for qid in numbers for hit, text in zip(candidates[qid].hits, candidates[qid].texts,
                                                                       strict=True)}
    feeds_back = any(encoders.get(name) is not None and _reads_feedback(name) for name in NEURAL_COLUMNS)
    lacking = sorted(set().union(*feedback.values()) - set(text_of)) if feeds_back else []
    if lacking:
        with times.timing("texts"):
            text_of.update(zip(lacking, (t or "" for t in index.contents_of(lacking, "second stage")), strict=True))
    with times.timing("neural"):
        whole_topic = {f for f in (wanted if wanted is not None else FEATURES) if f not in TITLE_FEATURES}
        neural = _neural_columns(encoders, heads, pids, feedback, [by_number[q] for q in numbers], text_of, times,
                                 whole_topic)
    for qid in numbers:
        positions = list(rows[qid])
        for name, column in neural[qid].items():
            candidates[qid].features[positions, FEATURES.index(name)] = column


def _neural_columns(encoders: Encoders, heads: dict[str, list[Hit]], pids: list[str], feedback: dict[str, list[str]],
                    topics: Sequence[Topic], text_of: dict[str, str], times: CandidateTimes | None = None,
                    whole_topic: Collection[str] = (),
                    ) -> dict[str, dict[str, list[float]]]:
    """``{topic: {feature: column}}`` of the neural features whose encoder is given (each passage embedded once).

    ``pids``: the distinct passages of ``heads``; ``text_of`` also holds the ``feedback`` passages' texts.
    ``times`` gets each encoder's seconds."""
    columns: dict[str, dict[str, list[float]]] = {t.number: {} for t in topics}
    times = times if times is not None else CandidateTimes()

    def embed(encoder: TextEncoder, name: str, pids: list[str]) -> dict[str, np.ndarray]:
        times.embedded[name] = times.embedded.get(name, 0) + len(pids)
        return dict(zip(pids, encoder.passages([text_of[pid] for pid in pids]), strict=True))

    def head(embedding_of: dict[str, np.ndarray], qid: str, dimension: int) -> np.ndarray:
        ids = [hit.doc for hit in heads[qid]]
        return np.stack([embedding_of[pid] for pid in ids]) if ids else np.zeros((0, dimension), dtype=np.float32)

    for name, prefix in NEURAL_COLUMNS.items():
        encoder = encoders.get(name)
        if encoder is None:
            continue
        prf = _reads_feedback(name)
        with times.timing(name):
            embedding_of = embed(encoder, name, sorted(set(pids).union(*feedback.values())) if prf else pids)
            for topic, title in zip(topics, encoder.queries([t.title for t in topics]), strict=True):
                passages = head(embedding_of, topic.number, encoder.dimension)
                columns[topic.number][f"{prefix}_title"] = row_dots(passages, title).tolist()
                if prf:
                    top = np.stack([embedding_of[pid] for pid in feedback[topic.number]])
                    columns[topic.number][f"{prefix}_prf"] = row_dots(passages, unit(title + top.mean(axis=0))).tolist()
            _field_columns(encoder, prefix, topics, whole_topic, columns,
                           functools.partial(head, embedding_of, dimension=encoder.dimension))
    return columns


def _reads_feedback(name: str) -> bool:
    """Whether the encoder ``name`` has a pseudo-relevance feedback column (it embeds the feedback passages too)."""
    return f"{NEURAL_COLUMNS[name]}_prf" in NEURAL_FEATURES


def _field_columns(encoder: TextEncoder, prefix: str, topics: Sequence[Topic], wanted: Collection[str],
                   columns: dict[str, dict[str, list[float]]], passages_of: Callable[[str], np.ndarray]) -> None:
    """The cosine of each topic's description / narrative (embedded as queries) with its passages, where wanted.
    A topic without that field gets 0s."""
    for key, attribute in TOPIC_FIELDS.items():
        name = f"{prefix}_{key}"
        if name not in wanted:
            continue
        texts = [getattr(t, attribute) for t in topics]
        present = [i for i, text in enumerate(texts) if text.strip()]
        embedded = dict(zip(present, encoder.queries([texts[i] for i in present]), strict=True)) if present else {}
        for i, topic in enumerate(topics):
            passages = passages_of(topic.number)
            columns[topic.number][name] = (row_dots(passages, embedded[i]).tolist() if i in embedded
                                           else [0.0] * len(passages))
