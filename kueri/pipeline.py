"""pipeline: a :class:`RunConfig` + corpus + topics -> a validated run.

:class:`Pipeline` applies a configuration's stages (:meth:`RunConfig.stages`, in the order
:mod:`kueri.stages` registers them) and is their :class:`~kueri.stages.Context`. Indexes are cached in
a work folder, keyed by the corpus (paths, sizes, modification times; for given texts, their digest) and the
analyzer (including the stoplist's words), so trying several rankings on one corpus indexes it once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Hashable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from kueri.config import RunConfig, get_config
from kueri.errors import BrokenCache, EmptyRun, IncompatibleIndex, KueriError
from kueri.files import file_lock, touch, writable_folder
from kueri.lucene import AnalyzerConfig, LuceneIndex, build_index, read_stoplist
from kueri.lucene.index import FORMAT_VERSION, verify_files
from kueri.parse import PassageReader, TextCorpus
from kueri.parse.passages import corpus_files
from kueri.records import NO_STANCE, STANCES, Run, Topic
from kueri.runcontext import QUIET, RunContext, given_context
from kueri.stages import Stage, Texts
from kueri.stages.given import given_stages

log = logging.getLogger(__name__)
T = TypeVar("T")


class Elsewhere(Protocol):
    """Where a pipeline's stages may run instead of in this process (:class:`kueri.ray_runs.RayRun`: the topics as
    tasks of a Ray cluster), giving the run :meth:`Pipeline.run` (or, with ``candidates``, :meth:`Pipeline.run_given`)
    gives."""

    def run(self, pipeline: Pipeline, config: RunConfig, candidates: Run | None = None) -> Run: ...


#: A corpus: its files (a file or a folder of them), or passages given with their texts.
Corpus = str | Path | TextCorpus


def corpus_fingerprint(corpus: Corpus) -> list[dict[str, object]]:
    if isinstance(corpus, TextCorpus):
        return corpus.fingerprint()
    files = corpus_files(corpus)
    return [
        {"path": str(f.resolve()), "bytes": f.stat().st_size, "mtime_ns": f.stat().st_mtime_ns}
        for f in files
    ]


def index_key(corpus: Corpus, analyzer: AnalyzerConfig) -> str:
    """What an index depends on, and nothing else: the corpus (:func:`corpus_fingerprint`), the analysis (with the
    stoplist's words) and the index format. Whether bad lines are skipped is not part of it: a corpus whose lines
    are all good gives the same index either way, and one with bad lines gives an index only when they are."""
    described = analyzer.describe()
    if analyzer.stoplist != "none":  # the words matter, not where the file lies
        described["stoplist"] = sorted(read_stoplist(analyzer.stoplist))
    payload = {
        "format": FORMAT_VERSION,
        "corpus": corpus_fingerprint(corpus),
        "analyzer": described,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def default_workdir() -> Path:
    """Where indexes and caches go when no work folder is given.

    ``KUERI_WORKDIR``; else ``work/`` of the checkout when kueri runs from one (as ``my-software.sh``
    does); else the user's cache, ``$XDG_CACHE_HOME/kueri/work`` (``~/.cache/kueri/work``), as
    pyserini and ir_datasets keep theirs; else, where that cannot be written, a temp folder.
    """
    env = os.environ.get("KUERI_WORKDIR")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file() and os.access(checkout, os.W_OK):
        return checkout / "work"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kueri" / "work"
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Path(tempfile.gettempdir()) / "kueri-work"
    return cache


def index_corpus(
    corpus: Corpus,
    index_dir: str | Path,
    analyzer: AnalyzerConfig,
    context: RunContext | None = None,
    *,
    ram_buffer_mb: float = 256.0,
    ray_address: str | None = None,
    shard_dir: str | Path | None = None,
    chunk_passages: int | None = None,
    **old: Any,
) -> LuceneIndex:
    """Build an index of ``corpus`` and report read / indexed / skipped counts (``context``: progress, bad lines)."""
    context = given_context(context, old, "index_corpus")
    log.info("indexing %s with %s", corpus, analyzer.summary())
    reader = corpus if isinstance(corpus, TextCorpus) else PassageReader(corpus, skip_bad=context.skip_bad)
    stats = build_index(
        reader,
        index_dir,
        analyzer,
        ram_buffer_mb=ram_buffer_mb,
        progress=context.progress,
        ray_address=ray_address,
        shard_dir=shard_dir,
        chunk_passages=chunk_passages,
        metadata={"corpus": corpus_fingerprint(corpus)},  # the reader's counts are asked of it once it is read
    )
    log.info("%s; indexed %d in %.1f s (%.0f passages/s), index %.1f MB at %s", reader.stats.summary(), stats.indexed,
             stats.seconds, stats.rate, stats.size_bytes / 1e6, index_dir)
    for problem in reader.problems:
        log.warning("skipped %s", problem)
    return LuceneIndex(index_dir)


def cached_index(
    corpus: Corpus,
    analyzer: AnalyzerConfig,
    context: RunContext | str | Path,
    **old: Any,
) -> LuceneIndex:
    """The index of ``corpus`` under ``analyzer`` in the context's work folder (``context``: a
    :class:`~kueri.runcontext.RunContext`, or just the folder), built only when missing.

    Safe to share: one process builds an index while the others wait for it (a lock per entry). A
    cached index is checked before it is used (:func:`~kueri.lucene.index.verify_files`: its files are
    whole; it opens; its ids match; it was written by this Lucene major with this analysis); a broken or
    foreign one is reported in one warning line, deleted and rebuilt.
    """
    context = given_context(context, old, "cached_index")
    if context.workdir is None:
        raise KueriError("cached_index needs a work folder")
    index_dir = context.workdir / f"index-{index_key(corpus, analyzer)}"
    with file_lock(index_dir.with_name(index_dir.name + ".lock"), f"the index of {corpus}"):
        if index_dir.exists():
            index = open_cached_index(index_dir, analyzer)
            if index is not None:
                log.info("reusing index %s", index_dir)
                return index
        index_dir.parent.mkdir(parents=True, exist_ok=True)
        return index_corpus(corpus, index_dir, analyzer, context)


def open_cached_index(index_dir: Path, analyzer: AnalyzerConfig | None = None) -> LuceneIndex | None:
    """The cached index at ``index_dir`` (of ``analyzer``, when given), checked; None (the entry removed, with a
    warning) when it is broken or must not be searched here (another Lucene major, another analysis)."""
    try:
        verify_files(index_dir)
        index = LuceneIndex(index_dir, analyzer)
    except BrokenCache as exc:
        why = "cannot be used here" if isinstance(exc, IncompatibleIndex) else "is broken"
        log.warning("work folder: %s %s, rebuilding it (%s)", index_dir, why, exc)
        shutil.rmtree(index_dir, ignore_errors=True)
        return None
    touch(index_dir)
    return index


class IndexContext:
    """The context of a first stage searched over one given, open index (``kueri search``): no work folder, so
    nothing is built or cached (a dense search needs the vectors ``kueri embed`` made beside the index)."""

    run_context = QUIET  # no work folder

    def __init__(self, index: LuceneIndex, topics: list[Topic]) -> None:
        self._index, self.topics, self.corpus = index, topics, index.path
        self._shared: dict[Hashable, Any] = {}

    def index(self, analyzer: AnalyzerConfig) -> LuceneIndex:
        return self._index  # a search with another analyzer says so (Search.search)

    def texts(self, who: str) -> Texts:
        return lambda ids: self._index.contents_of(ids, who)

    def run_named(self, name: str) -> Run:
        raise KueriError(f"a search of one index cannot run configuration {name} (use kueri run or kueri fuse)")

    def shared(self, key: Hashable, make: Callable[[], T]) -> T:
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def encoder(self, name: str) -> Any:
        return open_stored_encoder(self, name)


def open_stored_encoder(context: Any, name: str) -> Any:
    """The encoder ``name`` of :mod:`kueri.encoders`, loaded once per context: with its passage embeddings in its
    store in the context's work folder (read from it and added to it), or plain without a work folder."""
    from kueri.encoders import open_encoder

    workdir, progress = context.run_context.workdir, context.run_context.progress
    key = ("encoder", name) if workdir is None else ("stored-encoder", name, str(workdir))
    return context.shared(key, lambda: open_encoder(name, workdir, progress))


