"""A run's topics as tasks of a Ray cluster: ``kueri run``, ``kueri tira`` and ``kueri rerank`` with ``--ray``.

The driver (this process) connects first (an unreachable cluster is one line before any work), builds or reuses the
indexes the configuration searches in its work folder, and cuts the topics (for given candidates: the candidates'
topics, in their order) into batches of at most ``--ray-batch``. Each batch is one task that applies the
configuration's stages after the index (first stage, second stage, quality, stance) to its topics on a node, in a
:class:`~kueri.session.Session` over the driver's open indexes: every stage works topic by topic (a topic's hits,
features, embeddings and labels do not depend on the other topics), so the batches' runs joined in batch order are
the local run, and the file is byte for byte the local command's. A stage that lists topics by number instead of in
the topics' order (``orders_topics``: feedback, fusion, quality) is followed: the joined run is then sorted as it
sorts.

Nodes open the indexes where the driver built them: the work folder must be a folder every node sees (as
``kueri index --shard-dir``), or, with ``--ray-copy-index``, each index travels once through Ray's object store and
each node unpacks it once into its own temp folder. Models load from each node's own install, as for ``kueri embed
--ray``; a node whose CPU computes the encoders with another kernel class than the driver's is refused.

Passage embeddings: a task reads the encoders' stores in the driver's work folder where its node sees them (so a
passage the driver already holds is never embedded again), embeds what is missing, and sends the new vectors back;
the driver appends them to its one store through the store's normal append path (a few chunks at a time, not one per
task). Nodes never write to the work folder.

Failures: Ray runs a task again when its worker (or node) dies (:data:`~kueri.scaleout.TASK_RETRIES`); a task only
returns values, so running it twice is harmless. Each finished batch is kept in the work folder
(``ray-run-<key>/``) as it comes back: the same command after a lost driver, ^C or a lost cluster runs only the
batches not finished, and the run file is written atomically once every batch is back.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import shutil
import tarfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from kueri.errors import EnvironmentProblem, KueriError
from kueri.files import write_bytes_atomic
from kueri.indexes import corpus_fingerprint
from kueri.ray_tasks import Done, Job, run_batch
from kueri.records import Hit, Run, Topic, topic_key
from kueri.scaleout import RAY_BATCH
from kueri.session import Session, validate_run
from kueri.stages.given import given_stages
from kueri.stages.plan import Plan

if TYPE_CHECKING:
    from kueri.config import RunConfig
    from kueri.lucene import LuceneIndex

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Passages embedded on the nodes are appended to the driver's store this many at a time (fewer, larger chunks).
APPEND_PASSAGES = 512


@dataclass
class RayRun:
    """How a run goes on Ray: the cluster's ``address``, topics per task, whether the indexes travel to the nodes.
    ``journal`` is the folder of the finished batches of the run under way (set by :func:`run_on_ray`); the command
    removes it with :meth:`forget` once the run file is written."""

    address: str
    batch: int = RAY_BATCH
    copy_index: bool = False
    journal: Path | None = field(default=None, repr=False)

    def run(self, session: Session, config: RunConfig, topics: list[Topic], candidates: Run | None = None) -> Run:
        """:func:`run_on_ray` (a session made with this as its ``elsewhere`` asks it for its runs)."""
        return run_on_ray(session, config, topics, self, candidates)

    def forget(self) -> None:
        if self.journal is not None:
            shutil.rmtree(self.journal, ignore_errors=True)
            self.journal = None


# -- the driver -----------------------------------------------------------------------------------------------------


def run_on_ray(session: Session, config: RunConfig, topics: list[Topic], ray_run: RayRun,
               candidates: Run | None = None) -> Run:
    """``session.run(config, topics)`` (``candidates``: ``session.run_given(config, candidates, topics)``) with the
    topics as tasks of the Ray cluster at ``ray_run.address``: the same run, validated."""
    from kueri.scaleout import connect

    if ray_run.batch < 1:
        raise KueriError(f"--ray-batch must be at least 1, not {ray_run.batch}")
    ray = connect(ray_run.address)  # before any work: an unreachable cluster is one line at once
    plan = config.plan() if candidates is None else Plan(given_stages(config, candidates))
    indexes = {analyzer: session.index(analyzer) for analyzer in plan.indexes()}
    plan.prepare(session.context(topics))  # a dense search's vectors, made here when missing (kueri embed: on Ray)
    packed = tuple(ray.put(_pack(index.path)) for index in indexes.values()) if ray_run.copy_index else ()
    job = Job(config, str(session.corpus), tuple((a, str(i.path), _ids_digest(i)) for a, i in indexes.items()),
              packed, str(session.workdir), tuple(sorted(plan.encoders())), session.run_context.skip_bad)

    by_number = {topic.number: topic for topic in topics}
    order = list(candidates) if candidates is not None else list(dict.fromkeys(t.number for t in topics))
    batches = [order[start : start + ray_run.batch] for start in range(0, len(order), ray_run.batch)]
    key = _run_key(config, topics, corpus_fingerprint(session.corpus), candidates, ray_run.batch, job)
    ray_run.journal = session.workdir / f"ray-run-{key}"
    finished = _finished(ray_run.journal, len(batches))
    if finished:
        log.info("Ray run: %d of %d batches finished before, kept in %s", len(finished), len(batches),
                 ray_run.journal)

    def payload(number: int) -> tuple[int, list[Topic], Run | None]:
        qids = batches[number]
        given = {qid: candidates[qid] for qid in qids} if candidates is not None else None
        return number, [by_number[qid] for qid in qids], given

    todo = (payload(number) for number in range(len(batches)) if number not in finished)
    results = dict(finished)
    stats = _Stats()
    for number, done in _dispatch(ray, ray_run, job, todo, len(order), sum(len(batches[n]) for n in finished),
                                  session.run_context.progress, stats):
        _save(ray_run.journal, number, done.run)
        results[number] = done.run
    merged: Run = {}
    for number in range(len(batches)):
        merged.update(results[number])
    if plan.orders_topics():
        merged = {qid: merged[qid] for qid in sorted(merged, key=topic_key)}
    validate_run(merged, topics, config.hits)
    log.info("Ray run: %d topics in %d tasks (%d finished before) on %s; %s", len(order), stats.tasks,
             len(finished), ray_run.address, stats.summary())
    return merged


@dataclass
class _Stats:
    """What the tasks of a run reported: how long, how many at once (by the nodes' clocks), memory, embeddings."""

    spans: list[tuple[float, float]] = field(default_factory=list)
    cpu: float = 0.0
    topics: int = 0
    peak_mb: float = 0.0
    embedded: int = 0

    def add(self, done: Done) -> None:
        self.spans.append((done.started, done.ended))
        self.cpu += done.cpu
        self.topics += len(done.run)
        self.peak_mb = max(self.peak_mb, done.peak_mb)
        self.embedded += sum(len(digests) for digests, _ in done.embedded.values())

    @property
    def tasks(self) -> int:
        return len(self.spans)

    def at_once(self) -> int:
        """The most tasks that ran at the same time."""
        events = sorted([(start, 1) for start, _ in self.spans] + [(end, -1) for _, end in self.spans])
        running = most = 0
        for _, change in events:  # an end sorts before a start at the same instant
            running += change
            most = max(most, running)
        return most

    def summary(self) -> str:
        mean = sum(end - start for start, end in self.spans) / self.tasks if self.tasks else 0.0
        per_topic = self.cpu / self.topics if self.topics else 0.0
        return (f"{mean:.1f} s a task on average, {per_topic:.2f} CPU s a topic, at most {self.at_once()} at once, "
                f"worker memory at most "
                f"{self.peak_mb:.0f} MB, {self.embedded} passages embedded on the nodes")


def _dispatch(ray: Any, ray_run: RayRun, job: Job, todo: Iterator[tuple[int, list[Topic], Run | None]],
              topics: int, done_before: int, progress: bool, stats: _Stats) -> Iterator[tuple[int, Done]]:
    """Every batch of ``todo`` as a task, at most twice the cluster's CPUs in flight; each result as it comes back
    (any order), its embeddings in the store first. The bar counts topics done across the cluster."""
    from kueri import encoders
    from kueri.progress import progress_bar
    from kueri.scaleout import TASK_RETRIES, cluster_cpus

    task = ray.remote(max_retries=TASK_RETRIES, num_cpus=1)(run_batch)
    job_ref = ray.put(job)
    window = 2 * cluster_cpus(ray)
    here = encoders.kernel_class() if job.encoders else ""
    appender = _Appender(job.workdir, job.encoders)
    pending: dict[Any, tuple[int, list[Topic]]] = {}
    bar = progress_bar("topics on Ray", "topics", progress, total=topics, initial=done_before)
    # A stopped run cancels none of its tasks still in flight: Ray ends them when the driver leaves, and a cancel
    # racing a task's reply aborts the driver in Ray's core worker (ray 2.60, task_manager.cc: "Tried to complete
    # task that was not pending"; 1 stop in 12 with force=True, 4 in 20 without, none in 45 with no cancel).
    try:
        while True:
            while len(pending) < window and (item := next(todo, None)) is not None:
                number, batch_topics, given = item
                pending[task.remote((number, batch_topics, given), job_ref)] = (number, batch_topics)
            if not pending:
                return
            # a timeout, so that ^C and SIGTERM reach this thread while every task is still running
            ready, _ = _signalled(lambda: ray.wait(list(pending), num_returns=1, timeout=1.0))
            for ref in ready:
                number, batch_topics = pending.pop(ref)
                done = _result(ray, ref, batch_topics, ray_run.address)
                if done.kernels and done.kernels != here:
                    raise KueriError(f"a Ray worker's CPU computes the encoders with {done.kernels} kernels, this "
                                     f"machine with {here}: its embeddings would differ in the last bits; use nodes "
                                     "of one kind")
                appender.add(done.embedded)
                stats.add(done)
                bar.update(len(batch_topics))
                yield number, done
    finally:
        appender.flush()
        bar.close()


def _signalled(call: Callable[[], T]) -> T:
    """``call()``, a Ray call; ^C or SIGTERM during it raised as such. A signal handler's exception raised while Ray's
    C code runs comes back as a SystemError ("returned a result with an exception set") whose cause it is."""
    try:
        return call()
    except SystemError as exc:
        if isinstance(exc.__cause__, BaseException) and not isinstance(exc.__cause__, Exception):
            raise exc.__cause__ from None
        raise


def _result(ray: Any, ref: Any, topics: list[Topic], address: str) -> Done:
    """A task's result; its failure as one line naming its topics (a kueri error keeps its own message)."""
    import ray.exceptions as errors

    which = f"topics {topics[0].number}-{topics[-1].number}" if len(topics) > 1 else f"topic {topics[0].number}"
    try:
        return _signalled(lambda: ray.get(ref))
    except errors.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, KueriError):  # its own message and exit code, naming the topics
            error = KueriError(f"{which} on Ray: {cause}")
            error.exit_code = cause.exit_code
            raise error from None
        raise KueriError(f"{which} on Ray: {type(cause).__name__ if cause else 'the task'} failed: {cause}") from None
    except errors.WorkerCrashedError:
        from kueri.scaleout import TASK_RETRIES

        raise EnvironmentProblem(f"{which} on Ray: its worker died {TASK_RETRIES + 1} times") from None
    except errors.RayError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise EnvironmentProblem(f"{which}: lost the Ray cluster at {address}: {first}") from None


