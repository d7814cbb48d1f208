"""scripts/make_corpus.py (kueri.devtools.corpus): a deterministic synthetic corpus in the official format, shaped
like the real one."""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics

import pytest

from kueri.devtools import corpus as mc
from kueri.parse import PassageReader
from kueri.parse.passages import split_doct5query

ID = re.compile(r"^clueweb12-\d{4}(wb|tw)-\d{2}-\d{5}___[1-9]\d*$")
WORD = re.compile(r"\w+")


def id_key(pid: str) -> tuple[str, int]:
    doc, number = pid.split("___")
    return doc, int(number)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """16,000 passages (two blocks), generated once for the module."""
    path = tmp_path_factory.mktemp("corpus") / "synthetic.jsonl.gz"
    mc.make_corpus(16_000, path, workers=2)
    return path


def test_same_bytes_for_the_same_arguments_whatever_the_workers(tmp_path, corpus):
    again = mc.make_corpus(16_000, tmp_path / "again.jsonl.gz", workers=1)
    assert again.read_bytes() == corpus.read_bytes()
    other = mc.make_corpus(2_000, tmp_path / "other.jsonl.gz", seed=1)
    first = mc.make_corpus(2_000, tmp_path / "first.jsonl.gz")
    assert other.read_bytes() != first.read_bytes()
    assert not list(tmp_path.glob("*.partial"))


def test_official_format_sorted_like_the_official_file(corpus):
    with gzip.open(corpus, "rt", encoding="utf-8") as handle:
        objects = [json.loads(line) for line in handle]
    assert len(objects) == 16_000
    assert all(set(o) == {"id", "contents", "chatNoirUrl"} for o in objects)
    ids = [o["id"] for o in objects]
    assert all(ID.match(pid) for pid in ids)
    assert ids == sorted(ids, key=id_key) and len(set(ids)) == len(ids)
    assert ids != sorted(ids)  # passage numbers sort as numbers (___9 before ___10), as in the real file
    nulls = sum(o["chatNoirUrl"] is None for o in objects) / len(objects)
    assert 0.02 < nulls < 0.08  # the sample: 4.8%
    assert all(o["chatNoirUrl"] is None or o["chatNoirUrl"].startswith("https://chatnoir.eu/cache?uuid=")
               for o in objects)
    reader = PassageReader(corpus)
    passages = list(reader)
    assert reader.stats.read == 16_000 and not reader.stats.skipped
    assert all(p.doct5query == "" for p in passages)


def test_length_distribution_is_the_real_one(corpus):
    lengths = sorted(len(p.contents.split()) for p in PassageReader(corpus))
    n = len(lengths)
    # the shipped sample: mean 156.0, 1% / 50% / 99%: 97 / 144 / 364 words
    assert 150 <= statistics.mean(lengths) <= 162
    assert 90 <= lengths[n // 100] <= 104
    assert 138 <= lengths[n // 2] <= 150
    assert 330 <= lengths[99 * n // 100] <= 400


def test_vocabulary_keeps_growing_by_heaps_law(corpus):
    source = mc.load_source()
    types: set[str] = set()
    tokens = 0
    growth = {}
    for i, passage in enumerate(PassageReader(corpus), start=1):
        words = WORD.findall(passage.contents.lower())
        tokens += len(words)
        types.update(words)
        if i in (4_000, 8_000, 16_000):
            growth[i] = (tokens, len(types))
    assert growth[16_000][1] > 2 * source.types  # far beyond the sample's own vocabulary
    for _, (n_tokens, n_types) in growth.items():
        expected = mc.HEAPS_K * n_tokens**mc.HEAPS_BETA
        assert 0.85 * expected <= n_types <= 1.1 * expected
    (t1, v1), (t2, v2) = growth[8_000], growth[16_000]
    beta = (math.log(v2) - math.log(v1)) / (math.log(t2) - math.log(t1))
    assert 0.5 <= beta <= 0.75  # the law's exponent, fitted on the sample: 0.591


def test_novel_forms_are_distinct_word_types():
    forms = [mc.novel_form(n) for n in range(20_000)]
    stems = {WORD.findall(form.lower())[0] for form in forms}
    assert len(stems) == len(forms)


def test_doct5query_expansion_and_command_line(tmp_path):
    out = tmp_path / "expanded.jsonl"
    assert mc.main(["--passages", "300", "--out", str(out), "--doct5query", "--workers", "1"]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 300
    for line in lines:
        contents = json.loads(line)["contents"]
        assert contents.endswith("</query>") and contents.count("<query> ") == 1
        text, query = split_doct5query(contents)
        assert text and query and "<query>" not in text
    assert all(p.doct5query for p in PassageReader(out))