def search_run(index: LuceneIndex, config: RunConfig, topics: Iterable[Topic]) -> Run:
    """The first stage of ``config`` over an open index, its feedback or fusion settings aside: the title search,
    or a dense or hybrid search over the vectors beside the index (made by ``kueri embed``; an index without them
    is a one-line :class:`~kueri.errors.SetupError`)."""
    from kueri.stages.retrieval import retrieval

    stage = retrieval(config.with_changes(fuse=(), feedback=None))
    return stage.apply({}, IndexContext(index, list(topics)))


class Pipeline:
    """Runs configurations over one corpus and topics: the context their stages share. Each index is opened
    once, runs are memoised (fused configurations reuse the runs they build on), models are loaded once."""

    def __init__(
        self,
        corpus: Corpus,
        topics: list[Topic],
        context: RunContext | str | Path | None = None,
        *,
        adapt: Callable[[RunConfig], RunConfig] | None = None,
        indexes: dict[AnalyzerConfig, LuceneIndex] | None = None,
        shared: dict[Hashable, Any] | None = None,
        **old: Any,
    ) -> None:
        """``context``: how the run goes (:class:`~kueri.runcontext.RunContext`: work folder, progress, bad lines,
        workers), or just its work folder (None: kueri's default); ``adapt`` rewrites every configuration run,
        nested ones too (e.g. another judgments file); ``indexes`` and ``shared`` let several pipelines share open
        indexes and loaded models."""
        given = given_context(context, old, "Pipeline")
        self.corpus = corpus
        self.adapt = adapt
        self.topics = topics
        # the work folder, checked before any work
        self.run_context = replace(given, workdir=writable_folder(given.workdir or default_workdir(), "work folder"))
        self._indexes: dict[AnalyzerConfig, LuceneIndex] = {} if indexes is None else indexes
        self._shared: dict[Hashable, Any] = {} if shared is None else shared
        self._runs: dict[RunConfig, Run] = {}

    @property
    def workdir(self) -> Path:
        """The run context's work folder, which a pipeline always has (made and checked by ``__init__``)."""
        return self.run_context.workdir  # type: ignore[return-value]

    def index(self, analyzer: AnalyzerConfig) -> LuceneIndex:
        if analyzer not in self._indexes:
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
        """Passage texts by id for the stage ``who`` (named when a passage is missing): the stored text of any
        open index (it does not depend on the analyzer)."""
        index = self._any_index()
        return lambda ids: index.contents_of(ids, who)

    def shared(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``, once per pipeline (models, encoders)."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def encoder(self, name: str) -> Any:
        return open_stored_encoder(self, name)

    def run_named(self, name: str) -> Run:
        return self.run(get_config(name))

    def run(self, config: RunConfig) -> Run:
        """The run ``config`` describes (validated), computed once per configuration."""
        if self.adapt:
            config = self.adapt(config)
        if config not in self._runs:
            self._runs[config] = self._apply(config.stages(), config.hits)
        return self._runs[config]

    def rank(self, config: RunConfig) -> Run:
        """``config``'s run without the stages that only label hits (a stage that ``adds`` a column, the stance),
        validated: the hits and order of :meth:`run`, for a caller that labels only the hits it shows
        (:meth:`label`)."""
        if self.adapt:
            config = self.adapt(config)
        return self._apply([stage for stage in config.stages() if not stage.adds], config.hits)

    def label(self, config: RunConfig, run: Run) -> Run:
        """``config``'s stages that label hits (those :meth:`rank` leaves out) over ``run``, e.g. the top hits a page
        shows from the top: each hit gets the label :meth:`run` gives it, as a label depends on its passage, its topic
        and, for a stance model that reads its encoder only for a topic's top hits, its rank."""
        if self.adapt:
            config = self.adapt(config)
        for stage in config.stages():
            if stage.adds:
                run = stage.apply(run, self)
        return run

    def run_given(self, config: RunConfig, candidates: Run) -> Run:
        """``config``'s stages after its first (second stage, quality, stance) over ``candidates``, any first
        stage's run, each topic's top ``config.hits`` (validated; :func:`kueri.stages.given.given_stages`). Every
        candidate must be in the corpus."""
        if self.adapt:
            config = self.adapt(config)
        return self._apply(given_stages(config, candidates), config.hits)

    def _apply(self, stages: list[Stage], hits: int) -> Run:
        """The run ``stages`` make one after the other from none, checked (at most ``hits`` a topic)."""
        run: Run = {}
        for stage in stages:
            run = stage.apply(run, self)
        validate_run(run, self.topics, hits)
        return run

    def close(self) -> None:
        for index in self._indexes.values():
            index.close()
        self._indexes.clear()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_config(
    config: RunConfig,
    corpus: str | Path,
    topics: list[Topic],
    context: RunContext | str | Path | None = None,
    *,
    ray: Elsewhere | None = None,
    **old: Any,
) -> Run:
    """Everything ``config`` describes, from corpus and topics to a validated run, in ``context`` (as
    :class:`Pipeline`); with ``ray``, the topics as tasks of a Ray cluster (:mod:`kueri.ray_runs`: the same run)."""
    with Pipeline(corpus, topics, given_context(context, old, "run_config")) as pipeline:
        return ray.run(pipeline, config) if ray is not None else pipeline.run(config)


def run_given(
    config: RunConfig,
    candidates: Run,
    topics: list[Topic],
    corpus: Corpus,
    context: RunContext | str | Path | None = None,
    *,
    source: str = "the given run",
    ray: Elsewhere | None = None,
    **old: Any,
) -> Run:
    """``config``'s stages after its first over ``candidates`` (any first stage's run, e.g. TIRA's re-rank input),
    validated: the one way in for given candidates (``kueri tira``, ``kueri rerank``, PyTerrier's ``Rerank``).

    The passages' texts and the second stage's BM25 statistics come from ``corpus``: the corpus's files, or the
    candidates' own texts (:class:`~kueri.parse.TextCorpus`, indexed as they are). ``source`` names the candidates
    in errors. ``ray``: the topics as tasks of a Ray cluster (:mod:`kueri.ray_runs`: the same run)."""
    known = {t.number for t in topics}
    unknown = [qid for qid in candidates if qid not in known]
    if unknown:
        raise KueriError(f"{source}: topic {unknown[0]} of the run is not among the topics")
    if isinstance(corpus, TextCorpus):
        log.info("no corpus: the second stage's BM25 features use the statistics of the %d candidates alone",
                 len(corpus.texts))
    with Pipeline(corpus, topics, given_context(context, old, "run_given")) as pipeline:
        return ray.run(pipeline, config, candidates) if ray is not None else pipeline.run_given(config, candidates)


def validate_run(run: Run, topics: Iterable[Topic], max_hits: int = 1000) -> None:
    """Check a run against the Touché rules before it is written; raise KueriError if broken."""
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
