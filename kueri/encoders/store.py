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

A store that grows by small appends (``kueri serve`` adds a chunk or two per new question) is compacted
(:meth:`EmbeddingStore.compact`): its small chunks (under :data:`COMPACT_PASSAGES` passages) are merged into chunks of
that many, so a store holds at most :data:`SMALL_CHUNKS` small chunks plus one per :data:`COMPACT_PASSAGES` passages,
whatever the number of appends. It runs under the lock, after an append that leaves more than :data:`SMALL_CHUNKS`
small chunks, when a process opens such a store (if no other process holds the lock), and on ``kueri cache
compact``. The merged chunks are written (atomically, numbered after every existing chunk) before the small ones
are removed, and each passage's bytes are copied as they were, so:

- a process killed while it compacts leaves at worst a passage in two chunks (the same bytes); the next compaction
  keeps one copy;
- a reader whose chunk was merged away reads the store again and finds its passages in the merged chunk (a chunk is
  also checked to be the file that was read, by its inode, before its vectors are read).

Opening a store reads only its digests (20 bytes a passage); vectors are read from their chunk when asked. The work
folder's former one-file cache (``embeddings-<key>.npz``, rewritten whole on each addition) is read into the store
once and removed, with one line; a damaged one is removed with one warning line, never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np

from kueri.errors import BrokenCache, KueriError
from kueri.files import atomic_writer, file_lock, touch, try_file_lock

log = logging.getLogger(__name__)
DIGEST_BYTES = 20  # SHA-1
#: Passages per chunk an encoder embeds and appends at a time: what a killed writer loses at most.
CHUNK_PASSAGES = 512
#: A chunk of fewer passages is small: compaction merges small chunks into chunks of this many.
COMPACT_PASSAGES = 4096
#: Small chunks a store keeps before it compacts them: every start and refresh lists and reads each chunk.
SMALL_CHUNKS = 16
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


class _Chunk(NamedTuple):
    """A chunk file as it was read: where its vectors start, how many passages it holds, its inode (a merged-away
    chunk's name is never taken again, and the inode tells a replaced file apart all the same)."""

    path: Path
    start: int
    count: int
    inode: int


class _Moved(Exception):
    """A chunk was merged away by another process's compaction since it was read: read the store again."""


