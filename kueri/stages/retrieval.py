"""The first stage of every run: the title search, the graded relevance feedback run, the fusion of other
configurations' runs, or a dense or hybrid search (in that order of precedence: ``fuse``, else ``feedback``, else
``dense`` (with ``hybrid``: fused with the title search), else the title search)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kueri.dense.retrieve import HYBRID_METHODS
from kueri.errors import KueriError
from kueri.fusion import ranked, reciprocal_rank_fusion
from kueri.lucene import (
    DEFAULT_FIELDS,
    FILTER_MODES,
    MAIN_ANALYZER,
    SEARCH_FIELDS,
    AnalyzerConfig,
    FeedbackConfig,
    LuceneIndex,
    Searcher,
    Similarity,
    feedback_run,
)
from kueri.records import Run, Topic
from kueri.stages.base import Context, Cost, Stage, StageDefaults, StageKind, Stored, stored_encoder
from kueri.stages.plan import Plan
from kueri.stages.settings import OFF, flag, options_of, setting

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

    def search(self, index: LuceneIndex, topics: Iterable[Topic], threads: int | None = None) -> Run:
        if index.analyzer_config != self.analyzer:
            log.warning("index %s was built with %s, configuration %s asks for %s; searching with the index's",
                        index.path, index.analyzer_config, self.config_name, self.analyzer)
        searcher = Searcher(index, self.similarity, threads)
        return searcher.search_topics(topics, self.hits, self.fields, self.filter_objects)

    def apply(self, run: Run, context: Context) -> Run:
        return self.search(context.index(self.analyzer), context.topics, context.run_context.workers)


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
        return feedback_run(context.index(self.analyzer), self.feedback, [t.number for t in context.topics],
                            context.run_context.workers)


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

    def search(self, topics: Iterable[Topic], encoder: Any, vectors: Any, threads: int | None = None) -> Run:
        from kueri.dense import dense_run

        return dense_run(vectors, encoder, list(topics), self.hits, self.k, self.exact, threads)

    def apply(self, run: Run, context: Context) -> Run:
        vectors = self._open_vectors(context.index(self.analyzer), context)
        return self.search(context.topics, stored_encoder(context, self.encoder), vectors, context.run_context.workers)


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
    unknown = {name for name, _ in config.fields} - set(SEARCH_FIELDS)
    if unknown:
        raise KueriError(f"unknown search field(s) {sorted(unknown)}: use {', '.join(SEARCH_FIELDS)}")
    if config.dense_k < 1 or not 0.0 <= config.hybrid_weight <= 1.0 or config.hybrid_rrf_k < 0:
        raise KueriError(f"dense k must be at least 1 and the hybrid weight between 0 and 1, got {config.dense_k} "
                         f"and {config.hybrid_weight}")


def _analysis(current: AnalyzerConfig, given: Mapping[str, Any]) -> AnalyzerConfig:
    """The analysis the flags ask for: from the original's ``baseline`` or ``main`` analyzer (``--analyzer``), else
    the configuration's, each single option given replacing its part (``--stemmer none``: no stemmer)."""
    preset = given.get("analyzer")
    if preset not in (None, "baseline", "main"):
        raise KueriError(f"unknown analyzer {preset!r}: use baseline or main")
    base = AnalyzerConfig(stoplist="lucene") if preset == "baseline" else MAIN_ANALYZER if preset == "main" else current
    changes = {name: given[name] for name in ("stoplist", "tokenizer", "possessive", "repeated_chars", "synonyms")
               if given.get(name) is not None}
    if given.get("stemmer") is not None:
        changes["stemmer"] = None if given["stemmer"] == OFF else given["stemmer"]
    return replace(base, **changes) if changes else base


def _ranking(current: Similarity, given: Mapping[str, Any]) -> Similarity:
    """The ranking function the flags ask for: the configuration's, its kind and parameters replaced as given."""
    params = {name: given[name] for name in ("k1", "b", "mu") if given.get(name) is not None}
    if given.get("similarity") is None and not params:
        return current
    return replace(current, kind=given.get("similarity") or current.kind, **params)


def parse_field(text: str) -> tuple[str, float]:
    """``FIELD=WEIGHT`` (a flag's value; no weight: 1)."""
    name, _, weight = text.partition("=")
    try:
        return name, float(weight) if weight else 1.0
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad weight in {text!r} (use FIELD=NUMBER)") from None


