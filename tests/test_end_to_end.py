"""The TIRA entry point and the CLI, end to end, as a user runs them."""

import gzip
import json
import re
import shutil
import sys

import pytest

from kueri.records import STANCES
from tests.conftest import (
    DEFAULT_RUN,
    FEW_TOPICS,
    NO_FMA_TOP5_OVERLAP,
    QRELS,
    ROOT,
    SAMPLE,
    SAMPLE_CORPUS,
    SAMPLE_TOPICS,
    check_default_ndcg5,
    kernels_as_the_reference,
    lines_of_topics,
    write_topics,
)
from tests.conftest import run_command as run


def check_touche_run(path, topic_numbers):
    """The Touché rules: 6 fields, known stance, ranks 1..n, <= 1000 hits, scores non-increasing."""
    per_topic: dict[str, list[tuple[int, float, str]]] = {}
    for line in path.read_text().splitlines():
        fields = line.split(" ")
        assert len(fields) == 6, line
        qid, stance, doc, rank, score, _tag = fields
        assert stance in STANCES or stance == "Q0"
        assert qid in topic_numbers
        per_topic.setdefault(qid, []).append((int(rank), float(score), doc))
    for hits in per_topic.values():
        assert [r for r, _, _ in hits] == list(range(1, len(hits) + 1))
        assert len(hits) <= 1000 and len({d for _, _, d in hits}) == len(hits)
        scores = [s for _, s, _ in hits]
        assert scores == sorted(scores, reverse=True)
    return per_topic


@pytest.mark.slow
def test_my_software_on_the_sample_writes_a_valid_run_for_50_topics(default_tira_run, topics):
    out, stderr = default_tira_run.out, default_tira_run.stderr
    per_topic = check_touche_run(out / "run.txt", {t.number for t in topics})
    assert len(per_topic) == 50
    assert "indexed 2607" in stderr and "read 2607 passages" in stderr
    # one line says the effective configuration before the work starts
    assert "kueri: configuration default" in stderr and "stoplist kueristopv2, porter stemmer" in stderr
    # the default (row 15 + the learned second stage), pinned like the Table 1 rows
    scores = run([sys.executable, "-m", "kueri", "evaluate", str(out / "run.txt"), "--qrels", str(QRELS), "--json"])
    assert scores.returncode == 0, scores.stderr
    result_json = json.loads(scores.stdout.splitlines()[0])
    assert result_json["topics"] == 50
    check_default_ndcg5(result_json["nDCG@5"])


@pytest.mark.slow
def test_the_default_run_is_the_shipped_reference_run(default_tira_run):
    """Byte for byte on a CPU with AVX2 and FMA (docs/reproducibility.md); elsewhere the same passages lead."""
    ours = (default_tira_run.out / "run.txt").read_text()
    with gzip.open(DEFAULT_RUN, "rt", encoding="utf-8") as handle:
        reference = handle.read()
    if kernels_as_the_reference():
        assert ours == reference
    else:
        def top5(text: str) -> dict[str, set[str]]:
            heads: dict[str, set[str]] = {}
            for line in text.splitlines():
                qid, _, doc, rank, _, _ = line.split(" ")
                if int(rank) <= 5:
                    heads.setdefault(qid, set()).add(doc)
            return heads

        mine, theirs = top5(ours), top5(reference)
        overlap = sum(len(mine[q] & theirs[q]) for q in theirs) / sum(len(theirs[q]) for q in theirs)
        assert overlap >= NO_FMA_TOP5_OVERLAP, overlap


