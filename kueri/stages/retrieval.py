"""The first stage of every run: the title search, the graded relevance feedback run, or the fusion of
other configurations' runs (in that order of precedence: ``fuse``, else ``feedback``, else search)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kueri.fusion import ranked, reciprocal_rank_fusion
from kueri.lucene import AnalyzerConfig, FeedbackConfig, LuceneIndex, Searcher, Similarity, feedback_run
from kueri.records import Run, Topic
from kueri.stages.base import Context, StageDefaults, StageKind

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Search(StageDefaults):
    """Title queries (with the objects filter, when on) over the index of ``analyzer``."""

    analyzer: AnalyzerConfig
    similarity: Similarity
    fields: tuple[tuple[str, float], ...]
    filter_objects: str
    hits: int
    config_name: str = ""
    name = "search"

    @property
    def needs_objects(self) -> bool:
        return self.filter_objects != "off"

    def summary(self) -> str:
        parts = [self.analyzer.summary(), self.similarity.summary(),
                 "fields " + " ".join(f"{name}={weight:g}" for name, weight in self.fields)]
        if self.filter_objects != "off":
            parts.append(f"objects filter ({self.filter_objects})")
        return "; ".join([*parts, f"{self.hits} hits"])

    def search(self, index: LuceneIndex, topics: Iterable[Topic]) -> Run:
        if index.analyzer_config != self.analyzer:
            log.warning("index %s was built with %s, configuration %s asks for %s; searching with the index's",
                        index.path, index.analyzer_config, self.config_name, self.analyzer)
        searcher = Searcher(index, self.similarity)
        return searcher.search_topics(topics, self.hits, self.fields, self.filter_objects)

    def apply(self, run: Run, context: Context) -> Run:
        return self.search(context.index(self.analyzer), context.topics)


@dataclass(frozen=True)
class Feedback(StageDefaults):
    """The original's graded relevance feedback from judgments, BM25 (Table 1 rows 16-17: manual runs)."""

    analyzer: AnalyzerConfig
    feedback: FeedbackConfig
    hits: int
    name = "feedback"

    def summary(self) -> str:
        return "; ".join([self.analyzer.summary(), f"graded relevance feedback from {self.feedback.judgments}, BM25",
                          f"{self.hits} hits"])

    def apply(self, run: Run, context: Context) -> Run:
        return feedback_run(context.index(self.analyzer), self.feedback, [t.number for t in context.topics])


@dataclass(frozen=True)
class Fuse(StageDefaults):
    """Reciprocal rank fusion of other named configurations' runs (Table 1 row 23)."""

    names: tuple[str, ...]
    k: float
    hits: int
    tie_order: str
    name = "fuse"

    def summary(self) -> str:
        return f"RRF (k={self.k:g}) of {', '.join(self.names)}; {self.hits} hits"

    def apply(self, run: Run, context: Context) -> Run:
        inputs = [ranked(context.run_named(name)) for name in self.names]
        return reciprocal_rank_fusion(inputs, k=self.k, depth=self.hits, tie_order=self.tie_order)


def retrieval(config: Any) -> Search | Feedback | Fuse:
    """The first stage ``config`` describes."""
    if config.fuse:
        return Fuse(config.fuse, config.fuse_k, config.hits, config.fuse_tie_order)
    if config.feedback:
        return Feedback(config.analyzer, config.feedback, config.hits)
    return Search(config.analyzer, config.similarity, config.fields, config.filter_objects, config.hits, config.name)


KIND = StageKind("retrieval", retrieval, summary="search, feedback or fusion: topics to a first run")
