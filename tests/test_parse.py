import gzip
import json

import pytest

from kueri.errors import KueriError
from kueri.parse import PassageReader, TextCorpus, read_topics, split_doct5query
from kueri.parse.passages import parse_json_line
from tests.conftest import DATA, SAMPLE_CORPUS, SAMPLE_TOPICS


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def passage(pid="a___1", contents="some text", **extra):
    return json.dumps({"id": pid, "contents": contents, "chatNoirUrl": None, **extra})


def test_sample_reads_every_passage_in_file_order():
    reader = PassageReader(SAMPLE_CORPUS)
    passages = list(reader)
    assert len(passages) == 2607 and reader.stats.read == 2607 and not reader.stats.skipped
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as handle:
        ids = [json.loads(line)["id"] for line in handle]
    assert [p.id for p in passages] == ids
    assert all(p.doct5query == "" for p in passages)
    assert sum(p.chatnoir_url is None for p in passages) == 126


def test_expanded_corpus_splits_the_generated_query():
    expanded = {p.id: p for p in PassageReader(DATA / "expanded-sample.jsonl")}
    original = list(PassageReader(DATA / "original-sample.jsonl"))
    assert len(expanded) == 14 and len(original) == 20
    for p in expanded.values():
        assert p.doct5query and "<query>" not in p.contents and "</query>" not in p.doct5query
        assert p.contents == p.contents.strip() and p.doct5query == p.doct5query.strip()
    assert all(p.doct5query == "" for p in original)  # not expanded: empty, never a crash
    first = expanded["clueweb12-0000tw-00-14115___1"]
    assert first.doct5query == "do asian americans face bias in admissions"


@pytest.mark.parametrize(
    ("contents", "expected"),
    [
        ("text", ("text", "")),
        ("  text \n", ("text", "")),
        ("text.<query> a query</query>", ("text.", "a query")),
        ("text<query>", ("text", "")),  # the original crashed here
        ("text<query>one</query><query>two</query>", ("text", "one")),  # as Java's split: 2nd lost
        ("\u00a0text\u00a0", ("\u00a0text\u00a0", "")),  # Java's strip keeps no-break spaces
    ],
)
def test_split_doct5query(contents, expected):
    assert split_doct5query(contents) == expected


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "malformed JSON"),
        ('["a list"]', "not an object"),
        (json.dumps({"contents": "x"}), "missing id"),
        (json.dumps({"id": None, "contents": "x"}), "missing id"),
        (json.dumps({"id": "b___1", "contents": None}), "missing contents"),
        (json.dumps({"id": "b___1"}), "missing contents"),
        (passage("b___1", "   <query>q</query>"), "empty passage"),
        (passage("a___1", "again"), "duplicate id"),
    ],
)
def test_bad_line_names_file_and_line_or_is_counted(tmp_path, line, reason):
    path = write_lines(tmp_path / "c.jsonl", [passage(), "", line, passage("c___1")])
    with pytest.raises(KueriError, match=r"c\.jsonl:3: "):
        list(PassageReader(path))
    reader = PassageReader(path, skip_bad=True)
    assert [p.id for p in reader] == ["a___1", "c___1"]
    assert reader.stats.skipped == {reason: 1}
    assert "c.jsonl:3" in reader.problems[0]
    assert f"skipped 1 ({1} {reason})" in reader.stats.summary()


def test_invalid_utf8_is_an_error_with_its_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes(passage().encode() + b"\n" + b'{"id": "x", "contents": "caf\xe9"}\n')
    with pytest.raises(KueriError, match=r"c\.jsonl:2: not valid UTF-8"):
        list(PassageReader(path))


@pytest.mark.parametrize(
    "raw",
    [
        b'{"id": "a", "contents": "x", "id": "b"}',  # a repeated key: the last wins
        b'{"id": "a", "contents": "\\ud800 lone"}',  # an escaped lone surrogate: orjson refuses, json takes
        b'{"id": "a", "contents": "\xed\xa0\x80"}',  # an encoded one: json takes it too (surrogatepass)
        b'\xef\xbb\xbf{"id": "a", "contents": "BOM"}',
        b'{"id": "a", "contents": "x", "score": NaN, "n": 123456789012345678901234567890}',
        b'{"id": "a", "contents": "caf\xc3\xa9 \\u00e9 \\ud83d\\ude00 \\u0000"}\r\n',
    ],
)
def test_json_lines_parse_as_json_loads_does(raw):
    assert repr(parse_json_line(raw)) == repr(json.loads(raw))  # repr: NaN != NaN


