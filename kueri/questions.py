"""questions: the two objects of a free comparative question ("Which is better, a laptop or a desktop?").

A small set of rules, no model: a comparative question names its objects around a *connector*
(``X or Y``, ``X vs Y``, ``X over Y``, ``X better than Y``, ``X compared to Y``, ``between X and Y``).
Each object is the run of words next to the connector up to a *boundary*: punctuation, or a word that
is part of the question's frame rather than of an object (``which``, ``is``, ``better``, ``for``,
``a``, ...). A lower-case one-word first object shares the second one's head noun (``steel or ceramic
knives`` -> ``steel knives``, ``ceramic knives``), as Touché writes such objects.

Its accuracy on a table of real comparative questions (the Touché 2022 topics' titles with their
``<objects>``, and questions in other common forms) is in docs/serve.md; tests/test_questions.py
measures it. A question without two objects gives None: the caller still searches, without them.
"""

from __future__ import annotations

import re
from typing import NamedTuple

#: Words that frame a comparative question but are never part of an object (lower case).
_BOUNDARY = frozenset(" ".join("""
a an the i you we one they he she it its this that these those there my your our their me us them his her
is are was were be been being am do does did should would could can will shall may might must has have had
which what why who whom whose how when where whether if so and but or nor vs versus over than
to for in on at of from about with without by into as like per
better best worse worst more most less least rather instead really actually generally overall
prefer preferred buy use using used take choose pick get go learn study try recommend consider
difference differences compare compared comparing comparison between choice option options
good bad great pros cons advantages disadvantages benefits
""".splitlines()).split())
#: Leading words dropped from the start of the second object ("or *the* TOEFL", "than *to* fry food").
_LEADING = frozenset({"a", "an", "the", "to"})
#: A comparative word right before ``than`` belongs to the frame ("pasta *healthier* than pizza").
_COMPARATIVE = re.compile(r"(?i)^(?:better|worse|more|less|\w{3,}er)$")
#: Connectors in the order they are tried: the first that yields two objects wins.
_CONNECTORS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("vs", re.compile(r"(?i)\s+(?:vs\.?|versus|v\.)\s+")),
    ("between", re.compile(r"(?i)\bbetween\s+(.+?)\s+and\s+")),
    ("or", re.compile(r"(?i)\s+or\s+")),
    ("than", re.compile(r"(?i)\s+than\s+")),
    ("compared", re.compile(r"(?i)\s+(?:compared\s+(?:to|with)|in\s+comparison\s+(?:to|with))\s+")),
    ("over", re.compile(r"(?i)\s+over\s+")),
)
_WORD = re.compile(r"[^\s,;:?!()\[\]{}\"“”]+")
_PIECE_BREAK = re.compile(r"[,;:?!()\[\]{}\"“”]|\.(?:\s|$)")
MAX_OBJECT_WORDS = 4  # "random forest classifiers"; longer runs are frames the boundary list missed


class Objects(NamedTuple):
    first: str
    second: str


def _words(piece: str) -> list[str]:
    return _WORD.findall(piece)


def _is_boundary(word: str) -> bool:
    return word.lower().strip(".") in _BOUNDARY


def _left_object(before: str, connector: str) -> list[str]:
    """The object right before the connector: words back to a boundary or punctuation."""
    piece = _PIECE_BREAK.split(before)[-1]
    words = _words(piece)
    # "pasta healthier than", "skiing more difficult than": the comparative is the frame's
    if connector == "than" and words and _COMPARATIVE.match(words[-1]):
        words = words[:-1]
        if words and words[-1].lower() in {"more", "less"}:
            words = words[:-1]
    taken: list[str] = []
    for word in reversed(words):
        if _is_boundary(word) and word != "The":  # "The Simpsons" is a name; "Is", "Should" are not
            break
        taken.insert(0, word)
    return _trim(taken)


def _right_object(after: str) -> list[str]:
    """The object right after the connector: words up to a boundary or punctuation (a lower-case article first
    is skipped; "The Simpsons" keeps its article)."""
    piece = _PIECE_BREAK.split(after)[0]
    words = _words(piece)
    while words and words[0] in _LEADING:
        words = words[1:]
    taken: list[str] = []
    for word in words:
        if _is_boundary(word) and not (taken == [] and word[:1].isupper()):
            break
        taken.append(word)
    return _trim(taken)


def _trim(words: list[str]) -> list[str]:
    words = [w.strip(".") for w in words]
    words = [w for w in words if w]
    return words if 0 < len(words) <= MAX_OBJECT_WORDS else []


def _share_head(first: list[str], second: list[str]) -> list[str]:
    """``steel`` before ``ceramic knives``: a lower-case one-word first object is a modifier of the second's head."""
    if len(first) == 1 and len(second) >= 2 and first[0].islower():
        return [first[0], *second[1:]]
    return first


def extract_objects(question: str) -> Objects | None:
    """The two objects ``question`` compares, in its order; None when it does not name two."""
    text = " ".join(question.split())
    for name, pattern in _CONNECTORS:
        for match in pattern.finditer(text):
            if name == "between":
                first = _trim([w for w in _words(match.group(1)) if w.lower() not in {"a", "an", "the"}])
            else:
                first = _left_object(text[: match.start()], name)
            second = _right_object(text[match.end():])
            if first and second and [w.lower() for w in first] != [w.lower() for w in second]:
                if name in {"or", "vs"}:
                    first = _share_head(first, second)
                return Objects(" ".join(first), " ".join(second))
    return None


def same_object(found: str, expected: str) -> bool:
    """Whether two object names are the same, up to case and a leading article (the accuracy table's rule)."""

    def key(name: str) -> str:
        words = name.lower().split()
        return " ".join(words[1:] if words[:1] in (["a"], ["an"], ["the"]) else words)

    return key(found) == key(expected)
