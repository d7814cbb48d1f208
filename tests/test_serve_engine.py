"""kueri serve without a server: input checks, the verdict, source links, and the command's one-line errors."""

from __future__ import annotations

import gzip
import json
import socket
import sys

import pytest

from kueri.config import get_config
from kueri.serve.engine import (
    MAX_QUESTION,
    BadQuestion,
    Passage,
    SourceLinks,
    Verdict,
    chatnoir_url,
    check_text,
    parse_objects,
    without_objects,
)
from tests.conftest import SAMPLE_CORPUS
from tests.conftest import run_command as run


@pytest.mark.parametrize(("text", "message"), [
    ("", "the question is empty"),
    ("  \n\t ", "the question is empty"),
    ("x" * (MAX_QUESTION + 1), f"is {MAX_QUESTION + 1} characters long; at most {MAX_QUESTION}"),
    ("laptop\x00desktop", "binary data or control characters"),
    ("caf\ufffd or tea", "binary data or control characters"),  # what undecodable bytes in a URL become
    ("\x1b[31mred", "binary data or control characters"),
])
def test_bad_questions_are_refused_with_a_reason(text, message):
    with pytest.raises(BadQuestion, match=message.replace("[", r"\[")):
        check_text(text, "question", MAX_QUESTION)


def test_a_good_question_keeps_its_words_and_loses_extra_spaces():
    assert check_text("  Which is  better,\ta laptop or a desktop? ", "question", MAX_QUESTION) == \
        "Which is better, a laptop or a desktop?"
    assert check_text("x" * MAX_QUESTION, "question", MAX_QUESTION) == "x" * MAX_QUESTION


@pytest.mark.parametrize(("text", "ok"), [("laptop, desktop", ("laptop", "desktop")), ("a,b,c", None), ("a", None),
                                          ("a, ", None), ("x" * 101 + ",b", None)])
def test_objects_are_two_names(text, ok):
    if ok:
        assert parse_objects(text) == ok
    else:
        with pytest.raises(BadQuestion):
            parse_objects(text)


def passage(rank: int, stance: str) -> Passage:
    return Passage(rank, f"p{rank}", stance, 1.0 / rank, 0.5, "text", None, ())


def test_the_verdict_counts_stances_and_weighs_them_by_rank():
    verdict = Verdict.of([passage(1, "FIRST"), passage(2, "SECOND"), passage(3, "SECOND"), passage(4, "NEUTRAL"),
                          passage(5, "NO")])
    assert verdict.counts == {"FIRST": 1, "SECOND": 2, "NEUTRAL": 1, "NO": 1}
    assert verdict.weights["FIRST"] == 1.0 and verdict.weights["SECOND"] == round(1 / 1.5849625 + 0.5, 4)
    assert verdict.first_share == round(1 / (1 + 1 / 1.5849625007 + 0.5), 4) and verdict.leaning == "balanced"
    assert Verdict.of([passage(1, "SECOND"), passage(2, "FIRST")]).leaning == "second"
    assert Verdict.of([passage(1, "NO")]).leaning == "none" and Verdict.of([]).first_share is None


def test_pieces_cut_the_text_at_the_object_mentions():
    text = "A laptop beats a desktop."
    p = Passage(1, "p", "FIRST", 1.0, 0.5, text, None, ((2, 8, "OBJ1"), (17, 24, "OBJ2")))
    assert p.pieces() == [("A ", None), ("laptop", "OBJ1"), (" beats a ", None), ("desktop", "OBJ2"), (".", None)]


def test_source_links_are_the_corpus_chatnoir_urls():
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as handle:
        passages = [json.loads(line) for line in handle]
    links = SourceLinks.of_corpus(SAMPLE_CORPUS)
    assert len(passages) == 2607 and all(links.url(p["id"]) == p["chatNoirUrl"] for p in passages)
    # the id gives every URL the sample has; only the passages without one are held
    assert len(links.exceptions) == sum(p["chatNoirUrl"] is None for p in passages) == 126
    assert set(links.exceptions.values()) == {None}
    assert chatnoir_url("my-own-doc___1") is None


def test_without_objects_drops_the_stages_that_read_them():
    config = without_objects(get_config("default"))
    assert [stage.name for stage in config.stages()] == ["search"]
    assert not any(stage.needs_objects for stage in without_objects(get_config("row-15")).stages())


def test_the_command_says_in_one_line_when_the_index_is_missing(tmp_path):
    result = run([sys.executable, "-m", "kueri", "serve", "--index", str(tmp_path / "nowhere"), "--port", "0"])
    assert result.returncode == 2
    assert result.stderr.strip() == f"kueri: error: {tmp_path / 'nowhere'}: index not found"


def test_the_command_says_in_one_line_when_the_port_is_in_use(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run([sys.executable, "-m", "kueri", "serve", "--corpus", str(SAMPLE_CORPUS), "--port", str(port),
                      "--workdir", str(tmp_path)])
    assert result.returncode == 2
    assert result.stderr.strip() == (f"kueri: error: port {port} on 127.0.0.1 is in use (another server?); pick "
                                     "another with --port")
    assert not list(tmp_path.iterdir())  # it stopped before any work


def test_the_command_refuses_a_configuration_that_needs_judgments(tmp_path):
    result = run([sys.executable, "-m", "kueri", "serve", "--corpus", str(SAMPLE_CORPUS), "--port", "0",
                  "--config", "row-16", "--workdir", str(tmp_path)])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "configuration row-16 uses relevance judgments" in result.stderr
