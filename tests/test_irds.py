"""ir_datasets ids: ``kueri run --dataset`` and ``kueri evaluate --dataset`` read through the ir_datasets package.

ir_datasets' data for clueweb12/touche-2022-task-2 is not shipped and is not downloaded here: the tests give
ir_datasets a home of its own (IR_DATASETS_HOME) with the files it expects for that id, made from the shipped
sample (topics, passages, the official relevance qrels), so that ir_datasets itself reads them. The 2022 quality
and stance judgments are not shipped with kueri: their files here are made up from the relevance grades (quality =
relevance; stance FIRST / NEUTRAL / NO for grades 2 / 1 / 0), to test that they are read, not what they say.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATA, QRELS, ROOT, SAMPLE_CORPUS, SAMPLE_TOPICS, run_command

ir_datasets = pytest.importorskip("ir_datasets", reason="the ir_datasets extra is not installed")

DATASET = "clueweb12/touche-2022-task-2"
KUERI = [sys.executable, "-m", "kueri"]
STANCE_OF_GRADE = {"2": "FIRST", "1": "NEUTRAL", "0": "NO"}


def make_home(home: Path) -> Path:
    """An ir_datasets home holding clueweb12/touche-2022-task-2's files, from the sample (see the module's text)."""
    task = home / "touche" / "2022" / "task-2"
    task.mkdir(parents=True)
    shutil.copy(SAMPLE_TOPICS, task / "queries.xml")
    with gzip.open(SAMPLE_CORPUS, "rb") as source, open(task / "passages.jsonl", "wb") as target:
        shutil.copyfileobj(source, target)
    lines = [line.split() for line in QRELS.read_text().splitlines() if line.strip()]
    shutil.copy(QRELS, task / "qrels-relevance.qrels")
    (task / "qrels-quality.qrels").write_text("".join(" ".join(f) + "\n" for f in lines))
    (task / "qrels-stance.qrels").write_text("".join(f"{q} {i} {d} {STANCE_OF_GRADE[g]}\n" for q, i, d, g in lines))
    return home


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return make_home(tmp_path_factory.mktemp("ir_datasets-home"))


@pytest.fixture
def in_home(home) -> Path:
    return home


def in_python(home: Path, code: str) -> object:
    """What ``code`` prints (JSON), run in a new interpreter whose ir_datasets has ``home`` (ir_datasets reads
    IR_DATASETS_HOME once, when it is imported)."""
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "IR_DATASETS_HOME": str(home)}, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])  # the last line: PyTerrier may print a note first


def test_topics_qrels_and_documents_come_through_ir_datasets(in_home, tmp_path):
    from kueri.parse import read_topics
    from kueri.runfile import read_qrels

    code = f"""import json; from pathlib import Path; from kueri.irds import load_dataset
