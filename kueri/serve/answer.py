"""What ``kueri serve`` answers: the passages shown, the verdict, the evidence, a summary per side.

Plain frozen records built from a ranking (:func:`assemble`), each with its JSON; the page and the API read only
these. The vocabulary of the two sides is defined here once: :data:`SIDES`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kueri.objects import OBJ1, OBJ2, ObjectMatcher, mentions
from kueri.questions import analyse, aspect_terms, speaks_of
from kueri.records import STANCES, Hit
from kueri.serve.topics import FREE_TOPIC

if TYPE_CHECKING:
    from kueri.serve.cache import Ranking
    from kueri.serve.links import SourceLinks

#: The two sides of a comparison: the stance that favours each object -> its name in the API's JSON and on the
#: page, and the mark of that object's mentions in a passage (:func:`kueri.objects.mentions`).
SIDES = {"FIRST": "first", "SECOND": "second"}
SIDE_MARKS = {"FIRST": OBJ1, "SECOND": OBJ2}
#: What a hit without a label (Q0, or below the stance stage's depth) is shown as.
UNLABELLED = "NO"
EVIDENCE_DEPTH = 3  # the passages whose scores are looked at: the first a reader reads


def rank_discount(rank: int) -> float:
    """nDCG's discount at ``rank``, log2(rank + 1): a passage weighs 1 / this, so the passages read first count
    most."""
    return math.log2(rank + 1)


@dataclass(frozen=True)
class Passage:
    rank: int
    id: str
    stance: str  # one of kueri.records.STANCES (a hit without a label is shown as UNLABELLED)
    relevance: float  # the configuration's ranking score
    quality: float | None  # the configuration's argument-quality score, 0..1 (None: its source has none)
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
                "quality": round(self.quality, 6) if self.quality is not None else None, "url": self.url,
                "text": self.text, "about_aspect": self.about_aspect, "deciding_sentence": self.deciding_sentence}


@dataclass(frozen=True)
class Verdict:
    """How the top ``depth`` passages lean: counts per stance and their rank-weighted shares.

    A passage at rank r weighs 1 / :func:`rank_discount` (r). ``first_share`` is FIRST's weight over FIRST's and
    SECOND's (None: neither occurs).
    """

    depth: int
    counts: dict[str, int]
    weights: dict[str, float]
    first_share: float | None

    @property
    def leaning(self) -> str:
        """``first``, ``second`` (:data:`SIDES`), ``balanced`` (shares within 40-60 %) or ``none`` (no passage
        takes a side)."""
        if self.first_share is None:
            return "none"
        if self.first_share >= 0.6:
            return SIDES["FIRST"]
        if self.first_share <= 0.4:
            return SIDES["SECOND"]
        return "balanced"

    @classmethod
    def of(cls, passages: Sequence[Passage]) -> Verdict:
        counts = dict.fromkeys(STANCES, 0)
        weights = dict.fromkeys(STANCES, 0.0)
        for passage in passages:
            counts[passage.stance] += 1
            weights[passage.stance] += 1 / rank_discount(passage.rank)
        first, second = SIDES
        sided = weights[first] + weights[second]
        return cls(len(passages), counts, {k: round(v, 4) for k, v in weights.items()},
                   round(weights[first] / sided, 4) if sided else None)

    def as_json(self) -> dict[str, Any]:
        return {"depth": self.depth, "counts": self.counts, "weights": self.weights, "first_share": self.first_share,
                "leaning": self.leaning}


@dataclass(frozen=True)
class Evidence:
    """Whether the corpus has much to say: ``weak`` when none of the top ``depth`` passages scores ``threshold``
    (a configuration's ``weak_score``)."""

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
    summaries: dict[str, list[SummarySentence]] = field(default_factory=dict)  # a key of SIDES -> sentences
    id: str | None = None  # what a judgment of it names (kueri.serve.feedback; None: feedback is off)

    @property
    def confident(self) -> bool:
        """Whether the verdict stands: False when the best passages are weak (the page shows no verdict then)."""
        return self.evidence is None or not self.evidence.weak

    def as_json(self) -> dict[str, Any]:
        verdict = {**self.verdict.as_json(), "confident": self.confident}
        return {"answer_id": self.id, "question": self.question, "comparative": self.comparative,
                "objects": list(self.objects) if self.objects else None,
                "objects_from": self.objects_from, "aspect": self.aspect, "aspect_from": self.aspect_from,
                "topic": self.topic, "config": self.config,
                "config_summary": self.config_summary, "hits": self.hits, "k": len(self.passages),
                "evidence": self.evidence.as_json() if self.evidence else None,
                "verdict": verdict, "summaries": {SIDES[side]: [s.as_json() for s in sentences]
                                                  for side, sentences in self.summaries.items()},
                "passages": [p.as_json() for p in self.passages],
                "seconds": round(self.seconds, 3), "note": self.note}

    def narrowed(self) -> Answer:
        """This answer with only the passages that speak of its aspect (the ranks stay the ranking's)."""
        kept = [p for p in self.passages if p.about_aspect]
        ranks = {p.rank for p in kept}
        return dataclasses.replace(self, passages=kept, summaries={
            side: [s for s in sentences if s.rank in ranks] for side, sentences in self.summaries.items()})


# -- a summary per side ---------------------------------------------------------------------------------------

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_REASON = re.compile(r"(?i)\b(?:better|worse|more|less|than|because|faster|slower|cheaper|easier|harder|safer|"
                     r"healthier|prefer\w*|advantages?|disadvantages?|benefits?|drawbacks?|superior|inferior)\b")
SUMMARY_SENTENCES = 3
SUMMARY_LENGTH = (30, 300)  # characters a summary sentence may have


def summarise(passages: Sequence[Passage], side: str, terms: Sequence[str]) -> list[SummarySentence]:
    """The sentences that best state one side's case (``side``: a key of :data:`SIDES`): extractive, from the
    passages shown with that stance.

    A sentence scores by what the pipeline already found: it names the side's object (the object mentions
    the stance model sees), it gives a reason (a comparative word, ``because``, ``than``), it speaks of the
    aspect, and its passage ranks high (1 / :func:`rank_discount`, the verdict's weights). At most one sentence a
    passage, at most :data:`SUMMARY_SENTENCES`, in the order of their passages.
    """
    candidates: list[tuple[float, Passage, str]] = []
    for passage in passages:
        if passage.stance != side:
            continue
        best = _best_sentence(passage, SIDE_MARKS[side], terms)
        if best is not None:
            candidates.append((best[0] / rank_discount(passage.rank), passage, best[1]))
    chosen = sorted(candidates, key=lambda c: -c[0])[:SUMMARY_SENTENCES]
    return [SummarySentence(text, p.rank, p.id) for _, p, text in sorted(chosen, key=lambda c: c[1].rank)]


def _best_sentence(passage: Passage, mark: str, terms: Sequence[str]) -> tuple[float, str] | None:
    """The passage's best-scoring sentence for the side whose object is marked ``mark``, with its score."""
    best: tuple[float, str] | None = None
    at = 0
    for sentence in _SENTENCE.split(passage.text):
        start = passage.text.find(sentence, at)
        end = start + len(sentence)
        at = end
        sentence = " ".join(sentence.split())
        if not SUMMARY_LENGTH[0] <= len(sentence) <= SUMMARY_LENGTH[1]:
            continue
        names = any(mark == label and start <= a < end for a, _, label in passage.marks)
        score = (2.0 * names + 1.0 * bool(_REASON.search(sentence)) + 1.0 * speaks_of(sentence, list(terms)))
        if score and (best is None or score > best[0]):
            best = (score, sentence)
    return best


def assemble(question: str, ranking: Ranking, k: int, seconds: float, links: SourceLinks,
             aspect: str | None = None) -> Answer:
    """The answer to ``question`` from its ranking's top ``k`` passages (filled), each with its source link; ``aspect``
    replaces the one found in the question ("": none): it marks the passages that speak of it."""
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
                                ranking.quality.get(hit.doc), text, links.url(hit.doc),
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


def run_lines(answer: Answer) -> list[str]:
    """The answer's passages as the lines of a Touché run file (qid: the topic's number, else ``q``)."""
    from kueri.runfile import format_run_lines

    hits = [Hit(p.id, p.relevance, p.stance) for p in answer.passages]
    return list(format_run_lines({answer.topic or FREE_TOPIC: hits}, f"kueri-{answer.config}"))
