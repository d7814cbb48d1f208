"""kueri in PyTerrier: transformers over real indexes of the sample, compared with the CLI and the Java runs."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import warnings

import pytest

pt = pytest.importorskip("pyterrier")

from kueri import pyterrier as kp  # noqa: E402
from kueri.errors import KueriError  # noqa: E402
from tests.conftest import (  # noqa: E402
    FEW_TOPICS,
    QRELS,
    ROOT,
    SAMPLE_CORPUS,
    SAMPLE_TOPICS,
    lines_of_topics,
    run_command,
)

JAVA_RUNS = ROOT / "tests" / "data" / "original-java-runs"


@pytest.fixture(scope="module")
def topics():
    return kp.topics(SAMPLE_TOPICS)


@pytest.fixture(scope="module")
def qrels():
    return kp.qrels(QRELS)


@pytest.fixture(scope="module")
def index(workdir):
    return kp.index(SAMPLE_CORPUS, "row-15", workdir)


def java_run(name: str) -> tuple[str, str]:
    """The original Java system's run of a Table 1 row, and its tag."""
    with gzip.open(JAVA_RUNS / f"{name}.txt.gz", "rt") as handle:
        text = handle.read()
    return text, text.split("\n", 1)[0].split(" ")[5]


def test_topics_and_qrels_frames(topics, qrels):
    assert list(topics.columns) == ["qid", "query", "first", "second", "description", "narrative"]
    assert len(topics) == 50 and topics.qid.map(type).eq(str).all()
    first = topics.iloc[0]
    assert (first.qid, first.query, first["first"], first.second) == ("2", "Which is better, a laptop or a desktop?",
                                                                      "laptop", "desktop")
    assert list(qrels.columns) == ["qid", "docno", "label"] and str(qrels.label.dtype).startswith("int")
    assert qrels.qid.map(type).eq(str).all() and len(qrels) > 2000


def test_retriever_is_the_original_row_15(index, topics, tmp_path):
    results = kp.Retriever(index, config="row-15")(topics)
    assert list(results.columns) == ["qid", "query", "first", "second", "description", "narrative", "docno", "score",
                                     "rank"]
    assert results.groupby("qid")["rank"].apply(lambda r: list(r) == list(range(len(r)))).all()  # from 0
    expected, tag = java_run("row-15")
    kp.write_run(results, tmp_path / "run.txt", tag)
    assert (tmp_path / "run.txt").read_text() == expected


def test_feedback_and_fusion_rows_are_the_originals(topics, workdir, tmp_path):
    for name in ("row-16", "row-23"):
        results = kp.pipeline(name, SAMPLE_CORPUS, workdir)(topics)
        expected, tag = java_run(name)
        kp.write_run(results, tmp_path / f"{name}.txt", tag)
        assert (tmp_path / f"{name}.txt").read_text() == expected, name


def test_cut_compose_and_pass_through(index, topics):
    cut = kp.Retriever(index, "row-07") % 5
    results = cut(topics.assign(mine="kept"))
    assert results.groupby("qid").size().max() == 5 and set(results["rank"]) == {0, 1, 2, 3, 4}
    assert (results["mine"] == "kept").all()  # a column kueri does not know is passed through
    reranked = (kp.Retriever(index, "row-15") % 20 >> kp.QualityRerank(index, "offline"))(topics)
    assert results.qid.nunique() == reranked.qid.nunique() == 50
    assert not reranked.groupby("qid")["score"].apply(lambda s: s.is_monotonic_decreasing).eq(False).any()


def test_stages_say_which_topic_columns_they_need(index, topics):
    results = kp.Retriever(index, "row-15")(topics[["qid", "query"]])  # objects are optional here
    with pytest.raises(KueriError, match=r"Stance needs the column\(s\) first, second \(kueri.pyterrier.topics"):
        kp.Stance(index)(results)
    with pytest.raises(KueriError, match="has more stages: use kueri.pyterrier.pipeline"):
        kp.Retriever(index, "row-20")


def test_transformers_are_inspectable_without_warnings(index, topics, qrels):
    transformers = [kp.Retriever(index, "row-15"), kp.Retriever(index, "row-15") >> kp.QualityRerank(index),
                    kp.Retriever(index, "row-15") >> kp.Stance(index, depth=10),
                    kp.RRF(kp.Retriever(index, "row-07"), kp.Retriever(index, "row-15"))]
    for transformer in transformers:
        inputs = pt.inspect.transformer_inputs(transformer)
        outputs = pt.inspect.transformer_outputs(transformer, list(topics.columns))
        assert inputs[0][:2] >= ["qid", "query"] and {"docno", "score", "rank"} <= set(outputs)
    assert "stance" in pt.inspect.transformer_outputs(transformers[2], list(topics.columns))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PyTerrier's validation warns about transformers it cannot inspect
        pt.Experiment(transformers[:1], topics.head(3), qrels, eval_metrics=["ndcg_cut_5"], validate="error")


def kueri_evaluate(run_file) -> float:
    result = run_command([sys.executable, "-m", "kueri", "evaluate", str(run_file), "--qrels", str(QRELS), "--json"])
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["nDCG@5"]


