"""pipeline: a :class:`RunConfig` + corpus + topics -> a validated run, in one call.

The runs themselves are a :class:`~kueri.session.Session`'s (what runs over one corpus share: indexes, encoders,
models, memoised runs); the indexes in the work folder are :mod:`kueri.indexes`'. This module is the one-call way in
for a library user (:func:`run_config`, :func:`run_given`, :func:`search_run`), and :class:`Pipeline`, a session over
fixed topics, as scripts used it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from kueri.config import RunConfig
from kueri.indexes import (
    Corpus,
    cached_index,
    corpus_fingerprint,
    default_workdir,
    index_corpus,
    index_key,
    open_cached_index,
)
from kueri.lucene import AnalyzerConfig, LuceneIndex
from kueri.records import Run, Texts, Topic
from kueri.runcontext import RunContext, given_context
from kueri.session import Elsewhere, Session, validate_run

__all__ = ["Corpus", "Elsewhere", "Pipeline", "cached_index", "corpus_fingerprint", "default_workdir",
           "index_corpus", "index_key", "open_cached_index", "run_config", "run_given", "search_run",
           "validate_run"]


def search_run(index: LuceneIndex, config: RunConfig, topics: Iterable[Topic]) -> Run:
    """The first stage of ``config`` over an open index, its feedback or fusion settings aside: the title search,
    or a dense or hybrid search over the vectors beside the index (made by ``kueri embed``; an index without them
    is a one-line :class:`~kueri.errors.SetupError`)."""
    first = config.with_changes(fuse=(), feedback=None).stages()[0]
    return first.apply({}, Session.of_index(index).context(topics))


def run_config(config: RunConfig, corpus: str | Path, topics: list[Topic],
               context: RunContext | str | Path | None = None, *, ray: Elsewhere | None = None, **old: Any) -> Run:
    """Everything ``config`` describes, from corpus and topics to a validated run, in ``context`` (as
    :class:`~kueri.session.Session`); with ``ray``, the topics as tasks of a Ray cluster (:mod:`kueri.ray_runs`: the
    same run)."""
    with Session(corpus, given_context(context, old, "run_config"), elsewhere=ray) as session:
        return session.run(config, topics)


def run_given(config: RunConfig, candidates: Run, topics: list[Topic], corpus: Corpus,
              context: RunContext | str | Path | None = None, *, source: str = "the given run",
              ray: Elsewhere | None = None, **old: Any) -> Run:
    """``config``'s stages after its first over ``candidates`` (any first stage's run, e.g. TIRA's re-rank input),
    validated: :meth:`Session.run_given <kueri.session.Session.run_given>` in a session of its own.

    The passages' texts and the second stage's BM25 statistics come from ``corpus``: the corpus's files, or the
    candidates' own texts (:class:`~kueri.parse.TextCorpus`, indexed as they are). ``source`` names the candidates
    in errors. ``ray``: the topics as tasks of a Ray cluster (:mod:`kueri.ray_runs`: the same run)."""
    with Session(corpus, given_context(context, old, "run_given"), elsewhere=ray) as session:
        return session.run_given(config, candidates, topics, source=source)


class Pipeline(AbstractContextManager):
    """A session's runs over fixed topics (``Pipeline(corpus, topics, context).run(config)``, as scripts use it):
    each index opened once, runs memoised, models loaded once (:class:`~kueri.session.Session`)."""

    def __init__(self, corpus: Corpus, topics: list[Topic], context: RunContext | str | Path | None = None, *,
                 adapt: Callable[[RunConfig], RunConfig] | None = None, **old: Any) -> None:
        self.session = Session(corpus, given_context(context, old, "Pipeline"), adapt=adapt)
        self.corpus, self.topics, self.run_context = corpus, topics, self.session.run_context

    @property
    def workdir(self) -> Path:
        return self.session.workdir

    def index(self, analyzer: AnalyzerConfig) -> LuceneIndex:
        return self.session.index(analyzer)

    def corpus_ids(self) -> list[str]:
        return self.session.corpus_ids()

    def expanded_passages(self) -> int:
        return self.session.expanded_passages()

    def texts(self, who: str) -> Texts:
        return self.session.texts(who)

    def run(self, config: RunConfig) -> Run:
        return self.session.run(config, self.topics)

    def run_given(self, config: RunConfig, candidates: Run) -> Run:
        return self.session.run_given(config, candidates, self.topics)

    def rank(self, config: RunConfig) -> Run:
        return self.session.rank(config, self.topics)

    def label(self, config: RunConfig, run: Run) -> Run:
        return self.session.label(config, run, self.topics)

    def close(self) -> None:
        self.session.close()

    def __exit__(self, *exc: object) -> None:
        self.close()
