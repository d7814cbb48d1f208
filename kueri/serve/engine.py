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

import dataclasses
import logging
import math
import re
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
from kueri.questions import analyse, aspect_terms, extract_objects, speaks_of
from kueri.records import Hit, Topic

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_QUESTION = 500  # characters
MAX_OBJECT = 100  # characters per object
MAX_K = 1000  # a run keeps at most 1000 hits a topic
#: How many top passages get the sentence that decided their stance: explaining one costs an analysis per sentence
#: (about 30 ms), so the API's deeper passages carry none.
EXPLAINED = 100
#: Seconds a question may wait for its answer: a new question that the queue would keep longer is refused at once
#: (503 with Retry-After), and one still waiting after this long gets a 503 too (``kueri serve --max-wait``).
MAX_WAIT = 60.0
#: What the queue expects a question to cost until one is measured: a cold question on the sample took 5.5 s on 2
#: quiet cores and 17-18 s at a load of 14 (docs/serve.md). The start's warm-up question is not measured: it also
#: pays for loading the models, about 60 s at that load, and would make the queue admit one question at a time.
QUESTION_SECONDS_AT_START = 15.0
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
    """Too many questions wait already (HTTP 503, with ``Retry-After``: ``retry_after`` seconds)."""

    def __init__(self, message: str, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = max(1, retry_after)


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
    about_aspect: bool = False  # the passage has a word of the question's aspect (kueri.questions.speaks_of)
    deciding_sentence: str | None = None  # what decided the stance (kueri.stance.StanceModel.explain)

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
                "quality": round(self.quality, 6), "url": self.url, "text": self.text,
                "about_aspect": self.about_aspect,
                "deciding_sentence": self.deciding_sentence}


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
    comparative: bool = True  # the question asks for a choice between two objects (kueri.questions.analyse)
    aspect: str | None = None  # what the objects are compared on ("cheaper", "gaming")
    aspect_from: str = "none"  # "extracted", "given" or "none"
    evidence: Evidence | None = None  # how strong the best passages are (None: no threshold for the configuration)
    summaries: dict[str, list[SummarySentence]] = field(default_factory=dict)  # "FIRST" / "SECOND" -> sentences

    @property
    def confident(self) -> bool:
        """Whether the verdict stands: False when the best passages are weak (the page shows no verdict then)."""
        return self.evidence is None or not self.evidence.weak

    def as_json(self) -> dict[str, Any]:
        verdict = {**self.verdict.as_json(), "confident": self.confident}
        return {"question": self.question, "comparative": self.comparative,
                "objects": list(self.objects) if self.objects else None,
                "objects_from": self.objects_from, "aspect": self.aspect, "aspect_from": self.aspect_from,
                "topic": self.topic, "config": self.config,
                "config_summary": self.config_summary, "hits": self.hits, "k": len(self.passages),
                "evidence": self.evidence.as_json() if self.evidence else None,
                "verdict": verdict, "summaries": {SIDE_KEYS[side]: [s.as_json() for s in sentences]
                                                  for side, sentences in self.summaries.items()},
                "passages": [p.as_json() for p in self.passages],
                "seconds": round(self.seconds, 3), "note": self.note}

    def narrowed(self) -> Answer:
        """This answer with only the passages that speak of its aspect (the ranks stay the ranking's)."""
        kept = [p for p in self.passages if p.about_aspect]
        ranks = {p.rank for p in kept}
        return dataclasses.replace(self, passages=kept, summaries={
            side: [s for s in sentences if s.rank in ranks] for side, sentences in self.summaries.items()})


SIDE_KEYS = {"FIRST": "first", "SECOND": "second"}
#: The best passages' ranking score under which a passage is rarely relevant, per configuration; learned on the
#: Touché 2020/2021 judgments by scripts/learn_evidence_threshold.py (docs/serve.md says how).
WEAK_SCORE = {"default": 1.5608}
EVIDENCE_DEPTH = 3  # the passages whose scores are looked at: the first a reader reads


@dataclass(frozen=True)
class Evidence:
    """Whether the corpus has much to say: ``weak`` when none of the top ``depth`` passages scores ``threshold``."""

    threshold: float
    depth: int
    best: float | None  # the best score of the top passages (None: no passage)
    weak: bool

    @classmethod
    def of(cls, scores: Sequence[float], threshold: float, depth: int = EVIDENCE_DEPTH) -> Evidence:
        best = max(scores[:depth]) if scores else None
        return cls(threshold, depth, best, best is None or best < threshold)

    def as_json(self) -> dict[str, Any]:
        return {"weak": self.weak, "best_score": self.best, "threshold": self.threshold, "depth": self.depth}


