"""Text features of the stance model (:mod:`kueri.stance.model`): object matching, masking, n-grams.

One module for training (``scripts/train_stance.py``) and prediction, so the two can never tokenize
or mask differently. Plain Python, deterministic, nothing fetched.

The central idea is **object masking**: every mention of the topic's first object becomes the token
``OBJ1`` and every mention of the second ``OBJ2``. The models then learn patterns such as
``OBJ1 is better than OBJ2`` or ``go with OBJ2`` whatever the objects are, and a label maps to FIRST or
SECOND by which object is which. Swapping ``OBJ1`` and ``OBJ2`` (:func:`swap_tokens`) turns a text
that favours the first object into one that favours the second: training doubles its data that way,
and prediction averages both directions so that swapping the topic's objects swaps FIRST and SECOND
exactly.

Matching works on tokens, case-insensitively, with plurals and possessives folded (``cats`` matches
``cat``, ``Apple's`` matches ``Apple``). Short all-caps objects (``R``, ``PC``, ``ASP``) match only
where the text does not write them in lower case, so ``R`` is not every "r". Multi-word objects also
match by a short form, because passages rarely repeat the full phrase: ``real Christmas tree`` vs
``fake Christmas tree`` match ``real`` / ``fake`` (the words the two objects do not share), and
``Muhammad Ali`` matches ``Ali`` (the last capitalised word).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import NamedTuple

#: Tokens that replace mentions of the first / second object. Upper case: every other token is lower-cased,
#: so no word of a text can be mistaken for them.
OBJ1, OBJ2 = "OBJ1", "OBJ2"
_SWAP = {OBJ1: OBJ2, OBJ2: OBJ1}

# Words with their inner apostrophes ("don't", "Apple's"); hyphens and other punctuation split words.
_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) before whitespace, or at a line break.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+|\s*[\r\n]+\s*")
_POSSESSIVE = re.compile(r"['’]s$")
_ACRONYM_PLURAL = re.compile(r"[A-Z][A-Z0-9]+s")

# Words that never identify an object on their own (a short form made only of these is dropped).
_FUNCTION_WORDS = frozenset({
    "a", "an", "the", "of", "in", "on", "at", "to", "for", "with", "by", "from", "and", "or", "but", "vs",
    "versus", "is", "are", "be", "it", "its", "my", "your", "their", "our", "do", "does", "use", "using", "than",
    "more", "less", "one", "some", "all", "any", "this", "that", "these", "those", "i", "you", "we", "they",
})


def in_training_half(key: str) -> bool:
    """The fixed split of the training data: training when the first byte of MD5(key) is even.

    The key is the question id of a stance-train row (so all answers to one question fall on one side)
    and the sentence id of a CompSent-19 row: the same rule as the quality model's split.
    """
    return hashlib.md5(key.encode("utf-8")).digest()[0] % 2 == 0


def tokens(text: str) -> list[str]:
    """The words of ``text`` in their original case (see :data:`_TOKEN`)."""
    return _TOKEN.findall(text)


def sentences(text: str) -> list[str]:
    """``text`` split into sentences at end punctuation and line breaks (empty pieces dropped).

    A regular expression, not a trained splitter: web passages (menus, lists, titles) have few real
    sentences anyway, and this needs no data files.
    """
    return [piece for piece in _SENTENCE_BREAK.split(text) if piece and not piece.isspace()]


@lru_cache(maxsize=200_000)
def fold(word: str) -> str:
    """A word lower-cased with possessive and plural endings removed: the key objects are matched by.

    Deliberately light (no stemmer): ``training`` must not match the object ``Train``. Words of three
    letters keep a final s ("gas", "bus"), except all-caps plurals ("PCs").
    """
    w = _POSSESSIVE.sub("", word.lower().replace("’", "'"))
    if _ACRONYM_PLURAL.fullmatch(word):  # "PCs", "Macs" is handled below; "MP3s" too
        return w[:-1]
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("es") and w[-3] in "sxz" or w.endswith(("ches", "shes")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


class _Pattern(NamedTuple):
    keys: tuple[str, ...]  # folded words to match in sequence
    label: str  # OBJ1 or OBJ2
    case_sensitive: bool  # an all-caps short object: the text's word must not be all lower case


def _is_acronym(word: str) -> bool:
    return len(word) <= 3 and word.isupper()


def _object_patterns(words: Sequence[str], other: Sequence[str], label: str) -> list[_Pattern]:
    """The full phrase, and a short form for multi-word objects (see the module docstring)."""
    if not words:
        return []
    case = len(words) == 1 and _is_acronym(_POSSESSIVE.sub("", words[0]))
    patterns = [_Pattern(tuple(fold(w) for w in words), label, case)]
    if len(words) == 1:
        return patterns
    other_keys = {fold(w) for w in other}
    content = [w for w in words if w.lower() not in _FUNCTION_WORDS]
    distinct = [w for w in content if fold(w) not in other_keys]
    short: list[str] = []
    if distinct and len(distinct) < len(content):
        # The objects share words ("real/fake Christmas tree"): the words they do not share tell them apart.
        short = distinct
    elif distinct:
        capitalised = [w for w in distinct if w[:1].isupper()]
        # "Muhammad Ali" -> "Ali", "Leica camera" -> "Leica", "major in philosophy" -> "philosophy".
        short = [capitalised[-1]] if capitalised else [distinct[-1]]
    if short and tuple(fold(w) for w in short) != patterns[0].keys:
        patterns.append(_Pattern(tuple(fold(w) for w in short), label, len(short) == 1 and _is_acronym(short[0])))
    return patterns


class ObjectMatcher:
    """Finds the mentions of a topic's two objects in token lists and masks them as OBJ1 / OBJ2."""

    def __init__(self, first: str, second: str) -> None:
        words1, words2 = tokens(first), tokens(second)
        patterns = _object_patterns(words1, words2, OBJ1) + _object_patterns(words2, words1, OBJ2)
        # Longest first: "gas stove" wins over "gas"; on equal length the first object's pattern wins.
        patterns.sort(key=lambda p: -len(p.keys))
        self.patterns = patterns
        self._by_first: dict[str, list[_Pattern]] = {}
        for pattern in patterns:
            self._by_first.setdefault(pattern.keys[0], []).append(pattern)

    def mask(self, words: Sequence[str]) -> list[str]:
        """``words`` lower-cased, each object mention replaced by one OBJ1 / OBJ2 token."""
        keys = [fold(w) for w in words]
        out: list[str] = []
        i, n = 0, len(words)
        while i < n:
            for pattern in self._by_first.get(keys[i], ()):
                end = i + len(pattern.keys)
                if tuple(keys[i:end]) == pattern.keys and not (pattern.case_sensitive and words[i].islower()):
                    out.append(pattern.label)
                    i = end
                    break
            else:
                out.append(words[i] if words[i] in _SWAP else words[i].lower())
                i += 1
        return out


def swap_tokens(masked: Iterable[str]) -> list[str]:
    """OBJ1 and OBJ2 exchanged: the same text as if the topic had named its objects the other way round."""
    return [_SWAP.get(t, t) for t in masked]


def ngrams(masked: Sequence[str]) -> list[str]:
    """Unigrams and bigrams (joined by a space) of masked tokens: the terms of the TF-IDF blocks."""
    return [*masked, *(f"{a} {b}" for a, b in zip(masked, masked[1:], strict=False))]


class MaskedPassage(NamedTuple):
    """A passage as the stance model sees it: its sentences as masked token lists."""

    sentences: list[list[str]]

    @property
    def tokens(self) -> list[str]:
        return [t for sentence in self.sentences for t in sentence]

    def swapped(self) -> MaskedPassage:
        return MaskedPassage([swap_tokens(s) for s in self.sentences])


def mask_passage(text: str, matcher: ObjectMatcher) -> MaskedPassage:
    """Split ``text`` into sentences and mask the objects in each (empty sentences dropped)."""
    masked = (matcher.mask(tokens(sentence)) for sentence in sentences(text))
    return MaskedPassage([s for s in masked if s])


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
    first = next((t for t in all_tokens if t in _SWAP), None)
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
