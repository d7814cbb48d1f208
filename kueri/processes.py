"""Work spread over this machine's cores: how many workers, worker processes, results in input order.

A worker is a fresh Python started as ``python -c <bootstrap> kueri-worker`` that speaks over two pipes of
its own (tasks in, results out, pickled frames of :mod:`multiprocessing.connection`). It imports kueri and
whatever a task names, and never the caller's ``__main__``: multiprocessing's ``spawn`` re-imports a
script's top level in every worker, so an unguarded user script (as PyTerrier's examples are written) was
re-run there and the pool hung. It is started by exec (safe beside a running JVM, which a fork is not).

A reader thread per worker drains its results, so neither side ever waits on a full pipe, and a worker
that dies (killed, out of memory, a broken interpreter) ends its pipe: the caller gets a
:class:`~kueri.errors.KueriError` at once, the other workers are killed, and none outlives the pool.

:func:`in_order` is the one loop behind this pool's :func:`ordered_pool_map` and Ray's
:func:`kueri.scaleout.ordered_map`: results in input order, a bounded number of items in flight, so the
caller never holds a whole corpus.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from kueri.errors import KueriError

log = logging.getLogger(__name__)

T = TypeVar("T")
H = TypeVar("H")  # a handle on submitted work: a pool's Pending, a Ray ObjectRef

#: What a worker runs first: only the standard library until the caller's ``sys.path`` has arrived, and any
#: failure to start (kueri not importable, a broken site customisation) is sent back as a message.
_BOOTSTRAP = """\
import sys
from multiprocessing.connection import Connection
tasks, results = Connection(int(sys.argv[2]), writable=False), Connection(int(sys.argv[3]), readable=False)
try:
    sys.path[:] = tasks.recv()
    from kueri.processes import worker_loop
except BaseException as exc:
    results.send(("failed", None, f"{type(exc).__name__}: {exc}", ""))
    raise SystemExit(1)
raise SystemExit(worker_loop(tasks, results))
"""
#: The worker's name in ``ps``: the first argument after the bootstrap.
WORKER_NAME = "kueri-worker"
#: How long a worker asked to stop may take before it is killed.
_STOP_SECONDS = 10.0


def resolve_workers(workers: int | None = None) -> int:
    """``workers``, else ``KUERI_WORKERS``, else 2 where there are 2+ cores."""
    if workers is None:
        env = os.environ.get("KUERI_WORKERS")
        if env:
            try:
                workers = int(env)
            except ValueError:
                raise KueriError(f"KUERI_WORKERS={env!r} is not a number") from None
        else:
            workers = min(2, os.cpu_count() or 1)
    if workers < 1:
        raise KueriError(f"the number of workers must be at least 1, got {workers}")
    return workers


def worker_loop(tasks: Connection, results: Connection) -> int:
    """A worker's loop: set up by the first message, then ``(number, func, args)`` -> ``("ok", number, value)``
    until told to stop (``None``) or the caller is gone. A failure is sent back, never raised here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the caller decides
    number = None
    try:
        initializer, initargs = tasks.recv()
        initializer(*initargs)
        while (message := tasks.recv()) is not None:
            number, func, args = message
            results.send(("ok", number, func(*args)))
    except EOFError:  # the caller is gone: nothing to answer
        return 0
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the caller as a message
        import traceback

        described = str(exc) if isinstance(exc, KueriError) else f"{type(exc).__name__}: {exc}"
        with suppress(OSError):
            results.send(("failed", number, described, traceback.format_exc()))
        return 1
    return 0


@dataclass(frozen=True)
class Pending:
    """Work submitted to one worker: its results come back in the order the work was sent."""

    worker: _Worker
    number: int

    def result(self) -> Any:
        return self.worker.result(self.number)


_ENDED = object()  # a worker's pipe closed: it exited


