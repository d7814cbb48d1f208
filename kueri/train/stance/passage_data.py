"""The passage stance models' training data (the web-passage set's parts, the stance answers, CompSent-19's training
half) as items with masked passages, and the stance encoder's states of them, computed once and kept in a cache
folder (``--cache``): the heads of every fold and fold assignment are fitted on them.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kueri.encoders.cross import CrossEncoder, pair_tokenizer
from kueri.objects import OBJ1, OBJ2, MaskedPassage, ObjectMatcher, mask_passage
from kueri.stance.encoders import HYPOTHESIS, SENTENCE_MODEL, masked_text
from kueri.stance.features import in_training_half
from kueri.train.data import WEB, compsent_rows, load_compsent, load_stance_train, web_rows
from kueri.train.stance.surroundings import SEED, Surroundings

#: Training parts of the web set beside ``train.jsonl``, read with ``--with-part`` (stance-v3 read train.jsonl alone;
#: the third is shaped like crawled passages: longer, mostly page furniture around an argument or around nothing).
EXTRA_TRAINING_PARTS = ("second-train", "third-train")
#: The frozen parts, each read only to judge an adoption (the web-passage set's README says which were read when).
FROZEN_PARTS = ("frozen", "second-frozen", "third-frozen")
#: CompSent-19's training sentences set inside page surroundings (``--composed``): a share, for the states' cost.
COMPOSED_SENTENCES = 1200
#: Word pieces of one input, hypothesis included: most web passages of 40-250 words fit.
MAX_TOKENS = 256
COMPSENT_LABELS = {"BETTER": "FIRST", "WORSE": "SECOND", "NONE": "NO"}


@dataclass(frozen=True)
class Item:
    key: str
    group: str
    source: str
    passage: MaskedPassage
    label: str
    pair: str = ""  # the web set's object pair (the frozen parts' bootstrap draws pairs)
    origin: str = ""  # a composed passage's real text's group: a fold holding that group out drops this item too


def web_items(split: str, folder: Path = WEB) -> list[Item]:
    """The web-passage set's ``train`` or ``frozen`` part; group = its domain (each domain's pairs were written by
    the same writers, so its pairs and writing batches fall in one fold together)."""
    items = []
    for row in web_rows(split, folder):
        passage = mask_passage(row["text"], ObjectMatcher(row["object_1"], row["object_2"]))
        items.append(Item(row["id"], row["domain"], "web", passage, row["stance"],
                          f"{row['object_1']} | {row['object_2']}".lower()))
    return items


def answer_items() -> list[Item]:
    return [Item(f"answer:{i}", qid, "answers", passage, label)
            for i, (qid, passage, label) in enumerate(load_stance_train())]


def compsent_items(training_half: bool) -> list[Item]:
    return [Item(f"compsent:{sid}", sid, "compsent", MaskedPassage([tokens]), COMPSENT_LABELS[label])
            for sid, tokens, label in load_compsent() if in_training_half(sid) == training_half]


def composed_items(surroundings: Surroundings | None = None) -> list[Item]:
    """The stance answers (each once) and :data:`COMPSENT_LABELS` of CompSent-19's training sentences (a seeded
    draw of :data:`COMPOSED_SENTENCES`) set inside page surroundings, their labels kept. A composed answer's origin
    is its question, so a cross-validation over the answers never trains on a held-out answer in surroundings."""
    surroundings = surroundings or Surroundings()
    items = [Item(f"composed-answer:{i}", qid, "composed-answers", passage, label, origin=qid)
             for i, (qid, passage, label) in enumerate(load_stance_train(surroundings.compose))]
    rows = [row for row in compsent_rows() if in_training_half(row["id"])]
    for row in sorted(random.Random(SEED).sample(rows, min(COMPOSED_SENTENCES, len(rows))), key=lambda r: r["id"]):
        text = surroundings.compose(row["sentence"], row["object_a"], row["object_b"])
        passage = mask_passage(text, ObjectMatcher(row["object_a"], row["object_b"]))
        items.append(Item(f"composed-compsent:{row['id']}", row["id"], "composed-compsent", passage,
                          COMPSENT_LABELS[row["most_frequent_label"]]))
    return items


def outside(items: Sequence[Item], held: set[str]) -> list[int]:
    """The indices of ``items`` a fold holding out the groups ``held`` may train on: those composed from none of
    them."""
    return [i for i, item in enumerate(items) if not item.origin or item.origin not in held]


class States:
    """The stance encoder's first-token states of items, both orders, computed once and kept in a cache folder."""

    def __init__(self, cache: Path, encoder: Path = SENTENCE_MODEL) -> None:
        self.cache = cache
        cache.mkdir(parents=True, exist_ok=True)
        self.encoder = CrossEncoder(encoder, "`python scripts/train_stance_encoder.py`")
        self.encoder.tokenizer = pair_tokenizer(MAX_TOKENS, self.encoder.base_name)  # whole passages, not sentences
        # The shipped encoder's states keep their names; another's are named after its file's bytes.
        self.prefix = "" if encoder == SENTENCE_MODEL else hashlib.sha256(encoder.read_bytes()).hexdigest()[:12] + "-"

    def of(self, name: str, items: Sequence[Item]) -> tuple[np.ndarray, np.ndarray]:
        texts = [masked_text(item.passage.tokens) for item in items]
        swapped = [masked_text(item.passage.swapped().tokens) for item in items]
        digest = hashlib.sha1("\0".join(texts).encode()).hexdigest()[:16]
        path = self.cache / f"{self.prefix}{name}-{MAX_TOKENS}-{digest}.npz"
        if path.exists():
            saved = np.load(path)
            return saved["forward"], saved["backward"]
        started = time.perf_counter()
        both = self.encoder.states([(HYPOTHESIS, text) for text in [*texts, *swapped]])
        forward, backward = both[: len(texts)], both[len(texts):]
        np.savez(path, forward=forward, backward=backward)
        print(f"  {name}: states of {len(texts)} texts x 2 in {time.perf_counter() - started:.0f} s", flush=True)
        return forward, backward


