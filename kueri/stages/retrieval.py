"""The first stage of every run: the title search, the graded relevance feedback run, the fusion of other
configurations' runs, or a dense or hybrid search (in that order of precedence: ``fuse``, else ``feedback``, else
``dense`` (with ``hybrid``: fused with the title search), else the title search)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kueri.dense.retrieve import HYBRID_METHODS
from kueri.errors import KueriError
from kueri.fusion import ranked, reciprocal_rank_fusion
from kueri.lucene import (
    DEFAULT_FIELDS,
    FILTER_MODES,
    AnalyzerConfig,
    FeedbackConfig,
    LuceneIndex,
    Searcher,
    Similarity,
    feedback_run,
)
from kueri.records import Run, Topic
from kueri.stages.base import Context, Cost, Option, Stage, StageDefaults, StageKind, Stored, stored_encoder
from kueri.stages.plan import Plan

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

    def title_search(self) -> Search:
        return self

    def indexes(self) -> tuple[AnalyzerConfig, ...]:
        return (self.analyzer,)

    def probe(self, context: Context) -> Run:
        return self.apply({}, context)  # a search of the titles: milliseconds a topic

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
    orders_topics = True  # the judged topics, by number
    reads_judgments = True

    def indexes(self) -> tuple[AnalyzerConfig, ...]:
        return (self.analyzer,)

    def summary(self) -> str:
        return "; ".join([self.analyzer.summary(), f"graded relevance feedback from {self.feedback.judgments}, BM25",
                          f"{self.hits} hits"])

    def apply(self, run: Run, context: Context) -> Run:
        return feedback_run(context.index(self.analyzer), self.feedback, [t.number for t in context.topics])


@dataclass(frozen=True)
class Fuse(StageDefaults):
    """Reciprocal rank fusion of other named configurations' runs (Table 1 row 23). ``parts``: the stages of each
    of them, which it answers from (what they read, need and do); the runs themselves are the context's
    (``run_named``: each made once)."""

    names: tuple[str, ...]
    k: float
    hits: int
    tie_order: str
    parts: tuple[tuple[Stage, ...], ...] = field(default=(), compare=False, repr=False)
    name = "fuse"
    orders_topics = True  # fusion lists topics by number

    @property
    def _plans(self) -> list[Plan]:
        return [Plan(stages) for stages in self.parts]

    @property
    def reads_judgments(self) -> bool:  # type: ignore[override]
        return any(plan.reads_judgments() for plan in self._plans)

    def indexes(self) -> tuple[AnalyzerConfig, ...]:
        return tuple(dict.fromkeys(analyzer for plan in self._plans for analyzer in plan.indexes()))

    def embeds(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name for plan in self._plans for name in plan.encoders()))

    def prepare(self, context: Context) -> None:
        for plan in self._plans:
            plan.prepare(context)

    def summary(self) -> str:
        return f"RRF (k={self.k:g}) of {', '.join(self.names)}; {self.hits} hits"

    def apply(self, run: Run, context: Context) -> Run:
        inputs = [ranked(context.run_named(name)) for name in self.names]
        return reciprocal_rank_fusion(inputs, k=self.k, depth=self.hits, tie_order=self.tie_order)


@dataclass(frozen=True)
class Dense(StageDefaults):
    """The titles embedded by ``encoder`` against every passage's vector (:mod:`kueri.dense`), in the vector index
    beside the index of ``analyzer`` (made, and kept there, when it is missing); HNSW with ``k`` candidates, or
    ``exact``."""

    analyzer: AnalyzerConfig
    encoder: str
    k: int
    exact: bool
    hits: int
    name = "dense"

    def summary(self) -> str:
        how = "exact" if self.exact else f"HNSW k={self.k}"
        return f"dense {self.encoder} ({how}) over the vectors beside the index of {self.analyzer.summary()}; " \
               f"{self.hits} hits"

    def embeds(self) -> tuple[str, ...]:
        return (self.encoder,)

    def indexes(self) -> tuple[AnalyzerConfig, ...]:
        return (self.analyzer,)

    def cost(self, run: Run | None, context: Context, stored: Stored) -> Cost:
        return Cost()  # every passage's vector is made ahead (prepare): a question embeds its title alone

    def prepare(self, context: Context) -> None:
        self._open_vectors(context.index(self.analyzer), context)

    def _open_vectors(self, index: LuceneIndex, context: Context) -> Any:
        """The vector index beside ``index``, opened once per session (:meth:`vectors`)."""
        return context.shared(("vectors", str(index.path), self.encoder), lambda: self.vectors(index, context))

    def vectors(self, index: LuceneIndex, context: Context) -> Any:
        """The vector index beside ``index``, opened and checked. In a context with a work folder, the passages are
        embedded into the encoder's store there first when it lacks some, and the vector index written from it when
        missing; without one (a search of a given index), the vectors must be there (made by ``kueri embed``)."""
        from kueri.dense import embed_index, open_vectors
        from kueri.encoders import get

        workdir = context.run_context.workdir
        if workdir is not None:
            report = embed_index(index, self.encoder, workdir, progress=context.run_context.progress)
            if report.embedded or report.built:
                log.info("%s", report.summary())
        return open_vectors(index, self.encoder, get(self.encoder).key())

    def search(self, index: LuceneIndex, topics: Iterable[Topic], encoder: Any, vectors: Any) -> Run:
        from kueri.dense import dense_run

        return dense_run(vectors, encoder, list(topics), self.hits, self.k, self.exact)

    def apply(self, run: Run, context: Context) -> Run:
        index = context.index(self.analyzer)
        vectors = self._open_vectors(index, context)
        return self.search(index, context.topics, stored_encoder(context, self.encoder), vectors)


@dataclass(frozen=True)
class Hybrid(StageDefaults):
    """The title search and a dense search fused: ``rrf`` (with ``rrf_k``) or ``linear`` (``weight`` on the dense
    run's normalised scores, ``1 - weight`` on the lexical run's)."""

    lexical: Search
    dense: Dense
    method: str
    weight: float
    rrf_k: float
    hits: int
    name = "hybrid"
    orders_topics = True  # fusion lists topics by number

    @property
    def needs_objects(self) -> bool:
        return self.lexical.needs_objects

    def embeds(self) -> tuple[str, ...]:
        return self.dense.embeds()

    def indexes(self) -> tuple[AnalyzerConfig, ...]:
        return tuple(dict.fromkeys([*self.lexical.indexes(), *self.dense.indexes()]))

    def cost(self, run: Run | None, context: Context, stored: Stored) -> Cost:
        return self.dense.cost(run, context, stored)

    def prepare(self, context: Context) -> None:
        self.dense.prepare(context)

    def title_search(self) -> Search:
        return self.lexical

    def summary(self) -> str:
        how = f"RRF k={self.rrf_k:g}" if self.method == "rrf" else f"linear, dense weight {self.weight:g}"
        return f"hybrid ({how}) of [{self.lexical.summary()}] and [{self.dense.summary()}]"

    def fuse(self, lexical: Run, dense: Run) -> Run:
        from kueri.dense import hybrid_run

        return hybrid_run(lexical, dense, self.method, self.weight, self.rrf_k, self.hits)

    def apply(self, run: Run, context: Context) -> Run:
        return self.fuse(self.lexical.apply(run, context), self.dense.apply(run, context))


def retrieval(config: Any) -> Search | Feedback | Fuse | Dense | Hybrid:
    """The first stage ``config`` describes."""
    if config.fuse:
        return Fuse(config.fuse, config.fuse_k, config.hits, config.fuse_tie_order,
                    tuple(tuple(fused.stages()) for fused in config.fused()))
    if config.feedback:
        return Feedback(config.analyzer, config.feedback, config.hits)
    search = Search(config.analyzer, config.similarity, config.fields, config.filter_objects, config.hits, config.name)
    if config.dense:
        dense = Dense(config.analyzer, config.dense, max(config.dense_k, config.hits), config.dense_exact, config.hits)
        if config.hybrid:
            return Hybrid(search, dense, config.hybrid, config.hybrid_weight, config.hybrid_rrf_k, config.hits)
        return dense
    return search


def check(config: Any) -> None:
    """The first stage's settings go together: a known objects filter, dense encoder and hybrid method."""
    if config.filter_objects not in FILTER_MODES:
        raise KueriError(f"unknown objects filter {config.filter_objects!r}: use {', '.join(FILTER_MODES)}")
    if config.dense is not None:
        from kueri.encoders import ENCODERS

        if config.dense not in ENCODERS:
            raise KueriError(f"unknown dense encoder {config.dense!r}: use {', '.join(ENCODERS)}")
    if config.hybrid is not None and (config.hybrid not in HYBRID_METHODS or not config.dense):
        raise KueriError(f"hybrid {config.hybrid!r}: use {' or '.join(HYBRID_METHODS)}, with a dense encoder "
                         "(--dense)")
    if config.dense_k < 1 or not 0.0 <= config.hybrid_weight <= 1.0 or config.hybrid_rrf_k < 0:
        raise KueriError(f"dense k must be at least 1 and the hybrid weight between 0 and 1, got {config.dense_k} "
                         f"and {config.hybrid_weight}")


