"""vectors: passage embeddings in a Lucene vector index beside a kueri index, and nearest-neighbour search.

A kueri index ``DIR`` gets one vector index per encoder, ``DIR/vectors-<encoder>/``: a Lucene index whose
document *i* holds passage *i* of ``DIR`` (the same doc ids, so ``DIR/ids.txt`` names both) as a
``KnnFloatVectorField`` (HNSW graph, Lucene 9.9's defaults: 16 neighbours, beam 100) compared by dot product
(the encoders' vectors have unit length, so it is their cosine). Lucene stores the float32 values as given:
what the encoder computed, bit for bit.

Determinism. The graph depends only on the order vectors are added in and on the segments they are added to:
Lucene's HNSW builder draws each node's level from a fixed seed (42), and a node's neighbours from the nodes
before it. So the writer adds the vectors from one thread in doc id order, flushes a segment every
:data:`FLUSH_DOCS` documents (a count, not a RAM estimate), merges with a serial scheduler and a log-doc
policy (no background merge whose timing could change the segments), and force-merges to one segment. Two
builds from the same vectors give the same graph, so the same hits. A search's ties go to the lower doc id
(corpus order), as in the lexical search. ``exact=True`` compares the query with every vector (Lucene's own
exact path: a filter on all documents with ``k`` = the corpus size), for small corpora.

``kueri-vectors.json`` (the vector index's manifest) is written last: a folder without one is never opened.
It records the encoder and its model file's hash, the kernel settings, the count, a hash of the passage ids
(which must match the kueri index's) and a SHA-256 of every vector's float32 bytes in doc id order (two
builds hold the same vectors exactly when those agree).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kueri import __version__
from kueri.errors import BrokenCache, KueriError
from kueri.lucene.index import IDS_FILE, MANIFEST, ReaderHandle, directory_size
from kueri.lucene.jvm import java_error, java_error_message, lucene
from kueri.lucene.search import run_queries
from kueri.processes import resolve_workers
from kueri.progress import progress_bar
from kueri.records import Hit

VECTOR_FIELD = "vector"
VECTORS_MANIFEST = "kueri-vectors.json"
#: Documents per flushed segment while building (then one merge): a count, so the segments never depend on
#: the JVM's memory estimates.
FLUSH_DOCS = 50_000
#: Lucene 9.9's HNSW defaults (Lucene99HnswVectorsFormat), recorded in the manifest.
HNSW_M, HNSW_BEAM_WIDTH = 16, 100


def vectors_path(index_dir: str | Path, encoder: str) -> Path:
    """Where the vector index of ``encoder`` for the kueri index at ``index_dir`` lives."""
    return Path(index_dir) / f"vectors-{encoder}"


def ids_digest(index_dir: str | Path) -> str:
    """SHA-256 of a kueri index's id list (``ids.txt``): the passages and their doc ids."""
    return hashlib.sha256((Path(index_dir) / IDS_FILE).read_bytes()).hexdigest()


