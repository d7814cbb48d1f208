"""The adoption rule's reports (kueri.train.reports): the paired bootstrap over object pairs says how often a
candidate is above and below the model it would replace (rules 2 and 3 of docs/stance.md), and the figures by
length third say where in a passage's length it gains."""

from __future__ import annotations

import re

from kueri.train.reports import by_length_third, paired_bootstrap

GOLD = ["FIRST", "SECOND", "NEUTRAL", "NO"] * 6
PAIRS = [f"pair {i // 4}" for i in range(len(GOLD))]


def shares(line: str) -> tuple[float, float]:
    above, below = re.search(r"above zero in ([\d.]+)%, below zero in ([\d.]+)%", line).groups()
    return float(above), float(below)


def test_the_bootstrap_counts_draws_above_and_below_zero():
    wrong = ["NO", "NO", "FIRST", "SECOND"] * 6
    assert shares(paired_bootstrap(GOLD, PAIRS, wrong, GOLD, "right minus wrong", draws=200)) == (100.0, 0.0)
    assert shares(paired_bootstrap(GOLD, PAIRS, GOLD, wrong, "wrong minus right", draws=200)) == (0.0, 100.0)
    assert shares(paired_bootstrap(GOLD, PAIRS, GOLD, GOLD, "the same", draws=200)) == (0.0, 0.0)


def test_figures_by_length_third_split_the_items_by_word_count():
    words = list(range(1, len(GOLD) + 1))[::-1]  # the first items the longest
    short_right = [g if w <= 8 else "NO" for g, w in zip(GOLD, words, strict=True)]
    lines = by_length_third(words, GOLD, {"always right": GOLD, "right when short": short_right})
    assert [line.split(" third")[0].strip() for line in lines] == ["shortest", "middle", "longest"]
    assert "(1-8, 8 items): always right 1.000, right when short 1.000" in lines[0]
    assert "(9-16, 8 items)" in lines[1] and "(17-24, 8 items)" in lines[2]
    assert "right when short 1.000" not in lines[1] + lines[2]
