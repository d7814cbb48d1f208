"""An encoder whose passage embeddings come from its store (:mod:`kueri.encoders.store`) and go to it: what a
run's stages embed passages with."""

from __future__ import annotations

import numpy as np

from kueri.encoders.store import CHUNK_PASSAGES, EmbeddingStore, TextEncoder, text_digest
from kueri.errors import KueriError
from kueri.progress import progress_bar

#: Passages whose vectors an encoder that does not write its store keeps of what it embedded itself (a bound on its
#: memory: e5's 384 float32 are 1.5 KB a passage).
KEPT_PASSAGES = 20_000


class StoredEncoder:
    """A :class:`TextEncoder` whose passage embeddings come from an :class:`EmbeddingStore` and are added to it.

    Passages missing from the store are embedded :data:`CHUNK_PASSAGES` at a time, each chunk appended when done,
    under the store's lock (one process embeds a passage while the others wait, then read it). Queries (a few per
    topic) are not kept. ``embedded`` counts the passages this object embedded (0: every passage came from the
    store). The encoder itself is loaded on the first passage or query that needs it (``load``).

    One that does not write (``writes`` False: a Ray task on a node, whose driver owns the store) reads the store
    where it sees one (``store`` None: it does not), keeps what it embedded itself (at most :data:`KEPT_PASSAGES`
    passages) and hands what is new over (:meth:`take_new`) for the store's owner to :meth:`~EmbeddingStore.add`."""

    def __init__(self, load: object, store: EmbeddingStore | None, progress: bool = False, *,
                 writes: bool = True, dimension: int | None = None) -> None:
        if store is None and writes:
            raise KueriError("an encoder that writes its store needs one")
        self._load = load
        self._encoder: TextEncoder | None = None
        self.store = store
        self.dimension = store.dimension if store is not None else int(dimension or 0)
        self.progress = progress
        self.writes = writes
        self.embedded = 0
        self._kept: dict[bytes, np.ndarray] = {}
        self._new: dict[bytes, np.ndarray] = {}

    @property
    def encoder(self) -> TextEncoder:
        if self._encoder is None:
            self._encoder = self._load() if callable(self._load) else self._load  # type: ignore[assignment]
        return self._encoder  # type: ignore[return-value]

    def queries(self, texts: list[str]) -> np.ndarray:
        return self.encoder.queries(texts)

    def passages(self, texts: list[str]) -> np.ndarray:
        digests = [text_digest(text) for text in texts]
        if not self.writes:
            return self._read_or_keep(digests, texts)
        assert self.store is not None
        if self.store.missing(digests):
            self.store.refresh()
            if self.store.missing(digests):
                with self.store.lock():
                    self.store.refresh()
                    self._embed(dict(zip(digests, texts, strict=True)))
        return self.store.vectors(digests)

    def _embed(self, text_of: dict[bytes, str]) -> None:
        assert self.store is not None
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

    # -- an encoder that does not write its store ----------------------------------------------------------------

    def begin(self) -> None:
        """A new piece of work: what the store's owner added since is read; nothing is new yet."""
        if self.store is not None:
            self.store.refresh()
        self._new = {}

    def take_new(self) -> tuple[list[bytes], bytes]:
        """The passages embedded here since :meth:`begin`: their digests and their float32 vectors' bytes."""
        digests = list(self._new)
        vectors = np.stack([self._new[d] for d in digests]) if digests else np.zeros((0, self.dimension), np.float32)
        return digests, np.ascontiguousarray(vectors, dtype=np.float32).tobytes()

    def _read_or_keep(self, digests: list[bytes], texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        in_store = [i for i, d in enumerate(digests) if self.store is not None and d in self.store]
        if in_store:
            out[in_store] = self.store.vectors([digests[i] for i in in_store])  # type: ignore[union-attr]
        todo: dict[bytes, str] = {}
        for i, digest in enumerate(digests):
            if self.store is not None and digest in self.store:
                continue
            if digest in self._kept:
                out[i] = self._kept[digest]
            else:
                todo.setdefault(digest, texts[i])
        missing = list(todo)
        for start in range(0, len(missing), CHUNK_PASSAGES):
            part = missing[start : start + CHUNK_PASSAGES]
            vectors = np.asarray(self.encoder.passages([todo[d] for d in part]), dtype=np.float32)
            if len(self._kept) + len(part) > KEPT_PASSAGES:
                self._kept.clear()
            for digest, vector in zip(part, vectors, strict=True):
                self._kept[digest] = self._new[digest] = vector
            self.embedded += len(part)
        for i, digest in enumerate(digests):
            if digest in todo:
                out[i] = self._new[digest]
        return out
