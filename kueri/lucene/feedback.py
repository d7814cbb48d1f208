"""feedback: the original's explicit graded relevance feedback ("Rocchio", Table 1 rows 16-17).

For every judgment line ``topic 0 passage grade`` (file order, every grade), the terms of the
judged passage's ``contents`` term vector (sorted term order) are put into the map of
(topic, grade) with their frequency in that passage, **overwriting** what an earlier passage of the
same grade put there. The query of a topic is then one SHOULD clause ``contents:term^(tf*grade^2)``
per (grade 1..3, term), parsed by a classic query parser with Lucene's StandardAnalyzer; there is
no title query, no negative part, no normalisation. BM25 (1.2, 0.75) on ``contents``, top 1000.

Clause order decides float sums and so the last bits of scores and ties; the original iterated
Java ``HashMap``s, so the terms are taken in a real Java ``HashMap``'s order
(:func:`~kueri.lucene.jvm.java_hashmap_order` of the terms in the order they were first put).

``faithful`` (``escape_terms=False``) parses terms unescaped as the original did: a term such as
``text:text:text`` (standard tokenizer) makes the parser fail and the original's run stopped there,
truncated. ``escape_terms=True`` is the fix. A judged passage missing from the index aborted the
original (``missing="error"``); ``missing="skip"`` skips it with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kueri import resources
from kueri.errors import KueriError
from kueri.lucene.index import CONTENTS_FIELD, LuceneIndex
from kueri.lucene.jvm import java_error_message, java_hashmap_order, lucene
from kueri.lucene.search import Searcher, Similarity
from kueri.records import Hit, Run

log = logging.getLogger(__name__)

GRADES = (1, 2, 3)
MAX_CLAUSES = 16384  # the original raised Lucene's limit to this


@dataclass(frozen=True)
class FeedbackConfig:
    """Where the judgments come from and how faithfully the original is followed."""

    judgments: str = "kueri-manual"  # a path, or a qrels file shipped in kueri/resources/qrels by stem
    escape_terms: bool = False  # False: as the original (a term with ':' may break a topic)
    missing: str = "error"  # "error" as the original, or "skip" judged passages not in the index
    hits: int = 1000

    def __post_init__(self) -> None:
        if self.missing not in ("error", "skip"):
            raise KueriError(f"unknown handling of missing judged passages {self.missing!r}: use error or skip")
        resolve_judgments(self.judgments)  # fail early on a missing file

    @property
    def judgments_path(self) -> Path:
        return resolve_judgments(self.judgments)


SHIPPED_JUDGMENTS = {"kueri-manual": "kueri-manual-qrels.txt"}


def resolve_judgments(name_or_path: str) -> Path:
    if name_or_path in SHIPPED_JUDGMENTS:
        return resources.path("qrels", SHIPPED_JUDGMENTS[name_or_path])
    path = Path(name_or_path)
    if not path.is_file():
        raise KueriError(f"judgments file {name_or_path!r} not found (shipped: {', '.join(SHIPPED_JUDGMENTS)})")
    return path


@dataclass(frozen=True)
class Judgment:
    topic: int
    passage: str
    grade: int
    line: int


def read_judgments(path: str | Path) -> list[Judgment]:
    """``topic 0 passage grade`` lines; topic 0..100 and grade 0..3 as the original required."""
    judgments = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields:
                continue
            where = f"{path}:{number}"
            if len(fields) != 4:
                raise KueriError(f"{where}: expected 'topic iteration passage grade', got {line.strip()!r}")
            try:
                topic, grade = int(fields[0]), int(fields[3])
            except ValueError:
                raise KueriError(f"{where}: topic and grade must be integers, got {line.strip()!r}") from None
            if not 0 <= topic <= 100 or not 0 <= grade <= 3:
                raise KueriError(f"{where}: topic must be 0..100 and grade 0..3, got {topic} and {grade}")
            judgments.append(Judgment(topic, fields[2], grade, number))
    return judgments


class FeedbackModel:
    """The (topic, grade) -> {term: tf} maps built from judgments over one index."""

    def __init__(self, index: LuceneIndex, judgments: Iterable[Judgment], missing: str = "error") -> None:
        # term -> tf per (topic, grade); a dict keeps the order terms were first put, from which
        # java_hashmap_order gives the original's HashMap order
        self.frequencies: dict[tuple[int, int], dict[str, int]] = {}
        self.missing: list[Judgment] = []
        vectors: dict[int, list[tuple[str, int]]] = {}
        for judgment in judgments:
            docid = index.docid(judgment.passage)
            if docid is None:
                if missing == "error":
                    raise KueriError(
                        f"judged passage {judgment.passage} (judgments line {judgment.line}) is not in the index; "
                        "the original aborted here: use missing='skip' (kueri feedback --skip-missing) to skip it"
                    )
                self.missing.append(judgment)
                continue
            tfs = self.frequencies.setdefault((judgment.topic, judgment.grade), {})
            if docid not in vectors:
                vectors[docid] = index.term_vector(docid, CONTENTS_FIELD)
            for term, tf in vectors[docid]:
                tfs[term] = tf  # overwrite: the last judged passage of this grade wins
        if self.missing:
            log.warning("feedback: skipped %d judgment(s) whose passage is not in the index", len(self.missing))

    def topics(self) -> list[int]:
        return sorted({topic for topic, grade in self.frequencies if grade in GRADES})

    def clauses(self, topic: int) -> list[tuple[str, str]]:
        """(term, boost text) in the original's order: grades 1..3, Java HashMap order within."""
        result = []
        for grade in GRADES:
            tfs = self.frequencies.get((topic, grade))
            if tfs is None:
                continue
            for term in java_hashmap_order(tfs):
                # Java: tf * Math.pow(j, 2) printed as a double, e.g. "12.0"
                result.append((term, repr(float(tfs[term] * grade**2))))
        return result


