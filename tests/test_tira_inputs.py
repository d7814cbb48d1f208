"""TIRA's standard IR inputs: the task's files, TIRA's full-rank input and its re-rank input, told apart by the folder.

The fixtures in tests/data were written by ``scripts/tira_inputs.py`` from the shipped sample (topics 2, 3 and 8, row
15's top 10 of each), with the files and field names of TIRA's ``IrDatasetsLoader`` (``load_dataset_for_fullrank``:
documents.jsonl, queries.jsonl, metadata.json; ``load_dataset_for_rerank``: rerank.jsonl.gz).
"""

from __future__ import annotations

import gzip
import json
import logging
import shutil
import sys
from pathlib import Path

import pytest

from kueri.errors import KueriError
from kueri.parse import PassageReader, read_topics
from kueri.parse.tira import FULL_RANK, RE_RANK, TASK, detect_input, read_queries, read_rerank
from kueri.runfile import read_run
from tests.conftest import (
    DATA,
    FEW_TOPICS,
    NO_FMA_NDCG5_TOLERANCE,
    QRELS,
    ROOT,
    SAMPLE,
    SAMPLE_CORPUS,
    SAMPLE_TOPICS,
    kernels_as_the_reference,
    lines_of_topics,
    run_command,
)
from tests.test_end_to_end import check_touche_run

FULL = DATA / "tira-full-rank"
RERANK = DATA / "tira-re-rank"
FIXTURE_TOPICS = ["2", "3", "8"]
KUERI = [sys.executable, "-m", "kueri"]
#: nDCG@5 (official 2022 qrels) of row 15 re-ranked by the default's later stages from rerank.jsonl.gz alone, on
#: the sample (the candidates' own BM25 statistics; an AMD EPYC with AVX2 and FMA, as the reference's kernels).
RERANKED_ALONE_NDCG5 = 0.6248


def rerank_lines() -> list[dict]:
    with gzip.open(RERANK / "rerank.jsonl.gz", "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def write_rerank(folder: Path, records: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / "rerank.jsonl.gz", "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(r) + "\n" for r in records)
    return folder


# -- which input ----------------------------------------------------------------------------------------------------


def test_each_kind_is_told_by_its_files():
    assert detect_input(SAMPLE).kind == TASK
    full = detect_input(FULL)
    assert full.kind == FULL_RANK and full.topics == FULL / "queries.jsonl" and full.corpus == FULL / "documents.jsonl"
    rerank = detect_input(RERANK)
    assert rerank.kind == RE_RANK and rerank.rerank == RERANK / "rerank.jsonl.gz"


def test_the_rerank_file_itself_is_tiras_re_rank_input():
    found = detect_input(RERANK / "rerank.jsonl.gz")
    assert found.kind == RE_RANK and found.rerank == RERANK / "rerank.jsonl.gz"


def test_an_input_of_no_kind_says_what_it_found_and_what_it_expects(tmp_path):
    shutil.copy(FULL / "queries.jsonl", tmp_path / "queries.jsonl")  # a queries file with no documents
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(KueriError) as error:
        detect_input(tmp_path)
    message = str(error.value)
    assert "\n" not in message
    assert f"{tmp_path}: found notes.txt, queries.jsonl; expected topics.xml + passages.jsonl.gz" in message
    assert "queries.jsonl + documents.jsonl[.gz] (TIRA's full-rank input)" in message
    assert "rerank.jsonl[.gz] (TIRA's re-rank input)" in message


# -- full-rank ------------------------------------------------------------------------------------------------------


def test_full_rank_queries_are_the_tasks_topics_with_their_objects():
    task = {t.number: t for t in read_topics(SAMPLE_TOPICS)}
    topics = read_queries(FULL / "queries.jsonl")
    assert [t.number for t in topics] == FIXTURE_TOPICS
    assert topics == [task[number] for number in FIXTURE_TOPICS]


def test_full_rank_documents_are_the_samples_passages():
    documents = list(PassageReader(FULL / "documents.jsonl"))
    wanted = {p.id for p in documents}
    assert len(wanted) == 30
    assert documents == [p for p in PassageReader(SAMPLE_CORPUS) if p.id in wanted]
    assert all(p.chatnoir_url and p.chatnoir_url.startswith("http") for p in documents)