@pytest.mark.parametrize("raw", [b"{not json", b'{"id": "a"} extra', b'{"a": "x\x01y"}', b"caf\xe9"])
def test_json_lines_fail_as_json_loads_does(raw):
    with pytest.raises(ValueError) as ours:
        parse_json_line(raw)
    with pytest.raises(ValueError) as theirs:
        json.loads(raw)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)


def test_utf8_is_decoded(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_bytes('{"id": "x", "contents": "café"}\n'.encode())
    assert next(iter(PassageReader(path))).contents == "café"


def test_folder_is_read_in_sorted_order_and_gz_too(tmp_path):
    write_lines(tmp_path / "b.jsonl", [passage("b___1")])
    with gzip.open(tmp_path / "a.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write(passage("a___1") + "\n")
    (tmp_path / "notes.txt").write_text("ignored")
    reader = PassageReader(tmp_path)
    assert [p.id for p in reader] == ["a___1", "b___1"]
    assert reader.stats.files == 2


def test_truncated_gzip_is_a_clear_error(tmp_path):
    data = gzip.compress(("\n".join(passage(f"p___{i}") for i in range(2000)) + "\n").encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(KueriError, match=r"cut\.jsonl\.gz: cannot read"):
        list(PassageReader(path))


def test_missing_corpus(tmp_path):
    with pytest.raises(KueriError, match="no such corpus"):
        PassageReader(tmp_path / "nothing.jsonl")
    with pytest.raises(KueriError, match="no .jsonl"):
        PassageReader(tmp_path)


def test_given_texts_are_read_as_a_corpus_file_of_them(tmp_path):
    """A TextCorpus (a re-rank input's candidates) gives the passages a corpus file of the same lines gives, so its
    index is that file's; its key is its texts, not a file."""
    texts = {"b": "  second passage <query> a generated query </query>", "a": "first\u00a0passage", "c": "x\ty"}
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": pid, "contents": text}) + "\n" for pid, text in texts.items()))
    given = TextCorpus(texts, "the candidates")
    assert list(given) == list(PassageReader(path))
    assert given.counts() == {"read": 3, "skipped": {}} and str(given) == "the candidates"
    assert given.fingerprint() == TextCorpus(dict(texts)).fingerprint() != TextCorpus({**texts, "c": "z"}).fingerprint()
    with pytest.raises(KueriError, match="the candidates: passage e: empty contents"):
        list(TextCorpus({"e": " <query> only a query</query>"}, "the candidates"))


def test_official_topics():
    topics = read_topics(SAMPLE_TOPICS)
    assert len(topics) == 50 and len({t.number for t in topics}) == 50
    first = topics[0]
    assert (first.number, first.title, first.objects) == (
        "2", "Which is better, a laptop or a desktop?", ("laptop", "desktop"))
    assert first.description.startswith("A user wants to buy a new PC")
    by_number = {t.number: t for t in topics}
    assert by_number["58"].objects == ("Family Guy", "The Simpsons")
    assert ("real Christmas tree", "fake Christmas tree") in [t.objects for t in topics]


TOPIC = "<topic><number>{n}</number><title>{t}</title><objects>{o}</objects></topic>"


@pytest.mark.parametrize(
    ("xml", "message"),
    [
        ("<topics><topic><number>1</number>", r"t\.xml:1: broken topics XML"),
        ("<topics>" + TOPIC.format(n=1, t="", o="a, b") + "</topics>", "without <title>"),
        ("<topics>" + TOPIC.format(n=1, t="A or B?", o="a, b, c") + "</topics>", "two items"),
        ("<topics>" + TOPIC.format(n=1, t="A or B?", o="a") + "</topics>", "two items"),
        ("<topics>" + TOPIC.format(n=1, t="x", o="a, b") * 2 + "</topics>", "duplicate topic"),
        ("<topics/>", "no <topic>"),
    ],
)
def test_bad_topics(tmp_path, xml, message):
    path = tmp_path / "t.xml"
    path.write_text(xml)
    with pytest.raises(KueriError, match=message):
        read_topics(path)


def test_topic_entities_and_quotes(tmp_path):
    path = tmp_path / "t.xml"
    path.write_text("<topics>" + TOPIC.format(n=7, t="Apple&apos;s &amp; \"Google's\"?",
                                              o="Apple's, Google's") + "</topics>")
    (topic,) = read_topics(path)
    assert topic.title == "Apple's & \"Google's\"?" and topic.objects == ("Apple's", "Google's")