def feedback_run(index: LuceneIndex, config: FeedbackConfig, topics: Iterable[str] | None = None,
                 threads: int | None = None) -> Run:
    """The RF run; topics in ascending number; ``topics`` restricts it to those numbers: the whole run's topics
    among them (a topic after one whose query does not parse is left out even when that one is not asked for), so
    that runs of parts of the topics, joined, are the whole run (``kueri run --ray`` runs them in batches).
    ``threads``: topics searched side by side (:class:`~kueri.lucene.search.Searcher`)."""
    L = lucene()
    model = FeedbackModel(index, read_judgments(config.judgments_path), config.missing)
    # Lucene's clause limit is a static: raised for these queries only, and given back afterwards.
    previous = L.IndexSearcher.getMaxClauseCount()
    L.IndexSearcher.setMaxClauseCount(MAX_CLAUSES)
    try:
        return _feedback_searches(L, Searcher(index, Similarity("bm25"), threads), model, config, topics)
    finally:
        L.IndexSearcher.setMaxClauseCount(previous)


def _feedback_searches(L: Any, searcher: Searcher, model: FeedbackModel, config: FeedbackConfig,
                       topics: Iterable[str] | None) -> Run:
    parser = L.QueryParser(CONTENTS_FIELD, L.StandardAnalyzer())
    left = set(topics) if topics is not None else None  # the wanted topics not reached yet
    queries: dict[str, Any] = {}
    for topic in model.topics():
        if left is not None and not left:
            break
        builder = L.BooleanQueryBuilder()
        try:
            for term, boost in model.clauses(topic):
                text = L.QueryParser.escape(term) if config.escape_terms else term
                builder.add(parser.parse(f"{text}^{boost}"), L.Occur.SHOULD)
        except L.JavaException as exc:
            # The original printed the error and stopped: the run ends before this topic.
            log.warning("feedback: topic %s: %s; as the original, the run is truncated here (escape terms, or use "
                        "a letter-tokenizer index, to avoid it)", topic, java_error_message(exc))
            break
        if left is None or str(topic) in left:
            queries[str(topic)] = builder.build()
            if left is not None:
                left.discard(str(topic))
    # Thousands of clauses a topic make these searches slow on a large index: side by side on the cores.
    found: list[list[Hit]] = searcher.search_queries(list(queries.values()), config.hits)
    return {topic: hits for topic, hits in zip(queries, found, strict=True) if hits}
