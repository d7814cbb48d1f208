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

A question's kind is found by its *probe* (``Engine.expected_cost``: its first stage's candidates, looked up in
the embedding stores, a few tens of milliseconds), run on the pipeline thread too, before the next ranking starts:
Java is used from that thread only (probes on a thread of their own beside the rankings made Lucene fail now and
then: 3 of 2,000 questions of the soak in docs/serve.md). What each kind costs is measured: each ranking moves its
kind's estimate halfway towards what it took. A question is refused at once (:class:`Busy`, HTTP 503 with
``Retry-After``) when the questions that would go before it would keep it past ``max_wait`` seconds, taken as warm
until probed; and once probed, when it is cold and the cold ones before it would keep it that long.
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
    probe: Callable[[], str] | None = None  # finds ``cost`` (then ``work`` is called with it)
    arrived: float = field(default_factory=time.monotonic)


def _kind(job: _Job) -> str:
    """A question's kind: probed, given, or until probed taken for warm (a question given none: cold)."""
    return job.cost or ("warm" if job.probe is not None else "cold")


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
                    counts[_kind(job)] += 1
            return counts

    def _cost(self, job: _Job) -> float:
        return self.seconds[_kind(job)]

    def _questions(self) -> list[_Job]:
        running = [self._running] if self._running is not None and self._running.tier == 1 else []
        return running + [job for job in self._jobs if job.tier == 1 and not job.future.cancelled()]

    def urgent(self, job: _Job, now: float) -> bool:
        """Whether a waiting question must go before cheaper ones: it has waited :data:`URGENT_SHARE` of the limit,
        less its own expected cost (without a limit, never)."""
        return bool(self.max_wait) and now - job.arrived + self._cost(job) >= URGENT_SHARE * self.max_wait

    def _ahead(self, cost: str, job: _Job | None = None) -> float:
        """Seconds of work before a question of kind ``cost`` (``job``, if queued already): what is left of the one
        running, and each waiting one the pipeline thread would take first (urgent, cheaper, or of its kind and
        earlier; for a new question, of its kind at all)."""
        now = time.monotonic()
        rank = COSTS.index(cost)
        seconds = 0.0
        if self._running is not None and self._running.tier == 1:
            seconds += max(self._cost(self._running) - (now - self._running_since), 0.0)
        for other in self._jobs:
            if other is job or other.tier != 1 or other.future.cancelled():
                continue
            other_rank = COSTS.index(_kind(other))
            earlier = job is None or other.order < job.order
            if self.urgent(other, now) or other_rank < rank or (other_rank == rank and earlier):
                seconds += self._cost(other)
        return seconds

    # -- submitting --------------------------------------------------------------------------------------------

    def submit(self, work: Callable[..., T], *, question: bool = False, cost: str | None = None,
               probe: Callable[[], str] | None = None) -> Future[T]:
        """``work`` queued on the pipeline thread; :class:`Busy` when too many wait already. A ``question`` (a
        ranking to compute) of expected kind ``cost`` (one of :data:`COSTS`; None: cold), or whose kind its
        ``probe`` finds on the pipeline thread (``work`` is then called with it), is also refused when the work that
        would go before it would keep it longer than :attr:`max_wait` seconds, at what each kind has cost lately (the
        first one always goes): at once, taking a question to probe for warm, and once probed, by the future's
        :class:`Busy`."""
        if cost is not None and cost not in COSTS:
            raise ValueError(f"cost must be one of {', '.join(COSTS)}, not {cost!r}")
        with self._condition:
            if self._stopping:
                raise RuntimeError("the pipeline queue is shut down")
            if self._counted() >= self.max_waiting:
                raise Busy(f"{self._counted()} questions are waiting already; try again in a moment",
                           self._retry_after())
            if question:
                refused = self._refusal(cost or ("warm" if probe else "cold"))
                if refused is not None:
                    raise refused
            job = self._queue(work, 1 if question else 0, cost if question else None)
            job.probe = probe if question else None
            return job.future

    def _refusal(self, cost: str, job: _Job | None = None) -> Busy | None:
        """Why a question of kind ``cost`` (``job``, if queued already) would wait too long (None: it would not)."""
        questions = [other for other in self._questions() if other is not job]
        if not questions or not self.max_wait:
            return None
        ahead = self._ahead(cost, job)
        if ahead + self.seconds[cost] <= self.max_wait:
            return None
        return Busy(f"{len(questions)} questions are waiting already, about {ahead:.0f} s of work before this one; "
                    f"it would wait longer than {self.max_wait:.0f} s: try again later", self._retry_after())

    def background(self, work: Callable[[], T]) -> Future[T]:
        """``work`` that no reader waits for (embedding ahead, closing) on the pipeline thread: neither counted nor
        refused, and behind everything a reader waits for."""
        with self._condition:
            if self._stopping:
                raise RuntimeError("the pipeline queue is shut down")
            return self._queue(work, 2, None).future

    def _queue(self, work: Callable[..., Any], tier: int, cost: str | None) -> _Job:
        job = _Job(work, Future(), tier, next(self._arrivals), cost)
        self._jobs.append(job)
        self._condition.notify()
        return job

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
            return (2, COSTS.index(_kind(job)), 0, job.order)

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
                # probes first (a few tens of milliseconds each), so the next ranking is picked knowing every kind
                unprobed = [job for job in self._jobs if job.probe is not None and job.cost is None
                            and not job.future.cancelled()]
                job = unprobed[0] if unprobed else self._next()
                if not unprobed and not job.future.set_running_or_notify_cancel():  # cancelled while it waited
                    continue
                if not unprobed:
                    self._running, self._running_since = job, time.monotonic()
            if unprobed:
                self._probe(job)
                continue
            try:
                result = job.work(job.cost) if job.probe is not None else job.work()
            except BaseException as exc:  # noqa: BLE001 - the reader gets the failure, the thread goes on
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)
            finally:
                with self._condition:
                    self._running = None

    def _probe(self, job: _Job) -> None:
        """Find a queued question's kind (on this thread); refuse it when, cold, it would wait too long."""
        assert job.probe is not None
        try:
            cost = job.probe()
        except Exception:  # noqa: BLE001 - an estimate only: the ranking reports what is wrong
            cost = "cold"
        with self._condition:
            job.cost = cost if cost in COSTS else "cold"
            refused = self._refusal(job.cost, job)
            if refused is not None and job in self._jobs:
                self._jobs.remove(job)
        if refused is not None and job.future.set_running_or_notify_cancel():
            job.future.set_exception(refused)

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
