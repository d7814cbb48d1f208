"""The objects of free comparative questions (kueri.questions), measured on a table of real questions."""

from __future__ import annotations

import pytest

from kueri.questions import Objects, extract_objects, same_object
from tests.conftest import DATA

TABLE = DATA / "comparative-questions.tsv"
#: The questions the rules get wrong, kept here so that a change of the rules shows what it wins and loses.
KNOWN_MISSES = {
    "Which algorithm is better, quicksort or merge sort?",  # "quicksort" taken for a modifier of "sort"
    "Should I major in philosophy or psychology?",  # Touché's object is "major in philosophy"
    "Should kids learn chess or go?",  # "go" is read as a verb
}


def table() -> list[tuple[str, str, str, str]]:
    rows = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            source, question, first, second = line.split("\t")
            rows.append((source, question, first, second))
    return rows


def correct(question: str, first: str, second: str) -> bool:
    found = extract_objects(question)
    if not first:
        return found is None
    return found is not None and same_object(found.first, first) and same_object(found.second, second)


def test_the_table_holds_the_touche_topics_and_other_real_questions():
    rows = table()
    assert len(rows) >= 40
    assert sum(source.startswith("touche-") for source, *_ in rows) == 50
    assert any(not first for _, _, first, _ in rows)  # questions that name no two objects


def test_accuracy_on_the_table_is_the_documented_one():
    rows = table()
    misses = {question for _, question, first, second in rows if not correct(question, first, second)}
    assert misses == KNOWN_MISSES
    touche = [row for row in rows if row[0].startswith("touche-")]
    touche_right = sum(correct(q, a, b) for _, q, a, b in touche)
    # docs/serve.md: 71 of 74 (95.9 %); the Touché 2022 topics' <objects>: 48 of 50
    assert (len(rows) - len(misses), len(rows), touche_right, len(touche)) == (71, 74, 48, 50)


@pytest.mark.parametrize(("question", "expected"), [
    ("Which is better, a laptop or a desktop?", ("laptop", "desktop")),
    ("X vs Y for Z", ("X", "Y")),
    ("Should I use Rust or Go", ("Rust", "Go")),
    ("is emacs better than vim", ("emacs", "vim")),
    ("Should I buy steel or ceramic knives?", ("steel knives", "ceramic knives")),
    ("What is better for the environment, a real or a fake Christmas tree?", ("real Christmas tree",
                                                                             "fake Christmas tree")),
    ("Which is better, Family Guy or The Simpsons?", ("Family Guy", "The Simpsons")),
    ("What is the difference between a crocodile and an alligator?", ("crocodile", "alligator")),
])
def test_the_question_forms_of_the_issue(question, expected):
    assert extract_objects(question) == Objects(*expected)


@pytest.mark.parametrize("question", ["", "   ", "laptop", "What is the capital of France?", "or", "a or a",
                                      "better than", "x" * 600])
def test_no_two_objects_gives_none(question):
    assert extract_objects(question) is None


def test_same_object_ignores_case_and_a_leading_article():
    assert same_object("the Simpsons", "The Simpsons") and same_object("Laptop", "a laptop")
    assert not same_object("laptop", "laptops")


def test_mentions_are_the_spans_the_stance_model_masks():
    from kueri.objects import ObjectMatcher, mask_passage, mentions

    matcher = ObjectMatcher("real Christmas tree", "fake Christmas tree")
    text = "A real tree smells; fake Christmas trees last. Real Christmas Trees beat the fake."
    spans = mentions(text, matcher)
    assert [(text[a:b], label) for a, b, label in spans] == [
        ("real", "OBJ1"), ("fake Christmas trees", "OBJ2"), ("Real Christmas Trees", "OBJ1"), ("fake", "OBJ2")]
    masked = mask_passage(text, matcher).tokens
    assert [t for t in masked if t in ("OBJ1", "OBJ2")] == [label for _, _, label in spans]
