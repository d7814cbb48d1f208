"""kueri's own cross-encoder: all-MiniLM-L6-v2 fine-tuned to tell which of two objects a sentence favours.

Mean-pooled sentence embeddings barely change when a sentence's two objects are exchanged, so they cannot
say which one it favours (docs/stance.md). A cross-encoder reads a *hypothesis* and the text together and
answers for the pair: here the hypothesis is always :data:`HYPOTHESIS` ("x is better than y") and the text is
a sentence with the topic's objects masked as kueri masks them (``OBJ1``, ``OBJ2``: :mod:`kueri.objects`),
read as ``x`` and ``y``, so the model learns the comparison, never the objects. It answers P(BETTER, WORSE,
NONE): the hypothesis holds, the reverse holds, or the sentence compares nothing. It is symmetric in the
objects by construction: a text's probabilities are averaged with those of the text with OBJ1 and OBJ2
exchanged, BETTER and WORSE exchanged back.

The network is the MiniLM kueri already ships (:mod:`kueri.encoders.minilm`): its input embeddings (and any
layers not fine-tuned) exactly as the package's file holds them, its fine-tuned layers in their place, and a
linear head on the first token (``[CLS]``). The model file (:data:`MODEL`, written by
``scripts/train_stance_encoder.py``) holds only what fine-tuning changed: those layers (their linear layers
rounded to int8 blocks, as MiniLM's own file holds them), the head and a JSON header (the base file's SHA-256,
which layers it replaces, the hypothesis, the labels, the training data's checksums). It runs through the same
BERT graph as the encoders (:mod:`kueri.encoders.bert_graph`:
the same bits on every x86-64 CPU with AVX2 and FMA); the head is applied with kueri's fixed-order
arithmetic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kueri import resources
from kueri.arithmetic import exps, row_dots
from kueri.encoders.bert_graph import (
    BertEncoder,
    BertLayer,
    FloatLinear,
    Int8Linear,
    embed_in_batches,
    first_token,
    open_encoder,
    require_onnxruntime,
)
from kueri.encoders.minilm import INSTALL_HINT, MODEL_SHA256, TOKENIZER, MiniLMWeights
from kueri.encoders.registry import MINILM
from kueri.encoders.wordpiece import WordPieceTokenizer
from kueri.errors import SetupError
from kueri.tfidf import load_model_file, write_model_file

MODEL = resources.path("models", "stance-encoder-v1.npz")
MODEL_FORMAT = 1
#: What the masked objects read as: one word piece each, as unlike as two words can be (``obj1`` / ``obj2`` are
#: three pieces that differ only in the last, and a model fine-tuned on them could not tell which was which).
PLACEHOLDERS = {"OBJ1": "x", "OBJ2": "y"}
#: The first segment of every input: the text says whether it holds (BETTER), the reverse (WORSE), or neither.
HYPOTHESIS = "x is better than y"
LABELS = ("BETTER", "WORSE", "NONE")
#: Exchanging the objects exchanges these probabilities.
SWAP = [1, 0, 2]
#: Word pieces of one input, hypothesis included: CompSent-19's sentences fit (99th percentile 71 pieces).
MAX_TOKENS = 96
#: Texts per call of the graph (as the encoders: small batches keep activations in the CPU's caches).
BATCH = 8
REBUILD = "`python scripts/train_stance_encoder.py` (pip install -e '.[train]')"
_PARTS = ("q", "k", "v", "ao", "fi", "fo")


@dataclass(frozen=True)
class TunedWeights:
    """What fine-tuning changed in MiniLM: its top layers (replacing the base's from ``first_layer`` on) and
    a linear head on the first token's last hidden state (hidden x :data:`LABELS`)."""

    meta: dict[str, object]
    layers: tuple[BertLayer, ...]
    head: FloatLinear

    @property
    def first_layer(self) -> int:
        return int(self.meta["first_layer"])  # type: ignore[call-overload]

    @classmethod
    def load(cls, path: str | Path = MODEL) -> TunedWeights:
        def build(meta: dict[str, object], arrays: dict[str, np.ndarray]) -> TunedWeights:
            if meta.get("format") != MODEL_FORMAT or tuple(meta.get("labels", ())) != LABELS \
                    or meta.get("hypothesis") != HYPOTHESIS:
                raise SetupError(f"stance encoder {path} has format {meta.get('format')!r}, labels "
                                 f"{meta.get('labels')!r} and hypothesis {meta.get('hypothesis')!r}, not what "
                                 f"kueri computes: rebuild it with {REBUILD}")
            count = int(meta["layers"])  # type: ignore[call-overload]
            layers = tuple(BertLayer({part: Int8Linear(arrays[f"l{i}.{part}.values"], arrays[f"l{i}.{part}.scales"],
                                                       arrays[f"l{i}.{part}.b"]) for part in _PARTS},
                                     (arrays[f"l{i}.aln.w"], arrays[f"l{i}.aln.b"]),
                                     (arrays[f"l{i}.oln.w"], arrays[f"l{i}.oln.b"])) for i in range(count))
            return cls(meta, layers, FloatLinear(arrays["head.w"], arrays["head.b"]))

        return load_model_file(path, "stance encoder", REBUILD, build)

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


def base_weights() -> MiniLMWeights:
    """MiniLM's weights as its package ships them (the base every tuned model starts from)."""
    require_onnxruntime(INSTALL_HINT)
    path = MINILM.model_file()
    if hashlib.sha256(path.read_bytes()).hexdigest() != MODEL_SHA256:
        raise SetupError(f"{path} is not the MiniLM file kueri's stance encoder was fine-tuned from "
                         f"(sha256 {MODEL_SHA256[:12]}...): {MINILM.install_hint}")
    return MiniLMWeights.load(path)


def pair_tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer(TOKENIZER, MAX_TOKENS)


def encode_inputs(tokenizer: WordPieceTokenizer, texts: Sequence[str]) -> list[list[int]]:
    """``[CLS] hypothesis [SEP] text [SEP]`` of each text, cut to :data:`MAX_TOKENS` pieces."""
    return [tokenizer.encode_pair(HYPOTHESIS, text) for text in texts]


def masked_text(masked: Sequence[str]) -> str:
    """A sentence's masked tokens (:mod:`kueri.objects`) as the text the model reads: OBJ1 and OBJ2 as
    :data:`PLACEHOLDERS`."""
    return " ".join(PLACEHOLDERS.get(token, token.lower()) for token in masked)


def softmax_rows(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax with the fixed-order helpers of :mod:`kueri.arithmetic`."""
    shifted = np.asarray(logits, dtype=np.float64) - np.max(logits, axis=1, keepdims=True)
    exp = exps(shifted.reshape(-1)).reshape(shifted.shape)
    return exp / exp.sum(axis=1, keepdims=True)


class StanceEncoder:
    """P(BETTER, WORSE, NONE) of masked sentences, symmetric in the objects (see the module).

    ``probabilities(sentences)``: one row per sentence, each a list of masked tokens (OBJ1 / OBJ2).
    """

    labels = LABELS

    def __init__(self, path: str | Path = MODEL, threads: int | None = None) -> None:
        self.tuned = TunedWeights.load(path)
        if self.tuned.meta.get("base_sha256") != MODEL_SHA256:
            raise SetupError(f"stance encoder {path} was tuned from another MiniLM file: rebuild it with {REBUILD}")
        self.base = base_weights()
        first = self.tuned.first_layer
        base = self.base.encoder
        if first + len(self.tuned.layers) != len(base.layers):
            raise SetupError(f"stance encoder {path} replaces layers {first}.. of {len(base.layers)} with "
                             f"{len(self.tuned.layers)}: rebuild it with {REBUILD}")
        encoder = BertEncoder(f"{base.name}-stance", base.hidden, base.heads, base.eps, base.embedding_norm,
                              [*base.layers[:first], *self.tuned.layers])
        self.tokenizer = pair_tokenizer()
        self.session, self.workers = open_encoder(encoder, threads, INSTALL_HINT)

    def logits(self, texts: Sequence[str]) -> np.ndarray:
        """The head's logits (texts x :data:`LABELS`) of ``[CLS] hypothesis [SEP] text [SEP]``, one direction."""
        if not texts:
            return np.zeros((0, len(LABELS)))
        encoded = encode_inputs(self.tokenizer, texts)
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        first = embed_in_batches(self.session, encoded, order, BATCH, 0, self.base.embeddings, self.base.encoder.hidden,
                                 "stance", False, self.workers, pooling=first_token)
        head = self.tuned.head
        weight_rows = np.ascontiguousarray(np.asarray(head.weight, dtype=np.float64).T)  # labels x hidden
        products = row_dots(first.astype(np.float64)[:, None, :], weight_rows[None, :, :])
        return products + np.asarray(head.bias, dtype=np.float64)

    def probabilities(self, sentences: Sequence[Sequence[str]]) -> np.ndarray:
        """P(BETTER, WORSE, NONE) of each masked sentence, averaged over both orders of the objects."""
        from kueri.objects import swap_tokens

        texts = [masked_text(s) for s in sentences]
        swapped = [masked_text(swap_tokens(s)) for s in sentences]
        both = softmax_rows(self.logits([*texts, *swapped]))
        forward, backward = both[: len(texts)], both[len(texts):]
        return (forward + backward[:, SWAP]) / 2.0
