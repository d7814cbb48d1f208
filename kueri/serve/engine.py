"""The engine behind ``kueri serve``: one question in, the configuration's ranking of it out.

A question becomes a one-topic run of the same :class:`~kueri.pipeline.Pipeline` that ``kueri run`` uses
(no second ranking path): a Touché topic's question gets exactly that topic's ranking. What a run
loads once (the open indexes, the encoders with their embedding caches, the stance model) is shared by
every question's pipeline. All the work that touches Java or the models runs on one *pipeline thread*:
pyjnius attaches a thread on its first Java call and the embedding caches are not thread-safe, and on 2
cores a second ranking thread would only slow both. Answers are kept in a small LRU, so a repeated
question is answered without queueing.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import unicodedata
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kueri.config import RunConfig, get_config
from kueri.errors import EmptyRun, KueriError, SetupError
from kueri.objects import ObjectMatcher, mentions
from kueri.questions import extract_objects
from kueri.records import Hit, Topic

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_QUESTION = 500  # characters
MAX_OBJECT = 100  # characters per object
MAX_K = 1000  # a run keeps at most 1000 hits a topic
ANSWER_CACHE = 256  # answers kept (each a whole ranking of ids and scores: a few tens of kB)
#: A corpus this small is embedded whole when the server starts (in chunks between questions), so every
#: question on it is warm; a larger one embeds the candidates each question needs and keeps them.
PREEMBED_LIMIT = 20_000
PREEMBED_CHUNK = 16  # passages embedded per turn of the pipeline thread: a question waits at most one chunk
FREE_TOPIC = "q"  # the topic number of a question that is not a known topic's
SIDES = ("FIRST", "SECOND", "NEUTRAL", "NO")


class BadQuestion(KueriError):
    """A question or parameter the engine cannot answer: the message says why (HTTP 400)."""


class Busy(KueriError):
    """Too many questions wait already (HTTP 503)."""


def check_text(text: str, what: str, limit: int) -> str:
    """``text`` with its whitespace collapsed; a :class:`BadQuestion` if empty, too long or not text."""
    if any(unicodedata.category(c) in ("Cc", "Cs", "Co") and c not in "\t\n\r" for c in text) or "\ufffd" in text:
        raise BadQuestion(f"the {what} holds binary data or control characters")
    text = " ".join(text.split())
    if not text:
        raise BadQuestion(f"the {what} is empty")
    if len(text) > limit:
        raise BadQuestion(f"the {what} is {len(text)} characters long; at most {limit} are accepted")
    return text


def parse_objects(text: str) -> tuple[str, str]:
    """``"laptop, desktop"`` (as a topic's ``<objects>``) -> two checked object names."""
    items = text.split(",")
    if len(items) != 2:
        raise BadQuestion(f"objects must be two names separated by a comma, got {len(items)} item(s)")
    first, second = (check_text(item, "object", MAX_OBJECT) for item in items)
    return first, second


def chatnoir_url(passage_id: str) -> str | None:
    """ChatNoir's cached copy of a ClueWeb12 passage's document, as the corpus' ``chatNoirUrl`` writes it; None for
    an id that is not ClueWeb12's. ChatNoir names a document ``uuid5(NAMESPACE_URL, "clueweb12:" + id)``."""
    document = passage_id.split("___", 1)[0]
    if not document.startswith("clueweb12-"):
        return None
    name = uuid.uuid5(uuid.NAMESPACE_URL, "clueweb12:" + document)
    return f"https://chatnoir.eu/cache?uuid={name}&index=cw12&raw&plain"


class SourceLinks:
    """Each passage's source link, the corpus' ``chatNoirUrl``: derived from the id by :func:`chatnoir_url`, which
    gives the corpus' own URL wherever it has one, except for the passages kept in ``exceptions`` (no URL in the
    corpus, about 5 %, or another one), so the server holds a few ids instead of every passage's URL."""

    def __init__(self, exceptions: dict[str, str | None] | None = None) -> None:
        self.exceptions = exceptions or {}

    @classmethod
    def of_corpus(cls, corpus: str | Path) -> SourceLinks:
        from kueri.parse import PassageReader

        return cls({p.id: p.chatnoir_url for p in PassageReader(corpus, skip_bad=True)
                    if p.chatnoir_url != chatnoir_url(p.id)})

    def url(self, passage_id: str) -> str | None:
        return self.exceptions[passage_id] if passage_id in self.exceptions else chatnoir_url(passage_id)


@dataclass(frozen=True)
class Passage:
    rank: int
    id: str
    stance: str  # FIRST / SECOND / NEUTRAL / NO (Q0, no stance given, is shown as NO)
    relevance: float  # the configuration's ranking score
    quality: float  # the offline argument-quality model's score, 0..1
    text: str
    url: str | None
    marks: tuple[tuple[int, int, str], ...]  # object mentions: (start, end, OBJ1 | OBJ2)

    def pieces(self) -> list[tuple[str, str | None]]:
        """The text cut at the object mentions: (text, None | "OBJ1" | "OBJ2"), for a page to mark them."""
        out: list[tuple[str, str | None]] = []
        at = 0
        for start, end, label in self.marks:
            out.extend([(self.text[at:start], None), (self.text[start:end], label)])
            at = end
        out.append((self.text[at:], None))
        return [piece for piece in out if piece[0]]

    def as_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "id": self.id, "stance": self.stance, "relevance": self.relevance,
                "quality": round(self.quality, 6), "url": self.url, "text": self.text}


