"""Evaluation: trec_eval semantics via ir-measures, the reference nDCG@5 table, stance macro-F1."""

from __future__ import annotations

import argparse
import gzip
import json
import math
from functools import cache
from pathlib import Path

import pytest

from kueri.cli.evaluate import add_parser as add_evaluate_parser
from kueri.cli.evaluate import run_evaluate, run_name
from kueri.errors import KueriError
from kueri.evaluate import (
    evaluate_run,
    format_table,
    judged_stance_pairs,
    macro_f1,
    restrict_qrels,
    restrict_run,
    run_as_dict,
)
from kueri.records import Hit
from kueri.runfile import read_qrels, read_run
from tests.conftest import DATA, QRELS, SAMPLE_CORPUS

RUNS = DATA / "runs"

# run file -> (nDCG@5 official qrels, nDCG@5 on the 2,607-passage subset, subset topics)
REFERENCE = {
    "Puss-in-Boots-run1": (0.4687, 0.4819, 50),
    "Olivier-Armstrong-run1": (0.4792, 0.5278, 50),
    "Aldo-Nadi-run5": (0.7089, 0.6664, 50),
    "Katana-run3": (0.6175, 0.5857, 49),
    "Grimjack-run4": (0.3449, 0.3885, 49),
}


@cache
def qrels() -> dict[str, dict[str, int]]:
    return read_qrels(QRELS)


@cache
def subset_ids() -> frozenset[str]:
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as lines:
        return frozenset(json.loads(line)["id"] for line in lines)


# ------------------------------------------------------------------------------ reference values


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_reference_ndcg5_official_qrels(name: str) -> None:
    result = evaluate_run(read_run(RUNS / f"{name}.txt.gz"), qrels())
    assert result["topics"] == 50
    assert result["skipped_topics"] == 0
    assert round(result["nDCG@5"], 4) == REFERENCE[name][0]


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_reference_ndcg5_subset(name: str) -> None:
    assert len(subset_ids()) == 2607
    run = restrict_run(read_run(RUNS / f"{name}.txt.gz"), subset_ids())
    result = evaluate_run(run, restrict_qrels(qrels(), subset_ids()))
    assert round(result["nDCG@5"], 4) == REFERENCE[name][1]
    assert result["topics"] == REFERENCE[name][2]


def test_float_scores_reproduce_trec_eval() -> None:
    # trec_eval keeps scores as C float: Olivier-Armstrong's near-equal scores tie there, and
    # its doc-id tie rule then reorders the top 5 (0.4801); the scores as doubles give 0.4792.
    run = read_run(RUNS / "Olivier-Armstrong-run1.txt.gz")
    assert round(evaluate_run(run, qrels())["nDCG@5"], 4) == 0.4792
    assert round(evaluate_run(run, qrels(), float_scores=True)["nDCG@5"], 4) == 0.4801
    # Where no two scores are that close, both agree.
    puss = read_run(RUNS / "Puss-in-Boots-run1.txt.gz")
    assert evaluate_run(puss, qrels(), float_scores=True)["nDCG@5"] == pytest.approx(
        evaluate_run(puss, qrels())["nDCG@5"], abs=1e-12
    )


def test_other_measures_on_a_real_run() -> None:
    run = read_run(RUNS / "Katana-run3.txt.gz")
    result = evaluate_run(run, qrels(), ["nDCG@5", "nDCG@10", "P@5", "ndcg_cut.5", "Judged@5"])
    assert result["ndcg_cut.5"] == result["nDCG@5"]  # trec_eval spelling of the same measure
    assert round(result["P@5"], 4) == 0.8120
    assert round(result["nDCG@10"], 4) == 0.5394
    assert result["Judged@5"] == pytest.approx(1.0)  # the pool is the runs' top 5


# ------------------------------------------------------------------------------ semantics


