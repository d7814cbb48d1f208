"""The store of one encoder's passage embeddings in a work folder: what ``kueri embed``, the second stage, the dense
first stage and ``kueri serve`` all read and add to.

A store is a folder ``WORKDIR/embeddings-<store key>/`` (:func:`store_path`) of chunk files, each a header, the
SHA-1 digests of its passages' texts (:func:`text_digest`, so an entry is right whatever corpus or index a text
comes from) and their float32 vectors. Adding passages writes one new chunk (atomically: a temporary file renamed
when whole), never rewrites the others, so:

- a writer killed while it embeds loses at most the chunk it had open (:data:`CHUNK_PASSAGES` passages);
- a reader sees only complete chunks (a chunk's name appears when it is whole);
- two processes on one work folder stay correct: appends take the store's lock (``embeddings-<key>.lock``), and a
  process that waited reads the chunks the other one added before it embeds what is still missing.

Opening a store reads only its digests (20 bytes a passage); vectors are read from their chunk when asked. The work
folder's former one-file cache (``embeddings-<key>.npz``, rewritten whole on each addition) is read into the store
once and removed, with one line; a damaged one is removed with one warning line, never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from kueri.errors import BrokenCache
from kueri.files import atomic_writer, file_lock, touch
from kueri.progress import progress_bar

log = logging.getLogger(__name__)
DIGEST_BYTES = 20  # SHA-1
#: Passages per chunk an encoder embeds and appends at a time: what a killed writer loses at most.
CHUNK_PASSAGES = 512
_MAGIC = b"KPE1"
_HEADER = struct.Struct("<4sII")  # magic, passages, dimension
_CHUNK = re.compile(r"chunk-(\d{8})\.emb")


class TextEncoder(Protocol):
    """A neural encoder: unit-length embeddings of queries and of passages, one row per text."""

    dimension: int

    def queries(self, texts: list[str]) -> np.ndarray: ...

    def passages(self, texts: list[str]) -> np.ndarray: ...


def text_digest(text: str) -> bytes:
    """The key of a passage's embedding: the SHA-1 of its text, whatever corpus or index it comes from."""
    return hashlib.sha1(text.encode("utf-8")).digest()


def store_path(workdir: str | Path, store_key: str) -> Path:
    """The one place a store is named: the store of the encoder whose store key is ``store_key`` in ``workdir``."""
    return Path(workdir) / f"embeddings-{store_key}"


