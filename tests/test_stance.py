"""The stance stage: object masking, the shipped model's label mapping, label_run, run files and the CLI."""

from __future__ import annotations

import argparse
import json
import shutil

import numpy as np
import pytest

from kueri.cli.stance import add_parser as add_stance_parser
from kueri.errors import KueriError, SetupError
from kueri.parse import read_topics
from kueri.records import NO_STANCE, STANCES, Hit, Topic
from kueri.runfile import read_run_with_tag, write_run
from kueri.stance.features import OBJ1, OBJ2, ObjectMatcher, fold, mark_spans, mask_passage, sentences, tokens
from kueri.stance.label import corpus_texts, label_run, needed_ids
from kueri.stance.model import DEFAULT_MODEL, LABELS, StanceModel
from tests.conftest import FEW_TOPICS, SAMPLE_CORPUS, write_topics

SWAP = {"FIRST": "SECOND", "SECOND": "FIRST", "NEUTRAL": "NEUTRAL", "NO": "NO"}

PRO_CATS = ("Cats are far better pets than dogs. Cats are cleaner, quieter and cheaper than dogs, "
            "so I would always choose a cat over a dog.")
BOTH_NEUTRAL = ("Cats and dogs are both great pets. Whether a cat is better than a dog depends on "
                "your lifestyle: neither is better in general.")
ONLY_CATS = "Cats are wonderful, clean and independent animals. I love my cat."
NEITHER = "The museum opens at nine and closes at five. Tickets cost ten euros."


@pytest.fixture(scope="module")
def model() -> StanceModel:
    return StanceModel.load()


# -- object matching and masking ---------------------------------------------------------------------


def test_fold_removes_plurals_and_possessives_but_not_verb_forms():
    assert fold("cats") == fold("Cat") == "cat"
    assert fold("Apple's") == fold("Apple’s") == fold("apple")
    assert fold("PCs") == fold("PC") and fold("boxes") == "box" and fold("babies") == "baby"
    assert fold("gas") == "gas"  # three letters keep their s
    assert fold("training") != fold("train")  # no stemming: "training" is not the object "Train"


def test_matcher_masks_objects_longest_first_and_short_forms():
    matcher = ObjectMatcher("real Christmas tree", "fake Christmas tree")
    masked = matcher.mask(tokens("A real Christmas tree beats fake trees; real ones smell."))
    assert masked == ["a", OBJ1, "beats", OBJ2, "trees", OBJ1, "ones", "smell"]
    ali = ObjectMatcher("Muhammad Ali", "Joe Frazier")
    assert ali.mask(tokens("Ali beat Frazier, and Muhammad Ali won")) == [OBJ1, "beat", OBJ2, "and", OBJ1, "won"]


def test_short_all_caps_objects_need_their_capitals():
    matcher = ObjectMatcher("MAC", "PC")
    assert matcher.mask(tokens("My Mac beats PCs but mac and cheese or a pc")) == [
        "my", OBJ1, "beats", OBJ2, "but", "mac", "and", "cheese", "or", "a", "pc"]
    assert ObjectMatcher("Python", "R").mask(tokens("R or Python, r")) == [OBJ2, "or", OBJ1, "r"]


def test_passage_masking_splits_sentences_and_training_marks_spans():
    passage = mask_passage("Cats purr. Dogs bark!\nBoth sleep.", ObjectMatcher("cats", "dogs"))
    assert passage.sentences == [[OBJ1, "purr"], [OBJ2, "bark"], ["both", "sleep"]]
    assert passage.swapped().sentences == [[OBJ2, "purr"], [OBJ1, "bark"], ["both", "sleep"]]
    assert sentences("One. Two? Three") == ["One.", "Two?", "Three"]
    marked = mark_spans("I refrigerate it, you freeze it.", [(2, 16, OBJ1), (22, 31, OBJ2)])
    assert tokens(marked) == ["I", OBJ1, "you", OBJ2]


# -- the model -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [PRO_CATS, BOTH_NEUTRAL, ONLY_CATS])
def test_swapping_the_topics_objects_swaps_first_and_second_exactly(model, text):
    forward = model.probabilities(text, "cats", "dogs")
    backward = model.probabilities(text, "dogs", "cats")
    assert np.allclose(forward, backward[[1, 0, 2, 3]], atol=1e-12)
    assert model.label(text, "dogs", "cats") == SWAP[model.label(text, "cats", "dogs")]


def test_a_clear_comparison_favours_the_winner_by_its_position_in_objects(model):
    assert model.label(PRO_CATS, "cats", "dogs") == "FIRST"
    assert model.label(PRO_CATS, "dogs", "cats") == "SECOND"


