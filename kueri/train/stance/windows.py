"""A passage longer than the stance model's window read in windows overlapping by half, each the hypothesis and a
stretch of the passage: the candidate ``tune_stance_passages.py --windows [--train-in-windows] cv-answers`` measured
on the stance answers (docs/stance.md; not adopted). Their states below the tuned layers are kept in the cache as a
source's are (:mod:`kueri.train.stance.lower`)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from kueri.encoders.cross import TunedWeights, pair_tokenizer
from kueri.stance.encoders import HYPOTHESIS, PLACEHOLDERS, SENTENCE_MODEL, masked_text
from kueri.train.stance.bert_jax import layers_of
from kueri.train.stance.lower import Lower, Source, kept_lower
from kueri.train.stance.passage_data import MAX_TOKENS, Data, Item


class ReadsStates(Protocol):
    """A fitted passage model (e.g. :class:`~kueri.train.stance.tune.TopLayers`): P(classes) of a source's items."""

    def probabilities(self, source: Source) -> np.ndarray: ...


def windows(ids: Sequence[int], sep: int, size: int = MAX_TOKENS) -> list[list[int]]:
    """A pair's ids (``[CLS] hypothesis [SEP] passage [SEP]``, the passage whole) in windows of at most ``size``
    ids, each the hypothesis and a stretch of the passage, the stretches overlapping by half; the first is what
    the model reads of the passage today (its ids cut to ``size``)."""
    start = list(ids).index(sep) + 1
    prefix, body = list(ids[:start]), list(ids[start:-1])
    room = size - len(prefix) - 1
    starts = [0]
    while starts[-1] + room < len(body):
        starts.append(starts[-1] + room // 2)
    return [[*prefix, *body[s:s + room], sep] for s in starts]


@dataclass
class Windows:
    """The windows after the first (:func:`windows`) that name an object, of each item longer than the model's
    window: the item each belongs to, their states below the tuned layers, and which items' first window names
    an object (a window naming neither says nothing of the stance: it is left out of the mean)."""

    owner: list[int]
    lower: Lower
    first_names: list[bool]

    def source(self, target: Source, chosen: Sequence[int]) -> Source:
        """The ``chosen`` windows as items of their passages in ``target`` (a passage's label, and what the head
        reads beside the top layer, are its whole text's)."""
        owners = [self.owner[j] for j in chosen]
        return Source(Data([target.data.items[o] for o in owners], target.data.forward[owners],
                           target.data.backward[owners]), self.lower.take(chosen))

    def probabilities(self, model: ReadsStates, target: Source, held: Sequence[int], first: np.ndarray) -> np.ndarray:
        """P of the ``held`` items of ``target`` read in windows: the mean over the windows naming an object (the
        first window's ``first``, rows in ``held``'s order), the first alone when none names one."""
        where = {item: row for row, item in enumerate(held)}
        chosen = [j for j, owner in enumerate(self.owner) if owner in where]
        if not chosen:
            return first
        owners = [self.owner[j] for j in chosen]
        extra = model.probabilities(self.source(target, chosen))
        total, count = first.copy(), np.ones(len(held))
        for row in {where[owner] for owner in owners if not self.first_names[owner]}:
            total[row], count[row] = 0.0, 0  # its first window names neither object: not counted
        for owner, p in zip(owners, extra, strict=True):
            total[where[owner]] += p
            count[where[owner]] += 1
        return total / count[:, None]


def windows_of(cache: Path, name: str, items: Sequence[Item], encoder: TunedWeights, tuned_layers: int) -> Windows:
    """The :class:`Windows` of ``items`` (both orders of the objects), their states kept in ``cache``."""
    tokenizer = pair_tokenizer(1 << 16)  # the passage whole
    sep, objects = tokenizer.sep, {tokenizer.vocab[p] for p in PLACEHOLDERS.values()}
    owner, first_names, both = [], [], []
    for index, item in enumerate(items):
        forward, backward = (windows(tokenizer.encode_pair(HYPOTHESIS, masked_text(tokens)), sep)
                             for tokens in (item.passage.tokens, item.passage.swapped().tokens))
        start = forward[0].index(sep) + 1
        names = [bool(objects & set(w[start:-1])) for w in forward]
        first_names.append(names[0])
        for window, swapped, named in zip(forward[1:], backward[1:], names[1:], strict=True):
            if named:
                owner.append(index)
                both.append((window, swapped))
    digest = hashlib.sha1(repr([SENTENCE_MODEL.name, both]).encode()).hexdigest()[:16]
    below = len(layers_of(encoder)) - tuned_layers
    parts = kept_lower(cache / f"{name}-windows-lower{below}-{MAX_TOKENS}-{digest}.npz",
                       lambda: [w for w, _ in both] + [w for _, w in both], encoder, below)
    print(f"  {name}: {len(set(owner))} of {len(items)} longer than the window, {len(owner)} more windows naming an "
          "object", flush=True)
    return Windows(owner, Lower(parts[: len(both)], parts[len(both):]), first_names)
