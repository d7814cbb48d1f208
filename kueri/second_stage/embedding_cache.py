"""A file of passage embeddings per encoder in the work folder, so a rerun embeds nothing again."""

from __future__ import annotations

import contextlib
import hashlib
import logging
from pathlib import Path

import numpy as np

from kueri.errors import BrokenCache
from kueri.files import atomic_writer, file_lock, touch
from kueri.second_stage.candidates import TextEncoder

log = logging.getLogger(__name__)
DIGEST_BYTES = 20  # SHA-1


def read_embeddings(path: Path, dimension: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """An embeddings file's digests and vectors (n and n x ``dimension``); :class:`BrokenCache` if it is not whole."""
    try:
        with np.load(path) as stored:
            digests, vectors = stored["digests"], stored["vectors"]
        if vectors.ndim != 2 or digests.shape != (len(vectors),) or dimension not in (None, vectors.shape[1]):
            raise ValueError(f"vectors of shape {vectors.shape} for {digests.shape} digests"
                             + (f", not n x {dimension}" if dimension else ""))
    except Exception as exc:  # noqa: BLE001 - numpy raises many kinds for a damaged file; all mean "rebuild"
        raise BrokenCache(f"{type(exc).__name__}: {exc}") from None
    return digests, vectors


def read_entries(path: Path, dimension: int | None = None) -> dict[bytes, np.ndarray]:
    """An embeddings file as ``{text_digest(text): vector}``; :class:`BrokenCache` if it is not whole."""
    digests, vectors = read_embeddings(path, dimension)
    # numpy's fixed-width bytes ("S20") drop trailing NUL bytes: pad them back, or a digest ending in 0x00 (one
    # passage in 256) would never be found again and would be embedded anew on every call
    return {bytes(d).ljust(DIGEST_BYTES, b"\0"): v for d, v in zip(digests, vectors, strict=True)}


def text_digest(text: str) -> bytes:
    """The key of a passage's embedding: the SHA-1 of its text, whatever corpus or index it comes from."""
    return hashlib.sha1(text.encode("utf-8")).digest()


class EmbeddingCache:
    """A :class:`TextEncoder` that remembers passage embeddings in a file.

    Embedding passages is the second stage's main cost, and a user who reruns a configuration, or
    tries another on the same corpus, asks for the same passages again. Entries are keyed by the SHA-1
    of the text, so they stay right whatever corpus or index a text comes from; one file per encoder.
    The file (``.npz``: digests and float32 vectors) is replaced atomically after each call that added
    something, so an interrupted run loses at most that call's new embeddings, never the file; a lock
    beside it makes processes that share the work folder embed a passage once and keep each other's
    entries. Queries (a few per topic) are not kept.
    """

    def __init__(self, encoder: TextEncoder, path: str | Path) -> None:
        self.encoder = encoder
        self.dimension = encoder.dimension
        self.path = Path(path)
        self.vectors: dict[bytes, np.ndarray] = self._read()

    def _read(self) -> dict[bytes, np.ndarray]:
        """The file's entries; a damaged file (truncated, not an npz, wrong shapes) is reported in one
        warning line and removed: its entries are computed again."""
        if not self.path.is_file():
            return {}
        try:
            entries = read_entries(self.path, self.dimension)
        except BrokenCache as exc:
            log.warning("work folder: %s is broken, rebuilding it (%s)", self.path, exc)
            with contextlib.suppress(OSError):
                self.path.unlink()
            return {}
        touch(self.path)
        return entries

    def queries(self, texts: list[str]) -> np.ndarray:
        return self.encoder.queries(texts)

    def passages(self, texts: list[str]) -> np.ndarray:
        digests = [text_digest(text) for text in texts]
        if any(d not in self.vectors for d in digests):
            # One process embeds while the others wait, then find the entries it added in the file.
            with file_lock(self.path.with_name(self.path.name + ".lock"), f"the embeddings {self.path.name}"):
                self.vectors.update(self._read())
                missing = {d: text for d, text in zip(digests, texts, strict=True) if d not in self.vectors}
                if missing:
                    new = self.encoder.passages(list(missing.values()))
                    self.vectors.update(zip(missing, new, strict=True))
                    self._save()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self.vectors[d] for d in digests])

    def _save(self) -> None:
        """The file replaced by every entry known here (the file's own were read just before, under the lock)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_writer(self.path) as out:
            digests = np.array(list(self.vectors), dtype="S20")
            np.savez(out, digests=digests, vectors=np.stack(list(self.vectors.values())).astype(np.float32))
