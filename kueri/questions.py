"""questions: the two objects of a free comparative question ("Which is better, a laptop or a desktop?").

A small set of rules, no model: a comparative question names its objects around a *connector*
(``X or Y``, ``X vs Y``, ``X over Y``, ``X better than Y``, ``X compared to Y``, ``between X and Y``).
Each object is the run of words next to the connector up to a *boundary*: punctuation, or a word that
is part of the question's frame rather than of an object (``which``, ``is``, ``better``, ``for``,
``a``, ...). A lower-case one-word first object shares the second one's head noun (``steel or ceramic
knives`` -> ``steel knives``, ``ceramic knives``), as Touché writes such objects.

Besides the objects, :func:`analyse` says whether a question compares at all (two objects and a cue of
choice: a comparative word, ``which``, ``should``, ``prefer``, ``vs``, ``than``, ...) and finds its *aspect*,
what the objects are compared on: a comparative adjective of the frame (``Which is *cheaper*``, ``X *faster*
than Y``, ``Which is *more difficult*``; the generic ``better`` / ``worse`` are none) and a purpose (``for
*gaming*``, ``in terms of *portability*``, ``better at *X*``).

Its accuracy on a table of real questions (the Touché 2022 topics' titles with their ``<objects>``,
questions in other common forms, and questions that compare nothing) is in docs/serve.md;
tests/test_questions.py measures it. A question without two objects gives None: the caller still
searches, without them.
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
#: Words that end the second object when they follow it: "Python or Java *first*?", "an iPad or a laptop *now*?"
#: (time and sequence adverbs; a question's frame, never part of a name).
_TRAILING = frozenset(" ".join("""
first next now today tonight tomorrow nowadays currently instead anyway anymore again later then too also
either yet already still ever really finally eventually soon right
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
    elif connector == "than" and len(words) >= 2 and words[-2].lower() in {"more", "less"}:
        words = words[:-2]  # "electric cars more reliable than": any adjective after more / less
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
        if taken and word.lower() in _TRAILING:
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


#: Words that make a question with two objects a comparison (a choice between them is asked for).
_CUES = re.compile(r"(?i)\b(?:better|best|worse|worst|more|less|most|least|prefer\w*|choose|choice|pick|should|which|"
                   r"vs\.?|versus|compare\w*|comparison|difference|differences|pros|cons|advantages?|disadvantages?|"
                   r"than|rather|instead|over)\b")
#: Nouns and other words ending in -er/-est that are no comparative (so no cue and no aspect).
_NOT_COMPARATIVE = frozenset(" ".join("""
computer computers water paper never other either whether neither under over after order user users player
players number power answer rather later per her summer winter river letter matter corner center centre
member members cancer finger father mother brother sister teacher teachers driver drivers printer printers
server servers controller tower weather together ever however whatever wherever whoever forever manner dinner
beer butter filter filters interest best worst most least rest test west east guest chest forest nest latest
""".splitlines()).split())
_GENERIC = frozenset({"better", "worse", "best", "worst", "more", "less", "most", "least", "good", "bad"})
#: A comparative adjective of the frame: "Which is cheaper", "Is X faster than", "Which is more difficult".
_ADJECTIVE_AFTER = re.compile(r"(?i)\b(?:which|what|who)\s+(?:one\s+|\w+\s+)?(?:is|are|was|were|would\s+be)\s+"
                              r"(?:the\s+)?((?:more|less|most|least)(?:\s+[a-z]+){1,2}|[a-z]+)")
_ADJECTIVE_BEFORE_THAN = re.compile(r"(?i)\b((?:more|less)(?:\s+[a-z]+){1,2}|[a-z]+)\s+(?:than|to\s+\w+\s+than)\b")
_IS_IT = re.compile(r"(?i)\bis\s+it\s+((?:more|less)(?:\s+[a-z]+){1,2}|[a-z]+)\s+to\b")
#: A purpose or dimension: "for gaming", "in terms of portability", "better at learning languages".
_PURPOSE = re.compile(r"(?i)(?:\bfor|\bin\s+terms\s+of|\bwhen\s+it\s+comes\s+to|\b(?:better|worse|best)\s+at)\s+"
                      r"([^,;:?!.()\"]+)")
