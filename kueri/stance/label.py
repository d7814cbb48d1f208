"""Fill the stance column of a run: each of the top ``depth`` hits of a topic gets FIRST, SECOND, NEUTRAL or NO.

Ranking and scores are untouched; hits below ``depth`` keep the stance they had (``Q0``, "no stance
given", for a fresh run: it is evaluated as NO, and it tells a reader that the passage was not looked at,
which NO would not).

Passage texts come from a mapping ``{passage id: contents}`` or a function from a list of ids to their
contents in order: :func:`index_texts` reads them from an open index (its stored ``contents`` field),
:func:`corpus_texts` from corpus files.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kueri.errors import KueriError, deprecated
from kueri.objects import ObjectMatcher, mask_passage
from kueri.processes import ordered_pool_map, worker_pool
from kueri.progress import progress as with_progress
from kueri.records import Hit, Run, Texts, Topic
from kueri.stance.facts import LABELS
from kueri.stance.family import Cascade, StanceClassifier, load_model

if TYPE_CHECKING:  # the index module needs the JVM: import it only for the type
    from kueri.lucene.index import LuceneIndex

#: How many of a topic's top hits ``kueri stance`` labels unless told; a depth None is every hit, everywhere.
DEFAULT_DEPTH = 50


def checked_depth(depth: int | None) -> int | None:
    """``depth`` as every labelling function reads it: a number of top hits, at least 1, or None (every hit); 0, an
    old spelling of every hit, still works for a release, with a warning."""
    if depth == 0:
        deprecated("a stance depth of 0", "None (every hit)")
        return None
    if depth is not None and depth < 0:
        raise KueriError(f"stance: depth must be at least 1 (None: every hit), not {depth}")
    return depth


@dataclass
class LabelSummary:
    """What :func:`label_run` did: labelled hits, their label counts and the time it took."""

    labelled: int = 0
    seconds: float = 0.0
    counts: dict[str, int] | None = None

    @property
    def rate(self) -> float:
        return self.labelled / self.seconds if self.seconds > 0 else float("inf")


def _to_label(hits: Sequence[Hit], depth: int | None) -> Sequence[Hit]:
    """The hits of a topic that get a label: the top ``depth``, or every hit with None."""
    return hits[:depth] if depth else hits


def _lookup(texts: Mapping[str, str] | Texts, ids: Sequence[str], qid: str) -> Sequence[str]:
    if callable(texts):
        found = texts(ids)
        if len(found) != len(ids):
            raise KueriError(f"stance: topic {qid}: asked for {len(ids)} passage texts, got {len(found)}")
        return found
    missing = [pid for pid in ids if pid not in texts]
    if missing:
        raise KueriError(f"stance: topic {qid}: no text for {len(missing)} passage(s), e.g. {missing[0]} "
                         "(is the run from another corpus?)")
    return [texts[pid] for pid in ids]


def label_run(
    run: Run,
    topics: Iterable[Topic],
    texts: Mapping[str, str] | Texts,
    depth: int | None = DEFAULT_DEPTH,
    model: StanceClassifier | str | Path | None = None,
    summary: LabelSummary | None = None,
    progress: bool = False,
    workers: int = 1,
) -> Run:
    """A copy of ``run`` whose top ``depth`` hits per topic (None: every hit) carry a stance label.

    FIRST / SECOND favour the first / second object of the topic's ``<objects>``. ``model``: an open
    :class:`~kueri.stance.family.StanceClassifier`, a shipped model's name or a model file, or None for the
    default. ``texts``: ``{passage id: contents}``, or ids -> contents in the same order
    (:data:`~kueri.records.Texts`). Every topic of the run must be among ``topics`` (its objects are needed); a
    passage without a text raises :class:`KueriError`.
    ``summary``, when given, is filled with counts and timing; ``progress``: a bar over the topics.
    ``workers`` > 1 labels the topics in that many processes when there are enough hits to pay for
    starting them (:data:`POOL_MIN_HITS`): the same labels; texts are still read in this process.
    """
    depth = checked_depth(depth)
    started = time.perf_counter()
    if model is None or isinstance(model, str | Path):
        model = load_model() if model is None else load_model(model)
    by_number = {topic.number: topic for topic in topics}
    if workers > 1 and len(run) > 1 and sum(len(_to_label(hits, depth)) for hits in run.values()) >= POOL_MIN_HITS:
        return _label_in_processes(run, by_number, texts, depth, model, workers, summary, started, progress)
    counts = dict.fromkeys(LABELS, 0)
    labelled: Run = {}
    for qid, hits in with_progress(run.items(), "stance", "topics", enabled=progress, total=len(run)):
        topic = _topic(by_number, qid)
        cut = len(_to_label(hits, depth))
        if cut == 0:
            labelled[qid] = list(hits)
            continue
        head = _label_hits(model, topic, hits[:cut], _lookup(texts, [hit.doc for hit in hits[:cut]], qid))
        _tally(counts, head)
        labelled[qid] = head + list(hits[cut:])
    if summary is not None:
        summary.labelled = sum(counts.values())
        summary.seconds = time.perf_counter() - started
        summary.counts = counts
    return labelled


def _topic(by_number: Mapping[str, Topic], qid: str) -> Topic:
    topic = by_number.get(qid)
    if topic is None:
        raise KueriError(f"stance: topic {qid} of the run is not among the topics (its objects are needed)")
    return topic


def _label_hits(model: StanceClassifier, topic: Topic, hits: Sequence[Hit], contents: Sequence[str],
                first_rank: int = 1) -> list[Hit]:
    """``hits`` of ``topic``, the first at rank ``first_rank``, labelled by ``model`` from their ``contents``: a
    topic's batch work at once (``prefetch``: a strong model's share of it, in a cascade), then each at its rank."""
    matcher = ObjectMatcher(*topic.objects)  # once per topic: it compiles the objects' patterns
    passages = [mask_passage(text or "", matcher) for text in contents]
    model.prefetch(passages)
    return [Hit(hit.doc, hit.score, model.at_rank(rank).label_masked(passage))
            for rank, (hit, passage) in enumerate(zip(hits, passages, strict=True), first_rank)]


def _tally(counts: dict[str, int], labelled: Iterable[Hit]) -> None:
    """Add the labels of ``labelled`` (hits :func:`_label_hits` labelled) to ``counts``."""
    for hit in labelled:
        counts[hit.stance] += 1


def _label_topic(batch: tuple[Run, list[Topic], dict[str, str]], depth: int | None,
                 model: StanceClassifier) -> tuple[Run, dict[str, int]]:
    """In another process (a Ray task, a pool's worker): one topic's hits labelled."""
    run, topics, texts = batch
    summary = LabelSummary()
    return label_run(run, topics, texts, depth, model, summary), summary.counts or {}


def _topic_batches(run: Run, by_number: Mapping[str, Topic], texts: Mapping[str, str] | Texts,
                   depth: int | None) -> Iterator[tuple[Run, list[Topic], dict[str, str]]]:
    """One topic at a time, with its objects and the texts of the hits to label: what a worker needs."""
    for qid, hits in run.items():
        ids = [hit.doc for hit in _to_label(hits, depth)]
        yield {qid: hits}, [_topic(by_number, qid)], dict(zip(ids, _lookup(texts, ids, qid), strict=True))


def _gather(parts: Iterable[tuple[Run, dict[str, int]]], summary: LabelSummary | None, started: float) -> Run:
    labelled: Run = {}
    counts = dict.fromkeys(LABELS, 0)
    for part, part_counts in parts:
        labelled.update(part)
        for label, n in part_counts.items():
            counts[label] += n
    if summary is not None:
        summary.labelled, summary.seconds, summary.counts = sum(counts.values()), time.perf_counter() - started, counts
    return labelled


#: Fewer hits than this are labelled in this process: starting a worker (Python, numpy, the VADER
#: lexicon, the model) takes about a second, what labelling 1,000-2,000 hits takes.
POOL_MIN_HITS = 4000

_worker_model: StanceClassifier | None = None


def _init_worker(model: StanceClassifier) -> None:
    global _worker_model
    _worker_model = model


def _label_part_in_worker(part: tuple[Topic, list[Hit], list[str], int]) -> list[Hit]:
    """In a pool's worker: a topic's hits from a rank on (:func:`_label_hits`), with the worker's model."""
    assert _worker_model is not None
    return _label_hits(_worker_model, *part)


def _shares(model: StanceClassifier) -> tuple[StanceClassifier | None, StanceClassifier, int]:
    """Who labels what when workers help: the model of a topic's top hits that this process runs, the model the
    workers run, and how many top hits are this process's. A :class:`Cascade`'s strong model stays here, whole:
    its encoders (their weights, their sessions' activations) are opened once, in this process, whose encoder
    calls already run side by side on the cores; the workers get only the fast model below it (a worker that
    opened the encoders took about 0.85 GB at full size, docs/benchmarks.md). Otherwise the workers label
    everything."""
    if isinstance(model, Cascade):
        return model.top, model.below, model.depth
    return None, model, 0


def _label_in_processes(run: Run, by_number: Mapping[str, Topic], texts: Mapping[str, str] | Texts, depth: int | None,
                        model: StanceClassifier, workers: int, summary: LabelSummary | None, started: float,
                        progress: bool) -> Run:
    """:func:`label_run`'s topics labelled in ``workers`` processes of a pool; this process reads the texts and
    labels a cascade's top hits (:func:`_shares`) while the workers label the hits below: the labels a
    :class:`Cascade` gives in one process (its top model at ranks 1 to its depth, the fast one below)."""
    here, there, split = _shares(model)
    tops: dict[str, tuple[list[Hit], list[str]]] = {}

    def parts() -> Iterator[tuple[Topic, list[Hit], list[str], int]]:
        for qid, hits in run.items():
            topic, head = _topic(by_number, qid), list(_to_label(hits, depth))
            contents = list(_lookup(texts, [hit.doc for hit in head], qid)) if head else []
            tops[qid] = head[:split], contents[:split]
            yield topic, head[split:], contents[split:], split + 1

    labelled: Run = {}
    counts = dict.fromkeys(LABELS, 0)
    with worker_pool(workers, _init_worker, there) as pool:
        below = ordered_pool_map(pool, _label_part_in_worker, parts(), window=2 * workers)
        for qid, lower in with_progress(zip(run, below, strict=True), "stance", "topics", enabled=progress,
                                        total=len(run)):
            hits, contents = tops.pop(qid)  # read with the worker's part, which has come back
            upper = _label_hits(here, by_number[qid], hits, contents) if here is not None and hits else []
            labelled[qid] = upper + lower + list(run[qid][len(upper) + len(lower):])
            _tally(counts, upper + lower)
    if summary is not None:
        summary.labelled, summary.seconds, summary.counts = sum(counts.values()), time.perf_counter() - started, counts
    return labelled


def label_run_on_ray(run: Run, topics: Iterable[Topic], texts: Mapping[str, str] | Texts, depth: int | None,
                     model: StanceClassifier, address: str, summary: LabelSummary | None = None) -> Run:
    """:func:`label_run` with every topic labelled as a task of the Ray cluster at ``address``: the same run."""
    from kueri.scaleout import TASK_RETRIES, connect, ordered_map

    depth = checked_depth(depth)
    ray = connect(address)
    started = time.perf_counter()
    batches = _topic_batches(run, {topic.number: topic for topic in topics}, texts, depth)
    task = ray.remote(max_retries=TASK_RETRIES)(_label_topic)
    return _gather(ordered_map(ray, task, batches, depth, ray.put(model)), summary, started)


def explain_run(run: Run, topics: Iterable[Topic], texts: Mapping[str, str] | Texts, depth: int | None = DEFAULT_DEPTH,
                model: StanceClassifier | None = None) -> Iterator[dict[str, object]]:
    """For each of the top ``depth`` hits of every topic: its label and the sentence that decided it.

    One dict per hit, in run order: ``topic``, ``rank``, ``doc``, ``stance`` (the label :func:`label_run`
    gives it) and ``sentence`` (the model's ``explain``; None when the passage names neither object).
    In this process: each passage is analysed once per sentence, several times :func:`label_run`'s cost.
    """
    model = model if model is not None else load_model()
    by_number = {topic.number: topic for topic in topics}
    for qid, hits in run.items():
        topic = _topic(by_number, qid)
        head = _to_label(hits, depth)
        if not head:
            continue
        matcher = ObjectMatcher(*topic.objects)
        contents = [text or "" for text in _lookup(texts, [h.doc for h in head], qid)]
        model.prefetch_explanations(contents, matcher)
        for rank, (hit, text) in enumerate(zip(head, contents, strict=True), 1):
            explanation = model.at_rank(rank).explain(text or "", matcher)
            yield {"topic": qid, "rank": rank, "doc": hit.doc, "stance": explanation.label,
                   "sentence": explanation.sentence}


def needed_ids(run: Run, depth: int | None = DEFAULT_DEPTH) -> set[str]:
    """The passage ids :func:`label_run` will ask for."""
    return {hit.doc for hits in run.values() for hit in _to_label(hits, depth)}


def index_texts(index: LuceneIndex) -> Callable[[Sequence[str]], Sequence[str]]:
    """Texts from an open :class:`~kueri.lucene.index.LuceneIndex` (its stored ``contents``)."""

    def lookup(ids: Sequence[str]) -> Sequence[str]:
        return index.contents_of(ids, "stance")

    return lookup


def corpus_texts(corpus: str | Path, ids: Collection[str], skip_bad: bool = False) -> dict[str, str]:
    """``{id: contents}`` of the passages of ``corpus`` whose id is in ``ids`` (one streaming pass)."""
    from kueri.parse import PassageReader

    return {p.id: p.contents for p in PassageReader(corpus, skip_bad=skip_bad) if p.id in ids}