def read_embeddings(path: Path, dimension: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A former one-file cache's (``.npz``) digests and vectors; :class:`BrokenCache` if it is not whole."""
    try:
        with np.load(path) as stored:
            digests, vectors = stored["digests"], stored["vectors"]
        if vectors.ndim != 2 or digests.shape != (len(vectors),) or dimension not in (None, vectors.shape[1]):
            raise ValueError(f"vectors of shape {vectors.shape} for {digests.shape} digests"
                             + (f", not n x {dimension}" if dimension else ""))
    except Exception as exc:  # noqa: BLE001 - numpy raises many kinds for a damaged file; all mean "rebuild"
        raise BrokenCache(f"{type(exc).__name__}: {exc}") from None
    # numpy's fixed-width bytes ("S20") drop trailing NUL bytes: pad them back, or a digest ending in 0x00 (one
    # passage in 256) would never be found again
    return np.array([bytes(d).ljust(DIGEST_BYTES, b"\0") for d in digests], dtype=object), vectors


def check_store(path: Path) -> str | None:
    """What is wrong with a store's chunk files (None: every one is whole)."""
    problems = []
    for chunk in sorted(path.glob("chunk-*.emb")):
        try:
            with chunk.open("rb") as stream:
                magic, count, dimension = _HEADER.unpack(stream.read(_HEADER.size))
            if magic != _MAGIC or chunk.stat().st_size != _HEADER.size + count * (DIGEST_BYTES + 4 * dimension):
                problems.append(chunk.name)
        except (OSError, struct.error):
            problems.append(chunk.name)
    return f"damaged chunks: {', '.join(problems)}" if problems else None


class EmbeddingStore:
    """An encoder's passage embeddings by text digest, in the chunk files of ``path`` (see the module)."""

    def __init__(self, path: str | Path, dimension: int) -> None:
        self.path = Path(path)
        self.dimension = dimension
        self._rows: dict[bytes, tuple[int, int]] = {}  # digest -> (chunk, row)
        self._chunks: list[tuple[Path, int]] = []  # each chunk read: its file and where its vectors start
        self._read: set[str] = set()  # chunk file names read (or found damaged)
        self._damaged: list[Path] = []  # removed by the next append (under the lock), whose chunk replaces them
        self._legacy = self.path.with_name(self.path.name + ".npz")
        if self._legacy.is_file():
            with self.lock():
                self._take_legacy()
        self.refresh()

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, digest: bytes) -> bool:
        return digest in self._rows

    def lock(self) -> contextlib.AbstractContextManager[None]:
        return file_lock(self.path.with_name(self.path.name + ".lock"), f"the embeddings {self.path.name}")

    def refresh(self) -> int:
        """Read the chunks other processes added since; how many passages they brought."""
        before = len(self._rows)
        if not self.path.is_dir():
            return 0
        names = sorted(p.name for p in self.path.iterdir() if _CHUNK.fullmatch(p.name) and p.name not in self._read)
        for name in names:
            self._read.add(name)
            try:
                digests, start = self._open_chunk(self.path / name)
            except BrokenCache as exc:
                log.warning("work folder: %s is damaged, its passages are embedded again (%s)", self.path / name, exc)
                self._damaged.append(self.path / name)
                continue
            number = len(self._chunks)
            self._chunks.append((self.path / name, start))
            for row, digest in enumerate(digests):
                self._rows.setdefault(digest, (number, row))
        if names:
            touch(self.path)
        return len(self._rows) - before

    def _open_chunk(self, path: Path) -> tuple[list[bytes], int]:
        """A chunk's digests and the offset of its vectors in the file (read when asked: a process may read
        thousands of chunks, more than it may keep files or maps open)."""
        try:
            with path.open("rb") as stream:
                magic, count, dimension = _HEADER.unpack(stream.read(_HEADER.size))
                size = path.stat().st_size
                if magic != _MAGIC or dimension != self.dimension:
                    raise ValueError(f"header {magic!r} of {dimension} dimensions, not {_MAGIC!r} of {self.dimension}")
                if size != _HEADER.size + count * (DIGEST_BYTES + 4 * dimension):
                    raise ValueError(f"{size} bytes for {count} passages")
                raw = stream.read(count * DIGEST_BYTES)
        except (OSError, ValueError, struct.error) as exc:
            raise BrokenCache(f"{type(exc).__name__}: {exc}") from None
        return [raw[i : i + DIGEST_BYTES] for i in range(0, len(raw), DIGEST_BYTES)], _HEADER.size + len(raw)

    def missing(self, digests: Iterable[bytes]) -> list[bytes]:
        return [d for d in digests if d not in self._rows]

    def vectors(self, digests: Sequence[bytes]) -> np.ndarray:
        """The stored vectors of ``digests`` (each must be stored), one row each, float32."""
        out = np.empty((len(digests), self.dimension), dtype=np.float32)
        by_chunk: dict[int, list[tuple[int, int]]] = {}
        for i, digest in enumerate(digests):
            chunk, row = self._rows[digest]
            by_chunk.setdefault(chunk, []).append((i, row))
        width = 4 * self.dimension
        for chunk, wanted in by_chunk.items():
            path, start = self._chunks[chunk]
            try:
                with path.open("rb") as stream:
                    for i, row in wanted:
                        stream.seek(start + row * width)
                        out[i] = np.frombuffer(stream.read(width), dtype="<f4")
            except (OSError, ValueError) as exc:  # removed or cut since it was read: not the store's to heal here
                raise BrokenCache(f"{path}: cannot read its vectors ({type(exc).__name__}: {exc})") from None
        return out

    def append(self, digests: Sequence[bytes], vectors: np.ndarray) -> None:
        """Add one chunk (call under :meth:`lock`, after :meth:`refresh`): the next number, written atomically."""
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        if vectors.shape != (len(digests), self.dimension) or any(len(d) != DIGEST_BYTES for d in digests):
            raise BrokenCache(f"{self.path}: {vectors.shape} vectors for {len(digests)} digests")
        if not digests:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        # numbered after every name ever read here (a removed damaged chunk's too: its name counts as read)
        numbers = [int(m[1]) for name in {*self._read, *(p.name for p in self.path.iterdir())}
                   if (m := _CHUNK.fullmatch(name))]
        name = f"chunk-{max(numbers, default=-1) + 1:08d}.emb"
        for damaged in self._damaged:
            with contextlib.suppress(OSError):
                damaged.unlink()
        self._damaged.clear()
        with atomic_writer(self.path / name) as out:
            out.write(_HEADER.pack(_MAGIC, len(digests), self.dimension))
            out.write(b"".join(digests))
            out.write(vectors.tobytes())
        self.refresh()

    def _take_legacy(self) -> None:
        """The former one-file cache, read into the store once and removed (a damaged one only removed)."""
        if not self._legacy.is_file():  # another process took it while this one waited
            return
        try:
            digests, vectors = read_embeddings(self._legacy, self.dimension)
        except BrokenCache as exc:
            log.warning("work folder: %s is broken, removed (its passages are embedded again) (%s)", self._legacy, exc)
        else:
            self.refresh()
            new = [i for i, digest in enumerate(digests) if digest not in self._rows]
            for start in range(0, len(new), CHUNK_PASSAGES):
                part = new[start : start + CHUNK_PASSAGES]
                self.append([digests[i] for i in part], vectors[part])
            log.warning("work folder: %s read into the store %s (%d passages) and removed", self._legacy.name,
                        self.path.name, len(digests))
        with contextlib.suppress(OSError):
            self._legacy.unlink()