# The analysis, ranking and filter have flag groups of their own (kueri.cli.flags: analysis, ranking), and feedback
# and fusion are named configurations' (the judgments, the runs fused): none is one flag.
KIND = StageKind("retrieval", retrieval, options=(
    Option("analyzer", AnalyzerConfig(), "the analysis of the index and the queries", command_line=False,
           annotation=AnalyzerConfig),
    Option("similarity", Similarity(), "the ranking function", command_line=False, annotation=Similarity),
    Option("fields", DEFAULT_FIELDS, "search fields and their weights", command_line=False,
           annotation=tuple[tuple[str, float], ...]),
    Option("filter_objects", "off", "the objects filter: off, faithful or fixed (kueri.lucene.search)",
           command_line=False, annotation=str),
    Option("feedback", None, "graded relevance feedback from judgments instead of the title query (manual)",
           command_line=False, annotation=FeedbackConfig | None),
    Option("fuse", (), "names of configurations whose runs are fused by RRF", command_line=False,
           annotation=tuple[str, ...]),
    Option("fuse_k", 30.0, "RRF k of the fusion", command_line=False, annotation=float),
    Option("fuse_tie_order", "first-seen", "order of exact ties in the fusion: java (the original's HashMap order) "
           "or first-seen", command_line=False, annotation=str),
    Option("dense", None, "dense first stage: embed the titles with ENCODER (e5 or minilm) and search the "
           "passages' vectors (made by kueri embed, or within a run)", metavar="ENCODER", off="lexical",
           annotation=str | None),
    Option("dense_k", 1000, "HNSW candidates per topic of the dense search (at least --hits; 1000)", type=int,
           metavar="K", aliases=("--k",), annotation=int),
    Option("dense_exact", False, "dense search compares with every vector instead of HNSW (small corpora)",
           flag="--exact", action="store_true", annotation=bool),
    Option("hybrid", None, "fuse the dense run with the title search: rrf or linear", metavar="METHOD",
           off="dense only", annotation=str | None),
    Option("hybrid_weight", 0.5, "linear hybrid: the dense run's weight (0.5)", type=float, metavar="W",
           annotation=float),
    Option("hybrid_rrf_k", 60.0, "RRF hybrid: k in 1 / (k + rank) (60)", type=float, metavar="K", annotation=float),
), summary="search, feedback, fusion, dense or hybrid: topics to a first run", check=check)