def test_passages_naming_one_both_or_neither_object(model):
    assert model.label(NEITHER, "cats", "dogs") == "NO"  # cannot favour an object it never names
    assert model.label(ONLY_CATS, "cats", "dogs") in STANCES
    # NEUTRAL needs a sentence comparing both objects: with one object named, it is never NEUTRAL.
    assert model.label(ONLY_CATS, "cats", "dogs") != "NEUTRAL"
    assert model.label(BOTH_NEUTRAL, "cats", "dogs") in STANCES
    probabilities = model.probabilities(BOTH_NEUTRAL, "cats", "dogs")
    assert probabilities.shape == (4,) and abs(probabilities.sum() - 1) < 1e-9


def test_decision_priors_and_gate(model):
    p = np.array([0.2, 0.2, 0.4, 0.2])
    unshifted = model.with_decision(target_priors=model.train_priors, neutral_gate=0.0)
    assert unshifted.decide(p, comparative=0.0) == "NEUTRAL"
    gated = unshifted.with_decision(neutral_gate=0.5)
    assert gated.decide(p, comparative=0.1) == "NO"  # no comparing sentence: NEUTRAL's mass goes to NO
    assert gated.decide(p, comparative=0.6) == "NEUTRAL"
    # The shipped priors are uniform: dividing by the training priors (9 % NO) favours NO.
    assert model.with_decision(neutral_gate=0.0).decide(np.array([0.3, 0.3, 0.28, 0.12])) == "NO"
    assert model.with_decision(target_priors=[1, 0, 0, 0]).decide(p) == "FIRST"
    with pytest.raises(KueriError, match="priors"):
        model.with_decision(target_priors=[1, 2, 3])


def test_explain_names_the_sentence_that_decided_the_label(model):
    cats_dogs = ObjectMatcher("cats", "dogs")
    text = f"{NEITHER} {PRO_CATS}"
    explained = model.explain(text, cats_dogs)
    assert explained.label == model.label(text, "cats", "dogs") == "FIRST"
    # The museum's sentences name no object: leaving one out changes nothing; a comparison decided it.
    assert explained.sentence in sentences(PRO_CATS) and explained.index >= 2
    # Exchanging the objects swaps the label, not the reason.
    swapped = model.explain(text, ObjectMatcher("dogs", "cats"))
    assert (swapped.label, swapped.sentence) == ("SECOND", explained.sentence)
    assert model.explain(NEITHER, cats_dogs) == ("NO", None, None)  # NO without asking the model
    one = "Cats are far better pets than dogs."
    assert model.explain(one, cats_dogs) == (model.label(one, "cats", "dogs"), one, 0)


def test_missing_or_broken_model_says_how_to_rebuild(tmp_path):
    with pytest.raises(SetupError, match="scripts/train_stance.py") as missing:
        StanceModel.load(tmp_path / "stance-v1.npz")
    assert "not found" in str(missing.value)
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not a zip")
    with pytest.raises(SetupError, match="train_stance.py"):
        StanceModel.load(broken)
    with pytest.raises(SetupError, match="train_stance.py"):
        label_run({"1": [Hit("d", 1.0)]}, [Topic("1", "t", ("a", "b"))], {"d": "a b"}, model=tmp_path / "x.npz")


def test_saved_model_is_byte_identical_and_reloads(model, tmp_path):
    model.save(tmp_path / "copy.npz")
    assert (tmp_path / "copy.npz").read_bytes() == DEFAULT_MODEL.read_bytes()
    assert DEFAULT_MODEL.stat().st_size < 10_000_000
    assert StanceModel.load(tmp_path / "copy.npz").label(PRO_CATS, "cats", "dogs") == "FIRST"


# -- label_run and run files ---------------------------------------------------------------------------


def test_label_run_labels_the_top_hits_and_keeps_everything_else(model, tmp_path):
    topics = [Topic("17", "Do you prefer cats or dogs, and why?", ("cats", "dogs")),
              Topic("18", "Dogs or cats?", ("dogs", "cats"))]
    texts = {"a": PRO_CATS, "b": NEITHER, "c": ONLY_CATS}
    run = {"17": [Hit("a", 3.0), Hit("b", 2.0), Hit("c", 1.0)], "18": [Hit("a", 5.0, "NEUTRAL"), Hit("c", 4.0)]}
    labelled = label_run(run, topics, texts, depth=2, model=model)
    assert [h.stance for h in labelled["17"]] == ["FIRST", "NO", NO_STANCE]  # below depth: as given
    assert labelled["18"][0].stance == "SECOND"  # same passage, objects the other way round
    for qid in run:
        assert [(h.doc, h.score) for h in labelled[qid]] == [(h.doc, h.score) for h in run[qid]]
    assert [h.stance for h in label_run(run, topics, texts, depth=0, model=model)["17"]][2] in STANCES
    # Round trip through a run file: the stance column is written and read back.
    write_run(labelled, tmp_path / "run.txt", "tag")
    back, tag = read_run_with_tag(tmp_path / "run.txt")
    assert tag == "tag" and back == labelled


