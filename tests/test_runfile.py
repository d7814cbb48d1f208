"""Run files and qrels: Java-compatible score format, atomic writes, tolerant strict reading."""

from __future__ import annotations

import gzip
import random
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from kueri.errors import KueriError
from kueri.records import Hit
from kueri.runfile import (
    format_run_lines,
    format_score,
    iter_run_lines,
    read_qrels,
    read_run,
    read_run_ranked,
    read_run_with_tag,
    read_stance_qrels,
    write_lines_atomic,
    write_run,
)
from tests.conftest import DATA, QRELS

RUNS = DATA / "runs"


def java_format(x: float) -> str:
    """The specification: Java's %.6f = HALF_UP rounding of the shortest repr digits."""
    return format(Decimal(repr(x)).quantize(Decimal("0.000001"), ROUND_HALF_UP), "f")


# ------------------------------------------------------------------------------ format_score


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.0, "0.000000"),
        (1.0, "1.000000"),
        (0.1, "0.100000"),
        (1 / 3, "0.333333"),
        (10.73390007019043, "10.733900"),
        (0.0000005, "0.000001"),  # repr 5e-07: HALF_UP; '%.6f' gives 0.000000
        (2.5e-7, "0.000000"),
        (1.2345675, "1.234568"),
        (123.4567895, "123.456790"),  # '%.6f' gives 123.456789 (the double is just below)
        (0.1234565, "0.123457"),
        (-0.0, "-0.000000"),  # Java keeps the sign of negative zero
        (-1e-9, "-0.000000"),  # ... and of negatives that round to zero
        (-0.0000005, "-0.000001"),  # HALF_UP rounds away from zero
        (-2.75, "-2.750000"),
        (1e22, "10000000000000000000000.000000"),
        (12345678901.25, "12345678901.250000"),
    ],
)
def test_format_score_cases(value: float, expected: str) -> None:
    assert format_score(value) == expected


def test_format_score_differs_from_percent_format_where_repr_ends_in_5() -> None:
    assert f"{0.0000005:.6f}" == "0.000000"
    assert format_score(0.0000005) == "0.000001"
    assert f"{123.4567895:.6f}" == "123.456789"
    assert format_score(123.4567895) == "123.456790"


def test_format_score_non_finite_as_java() -> None:
    assert format_score(float("nan")) == "NaN"
    assert format_score(float("inf")) == "Infinity"
    assert format_score(float("-inf")) == "-Infinity"


def test_format_score_matches_the_decimal_specification_everywhere() -> None:
    # The fast path must never disagree with the exact Decimal rule.
    rng = random.Random(7)
    values = []
    for _ in range(20000):
        magnitude = 10 ** rng.uniform(-9, 16)
        x = rng.choice([-1, 1]) * rng.random() * magnitude
        values += [x, round(x, rng.randint(0, 8)), round(x, 6) + 5e-7]
    values += [i / 8 for i in range(-100, 100)] + [n + 0.0000005 for n in range(100)]
    for x in values:
        assert format_score(x) == java_format(x), repr(x)


# ------------------------------------------------------------------------------ writing


def sample_run() -> dict[str, list[Hit]]:
    return {
        "2": [Hit("doc-b___1", 3.5, "FIRST"), Hit("doc-a___2", 1.0000005, "Q0")],
        "10": [Hit("doc-c___3", -0.25, "NEUTRAL"), Hit("doc-d___1", 0.0, "NO")],
        "1": [Hit("doc-e___1", 7.0, "SECOND")],
    }


def test_format_run_lines() -> None:
    lines = list(format_run_lines(sample_run(), "my-tag"))
    assert lines[:2] == [
        "2 FIRST doc-b___1 1 3.500000 my-tag\n",
        "2 Q0 doc-a___2 2 1.000001 my-tag\n",
    ]
    assert lines[2] == "10 NEUTRAL doc-c___3 1 -0.250000 my-tag\n"
    assert [line.split()[0] for line in lines] == ["2", "2", "10", "10", "1"]  # dict order


