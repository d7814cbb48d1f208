"""search: the original's title query, field weights and objects filter, over any similarity.

The query is built by Lucene's own classic query parsers, exactly as the original's ``Searcher``:

* the escaped title, default operator OR, no whitespace splitting; with several fields a
  ``MultiFieldQueryParser`` takes the fields in Java ``HashMap`` order with their weights as
  boosts (a 0 weight still *matches*, with 0 score), with one field a plain ``QueryParser`` and no
  boost;
* the objects filter: each word of the objects is a MUST clause parsed with the same parser (so it
  also scores), the title query a SHOULD clause. ``faithful`` keeps the original's quirk that an
  object word which is a stopword parses to an empty query and empties the topic; ``fixed`` drops
  such words.

Scores ties go to the lower doc id, i.e. corpus order (see :mod:`kueri.lucene.index`).
:class:`PassageScorer` scores a query for given passages only (the second stage's extra queries).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kueri.errors import KueriError
from kueri.lucene.index import ID_FIELD, SEARCH_FIELDS, LuceneIndex
from kueri.lucene.jvm import POLL_MS, has_java_helper, java_error_message, java_hashmap_order, lucene
from kueri.processes import resolve_workers
from kueri.records import Hit, Run, Topic

FILTER_MODES = ("off", "faithful", "fixed")

#: The original's weight map: both fields, weight 1 each.
DEFAULT_FIELDS: tuple[tuple[str, float], ...] = tuple((name, 1.0) for name in SEARCH_FIELDS)


@dataclass(frozen=True)
class Similarity:
    """A Lucene similarity with its parameters (the original's defaults)."""

    kind: str = "bm25"  # bm25 | lmd | tfidf
    k1: float = 1.2
    b: float = 0.75
    mu: float = 2000.0

    def __post_init__(self) -> None:
        if self.kind not in ("bm25", "lmd", "tfidf"):
            raise KueriError(f"unknown similarity {self.kind!r}: use bm25, lmd or tfidf")

    def build(self) -> Any:
        L = lucene()
        if self.kind == "bm25":
            return L.BM25Similarity(self.k1, self.b)
        if self.kind == "lmd":
            return L.LMDirichletSimilarity(self.mu)
        return L.ClassicSimilarity()

    def summary(self) -> str:
        if self.kind == "bm25":
            return f"BM25 (k1={self.k1:g}, b={self.b:g})"
        if self.kind == "lmd":
            return f"LM-Dirichlet (mu={self.mu:g})"
        return "TF-IDF (Lucene's classic)"

    @property
    def tag_code(self) -> str:
        """The original's tag part: first 3 characters of the first word of Lucene's description.

        BM25 gives ``BM2`` and TF-IDF ``Cla``; LM-Dirichlet's description starts with ``LM``, on
        which the original crashed: here it gives ``LM`` (a fix).
        """
        return {"bm25": "BM2", "tfidf": "Cla", "lmd": "LM"}[self.kind]


class QueryBuilder:
    """Turns topics into Lucene queries the way the original's ``Searcher`` did."""

    def __init__(
        self,
        analyzer: Any,
        fields: Sequence[tuple[str, float]] = DEFAULT_FIELDS,
        filter_objects: str = "off",
    ) -> None:
        L = lucene()
        weights = dict(fields)
        if not weights:
            raise KueriError("no search fields given")
        unknown = set(weights) - set(SEARCH_FIELDS)
        if unknown:
            raise KueriError(f"unknown search field(s) {sorted(unknown)}: use {', '.join(SEARCH_FIELDS)}")
        if filter_objects not in FILTER_MODES:
            raise KueriError(f"unknown objects filter {filter_objects!r}: use {', '.join(FILTER_MODES)}")
        self.filter_objects = filter_objects
        if len(weights) == 1:
            self.parser = L.QueryParser(next(iter(weights)), analyzer)
        else:
            order = java_hashmap_order(weights)
            boosts = L.HashMap()
            for name in order:
                boosts.put(name, L.Float(str(float(weights[name]))))
            self.parser = L.MultiFieldQueryParser(order, analyzer, boosts)
        self.parser.setDefaultOperator(L.QueryParserOperator.OR)
        self.parser.setSplitOnWhitespace(False)
        self.parser.setAutoGeneratePhraseQueries(False)

    def parse(self, text: str) -> Any:
        L = lucene()
        try:
            return self.parser.parse(L.QueryParser.escape(text))
        except L.JavaException as exc:
            raise KueriError(f"cannot parse query {text!r}: {java_error_message(exc)}") from exc

    def object_words(self, topic: Topic) -> list[str]:
        # The original removes commas from "first, second" and splits on single spaces, so a
        # multi-word object requires each of its words (not a phrase), repeated words twice.
        text = ", ".join(topic.objects).replace(",", "")
        return [word for word in text.split(" ") if word]

    def build(self, topic: Topic) -> Any:
        L = lucene()
        title_query = self.parse(topic.title)
        if self.filter_objects == "off":
            return title_query
        builder = L.BooleanQueryBuilder()
        for word in self.object_words(topic):
            word_query = self.parse(word)
            if self.filter_objects == "fixed" and word_query.toString() == "":
                continue  # a stopword: the original's empty MUST clause would match nothing
            builder.add(word_query, L.Occur.MUST)
        builder.add(title_query, L.Occur.SHOULD)
        return builder.build()


class Searcher:
    """Search an index, in the spirit of pyserini's ``LuceneSearcher``.

    >>> searcher = Searcher(LuceneIndex("indexes/sample"))   # doctest: +SKIP
    >>> searcher.set_bm25(1.2, 0.75)                        # doctest: +SKIP
    >>> hits = searcher.search("laptop or desktop?", k=10)  # doctest: +SKIP
    """

    def __init__(self, index: LuceneIndex, similarity: Similarity | None = None, threads: int | None = None) -> None:
        """``threads``: how many queries :meth:`search_queries` searches side by side (None: ``KUERI_WORKERS``, else
        2 on 2+ cores; a run gives its run context's workers)."""
        L = lucene()
        self.index = index
        self.threads = resolve_workers(threads)
        self.searcher = L.IndexSearcher(index.reader, signature="(Lorg/apache/lucene/index/IndexReader;)V")
        self.similarity = similarity or Similarity()
        self.searcher.setSimilarity(self.similarity.build())

    def set_similarity(self, similarity: Similarity) -> None:
        self.similarity = similarity
        self.searcher.setSimilarity(similarity.build())

    def set_bm25(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.set_similarity(Similarity("bm25", k1=k1, b=b))

    def set_lmd(self, mu: float = 2000.0) -> None:
        self.set_similarity(Similarity("lmd", mu=mu))

    def set_tfidf(self) -> None:
        self.set_similarity(Similarity("tfidf"))

    def search_query(self, query: Any, k: int = 1000) -> list[Hit]:
        """Run a Lucene query; ids come from the index's id list (no stored-field read per hit)."""
        L = lucene()
        try:
            score_docs = self.searcher.search(query, k).scoreDocs
        except L.JavaException as exc:
            raise KueriError(f"search failed: {java_error_message(exc)}") from exc
        ids = self.index.ids
        return [Hit(ids[sd.doc], sd.score) for sd in score_docs]

    def search_queries(self, queries: Sequence[Any], k: int = 1000) -> list[list[Hit]]:
        """Run several Lucene queries: with kueri's Java helper on several Java threads, one query each.

        Each query is searched exactly as :meth:`search_query` alone would (the same scorer, float sums and
        ties); only the queries overlap in time. Without the helper, one after the other.
        """
        return run_queries(self.searcher, self.index.ids, queries, k, self.threads)

    def search(
        self,
        query: str | Topic,
        k: int = 1000,
        fields: Sequence[tuple[str, float]] = DEFAULT_FIELDS,
        filter_objects: str = "off",
    ) -> list[Hit]:
        """Search a text (the title of a topic when given a Topic) with the original's parser."""
        builder = QueryBuilder(self.index.analyzer(), fields, filter_objects)
        topic = query if isinstance(query, Topic) else Topic("0", query, ("", ""))
        return self.search_query(builder.build(topic), k)

    def search_topics(
        self,
        topics: Iterable[Topic],
        k: int = 1000,
        fields: Sequence[tuple[str, float]] = DEFAULT_FIELDS,
        filter_objects: str = "off",
    ) -> Run:
        """A run over ``topics``; a topic with no hits gets no entry (it writes no lines)."""
        builder = QueryBuilder(self.index.analyzer(), list(fields), filter_objects)
        topics = list(topics)
        found = self.search_queries([builder.build(topic) for topic in topics], k)
        return {topic.number: hits for topic, hits in zip(topics, found, strict=True) if hits}


def run_queries(searcher: Any, ids: Sequence[str], queries: Sequence[Any], k: int, threads: int) -> list[list[Hit]]:
    """The top ``k`` hits of each query on ``searcher`` (an ``IndexSearcher``), doc ids named by ``ids``: with
    kueri's Java helper on up to ``threads`` Java threads, one query each (each searched exactly as alone), else one
    after the other."""
    L = lucene()
    threads = min(threads, len(queries))
    try:
        if threads < 2 or not has_java_helper():
            return [[Hit(ids[sd.doc], sd.score) for sd in searcher.search(query, k).scoreDocs] for query in queries]
        searches = L.TopicSearches(searcher, list(queries), k, threads)
        try:
            while not searches.done(POLL_MS):
                pass  # Python handles ^C and SIGTERM between the calls
            return [[Hit(ids[doc], score) for doc, score in zip(searches.docs(i), searches.scores(i), strict=True)]
                    for i in range(len(queries))]
        finally:
            searches.cancel()
    except L.JavaException as exc:
        raise KueriError(f"search failed: {java_error_message(exc)}") from exc


class PassageScorer:
    """Scores of a query for given passages only: the query AND a filter on their ids.

    Restricting to the passages gives their exact scores (a plain top-k search would give 0 to a
    passage ranked below k on the full corpus) at the cost of one search per call.
    """

    def __init__(self, index: LuceneIndex, similarity: Similarity | None = None,
                 fields: Sequence[tuple[str, float]] = DEFAULT_FIELDS) -> None:
        self.searcher = Searcher(index, similarity, threads=1)  # one query at a time
        self.builder = QueryBuilder(index.analyzer(), list(fields))

    def scores(self, text: str, pids: Sequence[str]) -> list[float]:
        """The score of ``text`` (parsed like a title) for each of ``pids`` (0 where it does not match)."""
        L = lucene()
        if not pids:
            return []
        if not text.strip():  # e.g. a topic without a description
            return [0.0] * len(pids)
        query = self.builder.parse(text)
        if query.toString() == "":  # only stopwords: nothing to score
            return [0.0] * len(pids)
        terms = L.ArrayList()
        for pid in pids:
            terms.add(L.BytesRef(pid, signature="(Ljava/lang/CharSequence;)V"))
        builder = L.BooleanQueryBuilder()
        builder.add(query, L.Occur.MUST)
        builder.add(L.TermInSetQuery(ID_FIELD, terms), L.Occur.FILTER)
        found = {hit.doc: hit.score for hit in self.searcher.search_query(builder.build(), len(pids))}
        return [found.get(pid, 0.0) for pid in pids]
