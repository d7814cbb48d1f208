"""A Ray task of a run on Ray (:mod:`kueri.ray_runs`): one batch of topics, run on a node in the worker process's
session.

A worker process keeps one :class:`~kueri.session.Session` per run it serves (:data:`WORKER_SESSIONS` at most): it is
handed, through the session's own API, the driver's indexes (opened where the node sees them, or unpacked from the
copies that travelled) and its encoders, which read the driver's embedding stores where the node sees them and never
write them (:class:`~kueri.encoders.stored.StoredEncoder` ``writes=False``: what they embed goes back with the
task's run). Its run context says one worker (a task has one CPU) and no work folder: nothing is built or written on a
node.
"""

from __future__ import annotations

import io
import resource
import shutil
import tarfile
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kueri.errors import EmptyRun, EnvironmentProblem
from kueri.files import file_lock
from kueri.records import Run, Topic
from kueri.runcontext import RunContext
from kueri.session import Session

if TYPE_CHECKING:
    from kueri.config import RunConfig
    from kueri.lucene import AnalyzerConfig

#: Sessions a worker process keeps (one per run it serves; the oldest is closed).
WORKER_SESSIONS = 2


@dataclass(frozen=True)
class Job:
    """What every task of one run shares (it travels once through the object store)."""

    config: RunConfig
    corpus: str  # named in messages only: the nodes read the indexes, never the corpus
    indexes: tuple[tuple[AnalyzerConfig, str, str], ...]  # analyzer, the driver's index folder, its ids' digest
    packed: tuple[Any, ...]  # with --ray-copy-index: an object ref per index, its folder as a tar
    workdir: str  # the driver's work folder: its embedding stores are read where a node sees them
    encoders: tuple[str, ...]  # the encoders whose passage embeddings the stages read
    skip_bad: bool


@dataclass
class Done:
    """What a task sends back."""

    run: Run
    embedded: dict[str, tuple[list[bytes], bytes]]  # encoder -> the passages it embedded: digests, float32 bytes
    kernels: str  # the node's kernel class ("" when no encoder was used)
    started: float  # wall clock (time.time) on the node: when it began and ended, for how many ran at once
    ended: float
    cpu: float  # CPU seconds of the worker process in the task (every thread: the JVM's, onnxruntime's)
    peak_mb: float  # the worker process's peak resident memory so far


_SESSIONS: OrderedDict[tuple[Any, ...], Session] = OrderedDict()


def _session_of(job: Job) -> Session:
    """This worker process's session for ``job``'s run, made on its first task."""
    from kueri import encoders
    from kueri.lucene import LuceneIndex

    key = (job.corpus, job.indexes, job.workdir, job.encoders, job.skip_bad)
    if key not in _SESSIONS:
        indexes = {analyzer: LuceneIndex(_node_index(path, ids, packed)) for (analyzer, path, ids), packed
                   in zip(job.indexes, job.packed or [None] * len(job.indexes), strict=True)}
        given = {name: encoders.get(name).stored(job.workdir, threads=1, writes=False) for name in job.encoders}
        # a task has one CPU: the stance labels in this process, never in a pool; no work folder: nothing is written
        context = RunContext(progress=False, skip_bad=job.skip_bad, workers=1)
        _SESSIONS[key] = Session(job.corpus, context, indexes=indexes, encoders=given)
        while len(_SESSIONS) > WORKER_SESSIONS:
            _SESSIONS.popitem(last=False)[1].close()
    return _SESSIONS[key]


def run_batch(batch: tuple[int, list[Topic], Run | None], job: Job) -> Done:
    """On a Ray worker: the run of one batch of topics (given candidates: of theirs), and the passage embeddings it
    computed. An empty run is no error here (the batch's topics may all retrieve nothing): the driver checks the whole
    run."""
    from kueri import encoders

    started, cpu = time.time(), time.process_time()
    _, topics, given = batch
    session = _session_of(job)
    encoders_here = session.encoders()
    for encoder in encoders_here.values():
        encoder.begin()
    try:
        run = session.run(job.config, topics) if given is None else session.run_given(job.config, given, topics)
    except EmptyRun:
        run = {}
    finally:
        session.forget_runs()
    embedded = {name: encoder.take_new() for name, encoder in encoders_here.items()}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB on Linux
    return Done(run, {name: new for name, new in embedded.items() if new[0]},
                encoders.kernel_class() if job.encoders else "", started, time.time(), time.process_time() - cpu, peak)


def _node_index(path: str, ids: str, packed: Any) -> str:
    """The folder of an index on this node: the driver's own where this node sees it (the same ids), else the copy
    that travelled (``packed``), unpacked once per node into its temp folder."""
    from kueri.lucene.vectors import ids_digest

    if packed is None:
        if not Path(path).is_dir():
            raise EnvironmentProblem(f"{path}: this Ray node does not see the index (give a work folder every node "
                                     "sees, or --ray-copy-index)")
        return path
    root = Path(tempfile.gettempdir()) / "kueri-ray-indexes"
    target = root / f"{Path(path).name}-{ids[:16]}"
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / f"{target.name}.lock", f"the copy of {path}"):
        if target.is_dir() and ids_digest(target / Path(path).name) == ids:
            return str(target / Path(path).name)
        shutil.rmtree(target, ignore_errors=True)
        partial = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=root))
        import ray

        data = packed if isinstance(packed, bytes) else ray.get(packed)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            tar.extractall(partial, filter="data")
        partial.rename(target)
    return str(target / Path(path).name)
