"""The stance models as one family: what every model answers, how two compose, and the shipped ones by name.

Every stance model (:class:`StanceClassifier`) labels a masked passage FIRST, SECOND, NEUTRAL or NO
(``label_masked``), takes a topic's passages in one batch first where that saves work (``prefetch``), says which
sentence decided a label (``explain``, after ``prefetch_explanations`` of the topic's passages in one batch), and
carries its decision as data (priors, NEUTRAL gate: ``with_decision`` returns the same model deciding otherwise). A
strong model on a topic's top hits and a fast one below is a :class:`Cascade` of two models. The shipped models are
named in :data:`MODELS`, each with its files (their SHA-256 in ``kueri/resources/models/SHA256SUMS``);
:func:`load_model` opens one by name, or a model file. A model pickles as plain data (its encoders as their files):
what a worker process or a Ray task receives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kueri.errors import KueriError
from kueri.model_files import read_model_header
from kueri.objects import MaskedPassage, ObjectMatcher
from kueri.stance.decision import Explanation
from kueri.stance.facts import DEFAULT, MODELS_DIR
from kueri.stance.model import StanceModel, companion_file
from kueri.stance.passage_encoder import KIND, PassageEncoderModel


class StanceClassifier(Protocol):
    """What :func:`kueri.stance.label_run` and ``kueri serve`` ask of a stance model."""

    def label_masked(self, passage: MaskedPassage) -> str: ...

    def label(self, text: str, first: str, second: str) -> str: ...

    def prefetch(self, passages: Sequence[MaskedPassage]) -> None: ...

    def at_rank(self, rank: int) -> StanceClassifier: ...

    def explain(self, text: str, matcher: ObjectMatcher) -> Explanation: ...

    def prefetch_explanations(self, texts: Sequence[str], matcher: ObjectMatcher) -> None: ...

    def with_decision(self, target_priors: Sequence[float] | None = None,
                      neutral_gate: float | None = None) -> StanceClassifier: ...


@dataclass(frozen=True)
class Cascade:
    """``top`` labels a topic's hits down to ``depth``, ``below`` the rest (the labels it gives alone). A passage
    labelled without a rank is a top hit."""

    top: StanceClassifier
    below: StanceClassifier
    depth: int

    def at_rank(self, rank: int) -> StanceClassifier:
        return self.top.at_rank(rank) if rank <= self.depth else self.below.at_rank(rank)

    def prefetch(self, passages: Sequence[MaskedPassage]) -> None:
        """``passages`` in rank order: the top model's share, then the fast model's."""
        self.top.prefetch(passages[:self.depth])
        self.below.prefetch(passages[self.depth:])

    def label_masked(self, passage: MaskedPassage) -> str:
        return self.top.label_masked(passage)

    def label(self, text: str, first: str, second: str) -> str:
        return self.top.label(text, first, second)

    def explain(self, text: str, matcher: ObjectMatcher) -> Explanation:
        return self.top.explain(text, matcher)

    def prefetch_explanations(self, texts: Sequence[str], matcher: ObjectMatcher) -> None:
        """``texts`` in rank order, as :meth:`prefetch`."""
        self.top.prefetch_explanations(texts[:self.depth], matcher)
        self.below.prefetch_explanations(texts[self.depth:], matcher)

    def with_decision(self, target_priors: Sequence[float] | None = None,
                      neutral_gate: float | None = None) -> Cascade:
        """Both models deciding with the same priors and gate."""
        return Cascade(self.top.with_decision(target_priors, neutral_gate),
                       self.below.with_decision(target_priors, neutral_gate), self.depth)


def load_file(path: str | Path) -> StanceClassifier:
    """The stance model in ``path``, of the kind its header says; a header naming a fast model (``below``,
    ``encoder_depth``) makes it the top of a :class:`Cascade` (the fast model's file beside it, else the shipped
    one)."""
    meta = read_model_header(path, "stance model", "`python scripts/train_stance.py` (a passage-encoder model: "
                             "`python scripts/train_stance_passages.py write`)")
    model: StanceClassifier = PassageEncoderModel(path, meta) if meta.get("kind") == KIND else StanceModel.load(path)
    if "below" not in meta:
        return model
    below = load_file(companion_file(Path(path).parent, str(meta["below"])))
    return Cascade(model, below, int(meta["encoder_depth"]))  # type: ignore[call-overload]


@dataclass(frozen=True)
class NamedModel:
    """A shipped stance model: its name, its files in ``kueri/resources/models/`` and how it is opened."""

    name: str
    files: tuple[str, ...]
    summary: str
    open: Callable[[], StanceClassifier]


def _shipped(name: str) -> Callable[[], StanceClassifier]:
    return lambda: load_file(MODELS_DIR / f"{name}.npz")


MODELS = {model.name: model for model in (
    NamedModel("stance-v1", ("stance-v1.npz",), "TF-IDF sentence votes and a passage model", _shipped("stance-v1")),
    NamedModel("stance-v2", ("stance-v2.npz", "stance-encoder-v1.npz", "stance-v1.npz"),
               "kueri's stance encoder's sentence votes on the top 20 hits, stance-v1 below", _shipped("stance-v2")),
    NamedModel("stance-v3", ("stance-v3.npz", "stance-v1.npz"),
               "the passage model (a stance cross-encoder reading the whole passage) on the top 10 hits, stance-v1 "
               "below", _shipped("stance-v3")),
    NamedModel("stance-v4", ("stance-v4.npz", "stance-encoder-v1.npz", "stance-v1.npz"),
               "the passage model with its top layer tuned on whole passages, reading the sentence votes too, on the "
               "top 10 hits, stance-v1 below", _shipped("stance-v4")),
)}


def load_model(name: str | Path = DEFAULT) -> StanceClassifier:
    """A shipped stance model by name (:data:`MODELS`), or the model file ``name``."""
    if str(name) in MODELS:
        return MODELS[str(name)].open()
    if Path(name).suffix != ".npz" and not Path(name).exists():
        raise KueriError(f"unknown stance model {str(name)!r}: use {' or '.join(MODELS)}, or a model file (.npz)")
    return load_file(name)  # a missing or broken file: one line saying how to rebuild it
