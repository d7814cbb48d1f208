"""Text features of the stance model (:mod:`kueri.stance.model`): masked n-grams, sentiment, dense features.

One module for training (``scripts/train_stance.py``) and prediction, so the two can never tokenize
or mask differently. Plain Python, deterministic, nothing fetched.

The central idea is **object masking**: every mention of the topic's first object becomes the token
``OBJ1`` and every mention of the second ``OBJ2``. The models then learn patterns such as
``OBJ1 is better than OBJ2`` or ``go with OBJ2`` whatever the objects are, and a label maps to FIRST or
SECOND by which object is which. Swapping ``OBJ1`` and ``OBJ2`` (:func:`swap_tokens`) turns a text
that favours the first object into one that favours the second: training doubles its data that way,
and prediction averages both directions so that swapping the topic's objects swaps FIRST and SECOND
exactly.

Finding and masking the objects is :mod:`kueri.objects` (the second stage uses it too).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from functools import lru_cache

from kueri.objects import (  # noqa: F401  (re-exported: the stance model's training and tests use them here)
    OBJ1,
    OBJ2,
    MaskedPassage,
    ObjectMatcher,
    fold,
    mask_passage,
    sentences,
    swap_tokens,
    tokens,
)


def in_training_half(key: str) -> bool:
    """The fixed split of the training data: training when the first byte of MD5(key) is even.

    The key is the question id of a stance-train row (so all answers to one question fall on one side)
    and the sentence id of a CompSent-19 row: the same rule as the quality model's split.
    """
    return hashlib.md5(key.encode("utf-8")).digest()[0] % 2 == 0


def ngrams(masked: Sequence[str]) -> list[str]:
    """Unigrams and bigrams (joined by a space) of masked tokens: the terms of the TF-IDF blocks."""
    return [*masked, *(f"{a} {b}" for a, b in zip(masked, masked[1:], strict=False))]


def mark_spans(text: str, spans: Iterable[tuple[int, int, str]]) -> str:
    """``text`` with each character span ``(start, end, marker)`` replaced by `` marker `` (training only).

    The stance training set marks where each object is mentioned, paraphrases included ("refrigerate it"
    for "be stored in the fridge"); marking those with OBJ1 / OBJ2 gives the model many more object
    contexts to learn from than exact matching finds. Of overlapping spans the earliest (then the
    longest) wins.
    """
    kept: list[tuple[int, int, str]] = []
    for start, end, marker in sorted(spans, key=lambda s: (s[0], -s[1])):
        if start < end and (not kept or start >= kept[-1][1]):
            kept.append((start, end, marker))
    for start, end, marker in reversed(kept):
        text = f"{text[:start]} {marker} {text[end:]}"
    return text


@lru_cache(maxsize=1)
def _vader():  # -> SentimentIntensityAnalyzer, built once (it reads its lexicon file)
    try:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    except ImportError:
        from kueri.errors import SetupError

        raise SetupError("the stance model needs vaderSentiment: pip install vaderSentiment==3.3.2") from None
    return SentimentIntensityAnalyzer()


def sentence_sentiments(passage: MaskedPassage) -> list[float | None]:
    """VADER's compound sentiment (-1..1) of each sentence that names an object, None for the others.

    Computed on the masked tokens (OBJ1/OBJ2 are not in VADER's lexicon, so they weigh nothing), which
    makes it the same for a passage and its object-swapped twin.
    """
    analyzer = _vader()
    return [
        analyzer.polarity_scores(" ".join(s))["compound"] if OBJ1 in s or OBJ2 in s else None
        for s in passage.sentences
    ]


#: Names of :func:`dense_features`' values, in order (stored with the model to catch a mismatch). Every
#: ``obj1``/``better`` feature has its ``obj2``/``worse`` twin: swapping the objects swaps the pairs.
DENSE_FEATURES = (
    "obj1_mentions_log", "obj2_mentions_log", "has_obj1", "has_obj2", "has_both",
    "obj1_named_first", "obj2_named_first", "obj1_only_sentences_log", "obj2_only_sentences_log",
    "both_sentences_log", "better_sum", "worse_sum", "better_max", "worse_max", "comparative_max", "tokens_log",
    "obj1_sentiment", "obj2_sentiment", "both_sentiment",
)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def dense_features(passage: MaskedPassage, votes: Sequence[Sequence[float] | None],
                   sentiments: Sequence[float | None]) -> list[float]:
    """Counts and positions of the object mentions, the sentence model's votes and sentiment, aggregated.

    ``votes`` has one entry per sentence: P(BETTER, WORSE, NONE) for sentences naming both objects (BETTER:
    OBJ1 is better), None for the others. Sums say how much comparing a passage does, maxima how clearly.
    ``sentiments`` (:func:`sentence_sentiments`) are averaged over the sentences naming only OBJ1, only
    OBJ2, and both: praise of one object alone is evidence for it.
    """
    all_tokens = passage.tokens
    n1, n2 = all_tokens.count(OBJ1), all_tokens.count(OBJ2)
    first = next((t for t in all_tokens if t in (OBJ1, OBJ2)), None)
    feeling: dict[tuple[bool, bool], list[float]] = {(True, False): [], (False, True): [], (True, True): []}
    for sentence, sentiment in zip(passage.sentences, sentiments, strict=True):
        key = (OBJ1 in sentence, OBJ2 in sentence)
        if key in feeling:
            feeling[key].append(sentiment if sentiment is not None else 0.0)
    only1, only2 = len(feeling[True, False]), len(feeling[False, True])
    better = [v[0] for v in votes if v is not None]
    worse = [v[1] for v in votes if v is not None]
    return [
        math.log1p(n1), math.log1p(n2), float(n1 > 0), float(n2 > 0), float(n1 > 0 and n2 > 0),
        float(first == OBJ1), float(first == OBJ2), math.log1p(only1), math.log1p(only2),
        math.log1p(len(better)), sum(better), sum(worse), max(better, default=0.0), max(worse, default=0.0),
        max((b + w for b, w in zip(better, worse, strict=True)), default=0.0), math.log1p(len(all_tokens)),
        _mean(feeling[True, False]), _mean(feeling[False, True]), _mean(feeling[True, True]),
    ]