def test_label_run_errors(model):
    topics = [Topic("1", "a or b?", ("a", "b"))]
    with pytest.raises(KueriError, match="topic 2"):
        label_run({"2": [Hit("x", 1.0)]}, topics, {"x": "a"}, model=model)
    with pytest.raises(KueriError, match="no text"):
        label_run({"1": [Hit("x", 1.0)]}, topics, {}, model=model)


# -- the CLI on the shipped sample ---------------------------------------------------------------------


def _stance_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kueri")
    add_stance_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture(scope="module")
def sample_run(index_factory, tmp_path_factory):
    """The default configuration's run of a few of the sample's topics (:data:`FEW_TOPICS`: the CLI labels a run
    topic by topic, and theirs take every label), its topics file and the index it came from."""
    from kueri.config import get_config
    from kueri.pipeline import search_run

    config = get_config("default")
    index = index_factory(config.analyzer)
    folder = tmp_path_factory.mktemp("stance")
    topics = write_topics(FEW_TOPICS, folder / "topics.xml")
    run = search_run(index, config, read_topics(topics))
    write_run(run, folder / "run.txt", config.run_tag)
    return folder / "run.txt", topics, index


def test_cli_labels_the_sample_run_from_the_index_and_from_the_corpus(sample_run, tmp_path):
    path, topics, index = sample_run
    out_index, out_corpus = tmp_path / "by-index.txt", tmp_path / "by-corpus.txt"
    assert _stance_cli(["stance", str(path), "--index", str(index.path), "--topics", str(topics),
                        "--output", str(out_index), "--depth", "5"]) == 0
    assert _stance_cli(["stance", str(path), "--corpus", str(SAMPLE_CORPUS), "--topics", str(topics),
                        "--output", str(out_corpus), "--depth", "5"]) == 0
    original, tag = read_run_with_tag(path)
    labelled, labelled_tag = read_run_with_tag(out_index)
    assert out_index.read_bytes() == out_corpus.read_bytes()
    assert labelled_tag == tag and labelled.keys() == original.keys()
    seen = set()
    for qid, hits in labelled.items():
        assert [(h.doc, h.score) for h in hits] == [(h.doc, h.score) for h in original[qid]]
        assert all(h.stance in STANCES for h in hits[:5]) and all(h.stance == NO_STANCE for h in hits[5:])
        seen.update(h.stance for h in hits[:5])
    assert len(seen) >= 3  # real labels, not one constant


def test_labelling_in_worker_processes_gives_the_same_run(sample_run, model, monkeypatch):
    """Every hit of the run (the pool's threshold lowered below their number), texts read from the index here."""
    from kueri.stance import label
    from kueri.stance.label import LabelSummary, index_texts

    path, topics, index = sample_run
    run, _ = read_run_with_tag(path)
    topics = read_topics(topics)
    monkeypatch.setattr(label, "POOL_MIN_HITS", 100)
    assert sum(map(len, run.values())) >= label.POOL_MIN_HITS and len(run) > 1
    alone, pooled = LabelSummary(), LabelSummary()
    one = label_run(run, topics, index_texts(index), depth=None, model=model, summary=alone, workers=1)
    two = label_run(run, topics, index_texts(index), depth=None, model=model, summary=pooled, workers=2)
    assert two == one and list(two) == list(run)
    assert pooled.counts == alone.counts and pooled.labelled == alone.labelled == sum(map(len, run.values()))


class _StaysHere:
    """A cascade's strong model as this test sees it: every passage it is asked is FIRST, it counts what it is asked,
    and it cannot be pickled (what a worker process would need)."""

    def __init__(self) -> None:
        self.ranks: list[int] = []
        self.prefetched = 0

    def __reduce__(self):
        raise TypeError("a cascade's strong model must not leave the process that labels")

    def at_rank(self, rank: int) -> _StaysHere:
        self.ranks.append(rank)
        return self

    def prefetch(self, passages) -> None:
        self.prefetched += len(passages)

    def label_masked(self, passage) -> str:
        return "FIRST"


