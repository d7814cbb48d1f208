"""Real, labelled texts set inside the web-page surroundings kueri's team wrote, as training data for the passage
stance models: the stance answers and CompSent-19's training sentences as a crawled page would serve them (headers,
menus and forum furniture before, signatures, footers and off-topic comments after, the ends cut mid-word), their
labels kept.

A retrieved passage is mostly page furniture around an argument, or around nothing; the answers and sentences are
real arguments without any. The surroundings (``kueri/resources/training/surroundings/``; its README says how they
were written and checked) take no position on any pair, so a composed passage keeps its real text's label. The
passages' length is drawn from the shipped sample's length quantiles (their shape, never their text). Composing is
seeded: the same data give the same passages.
"""

from __future__ import annotations

import bisect
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kueri import resources

SNIPPETS = resources.path("training", "surroundings", "snippets.jsonl")
#: Words per passage at these quantiles of the shipped sample's 2,607 passages (measured; interpolated between).
LENGTH_QUANTILES = ((0.0, 100), (0.1, 122), (0.25, 133), (0.5, 144), (0.75, 160), (0.9, 195), (1.0, 250))
#: How often the first snippet before the text starts, and the last after it ends, mid-word (a passage's cut ends).
CUT = 0.6
#: Snippets around one text at the most (a short sentence needs several to reach a passage's length).
MOST = 5
SEED = 2012
PLACEHOLDERS = ("{o1}", "{o2}", "{o}")


@dataclass(frozen=True)
class Snippet:
    place: str  # "before" or "after" the real text
    text: str  # may name the objects as {o1}, {o2} or {o} (either)


def read_snippets(path: Path = SNIPPETS) -> list[Snippet]:
    snippets = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
            snippets.append(Snippet(row["place"], row["text"]))
        except (json.JSONDecodeError, KeyError) as exc:
            raise SystemExit(f"{path}:{number}: not a snippet ({exc})") from None
    return snippets


def target_words(rng: random.Random) -> int:
    """A passage length drawn from :data:`LENGTH_QUANTILES` (linear between the quantiles)."""
    u = rng.random()
    at = max(1, bisect.bisect_left([q for q, _ in LENGTH_QUANTILES], u))
    (q0, w0), (q1, w1) = LENGTH_QUANTILES[at - 1], LENGTH_QUANTILES[at]
    return round(w0 + (w1 - w0) * (u - q0) / (q1 - q0))


def fill(text: str, first: str, second: str, rng: random.Random) -> str:
    """A snippet's placeholders replaced by the objects' names ({o}: one of the two, drawn once per snippet)."""
    either = first if rng.random() < 0.5 else second
    return text.replace("{o1}", first).replace("{o2}", second).replace("{o}", either)


def cut_start(text: str, rng: random.Random) -> str:
    """``text`` from a point in its first half on, as a passage cut out of a page starts (often mid-word)."""
    return text[rng.randint(len(text) // 4, len(text) // 2):].lstrip()


def cut_end(text: str, rng: random.Random) -> str:
    return text[: rng.randint(len(text) // 2, 3 * len(text) // 4)].rstrip()


class Surroundings:
    """Composes passages: a real text with snippets drawn around it until the passage reaches a drawn length."""

    def __init__(self, snippets: Sequence[Snippet] | None = None, seed: int = SEED) -> None:
        snippets = read_snippets() if snippets is None else snippets
        self.before = [s.text for s in snippets if s.place == "before"]
        self.after = [s.text for s in snippets if s.place == "after"]
        self.rng = random.Random(seed)

    def compose(self, text: str, first: str, second: str) -> str:
        rng = self.rng
        need = target_words(rng) - len(text.split())
        head: list[str] = []
        tail: list[str] = []
        while need > 0 and len(head) + len(tail) < MOST:
            side, pool = (head, self.before) if rng.random() < 0.5 else (tail, self.after)
            snippet = fill(rng.choice(pool), first, second, rng)
            if side is head:
                head.insert(0, snippet)
            else:
                tail.append(snippet)
            need -= len(snippet.split())
        if head and rng.random() < CUT:
            head[0] = cut_start(head[0], rng)
        if tail and rng.random() < CUT:
            tail[-1] = cut_end(tail[-1], rng)
        return "\n\n".join([*head, text, *tail])
