"""The objects of free comparative questions (kueri.questions), measured on a table of real questions."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from kueri.questions import Objects, Question, analyse, aspect_terms, extract_objects, same_object, speaks_of
from tests.conftest import DATA

TABLE = DATA / "comparative-questions.tsv"
#: The questions the rules get wrong, kept here so that a change of the rules shows what it wins and loses.
KNOWN_MISSES = {
    "Which algorithm is better, quicksort or merge sort?",  # "quicksort" taken for a modifier of "sort"
    "Should I major in philosophy or psychology?",  # Touché's object is "major in philosophy"
    "Should kids learn chess or go?",  # "go" is read as a verb (so no objects, and no comparison either)
}
KNOWN_ASPECT_MISSES = {"What is the better way to grill outdoors: gas or charcoal?"}  # "way to grill outdoors"
KNOWN_COMPARATIVE_MISSES = {"Should kids learn chess or go?"}


class Row(NamedTuple):
    source: str
    question: str
    first: str
    second: str
    aspect: str
    comparative: bool


def table() -> list[Row]:
    rows = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            source, question, first, second, aspect, comparative = line.split("\t")
            assert comparative in ("yes", "no"), line
            rows.append(Row(source, question, first, second, aspect, comparative == "yes"))
    return rows


def correct(question: str, first: str, second: str) -> bool:
    found = extract_objects(question)
    if not first:
        return found is None
    return found is not None and same_object(found.first, first) and same_object(found.second, second)


def test_the_table_holds_the_touche_topics_and_other_real_questions():
    rows = table()
    assert len(rows) == 94
    assert sum(row.source.startswith("touche-") for row in rows) == 50
    assert sum(not row.comparative for row in rows) == 12  # questions that compare nothing
    assert sum(bool(row.aspect) for row in rows) == 34


def test_accuracy_on_the_table_is_the_documented_one():
    rows = table()
    misses = {row.question for row in rows if row.comparative and not correct(*row[1:4])}
    assert misses == KNOWN_MISSES
    comparative = [row for row in rows if row.comparative]
    touche = [row for row in rows if row.source.startswith("touche-")]
    touche_right = sum(correct(*row[1:4]) for row in touche)
    # docs/serve.md: the objects of 79 of the 82 comparative questions (96.3 %); the Touché topics' <objects>: 48 of 50
    assert (len(comparative) - len(misses), len(comparative), touche_right, len(touche)) == (79, 82, 48, 50)


def test_the_aspect_and_whether_it_compares_on_the_table():
    rows = table()
    found = {row.question: analyse(row.question) for row in rows}
    aspect_misses = {row.question for row in rows if (found[row.question].aspect or "").lower() != row.aspect.lower()}
    comparative_misses = {row.question for row in rows if found[row.question].comparative != row.comparative}
    assert aspect_misses == KNOWN_ASPECT_MISSES and comparative_misses == KNOWN_COMPARATIVE_MISSES
    # docs/serve.md: aspects right in 93 of 94 questions (33 of the 34 that name one); comparative or not: 93 of 94
    assert len(rows) - len(aspect_misses) == 93 and len(rows) - len(comparative_misses) == 93


@pytest.mark.parametrize(("question", "objects", "aspect", "comparative"), [
    ("Which is cheaper, a laptop or a desktop?", ("laptop", "desktop"), "cheaper", True),
    ("Windows or Linux for gaming?", ("Windows", "Linux"), "gaming", True),
    ("is X faster than Y", ("X", "Y"), "faster", True),
    ("Which is more difficult, skiing or snowboarding?", ("skiing", "snowboarding"), "more difficult", True),
    ("Which is cheaper for gaming, a PC or a console?", ("PC", "console"), "cheaper, gaming", True),
    ("Which is better, Canon or Nikon?", ("Canon", "Nikon"), None, True),  # "better" names no aspect
    ("Can I bring a laptop or a tablet on a plane?", ("laptop", "tablet"), None, False),
    ("What is the capital of France?", None, None, False),
])
def test_the_aspect_forms_of_the_issue(question, objects, aspect, comparative):
    assert analyse(question) == Question(Objects(*objects) if objects else None, aspect, comparative)


@pytest.mark.parametrize(("question", "expected"), [
    ("Should I learn Python or Java first?", ("Python", "Java")),
    ("Should I buy an iPad or a laptop now?", ("iPad", "laptop")),
    ("Should I learn French or Spanish next?", ("French", "Spanish")),
    ("Should I get a cat or a dog today?", ("cat", "dog")),
    ("Should I pick React or Angular instead?", ("React", "Angular")),
    ("Are electric cars more reliable than petrol cars?", ("electric cars", "petrol cars")),
])
def test_trailing_adverbs_are_not_part_of_an_object(question, expected):
    assert extract_objects(question) == Objects(*expected)


@pytest.mark.parametrize(("aspect", "terms", "text", "speaks"), [
    ("cheaper", ["cheap"], "Desktops are cheap to upgrade.", True),
    ("healthier", ["health"], "Green tea is healthy.", True),
    ("bigger", ["big"], "A bigger screen.", True),
    ("more difficult", ["difficult"], "Snowboarding is difficult at first.", True),
    ("gaming", ["gaming"], "Battery life matters most.", False),
    (None, [], "anything", False),
])
def test_aspect_terms_and_passages_that_speak_of_them(aspect, terms, text, speaks):
    assert aspect_terms(aspect) == terms and speaks_of(text, terms) == speaks


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
