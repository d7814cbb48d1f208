"""The Lucene layer: everything kueri does with Lucene, offered as Python operations on plain records.

Only this package speaks Java (and only :mod:`kueri.lucene.jvm` imports ``jnius``); the stages above
it build, open, search and read indexes through these names and never see a Java object:

* analysis: :class:`AnalyzerConfig` (one analysis chain), :func:`tokenize`, stoplists;
* indexes: :func:`build_index` (one writer, or Java threads or Ray tasks for a large corpus),
  :class:`LuceneIndex` (passage ids, stored texts, term vectors, term statistics), :func:`open_shards`,
  :func:`merge_indexes`, :func:`build_shard`, :func:`check_index`;
* search: :class:`Searcher` (the original's title query over BM25, LM-Dirichlet or TF-IDF),
  :class:`PassageScorer` (a query's scores for given passages), :func:`feedback_run` (the original's
  graded relevance feedback);
* :func:`java_hashmap_order`: the iteration order of a Java ``HashMap``, which the original's ties
  and float sums follow;
* :func:`java_status`, :func:`lucene_status`: the Java and the Lucene jar kueri would use, described
  without starting a JVM.

Importing this package does not start the JVM; the first Java call does (:func:`kueri.lucene.jvm.lucene`).
"""

from kueri.lucene.analyze import (
    BASELINE_ANALYZER,
    MAIN_ANALYZER,
    AnalyzerConfig,
    known_stoplists,
    read_stoplist,
    stoplist_name,
    stoplist_path,
    tokenize,
)
from kueri.lucene.build import build_index
from kueri.lucene.feedback import FeedbackConfig, feedback_run, read_judgments
from kueri.lucene.index import (
    CONTENTS_FIELD,
    DOCT5QUERY_FIELD,
    ID_FIELD,
    MANIFEST,
    SEARCH_FIELDS,
    FieldStatistics,
    LuceneIndex,
    TermStatistics,
    check_index,
    open_shards,
    read_manifest,
)
from kueri.lucene.jvm import compile_java_helper, detach_thread, java_hashmap_order, java_status, lucene_status
from kueri.lucene.search import DEFAULT_FIELDS, FILTER_MODES, PassageScorer, Searcher, Similarity
from kueri.lucene.shards import build_shard, merge_indexes
from kueri.lucene.writer import IndexStats

__all__ = [
    "BASELINE_ANALYZER", "CONTENTS_FIELD", "DEFAULT_FIELDS", "DOCT5QUERY_FIELD", "FILTER_MODES", "ID_FIELD",
    "MAIN_ANALYZER", "MANIFEST", "SEARCH_FIELDS", "AnalyzerConfig", "FeedbackConfig", "FieldStatistics",
    "IndexStats", "LuceneIndex", "PassageScorer", "Searcher", "Similarity", "TermStatistics", "build_index",
    "build_shard", "check_index", "compile_java_helper", "detach_thread", "feedback_run", "java_hashmap_order",
    "java_status", "known_stoplists",
    "lucene_status", "merge_indexes",
    "open_shards", "read_judgments", "read_manifest", "read_stoplist", "stoplist_name", "stoplist_path", "tokenize",
]