@pytest.mark.slow
def test_a_second_run_reuses_the_work_folder_and_gives_the_same_run(tmp_path, default_tira_run):
    """The same passages, a few of the topics: the index is reused and those topics' lines are the first run's."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "passages.jsonl.gz").symlink_to(SAMPLE_CORPUS)
    write_topics(FEW_TOPICS, folder / "topics.xml")
    again = run([str(ROOT / "my-software.sh"), "-i", str(folder), "-o", str(tmp_path / "again"), "-w",
                 str(default_tira_run.workdir)])
    assert again.returncode == 0 and "reusing index" in again.stderr
    assert (tmp_path / "again" / "run.txt").read_text() == \
        lines_of_topics((default_tira_run.out / "run.txt").read_text(), FEW_TOPICS)


def corrupt_input(tmp_path, bad_line_number=1500):
    """The real sample with one line broken, as a TIRA input folder."""
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(SAMPLE_TOPICS, folder / "topics.xml")
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as handle:
        lines = handle.readlines()
    lines[bad_line_number - 1] = lines[bad_line_number - 1][:40] + "\n"
    with gzip.open(folder / "passages.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.writelines(lines)
    return folder


def test_corrupt_passages_fail_naming_file_and_line_and_write_no_run(tmp_path):
    folder = corrupt_input(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "run.txt").write_text("an older run\n")  # must not survive as if it were this run's
    result = run([str(ROOT / "my-software.sh"), "-i", str(folder), "-o", str(out), "-w", str(tmp_path / "w")])
    assert result.returncode == 1
    assert "passages.jsonl.gz:1500: malformed JSON" in result.stderr and "Traceback" not in result.stderr
    assert not (out / "run.txt").exists()
    # and no index that looks complete was left behind
    assert not list((tmp_path / "w").glob("index-*/kueri-index.json"))


@pytest.mark.slow
def test_skip_bad_counts_and_reports(tmp_path, workdir):
    folder = corrupt_input(tmp_path)
    # Every passage is read and indexed; a few topics are enough to show that the run goes on after the bad line.
    write_topics(FEW_TOPICS, folder / "topics.xml")
    # The shared work folder: the other passages' embeddings (keyed by their text) are reused, the index is new.
    result = run([sys.executable, "-m", "kueri", "tira", "-i", str(folder), "-o", str(tmp_path / "out"),
                  "--workdir", str(workdir), "--skip-bad"])
    assert result.returncode == 0, result.stderr
    assert "read 2606 passages from 1 file(s); skipped 1 (1 malformed JSON)" in result.stderr
    assert "indexed 2606" in result.stderr
    assert len(check_touche_run(tmp_path / "out" / "run.txt", set(FEW_TOPICS))) == len(FEW_TOPICS)


@pytest.mark.parametrize(
    ("files", "message"),
    [(["passages.jsonl.gz"], "found passages.jsonl.gz; expected topics.xml + passages.jsonl.gz (the task's)"),
     (["topics.xml"], "found topics.xml; expected topics.xml + passages.jsonl.gz (the task's)")],
)
def test_missing_input_files(tmp_path, files, message):
    folder = tmp_path / "in"
    folder.mkdir()
    for name in files:
        shutil.copy(SAMPLE / name, folder / name)
    result = run([str(ROOT / "my-software.sh"), "-i", str(folder), "-o", str(tmp_path / "out")])
    assert result.returncode == 1 and message in result.stderr
    assert not (tmp_path / "out" / "run.txt").exists()


def test_usage_error():
    result = run([str(ROOT / "my-software.sh"), "-i", "somewhere"])
    assert result.returncode == 2 and "usage" in result.stderr


@pytest.mark.slow
def test_cli_index_search_evaluate(tmp_path, topics):
    index = tmp_path / "idx"
    result = run([sys.executable, "-m", "kueri", "index", "--corpus", str(SAMPLE_CORPUS), "--index", str(index),
                  "--stoplist", "kueristopv2", "--quiet"])
    assert result.returncode == 0, result.stderr
    out = tmp_path / "run.txt"
    result = run([sys.executable, "-m", "kueri", "search", "--index", str(index), "--topics", str(SAMPLE_TOPICS),
                  "--output", str(out), "--bm25", "--k1", "1.2", "--b", "0.75", "--fields", "contents=1",
                  "docT5Query=1", "--filter-objects", "--hits", "100", "--tag", "mine"])
    assert result.returncode == 0, result.stderr
    per_topic = check_touche_run(out, {t.number for t in topics})
    assert len(per_topic) == 47 and all(len(h) <= 100 for h in per_topic.values())
    assert out.read_text().split("\n")[0].endswith(" mine")
    result = run([sys.executable, "-m", "kueri", "evaluate", str(out), "--qrels", str(QRELS), "--json"])
    assert result.returncode == 0 and '"topics": 47' in result.stdout


def test_unknown_config_and_stoplist_are_clear_errors(tmp_path):
    result = run([sys.executable, "-m", "kueri", "run", "--config", "row-99", "--corpus", str(SAMPLE_CORPUS),
                  "--topics", str(SAMPLE_TOPICS), "--output", str(tmp_path / "r.txt")])
    assert result.returncode == 1 and "unknown configuration 'row-99'" in result.stderr
    result = run([sys.executable, "-m", "kueri", "index", "--corpus", str(SAMPLE_CORPUS), "--index",
                  str(tmp_path / "i"), "--stoplist", "nope"])
    assert result.returncode == 1 and "unknown stoplist 'nope'" in result.stderr and "kueristopv2" in result.stderr


def test_evaluate_restricted_to_the_corpus_gives_the_subset_reference_values():
    runs = sorted(str(p) for p in (ROOT / "tests" / "data" / "runs").glob("*.txt.gz"))
    result = run([sys.executable, "-m", "kueri", "evaluate", *runs, "--qrels", str(QRELS), "--corpus",
                  str(SAMPLE_CORPUS), "--measures", "nDCG@5", "--json"])
    assert result.returncode == 0, result.stderr

    values = {r["run"]: (r["topics"], round(r["nDCG@5"], 4)) for r in map(json.loads, result.stdout.splitlines())}
    assert values == {
        "Aldo-Nadi-run5": (50, 0.6664), "Grimjack-run4": (49, 0.3885), "Katana-run3": (49, 0.5857),
        "Olivier-Armstrong-run1": (50, 0.5278), "Puss-in-Boots-run1": (50, 0.4819),
    }


@pytest.mark.slow
def test_default_run_carries_real_stance_labels(default_tira_run):
    stances = [line.split(" ")[1] for line in (default_tira_run.out / "run.txt").read_text().splitlines()]
    assert "Q0" not in stances and {"FIRST", "SECOND", "NO"} <= set(stances)


@pytest.mark.slow
def test_the_default_embeds_only_what_its_cascade_reorders(default_tira_run):
    """MiniLM embeds the lexical model's top 40 of each topic (and row 15's top 5, its feedback), e5 MiniLM's top 15:
    the run's top 40 and top 15, as the deeper models rank above."""
    counts = {name: int(count) for name, count in
              re.findall(r"(minilm|e5) [0-9.]+ s for ([0-9]+) passages", default_tira_run.stderr)}
    heads: dict[int, set[str]] = {15: set(), 40: set()}
    for line in (default_tira_run.out / "run.txt").read_text().splitlines():
        _, _, doc, rank, _, _ = line.split(" ")
        for depth, docs in heads.items():
            if int(rank) <= depth:
                docs.add(doc)
    assert counts["e5"] == len(heads[15])
    assert len(heads[40]) <= counts["minilm"] <= len(heads[40]) + 5 * 50
    assert counts["minilm"] < 2000  # of the 2,600 passages the whole model embeds with each encoder
