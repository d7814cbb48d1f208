"""Whole-corpus embeddings: every passage of a kueri index into the encoder's store, here or on a Ray cluster, and
the vector index for dense search built from that store.

The passages' texts are the index's stored ``contents`` (what the second stage embeds), read in doc id order and
cut into chunks of ``chunk_passages`` (:data:`kueri.encoders.CHUNK_PASSAGES`). The passages of a chunk that the
encoder's store in the work folder (:mod:`kueri.encoders.store`) does not hold yet are embedded and appended to it
as one chunk as soon as they are done: a killed run keeps every chunk it finished and the next run embeds only the
rest; the second stage and ``kueri serve`` on that work folder then embed none of them again. When the store holds
every passage, the vector index (:func:`kueri.lucene.vectors.write_vector_index`) is written from it in doc id
order, unless a whole one of the same encoder key and passages is there already.

The vectors are the encoder's exact float32 values, and they do not depend on where they are computed: an
embedding does not depend on its batch-mates (:func:`kueri.encoders.bert_graph.embed_in_batches`) nor on
onnxruntime's thread count, and onnxruntime computes them bit for bit alike on every CPU with AVX2 and FMA
(``docs/reproducibility.md``). So chunks may come from this process, from Ray tasks (one chunk each, on one core),
or from the second stage's own additions to the store, and the vector index is the same. The encoder's key
(:meth:`kueri.encoders.Encoder.key`) records the kernel class; a Ray worker whose CPU computes differently is
refused.

On Ray, each node needs kueri with the encoders' packages installed: the model is loaded from the node's own
install, once per worker process, never shipped with the tasks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kueri import encoders
from kueri.encoders import CHUNK_PASSAGES, EmbeddingStore, TextEncoder, text_digest
from kueri.errors import BrokenCache, KueriError
from kueri.files import file_lock
from kueri.lucene import LuceneIndex
from kueri.lucene.vectors import (
    ids_digest,
    read_vectors_manifest,
    record_in_index_manifest,
    vectors_path,
    write_vector_index,
)
from kueri.progress import progress_bar

log = logging.getLogger(__name__)


def _kernel_settings() -> dict[str, Any]:
    """What the manifest records about how the vectors were computed (beyond the key)."""
    from kueri.environment import distribution_version

    return {"onnxruntime": distribution_version("onnxruntime", "onnxruntime-gpu"),
            "graph": "float32 products of int8-block weights; softmax sums as MatMul (bert_graph)",
            "batch_independent": True}


@dataclass
class EmbedReport:
    """What :func:`embed_index` did: the vector index, how many passages it holds, how many this run embedded
    (``embedded``) and how many the store held already (``stored``), and the embedding time of this run."""

    path: Path
    passages: int
    embedded: int = 0
    stored: int = 0
    seconds: float = 0.0
    where: str = "here"
    manifest: dict[str, Any] | None = None
    built: bool = False  # the vector index was (re)written

    @property
    def rate(self) -> float:
        return self.embedded / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        if not (self.embedded or self.built):
            return f"{self.path}: {self.passages} passages, already embedded"
        return (f"{self.path}: {self.passages} passages; embedded {self.embedded} {self.where} in {self.seconds:.1f} s "
                f"({self.rate:.1f} passages/s), {self.stored} from the embeddings store")


def embed_index(index: LuceneIndex, encoder: str, workdir: str | Path, *, chunk_passages: int | None = None,
                ray_address: str | None = None, progress: bool = True, vectors: bool = True,
                stop_after_chunks: int | None = None) -> EmbedReport:
    """Embed every passage of ``index`` with ``encoder`` into its store in ``workdir``, then (``vectors``) write its
    vector index (``INDEX/vectors-<encoder>``) from the store.

    ``ray_address``: embed the chunks as tasks of that Ray cluster; ``stop_after_chunks``: a test hook, stop as ^C
    does after that many newly embedded chunks. Safe to run from several processes (the store's lock, and a lock per
    vector index).
    """
    entry = encoders.get(encoder)
    size = chunk_passages or CHUNK_PASSAGES
    if size < 1:
        raise KueriError(f"chunk size must be at least 1, got {size}")
    store = entry.store(workdir)
    target = vectors_path(index.path, encoder)
    report = EmbedReport(target, len(index), where=f"on Ray ({ray_address})" if ray_address else "here")
    digests: list[bytes] = []
    missing: list[tuple[int, list[bytes], list[str]]] = []  # (chunk, digests, texts) of what the store lacks
    for number, start in enumerate(range(0, len(index), size)):
        texts = index.contents(range(start, min(start + size, len(index))))
        chunk_digests = [text_digest(text) for text in texts]
        digests.extend(chunk_digests)
        todo = [i for i, digest in enumerate(chunk_digests) if digest not in store]
        report.stored += len(texts) - len(todo)
        if todo:
            missing.append((number, [chunk_digests[i] for i in todo], [texts[i] for i in todo]))
    if missing:
        _fill(store, entry, missing, report, ray_address, progress, stop_after_chunks)
    if not vectors:
        return report
    key = entry.key()
    ids_sha256 = ids_digest(index.path)
    with file_lock(target.with_name(target.name + ".lock"), f"the {encoder} vectors of {index.path}"):
        if target.exists():
            try:
                manifest = read_vectors_manifest(target)
                if manifest["encoder"] == key and manifest.get("ids_sha256") == ids_sha256:
                    if encoder not in index.manifest.get("vectors", {}):
                        _record(index, encoder, key, manifest)
                    report.manifest = manifest
                    return report
                log.warning("%s: made by another encoder file or for other passages; writing it again", target)
            except BrokenCache as exc:
                log.warning("%s; writing it again", exc)
        metadata = {"encoder": key, "kernel_settings": _kernel_settings(), "ids_sha256": ids_sha256,
                    "chunk_passages": size, "embedded_on": report.where,
                    "embedding": {"seconds": round(report.seconds, 3), "passages": report.embedded,
                                  "stored": report.stored}}
        chunks = (store.vectors(digests[start : start + size]) for start in range(0, len(digests), size))
        report.manifest = write_vector_index(target, chunks, len(index), entry.dimension, metadata, progress)
        report.built = True
        _record(index, encoder, key, report.manifest)
    return report


def _fill(store: EmbeddingStore, entry: encoders.Encoder, missing: list[tuple[int, list[bytes], list[str]]],
          report: EmbedReport, ray_address: str | None, progress: bool, stop_after_chunks: int | None) -> None:
    """Embed the ``missing`` chunks' passages and append each chunk to ``store`` as soon as it is done."""
    total = sum(len(chunk_digests) for _, chunk_digests, _ in missing)
    bar = progress_bar(f"{entry.name} embeddings", "passages", progress, total=total)
    started = time.perf_counter()
    try:
        computed = (_compute_on_ray(ray_address, missing, entry) if ray_address is not None
                    else _compute_here(missing, entry))
        for done, (chunk_digests, vectors) in enumerate(computed, start=1):
            store.add(chunk_digests, vectors)
            report.embedded += len(chunk_digests)
            bar.update(len(chunk_digests))
            if stop_after_chunks is not None and done >= stop_after_chunks:
                raise KeyboardInterrupt(f"stopped after {done} chunks (test hook)")
    except BaseException:  # ^C, SIGTERM, a lost cluster: what is finished stays for the next run
        log.warning("%s: %d of %d passages embedded and kept; the same command continues from there", store.path,
                    report.embedded, total)
        raise
    finally:
        bar.close()
        report.seconds = time.perf_counter() - started


