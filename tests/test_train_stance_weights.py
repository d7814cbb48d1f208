"""How much each training source counts in the passage model's fits (kueri.train.stance.heads.weight_of):
``tune_stance_passages.py --answers-weight`` changes the answers' weight alone; the default is stance-v4's."""

from __future__ import annotations

import pytest

from kueri.train.stance.heads import COMPOSED_WEIGHTS, SOURCE_WEIGHTS, weight_of
from kueri.train.stance.tune import main


def test_the_default_weights_are_stance_v4s_and_a_given_table_replaces_them():
    assert [weight_of(s) for s in ("web", "answers", "compsent")] == [1.0, 1.0, 0.5]
    given = {**SOURCE_WEIGHTS, "answers": 3.0}
    assert [weight_of(s, given) for s in ("web", "answers", "compsent")] == [1.0, 3.0, 0.5]
    assert weight_of("composed-answers", given) == COMPOSED_WEIGHTS["composed-answers"]
    with pytest.raises(KeyError):
        weight_of("unknown", given)


def test_the_answers_weight_is_an_option_with_stance_v4s_default(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    usage = " ".join(capsys.readouterr().out.split())
    assert ("--answers-weight ANSWERS_WEIGHT how much a stance answer counts in every fit, beside a web passage's 1 "
            "(1.0)") in usage
