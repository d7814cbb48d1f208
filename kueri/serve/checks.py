"""The checks of what a reader sends ``kueri serve``, and its limits: each defined here once, for the routes
(:mod:`kueri.serve.app`) and for the API's document (:mod:`kueri.serve.openapi`)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping

from kueri.errors import KueriError

MAX_QUESTION = 500  # characters
MAX_OBJECT = 100  # characters per object, and of an aspect
MAX_ID = 200  # characters of a passage id
MAX_K = 1000  # a run keeps at most 1000 hits a topic
PAGE_K = 10  # passages shown and returned unless asked for more
PAGE_MAX_K = 100  # passages the page shows at most
MAX_BODY = 10_000  # bytes of a feedback request
FORMATS = ("json", "run")  # what /api/search sends: the answer as JSON, or its passages as a Touché run file
FLAGS = ("0", "1")  # an on/off parameter (narrow)
API_PARAMETERS = ("q", "k", "objects", "config", "aspect", "narrow", "format")
PAGE_PARAMETERS = ("q", "first", "second", "aspect", "narrow", "k", "config")
PYSERINI_PARAMETERS = ("query", "hits", "qid")


class BadQuestion(KueriError):
    """A question or parameter the engine cannot answer: the message says why (HTTP 400)."""


def check_text(text: str, what: str, limit: int) -> str:
    """``text`` with its whitespace collapsed; a :class:`BadQuestion` if empty, too long or not text."""
    if any(unicodedata.category(c) in ("Cc", "Cs", "Co") and c not in "\t\n\r" for c in text) or "\ufffd" in text:
        raise BadQuestion(f"the {what} holds binary data or control characters")
    text = " ".join(text.split())
    if not text:
        raise BadQuestion(f"the {what} is empty")
    if len(text) > limit:
        raise BadQuestion(f"the {what} is {len(text)} characters long; at most {limit} are accepted")
    return text


def parse_objects(text: str) -> tuple[str, str]:
    """``"laptop, desktop"`` (as a topic's ``<objects>``) -> two checked object names."""
    items = text.split(",")
    if len(items) != 2:
        raise BadQuestion(f"objects must be two names separated by a comma, got {len(items)} item(s)")
    first, second = (check_text(item, "object", MAX_OBJECT) for item in items)
    return first, second


def known_parameters(query: Mapping[str, str], known: Iterable[str]) -> dict[str, str]:
    """The query's parameters; an unknown one is a :class:`BadQuestion` (a typo must not be silently ignored)."""
    known = tuple(known)
    unknown = sorted(set(query) - set(known))
    if unknown:
        raise BadQuestion(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return dict(query)


def whole_number(text: str | None, default: int, most: int, name: str = "k") -> int:
    """A count between 1 and ``most`` (``default`` when not given)."""
    if text is None or text == "":
        return default
    try:
        k = int(text)
    except ValueError:
        raise BadQuestion(f"{name} must be a whole number, not {text[:20]!r}") from None
    if not 1 <= k <= most:
        raise BadQuestion(f"{name} must be between 1 and {most}, not {k}")
    return k


def aspect_of(given: Mapping[str, str]) -> str | None:
    """The aspect asked for: None when the parameter is absent (the question's own), "" for none."""
    if "aspect" not in given:
        return None
    text = " ".join(given["aspect"].split())
    return check_text(text, "aspect", MAX_OBJECT) if text else ""


def flag(text: str | None, name: str) -> bool:
    """An on/off parameter: absent, empty or ``0`` is off, ``1`` on."""
    if text in (None, "", FLAGS[0]):
        return False
    if text == FLAGS[1]:
        return True
    raise BadQuestion(f"{name} must be 0 or 1, not {text[:20]!r}")


def answer_format(text: str | None) -> str:
    """What /api/search sends (:data:`FORMATS`; the first when not given)."""
    if text is None:
        return FORMATS[0]
    if text not in FORMATS:
        raise BadQuestion(f"format must be {' or '.join(FORMATS)}, not {text[:20]!r}")
    return text
