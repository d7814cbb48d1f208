"""Dense and hybrid first stages: the topics' titles against the passages' vectors, and fused with BM25."""

from __future__ import annotations

from collections.abc import Sequence

from kueri.encoders import TextEncoder
from kueri.errors import BrokenCache, SetupError
from kueri.fusion import linear_fusion, ranked, reciprocal_rank_fusion
from kueri.lucene import LuceneIndex
from kueri.lucene.vectors import VectorIndex, ids_digest, read_vectors_manifest, vectors_path
from kueri.records import Run, Topic

#: How a hybrid run fuses its lexical and dense runs.
HYBRID_METHODS = ("rrf", "linear")


def open_vectors(index: LuceneIndex, encoder: str, key: dict | None = None) -> VectorIndex:
    """The vector index of ``encoder`` beside ``index``; :class:`SetupError` (one line) when there is none or it
    was made by another encoder file or kernel class than ``key`` says (:meth:`kueri.encoders.Encoder.key`)."""
    path = vectors_path(index.path, encoder)
    if not path.exists():
        raise SetupError(f"{index.path}: no {encoder} vectors; make them with: kueri embed --index {index.path} "
                         f"--encoder {encoder}")
    manifest = read_vectors_manifest(path)
    if key is not None and manifest["encoder"] != key:
        made, here = manifest["encoder"], key
        differ = ", ".join(f"{name} {made.get(name)} (here {here.get(name)})" for name in sorted(here)
                           if made.get(name) != here.get(name))
        raise SetupError(f"{path}: made by another {encoder} than this kueri's: {differ}; embed again with: "
                         f"kueri embed --index {index.path} --encoder {encoder}")
    try:
        return VectorIndex(path, index.ids, ids_digest(index.path))
    except BrokenCache as exc:
        raise BrokenCache(f"{exc}; embed again with: kueri embed --index {index.path} --encoder {encoder}") from None


def dense_run(vectors: VectorIndex, encoder: TextEncoder, topics: Sequence[Topic], hits: int = 1000,
              k: int | None = None, exact: bool = False, threads: int | None = None) -> Run:
    """Each topic's title embedded as a query, its ``hits`` nearest passages (HNSW with ``k`` candidates, or
    ``exact``; ``threads`` searched side by side); a topic with no hits gets no entry."""
    topics = list(topics)
    if not topics:
        return {}
    queries = encoder.queries([topic.title for topic in topics])
    found = vectors.search(queries, hits, k=k, exact=exact, threads=threads)
    return {topic.number: topic_hits for topic, topic_hits in zip(topics, found, strict=True) if topic_hits}


def hybrid_run(lexical: Run, dense: Run, method: str = "rrf", weight: float = 0.5, rrf_k: float = 60.0,
               depth: int = 1000) -> Run:
    """``lexical`` and ``dense`` fused: ``rrf`` (1 / (rrf_k + rank) summed, lexical first on ties) or ``linear``
    (``(1 - weight)`` x normalised lexical + ``weight`` x normalised dense scores)."""
    if method == "rrf":
        return reciprocal_rank_fusion([ranked(lexical), ranked(dense)], k=rrf_k, depth=depth, tie_order="first-seen")
    if method == "linear":
        return linear_fusion([lexical, dense], [1.0 - weight, weight], depth=depth)
    raise SetupError(f"unknown hybrid fusion {method!r}: use {' or '.join(HYBRID_METHODS)}")
