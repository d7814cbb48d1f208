"""Gather the second stage's candidates: texts, quality and extra BM25 scores for a run's top hits.

Everything comes from the open index (stored ``contents``, more queries), so the second stage needs
no corpus file: the same code serves the 2,607-passage sample and the 868,655-passage corpus, and
its cost grows with the number of candidates (topics x depth), not with the corpus.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kueri.errors import KueriError
from kueri.records import Hit, Run, Topic
from kueri.second_stage.features import QUERY_CUES, relative, topic_features

if TYPE_CHECKING:  # the index and search modules need the JVM: import them only for types
    from kueri.index import LuceneIndex

#: Quality of passage texts, one number each (the offline model's ``score``).
QualityScorer = Callable[[str], float]
#: Unit-length embeddings of texts, one row each (:meth:`kueri.second_stage.dense.DenseEncoder.encode`).
Encoder = Callable[[list[str]], np.ndarray]


@dataclass
class Candidates:
    """One topic's candidates: the lexical run's top hits and their feature rows."""

    topic: str
    hits: list[Hit]
    features: np.ndarray  # len(hits) x len(FEATURES)


@dataclass
class CandidateTimes:
    """Seconds spent per part (the report of :func:`collect`), to see what the second stage costs."""

    texts: float = 0.0
    quality: float = 0.0
    dense: float = 0.0
    queries: float = 0.0
    features: float = 0.0
    passages: int = 0  # distinct passages whose text and quality were computed
    pairs: int = 0  # (topic, passage) feature rows
    extra: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        return (f"{self.pairs} candidates ({self.passages} passages): texts {self.texts:.1f} s, quality "
                f"{self.quality:.1f} s, neural {self.dense:.1f} s, queries {self.queries:.1f} s, features "
                f"{self.features:.1f} s")


def objects_query_text(topic: Topic) -> str:
    """The objects-only query: the two objects' words (the analyzer drops stopwords, as for the title)."""
    return " ".join(topic.objects)


def comparative_query_text(topic: Topic) -> str:
    """The comparative query: the objects' words and comparative cue words (:data:`QUERY_CUES`)."""
    return " ".join((*topic.objects, *QUERY_CUES))


class FilteredScorer:
    """BM25 scores of a query for given passages only: the query AND a filter on their ids.

    Restricting to the candidates gives their exact scores (a plain top-k search would give 0 to a
    candidate ranked below k on the full corpus) at the cost of one search per topic.
    """

    def __init__(self, index: LuceneIndex, similarity: Any = None) -> None:
        from kueri.jvm import lucene
        from kueri.search import DEFAULT_FIELDS, QueryBuilder, Searcher

        L = lucene()
        self.index = index
        self.searcher = Searcher(index, similarity)
        self.builder = QueryBuilder(index.analyzer(), DEFAULT_FIELDS)
        self._bytes_ref = L.autoclass("org.apache.lucene.util.BytesRef")
        self._term_in_set = L.autoclass("org.apache.lucene.search.TermInSetQuery")
        self._array_list = L.autoclass("java.util.ArrayList")

    def scores(self, text: str, pids: Sequence[str]) -> list[float]:
        """The BM25 score of ``text`` (parsed like a title) for each of ``pids`` (0 where it does not match)."""
        from kueri.index import ID_FIELD
        from kueri.jvm import lucene

        L = lucene()
        if not pids:
            return []
        query = self.builder.parse(text)
        if query.toString() == "":  # only stopwords: nothing to score
            return [0.0] * len(pids)
        terms = self._array_list()
        for pid in pids:
            terms.add(self._bytes_ref(pid, signature="(Ljava/lang/CharSequence;)V"))
        builder = L.BooleanQueryBuilder()
        builder.add(query, L.Occur.MUST)
        builder.add(self._term_in_set(ID_FIELD, terms), L.Occur.FILTER)
        found = {hit.doc: hit.score for hit in self.searcher.search_query(builder.build(), len(pids))}
        return [found.get(pid, 0.0) for pid in pids]


def _topic_key(number: str) -> tuple[int, int, str]:
    return (0, int(number), "") if number.isdigit() else (1, 0, number)


def collect(
    run: Run,
    topics: Iterable[Topic],
    index: LuceneIndex,
    depth: int,
    quality: QualityScorer,
    times: CandidateTimes | None = None,
    progress: bool = False,
    encoder: Encoder | None = None,
) -> dict[str, Candidates]:
    """The top ``depth`` hits of every topic of ``run`` with their feature rows.

    Texts, quality and embeddings are computed once per distinct passage (a passage retrieved for
    several topics is read and scored once). Every topic of the run must be among ``topics``.
    ``encoder``: for the neural feature (None: its column is 0).
    """
    if depth < 1:
        raise KueriError(f"second stage: depth must be at least 1, not {depth}")
    by_number = {t.number: t for t in topics}
    missing = [qid for qid in run if qid not in by_number]
    if missing:
        raise KueriError(f"second stage: topic {missing[0]} of the run is not among the topics (its title and "
                         "objects are needed)")
    times = times if times is not None else CandidateTimes()
    heads = {qid: hits[:depth] for qid, hits in run.items()}
    pids = sorted({hit.doc for hits in heads.values() for hit in hits})

    start = time.perf_counter()
    text_of = dict(zip(pids, (t or "" for t in index.contents_of(pids, "second stage")), strict=True))
    times.texts += time.perf_counter() - start

    start = time.perf_counter()
    quality_of = {pid: quality(text_of[pid]) for pid in pids}
    times.quality += time.perf_counter() - start

    embedding_of: dict[str, np.ndarray] = {}
    title_embedding: dict[str, np.ndarray] = {}
    if encoder is not None:
        start = time.perf_counter()
        embedding_of = dict(zip(pids, encoder([text_of[pid] for pid in pids]), strict=True))
        numbers = sorted(heads, key=_topic_key)
        title_embedding = dict(zip(numbers, encoder([by_number[q].title for q in numbers]), strict=True))
        times.dense += time.perf_counter() - start

    scorer = FilteredScorer(index)
    candidates: dict[str, Candidates] = {}
    for qid in sorted(heads, key=_topic_key):
        hits, topic = heads[qid], by_number[qid]
        ids = [hit.doc for hit in hits]
        start = time.perf_counter()
        # Scored over the whole run (one filtered search each): relative to the run's best, the features are
        # the same at any depth, as the model was trained (on all of the sample's hits).
        every = [hit.doc for hit in run[qid]]
        objects_rel = relative(scorer.scores(objects_query_text(topic), every))[: len(ids)]
        comparative_rel = relative(scorer.scores(comparative_query_text(topic), every))[: len(ids)]
        times.queries += time.perf_counter() - start
        start = time.perf_counter()
        dense = [float(title_embedding[qid] @ embedding_of[pid]) for pid in ids] if encoder is not None else None
        matrix = topic_features(topic, hits, [text_of[pid] for pid in ids], [quality_of[pid] for pid in ids],
                                objects_rel, comparative_rel, dense)
        times.features += time.perf_counter() - start
        candidates[qid] = Candidates(qid, list(hits), matrix)
        if progress:
            print(f"second stage: topic {qid}: {len(hits)} candidates", file=sys.stderr, flush=True)
    times.passages += len(pids)
    times.pairs += sum(len(h) for h in heads.values())
    return candidates
