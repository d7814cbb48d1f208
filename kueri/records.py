"""Plain data records that flow between the stages.

They import nothing of ours and nothing heavy, like ir_datasets' ``TouchePassageDoc``: every
stage takes and returns these, so stages compose and tests can build them by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

#: Stance labels of the Touché 2022 Task 2 run format, defined here once: FIRST / SECOND favour the topic's first /
#: second object (the stance model's rows are in this order). ``Q0`` (the TREC placeholder the original wrote
#: everywhere) is read as "no stance given" and evaluated as ``NO``.
STANCES = ("FIRST", "SECOND", "NEUTRAL", "NO")
NO_STANCE = "Q0"


class Passage(NamedTuple):
    """One corpus passage; ``id`` is the ClueWeb12 doc id + ``___`` + 1-based passage number."""

    id: str
    contents: str
    doct5query: str = ""  # the DocT5Query expansion, "" when the corpus is not expanded
    chatnoir_url: str | None = None


class Topic(NamedTuple):
    """A comparative question with its two objects, as in ``topics-task2.xml``."""

    number: str  # kept as written in the file: it is copied to run files verbatim
    title: str
    objects: tuple[str, str]
    description: str = ""
    narrative: str = ""


class Hit(NamedTuple):
    """One retrieved passage of a topic; a run keeps hits in rank order."""

    doc: str
    score: float
    stance: str = NO_STANCE


#: A run: topic number -> hits in rank order (rank 1 first). Topics keep insertion order.
Run = dict[str, list[Hit]]

#: Passage texts by id, in the order asked (e.g. the stored ``contents`` of an index): what a stage reads texts with.
Texts = Callable[[Sequence[str]], Sequence[str]]


def topic_key(number: str) -> tuple[int, int, str]:
    """Sort key of topic numbers: numeric order (as the original looped over topics 0..100), then other ids as text."""
    return (0, int(number), "") if number.isdigit() else (1, 0, number)
