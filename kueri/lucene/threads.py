"""threads: the shards of a build made on Java threads of this process (a :class:`ShardExecutor`).

kueri's Java helper (``ShardIndexer``, :mod:`kueri.lucene.javahelper`) runs each shard's ``IndexWriter``
on a Java thread of this process's JVM, and this Python thread hands it batches (one Java call each)
while it goes on reading the corpus: one JVM, one JIT warm-up, no pickling. At most ``threads`` shards
are in flight, each queue holding a whole chunk. Every Java call that may wait returns within
:data:`POLL_MS`, so ^C and SIGTERM are handled promptly; a stopped build rolls back every writer.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kueri.errors import KueriError
from kueri.lucene.analyze import AnalyzerConfig
from kueri.lucene.jvm import POLL_MS, lucene, prefer_throughput
from kueri.lucene.shards import BATCH, SEGMENTS_PER_SHARD, Triple, join_shards
from kueri.lucene.writer import DocumentWriter, open_writer

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


class JavaThreads:
    """A :class:`~kueri.lucene.shards.ShardExecutor`: ``threads`` Java threads of this process's JVM."""

    small_here = True

    def __init__(self, threads: int, analyzer_config: AnalyzerConfig, ram_buffer_mb: float, chunk_size: int) -> None:
        self.threads, self.analyzer_config, self.ram_buffer_mb, self.chunk_size = (threads, analyzer_config,
                                                                                   ram_buffer_mb, chunk_size)
        self.build = {"workers": threads, "on": "java threads"}
        self.java_exception: type[BaseException] | tuple[()] = ()
        self.in_flight: deque[_Shard] = deque()
        self.shard: _Shard | None = None

    def open(self) -> None:
        prefer_throughput()  # many chunks ahead: if the JVM is yet to start, C2 only
        self.L = lucene()
        self.java_exception = self.L.JavaException

    def start_chunk(self, number: int, directory: Path) -> None:
        while len(self.in_flight) >= self.threads:  # a free thread: the oldest shard must be done
            self.in_flight.popleft().wait()
        writer = open_writer(directory, self.analyzer_config, self.ram_buffer_mb, number * SEGMENTS_PER_SHARD)
        documents = DocumentWriter(writer)
        indexer = self.L.ShardIndexer(writer, documents.plain, documents.expanded, documents.id_field,
                                      documents.contents_field, documents.query_field,
                                      self.chunk_size // BATCH + 2, f"kueri-shard-{number}")
        self.shard = _Shard(number, indexer)
        self.in_flight.append(self.shard)

    def add(self, batch: list[Triple]) -> None:
        assert self.shard is not None
        self.shard.offer(batch)

    def finish_chunk(self) -> None:
        assert self.shard is not None
        self.shard.finish()

    def wait(self, indexed: int) -> None:
        while self.in_flight:
            self.in_flight.popleft().wait()

    def join(self, target: Path, shard_dirs: Sequence[Path]) -> None:
        join_shards(target, shard_dirs)

    def close(self) -> None:
        pass

    def abort(self) -> None:
        for shard in self.in_flight:  # their threads roll back; nothing is left running
            shard.indexer.abort(10_000)
