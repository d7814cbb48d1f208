import pytest

from kueri.errors import KueriError
from kueri.fusion import ranked, reciprocal_rank_fusion
from kueri.quality import read_quality_scores, times_quality
from kueri.quality.scores import as_java_float
from kueri.records import Hit
from kueri.runfile import read_run_ranked


def test_rrf_uses_the_rank_column_with_k_30(tmp_path):
    path = tmp_path / "a.txt"
    # ranks 1 and 5 (a gap): the rank column counts, not the position
    path.write_text("7 Q0 x 1 9.0 a\n7 Q0 y 5 8.0 a\n")
    other = {"7": [Hit("y", 1.0)]}
    fused = reciprocal_rank_fusion([read_run_ranked(path), ranked(other)])
    assert fused["7"] == [Hit("y", 1 / 35 + 1 / 31), Hit("x", 1 / 31)]


def test_rrf_topics_in_numeric_order_and_depth():
    run_a = {"10": [Hit(f"d{i}", 1.0) for i in range(5)], "9": [Hit("z", 1.0)]}
    fused = reciprocal_rank_fusion([ranked(run_a)], depth=3)
    assert list(fused) == ["9", "10"] and [h.doc for h in fused["10"]] == ["d0", "d1", "d2"]


def test_rrf_tie_order_is_java_hashmap_order():
    # all tied: the order is the Java HashMap's (bucket of the String hash), not the input order
    docs = [f"clueweb12-{i:04d}wb-00-00000___1" for i in range(40)]
    runs = [ranked({"2": [Hit(d, 1.0)]}) for d in docs]
    java = [h.doc for h in reciprocal_rank_fusion(runs, tie_order="java")["2"]]
    first_seen = [h.doc for h in reciprocal_rank_fusion(runs)["2"]]  # the default: no JVM
    assert first_seen == docs and sorted(java) == sorted(docs) and java != docs

    def java_hash(text):
        h = 0
        for ch in text:
            h = (31 * h + ord(ch)) & 0xFFFFFFFF
        return h

    capacity = 64  # 40 entries: the smallest power of two >= 16 with 40 <= 0.75 * capacity
    buckets = [(java_hash(d) ^ (java_hash(d) >> 16)) & (capacity - 1) for d in java]
    assert buckets == sorted(buckets)


def test_rrf_errors():
    with pytest.raises(KueriError, match="nothing to fuse"):
        reciprocal_rank_fusion([])
    with pytest.raises(KueriError, match="tie order"):
        reciprocal_rank_fusion([{}], tie_order="random")


def test_rerank_semantics(tmp_path):
    scores_file = tmp_path / "q.tsv"
    scores_file.write_text("a\t0.5\nb\t0.734512\nbroken line\nc\t0.25\textra\n")
    scores = read_quality_scores(str(scores_file))
    assert scores == {"a": 0.5, "b": as_java_float(0.734512)}  # lines without exactly 2 fields ignored
    assert scores["b"] != 0.734512 and abs(scores["b"] - 0.734512) < 1e-7  # float widened to double
    run = {"10": [Hit("a", 2.0)], "2": [Hit("a", 1.0000004), Hit("b", 1.0), Hit("c", 0.9), Hit("z", 0.5)]}
    result = times_quality(run, scores)
    assert list(result) == ["2", "10"]  # topics ascending as numbers
    # printed score (6 decimals) x quality; no score -> factor 1.0; stable for ties
    assert result["2"] == [Hit("c", 0.9), Hit("b", 1.0 * scores["b"]), Hit("a", 0.5), Hit("z", 0.5)]


def test_bad_quality_score_is_an_error(tmp_path):
    scores_file = tmp_path / "q.tsv"
    scores_file.write_text("a\t0.5\nb\tgood\n")
    with pytest.raises(KueriError, match=r"q.tsv:2: quality score 'good'"):
        read_quality_scores(str(scores_file))
    with pytest.raises(KueriError, match="not found"):
        read_quality_scores(str(tmp_path / "none.tsv"))


def test_shipped_debater_scores():
    scores = read_quality_scores("debater-2022")
    assert len(scores) == 64382 and all(0.0 < s <= 1.02 for s in scores.values())