def test_objects_come_from_the_query_fields_else_from_the_question(tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(json.dumps(r) for r in [
        {"qid": 1, "query": "Which is better, a laptop or a desktop?"},  # no fields: the question's
        {"qid": "7", "query": "Is it good?", "original_query": {"query_id": "7", "text": "Is it good?"}},
        {"qid": "9", "query": "cats or dogs", "objects": "cat, dog"},
        {"qid": "10", "query": "   ", "original_query": {}},
    ]) + "\n")
    topics = read_queries(queries)
    assert [(t.number, t.objects) for t in topics] == [("1", ("laptop", "desktop")), ("7", ("", "")),
                                                       ("9", ("cat", "dog"))]


def test_an_empty_query_is_skipped_saying_so(tmp_path, caplog):
    queries = tmp_path / "queries.jsonl"
    records = [{"qid": "4", "query": ""}, {"qid": "5", "query": "a or b"}]
    queries.write_text("".join(json.dumps(r) + "\n" for r in records))
    with caplog.at_level(logging.WARNING, logger="kueri"):
        assert [t.number for t in read_queries(queries)] == ["5"]
    assert f"{queries}: skipped 1 topic(s) with an empty query: 4" in caplog.text
    queries.write_text(json.dumps({"qid": "4", "query": ""}) + "\n")
    with pytest.raises(KueriError, match="no queries with a text"):
        read_queries(queries)


def test_a_repeated_query_is_an_error(tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"qid": "4", "query": "a or b"}) + "\n" + json.dumps({"qid": 4, "query": "c"}) + "\n")
    with pytest.raises(KueriError, match=r"queries.jsonl:2: query 4 listed twice"):
        read_queries(queries)


# -- re-rank --------------------------------------------------------------------------------------------------------


def test_the_rerank_file_gives_topics_candidates_in_rank_order_and_texts():
    given = read_rerank(RERANK / "rerank.jsonl.gz")
    task = {t.number: t for t in read_topics(SAMPLE_TOPICS)}
    assert given.topics == [task[number] for number in FIXTURE_TOPICS]
    lines = rerank_lines()
    assert [hit.doc for hit in given.run["2"]] == [r["docno"] for r in lines if r["qid"] == "2"]
    assert [r["rank"] for r in lines if r["qid"] == "2"] == list(range(1, 11))
    texts = {p.id: p.contents for p in PassageReader(SAMPLE_CORPUS)}
    assert all(texts[pid] == text for pid, text in given.texts.items())


def test_rerank_candidates_are_ordered_by_rank_not_by_line(tmp_path):
    lines = rerank_lines()[:3]
    write_rerank(tmp_path, list(reversed(lines)))
    assert [h.doc for h in read_rerank(tmp_path / "rerank.jsonl.gz").run["2"]] == [r["docno"] for r in lines]


@pytest.mark.parametrize("change, message", [
    (lambda r: r.pop("text"), "rerank.jsonl.gz:2: passage {doc} of topic 2 has no text"),
    (lambda r: r.update(text="  "), "rerank.jsonl.gz:2: passage {doc} of topic 2 has no text"),
    (lambda r: r.update(docno=None), "rerank.jsonl.gz:2: missing or bad 'docno' None"),
    (lambda r: r.pop("score"), "rerank.jsonl.gz:2: missing or non-numeric 'score' None"),
    (lambda r: r.update(qid="two words"), "rerank.jsonl.gz:2: missing or bad 'qid' 'two words'"),
])
def test_a_broken_rerank_line_is_one_error_naming_it(tmp_path, change, message):
    lines = rerank_lines()[:3]
    doc = lines[1]["docno"]
    change(lines[1])
    write_rerank(tmp_path, lines)
    with pytest.raises(KueriError) as error:
        read_rerank(tmp_path / "rerank.jsonl.gz")
    assert message.format(doc=doc) in str(error.value) and "\n" not in str(error.value)