@dataclass
class Data:
    items: list[Item]
    forward: np.ndarray
    backward: np.ndarray

    def __add__(self, other: Data) -> Data:
        return Data([*self.items, *other.items], np.vstack([self.forward, other.forward]),
                    np.vstack([self.backward, other.backward]))

    def take(self, indices: Sequence[int]) -> Data:
        chosen = list(indices)
        return Data([self.items[i] for i in chosen], self.forward[chosen], self.backward[chosen])


def load(states: States, name: str, items: list[Item]) -> Data:
    return Data(items, *states.of(name, items))


def training_part(states: States, folder: Path, parts: Sequence[str]) -> tuple[Data, list[bool] | None]:
    """The web set's training passages (``train.jsonl`` and the ``parts``), and which of them a CV measures on:
    ``train.jsonl``'s (its figures stay comparable), None when there are no other parts (all)."""
    web = load(states, "web-train", web_items("train", folder))
    count = len(web.items)
    for part in parts:
        web = web + load(states, f"web-{part}", web_items(part, folder))
    return web, [i < count for i in range(len(web.items))] if parts else None


def with_votes(data: Data, cache: Path) -> Data:
    """``data`` with the sentence encoder's votes on its sentences naming both objects appended to each order's
    state: the largest P(BETTER) and P(WORSE), their mean difference, and whether any sentence votes (the other
    order's with BETTER and WORSE exchanged). Kept in ``cache``."""
    from kueri.stance.encoders import SentenceEncoder

    voting = sorted({tuple(s) for item in data.items for s in item.passage.sentences if OBJ1 in s and OBJ2 in s})
    digest = hashlib.sha1("\0".join(" ".join(s) for s in voting).encode()).hexdigest()[:16]
    path = cache / f"votes-{digest}.npy"
    if not path.exists():
        np.save(path, SentenceEncoder().probabilities([list(s) for s in voting]))
    vote = dict(zip(voting, np.load(path), strict=True))
    forward, backward = np.zeros((len(data.items), 4)), np.zeros((len(data.items), 4))
    for row, item in enumerate(data.items):
        votes = np.array([vote[tuple(s)] for s in item.passage.sentences if OBJ1 in s and OBJ2 in s])
        if len(votes):
            difference = float(np.mean(votes[:, 0] - votes[:, 1]))
            forward[row] = votes[:, 0].max(), votes[:, 1].max(), difference, 1.0
            backward[row] = votes[:, 1].max(), votes[:, 0].max(), -difference, 1.0
    return Data(data.items, np.hstack([data.forward, forward]), np.hstack([data.backward, backward]))
