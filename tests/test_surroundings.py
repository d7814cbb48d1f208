"""Real, labelled texts in page surroundings (kueri.train.stance.surroundings) and the written drawback sentences:
training data guarded against the data kueri measures on, composed passages that keep their text and label, and a
cross-validation that never trains on a held-out answer in other surroundings."""

from __future__ import annotations

import json
import random
import re

import pytest

pytest.importorskip("sklearn", reason="the train extra (pip install -e '.[train]')")

from kueri import resources  # noqa: E402
from kueri.stance.features import in_training_half  # noqa: E402
from kueri.train.data import DRAWBACK_SENTENCES, load_drawback_sentences, stance_train_rows  # noqa: E402
from kueri.train.stance.passage_data import composed_items, outside  # noqa: E402
from kueri.train.stance.surroundings import (  # noqa: E402
    PLACEHOLDERS,
    SNIPPETS,
    Surroundings,
    read_snippets,
    target_words,
)
from kueri.train.web_passages import SHARED_WORDS, sample_sequences, shingles, topic_pairs  # noqa: E402


@pytest.fixture(scope="module")
def composed():
    return composed_items()


def test_the_snippets_copy_no_sample_passage_and_name_objects_only_through_placeholders():
    snippets = read_snippets()
    assert len(snippets) >= 300 and {s.place for s in snippets} == {"before", "after"}
    sample = sample_sequences()
    filled = [s.text.replace("{o1}", "alpha").replace("{o2}", "beta").replace("{o}", "alpha") for s in snippets]
    assert not [t for t in filled if shingles(t, SHARED_WORDS) & sample]
    assert all(set(re.findall(r"\{[^}]*\}", s.text)) <= set(PLACEHOLDERS) for s in snippets)
    assert all(json.loads(line)["writer"] for line in SNIPPETS.read_text(encoding="utf-8").splitlines())


def test_a_composed_passage_holds_its_text_whole_and_is_as_long_as_a_crawled_one():
    text = "Oak is sturdier than pine, so for a workbench I'd take oak."
    first = Surroundings().compose(text, "oak", "pine")
    assert text in first and len(first.split()) > len(text.split())
    assert Surroundings().compose(text, "oak", "pine") == first  # seeded
    assert "{o" not in first
    lengths = sorted(target_words(random.Random(k)) for k in range(2000))
    assert 135 <= lengths[1000] <= 155 and lengths[1800] >= 185 and lengths[0] >= 100


def test_composed_items_keep_their_labels_and_their_question(composed):
    answers = [item for item in composed if item.source == "composed-answers"]
    rows = stance_train_rows()
    assert len(answers) == len(rows)
    codes = {"2": "FIRST", "3": "SECOND", "1": "NEUTRAL", "0": "NO"}
    assert [item.label for item in answers] == [codes[row["answer_stance"]] for row in rows]
    assert all(item.origin == item.group == row["id"] for item, row in zip(answers, rows, strict=True))
    sentences = [item for item in composed if item.source == "composed-compsent"]
    assert sentences and all(in_training_half(item.group) for item in sentences)  # never the held-out half


def test_a_fold_trains_on_no_held_out_answer_in_surroundings(composed):
    question = composed[0].origin
    kept = outside(composed, {question})
    assert all(composed[i].origin != question for i in kept)
    assert len(kept) == len(composed) - sum(item.origin == question for item in composed)


def test_the_drawback_sentences_are_labelled_by_another_hand_and_split_by_pair():
    rows = [json.loads(line) for line in DRAWBACK_SENTENCES.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 600 and {r["label"] for r in rows} == {"BETTER", "WORSE", "NONE"}
    assert sum(r["label"] == r["writer_label"] for r in rows) / len(rows) >= 0.95
    sample = sample_sequences()
    assert not [r["id"] for r in rows if shingles(r["sentence"], SHARED_WORDS) & sample]
    topics = topic_pairs()
    assert len(topics) == 50
    assert not [r["id"] for r in rows if frozenset((r["object_a"].lower(), r["object_b"].lower())) in topics]
    halves: dict[str, set[bool]] = {}
    for key, _tokens, _label in load_drawback_sentences():
        halves.setdefault(key, set()).add(in_training_half(key))
    assert all(len(sides) == 1 for sides in halves.values())  # a pair's sentences on one side
    assert resources.path("training", "drawback-sentences.jsonl") == DRAWBACK_SENTENCES
