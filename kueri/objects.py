"""objects: a comparative topic's two objects found in text, and masked as ``OBJ1`` / ``OBJ2``.

Shared by the stance labels (:mod:`kueri.stance`) and the second stage's features
(:mod:`kueri.second_stage.features`), so both find an object in the same places. Matching works on
tokens, case-insensitively, with plurals and possessives folded (``cats`` matches ``cat``, ``Apple's``
matches ``Apple``). Short all-caps objects (``R``, ``PC``) match only where the text does not write them
in lower case. Multi-word objects also match by a short form: ``real Christmas tree`` vs ``fake
Christmas tree`` match ``real`` / ``fake`` (the words the two objects do not share), and ``Muhammad
Ali`` matches ``Ali`` (the last capitalised word). Plain Python, deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import NamedTuple

from kueri import resources

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
_FUNCTION_WORDS = resources.word_list("object-function-words")


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
        return [label or (words[i] if words[i] in _SWAP else words[i].lower()) for i, _, label in self.scan(words)]

    def scan(self, words: Sequence[str]) -> Iterator[tuple[int, int, str | None]]:
        """``words`` cut into object mentions and other words: ``(start, end, OBJ1 | OBJ2 | None)`` word spans."""
        keys = [fold(w) for w in words]
        i, n = 0, len(words)
        while i < n:
            for pattern in self._by_first.get(keys[i], ()):
                end = i + len(pattern.keys)
                if tuple(keys[i:end]) == pattern.keys and not (pattern.case_sensitive and words[i].islower()):
                    yield i, end, pattern.label
                    i = end
                    break
            else:
                yield i, i + 1, None
                i += 1


def swap_tokens(masked: Iterable[str]) -> list[str]:
    """OBJ1 and OBJ2 exchanged: the same text as if the topic had named its objects the other way round."""
    return [_SWAP.get(t, t) for t in masked]


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


def mentions(text: str, matcher: ObjectMatcher) -> list[tuple[int, int, str]]:
    """The object mentions in ``text`` as ``(start, end, OBJ1 | OBJ2)`` character spans, found by the rules
    :meth:`ObjectMatcher.mask` uses: what a page highlights is what the stance model read as an object."""
    found = list(_TOKEN.finditer(text))
    return [(found[i].start(), found[end - 1].end(), label)
            for i, end, label in matcher.scan([m.group() for m in found]) if label]