class StoredEncoder:
    """A :class:`TextEncoder` whose passage embeddings come from an :class:`EmbeddingStore` and are added to it.

    Passages missing from the store are embedded :data:`CHUNK_PASSAGES` at a time, each chunk appended when done,
    under the store's lock (one process embeds a passage while the others wait, then read it). Queries (a few per
    topic) are not kept. ``embedded`` counts the passages this object embedded (0: every passage came from the
    store). The encoder itself is loaded on the first passage or query that needs it (``load``)."""

    def __init__(self, load: object, store: EmbeddingStore, progress: bool = False) -> None:
        self._load = load
        self._encoder: TextEncoder | None = None
        self.store = store
        self.dimension = store.dimension
        self.progress = progress
        self.embedded = 0

    @property
    def encoder(self) -> TextEncoder:
        if self._encoder is None:
            self._encoder = self._load() if callable(self._load) else self._load  # type: ignore[assignment]
        return self._encoder  # type: ignore[return-value]

    def queries(self, texts: list[str]) -> np.ndarray:
        return self.encoder.queries(texts)

    def passages(self, texts: list[str]) -> np.ndarray:
        digests = [text_digest(text) for text in texts]
        if self.store.missing(digests):
            self.store.refresh()
            if self.store.missing(digests):
                with self.store.lock():
                    self.store.refresh()
                    self._embed(dict(zip(digests, texts, strict=True)))
        return self.store.vectors(digests)

    def _embed(self, text_of: dict[bytes, str]) -> None:
        missing = self.store.missing(text_of)
        if not missing:
            return
        with progress_bar("embeddings", "passages", self.progress and len(missing) > CHUNK_PASSAGES,
                          total=len(missing)) as bar:
            for start in range(0, len(missing), CHUNK_PASSAGES):
                part = missing[start : start + CHUNK_PASSAGES]
                self.store.append(part, self.encoder.passages([text_of[d] for d in part]))
                self.embedded += len(part)
                bar.update(len(part))