@dataclass(frozen=True)
class Verdict:
    """How the top ``depth`` passages lean: counts per stance and their rank-weighted shares.

    A passage at rank r weighs 1 / log2(r + 1), nDCG's discount: the first passages, the ones a reader
    reads, count most. ``first_share`` is FIRST's weight over FIRST's and SECOND's (None: neither occurs).
    """

    depth: int
    counts: dict[str, int]
    weights: dict[str, float]
    first_share: float | None

    @property
    def leaning(self) -> str:
        """``first``, ``second``, ``balanced`` (shares within 40-60 %) or ``none`` (no passage takes a side)."""
        if self.first_share is None:
            return "none"
        if self.first_share >= 0.6:
            return "first"
        if self.first_share <= 0.4:
            return "second"
        return "balanced"

    @classmethod
    def of(cls, passages: Sequence[Passage]) -> Verdict:
        counts = dict.fromkeys(SIDES, 0)
        weights = dict.fromkeys(SIDES, 0.0)
        for passage in passages:
            counts[passage.stance] += 1
            weights[passage.stance] += 1 / math.log2(passage.rank + 1)
        sided = weights["FIRST"] + weights["SECOND"]
        return cls(len(passages), counts, {k: round(v, 4) for k, v in weights.items()},
                   round(weights["FIRST"] / sided, 4) if sided else None)

    def as_json(self) -> dict[str, Any]:
        return {"depth": self.depth, "counts": self.counts, "weights": self.weights, "first_share": self.first_share,
                "leaning": self.leaning}


@dataclass(frozen=True)
class Answer:
    question: str
    objects: tuple[str, str] | None
    objects_from: str  # "given", "topic N" (a known topic's <objects>), "extracted", "none"
    topic: str | None  # the Touché topic the question is, if it is one
    config: str
    config_summary: str
    hits: int  # passages the configuration retrieved (before the cut to k)
    passages: list[Passage]
    verdict: Verdict
    seconds: float
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"question": self.question, "objects": list(self.objects) if self.objects else None,
                "objects_from": self.objects_from, "topic": self.topic, "config": self.config,
                "config_summary": self.config_summary, "hits": self.hits, "k": len(self.passages),
                "verdict": self.verdict.as_json(), "passages": [p.as_json() for p in self.passages],
                "seconds": round(self.seconds, 3), "note": self.note}


@dataclass
class _Ranking:
    """A question's whole ranking, as the pipeline made it (kept in the answer cache)."""

    topic: Topic
    objects_from: str
    hits: list[Hit]
    config: RunConfig
    seconds: float
    note: str = ""
    quality: dict[str, float] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)


def without_objects(config: RunConfig) -> RunConfig:
    """``config`` without the stages that read a topic's two objects (a question that names none)."""
    changed = config.with_changes(second_stage=None, stance_depth=None, filter_objects="off")
    if any(stage.needs_objects for stage in changed.stages()):
        raise BadQuestion(f"configuration {config.name} needs the question's two objects; name them")
    return changed