def test_a_candidate_listed_twice_for_a_topic_is_an_error(tmp_path):
    lines = rerank_lines()[:3]
    write_rerank(tmp_path, [*lines, {**lines[0], "rank": 4}])
    with pytest.raises(KueriError, match=rf"rerank.jsonl.gz:4: passage {lines[0]['docno']} listed twice for topic 2"):
        read_rerank(tmp_path / "rerank.jsonl.gz")


def test_a_rerank_topic_with_an_empty_query_is_skipped_saying_so(tmp_path, caplog):
    lines = [({**r, "query": ""} if r["qid"] == "3" else r) for r in rerank_lines()]
    write_rerank(tmp_path, lines)
    with caplog.at_level(logging.WARNING, logger="kueri"):
        given = read_rerank(tmp_path / "rerank.jsonl.gz")
    assert list(given.run) == ["2", "8"] and given.skipped == ["3"]
    assert "skipped 1 topic(s) with an empty query: 3" in caplog.text


def test_kueri_rerank_refuses_candidates_the_corpus_lacks_and_writes_nothing(tmp_path):
    lines = rerank_lines()
    lines[4]["docno"] = "clueweb12-0000xx-00-00000___1"
    write_rerank(tmp_path / "in", lines)
    out = tmp_path / "run.txt"
    result = run_command([*KUERI, "rerank", str(tmp_path / "in"), "--corpus", str(FULL / "documents.jsonl"),
                          "--config", "row-15", "--workdir", str(tmp_path / "work"), "--output", str(out)])
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (f"kueri: error: {FULL / 'documents.jsonl'}: 1 passage(s) of the "
                                                      "run are not in this corpus, e.g. clueweb12-0000xx-00-00000___1")
    assert not out.exists()


@pytest.mark.parametrize("entry", ["my-software.sh", "kueri tira"])
def test_a_bad_input_fails_in_one_line_and_leaves_no_run(entry, tmp_path):
    lines = rerank_lines()
    lines[7].pop("text")
    folder = write_rerank(tmp_path / "in", lines)
    out = tmp_path / "out"
    out.mkdir()
    (out / "run.txt").write_text("an older run\n")
    command = [str(ROOT / "my-software.sh")] if entry == "my-software.sh" else [*KUERI, "tira"]
    result = run_command([*command, "-i", str(folder), "-o", str(out)], env={"KUERI_WORKDIR": str(tmp_path / "work")})
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (f"kueri: error: {folder / 'rerank.jsonl.gz'}:8: passage "
                                                      f"{lines[7]['docno']} of topic 2 has no text")
    assert not (out / "run.txt").exists()