def _given(name: str) -> Any:
    """The combine of a setting of one flag that argparse's keywords describe: the value given (a list as a tuple)."""
    return lambda current, given: tuple(given[name]) if isinstance(given[name], list) else given[name]


@dataclass(frozen=True)
class RetrievalSettings:
    """The first stage's settings (feedback and fusion are named configurations': the judgments, the runs fused)."""

    analyzer: AnalyzerConfig = setting(
        AnalyzerConfig(), "the analysis of the index and the queries", group="analysis", combine=_analysis, flags=(
            flag("--stoplist", help="shipped stoplist name (lucene, smart, terrier, kueristop, kueristopv2, ...) or a "
                 "word-per-line file; 'none' for no stop filter"),
            flag("--stemmer", help="stemming after the stop filter", choices=("porter", "none")),
            flag("--tokenizer", help="letter: as the paper's RF indexes", choices=("standard", "letter")),
            flag("--analyzer", help="start from the original's BaselineAnalyzer or MainAnalyzer (possessive + repeated "
                 "chars)", choices=("baseline", "main")),
            flag("--possessive", help="English possessive filter", action="store_true", default=None),
            flag("--repeated-chars", help="shrink runs of 3+ identical characters to 2 (the original's "
                 "MultipleCharsFilter)", action="store_true", default=None),
            flag("--synonyms", help="WordNet synonyms (needs Debian's wordnet-base)", choices=("wordnet",))))
    similarity: Similarity = setting(
        Similarity(), "the ranking function", group="ranking", combine=_ranking, flags=(
            flag("--bm25", dest="similarity", exclusive="similarity", help="BM25 (default)", action="store_const",
                 const="bm25"),
            flag("--lmd", dest="similarity", exclusive="similarity", help="LM with Dirichlet smoothing",
                 action="store_const", const="lmd"),
            flag("--tfidf", dest="similarity", exclusive="similarity", help="Lucene's classic TF-IDF",
                 action="store_const", const="tfidf"),
            flag("--k1", help="BM25 k1 (1.2)", type=float), flag("--b", help="BM25 b (0.75)", type=float),
            flag("--mu", help="LM-Dirichlet mu (2000)", type=float)))
    fields: tuple[tuple[str, float], ...] = setting(
        DEFAULT_FIELDS, "search fields and their weights", group="ranking", combine=_given("fields"), flags=(
            flag("--fields", nargs="+", metavar="FIELD=WEIGHT", type=parse_field,
                 help="search fields and weights, e.g. contents=2 docT5Query=1 (one field: no boost)"),))
    filter_objects: str = setting(
        "off", "the objects filter: off, faithful or fixed (kueri.lucene.search)", group="ranking",
        combine=_given("filter_objects"), flags=(
            flag("--filter-objects", nargs="?", const="faithful", choices=("off", "faithful", "fixed"),
                 help="require the objects' words (faithful: a stopword object empties the topic, as the original; "
                 "fixed: stopword object words are dropped)"),))
    feedback: FeedbackConfig | None = setting(
        None, "graded relevance feedback from judgments instead of the title query (manual)", command_line=False)
    fuse: tuple[str, ...] = setting((), "names of configurations whose runs are fused by RRF", command_line=False)
    fuse_k: float = setting(30.0, "RRF k of the fusion", command_line=False)
    fuse_tie_order: str = setting("first-seen", "order of exact ties in the fusion: java (the original's HashMap "
                                  "order) or first-seen", command_line=False)
    dense: str | None = setting(None, "dense first stage: embed the titles with ENCODER (e5 or minilm) and search "
                                "the passages' vectors (made by kueri embed, or within a run)", metavar="ENCODER",
                                off="lexical")
    dense_k: int = setting(1000, "HNSW candidates per topic of the dense search (at least --hits; 1000)", type=int,
                           metavar="K", aliases=("--k",))
    dense_exact: bool = setting(False, "dense search compares with every vector instead of HNSW (small corpora)",
                                flag="--exact", action="store_true")
    hybrid: str | None = setting(None, "fuse the dense run with the title search: rrf or linear", metavar="METHOD",
                                 off="dense only")
    hybrid_weight: float = setting(0.5, "linear hybrid: the dense run's weight (0.5)", type=float, metavar="W")
    hybrid_rrf_k: float = setting(60.0, "RRF hybrid: k in 1 / (k + rank) (60)", type=float, metavar="K")


KIND = StageKind("retrieval", retrieval, options=options_of(RetrievalSettings),
                 summary="search, feedback, fusion, dense or hybrid: topics to a first run", check=check)
