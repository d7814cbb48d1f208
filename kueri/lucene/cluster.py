"""Index on a Ray cluster: contiguous shards built as Ray tasks, joined in corpus order into one index.

The same cut as the local parallel build (:mod:`kueri.lucene.shards`): this process reads the corpus
(the same validation, skip counts and ``file:line`` errors), writes ``ids.txt`` and sends each chunk of
``chunk_passages`` passages to a task that builds it into a shard with :func:`~kueri.lucene.shards.build_shard`
(its segment names unique to the chunk). A shard comes back through a shared folder (``shard_dir``: a
path every node and this process see) or, without one, as bytes through Ray's object store. When every
shard is back, this process joins them in chunk order (:func:`~kueri.lucene.shards.join_shards`): the same
documents, doc ids, scores and ties as a local build.

A task whose worker dies is run again by Ray (its shard is rebuilt from scratch); a shard is joined once,
only whole (its manifest must count its chunk), and only after all shards are back: a failed build
leaves no index.
"""

from __future__ import annotations

import io
import logging
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any

from kueri.errors import KueriError
from kueri.lucene.analyze import AnalyzerConfig
from kueri.lucene.index import IDS_FILE, directory_size, read_manifest
from kueri.lucene.shards import SHARDS_SUBDIR, Triple, build_shard, join_shards, resolve_chunk
from kueri.lucene.writer import IndexStats, indexing_bar, publish, start_partial, write_manifest
from kueri.records import Passage
from kueri.scaleout import TASK_RETRIES, connect, ordered_map

log = logging.getLogger(__name__)


def _build_shard_task(passages: list[Triple], number: int, analyzer_config: AnalyzerConfig, shard_dir: str | None,
                      ram_buffer_mb: float) -> tuple[int, int, bytes | str]:
    """On a Ray worker: build chunk ``number`` into a shard; (number, passages, the shard as a path or bytes)."""
    if shard_dir is not None:
        target = Path(shard_dir) / f"{number:05d}"
        stats = build_shard(passages, target, analyzer_config, ram_buffer_mb=ram_buffer_mb, number=number)
        return number, stats.indexed, str(target)
    with tempfile.TemporaryDirectory(prefix="kueri-shard-") as scratch:
        target = Path(scratch) / "shard"
        stats = build_shard(passages, target, analyzer_config, ram_buffer_mb=ram_buffer_mb, number=number)
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode="w") as tar:  # segments compress little: plain tar
            tar.add(target, arcname=".")
        return number, stats.indexed, packed.getvalue()


def _chunks(passages: Iterable[Passage], size: int, ids: Any, counts: dict[str, int],
            bar: Any) -> Iterator[list[Triple]]:
    iterator = iter(passages)
    while True:
        chunk = [(p[0], p[1], p[2]) for p in islice(iterator, size)]
        if not chunk:
            return
        for pid, _, query in chunk:
            ids.write(pid + "\n")
            counts["expanded"] += bool(query)
        counts["indexed"] += len(chunk)
        bar.update(len(chunk))
        yield chunk


def build_on_ray(
    passages: Iterable[Passage],
    index_dir: Path,
    analyzer_config: AnalyzerConfig,
    *,
    address: str,
    shard_dir: str | Path | None = None,
    chunk_passages: int | None = None,
    ram_buffer_mb: float = 256.0,
    progress: bool = True,
    metadata: dict[str, Any] | None = None,
) -> IndexStats:
    """:func:`kueri.lucene.build.build_index` with the shards built as tasks of the Ray cluster at ``address``."""
    ray = connect(address)
    chunk_size = resolve_chunk(chunk_passages)
    task = ray.remote(max_retries=TASK_RETRIES)(_build_shard_task)
    started = time.perf_counter()
    partial = start_partial(index_dir)
    shards_dir = partial / SHARDS_SUBDIR
    shards_dir.mkdir()
    shared = str(Path(shard_dir).resolve()) if shard_dir else None
    counts = {"indexed": 0, "expanded": 0}
    bar = indexing_bar(progress)
    sizes: list[int] = []
    try:
        with open(partial / IDS_FILE, "w", encoding="utf-8") as ids:
            chunks = _chunks(passages, chunk_size, ids, counts, bar)
            numbered = ((chunk, number) for number, chunk in enumerate(chunks))
            results = ordered_map(ray, _TaskOf(task), numbered, analyzer_config, shared, ram_buffer_mb)
            for expected, (number, indexed, shard) in enumerate(results):
                if number != expected:
                    raise KueriError(f"Ray returned shard {number} where shard {expected} was expected")
                target = shards_dir / f"{number:05d}"
                if isinstance(shard, bytes):
                    with tarfile.open(fileobj=io.BytesIO(shard)) as tar:
                        # the "data" filter (Python >= 3.11.4) refuses links and paths out of the target
                        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                        tar.extractall(target, **safe)
                else:
                    shutil.move(shard, target)  # a shared folder may be another filesystem: move, not rename
                if int(read_manifest(target)["indexed"]) != indexed:
                    raise KueriError(f"shard {number} is not whole: its manifest does not count {indexed} passages")
                sizes.append(indexed)
        bar.close()
        if sum(sizes) != counts["indexed"]:
            raise KueriError(f"the shards hold {sum(sizes)} passages, {counts['indexed']} were sent")
        log.info("joining %d shards of %d passages ...", len(sizes), counts["indexed"])
        join_shards(partial, [shards_dir / f"{k:05d}" for k in range(len(sizes))])
        shutil.rmtree(shards_dir)
        seconds = time.perf_counter() - started
        build = {"ray": address, "shards": len(sizes), "chunk_passages": chunk_size,
                 "shard_dir": shared or "object store"}
        write_manifest(partial, analyzer_config, counts["indexed"], counts["expanded"], seconds,
                       {**(metadata or {}), "build": build})
        publish(partial, index_dir)
    except BaseException:
        bar.close()
        shutil.rmtree(partial, ignore_errors=True)  # nothing half-built survives
        raise
    return IndexStats(counts["indexed"], seconds, directory_size(index_dir), counts["expanded"])


class _TaskOf:
    """Adapts a remote task to ``ordered_map``'s ``task.remote(batch, *args)`` for (chunk, number) pairs."""

    def __init__(self, task: Any) -> None:
        self.task = task

    def remote(self, numbered: tuple[list[Triple], int], *args: Any) -> Any:
        chunk, number = numbered
        return self.task.remote(chunk, number, *args)