def read_vectors_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of a complete vector index; :class:`BrokenCache` when missing or unreadable."""
    manifest_path = Path(path) / VECTORS_MANIFEST
    if not manifest_path.is_file():
        raise BrokenCache(f"{path}: not a complete vector index (no {VECTORS_MANIFEST})")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        int(manifest["count"]), int(manifest["dimension"]), str(manifest["encoder"]["name"])  # noqa: B018
    except (ValueError, KeyError, TypeError) as exc:
        raise BrokenCache(f"{manifest_path}: not a vector index manifest ({type(exc).__name__}: {exc})") from None
    return manifest


def write_vector_index(target: str | Path, chunks: Iterable[np.ndarray], count: int, dimension: int,
                       metadata: dict[str, Any], progress: bool = False) -> dict[str, Any]:
    """Write the vectors of ``chunks`` (float32 arrays, doc id order, ``count`` rows in all) as a vector index
    at ``target`` (replaced). Built in ``target.building`` and renamed when whole, its manifest last; returns the
    manifest (``metadata`` plus counts, hashes, time, size)."""
    L = lucene()
    target = Path(target)
    building = target.with_name(target.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    started = time.perf_counter()
    digest = hashlib.sha256()
    written = 0
    directory = L.FSDirectory.open(L.File(str(building)).toPath())
    try:
        config = L.IndexWriterConfig()
        config.setOpenMode(L.OpenMode.CREATE)
        config.setMaxBufferedDocs(FLUSH_DOCS)
        config.setRAMBufferSizeMB(-1.0)  # IndexWriterConfig.DISABLE_AUTO_FLUSH: flush by count only
        config.setMergeScheduler(L.SerialMergeScheduler())
        config.setMergePolicy(L.LogDocMergePolicy())
        config.setUseCompoundFile(False)
        writer = L.IndexWriter(directory, config)
        try:
            field = L.KnnFloatVectorField(VECTOR_FIELD, [0.0] * dimension, L.VectorSimilarityFunction.DOT_PRODUCT)
            document = L.Document()
            document.add(field)
            bar = progress_bar("vector index", "vectors", progress, total=count)
            for chunk in chunks:
                chunk = np.ascontiguousarray(chunk, dtype=np.float32)
                if chunk.ndim != 2 or chunk.shape[1] != dimension:
                    raise KueriError(f"{target}: vectors of shape {chunk.shape}, not n x {dimension}")
                digest.update(chunk.tobytes())
                for row in chunk.tolist():  # float32 -> Python float -> Java float: the same bits
                    field.setVectorValue(row)
                    writer.addDocument(document)
                written += len(chunk)
                bar.update(len(chunk))
            bar.close()
            if written != count:
                raise KueriError(f"{target}: {written} vectors for {count} passages")
            writer.forceMerge(1)
            writer.commit()
        finally:
            writer.close()
    except L.JavaException as exc:
        shutil.rmtree(building, ignore_errors=True)
        raise java_error(exc, f"cannot write the vector index {target}") from None
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    finally:
        directory.close()
    manifest = {
        **metadata,
        "count": count,
        "dimension": dimension,
        "field": VECTOR_FIELD,
        "similarity": "dot_product (unit vectors: cosine)",
        "hnsw": {"M": HNSW_M, "beam_width": HNSW_BEAM_WIDTH, "segments": 1, "flush_docs": FLUSH_DOCS},
        "vectors_sha256": digest.hexdigest(),
        "build_seconds": round(time.perf_counter() - started, 3),
        "kueri_version": __version__,
        "lucene_version": str(L.Version.LATEST.toString()),
    }
    manifest["size_bytes"] = directory_size(building)
    (building / VECTORS_MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    building.rename(target)
    return manifest


def record_in_index_manifest(index_dir: str | Path, encoder: str, summary: dict[str, Any]) -> None:
    """Add ``vectors.<encoder>`` (what :func:`write_vector_index` recorded, in short) to the kueri index's own
    manifest, replaced atomically."""
    from kueri.files import write_bytes_atomic

    path = Path(index_dir) / MANIFEST
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest.setdefault("vectors", {})[encoder] = summary
    write_bytes_atomic(path, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8"))


class VectorIndex(ReaderHandle):
    """An open vector index of a kueri index: nearest passages of query vectors (``search``) and the stored
    vectors (``vectors``). ``ids``: the kueri index's passage ids (doc id order); they must be the ones the
    vectors were made for, else :class:`~kueri.errors.BrokenCache`."""

    def __init__(self, path: str | Path, ids: Sequence[str], ids_sha256: str) -> None:
        L = lucene()
        self.path = Path(path)
        self.manifest = read_vectors_manifest(self.path)
        if self.manifest.get("ids_sha256") != ids_sha256 or int(self.manifest["count"]) != len(ids):
            raise BrokenCache(f"{self.path}: its vectors were made for other passages than the index's "
                              f"({self.manifest['count']} passages; run kueri embed again)")
        self.ids = list(ids)
        self.dimension = int(self.manifest["dimension"])
        directory = L.FSDirectory.open(L.File(str(self.path)).toPath())
        try:
            self.reader = L.DirectoryReader.open(directory)
        except L.JavaException as exc:
            directory.close()
            raise java_error(exc, f"cannot open the vector index {self.path}") from None
        if self.reader.maxDoc() != len(ids):
            self.reader.close()
            raise BrokenCache(f"{self.path}: {self.reader.maxDoc()} documents for {len(ids)} passages")
        self.searcher = L.IndexSearcher(self.reader, signature="(Lorg/apache/lucene/index/IndexReader;)V")

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, queries: np.ndarray, hits: int, k: int | None = None, exact: bool = False,
               threads: int | None = None) -> list[list[Hit]]:
        """The ``hits`` nearest passages of each query vector (rows of ``queries``), best first, scored as Lucene
        scores a dot product, ``(1 + q·v) / 2``. HNSW keeps ``k`` candidates (default ``hits``) per segment;
        ``exact`` compares with every vector instead. ``threads``: queries searched side by side (None:
        ``KUERI_WORKERS``, else 2 on 2+ cores)."""
        L = lucene()
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.dimension:
            raise KueriError(f"{self.path}: query vectors of shape {queries.shape}, not n x {self.dimension}")
        k = max(k or hits, hits)
        built = []
        for row in queries.tolist():
            if exact:  # a filter that accepts at most k documents makes Lucene compare with each of them
                built.append(L.KnnFloatVectorQuery(VECTOR_FIELD, row, max(len(self.ids), 1), L.MatchAllDocsQuery()))
            else:
                built.append(L.KnnFloatVectorQuery(VECTOR_FIELD, row, k))
        return run_queries(self.searcher, self.ids, built, hits, resolve_workers(threads))

    def vectors(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """The stored vectors of doc ids ``start`` to ``stop`` (float32, the bits that were written)."""
        L = lucene()
        stop = len(self.ids) if stop is None else stop
        out = np.zeros((max(stop - start, 0), self.dimension), dtype=np.float32)
        try:
            for leaf in self.reader.leaves().toArray():
                base = leaf.docBase
                values = leaf.reader().getFloatVectorValues(VECTOR_FIELD)
                doc = values.advance(max(start - base, 0)) if values is not None else None
                while doc is not None and doc != values.NO_MORE_DOCS and base + doc < stop:
                    out[base + doc - start] = values.vectorValue()
                    doc = values.nextDoc()
        except L.JavaException as exc:
            raise KueriError(f"{self.path}: cannot read its vectors: {java_error_message(exc)}") from None
        return out
