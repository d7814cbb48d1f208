"""threads: build an index on several cores in this process, with Lucene working on Java threads.

The same contiguous chunks and shards as :mod:`kueri.lucene.shards`, joined the same way, hence the
same index (doc ids, scores, ties); only who runs Lucene differs. There, each shard is built by a
worker process with a JVM of its own, fed pickled batches through a pipe. Here, kueri's Java helper
(``ShardIndexer``, :mod:`kueri.lucene.javahelper`) runs each shard's ``IndexWriter`` on a Java thread
of this process's JVM, and this Python thread hands it batches of 1,000 passages (one Java call
each) while it goes on reading the corpus. One JVM instead of three: one JIT warm-up, no pickling,
no second copy of the text, no worker to lose.

At most ``threads`` shards are in flight; each shard's queue holds a whole chunk, so that while this
thread feeds chunk k, the threads of chunks k-1 ... still have their chunks to work on. Every Java
call that may wait returns within :data:`POLL_MS`, so ^C and SIGTERM are handled promptly, and a
stopped or failed build rolls back every writer and removes the partial index.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Any

from kueri.errors import KueriError
from kueri.lucene.analyze import AnalyzerConfig
from kueri.lucene.index import IDS_FILE, directory_size
from kueri.lucene.jvm import POLL_MS, lucene, prefer_throughput
from kueri.lucene.shards import (
    BATCH,
    SEGMENTS_PER_SHARD,
    SHARDS_SUBDIR,
    FeedCounts,
    Triple,
    join_shards,
    numbered_batches,
    resolve_chunk,
)
from kueri.lucene.writer import (
    DocumentWriter,
    IndexStats,
    build_sequential,
    failed_build,
    indexing_bar,
    open_writer,
    publish,
    start_partial,
    write_manifest,
)
from kueri.records import Passage

log = logging.getLogger(__name__)


@dataclass
class _Shard:
    """One chunk's writer and the Java thread that feeds it."""

    number: int
    indexer: Any  # kueri.helper.ShardIndexer
    sent: int = 0

    def offer(self, batch: list[Triple]) -> None:
        ids, texts, queries = zip(*batch, strict=True)  # tuples cross into String[] faster than lists
        while not self.indexer.offer(ids, texts, queries, POLL_MS):
            pass  # the queue is full: Lucene is behind; Python runs its signal handlers between calls
        self.sent += len(batch)

    def finish(self) -> None:
        while not self.indexer.finish(POLL_MS):
            pass

    def wait(self) -> None:
        while not self.indexer.done(POLL_MS):
            pass
        if self.indexer.added() != self.sent:
            raise KueriError(f"shard {self.number} holds {self.indexer.added()} passages, {self.sent} were sent")


def build_threaded(
    passages: Iterable[Passage],
    index_dir: Path,
    analyzer_config: AnalyzerConfig,
    *,
    threads: int,
    chunk_passages: int | None = None,
    ram_buffer_mb: float = 256.0,
    progress: bool = True,
    metadata: dict[str, Any] | None = None,
) -> IndexStats:
    """:func:`kueri.lucene.build.build_index` on ``threads`` Java threads (see the module docstring)."""
    chunk_size = resolve_chunk(chunk_passages)
    started = time.perf_counter()
    iterator: Iterator[Passage] = iter(passages)
    first = list(islice(iterator, chunk_size))
    if len(first) < chunk_size:  # one chunk: one writer, here
        return build_sequential(first, index_dir, analyzer_config, ram_buffer_mb=ram_buffer_mb, progress=progress,
                                metadata=metadata)
    prefer_throughput()  # many chunks ahead: if the JVM is yet to start, C2 only
    L = lucene()

    partial = start_partial(index_dir)
    shards_dir = partial / SHARDS_SUBDIR
    in_flight: deque[_Shard] = deque()
    shard_dirs: list[Path] = []
    counts = FeedCounts()
    bar = indexing_bar(progress)

    def start(number: int) -> _Shard:
        while len(in_flight) >= threads:  # a free thread: the oldest shard must be done
            in_flight.popleft().wait()
        directory = shards_dir / f"{number:05d}"
        shard_dirs.append(directory)
        writer = open_writer(directory, analyzer_config, ram_buffer_mb, number * SEGMENTS_PER_SHARD)
        documents = DocumentWriter(writer)
        indexer = L.ShardIndexer(writer, documents.plain, documents.expanded, documents.id_field,
                                 documents.contents_field, documents.query_field, chunk_size // BATCH + 2,
                                 f"kueri-shard-{number}")
        shard = _Shard(number, indexer)
        in_flight.append(shard)
        return shard

    try:
        with open(partial / IDS_FILE, "w", encoding="utf-8") as ids:
            shard = None
            for number, batch in numbered_batches(chain(first, iterator), chunk_size, ids, counts, bar):
                if shard is None or number != shard.number:
                    if shard is not None:
                        shard.finish()
                    shard = start(number)
                shard.offer(batch)
            if shard is not None:
                shard.finish()
        del first
        bar.close()
        indexed, expanded = counts.indexed, counts.expanded
        log.info("indexing the last chunks, then joining %d shards of %d passages ...", len(shard_dirs), indexed)
        while in_flight:
            in_flight.popleft().wait()
        join_shards(partial, shard_dirs)
        shutil.rmtree(shards_dir)
    except BaseException as exc:
        bar.close()
        for shard in in_flight:  # their threads roll back; nothing is left running
            shard.indexer.abort(10_000)
        shutil.rmtree(partial, ignore_errors=True)
        error = failed_build(exc, index_dir, counts.indexed, L.JavaException)
        if error is None:
            raise
        raise error from exc

    seconds = time.perf_counter() - started
    build = {"workers": threads, "on": "java threads", "shards": len(shard_dirs), "chunk_passages": chunk_size}
    write_manifest(partial, analyzer_config, indexed, expanded, seconds, {**(metadata or {}), "build": build})
    publish(partial, index_dir)
    return IndexStats(indexed, seconds, directory_size(index_dir), expanded)
