"""The answer cache of ``kueri serve``: the rankings of the latest questions, so a repeated question is answered
without queueing (only the passages not shown yet are filled on the pipeline thread)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from kueri.config import RunConfig
from kueri.records import Hit, Topic
from kueri.serve.topics import title_key

ANSWER_CACHE = 256  # rankings kept (each a whole ranking of ids and scores: a few tens of kB)


@dataclass
class Ranking:
    """A question's whole ranking, as its session made it (kept in the cache), and what the configuration's stages
    added for the passages shown so far: their texts, quality, labels (in ``hits``), deciding sentences."""

    topic: Topic
    objects_from: str
    hits: list[Hit]
    config: RunConfig
    seconds: float
    note: str = ""
    quality: dict[str, float] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    deciding_sentences: dict[str, str | None] = field(default_factory=dict)

    def filled(self, k: int) -> bool:
        """Whether its top ``k`` passages have been filled."""
        return all(hit.doc in self.texts for hit in self.hits[:k])


class AnswerCache:
    """The latest :data:`ANSWER_CACHE` rankings, by question, objects and configuration; safe across threads (the
    event loop reads it, the pipeline thread writes it)."""

    def __init__(self, size: int = ANSWER_CACHE) -> None:
        self.size = size
        self._rankings: OrderedDict[tuple[Any, ...], Ranking] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(question: str, objects: tuple[str, str] | None, config: str) -> tuple[Any, ...]:
        return title_key(question), objects, config

    def __contains__(self, key: tuple[Any, ...]) -> bool:
        with self._lock:
            return key in self._rankings

    def get(self, key: tuple[Any, ...], filled: int | None = None) -> Ranking | None:
        """The kept ranking (the latest used; with ``filled``, only when its top ``filled`` passages are)."""
        with self._lock:
            ranking = self._rankings.get(key)
            if ranking is None or (filled is not None and not ranking.filled(filled)):
                return None
            self._rankings.move_to_end(key)
            return ranking

    def put(self, key: tuple[Any, ...], ranking: Ranking) -> None:
        with self._lock:
            self._rankings[key] = ranking
            self._rankings.move_to_end(key)
            while len(self._rankings) > self.size:
                self._rankings.popitem(last=False)