def test_write_read_round_trip(tmp_path: Path) -> None:
    run = sample_run()
    path = tmp_path / "run.txt"
    assert write_run(run, path, "my-tag") == 5
    back, tag = read_run_with_tag(path)
    assert tag == "my-tag"
    assert list(back) == ["2", "10", "1"]
    for qid, hits in run.items():
        assert [(h.doc, h.stance) for h in back[qid]] == [(h.doc, h.stance) for h in hits]
        assert [h.score for h in back[qid]] == [float(format_score(h.score)) for h in hits]
    ranked = read_run_ranked(path)
    assert [rank for rank, _ in ranked["2"]] == [1, 2]


def test_write_gz_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "run.txt.gz"
    write_run(sample_run(), path, "t")
    with gzip.open(path, "rt") as text:
        assert text.readline() == "2 FIRST doc-b___1 1 3.500000 t\n"
    assert read_run(path)["1"] == [Hit("doc-e___1", 7.0, "SECOND")]


def test_rewriting_a_real_java_run_is_byte_identical(tmp_path: Path) -> None:
    # Aldo-Nadi-run5 was written by the original Java system: 50,000 scores in %.6f.
    source = RUNS / "Aldo-Nadi-run5.txt.gz"
    run, tag = read_run_with_tag(source)
    assert tag == "seupd2122-kueri_rrf_reranked"
    out = tmp_path / "again.txt"
    assert write_run(run, out, tag) == 50000
    assert out.read_bytes() == gzip.decompress(source.read_bytes())


def test_write_is_atomic_when_the_lines_fail(tmp_path: Path) -> None:
    target = tmp_path / "run.txt"

    def failing_lines():
        yield "1 Q0 a 1 1.000000 t\n"
        raise RuntimeError("crash mid-way")

    with pytest.raises(RuntimeError):
        write_lines_atomic(target, failing_lines())
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []  # the temporary file is gone too

    target.write_text("old run\n")
    with pytest.raises(RuntimeError):
        write_lines_atomic(target, failing_lines())
    assert target.read_text() == "old run\n"
    assert list(tmp_path.iterdir()) == [target]


def test_write_run_rejects_bad_hits_without_leaving_a_file(tmp_path: Path) -> None:
    target = tmp_path / "run.txt"
    run = {"1": [Hit("a", 1.0), Hit("b", 0.5, "MAYBE")]}
    with pytest.raises(KueriError, match="unknown stance 'MAYBE'"):
        write_run(run, target, "t")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(KueriError, match="whitespace"):
        write_run({"1": [Hit("a b", 1.0)]}, target, "t")
    with pytest.raises(KueriError, match="tag"):
        write_run({"1": [Hit("a", 1.0)]}, target, "")


def test_write_into_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(KueriError, match="does not exist"):
        write_run(sample_run(), tmp_path / "nope" / "run.txt", "t")


# ------------------------------------------------------------------------------ reading


def test_read_tolerates_tabs_spaces_blank_lines_quotes_and_q0(tmp_path: Path) -> None:
    path = tmp_path / "messy.txt"
    path.write_text(
        '2 NEUTRAL clueweb12-0505wb-78-06026___3 1 1.0 "Colbert edinburg"\n'
        "\n"
        "2\tQ0\tdoc-x\t3\t0.25\tsome tag\n"
        "2   second   doc-y   2   0.5   tag  \n"
        "   \n"
        "7 NO doc-z 1 -1e-3 t\r\n"
    )
    ranked = read_run_ranked(path)
    assert [(rank, hit.doc) for rank, hit in ranked["2"]] == [
        (1, "clueweb12-0505wb-78-06026___3"),
        (2, "doc-y"),
        (3, "doc-x"),
    ]
    assert ranked["2"][1][1].stance == "SECOND"  # case-insensitive, normalised
    assert ranked["2"][2][1].stance == "Q0"
    assert ranked["7"] == [(1, Hit("doc-z", -0.001, "NO"))]
    rows = list(iter_run_lines(path))
    assert rows[0].tag == "Colbert edinburg"
    assert rows[1].tag == "some tag"
    assert [row.line for row in rows] == [1, 3, 4, 6]


