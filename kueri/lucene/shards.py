"""shards: a corpus indexed as contiguous shards joined in corpus order, by one loop and a pluggable executor.

The corpus is cut into **chunks** of ``chunk_passages`` passages (50,000 by default) once, here; each
chunk becomes a **shard** (a complete kueri index, :func:`build_shard`, whose segment names are unique
to its chunk) wherever a :class:`ShardExecutor` builds it: Java threads of this process
(:mod:`kueri.lucene.threads`) or Ray tasks (:mod:`kueri.lucene.cluster`); the shards are then joined
in chunk order (:func:`join_shards`). Scores take index-wide statistics and doc ids follow the order of
the segments, so the joined index gives the same scores and ties as one writer (the tests compare every
ranking). Measurements: docs/benchmarks.md.

For scale-out, :func:`merge_indexes` joins finished shards into one index (``IndexWriter.addIndexes``,
which copies) and :func:`kueri.lucene.index.open_shards` searches a list of shards as one.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import IO, Any, Protocol

from kueri.errors import KueriError
from kueri.lucene.analyze import AnalyzerConfig
from kueri.lucene.index import IDS_FILE, directory_size, read_manifest
from kueri.lucene.jvm import java_error, lucene
from kueri.lucene.writer import (
    IndexStats,
    build_sequential,
    failed_build,
    indexing_bar,
    open_writer,
    publish,
    source_counts,
    start_partial,
    write_manifest,
)
from kueri.records import Passage

log = logging.getLogger(__name__)

#: Passages per chunk (= per shard). Each shard becomes one segment of the joined index (a chunk
#: needs ~70 MB of RAM buffer); at the end one worker may still build while the other is done,
#: which a smaller chunk shortens and more segments pay for in search.
DEFAULT_CHUNK = 50_000
#: Passages per batch handed to an executor (~1 MB).
BATCH = 1000
SHARDS_SUBDIR = "shards"
#: Segment numbers reserved per shard (a 50k-passage shard writes 1 segment; this allows millions).
SEGMENTS_PER_SHARD = 1 << 24

Triple = tuple[str, str, str]  # (id, contents, DocT5Query expansion)


def resolve_chunk(chunk_passages: int | None = None) -> int:
    """``chunk_passages``, else ``KUERI_CHUNK_PASSAGES``, else :data:`DEFAULT_CHUNK`."""
    if chunk_passages is None:
        env = os.environ.get("KUERI_CHUNK_PASSAGES")
        try:
            chunk_passages = int(env) if env else DEFAULT_CHUNK
        except ValueError:
            raise KueriError(f"KUERI_CHUNK_PASSAGES={env!r} is not a number") from None
    if chunk_passages < 1:
        raise KueriError(f"the chunk size must be at least 1 passage, got {chunk_passages}")
    return chunk_passages


def build_shard(
    passages: Iterable[Passage] | Iterable[Triple],
    shard_dir: str | Path,
    analyzer_config: AnalyzerConfig,
    *,
    ram_buffer_mb: float = 256.0,
    number: int = 0,
) -> IndexStats:
    """Index one corpus part, in order, into ``shard_dir``: a complete kueri index of its own.

    No state is shared with other shards: any process (or machine) can build any part. ``number``
    (the part's place in the corpus) only names the segments, ``_`` + base-36 of ``number *``
    :data:`SEGMENTS_PER_SHARD` onwards, so that :func:`join_shards` can move them side by side.
    """
    return build_sequential(passages, Path(shard_dir), analyzer_config, ram_buffer_mb=ram_buffer_mb, progress=False,
                            first_segment=number * SEGMENTS_PER_SHARD)


def join_shards(target: Path, shard_dirs: Sequence[Path]) -> None:
    """Make ``target`` one Lucene index of the shards' segments, in the order given, by MOVING them.

    The segment files are renamed into ``target`` unchanged (their names are distinct, see
    :func:`build_shard`; a segment's files carry its id, not its name) and one commit point
    (``segments_1``) lists the segments in shard order: Lucene's own ``SegmentInfos`` writes it.
    Nothing is copied, so the join of a 1.3 GB index takes a fraction of a second instead of a copy
    and fsync of every byte (``IndexWriter.addIndexes``). The shards are consumed.
    """
    L = lucene()
    joined = None
    names: set[str] = set()
    try:
        for shard in shard_dirs:
            directory = L.FSDirectory.open(L.File(str(shard)).toPath())
            infos = L.SegmentInfos.readLatestCommit(directory)
            if joined is None:
                joined = L.SegmentInfos(infos.getIndexCreatedVersionMajor())
            for i in range(infos.size()):
                commit_info = infos.info(i)
                name = commit_info.info.name
                if name in names:
                    raise KueriError(f"segment {name} of {shard} is also in an earlier shard: cannot join them")
                names.add(name)
                for file_name in commit_info.files().toArray():
                    os.replace(shard / file_name, target / file_name)
                joined.add(commit_info)
            joined.counter = max(joined.counter, infos.counter)
            directory.close()
        if joined is None:
            raise KueriError("no shards to join")
        target_directory = L.FSDirectory.open(L.File(str(target)).toPath())
        joined.commit(target_directory)  # writes segments_1, fsyncs it and the folder
        target_directory.close()
    except L.JavaException as exc:
        raise java_error(exc, f"joining {len(shard_dirs)} shards failed") from exc


def add_indexes(target: Path, shard_dirs: Sequence[Path]) -> None:
    """Create the Lucene index ``target`` from the shards' segments, in the order given.

    The writer never merges (NoMergePolicy): the segments are copied as they are, so the join
    takes seconds and doc ids are the shards' doc ids, offset by the sizes of the shards before.
    """
    L = lucene()
    writer = open_writer(target, None)
    try:
        # Read the shards through NIOFSDirectory, not the default memory-mapped one: copying
        # mapped files would count every copied page in this process's resident memory.
        directories = [L.NIOFSDirectory(L.File(str(d)).toPath()) for d in shard_dirs]
        writer.addIndexes(*directories)  # Directory... varargs: pyjnius matches them spread, not as a list
        writer.commit()
        writer.close()
        for directory in directories:
            directory.close()
    except L.JavaException as exc:
        writer.rollback()
        raise java_error(exc, f"joining {len(shard_dirs)} shards failed") from exc


def merge_indexes(
    shard_dirs: Sequence[str | Path], index_dir: str | Path, metadata: dict[str, Any] | None = None
) -> IndexStats:
    """Join complete shard indexes (same analyzer) into one index at ``index_dir``, in order."""
    started = time.perf_counter()
    dirs = [Path(d) for d in shard_dirs]
    if not dirs:
        raise KueriError("no shards to merge")
    manifests = [read_manifest(d) for d in dirs]
    configs = {AnalyzerConfig(**m["analyzer_config"]) for m in manifests}
    if len(configs) != 1:
        raise KueriError(f"shards built with different analyzers cannot be merged: {sorted(map(str, configs))}")
    seen: set[str] = set()
    for d in dirs:  # before any copying: a passage id must be in one shard only
        with open(d / IDS_FILE, encoding="utf-8") as ids:
            for line in ids:
                if line in seen:
                    raise KueriError(f"passage id {line.strip()} is in more than one shard (again in {d})")
                seen.add(line)
    del seen
    index_dir = Path(index_dir)
    partial = start_partial(index_dir)
    try:
        add_indexes(partial, dirs)
        with open(partial / IDS_FILE, "w", encoding="utf-8") as out:
            for d in dirs:
                with open(d / IDS_FILE, encoding="utf-8") as ids:
                    shutil.copyfileobj(ids, out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    indexed = sum(int(m["indexed"]) for m in manifests)
    expanded = sum(int(m.get("expanded", 0)) for m in manifests)
    seconds = time.perf_counter() - started
    extra = {"shards": [str(d) for d in dirs], **(metadata or {})}
    write_manifest(partial, configs.pop(), indexed, expanded, seconds, extra)
    publish(partial, index_dir)
    return IndexStats(indexed, seconds, directory_size(index_dir), expanded)


@dataclass
class FeedCounts:
    """Passages fed to the shards so far, and how many of them had a DocT5Query expansion."""

    indexed: int = 0
    expanded: int = 0


def numbered_batches(passages: Iterable[Passage], chunk_size: int, ids: IO[str], counts: FeedCounts,
                     bar: Any) -> Iterator[tuple[int, list[Triple]]]:
    """(chunk number, up to :data:`BATCH` passages) in corpus order: a chunk's batches come one after another.

    Each passage's id goes to ``ids`` (the index's ``ids.txt``) as it passes, and ``counts`` and the
    progress ``bar`` follow; what a parallel build does with a batch is up to it.
    """
    chunk = in_chunk = 0
    batch: list[Triple] = []
    for passage in passages:
        if in_chunk == chunk_size:
            if batch:
                yield chunk, batch
                batch = []
            chunk += 1
            in_chunk = 0
        pid, query = passage[0], passage[2]
        batch.append((pid, passage[1], query))
        ids.write(pid + "\n")
        in_chunk += 1
        counts.indexed += 1
        if query:
            counts.expanded += 1
        if counts.indexed & 1023 == 0:
            bar.update(1024)
        if len(batch) == BATCH:
            yield chunk, batch
            batch = []
    if batch:
        yield chunk, batch
    bar.update(counts.indexed - bar.n)


class ShardExecutor(Protocol):
    """Where the shards of a build are made. :func:`build_sharded` calls, in this order: ``open()`` once a whole
    chunk is read (a smaller corpus is indexed by one writer here, after ``abort()``, when ``small_here``); per
    chunk ``start_chunk``, ``add`` for each batch, ``finish_chunk``; then ``wait``, ``join``, ``close``;
    ``abort()`` if anything fails."""

    small_here: bool  # a corpus of at most one chunk is indexed by one writer in this process
    build: dict[str, Any]  # how the shards were built, for the manifest
    java_exception: type[BaseException] | tuple[()]  # Lucene's exception in this process (if it runs Lucene)

    def open(self) -> None: ...

    def start_chunk(self, number: int, directory: Path) -> None: ...

    def add(self, batch: list[Triple]) -> None: ...

    def finish_chunk(self) -> None: ...

    def wait(self, indexed: int) -> None: ...

    def join(self, target: Path, shard_dirs: Sequence[Path]) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


def build_sharded(
    passages: Iterable[Passage],
    index_dir: Path,
    analyzer_config: AnalyzerConfig,
    executor: ShardExecutor,
    *,
    chunk_size: int,
    ram_buffer_mb: float = 256.0,
    progress: bool = True,
    metadata: dict[str, Any] | None = None,
) -> IndexStats:
    """:func:`kueri.lucene.build.build_index` as shards of ``chunk_size`` passages made by ``executor``."""
    started = time.perf_counter()
    iterator = iter(passages)
    first: list[Passage] = []
    if executor.small_here:
        try:
            first = list(islice(iterator, chunk_size))
        except BaseException:
            executor.abort()
            raise
        if len(first) < chunk_size:
            executor.abort()  # the corpus is read: its reader's counts are final
            return build_sequential(first, index_dir, analyzer_config, ram_buffer_mb=ram_buffer_mb,
                                    progress=progress, metadata={**source_counts(passages), **(metadata or {})})
    executor.open()

    partial = start_partial(index_dir)
    shards_dir = partial / SHARDS_SUBDIR
    shard_dirs: list[Path] = []
    counts = FeedCounts()
    bar = indexing_bar(progress)
    try:
        with open(partial / IDS_FILE, "w", encoding="utf-8") as ids:
            for number, batch in numbered_batches(chain(first, iterator), chunk_size, ids, counts, bar):
                if number == len(shard_dirs):  # the first batch of a chunk
                    if shard_dirs:
                        executor.finish_chunk()
                    shard_dirs.append(shards_dir / f"{number:05d}")
                    executor.start_chunk(number, shard_dirs[-1])
                executor.add(batch)
            if shard_dirs:
                executor.finish_chunk()
        del first
        bar.close()
        log.info("indexing the last chunks, then joining %d shards of %d passages ...", len(shard_dirs),
                 counts.indexed)
        executor.wait(counts.indexed)
        executor.join(partial, shard_dirs)
        executor.close()
        shutil.rmtree(shards_dir)
    except BaseException as exc:
        bar.close()
        executor.abort()
        shutil.rmtree(partial, ignore_errors=True)  # shards are big: leave nothing half-built
        error = failed_build(exc, index_dir, counts.indexed, executor.java_exception)
        if error is None:
            raise
        raise error from exc

    seconds = time.perf_counter() - started
    build = {**executor.build, "shards": len(shard_dirs), "chunk_passages": chunk_size}
    write_manifest(partial, analyzer_config, counts.indexed, counts.expanded, seconds,
                   {**source_counts(passages), **(metadata or {}), "build": build})
    publish(partial, index_dir)
    return IndexStats(counts.indexed, seconds, directory_size(index_dir), counts.expanded)