def test_ties_by_score_then_doc_id_descending_rank_column_ignored() -> None:
    grades = {"1": {"a": 2, "b": 0}}
    # Equal scores: trec_eval puts the larger doc id ("b") first, whatever the list order.
    assert evaluate_run({"1": [Hit("a", 1.0), Hit("b", 1.0)]}, grades, ["P@1"])["P@1"] == 0.0
    assert evaluate_run({"1": [Hit("b", 1.0), Hit("a", 1.0)]}, grades, ["P@1"])["P@1"] == 0.0
    # Scores, not list order, decide.
    assert evaluate_run({"1": [Hit("b", 1.0), Hit("a", 2.0)]}, grades, ["P@1"])["P@1"] == 1.0
    # Doubles closer than a C float can tell are still ordered by value.
    close = {"1": [Hit("b", 43.37706236), Hit("a", 43.37706352)]}
    assert evaluate_run(close, grades, ["P@1"])["P@1"] == 1.0
    assert evaluate_run(close, grades, ["P@1"], float_scores=True)["P@1"] == 0.0


def test_mean_over_topics_in_run_and_qrels() -> None:
    grades = {"1": {"a": 1}, "2": {"b": 1}, "3": {"c": 0}}
    run = {
        "1": [Hit("a", 1.0)],  # nDCG@5 = 1
        "3": [Hit("c", 1.0)],  # only non-relevant judged: ideal DCG 0, nDCG 0 (trec_eval)
        "9": [Hit("z", 1.0)],  # no qrels: skipped, as trec_eval
        "10": [],  # no hits: no line in a run file, not a topic of the run
    }
    result = evaluate_run(run, grades, ["nDCG@5"], per_topic=True)
    # topic 2 (in the qrels, not in the run) is not averaged in as 0
    assert result["topics"] == 2
    assert result["skipped_topics"] == 1
    assert result["nDCG@5"] == pytest.approx(0.5)
    assert result["per_topic"] == {"1": {"nDCG@5": 1.0}, "3": {"nDCG@5": 0.0}}


def test_unjudged_count_as_zero_and_ideal_from_all_judgments() -> None:
    grades = {"1": {"a": 2, "b": 1, "c": 2}}
    run = {"1": [Hit("x", 3.0), Hit("a", 2.0), Hit("b", 1.0)]}
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    ideal = 2 + 2 / math.log2(3) + 1 / math.log2(4)
    assert evaluate_run(run, grades)["nDCG@5"] == pytest.approx(dcg / ideal)


def test_no_evaluated_topic() -> None:
    result = evaluate_run({"9": [Hit("a", 1.0)]}, {"1": {"a": 1}}, ["nDCG@5"])
    assert result == {"topics": 0, "skipped_topics": 1, "nDCG@5": None}


def test_repeated_doc_keeps_its_first_hit() -> None:
    run = {"1": [Hit("a", 2.0), Hit("b", 1.0), Hit("a", 0.5)]}
    assert run_as_dict(run, float_scores=True) == {"1": {"a": 2.0, "b": 1.0}}
    assert run_as_dict(run) == {"1": {"a": 2.0, "b": 1.0}}  # ranks n..1 of that order


def test_unknown_measure() -> None:
    with pytest.raises(KueriError, match="unknown measure 'nope'"):
        evaluate_run({"1": [Hit("a", 1.0)]}, {"1": {"a": 1}}, ["nope"])


def test_restrict_helpers_drop_empty_topics() -> None:
    run = {"1": [Hit("a", 1.0), Hit("b", 0.5)], "2": [Hit("c", 1.0)]}
    assert restrict_run(run, ["b"]) == {"1": [Hit("b", 0.5)]}
    assert restrict_qrels({"1": {"a": 1, "b": 0}, "2": {"c": 2}}, {"a"}) == {"1": {"a": 1}}


# ------------------------------------------------------------------------------ stance


def test_stance_macro_f1_hand_made() -> None:
    run = {
        "1": [
            Hit("p1", 5.0, "FIRST"),  # gold FIRST
            Hit("p2", 4.0, "SECOND"),  # gold FIRST
            Hit("p3", 3.0, "SECOND"),  # gold SECOND
            Hit("p4", 2.0, "FIRST"),  # gold NEUTRAL
            Hit("p5", 1.0, "Q0"),  # gold NO (Q0 counts as NO)
            Hit("unjudged", 0.5, "FIRST"),  # not in the stance qrels: ignored
            Hit("p1", 0.1, "NO"),  # repeated doc: its first prediction counts
        ],
        "2": [Hit("p1", 1.0, "FIRST")],  # topic without stance qrels: ignored
    }
    stance = {"1": {"p1": "FIRST", "p2": "FIRST", "p3": "SECOND", "p4": "NEUTRAL", "p5": "NO"}}
    pairs = judged_stance_pairs(run, stance)
    assert pairs == [
        ("FIRST", "FIRST"),
        ("FIRST", "SECOND"),
        ("SECOND", "SECOND"),
        ("NEUTRAL", "FIRST"),
        ("NO", "NO"),
    ]
    # FIRST: P=1/2 R=1/2 F=1/2; SECOND: P=1/2 R=1 F=2/3; NEUTRAL: F=0; NO: F=1.
    expected = (1 / 2 + 2 / 3 + 0 + 1) / 4
    assert macro_f1(pairs) == pytest.approx(expected)
    assert expected == pytest.approx(13 / 24)
    result = evaluate_run(run, {"1": {"p1": 1}}, ["P@1"], stance_qrels=stance)
    assert result["stance_macro_f1"] == pytest.approx(13 / 24)
    assert result["stance_pairs"] == 5


