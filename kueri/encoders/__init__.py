"""encoders: the neural text encoders (all-MiniLM-L6-v2, multilingual-e5-small) and the store of their passage
embeddings, for the second stage, dense retrieval, stance, ``kueri embed`` and ``kueri serve``.

Both encoders are one BERT graph (:mod:`kueri.encoders.bert_graph`) with their own weights and tokenisers
(:mod:`~kueri.encoders.minilm` with :mod:`~kueri.encoders.wordpiece`, :mod:`~kueri.encoders.e5` with
:mod:`~kueri.encoders.sentencepiece`). Each is one entry of the registry (:data:`ENCODERS`, :func:`get`): ask it by
name, never switch on a name elsewhere. Public API:

- ``get(name).load(threads)``: the encoder (:class:`TextEncoder`: ``queries(texts)``, ``passages(texts)``, unit
  vectors of :data:`DIMENSION` float32);
- ``get(name).stored(workdir)``: the same, its passage embeddings read from and added to its store in the work
  folder (:class:`~kueri.encoders.store.EmbeddingStore`, shared with ``kueri embed``); ``writes=False``: read from
  it only, what is embedded kept and handed over (a Ray task's: :class:`~kueri.encoders.stored.StoredEncoder`);
- ``get(name).store(workdir)``: the store itself (``missing(digests)``, ``vectors(digests)``, ``len()``), keyed by
  :func:`text_digest` of a passage's text;
- ``get(name).is_available()``, ``.model_file()``, ``.key()``, ``.store_key``, ``.distributions``;
- ``open_encoder(name, workdir)``: the encoder as a run's stages use it (stored with a work folder, else plain): the
  one place a run opens an encoder.
"""

from kueri.encoders.registry import DIMENSION, ENCODERS, Encoder, get, kernel_class, names, open_encoder
from kueri.encoders.store import CHUNK_PASSAGES, EmbeddingStore, TextEncoder, store_path, text_digest
from kueri.encoders.stored import StoredEncoder

__all__ = ["CHUNK_PASSAGES", "DIMENSION", "ENCODERS", "EmbeddingStore", "Encoder", "StoredEncoder", "TextEncoder",
           "get", "kernel_class", "names", "open_encoder", "store_path", "text_digest"]
