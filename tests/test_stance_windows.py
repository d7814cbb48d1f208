"""A passage longer than the stance model's window read in overlapping windows (kueri.train.stance.windows,
measured by ``tune_stance_passages.py --windows cv-answers``): the first window is what the model reads today,
each window fits, the windows overlap by half and the last reaches the passage's end; a passage's probabilities
are the mean over its windows naming an object, and ``--train-in-windows`` trains on those windows as items."""

from __future__ import annotations

import numpy as np
import pytest

from kueri.encoders.cross import pair_tokenizer
from kueri.objects import MaskedPassage
from kueri.stance.encoders import HYPOTHESIS, masked_text
from kueri.train.data import load_stance_train
from kueri.train.stance.lower import Lower, Source
from kueri.train.stance.passage_data import MAX_TOKENS, Data, Item
from kueri.train.stance.tune import main
from kueri.train.stance.windows import Windows, windows


@pytest.fixture(scope="module")
def answers() -> list[str]:
    """The stance answers' masked texts, both orders of the objects."""
    return [masked_text(tokens) for _, passage, _ in load_stance_train()
            for tokens in (passage.tokens, passage.swapped().tokens)]


def test_the_first_window_is_what_the_model_reads_and_the_last_reaches_the_end(answers):
    whole, cut = pair_tokenizer(1 << 16), pair_tokenizer(MAX_TOKENS)
    longer = 0
    for text in answers:
        ids = whole.encode_pair(HYPOTHESIS, text)
        read = windows(ids, whole.sep)
        assert read[0] == cut.encode_pair(HYPOTHESIS, text)
        prefix = ids.index(whole.sep) + 1
        body = ids[prefix:-1]
        assert all(len(w) <= MAX_TOKENS and w[:prefix] == ids[:prefix] and w[-1] == whole.sep for w in read)
        assert read[-1][prefix:-1] == body[len(body) - len(read[-1]) + prefix + 1:]
        if len(ids) <= MAX_TOKENS:
            assert read == [ids]
        else:
            longer += 1
            room = MAX_TOKENS - prefix - 1
            for before, after in zip(read, read[1:], strict=False):
                assert before[prefix + room // 2:-1] == after[prefix:prefix + room - room // 2]  # half overlaps
    assert longer > 100  # the answers have passages longer than the window: the test reads them


class Reads:
    """What a fitted model gives each window (its lower states' first value, as P(FIRST)): the windows' mean is
    then plain arithmetic to check."""

    def probabilities(self, source: Source) -> np.ndarray:
        first = np.array([states[0, 0] for states in source.lower.forward], dtype=np.float64)
        return np.column_stack([first, 1.0 - first, np.zeros_like(first), np.zeros_like(first)])


def test_a_passage_read_in_windows_is_the_mean_over_those_naming_an_object():
    items = [Item(f"k{i}", f"g{i}", "answers", MaskedPassage([["x"]]), "FIRST") for i in range(3)]
    target = Source(Data(items, np.arange(6.0).reshape(3, 2), np.arange(6.0).reshape(3, 2)),
                    Lower([np.zeros((1, 1))] * 3, [np.zeros((1, 1))] * 3))
    # item 0: two more windows (its first names an object); item 2: one more (its first names neither)
    states = [np.full((2, 1), value) for value in (0.5, 0.8, 0.4)]
    read = Windows([0, 0, 2], Lower(states, states), [True, False, False])
    first = np.array([[0.2, 0.8, 0, 0], [0.9, 0.1, 0, 0], [0.1, 0.9, 0, 0]])
    mean = read.probabilities(Reads(), target, [0, 1, 2], first)
    assert np.allclose(mean[:, 0], [(0.2 + 0.5 + 0.8) / 3, 0.9, 0.4])  # item 2's first window is left out
    assert np.allclose(mean.sum(axis=1), 1.0)
    # held out in another order, or item 1 alone (no windows past its first): each row is its own item's
    assert np.allclose(read.probabilities(Reads(), target, [2, 1], first[[2, 1]])[:, 0], [0.4, 0.9])
    assert np.allclose(read.probabilities(Reads(), target, [1], first[[1]]), first[[1]])
    # the windows as training items: their passage's label and what the head reads beside, their own states
    chosen = read.source(target, [1, 2])
    assert [item.key for item in chosen.data.items] == ["k0", "k2"]
    assert chosen.data.forward.tolist() == [[0.0, 1.0], [4.0, 5.0]]
    assert [s[0, 0] for s in chosen.lower.forward] == [0.8, 0.4]


def test_training_in_windows_asks_for_the_windows(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--cache", str(tmp_path), "--train-in-windows", "cv-answers"])
    assert stopped.value.code == 2
    assert "--train-in-windows reads in windows: give --windows too" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