def test_read_orders_by_rank_column_stably(tmp_path: Path) -> None:
    path = tmp_path / "order.txt"
    path.write_text("1 Q0 c 3 1 t\n1 Q0 a 1 3 t\n1 Q0 b 2 2 t\n1 Q0 d 2 2 t\n")
    assert [h.doc for h in read_run(path)["1"]] == ["a", "b", "d", "c"]


def test_read_gzip_detected_by_content(tmp_path: Path) -> None:
    path = tmp_path / "run-without-gz-suffix"
    path.write_bytes(gzip.compress(b"1 Q0 a 1 1.5 t\n"))
    assert read_run(path) == {"1": [Hit("a", 1.5, "Q0")]}


def test_read_real_katana_run_with_quoted_tag() -> None:
    run, tag = read_run_with_tag(RUNS / "Katana-run3.txt.gz")
    assert tag == "Colbert edinburg"
    assert len(run) == 50
    assert all(len(hits) == 100 for hits in run.values())
    assert run["2"][0] == Hit("clueweb12-0505wb-78-06026___3", 1.0, "NEUTRAL")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("1 Q0 a 1 2.0\n", "expected 6 fields"),
        ("1 Q0 a first 2.0 t\n", "rank 'first' is not an integer"),
        ("1 Q0 a 1 high t\n", "score 'high' is not a number"),
        ("1 Q0 a 1 nan t\n", "not a finite number"),
        ("1 MAYBE a 1 2.0 t\n", "unknown stance label 'MAYBE'"),
    ],
)
def test_malformed_run_line_names_file_and_line(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "bad-run.txt"
    path.write_text("1 Q0 ok 1 3.0 t\n\n" + line)
    with pytest.raises(KueriError) as info:
        read_run(path)
    message = str(info.value)
    assert f"{path}:3:" in message
    assert problem in message


def test_missing_run_file() -> None:
    with pytest.raises(KueriError, match="not found"):
        read_run("/nonexistent/run.txt")


# ------------------------------------------------------------------------------ qrels


def test_read_official_qrels() -> None:
    qrels = read_qrels(QRELS)
    assert len(qrels) == 50
    assert sum(len(docs) for docs in qrels.values()) == 2107
    assert qrels["12"]["clueweb12-0004wb-78-20304___1"] == 1
    assert {g for docs in qrels.values() for g in docs.values()} == {0, 1, 2}


def test_qrels_errors_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.qrels"
    path.write_text("1 0 a 1\n1 0 b x\n")
    with pytest.raises(KueriError, match=rf"{path}:2: grade 'x' is not an integer"):
        read_qrels(path)
    path.write_text("1 0 a 1\n1 0 b\n")
    with pytest.raises(KueriError, match=rf"{path}:2: expected 4 fields"):
        read_qrels(path)
    path.write_text("1 0 a 1\n1 0 a 1\n1\t0\ta\t2\n")
    with pytest.raises(KueriError, match=rf"{path}:3: .*different grade"):
        read_qrels(path)


def test_read_stance_qrels_both_layouts(tmp_path: Path) -> None:
    path = tmp_path / "stance.qrels"
    # Official layout (label in column 4), run-like layout (label in column 2), Q0 = NO.
    path.write_text("2 0 a FIRST\n2 0 b no\n2 SECOND c 1\n3 NEUTRAL d 0\n3 Q0 e 2\n")
    assert read_stance_qrels(path) == {
        "2": {"a": "FIRST", "b": "NO", "c": "SECOND"},
        "3": {"d": "NEUTRAL", "e": "NO"},
    }
    path.write_text("2 0 a FIRST\n2 0 b 1\n")
    with pytest.raises(KueriError, match=rf"{path}:2: no stance label"):
        read_stance_qrels(path)
