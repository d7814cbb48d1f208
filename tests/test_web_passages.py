"""The web-passage stance set (kueri/resources/training/web-passages/), guarded against the data kueri measures on.

The set is training data the team wrote; the shipped sample's passages and the 2022 judgments are for measuring
only. So: no passage shares an 8-word sequence with a sample passage, no object pair is one of the 50 shipped
topics', near-duplicates are capped, the frozen parts (the adoptions' tests) are the files recorded before any
model read them, each part written by writers who wrote nothing else, on pairs no other part has; and the set is
what its README says (size, pairs, domains, labels, the writers' and labellers' agreement).
"""

from __future__ import annotations

import collections
import hashlib
import json

import pytest

from kueri.train.web_passages import (
    LABELS,
    MAX_WORDS,
    MIN_WORDS,
    SHARED_WORDS,
    cohen_kappa,
    near_duplicates,
    pair_of,
    part_of,
    sample_sequences,
    shingles,
    topic_pairs,
)
from tests.conftest import ROOT

SET = ROOT / "kueri" / "resources" / "training" / "web-passages"
#: The frozen parts' SHA-256, each recorded when it was made: the frozen fifth before any model was trained on the
#: rest, the second and third frozen parts before any model read them.
FROZEN_SHA256 = {"frozen": "545909da1a98ef7b401757a5770aa9c90d72d92f9185e61f2b7c9891f7132629",
                 "second-frozen": "9e695d7a7af8af4e0dea74d321a34e26e3dfc1249cd5027cb27a681e1b92c9b0",
                 "third-frozen": "da6dc1d838a22676ca99ff50e81d8b8d60c54152161a245b03f2edc9a52430a4"}
#: The parts models are trained on: the first set's and two written later, on new pairs by new writers (the third
#: shaped like crawled passages).
TRAINING_PARTS = ("train", "second-train", "third-train")
FIELDS = {"id", "object_1", "object_2", "text", "stance", "writer_stance", "domain", "style", "situations", "writer",
          "batch", "round"}


def read(name: str) -> list[dict]:
    with open(SET / f"{name}.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


@pytest.fixture(scope="module")
def train() -> list[dict]:
    return [row for name in TRAINING_PARTS for row in read(name)]


@pytest.fixture(scope="module")
def frozen() -> list[dict]:
    return [row for name in FROZEN_SHA256 for row in read(name)]


def test_the_frozen_parts_are_the_recorded_files():
    assert {path.stem for path in SET.glob("*.jsonl")} == {*TRAINING_PARTS, *FROZEN_SHA256}
    for name, digest in FROZEN_SHA256.items():
        assert hashlib.sha256((SET / f"{name}.jsonl").read_bytes()).hexdigest() == digest, name


def test_no_part_shares_a_pair_or_a_writer_with_another_part():
    parts = {name: read(name) for name in (*TRAINING_PARTS, *FROZEN_SHA256)}
    for name, rows in parts.items():
        assert {part_of(r["writer"]) for r in rows} == {name}  # its writers wrote nothing else
        for other, others in parts.items():
            if other != name:
                assert not {pair_of(r) for r in rows} & {pair_of(r) for r in others}, (name, other)


@pytest.mark.parametrize("part", ["third-train", "third-frozen"])
def test_the_third_parts_are_as_long_as_the_passages_kueri_labels(part):
    """The sample's passages have a median of 144 words and a tenth over 195 (their shape, measured; never their
    text): the third parts were written to that shape, the earlier ones were shorter (medians 79-94)."""
    lengths = sorted(len(r["text"].split()) for r in read(part))
    assert lengths[len(lengths) // 2] >= 130
    assert lengths[9 * len(lengths) // 10] >= 190


def test_the_frozen_fifth_is_a_fifth_of_the_pairs_it_was_set_aside_from():
    first, frozen = read("train"), read("frozen")
    assert 0.15 <= len({pair_of(r) for r in frozen}) / len({pair_of(r) for r in first + frozen}) <= 0.25


def test_the_set_is_what_its_readme_says(train, frozen):
    rows = train + frozen
    assert all(set(r) == FIELDS for r in rows)
    assert len({r["id"] for r in rows}) == len(rows) >= 2000
    assert len({pair_of(r) for r in rows}) >= 250
    assert len({r["domain"] for r in rows}) >= 12
    assert {r["stance"] for r in rows} == {r["writer_stance"] for r in rows} == set(LABELS)
    assert all(MIN_WORDS <= len(r["text"].split()) <= MAX_WORDS for r in rows)
    counts = collections.Counter(r["stance"] for r in rows)
    assert min(counts.values()) / len(rows) >= 0.15  # every class well represented
    assert cohen_kappa([r["writer_stance"] for r in rows], [r["stance"] for r in rows]) >= 0.6


def test_no_pair_of_the_shipped_topics(train, frozen):
    topics = topic_pairs()
    assert len(topics) == 50
    assert not [r["id"] for r in train + frozen if pair_of(r) in topics]


def test_no_eight_words_in_a_row_from_a_sample_passage(train, frozen):
    sample = sample_sequences()
    assert len(sample) > 100_000  # the sample was read
    copied = [r["id"] for r in train + frozen if shingles(r["text"], SHARED_WORDS) & sample]
    assert not copied, f"passages sharing {SHARED_WORDS} words with a sample passage: {copied[:10]}"


def test_near_duplicates_are_capped(train, frozen):
    rows = train + frozen
    assert not near_duplicates([r["text"] for r in rows])


def test_the_guards_catch_a_copy_and_a_near_duplicate():
    import gzip

    with gzip.open(ROOT / "kueri" / "resources" / "sample" / "passages.jsonl.gz", "rt", encoding="utf-8") as handle:
        text = next(p["contents"] for line in handle if len((p := json.loads(line))["contents"].split()) > 60)
    words = text.split()
    assert shingles(" ".join(["Honestly,", *words[10:30], "and so on."]), SHARED_WORDS) & sample_sequences()
    assert near_duplicates([text, " ".join([*words[:-3], "thanks for reading"]), "an unrelated text " * 5])
