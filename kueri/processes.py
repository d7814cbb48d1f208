"""Work spread over this machine's cores: how many workers, and a pool's results in input order.

:func:`in_order` is the one loop behind this pool's :func:`ordered_pool_map` and Ray's
:func:`kueri.scaleout.ordered_map`: results in input order, a bounded number of items in flight, so the
caller never holds a whole corpus.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, TypeVar

from kueri.errors import KueriError

T = TypeVar("T")
H = TypeVar("H")  # a handle on submitted work: a Future, a Ray ObjectRef


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


@contextmanager
def worker_pool(workers: int, initializer: Callable[..., None], *initargs: Any) -> Iterator[ProcessPoolExecutor]:
    """``workers`` fresh processes (spawned: safe beside a running JVM), each set up by ``initializer``.

    Unlike ``multiprocessing.Pool``, a worker that dies (killed, out of memory) fails the work instead of
    hanging it; on an error, work not yet started is dropped.
    """
    pool = ProcessPoolExecutor(workers, multiprocessing.get_context("spawn"), initializer, initargs)
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


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


def ordered_pool_map(pool: ProcessPoolExecutor, func: Callable[..., T], items: Iterable[Any], *args: Any,
                     window: int) -> Iterator[T]:
    """``func(item, *args)`` in ``pool`` for every item, results in item order, at most ``window`` in flight
    (:func:`in_order`). A dead worker raises :class:`KueriError`."""
    try:
        yield from in_order(lambda item: pool.submit(func, item, *args), Future.result, items, window)
    except BrokenProcessPool as exc:
        raise KueriError(f"a worker process died ({exc}); killed, or out of memory?") from exc