class EmbeddingStore:
    """An encoder's passage embeddings by text digest, in the chunk files of ``path`` (see the module)."""

    def __init__(self, path: str | Path, dimension: int) -> None:
        self.path = Path(path)
        self.dimension = dimension
        self._rows: dict[bytes, tuple[int, int]] = {}  # digest -> (chunk, row)
        self._copies: dict[bytes, list[int]] = {}  # digest -> the other chunks that hold it (a killed compaction's)
        self._chunks: list[_Chunk] = []  # each chunk read, in the order read
        self._read: set[str] = set()  # chunk file names read (or found damaged)
        self._damaged: list[Path] = []  # removed by the next append (under the lock), whose chunk replaces them
        self._legacy = self.path.with_name(self.path.name + ".npz")
        if self._legacy.is_file():
            with self.lock():
                self._take_legacy()
        self.refresh()
        if self.small_chunks() > SMALL_CHUNKS:
            # a store left large by an older kueri, or by a process killed before it compacted: compact it now,
            # unless another process holds the lock (it compacts after its own append)
            with try_file_lock(self._lock_path) as locked:
                if locked:
                    self.refresh()
                    self.compact()

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, digest: bytes) -> bool:
        return digest in self._rows

    @property
    def _lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def lock(self) -> contextlib.AbstractContextManager[None]:
        return file_lock(self._lock_path, f"the embeddings {self.path.name}")

    def chunk_files(self) -> int:
        """How many chunk files the store holds (as last read)."""
        return len(self._chunks)

    def small_chunks(self) -> int:
        """How many of them are small (fewer than :data:`COMPACT_PASSAGES` passages): what compaction merges."""
        return sum(chunk.count < COMPACT_PASSAGES for chunk in self._chunks)

    def refresh(self) -> int:
        """Read the chunks other processes added since (and the store again if one compacted it); how many passages
        that brought."""
        before = len(self._rows)
        if not self.path.is_dir():
            return 0
        for _ in range(10):  # a compaction between listing and opening: list again (bounded: one at a time)
            present = {p.name for p in self.path.iterdir() if _CHUNK.fullmatch(p.name)}
            if any(chunk.path.name not in present for chunk in self._chunks):
                self._forget()  # merged away by a compaction: read the store as it is now
            names = sorted(present - self._read)
            vanished = False
            for name in names:
                vanished |= not self._read_chunk(self.path / name)
            if names:
                touch(self.path)
            if not vanished:
                break
        return len(self._rows) - before

    def _forget(self) -> None:
        """Drop what was read of the chunks (a compaction removed some); damaged chunks stay known as damaged."""
        self._rows.clear()
        self._copies.clear()
        self._chunks.clear()
        self._read = {path.name for path in self._damaged}

    def _read_chunk(self, path: Path) -> bool:
        """Read one chunk's digests into the index; False when it vanished (a compaction merged it away)."""
        try:
            digests, chunk = self._open_chunk(path)
        except FileNotFoundError:
            return False
        except BrokenCache as exc:
            self._read.add(path.name)
            log.warning("work folder: %s is damaged, its passages are embedded again (%s)", path, exc)
            self._damaged.append(path)
            return True
        self._read.add(path.name)
        number = len(self._chunks)
        self._chunks.append(chunk)
        for row, digest in enumerate(digests):
            if self._rows.setdefault(digest, (number, row)) != (number, row):
                self._copies.setdefault(digest, []).append(number)
        return True

    def _open_chunk(self, path: Path) -> tuple[list[bytes], _Chunk]:
        """A chunk's digests and where its vectors are (read when asked: a process may read thousands of chunks,
        more than it may keep files or maps open); FileNotFoundError when it is gone."""
        try:
            with path.open("rb") as stream:
                magic, count, dimension = _HEADER.unpack(stream.read(_HEADER.size))
                stat = os.fstat(stream.fileno())
                if magic != _MAGIC or dimension != self.dimension:
                    raise ValueError(f"header {magic!r} of {dimension} dimensions, not {_MAGIC!r} of {self.dimension}")
                if stat.st_size != _HEADER.size + count * (DIGEST_BYTES + 4 * dimension):
                    raise ValueError(f"{stat.st_size} bytes for {count} passages")
                raw = stream.read(count * DIGEST_BYTES)
        except FileNotFoundError:
            raise
        except (OSError, ValueError, struct.error) as exc:
            raise BrokenCache(f"{type(exc).__name__}: {exc}") from None
        digests = [raw[i : i + DIGEST_BYTES] for i in range(0, len(raw), DIGEST_BYTES)]
        return digests, _Chunk(path, _HEADER.size + len(raw), count, stat.st_ino)

    def missing(self, digests: Iterable[bytes]) -> list[bytes]:
        return [d for d in digests if d not in self._rows]

    def vectors(self, digests: Sequence[bytes]) -> np.ndarray:
        """The stored vectors of ``digests`` (each must be stored), one row each, float32."""
        for _ in range(10):  # other processes may compact again meanwhile (bounded: each takes the lock in turn)
            try:
                return self._vectors(digests)
            except _Moved as exc:
                moved = exc
                self.refresh()  # another process compacted the store: its passages are in the merged chunks
        raise BrokenCache(f"{moved}: removed or replaced since it was read, again and again")

    def _vectors(self, digests: Sequence[bytes]) -> np.ndarray:
        out = np.empty((len(digests), self.dimension), dtype=np.float32)
        by_chunk: dict[int, list[tuple[int, int]]] = {}
        for i, digest in enumerate(digests):
            if digest not in self._rows:
                raise _Moved(f"{self.path}: a passage's chunk")
            chunk, row = self._rows[digest]
            by_chunk.setdefault(chunk, []).append((i, row))
        width = 4 * self.dimension
        for number, wanted in by_chunk.items():
            chunk = self._chunks[number]
            try:
                with chunk.path.open("rb") as stream:
                    if os.fstat(stream.fileno()).st_ino != chunk.inode:
                        raise _Moved(str(chunk.path))
                    for i, row in wanted:
                        stream.seek(chunk.start + row * width)
                        out[i] = np.frombuffer(stream.read(width), dtype="<f4")
            except FileNotFoundError:
                raise _Moved(str(chunk.path)) from None
            except (OSError, ValueError) as exc:  # cut since it was read: not the store's to heal here
                raise BrokenCache(f"{chunk.path}: cannot read its vectors ({type(exc).__name__}: {exc})") from None
        return out

    def append(self, digests: Sequence[bytes], vectors: np.ndarray) -> None:
        """Add one chunk (call under :meth:`lock`, after :meth:`refresh`): the next number, written atomically; then
        compact the store if that leaves more than :data:`SMALL_CHUNKS` small chunks."""
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        if vectors.shape != (len(digests), self.dimension) or any(len(d) != DIGEST_BYTES for d in digests):
            raise BrokenCache(f"{self.path}: {vectors.shape} vectors for {len(digests)} digests")
        if not digests:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        name = self._next_names(1)[0]
        self._remove_damaged()
        self._write_chunk(self.path / name, b"".join(digests), vectors.tobytes())
        self.refresh()
        if self.small_chunks() > SMALL_CHUNKS:
            try:
                self.compact()
            except (OSError, KueriError) as exc:  # the passages are stored: a full disk only delays compaction
                log.warning("work folder: %s not compacted (%s)", self.path, exc)

    def add(self, digests: Sequence[bytes], vectors: np.ndarray) -> int:
        """Add the passages of ``digests`` the store lacks (another process may have added some meanwhile: the same
        bits), as one chunk, under the lock after a refresh; how many were new."""
        with self.lock():
            self.refresh()
            new = [i for i, digest in enumerate(digests) if digest not in self]
            if new:
                self.append([digests[i] for i in new], np.asarray(vectors)[new])
        return len(new)

    def _next_names(self, count: int) -> list[str]:
        """Names for ``count`` new chunks: numbered after every name ever read here (a removed chunk's too, so no
        process can take a new chunk for one it read) and every name in the folder."""
        numbers = [int(m[1]) for name in {*self._read, *(p.name for p in self.path.iterdir())}
                   if (m := _CHUNK.fullmatch(name))]
        first = max(numbers, default=-1) + 1
        return [f"chunk-{number:08d}.emb" for number in range(first, first + count)]

    def _write_chunk(self, path: Path, digests: bytes, vectors: bytes) -> None:
        with atomic_writer(path) as out:
            out.write(_HEADER.pack(_MAGIC, len(digests) // DIGEST_BYTES, self.dimension))
            out.write(digests)
            out.write(vectors)

    def _remove_damaged(self) -> None:
        """Under the lock: the damaged chunks read, and the temporary files of writers killed mid-write (every
        writer holds the lock, so none is being written now)."""
        for damaged in [*self._damaged, *self.path.glob(".chunk-*.tmp")]:
            with contextlib.suppress(OSError):
                damaged.unlink()
        self._damaged.clear()

    def compact(self, everything: bool = False) -> tuple[int, int]:
        """Merge the small chunks into chunks of :data:`COMPACT_PASSAGES` passages (call under :meth:`lock`, after
        :meth:`refresh`): when there are more than :data:`SMALL_CHUNKS` of them, or (``everything``) two or more.
        Each passage's first copy in the store (the one :meth:`vectors` reads) is copied byte for byte; the merged
        chunks are in place before a small one is removed. Returns the chunk files before and after."""
        before = len(self._chunks)
        small = [(number, chunk) for number, chunk in enumerate(self._chunks) if chunk.count < COMPACT_PASSAGES]
        if len(small) < 2 or (not everything and len(small) <= SMALL_CHUNKS):
            return before, before
        width = 4 * self.dimension
        # passages a killed compaction left in a merged chunk too: that copy stays, the small one goes
        in_large = {digest for digest, numbers in self._copies.items()
                    if any(self._chunks[n].count >= COMPACT_PASSAGES for n in numbers)}
        digests: list[bytes] = []
        vectors: list[bytes] = []
        for number, chunk in small:
            with chunk.path.open("rb") as stream:
                stream.seek(_HEADER.size)
                raw = stream.read(chunk.count * (DIGEST_BYTES + width))
            if len(raw) != chunk.count * (DIGEST_BYTES + width):
                raise BrokenCache(f"{chunk.path}: cut short while the store was compacted")
            data = memoryview(raw)[chunk.count * DIGEST_BYTES:]
            for row in range(chunk.count):
                digest = raw[row * DIGEST_BYTES:(row + 1) * DIGEST_BYTES]
                if self._rows.get(digest) == (number, row) and digest not in in_large:  # its first copy only
                    digests.append(digest)
                    vectors.append(data[row * width:(row + 1) * width].tobytes())
        pieces = range(0, len(digests), COMPACT_PASSAGES)
        for name, start in zip(self._next_names(len(pieces)), pieces, strict=True):
            end = start + COMPACT_PASSAGES
            self._write_chunk(self.path / name, b"".join(digests[start:end]), b"".join(vectors[start:end]))
        newest = max(chunk.path.name for chunk in self._chunks)
        for _, chunk in small:
            if pieces or chunk.path.name != newest:  # the newest name stays taken, so no later chunk reuses it
                with contextlib.suppress(FileNotFoundError):
                    chunk.path.unlink()
        self._remove_damaged()
        self._forget()
        self.refresh()
        log.info("work folder: %s compacted: %d chunk files merged into %d (%d passages)", self.path.name,
                 len(small), len(pieces), len(digests))
        return before, len(self._chunks)

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


def compact_store(path: Path) -> tuple[int, int, int] | None:
    """``kueri cache compact`` of one store: every small chunk merged (waiting for the store's lock); the chunk files
    before and after, and the passages (None: no whole chunk to tell the vectors' dimension)."""
    for chunk in sorted(path.glob("chunk-*.emb")):
        try:
            with chunk.open("rb") as stream:
                magic, _, dimension = _HEADER.unpack(stream.read(_HEADER.size))
        except (OSError, struct.error):
            continue
        if magic == _MAGIC:
            break
    else:
        return None
    store = EmbeddingStore(path, dimension)
    with store.lock():
        store.refresh()
        before, after = store.compact(everything=True)
    return before, after, len(store)