class Engine:
    """Answers questions over one corpus (or one prebuilt index) with the offered configurations."""

    def __init__(self, *, corpus: str | Path | None = None, index: str | Path | None = None,
                 configs: Sequence[str] = ("default",), workdir: str | Path | None = None,
                 topics: Sequence[Topic] = (), progress: bool = False, max_waiting: int = 32) -> None:
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
        self.progress = progress
        self.max_waiting = max_waiting
        self._indexes: dict[Any, Any] = {}
        self._shared: dict[Any, Any] = {}
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="kueri-pipeline")
        self._answers: OrderedDict[tuple[Any, ...], _Ranking] = OrderedDict()
        self._lock = threading.Lock()
        self._waiting = 0
        self._stopping = threading.Event()
        self.started = time.time()
        self.ready = False
        self.preembedded = 0
        self.questions = 0
        # an index holds no URLs: its ClueWeb12 ids' links are derived (docs/serve.md)
        self.links = SourceLinks()

    # -- the pipeline thread --------------------------------------------------------------------

    def on_pipeline(self, work: Callable[[], T]) -> Future[T]:
        """``work`` queued on the pipeline thread; :class:`Busy` when too many questions wait already."""
        with self._lock:
            if self._waiting >= self.max_waiting:
                raise Busy(f"{self._waiting} questions are waiting already; try again in a moment")
            self._waiting += 1
        future = self._pool.submit(work)
        future.add_done_callback(lambda _: self._done_waiting())
        return future

    def _done_waiting(self) -> None:
        with self._lock:
            self._waiting -= 1

    def _pipeline(self, topic: Topic) -> Any:
        from kueri.pipeline import Pipeline

        corpus = self.corpus if self.corpus is not None else self.index_dir
        return Pipeline(corpus, [topic], self.workdir, progress=self.progress, indexes=self._indexes,
                        shared=self._shared)

    def start(self, preembed: bool | None = None) -> None:
        """Open (or build) the index, load the models and answer one question per configuration, so the first
        person's question is warm; then, on a small corpus, embed its passages in the background (None: when
        it has at most :data:`PREEMBED_LIMIT` passages). Blocks until the warm-up is done."""
        if self.corpus is not None:
            self.links = SourceLinks.of_corpus(self.corpus)
        self.on_pipeline(self._open).result()
        for name in self.configs:
            self.on_pipeline(lambda name=name: self._rank("Which is better, a laptop or a desktop?", None, name)
                             ).result()
        self.ready = True
        size = len(self._any_index())
        for name, (stored, total) in self.on_pipeline(self.embedded_share).result().items():
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
                analyzers = {config.analyzer} | {get_config(n).analyzer for n in config.fuse}
                if analyzers != {index.analyzer_config}:
                    index.close()
                    raise SetupError(f"the index {self.index_dir} was built with {index.analyzer_config.summary()}; "
                                     f"configuration {config.name} needs {config.analyzer.summary()} (build it with "
                                     f"kueri index --config {config.name}, or give --corpus)")
            self._indexes[index.analyzer_config] = index
        else:
            for config in self.configs.values():
                self._pipeline(Topic(FREE_TOPIC, "", ("", ""))).index(config.analyzer)

    def _any_index(self) -> Any:
        return next(iter(self._indexes.values()))

    def _encoder_names(self) -> list[str]:
        """The encoders whose passage embeddings the offered configurations' stages read (a stage without
        ``embeds``, one not built on :class:`~kueri.stages.StageDefaults`, reads none)."""
        return list(dict.fromkeys(name for config in self.configs.values() for stage in config.stages()
                                  for name in getattr(stage, "embeds", tuple)()))

    def _stored_encoders(self) -> dict[str, Any]:
        """Those encoders as the stages use them (shared, their embeddings in the work folder's stores)."""
        from kueri.stages import stored_encoder

        context = self._pipeline(Topic(FREE_TOPIC, "", ("", "")))
        return {name: stored_encoder(context, name) for name in self._encoder_names()}

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
        for encoder in self.on_pipeline(self._stored_encoders).result().values():
            for start in range(0, len(ids), PREEMBED_CHUNK):
                if self._stopping.is_set():
                    return
                chunk = ids[start:start + PREEMBED_CHUNK]
                try:
                    self._pool.submit(lambda c=chunk, e=encoder: e.passages(index.contents_of(c, "serve"))).result()
                except (RuntimeError, CancelledError):  # the pool shut down: the server stops
                    return
                self.preembedded = max(self.preembedded, start + len(chunk))
        log.info("serve: every passage of the corpus is embedded; every question is warm now")

    def close(self) -> None:
        """Stop embedding ahead, close the indexes and leave the JVM (on the pipeline thread, which used it)."""
        from kueri.lucene import detach_thread

        self._stopping.set()

        def close() -> None:
            for index in self._indexes.values():
                index.close()
            self._indexes.clear()
            detach_thread()

        self._pool.submit(close).result()
        self._pool.shutdown(wait=True, cancel_futures=True)

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

    def cached(self, question: str, objects: tuple[str, str] | None, config: str | None, k: int) -> Answer | None:
        """The answer from the cache, without queueing (None: it must be computed)."""
        key = self._key(question, objects, config)
        with self._lock:
            ranking = self._answers.get(key)
            if ranking is None or any(hit.doc not in ranking.quality for hit in ranking.hits[:k]):
                return None
            self._answers.move_to_end(key)
        return self._answer(question, ranking, k, 0.0)

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

    def ask(self, question: str, objects: tuple[str, str] | None = None, config: str | None = None,
            k: int = 10) -> Answer:
        """The answer to ``question`` (checked: see :func:`check_text`), its top ``k`` passages; on the pipeline
        thread (call it through :meth:`on_pipeline`)."""
        started = time.perf_counter()
        ranking = self._rank(question, objects, config, k)
        return self._answer(question, ranking, k, time.perf_counter() - started)

    def _rank(self, question: str, objects: tuple[str, str] | None, config_name: str | None, k: int = 10
              ) -> _Ranking:
        key = self._key(question, objects, config_name)
        with self._lock:
            ranking = self._answers.get(key)
        if ranking is None:
            started = time.perf_counter()
            config = self.config(config_name)
            topic, objects_from = self._topic(question, objects)
            note = ""
            if objects_from == "none":
                config = without_objects(config)
                note = ("no two objects were found in the question: the passages are ranked by the search alone, "
                        "without stances; name the two objects to compare them")
            pipeline = self._pipeline(topic)
            try:
                hits = pipeline.run(config).get(topic.number, [])
            except EmptyRun:
                hits = []
                note = "no passage matches the question's words (the stoplist drops the most common ones)"
            ranking = _Ranking(topic, objects_from, hits, config, time.perf_counter() - started, note)
            self.questions += 1
            log.info("serve: %r (objects %s, %s) ranked in %.2f s", question, topic.objects, objects_from,
                     ranking.seconds)
        self._fill(ranking, k)
        with self._lock:
            self._answers[key] = ranking
            self._answers.move_to_end(key)
            while len(self._answers) > ANSWER_CACHE:
                self._answers.popitem(last=False)
        return ranking

    def _fill(self, ranking: _Ranking, k: int) -> None:
        """The texts and quality scores of the top ``k`` passages (computed once per passage and ranking)."""
        missing = [hit.doc for hit in ranking.hits[:k] if hit.doc not in ranking.quality]
        if not missing:
            return
        quality = self._shared.get("serve-quality")
        if quality is None:
            from kueri.quality.offline import OfflineQualityModel

            quality = self._shared["serve-quality"] = OfflineQualityModel.load()
        texts = self._any_index().contents_of(missing, "serve")
        for pid, text in zip(missing, texts, strict=True):
            ranking.texts[pid] = text
            ranking.quality[pid] = quality.score(text)

    def _answer(self, question: str, ranking: _Ranking, k: int, seconds: float) -> Answer:
        topic = ranking.topic
        objects = topic.objects if all(topic.objects) else None
        matcher = ObjectMatcher(*objects) if objects else None
        passages = []
        for rank, hit in enumerate(ranking.hits[:k], start=1):
            text = ranking.texts[hit.doc]
            passages.append(Passage(rank, hit.doc, hit.stance if hit.stance in SIDES else "NO", hit.score,
                                    ranking.quality[hit.doc], text, self.links.url(hit.doc),
                                    tuple(mentions(text, matcher)) if matcher else ()))
        return Answer(question, objects, ranking.objects_from, topic.number if topic.number != FREE_TOPIC else None,
                      ranking.config.name, ranking.config.summary(), len(ranking.hits), passages, Verdict.of(passages),
                      seconds or 0.0, ranking.note)

    def health(self) -> dict[str, Any]:
        index = self._any_index() if self._indexes else None
        return {"status": "ok" if self.ready else "starting", "passages": len(index) if index else None,
                "configs": list(self.configs), "default_config": self.default_config,
                "uptime_seconds": round(time.time() - self.started, 1), "questions_ranked": self.questions,
                "waiting": self._waiting, "preembedded": self.preembedded}


def known_topics(paths: Iterable[str | Path]) -> list[Topic]:
    from kueri.parse import read_topics

    return [topic for path in paths for topic in read_topics(path)]
