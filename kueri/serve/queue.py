"""The pipeline thread of ``kueri serve`` and its bounded queue.

All the work that touches Java or the models runs on one thread: pyjnius attaches a thread on its first Java
call, the embedding caches are not thread-safe, and on 2 cores a second ranking thread would only slow both. A
question that must be ranked is refused at once (:class:`Busy`, HTTP 503 with ``Retry-After``) when the questions
queued before it would keep it past ``max_wait`` seconds, at what questions have cost lately (docs/serve.md,
the bounded queue).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from kueri.errors import KueriError

T = TypeVar("T")

#: Seconds a question may wait for its answer: a new question that the queue would keep longer is refused at once
#: (503 with Retry-After), and one still waiting after this long gets a 503 too (``kueri serve --max-wait``).
MAX_WAIT = 60.0
#: What the queue expects a question to cost until one is measured (docs/serve.md gives the measurements behind
#: it). The start's warm-up question is not measured: it also pays for loading the models, and would make the
#: queue admit one question at a time.
QUESTION_SECONDS_AT_START = 15.0
MAX_WAITING = 32  # pieces of work queued at most, questions or not
RETRY_AFTER = "Retry-After"  # the header of a 503 that says when to come back (seconds)


class Busy(KueriError):
    """Too many questions wait already (HTTP 503, with ``Retry-After``: ``retry_after`` seconds)."""

    def __init__(self, message: str, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = max(1, retry_after)

    def headers(self) -> dict[str, str]:
        """The response's headers: when to come back."""
        return {RETRY_AFTER: str(self.retry_after)}


class PipelineQueue:
    """One pipeline thread; what waits for it is counted, and questions are admitted by their expected cost."""

    def __init__(self, max_waiting: int = MAX_WAITING, max_wait: float = MAX_WAIT) -> None:
        self.max_waiting = max_waiting
        self.max_wait = max_wait
        self.question_seconds = QUESTION_SECONDS_AT_START  # what ranking a question costs lately
        self.measuring = False  # from the end of the warm-up
        self.waiting = 0
        self._questions_waiting = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kueri-pipeline")

    def submit(self, work: Callable[[], T], *, question: bool = False) -> Future[T]:
        """``work`` queued on the pipeline thread; :class:`Busy` when too many wait already. A ``question`` (a
        ranking to compute) is also refused at once when the questions queued before it would take longer than
        :attr:`max_wait` seconds to answer, at what a question has cost lately (the first one always goes)."""
        with self._lock:
            if self.waiting >= self.max_waiting:
                raise Busy(f"{self.waiting} questions are waiting already; try again in a moment", self.retry_after())
            if question and self._questions_waiting and self.max_wait and \
                    (self._questions_waiting + 1) * self.question_seconds > self.max_wait:
                raise Busy(f"{self._questions_waiting} questions are waiting already, about "
                           f"{self._questions_waiting * self.question_seconds:.0f} s of work; this one would wait "
                           f"longer than {self.max_wait:.0f} s: try again later", self.retry_after())
            self.waiting += 1
            self._questions_waiting += question
        future = self._pool.submit(work)
        future.add_done_callback(lambda _: self._done_waiting(question))
        return future

    def background(self, work: Callable[[], T]) -> Future[T]:
        """``work`` that no reader waits for (embedding ahead, closing) on the pipeline thread: neither counted nor
        refused, and behind what is queued already."""
        return self._pool.submit(work)

    def retry_after(self) -> int:
        """Seconds until the questions waiting now are likely answered (for ``Retry-After``)."""
        return max(1, math.ceil(self._questions_waiting * self.question_seconds))

    def _done_waiting(self, question: bool) -> None:
        with self._lock:
            self.waiting -= 1
            self._questions_waiting -= question

    def measured(self, seconds: float) -> None:
        """A question's ranking took ``seconds``: the cost the queue expects moves halfway towards it (the
        cost changes fast when the embeddings fill or the machine's load changes)."""
        if not self.measuring:
            return
        with self._lock:
            self.question_seconds = seconds if not self.question_seconds else (self.question_seconds + seconds) / 2

    def shutdown(self) -> None:
        """Wait for the work running now; drop what still waits."""
        self._pool.shutdown(wait=True, cancel_futures=True)
