"""An ensemble of tuned top layers (``tune_stance_passages.py --members N``, a candidate measured on the stance
answers): its first member is stance-v4's model, and it reads a source as the mean of its members."""

from __future__ import annotations

import numpy as np
import pytest

from kueri.train.stance.tune import SEED, Ensemble, main, member_seeds


class Fixed:
    """A fitted model standing for a member: the same probabilities for any source."""

    def __init__(self, rows: list[list[float]]) -> None:
        self.rows = np.array(rows)

    def probabilities(self, source) -> np.ndarray:
        return self.rows


def test_the_first_member_is_stance_v4s_seed_and_the_others_differ():
    assert member_seeds(1) == [SEED]
    seeds = member_seeds(3)
    assert seeds[0] == SEED and len(set(seeds)) == 3
    # the epochs use SEED + epoch: a member's seeds never meet another's
    assert all(abs(a - b) > 100 for a in seeds for b in seeds if a != b)


def test_an_ensemble_reads_the_mean_of_its_members():
    one = Fixed([[0.7, 0.1, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]])
    two = Fixed([[0.1, 0.7, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]])
    np.testing.assert_allclose(Ensemble([one, two]).probabilities(None),
                               [[0.4, 0.4, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]])
    np.testing.assert_array_equal(Ensemble([one]).probabilities(None), one.rows)


def test_members_is_an_option_with_no_ensemble_by_default(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    usage = " ".join(capsys.readouterr().out.split())
    assert "--members MEMBERS cv, cv-answers: also an ensemble of this many tuned models" in usage
    assert "averaged (1: none)" in usage
