"""The pipeline thread of ``kueri serve`` and its bounded queue, which takes cheap questions first.

All the work that touches Java or the models runs on one thread: pyjnius attaches a thread on its first Java
call, the embedding caches are not thread-safe, and on 2 cores a second ranking thread would only slow both. What
waits for it is taken in this order (docs/serve.md, the bounded queue):

1. small work that a reader waits for (a passage's text, the start's steps);
2. questions that have waited so long that they must go now (:meth:`PipelineQueue.urgent`), oldest first, so a
   cold question is not starved by a stream of warm ones;
3. questions by their expected cost (:data:`COSTS`): a ranking that is cached and only needs more passages
   filled, then a *warm* question (its candidates' embeddings are stored), then a *cold* one (it embeds
   passages), each kind in arrival order;
4. work that no reader waits for (embedding ahead).

A question's kind is found before it is queued (``Engine.expected_cost``: its first stage's candidates, looked up
in the embedding stores); what each kind costs is measured: each ranking moves its kind's estimate halfway towards
what it took. A question is refused at once (:class:`Busy`, HTTP 503 with ``Retry-After``) when the questions that
would go before it would keep it past ``max_wait`` seconds.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kueri.errors import KueriError

T = TypeVar("T")

#: Seconds a question may wait for its answer: a new question that the queue would keep longer is refused at once
#: (503 with Retry-After), and one still waiting after this long gets a 503 too (``kueri serve --max-wait``).
MAX_WAIT = 60.0
#: A question's expected cost, cheapest first: the order in which waiting questions are taken.
COSTS = ("cached", "warm", "cold")
#: What the queue expects each kind to cost until the server has measured one of its own (docs/serve.md gives the
#: measurements behind them: a warm question 0.5 s on the sample, a cold one 5.5 s on 2 quiet cores and 17-18 s at a
#: load of 14). The start's warm-up question is not measured: it also pays for loading the models, and would make
#: the queue admit one question at a time.
SECONDS_AT_START = {"cached": 0.2, "warm": 0.5, "cold": 15.0}
QUESTION_SECONDS_AT_START = SECONDS_AT_START["cold"]  # a question of unknown kind is expected to be cold
#: A waiting question goes before cheaper ones once it has waited this share of ``max_wait`` less its own cost.
URGENT_SHARE = 0.5
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


@dataclass
class _Job:
    work: Callable[[], Any]
    future: Future[Any]
    tier: int  # 0: small work a reader waits for, 1: a question, 2: background
    order: int  # arrival
    cost: str | None = None  # a question's kind (COSTS)
    arrived: float = field(default_factory=time.monotonic)


class PipelineQueue:
    """One pipeline thread; what waits for it is counted and ordered, and questions are admitted by their expected
    cost."""

    def __init__(self, max_waiting: int = MAX_WAITING, max_wait: float = MAX_WAIT) -> None:
        self.max_waiting = max_waiting
        self.max_wait = max_wait
        self.seconds = dict(SECONDS_AT_START)  # what ranking a question of each kind costs lately
        self.measured_kinds: set[str] = set()  # the kinds measured here (the others are still the start's figures)
        self.measuring = False  # from the end of the warm-up
        self._jobs: list[_Job] = []
        self._running: _Job | None = None
        self._running_since = 0.0
        self._arrivals = itertools.count()
        self._condition = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name="kueri-pipeline", daemon=True)
        self._thread.start()

    # -- what waits ------------------------------------------------------------------------------------------

    @property
    def waiting(self) -> int:
        """Pieces of work queued or running that a reader waits for (questions or not)."""
        with self._condition:
            return self._counted()

    def _counted(self) -> int:
        self._jobs = [job for job in self._jobs if not job.future.cancelled()]  # given up on (a 503 at the limit)
        return sum(job.tier < 2 for job in self._jobs) + (self._running is not None and self._running.tier < 2)

    @property
    def question_seconds(self) -> float:
        """What a cold question is expected to cost (what a question of unknown kind is taken to cost)."""
        return self.seconds["cold"]

    @question_seconds.setter
    def question_seconds(self, seconds: float) -> None:
        self.seconds["cold"] = seconds

    def waiting_by_cost(self) -> dict[str, int]:
        """How many questions of each kind wait (the one running not counted)."""
        with self._condition:
            counts = dict.fromkeys(COSTS, 0)
            for job in self._jobs:
                if job.tier == 1 and not job.future.cancelled():
                    counts[job.cost or "cold"] += 1
            return counts

    def _cost(self, job: _Job) -> float:
        return self.seconds[job.cost or "cold"]

    def _questions(self) -> list[_Job]:
        running = [self._running] if self._running is not None and self._running.tier == 1 else []
        return running + [job for job in self._jobs if job.tier == 1 and not job.future.cancelled()]

    def urgent(self, job: _Job, now: float) -> bool:
        """Whether a waiting question must go before cheaper ones: it has waited :data:`URGENT_SHARE` of the limit,
        less its own expected cost (without a limit, never)."""
        return bool(self.max_wait) and now - job.arrived + self._cost(job) >= URGENT_SHARE * self.max_wait

    def _ahead(self, cost: str) -> float:
        """Seconds of work before a new question of kind ``cost``: the one running (what is left of it), the urgent
        ones, and those of its kind or cheaper."""
        now = time.monotonic()
        rank = COSTS.index(cost)
        seconds = 0.0
        if self._running is not None and self._running.tier == 1:
            seconds += max(self._cost(self._running) - (now - self._running_since), 0.0)
        for job in self._jobs:
            goes_before = COSTS.index(job.cost or "cold") <= rank or self.urgent(job, now)
            if job.tier == 1 and not job.future.cancelled() and goes_before:
                seconds += self._cost(job)
        return seconds

    # -- submitting --------------------------------------------------------------------------------------------

    def submit(self, work: Callable[[], T], *, question: bool = False, cost: str | None = None) -> Future[T]:
        """``work`` queued on the pipeline thread; :class:`Busy` when too many wait already. A ``question`` (a
        ranking to compute, of expected kind ``cost``: one of :data:`COSTS`, None: unknown, taken as cold) is also
        refused at once when the work that would go before it would keep it longer than :attr:`max_wait` seconds,
        at what each kind has cost lately (the first one always goes)."""
        if cost is not None and cost not in COSTS:
            raise ValueError(f"cost must be one of {', '.join(COSTS)}, not {cost!r}")
        with self._condition:
            if self._stopping:
                raise RuntimeError("the pipeline queue is shut down")
            if self._counted() >= self.max_waiting:
                raise Busy(f"{self._counted()} questions are waiting already; try again in a moment",
                           self._retry_after())
            if question and self._questions() and self.max_wait:
                ahead = self._ahead(cost or "cold")
                if ahead + self.seconds[cost or "cold"] > self.max_wait:
                    raise Busy(f"{len(self._questions())} questions are waiting already, about {ahead:.0f} s of work "
                               f"before this one; it would wait longer than {self.max_wait:.0f} s: try again later",
                               self._retry_after())
            return self._queue(work, 1 if question else 0, cost if question else None)

    def background(self, work: Callable[[], T]) -> Future[T]:
        """``work`` that no reader waits for (embedding ahead, closing) on the pipeline thread: neither counted nor
        refused, and behind everything a reader waits for."""
        with self._condition:
            if self._stopping:
                raise RuntimeError("the pipeline queue is shut down")
            return self._queue(work, 2, None)

    def _queue(self, work: Callable[[], T], tier: int, cost: str | None) -> Future[T]:
        future: Future[T] = Future()
        self._jobs.append(_Job(work, future, tier, next(self._arrivals), cost))
        self._condition.notify()
        return future

    def retry_after(self) -> int:
        """Seconds until the questions waiting now are likely answered (for ``Retry-After``)."""
        with self._condition:
            return self._retry_after()

    def _retry_after(self) -> int:
        return max(1, math.ceil(sum(self._cost(job) for job in self._questions())))

    # -- the pipeline thread -------------------------------------------------------------------------------------

    def _next(self) -> _Job:
        """The job to run now (see the module for the order); under the condition, with jobs waiting."""
        now = time.monotonic()

        def key(job: _Job) -> tuple[int, int, int, int]:
            if job.tier != 1:
                return (0 if job.tier == 0 else 3, 0, 0, job.order)
            if self.urgent(job, now):
                return (1, 0, 0, job.order)
            return (2, COSTS.index(job.cost or "cold"), 0, job.order)

        job = min(self._jobs, key=key)
        self._jobs.remove(job)
        return job

    def _work(self) -> None:
        while True:
            with self._condition:
                while not self._jobs and not self._stopping:
                    self._condition.wait()
                if not self._jobs:
                    return
                job = self._next()
                if not job.future.set_running_or_notify_cancel():  # cancelled while it waited
                    continue
                self._running, self._running_since = job, time.monotonic()
            try:
                result = job.work()
            except BaseException as exc:  # noqa: BLE001 - the reader gets the failure, the thread goes on
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)
            finally:
                with self._condition:
                    self._running = None

    def measured(self, seconds: float, cost: str = "cold") -> None:
        """A ranking of kind ``cost`` took ``seconds``: that kind's expected cost moves halfway towards it (costs
        change fast when the embeddings fill or the machine's load changes)."""
        if not self.measuring:
            return
        with self._condition:
            before = self.seconds.get(cost)
            self.seconds[cost] = seconds if not before else (before + seconds) / 2
            self.measured_kinds.add(cost)

    def shutdown(self) -> None:
        """Wait for the work running now; drop what still waits."""
        with self._condition:
            self._stopping = True
            dropped, self._jobs = self._jobs, []
            self._condition.notify_all()
        for job in dropped:
            job.future.cancel()
        if self._thread is not threading.current_thread():
            self._thread.join()