dataset = load_dataset({DATASET!r})
corpus = dataset.corpus(Path({str(tmp_path)!r}))
print(json.dumps([[list(t) for t in dataset.topics()], dataset.judgments(), str(corpus)]))"""
    topics, (relevance, quality, stance), corpus = in_python(in_home, code)
    assert topics == [[*t[:2], list(t.objects), *t[3:]] for t in read_topics(SAMPLE_TOPICS)]  # objects included
    assert relevance == read_qrels(QRELS) == quality
    assert stance == {qid: {doc: STANCE_OF_GRADE[str(grade)] for doc, grade in docs.items()}
                      for qid, docs in relevance.items()}
    assert corpus == str(in_home / "touche" / "2022" / "task-2" / "passages.jsonl")  # ir_datasets' own file


def test_kueri_evaluate_with_the_datasets_qrels(in_home):
    run = str(DATA / "default-run.txt.gz")
    by_file = json.loads(run_command([*KUERI, "evaluate", run, "--qrels", str(QRELS), "--json"],
                                     env={"IR_DATASETS_HOME": str(in_home)}).stdout)
    result = run_command([*KUERI, "evaluate", run, "--dataset", DATASET, "--json"],
                         env={"IR_DATASETS_HOME": str(in_home)})
    assert result.returncode == 0, result.stderr
    by_dataset = json.loads(result.stdout)
    assert by_dataset["nDCG@5"] == by_file["nDCG@5"] == by_dataset["quality_nDCG@5"]  # quality = relevance here
    assert by_dataset["stance_pairs"] > 0 and 0 <= by_dataset["stance_macro_f1"] <= 1
    table = run_command([*KUERI, "evaluate", run, "--dataset", DATASET], env={"IR_DATASETS_HOME": str(in_home)})
    assert table.stdout.splitlines()[0].split() == ["run", "topics", "nDCG@5", "nDCG@10", "P@5", "quality_nDCG@5",
                                                    "quality_nDCG@10", "quality_P@5", "stance_macro_f1"]


@pytest.mark.parametrize("command", [["run", "--config", "row-15", "--output", "RUN"], ["evaluate", "RUN"]])
def test_without_the_datasets_files_one_line_names_what_is_missing_and_where(command, tmp_path):
    empty = tmp_path / "empty-home"
    args = [str(tmp_path / "run.txt") if a == "RUN" else a for a in command]
    result = run_command([*KUERI, *args, "--dataset", DATASET], env={"IR_DATASETS_HOME": str(empty)})
    assert result.returncode == 1, result.stderr
    part = "queries" if command[0] == "run" else "qrels"
    first = "queries.xml" if part == "queries" else "qrels-relevance.qrels"
    assert result.stderr.strip() == (f"kueri: error: {DATASET}: ir_datasets has not got its {part} on this machine: "
                                     f"missing {empty}/touche/2022/task-2/{first}"
                                     f"{' (and 2 more)' if part == 'qrels' else ''}; ir_datasets keeps its data in "
                                     "IR_DATASETS_HOME (else ~/.ir_datasets), and kueri lets it download nothing")
    assert not (tmp_path / "run.txt").exists()


def test_an_unknown_id_and_a_missing_package_are_one_line_each(tmp_path):
    result = run_command([*KUERI, "run", "--dataset", "no/such-dataset", "--output", str(tmp_path / "r.txt")])
    assert result.returncode == 1
    assert result.stderr.strip() == ("kueri: error: no/such-dataset: not a dataset id ir_datasets knows (see "
                                     "ir_datasets' catalogue)")
    hidden = ("import sys; sys.modules['ir_datasets'] = None; from kueri.cli import main; "
              f"sys.exit(main(['run', '--dataset', '{DATASET}', '--output', '{tmp_path / 'r.txt'}']))")
    result = subprocess.run([sys.executable, "-c", hidden], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip() == ("kueri: error: --dataset needs the ir_datasets package: "
                                     "pip install 'kueri[ir_datasets]'")


def test_pyterriers_irds_topics_carry_the_objects_kueri_reads(in_home):
    pytest.importorskip("pyterrier", reason="the pyterrier extra is not installed")
    from kueri.parse import read_topics

    code = f"""import json, pyterrier as pt; from kueri import pyterrier as kp
frame = pt.get_dataset("irds:{DATASET}").get_topics(tokenise_query=False)
print(json.dumps([[t.number, t.title, list(t.objects)] for t in kp.topic_records(frame, "test", objects=True)]))"""
    assert in_python(in_home, code) == [[t.number, t.title, list(t.objects)] for t in read_topics(SAMPLE_TOPICS)]


@pytest.mark.slow
def test_kueri_run_with_the_dataset_id_gives_the_run_of_the_task_files(in_home, row15_cli_run, workdir, tmp_path):
    by_files, by_dataset = row15_cli_run, tmp_path / "dataset.txt"  # by files: kueri run --corpus --topics
    result = run_command([*KUERI, "run", "--config", "row-15", "--dataset", DATASET, "--workdir", str(workdir),
                          "--output", str(by_dataset)], env={"IR_DATASETS_HOME": str(in_home)})
    assert result.returncode == 0, result.stderr
    assert f"dataset {DATASET}: 50 topics, corpus {in_home}/touche/2022/task-2/passages.jsonl" in result.stderr
    assert by_dataset.read_bytes() == by_files.read_bytes()