class _Appender:
    """The driver's stores, getting the nodes' embeddings through their normal add path, a chunk of
    :data:`APPEND_PASSAGES` at a time (what a lost driver loses at most: the next run embeds them again)."""

    def __init__(self, workdir: str, names: Iterable[str]) -> None:
        from kueri import encoders

        self._stores = {name: encoders.get(name).store(workdir) for name in names}
        self._waiting: dict[str, dict[bytes, np.ndarray]] = {name: {} for name in self._stores}

    def add(self, embedded: dict[str, tuple[list[bytes], bytes]]) -> None:
        for name, (digests, data) in embedded.items():
            store = self._stores[name]
            vectors = np.frombuffer(data, dtype=np.float32).reshape(len(digests), store.dimension)
            waiting = self._waiting[name]
            for digest, vector in zip(digests, vectors, strict=True):
                waiting.setdefault(digest, vector)
            if len(waiting) >= APPEND_PASSAGES:
                self._append(name)

    def flush(self) -> None:
        for name in self._stores:
            self._append(name)

    def _append(self, name: str) -> None:
        waiting = self._waiting[name]
        if waiting:
            self._stores[name].add(list(waiting), np.stack(list(waiting.values())))
        waiting.clear()


def _ids_digest(index: LuceneIndex) -> str:
    from kueri.lucene.vectors import ids_digest

    return ids_digest(index.path)


