"""The stance encoder's states below the layers a passage model tunes, for every token of each training text and
both orders of its objects: computed once through kueri's own graph and kept in a cache folder (float16), since the
layers below are left as they are (:mod:`kueri.train.stance.tune`)."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kueri.encoders.cross import TunedWeights, encode_pairs, pair_tokenizer
from kueri.stance.encoders import HYPOTHESIS, SENTENCE_MODEL, masked_text
from kueri.train.stance.bert_jax import layers_of, lower_states
from kueri.train.stance.passage_data import MAX_TOKENS, Data, Item


@dataclass
class Lower:
    """The hidden states of every token below the tuned layers, for both orders of the objects of each item."""

    forward: list[np.ndarray]
    backward: list[np.ndarray]

    def take(self, indices: Sequence[int]) -> Lower:
        return Lower([self.forward[i] for i in indices], [self.backward[i] for i in indices])

    def __add__(self, other: Lower) -> Lower:
        return Lower([*self.forward, *other.forward], [*self.backward, *other.backward])


def lower_of(cache: Path, name: str, items: Sequence[Item], encoder: TunedWeights, tuned_layers: int) -> Lower:
    """The stance encoder's states below its top ``tuned_layers``, kept in ``cache`` (float16: a gigabyte for all
    sources); the file names the layers below (5 for the top layer alone)."""
    texts = [masked_text(item.passage.tokens) for item in items]
    swapped = [masked_text(item.passage.swapped().tokens) for item in items]
    digest = hashlib.sha1("\0".join([SENTENCE_MODEL.name, *texts]).encode()).hexdigest()[:16]
    below = len(layers_of(encoder)) - tuned_layers
    path = cache / f"{name}-lower{below}-{MAX_TOKENS}-{digest}.npz"
    parts = kept_lower(path, lambda: encode_pairs(pair_tokenizer(MAX_TOKENS),
                                                  [(HYPOTHESIS, t) for t in [*texts, *swapped]]), encoder, below)
    return Lower(parts[: len(items)], parts[len(items):])


def kept_lower(path: Path, encoded: Callable[[], list[list[int]]], encoder: TunedWeights,
               below: int) -> list[np.ndarray]:
    """The states after the first ``below`` layers of each input ``encoded`` gives, computed once into ``path``."""
    if not path.exists():
        started = time.perf_counter()
        inputs = encoded()
        states = lower_states(inputs, below, layers_of(encoder))
        lengths = np.array([len(s) for s in states])
        np.savez(path.with_suffix(".part.npz"), states=np.concatenate(states).astype(np.float16), lengths=lengths)
        os.replace(path.with_suffix(".part.npz"), path)
        print(f"  {path.name}: states below layer {below + 1} of {len(inputs)} inputs in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
    saved = np.load(path)
    return np.split(saved["states"], np.cumsum(saved["lengths"])[:-1])


@dataclass
class Source:
    data: Data  # the items and their full encoder's first-token states (the head's start)
    lower: Lower

    def take(self, indices: Sequence[int]) -> Source:
        return Source(self.data.take(indices), self.lower.take(indices))

    def __add__(self, other: Source) -> Source:
        return Source(self.data + other.data, self.lower + other.lower)

    def extras(self) -> np.ndarray:
        """What the head reads beside the top layer's first token, both orders stacked: the columns of the data's
        states past the encoder's width (the sentence votes with ``--votes``; none without)."""
        hidden = self.lower.forward[0].shape[1]
        return np.vstack([self.data.forward[:, hidden:], self.data.backward[:, hidden:]])