def test_workers_get_only_a_cascades_fast_model_and_the_labels_stay(model, monkeypatch):
    """With workers, a cascade's strong model labels the top hits in this process (the passage model: its encoders'
    weights and activations once, not once a worker, docs/benchmarks.md) and the workers get only the fast model
    below it: the labels the cascade gives in one process, every hit below the top labelled by the fast model at its
    own rank."""
    from kueri.stance import Cascade, label

    texts = [PRO_CATS, BOTH_NEUTRAL, ONLY_CATS, NEITHER, "Dogs beat cats. Dogs are better than cats."]
    topics = [Topic(str(n), "Cats or dogs?", ("cats", "dogs")) for n in (1, 2, 3)]
    run = {topic.number: [Hit(f"{topic.number}-{i}", 100.0 - i) for i in range(12 + int(topic.number))]
           for topic in topics}
    contents = {hit.doc: texts[(i + int(qid)) % len(texts)] for qid, hits in run.items() for i, hit in enumerate(hits)}
    monkeypatch.setattr(label, "POOL_MIN_HITS", 1)
    alone, pooled = _StaysHere(), _StaysHere()
    one = label_run(run, topics, contents, depth=13, model=Cascade(alone, model, 4), workers=1)
    two = label_run(run, topics, contents, depth=13, model=Cascade(pooled, model, 4), workers=2)
    assert two == one and list(two) == list(run)
    assert pooled.ranks == alone.ranks == [1, 2, 3, 4] * 3 and pooled.prefetched == alone.prefetched == 12
    for hits in one.values():
        cut = min(13, len(hits))
        assert [h.stance for h in hits[:4]] == ["FIRST"] * 4
        assert [h.stance for h in hits[4:cut]] == [model.label(contents[h.doc], "cats", "dogs") for h in hits[4:cut]]
        assert [h.stance for h in hits[cut:]] == [NO_STANCE] * (len(hits) - cut)


def test_cli_explains_each_label_with_a_sentence_of_its_passage(sample_run, tmp_path):
    path, topics, index = sample_run
    labelled, explained = tmp_path / "run.txt", tmp_path / "why.jsonl"
    assert _stance_cli(["stance", str(path), "--corpus", str(SAMPLE_CORPUS), "--topics", str(topics),
                        "--output", str(labelled), "--depth", "3", "--explain", str(explained)]) == 0
    run, _ = read_run_with_tag(labelled)
    lines = [json.loads(line) for line in explained.read_text(encoding="utf-8").splitlines()]
    assert [(x["topic"], x["doc"], x["stance"]) for x in lines] == [
        (qid, h.doc, h.stance) for qid, hits in run.items() for h in hits[:3]]
    assert [x["rank"] for x in lines[:3]] == [1, 2, 3]
    texts = dict(zip([x["doc"] for x in lines], index.contents_of([x["doc"] for x in lines], "test"), strict=True))
    assert all(x["sentence"] is None or x["sentence"] in texts[x["doc"]] for x in lines)
    assert sum(x["sentence"] is not None for x in lines) > len(lines) / 2


def test_cli_errors(sample_run, tmp_path):
    path, topics, _ = sample_run
    from kueri.stages import depth_flag

    # `kueri stance --depth -1`: argparse's one line naming --depth (exit 2), before any file is read
    with pytest.raises(argparse.ArgumentTypeError, match="number of hits or all"):
        depth_flag("-1")
    with pytest.raises(SetupError, match="train_stance.py"):
        _stance_cli(["stance", str(path), "--corpus", str(SAMPLE_CORPUS), "--topics", str(topics),
                     "--output", str(tmp_path / "o.txt"), "--model", str(tmp_path / "missing.npz")])
    assert not (tmp_path / "o.txt").exists()


def test_corpus_texts_reads_only_the_needed_passages(tmp_path):
    shutil.copy(SAMPLE_CORPUS, tmp_path / "passages.jsonl.gz")
    run = {"1": [Hit("clueweb12-0907wb-60-03588___2", 1.0), Hit("nope", 0.5)]}
    texts = corpus_texts(tmp_path / "passages.jsonl.gz", needed_ids(run, depth=1))
    assert list(texts) == ["clueweb12-0907wb-60-03588___2"] and texts["clueweb12-0907wb-60-03588___2"]
    assert LABELS == STANCES


def test_each_stance_fact_is_written_once():
    """The classes, the swaps and the default model's name are kueri.stance.facts'; the package's DEFAULT is that
    name, and no DEFAULT_MODEL beside it names another model's file."""
    import kueri.stance
    from kueri.stance import decision, encoders, facts, family, label, model, passage_encoder

    assert model.SENTENCE_LABELS is encoders.SENTENCE_LABELS is facts.SENTENCE_LABELS
    assert model.SENTENCE_SWAP is encoders.SENTENCE_SWAP is facts.SENTENCE_SWAP
    assert model.PASSAGE_SWAP is passage_encoder.PASSAGE_SWAP is facts.PASSAGE_SWAP
    assert decision.LABELS is label.LABELS is model.LABELS is kueri.stance.LABELS is facts.LABELS
    assert kueri.stance.DEFAULT == family.DEFAULT == facts.DEFAULT == "stance-v4"
    assert "DEFAULT_MODEL" not in kueri.stance.__all__ and not hasattr(kueri.stance, "DEFAULT_MODEL")
