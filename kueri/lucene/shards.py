"""shards: build an index on several cores as contiguous shards joined in corpus order.

pyjnius must make every Java call from one thread, and Lucene's ``addDocument`` runs in the
calling thread, so one process indexes on one core. To use more, the corpus is cut into
contiguous **chunks** (``chunk_passages`` passages each, 50,000 by default), each chunk is indexed
into its own **shard** by a worker process (its own Python and JVM, heap ``KUERI_WORKER_HEAP``,
512m by default), and the shards' segments are joined in chunk order into one index of the
format :mod:`kueri.lucene.index` documents. Scores do not depend on how an index is cut into segments
(BM25, LM and TF-IDF take index-wide statistics) and doc ids follow the order of the segments, so
the joined index has the same doc ids as one writer would give: the same scores and the same
ties, in corpus order (the tests compare every ranking with a sequential build's).

Who does what:

* this process reads the corpus (:class:`~kueri.parse.PassageReader` as always: the same
  validation, duplicate check, skip counts and ``file:line`` errors), writes ``ids.txt`` and streams
  batches of passages to the worker of the current chunk, the one with the least work queued;
  each worker's queue holds a whole chunk, so that both work while this process streams the next;
* a worker (``python -c`` running :func:`_worker_main`) builds each chunk it is given with
  :func:`build_shard` (a complete kueri index of that part, whose segment names are unique to the
  chunk) and acknowledges batches as Lucene takes them;
* at the end a worker joins the shards with :func:`join_shards`: their segment files are moved,
  not copied, and one commit point lists them in chunk order. The index is published atomically,
  like a sequential build; this process never starts a JVM of its own for it.

A worker dies with its parent (``PR_SET_PDEATHSIG``), so a killed build leaves no process behind
and no complete index. A corpus of at most one chunk is indexed in this process, as before.

For scale-out, :func:`build_shard` is a function of (passages of a corpus part, shard directory,
analyzer config) with no shared state; :func:`merge_indexes` joins finished shards into one index
(``IndexWriter.addIndexes``, which copies) and :func:`kueri.lucene.index.open_shards` searches a list of shards as one
(a ``MultiReader``) without joining them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path
from typing import IO, Any

import kueri
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
    start_partial,
    write_manifest,
)
from kueri.records import Passage

log = logging.getLogger(__name__)

#: Passages per chunk (= per shard). Each shard becomes one segment of the joined index (a chunk
#: needs ~70 MB of RAM buffer); at the end one worker may still build while the other is done,
#: which a smaller chunk shortens and more segments pay for in search.
DEFAULT_CHUNK = 50_000
#: Passages per message to a worker (~1 MB).
BATCH = 1000
#: A worker's maximum heap: a 50k-passage chunk needs ~70 MB of indexing buffer; the rest keeps
#: the garbage collector calm. Two workers stay well under 2 GB of resident memory together.
DEFAULT_WORKER_HEAP = "512m"
#: Extra JVM options of a worker (``KUERI_WORKER_JVM_OPTIONS`` replaces them), given through
#: ``JAVA_TOOL_OPTIONS``. Without tiered compilation the JIT compiles far less (C2 only: 2.7 s of
#: CPU instead of 8.3 s per JVM on 200k passages) for the same indexing speed once warm; with one
#: JVM per worker that is a large share of a build (868k passages: 116 s -> 90 s of CPU in all).
DEFAULT_WORKER_JVM_OPTIONS = "-XX:-TieredCompilation"
SHARDS_SUBDIR = "shards"
#: Segment numbers reserved per shard (a 50k-passage shard writes 1 segment; this allows millions).
SEGMENTS_PER_SHARD = 1 << 24
#: What a worker process runs (its argument: the parent's pid).
WORKER_SCRIPT = "import sys; from kueri.lucene.shards import _worker_main; sys.exit(_worker_main(int(sys.argv[1])))"
#: Put in a worker's inbox: close its pipe (it exits once its chunks are built).
_CLOSE = object()

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
class _Worker:
    number: int
    process: subprocess.Popen[bytes]
    inbox: queue.Queue[Any]
    sent: int = 0  # passages sent
    acked: int = 0  # passages Lucene has taken
    threads: list[threading.Thread] = field(default_factory=list)

    @property
    def backlog(self) -> int:
        return self.sent - self.acked


class _WorkerPool:
    """Worker processes fed through pipes by one writer thread each (pickled messages).

    The threads only move bytes (no Java calls, so pyjnius' one-thread rule holds); the bounded
    inboxes hold this process back when the workers are busy, keeping memory flat.
    """

    def __init__(self, count: int, analyzer_config: AnalyzerConfig, ram_buffer_mb: float, chunk_size: int) -> None:
        self.events: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.workers: list[_Worker] = []
        self.done: dict[int, tuple[int, int, float]] = {}
        self.chunks = 0
        self.joined = False
        heap = os.environ.get("KUERI_WORKER_HEAP", DEFAULT_WORKER_HEAP)
        package_root = str(Path(kueri.__file__).resolve().parent.parent)
        env = {**os.environ, "KUERI_HEAP": heap}
        jvm_options = os.environ.get("KUERI_WORKER_JVM_OPTIONS", DEFAULT_WORKER_JVM_OPTIONS)
        if jvm_options:
            env["JAVA_TOOL_OPTIONS"] = f"{env.get('JAVA_TOOL_OPTIONS', '')} {jvm_options}".strip()
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        # Not ``python -m kueri.lucene.shards``: runpy warns when a package's __init__ has imported the module.
        command = [sys.executable, "-c", WORKER_SCRIPT, str(os.getpid())]
        for number in range(count):
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
            # Room for a whole chunk (~60 MB): this process streams one chunk at a time, so while it
            # streams chunk k to one worker, the other must still hold all of chunk k-1 to work on.
            # With less, the workers would take turns instead of working side by side.
            worker = _Worker(number, process, queue.Queue(maxsize=chunk_size // BATCH + 2))
            worker.inbox.put(("config", analyzer_config, ram_buffer_mb))
            worker.threads = [
                threading.Thread(target=self._feed, args=(worker,), daemon=True),
                threading.Thread(target=self._listen, args=(worker,), daemon=True),
            ]
            for thread in worker.threads:
                thread.start()
            self.workers.append(worker)

    def _feed(self, worker: _Worker) -> None:
        stdin = worker.process.stdin
        assert stdin is not None
        try:
            while True:
                message = worker.inbox.get()
                if message is _CLOSE:
                    break
                pickle.dump(message, stdin, protocol=pickle.HIGHEST_PROTOCOL)
                stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the worker is gone; its exit is reported by _listen / check()
        finally:
            with contextlib.suppress(OSError):
                stdin.close()

    def _listen(self, worker: _Worker) -> None:
        stdout = worker.process.stdout
        assert stdout is not None
        while True:
            try:
                message = pickle.load(stdout)  # one Unpickler per message: see _worker_main
            except (EOFError, OSError, pickle.UnpicklingError):
                self.events.put(("exit", worker.number))
                return
            if message[0] == "ack":
                worker.acked += message[1]  # only this thread writes it; the main thread reads
            else:
                self.events.put(message)

    def check(self, block: float = 0.0) -> None:
        """Handle workers' reports; raise KueriError when a worker failed or died."""
        while True:
            try:
                event = self.events.get(timeout=block) if block else self.events.get_nowait()
            except queue.Empty:
                return
            block = 0.0
            if event[0] == "done":
                _, chunk, indexed, expanded, seconds = event
                self.done[chunk] = (indexed, expanded, seconds)
            elif event[0] == "joined":
                self.joined = True
            elif event[0] == "error":
                raise KueriError(event[2] if event[1] == "join" else f"indexing chunk {event[1]} failed: {event[2]}")
            elif event[0] == "exit":  # stdout closed: after its last chunk, or a crash
                worker = self.workers[event[1]]
                code = worker.process.wait()
                if code != 0:
                    raise KueriError(f"indexing worker {worker.number} stopped (exit status {code})")

    def send(self, worker: _Worker, message: Any) -> None:
        while True:
            try:
                worker.inbox.put(message, timeout=0.5)
                return
            except queue.Full:
                self.check()
                if worker.process.poll() is not None:
                    self.check(block=1.0)
                    code = worker.process.poll()
                    raise KueriError(f"indexing worker {worker.number} stopped (exit status {code})") from None

    def start_chunk(self, chunk: int, shard_dir: Path) -> _Worker:
        """Give chunk ``chunk`` to the worker with the least queued work."""
        self.check()
        worker = min(self.workers, key=lambda w: w.backlog)
        self.send(worker, ("chunk", chunk, str(shard_dir)))
        self.chunks += 1
        return worker

    def send_batch(self, worker: _Worker, batch: list[Triple]) -> None:
        worker.sent += len(batch)
        self.send(worker, batch)

    def wait_for_chunks(self) -> dict[int, tuple[int, int, float]]:
        """Wait until every chunk given out is built (or raise)."""
        while len(self.done) < self.chunks:
            self.check(block=1.0)
            if any(w.process.poll() is not None for w in self.workers):
                self.check(block=1.0)  # its "error" or "exit" report, if still on the way
                raise KueriError("an indexing worker stopped before all chunks were built")
        return self.done

    def join(self, target: Path, shard_dirs: Sequence[Path]) -> None:
        """Have a worker (its JVM is warm; this process need not start one) join the shards."""
        self.send(self.workers[0], ("join", str(target), [str(d) for d in shard_dirs]))
        while not self.joined:
            self.check(block=1.0)
            if self.workers[0].process.poll() is not None:
                self.check(block=1.0)
                raise KueriError("the indexing worker stopped while joining the shards")

    def close(self) -> None:
        """Let the workers exit (end of their input) and wait for them."""
        for worker in self.workers:
            self.send(worker, _CLOSE)
        for worker in self.workers:
            code = worker.process.wait()
            for thread in worker.threads:
                thread.join(timeout=5)
            if code != 0:
                raise KueriError(f"indexing worker {worker.number} ended with exit status {code}")

    def kill(self) -> None:
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.process.kill()
        for worker in self.workers:
            worker.process.wait()
            with contextlib.suppress(queue.Full):  # ends its feeding thread
                worker.inbox.put_nowait(_CLOSE)


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


def build_parallel(
    passages: Iterable[Passage],
    index_dir: Path,
    analyzer_config: AnalyzerConfig,
    *,
    workers: int,
    chunk_passages: int | None = None,
    ram_buffer_mb: float = 256.0,
    progress: bool = True,
    metadata: dict[str, Any] | None = None,
) -> IndexStats:
    """:func:`kueri.lucene.build.build_index` with ``workers`` processes (see the module docstring)."""
    chunk_size = resolve_chunk(chunk_passages)
    started = time.perf_counter()
    iterator = iter(passages)
    # A corpus of one chunk or less is indexed here: starting workers would cost more than it
    # saves. The workers start (Python, JVM, analyzer: ~1 s) once a quarter of the first chunk is
    # read, so that they are ready when it is complete; a corpus that ends before lets them go.
    first = list(islice(iterator, max(1, chunk_size // 4)))
    pool = None
    if len(first) == max(1, chunk_size // 4):
        pool = _WorkerPool(workers, analyzer_config, ram_buffer_mb, chunk_size)
        try:
            first.extend(islice(iterator, chunk_size - len(first)))
        except BaseException:
            pool.kill()
            raise
    if len(first) < chunk_size or pool is None:
        if pool is not None:
            pool.kill()
        return build_sequential(first, index_dir, analyzer_config, ram_buffer_mb=ram_buffer_mb,
                                progress=progress, metadata=metadata)

    partial = start_partial(index_dir)
    shards_dir = partial / SHARDS_SUBDIR
    counts = FeedCounts()
    bar = indexing_bar(progress)
    chunk, worker = -1, None
    try:
        with open(partial / IDS_FILE, "w", encoding="utf-8") as ids:
            for number, batch in numbered_batches(chain(first, iterator), chunk_size, ids, counts, bar):
                if worker is None or number != chunk:
                    if worker is not None:
                        pool.send(worker, None)  # the end of the previous chunk
                    chunk = number
                    worker = pool.start_chunk(chunk, shards_dir / f"{chunk:05d}")
                pool.send_batch(worker, batch)
            if worker is not None:
                pool.send(worker, None)
        del first
        bar.close()
        indexed, expanded = counts.indexed, counts.expanded
        log.info("indexing the last chunks, then joining %d shards of %d passages ...", chunk + 1, indexed)
        done = pool.wait_for_chunks()
        if sum(d[0] for d in done.values()) != indexed:
            raise KueriError(f"the shards hold {sum(d[0] for d in done.values())} passages, {indexed} were sent")
        pool.join(partial, [shards_dir / f"{k:05d}" for k in range(chunk + 1)])
        pool.close()
        shutil.rmtree(shards_dir)
    except BaseException as exc:
        bar.close()
        pool.kill()
        shutil.rmtree(partial, ignore_errors=True)  # shards are big: leave nothing half-built
        error = failed_build(exc, index_dir, counts.indexed)  # no Java in this process
        if error is None:
            raise
        raise error from exc

    seconds = time.perf_counter() - started
    build = {"workers": workers, "on": "worker processes", "shards": chunk + 1, "chunk_passages": chunk_size}
    write_manifest(partial, analyzer_config, indexed, expanded, seconds, {**(metadata or {}), "build": build})
    publish(partial, index_dir)
    return IndexStats(indexed, seconds, directory_size(index_dir), expanded)


# --- the worker process ------------------------------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a killed build leaves no worker)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the closed pipe still ends the worker
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _warm_up(analyzer_config: AnalyzerConfig) -> None:
    """Start the JVM and load the classes of a build while the parent still reads the first chunk."""
    from kueri.lucene.analyze import build_analyzer

    # The JVM announces JAVA_TOOL_OPTIONS on stderr when it starts ("Picked up ..."): not news
    # for the user, so stderr is muted for that moment only.
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            L = lucene()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    build_analyzer(analyzer_config)
    for name in ("IndexWriter", "IndexWriterConfig", "FSDirectory", "Document", "Field", "FieldType", "StringField",
                 "FieldStore", "IndexOptions", "LogByteSizeMergePolicy", "OpenMode", "File"):
        getattr(L, name)


def _worker_main(parent: int) -> int:
    _die_with_parent(parent)
    # The protocol owns the real stdout; anything printed (Python or Java) goes to stderr.
    out: IO[bytes] = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stdin = sys.stdin.buffer

    def load() -> Any:
        # A fresh Unpickler per message, as the sender pickles each message with a fresh Pickler:
        # a reused Unpickler keeps its memo, and the next message's memo references would resolve
        # to the previous messages' objects.
        return pickle.load(stdin)

    def report(message: tuple[Any, ...]) -> None:
        pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()

    _, analyzer_config, ram_buffer_mb = load()
    _warm_up(analyzer_config)
    while True:
        try:
            message = load()
        except EOFError:
            return 0
        if message[0] == "join":
            try:
                join_shards(Path(message[1]), [Path(d) for d in message[2]])
            except BaseException as exc:
                report(("error", "join", str(exc) or type(exc).__name__))
                return 1
            report(("joined",))
            continue
        _, chunk, shard_dir = message

        def part() -> Iterable[Triple]:
            while True:
                batch = load()
                if batch is None:
                    return
                yield from batch
                report(("ack", len(batch)))  # resumed: Lucene has taken the whole batch

        try:
            stats = build_shard(part(), shard_dir, analyzer_config, ram_buffer_mb=ram_buffer_mb, number=chunk)
        except BaseException as exc:  # report it; the parent stops the build
            if not isinstance(exc, KueriError):
                traceback.print_exc()  # to stderr, which is the parent's
            report(("error", chunk, str(exc) or type(exc).__name__))
            return 1
        report(("done", chunk, stats.indexed, stats.expanded, stats.seconds))
