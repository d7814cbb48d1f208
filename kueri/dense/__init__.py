"""dense: whole-corpus passage embeddings in Lucene's vector index, and dense and hybrid first stages.

* :func:`embed_index` embeds every passage of a kueri index with an encoder of :mod:`kueri.encoders` into the
  encoder's store in a work folder (in chunks, each kept as soon as it is done, so a killed run continues where it
  stopped; here or as tasks of a Ray cluster, with the same vectors bit for bit), then writes the vector index
  ``INDEX/vectors-<encoder>/`` (:mod:`kueri.lucene.vectors`) from that store.
* :func:`open_vectors` opens them (one clear line when they are missing or were made by another encoder);
  :func:`dense_run` searches the topics' titles; :func:`hybrid_run` fuses a lexical and a dense run (RRF or a
  normalised linear combination).
"""

from kueri.dense.embed import EmbedReport, embed_index
from kueri.dense.retrieve import HYBRID_METHODS, dense_run, hybrid_run, open_vectors

__all__ = ["HYBRID_METHODS", "EmbedReport", "dense_run", "embed_index", "hybrid_run", "open_vectors"]
