import pytest

from kueri.errors import KueriError
from kueri.lucene import LuceneIndex, build_index
from kueri.lucene.analyze import AnalyzerConfig
from kueri.lucene.feedback import FeedbackConfig, FeedbackModel, Judgment, feedback_run, read_judgments
from kueri.records import Passage

PASSAGES = [
    Passage("d___1", "laptop laptop laptop battery"),
    Passage("d___2", "laptop desktop"),
    Passage("d___3", "desktop tower tower"),
    Passage("d___4", "the text:text:text parser trap"),
    Passage("d___5", "nothing relevant here"),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    path = tmp_path_factory.mktemp("rf") / "idx"
    build_index(PASSAGES, path, AnalyzerConfig("lucene"), progress=False)
    with LuceneIndex(path) as opened:
        yield opened


def judgments_file(tmp_path, lines):
    path = tmp_path / "qrels.txt"
    path.write_text("".join(f"{line}\n" for line in lines))
    return str(path)


def test_overwrite_semantics_and_boosts(index):
    model = FeedbackModel(index, [Judgment(2, "d___1", 2, 1), Judgment(2, "d___2", 2, 2), Judgment(2, "d___3", 3, 3)])
    # grade 2: laptop appears in d___1 (tf 3) then d___2 (tf 1): the last judged passage wins
    assert model.frequencies[(2, 2)] == {"battery": 1, "laptop": 1, "desktop": 1}
    clauses = dict((term, boost) for term, boost in model.clauses(2) if term in ("laptop", "tower"))
    assert clauses == {"laptop": "4.0", "tower": "18.0"}  # tf * grade^2, printed as a Java double
    assert model.topics() == [2]


def test_grade_zero_is_not_used(index, tmp_path):
    path = judgments_file(tmp_path, ["2 0 d___5 0", "2 0 d___1 1"])
    run = feedback_run(index, FeedbackConfig(judgments=path))
    docs = [hit.doc for hit in run["2"]]
    assert docs[0] == "d___1" and "d___5" not in docs  # "nothing relevant here" shares no grade>0 term


def test_the_raised_clause_limit_does_not_outlive_feedback(index, tmp_path):
    from kueri.lucene.jvm import lucene

    limit = lucene().IndexSearcher.getMaxClauseCount()
    feedback_run(index, FeedbackConfig(judgments=judgments_file(tmp_path, ["2 0 d___1 1"])))
    assert lucene().IndexSearcher.getMaxClauseCount() == limit  # other searches in this process keep Lucene's


def test_missing_judged_passage_aborts_or_is_skipped(index, tmp_path):
    path = judgments_file(tmp_path, ["2 0 d___1 1", "2 0 not-indexed___1 3"])
    with pytest.raises(KueriError, match=r"not-indexed___1 \(judgments line 2\) is not in the index"):
        feedback_run(index, FeedbackConfig(judgments=path))
    run = feedback_run(index, FeedbackConfig(judgments=path, missing="skip"))
    assert run["2"][0].doc == "d___1"


def test_unescaped_colon_term_truncates_as_the_original_and_escaping_fixes_it(index, tmp_path):
    path = judgments_file(tmp_path, ["2 0 d___1 1", "3 0 d___4 1", "4 0 d___3 1"])
    faithful = feedback_run(index, FeedbackConfig(judgments=path))
    assert list(faithful) == ["2"]  # topic 3's "text:text:text^1.0" fails to parse: the run stops
    assert feedback_run(index, FeedbackConfig(judgments=path), ["2", "4"]) == faithful  # there too when 3 is not asked
    fixed = feedback_run(index, FeedbackConfig(judgments=path, escape_terms=True))
    assert list(fixed) == ["2", "3", "4"] and fixed["3"][0].doc == "d___4"


def test_bad_judgment_lines(tmp_path):
    with pytest.raises(KueriError, match=r"qrels.txt:2: topic must be 0..100 and grade 0..3"):
        read_judgments(judgments_file(tmp_path, ["2 0 a 1", "2 0 b 4"]))
    with pytest.raises(KueriError, match=r"qrels.txt:1: expected"):
        read_judgments(judgments_file(tmp_path, ["2 0 a"]))
    with pytest.raises(KueriError, match="not found"):
        FeedbackConfig(judgments=str(tmp_path / "none"))