@dataclass(frozen=True)
class SummarySentence:
    text: str
    rank: int  # the passage it is taken from
    id: str

    def as_json(self) -> dict[str, Any]:
        return {"text": self.text, "rank": self.rank, "id": self.id}


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_REASON = re.compile(r"(?i)\b(?:better|worse|more|less|than|because|faster|slower|cheaper|easier|harder|safer|"
                     r"healthier|prefer\w*|advantages?|disadvantages?|benefits?|drawbacks?|superior|inferior)\b")
SUMMARY_SENTENCES = 3
SUMMARY_LENGTH = (30, 300)  # characters a summary sentence may have


def summarise(passages: Sequence[Passage], side: str, terms: Sequence[str]) -> list[SummarySentence]:
    """The sentences that best state one side's case: extractive, from the passages shown with that stance.

    A sentence scores by what the pipeline already found: it names the side's object (the object mentions
    the stance model sees), it gives a reason (a comparative word, ``because``, ``than``), it speaks of the
    aspect, and its passage ranks high (1 / log2(rank + 1), the verdict's weights). At most one sentence a
    passage, at most :data:`SUMMARY_SENTENCES`, in the order of their passages.
    """
    label = "OBJ1" if side == "FIRST" else "OBJ2"
    candidates: list[tuple[float, Passage, str]] = []
    for passage in passages:
        if passage.stance != side:
            continue
        best: tuple[float, str] | None = None
        at = 0
        for sentence in _SENTENCE.split(passage.text):
            start = passage.text.find(sentence, at)
            end = start + len(sentence)
            at = end
            sentence = " ".join(sentence.split())
            if not SUMMARY_LENGTH[0] <= len(sentence) <= SUMMARY_LENGTH[1]:
                continue
            names = any(label == mark and start <= a < end for a, _, mark in passage.marks)
            score = (2.0 * names + 1.0 * bool(_REASON.search(sentence)) + 1.0 * speaks_of(sentence, list(terms)))
            if score and (best is None or score > best[0]):
                best = (score, sentence)
        if best is not None:
            candidates.append((best[0] / math.log2(passage.rank + 1), passage, best[1]))
    chosen = sorted(candidates, key=lambda c: -c[0])[:SUMMARY_SENTENCES]
    return [SummarySentence(text, p.rank, p.id) for _, p, text in sorted(chosen, key=lambda c: c[1].rank)]


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
    deciding_sentences: dict[str, str | None] = field(default_factory=dict)


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
                 topics: Sequence[Topic] = (), progress: bool = False, max_waiting: int = 32,
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
        self.progress = progress
        self.max_waiting = max_waiting
        self.max_wait = max_wait
        self.question_seconds = QUESTION_SECONDS_AT_START  # what ranking a question costs lately
        self._measuring = False  # from the end of the warm-up
        self._questions_waiting = 0
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

    def on_pipeline(self, work: Callable[[], T], *, question: bool = False) -> Future[T]:
        """``work`` queued on the pipeline thread; :class:`Busy` when too many wait already. A ``question`` (a
        ranking to compute) is also refused at once when the questions queued before it would take longer than
        :attr:`max_wait` seconds to answer, at what a question has cost lately (the first one always goes)."""
        with self._lock:
            if self._waiting >= self.max_waiting:
                raise Busy(f"{self._waiting} questions are waiting already; try again in a moment",
                           self.retry_after())
            if question and self._questions_waiting and self.max_wait and \
                    (self._questions_waiting + 1) * self.question_seconds > self.max_wait:
                raise Busy(f"{self._questions_waiting} questions are waiting already, about "
                           f"{self._questions_waiting * self.question_seconds:.0f} s of work; this one would wait "
                           f"longer than {self.max_wait:.0f} s: try again later", self.retry_after())
            self._waiting += 1
            self._questions_waiting += question
        future = self._pool.submit(work)
        future.add_done_callback(lambda _: self._done_waiting(question))
        return future

    def retry_after(self) -> int:
        """Seconds until the questions waiting now are likely answered (for ``Retry-After``)."""
        return max(1, math.ceil(self._questions_waiting * self.question_seconds))

    def _done_waiting(self, question: bool) -> None:
        with self._lock:
            self._waiting -= 1
            self._questions_waiting -= question

    def _measured(self, seconds: float) -> None:
        """A question's ranking took ``seconds``: the cost the queue expects moves halfway towards it (the
        cost changes fast when the embeddings fill or the machine's load changes)."""
        if not self._measuring:
            return
        with self._lock:
            self.question_seconds = seconds if not self.question_seconds else (self.question_seconds + seconds) / 2

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
        self._measuring = True
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

    def cached(self, question: str, objects: tuple[str, str] | None, config: str | None, k: int,
               aspect: str | None = None) -> Answer | None:
        """The answer from the cache, without queueing (None: it must be computed)."""
        key = self._key(question, objects, config)
        with self._lock:
            ranking = self._answers.get(key)
            if ranking is None or any(hit.doc not in ranking.quality for hit in ranking.hits[:k]):
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

    def ask(self, question: str, objects: tuple[str, str] | None = None, config: str | None = None,
            k: int = 10, aspect: str | None = None) -> Answer:
        """The answer to ``question`` (checked: see :func:`check_text`), its top ``k`` passages; on the pipeline
        thread (call it through :meth:`on_pipeline`). ``aspect`` replaces the one found in the question ("":
        none); it marks the passages that speak of it and never changes the ranking."""
        started = time.perf_counter()
        ranking = self._rank(question, objects, config, k)
        return self._answer(question, ranking, k, time.perf_counter() - started, aspect)

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
            try:  # stance labels come in _fill, for the passages shown only: the same labels, a tenth of the work
                hits = pipeline.run(config.with_changes(stance_depth=None)).get(topic.number, [])
            except EmptyRun:
                hits = []
                note = "no passage matches the question's words (the stoplist drops the most common ones)"
            ranking = _Ranking(topic, objects_from, hits, config, time.perf_counter() - started, note)
            self._measured(ranking.seconds)
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
        """The texts, quality scores and stance labels of the top ``k`` passages (computed once per passage and
        ranking). A label is the configuration's stance stage's for that hit: :func:`kueri.stance.label_run` of the
        shown hits with the pipeline's model, as ``kueri run`` labels every hit (a label depends on its passage
        alone)."""
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
        depth = min(k, ranking.config.stance_depth or 0)
        if not depth or not all(ranking.topic.objects):
            return
        from kueri.stance import StanceModel, label_run

        model = self._shared.get("stance-model")
        if model is None:
            model = self._shared["stance-model"] = StanceModel.load()  # what the stance stage would load
        topic = ranking.topic
        labelled_run = label_run({topic.number: ranking.hits[:depth]}, [topic], ranking.texts, depth=None, model=model)
        ranking.hits[:depth] = labelled_run[topic.number]
        labelled = {hit.doc for hit in ranking.hits[:min(depth, EXPLAINED)] if hit.stance in SIDES}
        if labelled:
            matcher = ObjectMatcher(*topic.objects)
            for pid, text in zip(missing, texts, strict=True):
                if pid in labelled:
                    ranking.deciding_sentences[pid] = model.explain(text, matcher).sentence

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
            passages.append(Passage(rank, hit.doc, hit.stance if hit.stance in SIDES else "NO", hit.score,
                                    ranking.quality[hit.doc], text, self.links.url(hit.doc),
                                    tuple(mentions(text, matcher)) if matcher else (), speaks_of(text, terms),
                                    ranking.deciding_sentences.get(hit.doc)))
        # the threshold is for the configuration's own scores; without objects its later stages do not run
        threshold = WEAK_SCORE.get(ranking.config.name) if ranking.objects_from != "none" else None
        evidence = Evidence.of([hit.score for hit in ranking.hits], threshold) if threshold is not None else None
        summaries = {side: summarise(passages, side, terms) for side in SIDE_KEYS} if objects else {}
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
        index = self._any_index() if self._indexes else None
        return {"status": "ok" if self.ready else "starting", "passages": len(index) if index else None,
                "configs": list(self.configs), "default_config": self.default_config,
                "uptime_seconds": round(time.time() - self.started, 1), "questions_ranked": self.questions,
                "waiting": self._waiting, "preembedded": self.preembedded, "max_wait_seconds": self.max_wait,
                "question_seconds": round(self.question_seconds, 3)}


def known_topics(paths: Iterable[str | Path]) -> list[Topic]:
    from kueri.parse import read_topics

    return [topic for path in paths for topic in read_topics(path)]