def test_experiment_agrees_with_kueri_evaluate(index, topics, qrels, workdir, tmp_path):
    row15, row16 = kp.Retriever(index, "row-15"), kp.pipeline("row-16", SAMPLE_CORPUS, workdir)
    table = pt.Experiment([row15], topics, qrels, eval_metrics=["ndcg_cut_5"], names=["row-15"])
    kp.write_run(row15(topics), tmp_path / "row-15.txt", "r15")
    assert round(table.ndcg_cut_5[0], 4) == round(kueri_evaluate(tmp_path / "row-15.txt"), 4) == 0.4460
    # Row 16 retrieves nothing for 3 topics: trec_eval (kueri evaluate) averages over the 47 topics the
    # run answers, PyTerrier over the topics it is given (a topic without results counts 0).
    results = row16(topics)
    kp.write_run(results, tmp_path / "row-16.txt", "r16")
    answered = topics[topics.qid.isin(results.qid)]
    assert len(answered) == 47
    on_answered = pt.Experiment([row16], answered, qrels, eval_metrics=["ndcg_cut_5"]).ndcg_cut_5[0]
    assert round(on_answered, 4) == round(kueri_evaluate(tmp_path / "row-16.txt"), 4) == 0.6057
    on_all = pt.Experiment([row16], topics, qrels, eval_metrics=["ndcg_cut_5"]).ndcg_cut_5[0]
    assert on_all == pytest.approx(on_answered * 47 / 50)


@pytest.mark.slow
def test_the_default_pipeline_is_the_clis_run(default_tira_run, topics, qrels, tmp_path):
    """On a few of the sample's topics (a run is made topic by topic: their lines of the CLI's run are theirs)."""
    default = kp.pipeline("default", SAMPLE_CORPUS, default_tira_run.workdir)  # embeddings cached there
    few = topics[topics.qid.isin(FEW_TOPICS)]
    results = default(few)
    assert set(results["stance"]) == {"FIRST", "SECOND", "NEUTRAL", "NO"}
    kp.write_run(results, tmp_path / "run.txt", "kueri_default")
    assert (tmp_path / "run.txt").read_text() == lines_of_topics((default_tira_run.out / "run.txt").read_text(),
                                                                  FEW_TOPICS)
    # The results, not the pipeline again (a second run would only cost time)...
    table = pt.Experiment([results], few, qrels, eval_metrics=["ndcg_cut_5"], names=["default"])
    assert round(table.ndcg_cut_5[0], 4) == round(kueri_evaluate(tmp_path / "run.txt"), 4) > 0
    # ...and the pipeline run by Experiment itself, on one topic: what those results give for it.
    one = topics[topics.qid == "2"]
    by_experiment = pt.Experiment([default], one, qrels, eval_metrics=["ndcg_cut_5"]).ndcg_cut_5[0]
    assert by_experiment == pt.Experiment([results[results.qid == "2"]], one, qrels,
                                          eval_metrics=["ndcg_cut_5"]).ndcg_cut_5[0] > 0


def test_a_users_transformer_in_an_experiment_with_a_baseline(index, topics, qrels):
    bm25 = kp.Retriever(index, "row-15")
    mine = bm25 >> pt.apply.doc_score(lambda row: row["score"] * (1.5 if "better" in row["docno"] else 1.0))
    table = pt.Experiment([bm25, mine, kp.Retriever(index, "row-07")], topics, qrels, eval_metrics=["ndcg_cut_5"],
                          names=["row-15", "mine", "row-07"], baseline=0, correction="bonferroni")
    assert list(table.name) == ["row-15", "mine", "row-07"]
    assert {"ndcg_cut_5 +", "ndcg_cut_5 -", "ndcg_cut_5 p-value", "ndcg_cut_5 reject"} <= set(table.columns)


def test_a_jvm_started_without_kueris_jar_gets_a_clear_message(tmp_path):
    script = ("import jnius_config; jnius_config.set_classpath('.'); import jnius\n"
              "from kueri.cli import main\nimport sys\nsys.exit(main(['index', '--corpus', sys.argv[1], '--index', "
              "sys.argv[2], '-q']))\n")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a___1", "contents": "cats"}\n')
    result = subprocess.run([sys.executable, "-c", script, str(corpus), str(tmp_path / "i")], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "a JVM was started in this process before kueri's" in result.stderr
    assert "pt.java.add_jar(kueri.lucene.jvm.find_jar())" in result.stderr and "Traceback" not in result.stderr


def test_a_second_stage_with_the_defaults_cascade_ranks_as_the_default(default_tira_run, topics):
    from kueri.config import get_config
    from kueri.runfile import read_run

    index = kp.index(SAMPLE_CORPUS, "row-15", default_tira_run.workdir)  # the default run's embeddings are there
    cascade = get_config("default").second_stage_cascade
    reranker = kp.Retriever(index, "row-15") >> kp.SecondStage(index, cascade=cascade)
    assert "cascade=[('second-stage-lexical-v1', 40), ('second-stage-v1', 15)]" in repr(reranker)
    some = topics[topics.qid.isin(["2", "34"])]
    results = reranker(some)
    default = read_run(default_tira_run.out / "run.txt")
    for qid in ("2", "34"):
        mine = results[results.qid == qid].sort_values("rank")
        assert [(doc, round(score, 6)) for doc, score in zip(mine.docno, mine.score, strict=True)] == \
            [(hit.doc, hit.score) for hit in default[qid]]
