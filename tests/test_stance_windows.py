"""A passage longer than the stance model's window read in overlapping windows (kueri.train.stance.tune.windows,
measured by ``tune_stance_passages.py --windows cv-answers``): the first window is what the model reads today,
each window fits, the windows overlap by half and the last reaches the passage's end."""

from __future__ import annotations

import pytest

from kueri.encoders.cross import pair_tokenizer
from kueri.stance.encoders import HYPOTHESIS, masked_text
from kueri.train.data import load_stance_train
from kueri.train.stance.passage_data import MAX_TOKENS
from kueri.train.stance.tune import windows


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