class _Worker:
    """One worker process, its two pipes and the thread that reads its results."""

    def __init__(self) -> None:
        task_read, task_write = os.pipe()
        result_read, result_write = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, WORKER_NAME, str(task_read), str(result_write)],
                pass_fds=(task_read, result_write), stdin=subprocess.DEVNULL)
        except OSError as exc:
            for fd in (task_read, task_write, result_read, result_write):
                os.close(fd)
            raise KueriError(f"cannot start a worker process with {sys.executable or 'no Python'}: {exc}") from exc
        os.close(task_read)
        os.close(result_write)
        self.tasks = Connection(task_write, readable=False)
        self._results_pipe = Connection(result_read, writable=False)
        self._results: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._sent = 0
        self.collected = 0
        self._reader = threading.Thread(target=self._read, name=f"{WORKER_NAME}-{self.process.pid}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            while True:
                self._results.put(self._results_pipe.recv())
        except (EOFError, OSError):
            self._results.put(_ENDED)

    def send(self, message: Any) -> None:
        try:
            self.tasks.send(message)
        except OSError:  # its end of the pipe is closed: it died; say how
            raise KueriError(self._ended()) from None

    def submit(self, func: Callable[..., Any], args: tuple[Any, ...]) -> Pending:
        number = self._sent
        self._sent += 1
        self.send((number, func, args))
        return Pending(self, number)

    def result(self, number: int) -> Any:
        message = self._results.get()
        if message is _ENDED:
            raise KueriError(self._ended())
        status, answered, value, *_ = message
        if status == "failed":
            raise KueriError(self._failure(message))
        assert answered == number, (answered, number)  # one worker answers in the order it was sent work
        self.collected += 1
        return value

    def _failure(self, message: tuple[Any, ...]) -> str:
        """A worker's failure message as one line (its traceback to the debug log)."""
        _, answered, value, *details = message
        if details and details[0]:
            log.debug("worker process %d failed:\n%s", self.process.pid, details[0])
        where = "while starting" if answered is None else "on a task"
        return f"a worker process (pid {self.process.pid}) failed {where}: {value}"

    def _ended(self) -> str:
        """Why this worker's pipe closed, as one line (its failure message if it sent one first)."""
        try:
            code = self.process.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            code = None
        self._reader.join(timeout=_STOP_SECONDS)  # everything it sent before it ended is queued
        while not self._results.empty():
            message = self._results.get()
            if message is not _ENDED and message[0] == "failed":  # it failed, then the caller sent more work
                return self._failure(message)
        if code is None:
            how = "its pipe closed"
        elif code < 0:
            how = f"killed by {signal.Signals(-code).name}"
        else:
            how = f"exit code {code}"
        return f"a worker process (pid {self.process.pid}) died ({how}): killed, or out of memory?"

    def stop(self, kill: bool) -> None:
        """Ask it to finish (it has no work left), else kill it; wait for it, close the pipes."""
        if kill or self.collected < self._sent:
            self.process.kill()
        else:
            with suppress(OSError):
                self.tasks.send(None)
        try:
            self.process.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.tasks.close()
        self._reader.join(timeout=_STOP_SECONDS)
        self._results_pipe.close()


class WorkerPool:
    """``workers`` worker processes, work handed round in turn: results come back in the order submitted."""

    def __init__(self, workers: int, initializer: Callable[..., None], initargs: tuple[Any, ...]) -> None:
        self._workers: list[_Worker] = []
        self._turn = 0
        try:
            for _ in range(workers):  # all started first, so they boot side by side
                self._workers.append(_Worker())
            for worker in self._workers:
                worker.send(sys.path)
                worker.send((initializer, initargs))
        except BaseException:
            self.shutdown(kill=True)
            raise

    @property
    def pids(self) -> list[int]:
        return [worker.process.pid for worker in self._workers]

    def submit(self, func: Callable[..., T], *args: Any) -> Pending:
        worker = self._workers[self._turn % len(self._workers)]
        self._turn += 1
        return worker.submit(func, args)

    def shutdown(self, kill: bool = False) -> None:
        for worker in self._workers:
            worker.stop(kill)


@contextmanager
def worker_pool(workers: int, initializer: Callable[..., None], *initargs: Any) -> Iterator[WorkerPool]:
    """``workers`` fresh worker processes, each set up by ``initializer(*initargs)`` (a function of kueri's or
    of an importable module; pickled with its arguments). On any error every worker is killed."""
    pool = WorkerPool(workers, initializer, initargs)
    try:
        yield pool
    except BaseException:
        pool.shutdown(kill=True)
        raise
    pool.shutdown()


def in_order(submit: Callable[[Any], H], result: Callable[[H], T], items: Iterable[Any], window: int) -> Iterator[T]:
    """``result(submit(item))`` for every item, in item order, with at most ``window`` items submitted and
    not yet collected: the caller never holds the whole input (``Pool.imap`` would read it all ahead)."""
    pending: deque[H] = deque()
    for item in items:
        pending.append(submit(item))
        if len(pending) >= window:
            yield result(pending.popleft())
    while pending:
        yield result(pending.popleft())


def ordered_pool_map(pool: WorkerPool, func: Callable[..., T], items: Iterable[Any], *args: Any,
                     window: int) -> Iterator[T]:
    """``func(item, *args)`` in ``pool`` for every item, results in item order, at most ``window`` in flight
    (:func:`in_order`). A worker that dies or fails raises :class:`KueriError`."""
    yield from in_order(lambda item: pool.submit(func, item, *args), Pending.result, items, window)