def _record(index: LuceneIndex, encoder: str, key: dict[str, Any], manifest: dict[str, Any]) -> None:
    summary = {"path": vectors_path(index.path, encoder).name, "encoder": key, "count": manifest["count"],
               "vectors_sha256": manifest["vectors_sha256"]}
    record_in_index_manifest(index.path, encoder, summary)
    index.manifest.setdefault("vectors", {})[encoder] = summary


def _checked(vectors: np.ndarray, rows: int, dimension: int) -> np.ndarray:
    vectors = np.asarray(vectors)
    if vectors.dtype != np.float32 or vectors.shape != (rows, dimension):
        raise KueriError(f"the encoder returned {vectors.dtype} {vectors.shape}, not float32 {(rows, dimension)}")
    return vectors


def _compute_here(missing: list[tuple[int, list[bytes], list[str]]], entry: encoders.Encoder,
                  ) -> Iterator[tuple[list[bytes], np.ndarray]]:
    model: TextEncoder | None = None
    for _, chunk_digests, texts in missing:
        model = model or entry.load()
        yield chunk_digests, _checked(model.passages(texts), len(texts), entry.dimension)


#: A Ray worker process's encoders, loaded on its first task and kept for the next ones.
_WORKER_ENCODERS: dict[str, TextEncoder] = {}


def _embed_chunk_task(chunk: tuple[int, list[str]], encoder: str, dimension: int) -> tuple[int, str, bytes]:
    """On a Ray worker: (chunk number, the worker's kernel class, the chunk's vectors as float32 bytes)."""
    number, texts = chunk
    if encoder not in _WORKER_ENCODERS:
        _WORKER_ENCODERS[encoder] = encoders.get(encoder).load(threads=1)  # one task, one core
    vectors = _checked(_WORKER_ENCODERS[encoder].passages(texts), len(texts), dimension)
    return number, encoders.kernel_class(), vectors.tobytes()


def _compute_on_ray(address: str, missing: list[tuple[int, list[bytes], list[str]]], entry: encoders.Encoder,
                    ) -> Iterator[tuple[list[bytes], np.ndarray]]:
    from kueri.scaleout import TASK_RETRIES, connect, ordered_map

    ray = connect(address)
    task = ray.remote(max_retries=TASK_RETRIES, num_cpus=1)(_embed_chunk_task)
    digests_of = {number: chunk_digests for number, chunk_digests, _ in missing}
    here = encoders.kernel_class()
    batches = ((number, texts) for number, _, texts in missing)
    for number, kernels, data in ordered_map(ray, task, batches, entry.name, entry.dimension):
        if kernels != here:
            raise KueriError(f"a Ray worker's CPU computes the encoder with {kernels} kernels, this machine with "
                             f"{here}: its vectors would differ in the last bits; use nodes of one kind")
        yield digests_of[number], np.frombuffer(data, dtype=np.float32).reshape(-1, entry.dimension).copy()

