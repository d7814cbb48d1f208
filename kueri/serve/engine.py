"""The engine behind ``kueri serve``: one question in, the configuration's ranking of it out.

A question becomes a one-topic run of the engine's one :class:`~kueri.session.Session`, as ``kueri run`` asks its own
(no second ranking path): a Touché topic's question gets exactly that topic's ranking. The session ranks it with the
configuration's stages but those that only label hits (:meth:`~kueri.session.Session.rank`); those, the stance,
label only the passages shown (:meth:`~kueri.session.Session.label`): the same labels, a fraction of the work.
What a run loads once (the open indexes, the encoders with their embedding caches, the models) is shared by every
question's pipeline, on the one pipeline thread of :mod:`kueri.serve.queue`. Rankings are kept in a small LRU, so
a repeated question is answered without queueing. The answer itself is :mod:`kueri.serve.answer`'s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import CancelledError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kueri.config import RunConfig, get_config
from kueri.errors import EmptyRun, KueriError, SetupError
from kueri.objects import ObjectMatcher, mentions
from kueri.questions import analyse, aspect_terms, extract_objects, speaks_of
from kueri.records import STANCES, Hit, Topic
from kueri.runcontext import RunContext
from kueri.serve.answer import SIDES, UNLABELLED, Answer, Evidence, Passage, Verdict, summarise
from kueri.serve.checks import BadQuestion
from kueri.serve.links import SourceLinks
from kueri.serve.queue import MAX_WAIT, MAX_WAITING, PipelineQueue
from kueri.session import Session
from kueri.stages.quality import shown_quality

log = logging.getLogger(__name__)

#: How many top passages get the sentence that decided their stance: explaining one analyses each of its
#: sentences, so the API's deeper passages carry none.
EXPLAINED = 100
ANSWER_CACHE = 256  # rankings kept (each a whole ranking of ids and scores: a few tens of kB)
#: A corpus this small is embedded whole when the server starts (in chunks between questions), so every
#: question on it is warm; a larger one embeds the candidates each question needs and keeps them.
PREEMBED_LIMIT = 20_000
PREEMBED_CHUNK = 16  # passages embedded per turn of the pipeline thread: a question waits at most one chunk
#: A question is warm when the stores hold as many of its first stage's top candidates as each encoder embeds (40
#: and 15 of the top 100 in the default's cascade), short by at most this share: a quarter of the 55, embedded,
#: costs about 0.6 s (a cold question's log: MiniLM 40 passages in 1.7 s, e5 15 in 1.5 s), about a warm question's
#: own cost; a question of new objects is short by all 55.
WARM_SHARE = 0.25
FREE_TOPIC = "q"  # the topic number of a question that is not a known topic's
WARM_UP = "Which is better, a laptop or a desktop?"  # asked of each configuration at the start


@dataclass
class _Ranking:
    """A question's whole ranking, as the pipeline made it (kept in the answer cache), and what the configuration's
    stages added for the passages shown so far: their texts, quality, labels (in ``hits``), deciding sentences."""

    topic: Topic
    objects_from: str
    hits: list[Hit]
    config: RunConfig
    seconds: float
    note: str = ""
    quality: dict[str, float] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    deciding_sentences: dict[str, str | None] = field(default_factory=dict)


def without_objects(config: RunConfig) -> RunConfig:
    """``config`` without the stages that read a topic's two objects (a question that names none), and without its
    weak-evidence threshold (learned for the scores of those stages)."""
    changed = config.with_changes(second_stage=None, stance_model=None, filter_objects="off", weak_score=None)
    if any(stage.needs_objects for stage in changed.stages()):
        raise BadQuestion(f"configuration {config.name} needs the question's two objects; name them")
    return changed


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
        self.topics = {self.title_key(t.title): t for t in topics}
        self.run_context = RunContext(self.workdir, progress=progress)  # how every question's run goes
        self.queue = PipelineQueue(max_waiting, max_wait)
        self._stores: dict[str, Any] = {}  # the encoders whose stores a probe reads (set at start)
        self.session: Session | None = None  # what every question's run shares (made on the pipeline thread)
        self._answers: OrderedDict[tuple[Any, ...], _Ranking] = OrderedDict()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.started = time.time()
        self.ready = False
        self.preembedded = 0
        self.questions = 0
        # an index holds no URLs: its ClueWeb12 ids' links are derived (docs/serve.md)
        self.links = SourceLinks()

    # -- the pipeline ---------------------------------------------------------------------------------------

    def _context(self, topic: Topic) -> Any:
        """What the stages of a question's run share (:meth:`~kueri.session.Session.context`)."""
        assert self.session is not None
        return self.session.context([topic])

    def start(self, preembed: bool | None = None) -> None:
        """Open (or build) the index, load the models and answer one question per configuration, so the first
        person's question is warm; then, on a small corpus, embed its passages in the background (None: when
        it has at most :data:`PREEMBED_LIMIT` passages). Blocks until the warm-up is done."""
        if self.corpus is not None:
            self.links = SourceLinks.of_corpus(self.corpus)
        self.queue.submit(self._open).result()
        self._stores = self.queue.submit(self._stored_encoders).result()
        for name in self.configs:
            self.queue.submit(lambda name=name: self._rank(WARM_UP, None, name)).result()
        self.ready = True
        self.queue.measuring = True
        size = len(self._any_index())
        for name, (stored, total) in self.queue.submit(self.embedded_share).result().items():
            rest = "" if stored == total else ("; the others are embedded when a question needs them (kueri embed "
                                                "--encoder all embeds them ahead)")
            log.info("serve: %d of the corpus' %d passages are embedded by %s (%.0f %%)%s", stored, total, name,
                     100 * stored / max(total, 1), rest)
        if preembed or (preembed is None and size <= PREEMBED_LIMIT):
            threading.Thread(target=self._preembed, name="kueri-preembed", daemon=True).start()

    def _open(self) -> None:
        if self.index_dir is not None:
            from kueri.lucene import LuceneIndex

            index = LuceneIndex(self.index_dir)
            for config in self.configs.values():
                if set(config.plan().indexes()) != {index.analyzer_config}:
                    index.close()
                    raise SetupError(f"the index {self.index_dir} was built with {index.analyzer_config.summary()}; "
                                     f"configuration {config.name} needs {config.analyzer.summary()} (build it with "
                                     f"kueri index --config {config.name}, or give --corpus)")
            self.session = Session(self.index_dir, self.run_context, indexes={index.analyzer_config: index})
        else:
            session = Session(self.corpus, self.run_context)
            for config in self.configs.values():
                for analyzer in config.plan().indexes():
                    session.index(analyzer)
            self.session = session  # once its indexes are open: /api/health reads it from another thread

    def _any_index(self) -> Any:
        assert self.session is not None
        return self.session.index(next(iter(self.configs.values())).plan().indexes()[0])

    def _encoder_names(self) -> list[str]:
        """The encoders whose passage embeddings the offered configurations' stages read."""
        return list(dict.fromkeys(name for config in self.configs.values() for name in config.plan().encoders()))

    def _stored_encoders(self) -> dict[str, Any]:
        """Those encoders as the stages use them (shared, their embeddings in the work folder's stores)."""

        assert self.session is not None
        return {name: self.session.encoder(name) for name in self._encoder_names()}

    def embedded_share(self) -> dict[str, tuple[int, int]]:
        """Per encoder: how many of the corpus' passages its store holds, and how many there are (on the pipeline
        thread: it reads every passage's text)."""
        from kueri.encoders import text_digest

        index = self._any_index()
        stored = self._stored_encoders()
        counts = dict.fromkeys(stored, 0)
        for start in range(0, len(index), 4096):
            digests = [text_digest(text) for text in index.contents(range(start, min(start + 4096, len(index))))]
            for name, encoder in stored.items():
                counts[name] += len(digests) - len(encoder.store.missing(digests))
        return {name: (count, len(index)) for name, count in counts.items()}

    def _preembed(self) -> None:
        """Embed every passage of the corpus with each offered configuration's encoders, a chunk per turn of the
        pipeline thread, so that questions go between chunks and every later question is warm."""
        index = self._any_index()
        ids = list(index.ids)
        for encoder in self.queue.submit(self._stored_encoders).result().values():
            for start in range(0, len(ids), PREEMBED_CHUNK):
                if self._stopping.is_set():
                    return
                chunk = ids[start:start + PREEMBED_CHUNK]
                try:
                    self.queue.background(lambda c=chunk, e=encoder: e.passages(index.contents_of(c, "serve"))
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

        self.queue.background(close).result()
        self.queue.shutdown()

    # -- questions ------------------------------------------------------------------------------

    @staticmethod
    def title_key(question: str) -> str:
        return " ".join(question.lower().split())

    def _topic(self, question: str, objects: tuple[str, str] | None) -> tuple[Topic, str]:
        """The topic a question is: a known Touché topic (its own record, so its ranking is ``kueri run``'s), or a
        free one; its objects given, the known topic's, extracted, or none (("", ""))."""
        known = self.topics.get(self.title_key(question))
        if known is not None:
            if objects is None or objects == known.objects:
                return known, f"topic {known.number}"
            return known._replace(objects=objects), "given"
        if objects is not None:
            return Topic(FREE_TOPIC, question, objects), "given"
        found = extract_objects(question)
        if found is not None:
            return Topic(FREE_TOPIC, question, (found.first, found.second)), "extracted"
        return Topic(FREE_TOPIC, question, ("", "")), "none"

    def cached(self, question: str, objects: tuple[str, str] | None, config: str | None, k: int,
               aspect: str | None = None) -> Answer | None:
        """The answer from the cache, without queueing (None: it must be computed)."""
        key = self._key(question, objects, config)
        with self._lock:
            ranking = self._answers.get(key)
            if ranking is None or any(hit.doc not in ranking.texts for hit in ranking.hits[:k]):
                return None
            self._answers.move_to_end(key)
        return self._answer(question, ranking, k, 0.0, aspect)

    def _key(self, question: str, objects: tuple[str, str] | None, config: str | None) -> tuple[Any, ...]:
        return (self.title_key(question), objects, config or self.default_config)

    def config(self, name: str | None) -> RunConfig:
        if name is None:
            return self.configs[self.default_config]
        try:
            config = get_config(name)
        except KueriError:
            config = None
        if config is None or config.name not in self.configs:
            raise BadQuestion(f"configuration {name!r} is not offered here; offered: {', '.join(self.configs)}")
        return config

    def expected_cost(self, question: str, objects: tuple[str, str] | None, config_name: str | None) -> str:
        """``cached`` when its ranking is cached (only passages to fill), ``warm`` when the stores hold the embeddings
        of about as many of its first stage's top candidates as its stages embed (40 of the top 100 for MiniLM and 15
        for e5 in the default's cascade, short by at most :data:`WARM_SHARE`), else ``cold``
        (and when it cannot tell: a question that fails here fails in its ranking with its message). On the pipeline
        thread: the queue probes each question before it picks the next one to rank (:mod:`kueri.serve.queue`)."""
        with self._lock:
            if self._key(question, objects, config_name) in self._answers:
                return "cached"
        if not self.ready:
            return "cold"
        try:
            config = self.config(config_name)
            topic, objects_from = self._topic(question, objects)
            if objects_from == "none":
                config = without_objects(config)
            cost = config.plan().cost(self._context(topic), self._stored)
        except Exception:  # noqa: BLE001 - an estimate only; the ranking reports what is wrong
            log.debug("serve: no cost estimate for %r", question, exc_info=True)
            return "cold"
        return "cold" if cost is None or cost.short > WARM_SHARE * cost.needed else "warm"

    def _stored(self, encoder: str, texts: list[str]) -> int:
        """How many of the passages with ``texts`` the store of ``encoder`` holds (all, for an encoder not stored)."""
        from kueri.encoders import text_digest

        if encoder not in self._stores:
            return len(texts)
        digests = [text_digest(text) for text in texts]
        return len(digests) - len(self._stores[encoder].store.missing(digests))

    def ask(self, question: str, objects: tuple[str, str] | None = None, config: str | None = None,
            k: int = 10, aspect: str | None = None, cost: str | None = None) -> Answer:
        """The answer to ``question`` (checked: :func:`kueri.serve.checks.check_text`), its top ``k`` passages; on the
        pipeline thread (call it through :attr:`queue`). ``aspect`` replaces the one found in the question ("":
        none); it marks the passages that speak of it and never changes the ranking. ``cost``: the kind it was
        queued as (:meth:`expected_cost`), whose estimate its time updates."""
        started = time.perf_counter()
        ranking = self._rank(question, objects, config, k, cost)
        return self._answer(question, ranking, k, time.perf_counter() - started, aspect)

    def _rank(self, question: str, objects: tuple[str, str] | None, config_name: str | None, k: int = 10,
              cost: str | None = None) -> _Ranking:
        key = self._key(question, objects, config_name)
        with self._lock:
            ranking = self._answers.get(key)
        if ranking is not None:
            started = time.perf_counter()
            if self._fill(ranking, k):
                self.queue.measured(time.perf_counter() - started, cost or "cached")
        else:
            embedded = self._embedded()
            started = time.perf_counter()
            config = self.config(config_name)
            topic, objects_from = self._topic(question, objects)
            note = ""
            if objects_from == "none":
                config = without_objects(config)
                note = ("no two objects were found in the question: the passages are ranked by the search alone, "
                        "without stances; name the two objects to compare them")
            assert self.session is not None
            try:  # labels come in _fill, for the passages shown only
                hits = self.session.rank(config, [topic]).get(topic.number, [])
            except EmptyRun:
                hits = []
                note = "no passage matches the question's words (the stoplist drops the most common ones)"
            ranking = _Ranking(topic, objects_from, hits, config, time.perf_counter() - started, note)
            self._fill(ranking, k)
            ranking.seconds = time.perf_counter() - started
            # the estimate of the kind it was queued as (what a question taken for that kind costs); else what it
            # turned out to be
            kind = cost or ("cold" if self._embedded() > embedded else "warm")
            self.queue.measured(ranking.seconds, kind)
            self.questions += 1
            log.info("serve: %r (objects %s, %s) ranked in %.2f s (%s)", question, topic.objects, objects_from,
                     ranking.seconds, kind)
        with self._lock:
            self._answers[key] = ranking
            self._answers.move_to_end(key)
            while len(self._answers) > ANSWER_CACHE:
                self._answers.popitem(last=False)
        return ranking

    def _embedded(self) -> int:
        """Passages the stored encoders have embedded so far (on the pipeline thread)."""
        return sum(encoder.embedded for encoder in self._stores.values())

    def _fill(self, ranking: _Ranking, k: int) -> bool:
        """The texts, quality scores, stance labels and deciding sentences of the top ``k`` passages (computed once
        per passage and ranking), from the configuration's own stages: :meth:`~kueri.session.Session.label` of
        the shown hits gives each the label ``kueri run`` gives it."""
        missing = [hit.doc for hit in ranking.hits[:k] if hit.doc not in ranking.texts]
        if not missing:
            return False
        assert self.session is not None
        context = self._context(ranking.topic)
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

    def _answer(self, question: str, ranking: _Ranking, k: int, seconds: float, aspect: str | None = None
                ) -> Answer:
        topic = ranking.topic
        objects = topic.objects if all(topic.objects) else None
        matcher = ObjectMatcher(*objects) if objects else None
        found = analyse(question)
        aspect_from = "given" if aspect is not None else ("extracted" if found.aspect else "none")
        aspect = (aspect if aspect is not None else found.aspect) or None
        if aspect is None:
            aspect_from = "none"
        terms = aspect_terms(aspect)
        passages = []
        for rank, hit in enumerate(ranking.hits[:k], start=1):
            text = ranking.texts[hit.doc]
            passages.append(Passage(rank, hit.doc, hit.stance if hit.stance in STANCES else UNLABELLED, hit.score,
                                    ranking.quality.get(hit.doc), text, self.links.url(hit.doc),
                                    tuple(mentions(text, matcher)) if matcher else (), speaks_of(text, terms),
                                    ranking.deciding_sentences.get(hit.doc)))
        threshold = ranking.config.weak_score  # a question without objects was ranked by a configuration without one
        evidence = Evidence.of([hit.score for hit in ranking.hits], threshold) if threshold is not None else None
        summaries = {side: summarise(passages, side, terms) for side in SIDES} if objects else {}
        # a Touché topic is a comparative question by definition; a free one is if the extractor says so
        comparative = ranking.objects_from.startswith("topic") or (found.comparative and objects is not None)
        return Answer(question, objects, ranking.objects_from, topic.number if topic.number != FREE_TOPIC else None,
                      ranking.config.name, ranking.config.summary(), len(ranking.hits), passages, Verdict.of(passages),
                      seconds or 0.0, ranking.note, comparative, aspect, aspect_from, evidence, summaries)

    def passage_text(self, passage_id: str) -> str | None:
        """A passage's stored text by id (None: not in the index); on the pipeline thread."""
        index = self._any_index()
        if index.docid(passage_id) is None:
            return None
        return index.contents_of([passage_id], "serve")[0]

    def run_lines(self, answer: Answer) -> list[str]:
        """The answer's passages as the lines of a Touché run file (qid: the topic's number, else ``q``)."""
        from kueri.runfile import format_run_lines

        hits = [Hit(p.id, p.relevance, p.stance) for p in answer.passages]
        return list(format_run_lines({answer.topic or FREE_TOPIC: hits}, f"kueri-{answer.config}"))

    def health(self) -> dict[str, Any]:
        index = self._any_index() if self.session is not None else None
        return {"status": "ok" if self.ready else "starting", "passages": len(index) if index else None,
                "configs": list(self.configs), "default_config": self.default_config,
                "uptime_seconds": round(time.time() - self.started, 1), "questions_ranked": self.questions,
                "waiting": self.queue.waiting, "waiting_by_cost": self.queue.waiting_by_cost(),
                "preembedded": self.preembedded, "max_wait_seconds": self.queue.max_wait,
                "question_seconds": round(self.queue.question_seconds, 3),
                "seconds_by_cost": {kind: round(seconds, 3) for kind, seconds in self.queue.seconds.items()},
                "measured_costs": sorted(self.queue.measured_kinds)}


def known_topics(paths: Iterable[str | Path]) -> list[Topic]:
    from kueri.parse import read_topics

    return [topic for path in paths for topic in read_topics(path)]