def _run_key(config: RunConfig, topics: list[Topic], corpus: Any, candidates: Run | None, batch: int,
             job: Job) -> str:
    """What decides a run's batches: a finished batch is reused only under the same key."""
    digest = hashlib.sha256()
    for part in (repr(config), repr(topics), json.dumps(corpus, sort_keys=True), str(batch),
                 repr([(path, ids) for _, path, ids in job.indexes])):
        digest.update(part.encode())
        digest.update(b"\0")
    if candidates is not None:
        for qid, hits in candidates.items():
            digest.update(f"{qid}\t{' '.join(f'{h.doc}:{h.score!r}:{h.stance}' for h in hits)}\n".encode())
    return digest.hexdigest()[:16]


def _save(journal: Path, number: int, run: Run) -> None:
    journal.mkdir(parents=True, exist_ok=True)
    rows = [[qid, [[hit.doc, hit.score, hit.stance] for hit in hits]] for qid, hits in run.items()]
    write_bytes_atomic(journal / f"batch-{number:06d}.json", json.dumps(rows).encode())


def _finished(journal: Path, batches: int) -> dict[int, Run]:
    """The batches a former run of the same key finished (a damaged file is run again)."""
    found: dict[int, Run] = {}
    if not journal.is_dir():
        return found
    for path in sorted(journal.glob("batch-*.json")):
        try:
            number = int(path.stem.removeprefix("batch-"))
            rows = json.loads(path.read_text())
            run = {qid: [Hit(doc, float(score), stance) for doc, score, stance in hits] for qid, hits in rows}
        except (OSError, ValueError, TypeError) as exc:
            log.warning("%s: unreadable (%s), its topics are run again", path, exc)
            continue
        if 0 <= number < batches:
            found[number] = run
    return found


def _pack(folder: Path) -> bytes:
    """An index folder as an uncompressed tar (its files are compressed already)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(folder, arcname=folder.name)
    return buffer.getvalue()