def test_macro_f1_only_over_labels_present() -> None:
    # NEUTRAL and NO occur neither in gold nor in predictions: left out of the mean.
    assert macro_f1([("FIRST", "FIRST"), ("SECOND", "SECOND")]) == pytest.approx(1.0)
    # A label only predicted scores 0 (precision 0, recall undefined -> 0).
    assert macro_f1([("FIRST", "FIRST"), ("FIRST", "NO")]) == pytest.approx((2 / 3 + 0) / 2)
    assert macro_f1([]) is None


# ------------------------------------------------------------------------------ report and CLI


def test_format_table() -> None:
    rows = [
        {"run": "a-run", "topics": 50, "nDCG@5": 0.46871, "stance_macro_f1": 0.5},
        {"run": "b", "topics": 49, "nDCG@5": None},
    ]
    table = format_table(rows, ["nDCG@5"]).splitlines()
    assert table[0].split() == ["run", "topics", "nDCG@5", "stance_macro_f1"]
    assert table[1].split() == ["a-run", "50", "0.4687", "0.5000"]
    assert table[2].split() == ["b", "49", "-", "-"]


def test_run_name() -> None:
    assert run_name("x/Katana-run3.txt.gz") == "Katana-run3"
    assert run_name("run.trec") == "run"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kueri")
    add_evaluate_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stance = tmp_path / "stance.qrels"
    stance.write_text(
        "2 0 clueweb12-0505wb-78-06026___3 NEUTRAL\n2 0 clueweb12-1612wb-13-07110___2 FIRST\n"
    )
    args = parse([
        "evaluate", str(RUNS / "Katana-run3.txt.gz"), str(RUNS / "Puss-in-Boots-run1.txt.gz"),
        "--qrels", str(QRELS), "--stance-qrels", str(stance), "--json",
    ])
    assert args.func is run_evaluate
    assert args.func(args) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["run"] for line in lines] == ["Katana-run3", "Puss-in-Boots-run1"]
    katana = lines[0]
    assert {"run", "topics", "nDCG@5", "nDCG@10", "P@5", "stance_macro_f1"} <= set(katana)
    assert katana["topics"] == 50
    assert round(katana["nDCG@5"], 4) == 0.6175
    # Katana: NEUTRAL right, FIRST predicted NEUTRAL -> NEUTRAL F=2/3, FIRST F=0.
    assert katana["stance_macro_f1"] == pytest.approx(1 / 3)
    # Puss-in-Boots retrieved neither judged passage: no pair, no F1 (JSON null).
    assert lines[1]["stance_macro_f1"] is None
    assert lines[1]["stance_pairs"] == 0


def test_cli_table_and_per_topic(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse([
        "evaluate", str(RUNS / "Aldo-Nadi-run5.txt.gz"), "--qrels", str(QRELS),
        "--measures", "nDCG@5", "P@5", "--per-topic",
    ])
    assert run_evaluate(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["run", "topics", "nDCG@5", "P@5"]
    assert out[1].split() == ["Aldo-Nadi-run5", "50", "0.7089", "0.8400"]
    assert out[3].split() == ["run", "topic", "nDCG@5", "P@5"]
    assert len(out) == 3 + 1 + 50


def test_cli_bad_measure_fails_before_reading(tmp_path: Path) -> None:
    args = parse(["evaluate", str(tmp_path / "missing.txt"), "--qrels", str(QRELS),
                  "--measures", "nope"])
    with pytest.raises(KueriError, match="unknown measure"):
        run_evaluate(args)
