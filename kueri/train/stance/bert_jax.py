"""BERT's layers trained in JAX on the CPU, as kueri's own graph (kueri.encoders.bert_graph) computes them: the
states below the trained layers (computed once, by that graph), the trained layers' parameters in float32 and back,
the forward pass, and a compiled AdamW step. Importing this module sets ``JAX_PLATFORMS=cpu`` (unless set) and
imports no JAX: the functions that train import it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from kueri.encoders.bert_graph import BertEncoder, BertLayer, FloatLinear, build_graph, open_session
from kueri.encoders.cross import TunedWeights, base_weights

# JAX on the CPU (set before jax is imported).
os.environ.setdefault("JAX_PLATFORMS", "cpu")

WARMUP = 0.1  # share of the steps with a rising learning rate
WEIGHT_DECAY = 0.01
PARTS = ("q", "k", "v", "ao", "fi", "fo")


def layers_of(tuned: TunedWeights) -> list[BertLayer]:
    """Every layer of a tuned model: MiniLM's below its ``first_layer``, its own above."""
    return [*base_weights().encoder.layers[:tuned.first_layer], *tuned.layers]


def lower_states(encoded: list[list[int]], first_layer: int,
                 layers: list[BertLayer] | None = None, base_model: str = "minilm") -> list[np.ndarray]:
    """The hidden states after the first ``first_layer`` of ``layers`` (default the base's, MiniLM's unless
    ``base_model`` says; kueri's graph), one array per input."""
    base = base_weights(base_model)
    encoder = base.encoder
    layers = encoder.layers if layers is None else layers
    if first_layer == 0:  # every layer is trained: the states are the normalised input embeddings
        weight, bias = encoder.embedding_norm
        out = []
        for ids in encoded:
            x = base.embeddings(np.asarray([ids], dtype=np.int64))[0]
            mean = x.mean(-1, keepdims=True)
            normal = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + encoder.eps)
            out.append((normal * weight + bias).astype(np.float32))
        return out
    lower = BertEncoder(encoder.name, encoder.hidden, encoder.heads, encoder.eps, encoder.embedding_norm,
                        list(layers[:first_layer]))
    session = open_session(build_graph(lower), 2)
    out: list[np.ndarray] = [np.zeros(0)] * len(encoded)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    for start in range(0, len(order), 64):
        batch = order[start:start + 64]
        width = max(len(encoded[i]) for i in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=bool)
        for row, i in enumerate(batch):
            ids[row, :len(encoded[i])], mask[row, :len(encoded[i])] = encoded[i], True
        bias = np.where(mask, 0.0, -1e9).astype(np.float32)[:, None, None, :]
        states = session.run(None, {"embeddings": base.embeddings(ids), "mask_bias": bias})[0]
        for row, i in enumerate(batch):
            out[i] = states[row, :len(encoded[i])]
    return out


def layer_parameters(layer: BertLayer) -> dict:
    """A layer's weights as float32 arrays (int8 blocks expanded), the form JAX trains."""
    params = {}
    for part in PARTS:
        linear = layer.linear[part]
        params[part] = {"w": linear.weight() if hasattr(linear, "values") else linear.weight,
                        "b": np.asarray(linear.bias, dtype=np.float32)}
    params["aln"] = {"w": layer.attention_norm[0], "b": layer.attention_norm[1]}
    params["oln"] = {"w": layer.output_norm[0], "b": layer.output_norm[1]}
    return params


def bert_layer(params: dict) -> BertLayer:
    """The layer of trained float32 parameters (:func:`layer_parameters`' form)."""
    return BertLayer({part: FloatLinear(params[part]["w"], params[part]["b"]) for part in PARTS},
                     (params["aln"]["w"], params["aln"]["b"]), (params["oln"]["w"], params["oln"]["b"]))


def layer_norm(x, p, eps: float):  # noqa: ANN001, ANN201
    """Layer normalisation over the last axis with weight and bias ``p`` (as kueri's graph computes it)."""
    import jax.numpy as jnp

    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * p["w"] + p["b"]


def full_layer(p: dict, x, mask_bias, heads: int, eps: float):
    """One layer over every token: kueri's graph (bert_graph.build_graph) in JAX."""
    import jax

    batch, tokens, hidden = x.shape
    size = hidden // heads

    def split(y):
        return y.reshape(batch, tokens, heads, size).transpose(0, 2, 1, 3)

    q, k, v = (split(x @ p[n]["w"] + p[n]["b"]) for n in "qkv")
    scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + mask_bias
    context = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(batch, tokens, hidden)
    x = layer_norm(x + context @ p["ao"]["w"] + p["ao"]["b"], p["aln"], eps)
    middle = jax.nn.gelu(x @ p["fi"]["w"] + p["fi"]["b"], approximate=False)
    return layer_norm(x + middle @ p["fo"]["w"] + p["fo"]["b"], p["oln"], eps)


def forward(params: dict, states, mask_bias, heads: int, eps: float):
    """Logits of the first token after the trainable layers."""
    x = states
    for p in params["layers"]:
        x = full_layer(p, x, mask_bias, heads, eps)
    return x[:, 0, :] @ params["head"]["w"] + params["head"]["b"]


def length_order(states: Sequence[np.ndarray]) -> list[int]:
    """The inputs' indices by length (ties: by index), so that a batch holds inputs of similar length."""
    return sorted(range(len(states)), key=lambda i: (len(states[i]), i))


def padded(states: Sequence[np.ndarray], chosen: Sequence[int], multiple: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``chosen`` states as one batch padded to a multiple of ``multiple`` tokens (few shapes to compile), and
    its attention bias (0 on tokens, -1e9 on padding)."""
    width = -(-max(len(states[i]) for i in chosen) // multiple) * multiple
    x = np.zeros((len(chosen), width, states[0].shape[1]), dtype=np.float32)
    bias = np.full((len(chosen), 1, 1, width), -1e9, dtype=np.float32)
    for row, i in enumerate(chosen):
        x[row, :len(states[i])] = states[i]
        bias[row, ..., :len(states[i])] = 0.0
    return x, bias


def adamw_step(loss, steps: int, learning_rate: float):  # noqa: ANN001, ANN201
    """One compiled AdamW step of ``loss(params, *batch)``: ``step(params, m, v, t, *batch) -> (params, m, v,
    loss)``; the rate rises over the first :data:`WARMUP` of the ``steps``, then falls to 0; weight decay on
    matrices only."""
    import jax
    import jax.numpy as jnp

    warm = max(1, int(WARMUP * steps))

    @jax.jit
    def step(p, m, v, t, *batch):
        value, grads = jax.value_and_grad(loss)(p, *batch)
        rate = learning_rate * jnp.minimum(t / warm, (steps - t) / (steps - warm))
        m = jax.tree_util.tree_map(lambda a, g: 0.9 * a + 0.1 * g, m, grads)
        v = jax.tree_util.tree_map(lambda a, g: 0.999 * a + 0.001 * g * g, v, grads)
        correction = jnp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)

        def update(w, a, b):  # AdamW: decoupled weight decay
            decay = WEIGHT_DECAY * w if w.ndim == 2 else 0.0
            return w - rate * (correction * a / (jnp.sqrt(b) + 1e-8) + decay)

        return jax.tree_util.tree_map(update, p, m, v), m, v, value

    return step
