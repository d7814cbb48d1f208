"""workers: the shards of a build made by worker processes, each with a JVM of its own (a :class:`ShardExecutor`).

The fallback where kueri's Java helper cannot be compiled (a JRE without ``javac``): pyjnius makes every
Java call from one thread, so without the helper one process indexes on one core. Each worker
(``python -c`` running :func:`_worker_main`, heap ``KUERI_WORKER_HEAP``) builds the chunks it is
given with :func:`~kueri.lucene.shards.build_shard`, fed pickled batches through a pipe by a thread
of this process, the one with the least work queued; at the end a worker joins the shards, so this
process never starts a JVM for the build. A worker dies with its parent (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import kueri
from kueri.errors import KueriError
from kueri.lucene.analyze import AnalyzerConfig
from kueri.lucene.jvm import lucene
from kueri.lucene.shards import BATCH, Triple, build_shard, join_shards

#: A worker's maximum heap: a 50k-passage chunk needs ~70 MB of indexing buffer; the rest keeps
#: the garbage collector calm. Two workers stay well under 2 GB of resident memory together.
DEFAULT_WORKER_HEAP = "512m"
#: Extra JVM options of a worker (``KUERI_WORKER_JVM_OPTIONS`` replaces them), given through
#: ``JAVA_TOOL_OPTIONS``: C2 only, far less JIT work for the same speed once warm (docs/benchmarks.md).
DEFAULT_WORKER_JVM_OPTIONS = "-XX:-TieredCompilation"
#: What a worker process runs (its argument: the parent's pid).
WORKER_SCRIPT = "import sys; from kueri.lucene.workers import _worker_main; sys.exit(_worker_main(int(sys.argv[1])))"
#: Put in a worker's inbox: close its pipe (it exits once its chunks are built).
_CLOSE = object()


class WorkerProcesses:
    """A :class:`~kueri.lucene.shards.ShardExecutor`: ``workers`` processes, started once a build is sure to
    need more than one chunk."""

    small_here = True
    java_exception = ()  # no Java in this process

    def __init__(self, workers: int, analyzer_config: AnalyzerConfig, ram_buffer_mb: float, chunk_size: int) -> None:
        self.workers, self.analyzer_config, self.ram_buffer_mb, self.chunk_size = (workers, analyzer_config,
                                                                                   ram_buffer_mb, chunk_size)
        self.build = {"workers": workers, "on": "worker processes"}
        self.pool: _WorkerPool | None = None
        self.worker: _Worker | None = None

    def expect_many(self) -> None:
        self.pool = _WorkerPool(self.workers, self.analyzer_config, self.ram_buffer_mb, self.chunk_size)

    def open(self) -> None:
        assert self.pool is not None  # a whole chunk was read, so expect_many came first

    def start_chunk(self, number: int, directory: Path) -> None:
        self.worker = self._pool.start_chunk(number, directory)

    def add(self, batch: list[Triple]) -> None:
        self._pool.send_batch(self._worker, batch)

    def finish_chunk(self) -> None:
        self._pool.send(self._worker, None)  # the end of the chunk

    def wait(self, indexed: int) -> None:
        done = self._pool.wait_for_chunks()
        if sum(d[0] for d in done.values()) != indexed:
            raise KueriError(f"the shards hold {sum(d[0] for d in done.values())} passages, {indexed} were sent")

    def join(self, target: Path, shard_dirs: Sequence[Path]) -> None:
        self._pool.join(target, shard_dirs)

    def close(self) -> None:
        self._pool.close()

    def abort(self) -> None:
        if self.pool is not None:
            self.pool.kill()

    @property
    def _pool(self) -> _WorkerPool:
        assert self.pool is not None
        return self.pool

    @property
    def _worker(self) -> _Worker:
        assert self.worker is not None
        return self.worker


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
        # Not ``python -m kueri.lucene.workers``: runpy warns when a package's __init__ has imported the module.
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