def test_a_full_rank_input_without_documents_fails_in_one_line(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(FULL / "queries.jsonl", folder / "queries.jsonl")
    result = run_command([*KUERI, "tira", "-i", str(folder), "-o", str(tmp_path / "out")])
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip() == (f"kueri: error: {folder}: found queries.jsonl; expected topics.xml + "
                                      "passages.jsonl.gz (the task's), queries.jsonl + documents.jsonl[.gz] (TIRA's "
                                      "full-rank input) or rerank.jsonl[.gz] (TIRA's re-rank input)")


# -- end to end (slow: the sample's index and embeddings in the session's work folder) ---------------------------


@pytest.mark.parametrize("fixture", [FULL, RERANK], ids=["full-rank", "re-rank"])
def test_my_software_runs_each_tira_input(fixture, workdir, tmp_path):
    out = tmp_path / "out"
    result = run_command([str(ROOT / "my-software.sh"), "-i", str(fixture), "-o", str(out), "-w", str(workdir)])
    assert result.returncode == 0, result.stderr
    per_topic = check_touche_run(out / "run.txt", set(FIXTURE_TOPICS))
    assert sorted(per_topic) == FIXTURE_TOPICS and all(len(hits) == 10 for hits in per_topic.values())
    kind = "full-rank input" if fixture == FULL else "re-rank input"
    assert f"kueri: TIRA's {kind}" in result.stderr


def test_the_sample_as_tiras_full_rank_input_gives_the_default_run(default_tira_run, tmp_path):
    folder = tmp_path / "full-rank"
    made = run_command([sys.executable, str(ROOT / "scripts" / "tira_inputs.py"), "full-rank", "--topics",
                        str(SAMPLE_TOPICS), "--corpus", str(SAMPLE_CORPUS), "--output", str(folder)])
    assert made.returncode == 0, made.stderr
    # Read back, the input is the sample: every topic with its objects, every passage...
    assert read_queries(folder / "queries.jsonl") == read_topics(SAMPLE_TOPICS)
    assert list(PassageReader(folder / "documents.jsonl")) == list(PassageReader(SAMPLE_CORPUS))
    # ...so a few of its queries are enough to show the run made from it is the default run (topic by topic).
    queries = (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (folder / "queries.jsonl").write_text("".join(q for q in queries if json.loads(q)["qid"] in FEW_TOPICS),
                                          encoding="utf-8")
    out = tmp_path / "out"
    result = run_command([str(ROOT / "my-software.sh"), "-i", str(folder), "-o", str(out), "-w",
                          str(default_tira_run.workdir)])
    assert result.returncode == 0, result.stderr
    assert (out / "run.txt").read_text() == lines_of_topics((default_tira_run.out / "run.txt").read_text(), FEW_TOPICS)


@pytest.fixture(scope="module")
def row15_rerank_input(row15_cli_run, tmp_path_factory) -> Path:
    """The sample's row-15 run as TIRA's re-rank input (its top 1000 a topic, with their texts)."""
    folder = tmp_path_factory.mktemp("row15")
    made = run_command([sys.executable, str(ROOT / "scripts" / "tira_inputs.py"), "re-rank", "--topics",
                        str(SAMPLE_TOPICS), "--corpus", str(SAMPLE_CORPUS), "--run", str(row15_cli_run), "--output",
                        str(folder / "input")])
    assert made.returncode == 0, made.stderr
    return folder / "input"


def test_reranking_row_15_with_the_samples_index_gives_the_default_run(row15_rerank_input, default_tira_run, tmp_path):
    """On a few topics' candidates: with the sample's index their reranking is topic by topic (the test below
    reranks all of them)."""
    given = tmp_path / "rerank.jsonl.gz"
    with gzip.open(row15_rerank_input / "rerank.jsonl.gz", "rt", encoding="utf-8") as source, \
            gzip.open(given, "wt", encoding="utf-8") as target:
        target.writelines(line for line in source if json.loads(line)["qid"] in FEW_TOPICS)
    out = tmp_path / "run.txt"
    result = run_command([*KUERI, "rerank", str(given), "--corpus", str(SAMPLE_CORPUS), "--workdir",
                          str(default_tira_run.workdir), "--output", str(out)])
    assert result.returncode == 0, result.stderr
    assert out.read_text() == lines_of_topics((default_tira_run.out / "run.txt").read_text(), FEW_TOPICS)


def test_reranking_row_15_without_an_index_gives_a_valid_run(row15_rerank_input, default_tira_run, tmp_path):
    """Only the candidates: their own BM25 statistics. Its nDCG@5 on the sample is in docs/tira.md (TIRA's three
    inputs)."""
    out = tmp_path / "out"
    result = run_command([str(ROOT / "my-software.sh"), "-i", str(row15_rerank_input), "-o", str(out), "-w",
                          str(default_tira_run.workdir)])
    assert result.returncode == 0, result.stderr
    per_topic = check_touche_run(out / "run.txt", {t.number for t in read_topics(SAMPLE_TOPICS)})
    assert len(per_topic) == 50
    reranked, default = read_run(out / "run.txt"), read_run(default_tira_run.out / "run.txt")
    assert {qid: {h.doc for h in hits} for qid, hits in reranked.items()} == \
        {qid: {h.doc for h in hits} for qid, hits in default.items()}  # exactly the candidates, reordered
    scores = run_command([*KUERI, "evaluate", str(out / "run.txt"), "--qrels", str(QRELS), "--json"])
    ndcg5 = json.loads(scores.stdout)["nDCG@5"]
    if kernels_as_the_reference():
        assert round(ndcg5, 4) == RERANKED_ALONE_NDCG5
    else:
        assert abs(ndcg5 - RERANKED_ALONE_NDCG5) <= NO_FMA_NDCG5_TOLERANCE, ndcg5


@pytest.mark.slow
def test_the_rerank_transformer_on_tiras_own_reader_is_kueri_rerank(tmp_path):
    """TIRA's ``load_rerank_data`` reads the fixture into PyTerrier's frame; kueri.pyterrier.Rerank on it writes the
    run that ``kueri rerank`` writes from the file (a configuration without encoders keeps it short)."""
    tira = pytest.importorskip("tira.third_party_integrations", reason="TIRA's client (the test extra) is missing")
    kp = pytest.importorskip("kueri.pyterrier", reason="the pyterrier extra is not installed")
    work = tmp_path / "work"
    by_cli = tmp_path / "cli.txt"
    result = run_command([*KUERI, "rerank", str(RERANK / "rerank.jsonl.gz"), "--config", "auto-lexical", "--workdir",
                          str(work), "--output", str(by_cli)])
    assert result.returncode == 0, result.stderr
    frame = tira.load_rerank_data(str(RERANK))
    assert {"qid", "query", "docno", "text", "rank", "score"} <= set(frame.columns) and "original_query" not in frame
    results = kp.Rerank("auto-lexical", workdir=work)(frame)
    kp.write_run(results, tmp_path / "transformer.txt", "kueri_auto_lexical")
    assert (tmp_path / "transformer.txt").read_bytes() == by_cli.read_bytes()


@pytest.mark.slow
def test_kueri_rerank_of_a_run_file_with_corpus_and_topics_is_that_of_its_rerank_file(tmp_path):
    """The same candidates from a run file (texts from --corpus, topics from --topics) or from rerank.jsonl.gz."""
    run_file = tmp_path / "candidates.txt"
    run_file.write_text("".join(f"{r['qid']} Q0 {r['docno']} {r['rank']} {r['score']:.6f} first\n"
                                for r in rerank_lines()))
    outputs = []
    for source in ([str(run_file), "--topics", str(SAMPLE_TOPICS)], [str(RERANK / "rerank.jsonl.gz")]):
        outputs.append(tmp_path / f"out-{len(outputs)}.txt")
        result = run_command([*KUERI, "rerank", *source, "--config", "auto-lexical", "--corpus",
                              str(FULL / "documents.jsonl"), "--workdir", str(tmp_path / "work"), "--output",
                              str(outputs[-1])])
        assert result.returncode == 0, result.stderr
    assert outputs[0].read_bytes() == outputs[1].read_bytes()
    assert sorted(read_run(outputs[0])) == FIXTURE_TOPICS


@pytest.mark.slow
def test_a_run_file_times_quality_alone_is_kueri_rerank_with_row_20(row15_cli_run, workdir, tmp_path):
    """What ``kueri rerank RUN`` without --config did (scores times Debater quality) is --config row-20: row 15's
    run (``kueri run --config row-15``) reranked so is row 20's, byte for byte."""
    sample = ["--corpus", str(SAMPLE_CORPUS), "--topics", str(SAMPLE_TOPICS), "--workdir", str(workdir)]
    result = run_command([*KUERI, "-q", "run", "--config", "row-20", *sample, "--output", str(tmp_path / "row-20")])
    assert result.returncode == 0, result.stderr
    result = run_command([*KUERI, "-q", "rerank", str(row15_cli_run), "--config", "row-20", *sample,
                          "--output", str(tmp_path / "reranked")])
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "reranked").read_bytes() == (tmp_path / "row-20").read_bytes()


def test_kueri_rerank_of_a_run_file_without_its_corpus_says_so_and_where_the_quality_rerank_went(tmp_path):
    run_file = tmp_path / "candidates.txt"
    run_file.write_text("2 Q0 a 1 1.000000 first\n")
    result = run_command([*KUERI, "rerank", str(run_file), "--quality", "debater", "--output", str(tmp_path / "out")])
    assert result.returncode == 1 and not (tmp_path / "out").exists()
    assert result.stderr.strip().splitlines()[-1] == (
        f"kueri: error: {run_file}: a run file has no passage texts: give --corpus (or rerank a TIRA rerank.jsonl.gz, "
        "which has them); kueri rerank runs the later stages of --config over its candidates (its scores times "
        "argument quality alone: --config row-20)")
