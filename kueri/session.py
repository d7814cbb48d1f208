"""session: what the runs over one corpus share, in one object that is asked for runs.

A :class:`Session` holds the corpus, how its runs go (:class:`~kueri.runcontext.RunContext`: work folder, progress,
bad lines, workers), the open indexes, the encoders with their stores, what its stages load once (models, vector
indexes: :meth:`Session.shared`, each under its owner's key) and the runs it made (a fused configuration reuses the
runs it fuses). A run is asked of it: ``session.run(config, topics)``, or, for candidates another system retrieved,
``session.run_given(config, candidates, topics)``. Each face (the command line, ``kueri serve``, PyTerrier, TIRA)
and each Ray task makes one session and asks it; a run's stages get their :class:`~kueri.stages.Context` from it
(:meth:`Session.context`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from kueri.config import RunConfig, get_config
from kueri.errors import EmptyRun, KueriError
from kueri.files import writable_folder
from kueri.indexes import Corpus, cached_index, default_workdir
from kueri.lucene import AnalyzerConfig, LuceneIndex
from kueri.parse import TextCorpus
from kueri.records import NO_STANCE, STANCES, Run, Texts, Topic
from kueri.runcontext import RunContext, given_context
from kueri.stages.given import given_stages
from kueri.stages.plan import Plan

log = logging.getLogger(__name__)
T = TypeVar("T")


class Elsewhere(Protocol):
    """Where a session's runs are made instead of in this process (:class:`kueri.ray_runs.RayRun`: the topics as
    tasks of a Ray cluster), giving the run the session gives (``candidates``: :meth:`Session.run_given`'s)."""

    def run(self, session: Session, config: RunConfig, topics: list[Topic], candidates: Run | None = None) -> Run: ...


class Session:
    """Runs configurations over one corpus; see the module."""

    def __init__(self, corpus: Corpus, context: RunContext | str | Path | None = None, *,
                 adapt: Callable[[RunConfig], RunConfig] | None = None,
                 indexes: Mapping[AnalyzerConfig, LuceneIndex] | None = None, encoders: Mapping[str, Any] | None = None,
                 elsewhere: Elsewhere | None = None, **old: Any) -> None:
        """``context``: how its runs go, or just the work folder (None: kueri's default, made and checked here);
        ``adapt`` rewrites every configuration it runs, nested ones too (e.g. another judgments file). ``indexes``:
        its open indexes, given by analysis: it then builds none and needs no work folder (a Ray task's); ``encoders``:
        encoders given by name (a Ray task's own); ``elsewhere``: where its runs are made (:class:`Elsewhere`)."""
        given = given_context(context, old, "Session")
        self.corpus, self.adapt, self.elsewhere = corpus, adapt, elsewhere
        self._builds = indexes is None
        workdir = given.workdir
        if self._builds or workdir is not None:
            workdir = writable_folder(workdir or default_workdir(), "work folder")  # checked before any work
        # the workers are resolved here, once: nothing is read from the environment during a run
        self.run_context = replace(given, workdir=workdir, workers=given.resolved_workers())
        self._indexes: dict[AnalyzerConfig, LuceneIndex] = dict(indexes or {})
        self._encoders: dict[str, Any] = dict(encoders or {})
        self._shared: dict[Hashable, Any] = {}
        self._runs: dict[tuple[RunConfig, tuple[Topic, ...]], Run] = {}
        self._every_analysis: LuceneIndex | None = None

    @classmethod
    def of_index(cls, index: LuceneIndex) -> Session:
        """A session over one given, open index and nothing else (``kueri search``): no work folder, nothing built or
        cached; every analysis is the index's (a search with another says so), a dense search reads the vectors
        ``kueri embed`` made beside it."""
        session = cls(index.path, RunContext(progress=False), indexes={index.analyzer_config: index})
        session._every_analysis = index
        return session

    @property
    def workdir(self) -> Path:
        """The work folder (a session that builds indexes always has one: made and checked when it was made)."""
        if self.run_context.workdir is None:
            raise KueriError("this session has no work folder (it was given its indexes)")
        return self.run_context.workdir

    # -- what runs share ---------------------------------------------------------------------------------------

    def index(self, analyzer: AnalyzerConfig) -> LuceneIndex:
        """The corpus's index under ``analyzer``, built or reused from the work folder, opened once."""
        if analyzer not in self._indexes:
            if self._every_analysis is not None:
                return self._every_analysis
            if not self._builds:
                raise KueriError(f"this session was given no index of {analyzer.summary()}")
            self._indexes[analyzer] = cached_index(self.corpus, analyzer, self.run_context)
        return self._indexes[analyzer]

    def _any_index(self) -> LuceneIndex:
        if not self._indexes:
            self.index(AnalyzerConfig())
        return next(iter(self._indexes.values()))

    def corpus_ids(self) -> list[str]:
        """The corpus' passage ids, in corpus order (from an index, built if none is open yet)."""
        return self._any_index().ids

    def expanded_passages(self) -> int:
        """How many passages have a DocT5Query expansion (0: the docT5Query field is empty)."""
        return int(self._any_index().manifest.get("expanded", 0))

    def texts(self, who: str) -> Texts:
        """Passage texts by id for the stage ``who`` (named when a passage is missing): the stored text of any open
        index (it does not depend on the analyzer)."""
        return functools.partial(self._any_index().contents_of, stage=who)  # the index's own: no call back up here

    def encoder(self, name: str) -> Any:
        """The encoder ``name`` of :mod:`kueri.encoders`, loaded once: given, else with its passage embeddings in its
        store in the work folder (read from it and added to it), else (no work folder) plain."""
        if name not in self._encoders:
            from kueri.encoders import open_encoder

            self._encoders[name] = open_encoder(name, self.run_context.workdir, self.run_context.progress)
        return self._encoders[name]

    def encoders(self) -> dict[str, Any]:
        """The encoders loaded so far, by name."""
        return dict(self._encoders)

    def shared(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``, once per session, under ``key`` (models, vector indexes: each key is its owner's)."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def context(self, topics: Iterable[Topic]) -> RunView:
        """What the stages of a run over ``topics`` share (:class:`~kueri.stages.Context`)."""
        return RunView(self, list(topics))

    # -- runs --------------------------------------------------------------------------------------------------

    def _adapted(self, config: RunConfig) -> RunConfig:
        return self.adapt(config) if self.adapt else config

    def run(self, config: RunConfig, topics: Iterable[Topic]) -> Run:
        """The run ``config`` describes over ``topics`` (validated), made once."""
        config, topics = self._adapted(config), list(topics)
        key = (config, tuple(topics))
        if key not in self._runs:
            self._runs[key] = (self.elsewhere.run(self, config, topics) if self.elsewhere is not None
                               else self._make(config.plan(), topics, config.hits))
        return self._runs[key]

    def run_given(self, config: RunConfig, candidates: Run, topics: Iterable[Topic], *,
                  source: str = "the given run") -> Run:
        """``config``'s stages after its first (second stage, quality, stance) over ``candidates``, any first stage's
        run, each topic's top ``config.hits`` (validated; :func:`kueri.stages.given.given_stages`). Every candidate
        must be in the corpus; ``source`` names the candidates in errors."""
        config, topics = self._adapted(config), list(topics)
        known = {t.number for t in topics}
        unknown = [qid for qid in candidates if qid not in known]
        if unknown:
            raise KueriError(f"{source}: topic {unknown[0]} of the run is not among the topics")
        if isinstance(self.corpus, TextCorpus):
            log.info("no corpus: the second stage's BM25 features use the statistics of the %d candidates alone",
                     len(self.corpus.texts))
        if self.elsewhere is not None:
            return self.elsewhere.run(self, config, topics, candidates)
        return self._make(Plan(given_stages(config, candidates)), topics, config.hits)

    def rank(self, config: RunConfig, topics: Iterable[Topic]) -> Run:
        """``config``'s run without the stages that only label hits (the stance), validated: the hits and order of
        :meth:`run`, for a caller that labels only the hits it shows (:meth:`label`)."""
        config = self._adapted(config)
        return self._make(config.plan().ranking(), list(topics), config.hits)

    def label(self, config: RunConfig, run: Run, topics: Iterable[Topic]) -> Run:
        """``config``'s stages that label hits (those :meth:`rank` leaves out) over ``run``, e.g. the top hits a page
        shows: each hit gets the label :meth:`run` gives it, as a label depends on its passage, its topic and, for a
        stance model that reads its encoder only for a topic's top hits, its rank."""
        return self._adapted(config).plan().labelling().apply(run, self.context(topics))

    def _make(self, plan: Plan, topics: list[Topic], hits: int) -> Run:
        run = plan.apply({}, self.context(topics))
        validate_run(run, topics, hits)
        return run

    def forget_runs(self) -> None:
        """Drop the runs made so far (a long-lived session asked for many different runs)."""
        self._runs.clear()

    def close(self) -> None:
        for index in self._indexes.values():
            index.close()
        self._indexes.clear()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class RunView:
    """One run's :class:`~kueri.stages.Context`: its topics, and everything else its session's."""

    session: Session
    topics: list[Topic]

    @property
    def corpus(self) -> Corpus:
        return self.session.corpus

    @property
    def run_context(self) -> RunContext:
        return self.session.run_context

    def index(self, analyzer: AnalyzerConfig) -> LuceneIndex:
        return self.session.index(analyzer)

    def texts(self, who: str) -> Texts:
        return self.session.texts(who)

    def encoder(self, name: str) -> Any:
        return self.session.encoder(name)

    def shared(self, key: Hashable, make: Callable[[], T]) -> T:
        return self.session.shared(key, make)

    def run_named(self, name: str) -> Run:
        return self.session.run(get_config(name), self.topics)


def validate_run(run: Run, topics: Iterable[Topic], max_hits: int = 1000) -> None:
    """Check a run against the Touché rules before it is written; raise KueriError if broken (:class:`EmptyRun`
    when no topic retrieved anything)."""
    known = {t.number for t in topics}
    for qid, hits in run.items():
        if qid not in known:
            raise KueriError(f"run check: topic {qid} is not among the topics")
        if len(hits) > max_hits:
            raise KueriError(f"run check: topic {qid} has {len(hits)} hits (at most {max_hits})")
        seen: set[str] = set()
        previous = float("inf")
        for rank, hit in enumerate(hits, start=1):
            if hit.doc in seen:
                raise KueriError(f"run check: topic {qid} lists {hit.doc} twice")
            seen.add(hit.doc)
            if not hit.score <= previous:  # also catches NaN
                raise KueriError(f"run check: topic {qid} score increases at rank {rank}")
            previous = hit.score
            if hit.stance not in STANCES and hit.stance != NO_STANCE:
                raise KueriError(f"run check: topic {qid} rank {rank} has stance {hit.stance!r}")
            if not hit.doc or any(c.isspace() for c in hit.doc):
                raise KueriError(f"run check: topic {qid} rank {rank} has a bad passage id {hit.doc!r}")
    if not run:
        raise EmptyRun("run check: the run is empty (no topic retrieved anything)")