_PURPOSE_STOP = frozenset(" ".join("""
or and vs versus than which what who is are was were should would could can will do does did i you we why how
when where if whether but so because
""".splitlines()).split())
_ARTICLES = frozenset({"a", "an", "the", "my", "your", "our", "their", "his", "her", "its"})
MAX_ASPECT_WORDS = 5


class Question(NamedTuple):
    """What :func:`analyse` finds in a question."""

    objects: Objects | None
    aspect: str | None  # what the objects are compared on ("cheaper", "gaming"); None: no aspect named
    comparative: bool  # two objects and a cue of choice between them


def _is_comparative_word(word: str) -> bool:
    lower = word.lower()
    return lower not in _NOT_COMPARATIVE and (lower in {"more", "less"} or lower.endswith(("er", "est"))
                                              and len(lower) > 4)


def _adjective(text: str, objects: Objects | None) -> str | None:
    """The comparative adjective of the frame, unless generic (better, worse) or part of an object."""
    names = {w.lower() for name in (objects or ()) for w in name.split()}
    for pattern in (_ADJECTIVE_AFTER, _IS_IT, _ADJECTIVE_BEFORE_THAN):
        for match in pattern.finditer(text):
            words = match.group(1).split()
            head = words[0].lower()
            if head in {"more", "less", "most", "least"}:
                words = [w for w in words[1:] if w.lower() not in _BOUNDARY]
                if words and not names & {w.lower() for w in words}:
                    return " ".join([head, *words]).lower()
                continue
            if len(words) == 1 and head not in _GENERIC and head not in names and _is_comparative_word(head):
                return head
    return None


def _purpose(text: str, objects: Objects | None) -> str | None:
    """The words after ``for`` / ``in terms of`` / ``better at``, up to punctuation or the question's frame."""
    names = " ".join(objects).lower() if objects else ""
    for match in _PURPOSE.finditer(text):
        words = match.group(1).split()
        while words and words[0].lower() in _ARTICLES:
            words = words[1:]
        taken: list[str] = []
        for word in words:
            if word.lower() in _PURPOSE_STOP:
                break
            taken.append(word)
        while taken and taken[-1].lower() in _ARTICLES | _TRAILING:
            taken.pop()
        if taken and len(taken) <= MAX_ASPECT_WORDS and " ".join(taken).lower() not in names:
            return " ".join(taken)
    return None


def analyse(question: str) -> Question:
    """The objects, the aspect and whether ``question`` compares (see the module's docstring)."""
    text = " ".join(question.split())
    objects = extract_objects(text)
    aspect_parts = [part for part in (_adjective(text, objects), _purpose(text, objects)) if part]
    aspect = ", ".join(aspect_parts) if aspect_parts else None
    if objects is None:
        return Question(None, aspect, False)
    starts_with_object = text.lower().startswith(objects.first.lower().split()[0])
    cue = _CUES.search(text) is not None or any(_is_comparative_word(w) for w in _words(text))
    return Question(objects, aspect, cue or starts_with_object)


def aspect_terms(aspect: str | None) -> list[str]:
    """The aspect's content words as stems to look for in a passage: ``cheaper`` -> ``cheap``, ``healthier`` ->
    ``health``, ``more difficult`` -> ``difficult``, ``data analysis`` -> ``data``, ``analysis``."""
    if not aspect:
        return []
    terms = []
    for word in re.findall(r"[A-Za-z][A-Za-z'-]+", aspect):
        lower = word.lower()
        if lower in _BOUNDARY or lower in _GENERIC or lower in _ARTICLES or len(lower) < 3:
            continue
        stem = lower
        if stem.endswith("ier") and len(stem) > 5 or stem.endswith("est") and len(stem) > 6:
            stem = stem[:-3]
        elif stem.endswith("er") and len(stem) > 5 and lower not in _NOT_COMPARATIVE:
            stem = stem[:-2]
        if len(stem) >= 4 and stem[-1] == stem[-2] and stem[-1] not in "aeiouls":  # bigger -> big
            stem = stem[:-1]
        terms.append(stem)
    return list(dict.fromkeys(terms))


def speaks_of(text: str, terms: list[str]) -> bool:
    """Whether ``text`` has a word that starts with one of the aspect's stems (:func:`aspect_terms`)."""
    return bool(terms) and re.search(r"(?i)\b(?:" + "|".join(map(re.escape, terms)) + r")", text) is not None
