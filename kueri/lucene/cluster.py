"""cluster: the shards of a build made as tasks of a Ray cluster (a :class:`ShardExecutor`).

Each chunk goes to a task that builds it into a shard (:func:`~kueri.lucene.shards.build_shard`); the
shard comes back through a shared folder (``shard_dir``: a path every node and this process see) or,
without one, as bytes through Ray's object store. A task whose worker dies is run again by Ray (its
shard rebuilt from scratch); a shard is placed once, only whole (its manifest must count its chunk), and
joined here only when all are back: a failed build leaves no index.
"""

from __future__ import annotations

import io
import logging
import shutil
import tarfile
import tempfile
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kueri.errors import KueriError
from kueri.lucene.analyze import AnalyzerConfig
from kueri.lucene.index import read_manifest
from kueri.lucene.shards import Triple, build_shard, join_shards
from kueri.scaleout import TASK_RETRIES, cluster_cpus, connect

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


class RayTasks:
    """A :class:`~kueri.lucene.shards.ShardExecutor`: one task of the Ray cluster at ``address`` per chunk, at
    most twice the cluster's CPUs in flight (the driver never holds the whole corpus); results in chunk order."""

    small_here = False  # on a cluster even one chunk is built there
    java_exception = ()

    def __init__(self, address: str, analyzer_config: AnalyzerConfig, ram_buffer_mb: float,
                 shard_dir: str | Path | None = None) -> None:
        self.ray = connect(address)
        self.task = self.ray.remote(max_retries=TASK_RETRIES)(_build_shard_task)
        self.analyzer_config, self.ram_buffer_mb = analyzer_config, ram_buffer_mb
        self.shared = str(Path(shard_dir).resolve()) if shard_dir else None
        self.build = {"ray": address, "shard_dir": self.shared or "object store"}
        self.window = 2 * cluster_cpus(self.ray)
        self.pending: deque[tuple[int, Path, Any]] = deque()
        self.chunk: list[Triple] = []
        self.number, self.directory = 0, Path()
        self.sizes: list[int] = []

    def open(self) -> None:
        pass

    def start_chunk(self, number: int, directory: Path) -> None:
        self.number, self.directory, self.chunk = number, directory, []

    def add(self, batch: list[Triple]) -> None:
        self.chunk.extend(batch)

    def finish_chunk(self) -> None:
        ref = self.task.remote(self.chunk, self.number, self.analyzer_config, self.shared, self.ram_buffer_mb)
        self.pending.append((self.number, self.directory, ref))
        self.chunk = []
        if len(self.pending) >= self.window:
            self._place_oldest()

    def _place_oldest(self) -> None:
        expected, target, ref = self.pending.popleft()
        number, indexed, shard = self.ray.get(ref)
        if number != expected:
            raise KueriError(f"Ray returned shard {number} where shard {expected} was expected")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(shard, bytes):
            with tarfile.open(fileobj=io.BytesIO(shard)) as tar:
                # the "data" filter (Python >= 3.11.4) refuses links and paths out of the target
                safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
                tar.extractall(target, **safe)
        else:
            shutil.move(shard, target)  # a shared folder may be another filesystem: move, not rename
        if int(read_manifest(target)["indexed"]) != indexed:
            raise KueriError(f"shard {number} is not whole: its manifest does not count {indexed} passages")
        self.sizes.append(indexed)

    def wait(self, indexed: int) -> None:
        while self.pending:
            self._place_oldest()
        if sum(self.sizes) != indexed:
            raise KueriError(f"the shards hold {sum(self.sizes)} passages, {indexed} were sent")

    def join(self, target: Path, shard_dirs: Sequence[Path]) -> None:
        join_shards(target, shard_dirs)

    def close(self) -> None:
        pass

    def abort(self) -> None:
        self.pending.clear()  # their results are dropped; Ray frees them
