"""build: index a corpus on one writer, Java threads or a Ray cluster (the same index each way).

A corpus larger than one chunk is indexed as contiguous shards joined in corpus order
(:func:`kueri.lucene.shards.build_sharded`) by an executor: Java threads of this process
(:mod:`kueri.lucene.threads`) or Ray tasks (:mod:`kueri.lucene.cluster`); a smaller one, ``workers=1``,
or a JVM without kueri's Java helper (``KUERI_JAVA_HELPER=0``), by one writer in this process
(:mod:`kueri.lucene.writer`). All give the same documents, doc ids, scores and ties.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kueri.lucene.analyze import AnalyzerConfig
from kueri.lucene.jvm import has_java_helper
from kueri.lucene.shards import ShardExecutor, build_sharded, resolve_chunk
from kueri.lucene.threads import JavaThreads
from kueri.lucene.writer import IndexStats, build_sequential
from kueri.processes import resolve_workers
from kueri.records import Passage


def build_index(
    passages: Iterable[Passage],
    index_dir: str | Path,
    analyzer_config: AnalyzerConfig,
    *,
    ram_buffer_mb: float = 256.0,
    progress: bool = True,
    metadata: dict[str, Any] | None = None,
    workers: int | None = None,
    chunk_passages: int | None = None,
    ray_address: str | None = None,
    shard_dir: str | Path | None = None,
) -> IndexStats:
    """Index ``passages`` (in their order) into ``index_dir``, replacing what was there.

    ``metadata`` (corpus paths, ...) is merged into the manifest, with the counts of ``passages`` when they
    come from a reader that keeps them (:meth:`kueri.parse.PassageReader.counts`).

    ``workers`` > 1 (default: ``KUERI_WORKERS``, else 2 where there are 2+ cores) builds
    contiguous chunks of ``chunk_passages`` passages on that many Java threads of this process
    (:mod:`kueri.lucene.threads`, kueri's Java helper) and joins them in corpus order: the same documents,
    doc ids, scores and ties as one writer. A corpus that fits in one chunk, or a JVM without the helper,
    is indexed by one writer, here.

    ``ray_address`` (``auto`` or ``host:port``): the shards are built as tasks of that Ray cluster
    instead (:mod:`kueri.lucene.cluster`), brought back through ``shard_dir`` (a folder every node
    sees) or Ray's object store; the same index.
    """
    if not ray_address and (resolve_workers(workers) <= 1 or not has_java_helper()):
        return build_sequential(passages, Path(index_dir), analyzer_config, ram_buffer_mb=ram_buffer_mb,
                                progress=progress, metadata=metadata)
    chunk_size = resolve_chunk(chunk_passages)
    executor: ShardExecutor
    if ray_address:
        from kueri.lucene.cluster import RayTasks  # Ray is an optional extra

        executor = RayTasks(ray_address, analyzer_config, ram_buffer_mb, shard_dir)
    else:
        executor = JavaThreads(resolve_workers(workers), analyzer_config, ram_buffer_mb, chunk_size)
    return build_sharded(passages, Path(index_dir), analyzer_config, executor, chunk_size=chunk_size,
                         ram_buffer_mb=ram_buffer_mb, progress=progress, metadata=metadata)
