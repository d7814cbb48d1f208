"""Text features of the offline argument-quality model (:mod:`kueri.quality.offline`).

One module for training (``scripts/train_quality.py`` hands these functions to scikit-learn as
analyzers) and prediction (:class:`~kueri.quality.offline.OfflineQualityModel`), so the two can
never tokenize differently. Everything is plain Python and deterministic: no data is fetched.
"""

from __future__ import annotations

import hashlib
import math
import re
from operator import add

from kueri import resources

#: Character n-gram lengths (the issue's feasibility runs: character n-grams carry most of the signal).
CHAR_NGRAM_RANGE = (1, 4)

# As scikit-learn's char analyzer: runs of 2+ whitespace characters become one space.
_WHITESPACE_RUNS = re.compile(r"\s\s+")
# As scikit-learn's default token_pattern: words of 2+ word characters.
_WORD = re.compile(r"(?u)\b\w\w+\b")
_SENTENCE_END = re.compile(r"[.!?]+(?:\s|$)")
_FUNCTION_WORDS = resources.word_list("quality-function-words")


def in_training_half(passage_id: str) -> bool:
    """The fixed split of the Debater scores: training when the first byte of MD5(id) is even."""
    return hashlib.md5(passage_id.encode("utf-8")).digest()[0] % 2 == 0


def model_text(contents: str) -> str:
    """What the quality scorers see: the contents without backslashes (the original sent exactly that)."""
    return contents.replace("\\", "")


def char_ngrams(text: str) -> list[str]:
    """Lower-cased character 1-4-grams (:data:`CHAR_NGRAM_RANGE`), whitespace runs collapsed.

    Each length is built from the previous one with ``map(add, ...)``, which runs in C: about twice
    as fast as slicing in a Python loop (this is the hot loop of the offline scorer).
    """
    text = _WHITESPACE_RUNS.sub(" ", text.lower())
    grams = list(text)
    previous = grams
    for n in range(2, CHAR_NGRAM_RANGE[1] + 1):
        previous = list(map(add, previous, text[n - 1 :]))
        grams += previous
    return grams


def word_tokens(text: str) -> list[str]:
    """Lower-cased words of two or more word characters."""
    return _WORD.findall(text.lower())


#: Names of :func:`text_features`' values, in order (stored with the model to catch a mismatch).
TEXT_FEATURES = (
    "log_chars", "log_words", "upper_ratio", "digit_ratio", "alpha_ratio", "space_ratio", "symbol_ratio",
    "non_ascii_ratio", "alpha_word_ratio", "mean_word_length", "capitalised_words", "periods", "commas",
    "pipes", "slashes", "questions", "exclamations", "colons", "parentheses", "double_quotes", "apostrophes",
    "hyphens", "log_sentences", "words_per_sentence", "distinct_words", "function_words", "all_caps_words",
    "long_words", "ends_with_punctuation", "starts_capitalised",
)


def text_features(text: str) -> list[float]:
    """Cheap surface features of well-formed prose versus navigation, lists and boilerplate."""
    chars = max(len(text), 1)
    words = text.split()
    n_words = max(len(words), 1)
    sentences = len(_SENTENCE_END.findall(text))
    # map() of str methods counts in C (a Python loop over the characters costs as much as the n-grams).
    alpha = sum(map(str.isalpha, text))
    upper = sum(map(str.isupper, text))
    digit = sum(map(str.isdigit, text))
    space = sum(map(str.isspace, text))
    symbol = len(text) - sum(map(str.isalnum, text)) - space
    non_ascii = len(text) - len(text.encode("ascii", "ignore"))
    lowered = [w.lower() for w in words]
    values = [
        math.log1p(len(text)), math.log1p(len(words)),
        upper / chars, digit / chars, alpha / chars, space / chars, symbol / chars, non_ascii / chars,
        sum(w.isalpha() for w in words) / n_words,
        sum(len(w) for w in words) / n_words,
        sum(w[:1].isupper() for w in words) / n_words,
    ]
    values += [text.count(mark) / n_words for mark in (".", ",", "|", "/", "?", "!", ":", "(", '"', "'", "-")]
    values += [
        math.log1p(sentences), len(words) / (sentences + 1),
        len(set(lowered)) / n_words,
        sum(w in _FUNCTION_WORDS for w in lowered) / n_words,
        sum(w.isupper() and len(w) > 1 for w in words) / n_words,
        sum(len(w) > 20 for w in words) / n_words,
        float(text.rstrip()[-1:] in (".", "!", "?", '"')),
        float(text[:1].isupper()),
    ]
    return values
