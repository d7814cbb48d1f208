"""The engine behind ``kueri serve``: one question in, the configuration's ranking of it out.

A question becomes a one-topic run of the engine's one :class:`~kueri.session.Session`, as ``kueri run`` asks its own
(no second ranking path): a Touché topic's question gets exactly that topic's ranking (:mod:`kueri.serve.topics`).
The session ranks it with the configuration's stages but those that only label hits
(:meth:`~kueri.session.Session.rank`); those, the stance, label only the passages shown
(:meth:`~kueri.session.Session.label`): the same labels, a fraction of the work. Everything that touches Java or the
models runs on the one pipeline thread of a queue the engine keeps to itself (:mod:`kueri.serve.queue`): a route asks
:meth:`Engine.answer` (or :meth:`Engine.passage`) and gets the answer or its refusal. Rankings are kept in the answer
cache (:mod:`kueri.serve.cache`), so a repeated question is answered without queueing; a new one is queued by what it
is expected to cost (:mod:`kueri.serve.cost`). The answer itself is :mod:`kueri.serve.answer`'s.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Any

from kueri.config import RunConfig, get_config
from kueri.errors import EmptyRun, KueriError, SetupError
from kueri.records import STANCES, Topic
from kueri.runcontext import RunContext
from kueri.serve.answer import Answer, assemble
from kueri.serve.cache import AnswerCache, Ranking
from kueri.serve.checks import BadQuestion
from kueri.serve.cost import CostProbe
from kueri.serve.links import SourceLinks
from kueri.serve.queue import MAX_WAIT, MAX_WAITING, Busy, PipelineQueue
from kueri.serve.topics import Topics
from kueri.session import Session
from kueri.stages.quality import shown_quality

log = logging.getLogger(__name__)

#: How many top passages get the sentence that decided their stance: explaining one analyses each of its
#: sentences, so the API's deeper passages carry none.
EXPLAINED = 100
#: A corpus this small is embedded whole when the server starts (in chunks between questions), so every
#: question on it is warm; a larger one embeds the candidates each question needs and keeps them.
PREEMBED_LIMIT = 20_000
PREEMBED_CHUNK = 16  # passages embedded per turn of the pipeline thread: a question waits at most one chunk
WARM_UP = "Which is better, a laptop or a desktop?"  # asked of each configuration at the start
NO_OBJECTS = ("no two objects were found in the question: the passages are ranked by the search alone, without "
              "stances; name the two objects to compare them")
NO_MATCH = "no passage matches the question's words (the stoplist drops the most common ones)"


class Engine:
    """Answers questions over one corpus (or one prebuilt index) with the offered configurations."""

    def __init__(self, *, corpus: str | Path | None = None, index: str | Path | None = None,
                 configs: Sequence[str] = ("default",), workdir: str | Path | None = None,
                 topics: Sequence[Topic] = (), progress: bool = False, max_waiting: int = MAX_WAITING,
                 max_wait: float = MAX_WAIT) -> None:
        from kueri.pipeline import default_workdir

        if (corpus is None) == (index is None):
            raise SetupError("give a corpus or an index (one of them)")
        for path, what in ((corpus, "corpus"), (index, "index")):
            if path is not None and not Path(path).exists():
                raise SetupError(f"{path}: {what} not found")
        self.corpus, self.index_dir = corpus, index
        self.configs: dict[str, RunConfig] = {}
        for name in configs:
            config = get_config(name)
            if config.manual:
                raise SetupError(f"configuration {config.name} uses relevance judgments: it cannot answer a free "
                                 "question (pick an automatic one, e.g. default)")
            self.configs[config.name] = config
        self.default_config = next(iter(self.configs))
        self.workdir = Path(workdir) if workdir is not None else default_workdir()
        self.topics = Topics(topics)
        self.run_context = RunContext(self.workdir, progress=progress)  # how every question's run goes
        self._queue = PipelineQueue(max_waiting, max_wait)
        self.session: Session | None = None  # what every question's run shares (made on the pipeline thread)
        # the encoders whose passage embeddings the offered configurations read (the session's, with their stores)
        self._encoders = list(dict.fromkeys(name for config in self.configs.values()
                                            for name in config.plan().encoders()))
        self._probe: CostProbe | None = None
        self._answers = AnswerCache()
        self._stopping = threading.Event()
        self.started = time.time()
        self.ready = False
        self.preembedded = 0
        self.questions = 0
        # an index holds no URLs: its ClueWeb12 ids' links are derived (docs/serve.md)
        self.links = SourceLinks()

    # -- starting and stopping -------------------------------------------------------------------------------

    def start(self, preembed: bool | None = None) -> None:
        """Open (or build) the index, load the models and answer one question per configuration, so the first
        person's question is warm; then, on a small corpus, embed its passages in the background (None: when
        it has at most :data:`PREEMBED_LIMIT` passages). Blocks until the warm-up is done."""
        if self.corpus is not None:
            self.links = SourceLinks.of_corpus(self.corpus)
        self._queue.submit(self._open).result()
        for name in self.configs:
            self._queue.submit(lambda name=name: self._rank(WARM_UP, None, name)).result()
        self.ready = True
        self._queue.measuring = True
        size = len(self._any_index())
        for name, (stored, total) in self._queue.submit(self.embedded_share).result().items():
            rest = "" if stored == total else ("; the others are embedded when a question needs them (kueri embed "
                                                "--encoder all embeds them ahead)")
            log.info("serve: %d of the corpus' %d passages are embedded by %s (%.0f %%)%s", stored, total, name,
                     100 * stored / max(total, 1), rest)
        if preembed or (preembed is None and size <= PREEMBED_LIMIT):
            threading.Thread(target=self._preembed, name="kueri-preembed", daemon=True).start()

    def _open(self) -> None:
        """The session and its indexes, the stored encoders (on the pipeline thread: it uses Java)."""
        if self.index_dir is not None:
            from kueri.lucene import LuceneIndex

            index = LuceneIndex(self.index_dir)
            for config in self.configs.values():
                if set(config.plan().indexes()) != {index.analyzer_config}:
                    index.close()
                    raise SetupError(f"the index {self.index_dir} was built with {index.analyzer_config.summary()}; "
                                     f"configuration {config.name} needs {config.analyzer.summary()} (build it with "
                                     f"kueri index --config {config.name}, or give --corpus)")
            session = Session(self.index_dir, self.run_context, indexes={index.analyzer_config: index})
        else:
            session = Session(self.corpus, self.run_context)  # type: ignore[arg-type]
            for config in self.configs.values():
                for analyzer in config.plan().indexes():
                    session.index(analyzer)
        for name in self._encoders:
            session.encoder(name)  # its store read now (its model loads when first needed)
        self._probe = CostProbe(session, self._encoders)
        self.session = session  # once its indexes are open: /api/health reads it from another thread

    @property
    def _stores(self) -> dict[str, Any]:
        """The stored encoders, by name (the session's)."""
        assert self.session is not None
        return {name: self.session.encoder(name) for name in self._encoders}

    def _any_index(self) -> Any:
        assert self.session is not None
        return self.session.index(self.configs[self.default_config].plan().indexes()[0])

    def embedded_share(self) -> dict[str, tuple[int, int]]:
        """Per encoder: how many of the corpus' passages its store holds, and how many there are (on the pipeline
        thread: it reads every passage's text)."""
        from kueri.encoders import text_digest

        index = self._any_index()
        counts = dict.fromkeys(self._stores, 0)
        for start in range(0, len(index), 4096):
            digests = [text_digest(text) for text in index.contents(range(start, min(start + 4096, len(index))))]
            for name, encoder in self._stores.items():
                counts[name] += len(digests) - len(encoder.store.missing(digests))
        return {name: (count, len(index)) for name, count in counts.items()}

    def _preembed(self) -> None:
        """Embed every passage of the corpus with each offered configuration's encoders, a chunk per turn of the
        pipeline thread, so that questions go between chunks and every later question is warm."""
        index = self._any_index()
        ids = list(index.ids)
        for encoder in self._stores.values():
            for start in range(0, len(ids), PREEMBED_CHUNK):
                if self._stopping.is_set():
                    return
                chunk = ids[start:start + PREEMBED_CHUNK]
                try:
                    self._queue.background(lambda c=chunk, e=encoder: e.passages(index.contents_of(c, "serve"))
                                           ).result()
                except (RuntimeError, CancelledError):  # the pool shut down: the server stops
                    return
                self.preembedded = max(self.preembedded, start + len(chunk))
        log.info("serve: every passage of the corpus is embedded; every question is warm now")

    def close(self) -> None:
        """Stop embedding ahead, close the indexes and leave the JVM (on the pipeline thread, which used it)."""
        from kueri.lucene import detach_thread

        self._stopping.set()

        def close() -> None:
            if self.session is not None:
                self.session.close()
            detach_thread()

        self._queue.background(close).result()
        self._queue.shutdown()

    # -- what the routes ask -----------------------------------------------------------------------------------

    def config(self, name: str | None) -> RunConfig:
        """The offered configuration ``name`` (None: the default one); :class:`BadQuestion` for another."""
        if name is None:
            return self.configs[self.default_config]
        try:
            config = get_config(name)
        except KueriError:
            config = None
        if config is None or config.name not in self.configs:
            raise BadQuestion(f"configuration {name!r} is not offered here; offered: {', '.join(self.configs)}")
        return config

    async def answer(self, question: str, objects: tuple[str, str] | None = None, config: str | None = None,
                     k: int = 10, aspect: str | None = None) -> Answer:
        """The answer to ``question`` (checked: :func:`kueri.serve.checks.check_text`), its top ``k`` passages: from
        the cache at once, else queued on the pipeline thread by its expected cost (while the event loop serves
        others). :class:`Busy` at once when the queue would keep it longer than its ``max_wait``, or when it waited
        that long (a question that has not started by then is taken off the queue). ``aspect`` replaces the one found
        in the question ("": none): it marks the passages that speak of it and never changes the ranking."""
        name = self.config(config).name  # an unknown configuration is a 400 before anything is queued
        ranking = self._answers.get(self._answers.key(question, objects, name), filled=k)
        if ranking is not None:
            return assemble(question, ranking, k, 0.0, self.links, aspect)
        # its expected cost (cached, warm or cold) orders it in the queue: probed on the pipeline thread before the
        # next ranking starts (Java is used from that thread only)
        future = self._queue.submit(lambda cost: self.ask(question, objects, name, k, aspect, cost), question=True,
                                    probe=lambda: self.expected_cost(question, objects, name))
        return await self._awaited(future)

    async def passage(self, passage_id: str) -> str | None:
        """A passage's stored text by id (None: not in the index), from the pipeline thread."""
        return await self._awaited(self._queue.submit(lambda: self._passage_text(passage_id)))

    async def _awaited(self, future: Any) -> Any:
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self._queue.max_wait or None)
        except TimeoutError:
            future.cancel()
            raise Busy(f"no answer within {self._queue.max_wait:.0f} s; the server is busy, try again later",
                       self._queue.retry_after()) from None

    def expected_cost(self, question: str, objects: tuple[str, str] | None, config_name: str | None) -> str:
        """``cached`` when its ranking is cached (only passages to fill), else what its probe finds, ``warm`` or
        ``cold`` (:mod:`kueri.serve.cost`; cold when it cannot tell). On the pipeline thread: the queue probes each
        question before it picks the next one to rank (:mod:`kueri.serve.queue`)."""
        name = config_name or self.default_config
        if self._answers.key(question, objects, name) in self._answers:
            return "cached"
        if not self.ready or self._probe is None:
            return "cold"
        try:
            topic, _, config = self.topics.ranked(question, objects, self.config(name))
        except Exception:  # noqa: BLE001 - an estimate only; the ranking reports what is wrong
            return "cold"
        return self._probe.kind(config, topic)

    # -- on the pipeline thread ------------------------------------------------------------------------------

    def ask(self, question: str, objects: tuple[str, str] | None = None, config: str | None = None,
            k: int = 10, aspect: str | None = None, cost: str | None = None) -> Answer:
        """:meth:`answer` on the pipeline thread (or in a process that drives the engine itself: a benchmark).
        ``cost``: the kind it was queued as (:meth:`expected_cost`), whose estimate its time updates."""
        started = time.perf_counter()
        ranking = self._rank(question, objects, config, k, cost)
        return assemble(question, ranking, k, time.perf_counter() - started, self.links, aspect)

    def _rank(self, question: str, objects: tuple[str, str] | None, config_name: str | None, k: int = 10,
              cost: str | None = None) -> Ranking:
        key = self._answers.key(question, objects, config_name or self.default_config)
        ranking = self._answers.get(key)
        if ranking is not None:
            started = time.perf_counter()
            if self._fill(ranking, k):
                self._queue.measured(time.perf_counter() - started, cost or "cached")
        else:
            ranking = self._ranked(question, objects, config_name, k, cost)
        self._answers.put(key, ranking)
        return ranking

    def _ranked(self, question: str, objects: tuple[str, str] | None, config_name: str | None, k: int,
                cost: str | None) -> Ranking:
        """A new ranking of the question, its top ``k`` passages filled."""
        assert self.session is not None
        embedded = self._embedded()
        started = time.perf_counter()
        topic, objects_from, config = self.topics.ranked(question, objects, self.config(config_name))
        note = NO_OBJECTS if objects_from == "none" else ""
        try:  # labels come in _fill, for the passages shown only
            hits = self.session.rank(config, [topic]).get(topic.number, [])
        except EmptyRun:
            hits, note = [], NO_MATCH
        ranking = Ranking(topic, objects_from, hits, config, time.perf_counter() - started, note)
        self._fill(ranking, k)
        ranking.seconds = time.perf_counter() - started
        # the estimate of the kind it was queued as (what a question taken for that kind costs); else what it turned
        # out to be
        kind = cost or ("cold" if self._embedded() > embedded else "warm")
        self._queue.measured(ranking.seconds, kind)
        self.questions += 1
        log.info("serve: %r (objects %s, %s) ranked in %.2f s (%s)", question, topic.objects, objects_from,
                 ranking.seconds, kind)
        return ranking

    def _embedded(self) -> int:
        """Passages the stored encoders have embedded so far."""
        return sum(encoder.embedded for encoder in self._stores.values()) if self.session is not None else 0

    def _fill(self, ranking: Ranking, k: int) -> bool:
        """The texts, quality scores, stance labels and deciding sentences of the top ``k`` passages (computed once
        per passage and ranking), from the configuration's own stages: :meth:`~kueri.session.Session.label` of the
        shown hits gives each the label ``kueri run`` gives it."""
        missing = [hit.doc for hit in ranking.hits[:k] if hit.doc not in ranking.texts]
        if not missing:
            return False
        assert self.session is not None
        context = self.session.context([ranking.topic])
        ranking.texts.update(zip(missing, context.texts("serve")(missing), strict=True))
        ranking.quality.update(shown_quality(ranking.config).scores(missing, context))
        if not all(ranking.topic.objects):
            return True
        number = ranking.topic.number
        ranking.hits[:k] = self.session.label(ranking.config, {number: ranking.hits[:k]}, [ranking.topic])[number]
        new = set(missing)
        explained = [hit for hit in ranking.hits[:min(k, EXPLAINED)] if hit.doc in new and hit.stance in STANCES]
        if explained:
            ranking.deciding_sentences.update(ranking.config.plan().explain({number: explained}, context))
        return True

    def _passage_text(self, passage_id: str) -> str | None:
        index = self._any_index()
        if index.docid(passage_id) is None:
            return None
        return index.contents_of([passage_id], "serve")[0]

    # -- health ------------------------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        index = self._any_index() if self.session is not None else None
        queue = self._queue
        return {"status": "ok" if self.ready else "starting", "passages": len(index) if index else None,
                "configs": list(self.configs), "default_config": self.default_config,
                "uptime_seconds": round(time.time() - self.started, 1), "questions_ranked": self.questions,
                "waiting": queue.waiting, "waiting_by_cost": queue.waiting_by_cost(),
                "preembedded": self.preembedded, "max_wait_seconds": queue.max_wait,
                "question_seconds": round(queue.question_seconds, 3),
                "seconds_by_cost": {kind: round(seconds, 3) for kind, seconds in queue.seconds.items()},
                "measured_costs": sorted(queue.measured_kinds)}


def known_topics(paths: Iterable[str | Path]) -> list[Topic]:
    from kueri.parse import read_topics

    return [topic for path in paths for topic in read_topics(path)]
