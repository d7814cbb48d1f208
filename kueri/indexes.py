"""The corpus's indexes in the work folder: one per corpus and analysis, built once and shared.

An index is cached in a work folder, keyed by the corpus (paths, sizes, modification times; for given texts, their
digest) and the analyzer (including the stoplist's words), so trying several rankings on one corpus indexes it once
(:func:`cached_index`); :func:`index_corpus` builds one where it is told.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from kueri.errors import BrokenCache, IncompatibleIndex, KueriError
from kueri.files import file_lock, touch
from kueri.lucene import AnalyzerConfig, LuceneIndex, build_index, read_stoplist
from kueri.lucene.index import FORMAT_VERSION, verify_files
from kueri.parse import PassageReader, TextCorpus
from kueri.parse.passages import corpus_files
from kueri.runcontext import RunContext, given_context

log = logging.getLogger(__name__)


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
        workers=context.workers,
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
