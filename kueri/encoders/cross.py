"""A cross-encoder: a pair of texts in, class probabilities out (sentence-transformers' CrossEncoder), on MiniLM.

A cross-encoder reads two texts together (``[CLS] first [SEP] second [SEP]``) and a linear head on the first
token's last hidden state says which class the pair belongs to. The network is the MiniLM kueri already ships
(:mod:`kueri.encoders.minilm`): its input embeddings (and any layers not fine-tuned) exactly as the package's
file holds them, its fine-tuned layers in their place. The model file (:class:`TunedWeights`) holds only what
fine-tuning changed: those layers (their linear layers rounded to int8 blocks, as MiniLM's own file holds
them), the head and a JSON header (the base file's SHA-256, which layers it replaces, the class labels, the
longest input it reads, what it was trained on). It runs through the same BERT graph as the encoders
(:mod:`kueri.encoders.bert_graph`: the same bits on every x86-64 CPU with AVX2 and FMA); the head is applied
with kueri's fixed-order arithmetic.

The base is a registered encoder's (:data:`BASES`): the registry gives its weights and its pairs' tokenizer
(:attr:`~kueri.encoders.registry.Encoder.cross_base`, :attr:`~kueri.encoders.registry.Encoder.pair_tokenizer`). A file
whose base SHA-256 is e5's is read on multilingual-e5-small (``<s> first </s></s> second </s>`` in its own pieces, its
input embeddings): a base measured against MiniLM's, not shipped (docs/stance.md).

This module knows no task: what the pairs mean (the stance models' hypotheses and masked texts) is the
caller's (:mod:`kueri.stance.encoders`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from kueri.arithmetic import exps, row_dots
from kueri.encoders.bert_graph import (
    BertEncoder,
    BertLayer,
    FloatLinear,
    Int8Linear,
    embed_in_batches,
    first_token,
    open_graph_session,
    require_onnxruntime,
)
from kueri.encoders.minilm import INSTALL_HINT
from kueri.encoders.registry import ENCODERS, get
from kueri.errors import SetupError
from kueri.model_files import load_model_file, write_model_file

MODEL_FORMAT = 1
#: Word pieces of one input when the file does not say (its header's ``max_tokens``): the first model's.
DEFAULT_MAX_TOKENS = 96
#: Texts per call of the graph (as the encoders: small batches keep activations in the CPU's caches).
BATCH = 8
_PARTS = ("q", "k", "v", "ao", "fi", "fo")


def even_batch(texts: int, workers: int) -> int:
    """At most :data:`BATCH`, the batch size that gives every worker as many batches as the others: a few texts (a
    question's top 10 in both orders) leave no worker idle while another reads a last batch alone. An output does
    not depend on its batch-mates, so this changes no bit."""
    rounds = max(1, -(-texts // (BATCH * workers)))
    return max(1, -(-texts // (rounds * workers)))


@dataclass(frozen=True)
class TunedWeights:
    """What fine-tuning changed in MiniLM: its top layers (replacing the base's from ``first_layer`` on) and
    a linear head on the first token's last hidden state (hidden x labels)."""

    meta: dict[str, object]
    layers: tuple[BertLayer, ...]
    head: FloatLinear

    @property
    def first_layer(self) -> int:
        return int(self.meta["first_layer"])  # type: ignore[call-overload]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(self.meta["labels"])  # type: ignore[call-overload]

    @property
    def max_tokens(self) -> int:
        return int(self.meta.get("max_tokens", DEFAULT_MAX_TOKENS))  # type: ignore[call-overload]

    @classmethod
    def load(cls, path: str | Path, rebuild: str) -> TunedWeights:
        """The weights in ``path``; a missing, broken or foreign file is a :class:`SetupError` that says how to
        ``rebuild`` it."""
        def build(meta: dict[str, object], arrays: dict[str, np.ndarray]) -> TunedWeights:
            labels = meta.get("labels")
            if meta.get("format") != MODEL_FORMAT or not isinstance(labels, list) \
                    or arrays["head.w"].shape[1:] != (len(labels),):
                raise SetupError(f"cross-encoder {path} has format {meta.get('format')!r} and labels {labels!r}, "
                                 f"not what kueri computes: rebuild it with {rebuild}")
            count = int(meta["layers"])  # type: ignore[call-overload]
            layers = tuple(BertLayer({part: Int8Linear(arrays[f"l{i}.{part}.values"], arrays[f"l{i}.{part}.scales"],
                                                       arrays[f"l{i}.{part}.b"]) for part in _PARTS},
                                     (arrays[f"l{i}.aln.w"], arrays[f"l{i}.aln.b"]),
                                     (arrays[f"l{i}.oln.w"], arrays[f"l{i}.oln.b"])) for i in range(count))
            return cls(meta, layers, FloatLinear(arrays["head.w"], arrays["head.b"]))

        return load_model_file(path, "cross-encoder", rebuild, build)

    def quantised(self) -> TunedWeights:
        """The same weights with every linear layer rounded to int8 blocks (:meth:`Int8Linear.quantise`), the form
        MiniLM's own weights take: a quarter of float32's size. The file holds this form."""
        layers = tuple(BertLayer({part: linear if isinstance(linear, Int8Linear)
                                  else Int8Linear.quantise(linear.weight, linear.bias)
                                  for part, linear in layer.linear.items()}, layer.attention_norm, layer.output_norm)
                       for layer in self.layers)
        return TunedWeights(self.meta, layers, self.head)

    def save(self, path: str | Path) -> None:
        """Write the weights (linear layers as int8 blocks, :meth:`quantised`) as an ``.npz`` whose bytes depend only
        on its contents."""
        arrays: dict[str, np.ndarray] = {"head.w": self.head.weight, "head.b": self.head.bias}
        for i, layer in enumerate(self.quantised().layers):
            for part in _PARTS:
                linear = layer.linear[part]
                assert isinstance(linear, Int8Linear)
                arrays[f"l{i}.{part}.values"], arrays[f"l{i}.{part}.scales"] = linear.values, linear.scales
                arrays[f"l{i}.{part}.b"] = linear.bias
            arrays[f"l{i}.aln.w"], arrays[f"l{i}.aln.b"] = layer.attention_norm
            arrays[f"l{i}.oln.w"], arrays[f"l{i}.oln.b"] = layer.output_norm
        arrays = {name: np.asarray(value, dtype=np.int8 if name.endswith(".values") else np.float32)
                  for name, value in arrays.items()}
        write_model_file(path, {**self.meta, "format": MODEL_FORMAT, "layers": len(self.layers)}, arrays)


#: A cross-encoder's base: a registered encoder's weights (:attr:`~kueri.encoders.registry.Encoder.cross_base`).
Base = Any
#: Its text pairs' tokenizer (:attr:`~kueri.encoders.registry.Encoder.pair_tokenizer`).
PairTokenizer = Any
#: The bases a cross-encoder can be tuned from, by name, with their model files' SHA-256 (the registry's): MiniLM
#: (every shipped file) and e5-small.
BASES = {name: entry.model_sha256 for name, entry in ENCODERS.items() if entry.cross_base is not None}


def base_weights(base: str = "minilm") -> Base:
    """The ``base`` model's weights as its package ships them (the base every tuned model starts from), checked to be
    the file kueri's cross-encoders were tuned from."""
    require_onnxruntime(INSTALL_HINT)
    entry = get(base)
    if entry.cross_base is None:
        raise SetupError(f"the {base} encoder is not a cross-encoder's base; bases: {', '.join(BASES)}")
    if entry.model_digest() != entry.model_sha256:
        raise SetupError(f"{entry.model_file()} is not the {entry.name} file kueri's cross-encoders were fine-tuned "
                         f"from (sha256 {entry.model_sha256[:12]}...): {entry.install_hint}")
    return entry.cross_base(entry.model_file())


def base_name(meta: dict[str, object]) -> str | None:
    """The base a tuned model's header names (by its file's SHA-256), None for an unknown one."""
    return next((name for name, digest in BASES.items() if meta.get("base_sha256") == digest), None)


def pair_tokenizer(max_tokens: int, base: str = "minilm") -> PairTokenizer:
    """The text pairs' tokenizer of the base ``base``, at most ``max_tokens`` ids."""
    make = get(base).pair_tokenizer
    if make is None:
        raise SetupError(f"the {base} encoder is not a cross-encoder's base; bases: {', '.join(BASES)}")
    return make(max_tokens)


def encode_pairs(tokenizer: PairTokenizer, pairs: Sequence[tuple[str, str]]) -> list[list[int]]:
    """``[CLS] first [SEP] second [SEP]`` of each pair, the second text cut to fit the tokenizer's length."""
    return [tokenizer.encode_pair(first, second) for first, second in pairs]


class _Opened(NamedTuple):
    """A cross-encoder opened in this process: its base, the graph's session, the session's workers."""

    base: Base
    session: Any
    workers: int


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax with the fixed-order helpers of :mod:`kueri.arithmetic`."""
    shifted = np.asarray(logits, dtype=np.float64) - np.max(logits, axis=1, keepdims=True)
    exp = exps(shifted.reshape(-1)).reshape(shifted.shape)
    return exp / exp.sum(axis=1, keepdims=True)


class CrossEncoder:
    """Class probabilities of text pairs (:meth:`predict`), from a :class:`TunedWeights` file on MiniLM.

    The graph's session is opened on first use, in the process that predicts; a pickled encoder (what a worker
    process or a Ray task receives) is its file and threads, and opens its own session there.
    """

    def __init__(self, path: str | Path, rebuild: str, threads: int | None = None) -> None:
        self.path, self.rebuild, self.threads = Path(path), rebuild, threads
        self.tuned = TunedWeights.load(path, rebuild)
        base = base_name(self.tuned.meta)
        if base is None:
            raise SetupError(f"cross-encoder {path} was tuned from another MiniLM file (or e5 file): "
                             f"rebuild it with {rebuild}")
        self.base_name = base
        self.labels = self.tuned.labels
        self.tokenizer = pair_tokenizer(self.tuned.max_tokens, base)
        self._opened: _Opened | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.path, self.rebuild, self.threads)

    @property
    def meta(self) -> dict[str, object]:
        return self.tuned.meta

    def graph(self, base: Base) -> BertEncoder:
        """The base's encoder with the tuned layers in place of its top ones."""
        first, encoder = self.tuned.first_layer, base.encoder
        if first + len(self.tuned.layers) != len(encoder.layers):
            raise SetupError(f"cross-encoder {self.path} replaces layers {first}.. of {len(encoder.layers)} with "
                             f"{len(self.tuned.layers)}: rebuild it with {self.rebuild}")
        return BertEncoder(f"{encoder.name}-cross", encoder.hidden, encoder.heads, encoder.eps, encoder.embedding_norm,
                           [*encoder.layers[:first], *self.tuned.layers])

    def _open(self) -> _Opened:
        if self._opened is None:
            base = base_weights(self.base_name)
            self._opened = _Opened(base, *open_graph_session(self.graph(base), self.threads, INSTALL_HINT))
        return self._opened

    @property
    def base(self) -> Base:
        return self._open().base

    @property
    def session(self) -> Any:
        return self._open().session

    def states(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The first token's last hidden state of each pair (pairs x hidden): what the head reads."""
        base, session, workers = self._open()
        if not pairs:
            return np.zeros((0, base.encoder.hidden), dtype=np.float32)
        encoded = encode_pairs(self.tokenizer, pairs)
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        return embed_in_batches(session, encoded, order, even_batch(len(encoded), workers), base.pad,
                                base.embeddings, base.encoder.hidden, "cross-encoder", False, workers,
                                pooling=first_token)

    def logits(self, pairs: Sequence[tuple[str, str]], beside: np.ndarray | None = None) -> np.ndarray:
        """The head's logits (pairs x :attr:`labels`). ``beside``: features of each pair (pairs x k) that a head
        wider than the hidden state reads after it, in the order training appended them."""
        if not pairs:
            return np.zeros((0, len(self.labels)))
        return self.head_logits(self.states(pairs), beside)

    def head_logits(self, states: np.ndarray, beside: np.ndarray | None = None) -> np.ndarray:
        """:meth:`logits` of the pairs whose :meth:`states` are ``states`` (what is beside them may be computed
        meanwhile)."""
        head = self.tuned.head
        inputs = states.astype(np.float64)
        if beside is not None:
            inputs = np.hstack([inputs, np.asarray(beside, dtype=np.float64)])
        if inputs.shape[1] != head.weight.shape[0]:
            raise SetupError(f"cross-encoder {self.path}: its head reads {head.weight.shape[0]} inputs, given "
                             f"{inputs.shape[1]}: rebuild it with {self.rebuild}")
        weight_rows = np.ascontiguousarray(np.asarray(head.weight, dtype=np.float64).T)  # labels x inputs
        products = row_dots(inputs[:, None, :], weight_rows[None, :, :])
        return products + np.asarray(head.bias, dtype=np.float64)

    def predict(self, pairs: Sequence[tuple[str, str]], beside: np.ndarray | None = None) -> np.ndarray:
        """P(each of :attr:`labels`) of each pair (pairs x labels); ``beside`` as :meth:`logits`."""
        return softmax_rows(self.logits(pairs, beside)) if pairs else np.zeros((0, len(self.labels)))

    def head_probabilities(self, states: np.ndarray, beside: np.ndarray | None = None) -> np.ndarray:
        """:meth:`predict` of the pairs whose :meth:`states` are ``states``."""
        return softmax_rows(self.head_logits(states, beside)) if len(states) else np.zeros((0, len(self.labels)))
