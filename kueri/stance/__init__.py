"""stance: label the hits of a run FIRST / SECOND / NEUTRAL / NO towards the topic's two objects.

:func:`label_run` is the stage (``kueri stance`` its command, :mod:`kueri.cli.stance`); the models are one
family (:mod:`kueri.stance.family`: :func:`load_model` by name, :class:`Cascade` of a strong and a fast one);
:class:`StanceModel` the TF-IDF model (``kueri/resources/models/stance-v1.npz``, rebuilt by
``scripts/train_stance.py``), whose :meth:`StanceModel.explain` finds the sentence that decided a label
(:func:`explain_run` for a run); :mod:`kueri.stance.features` the features it reads.
"""

from kueri.stance.decision import Explanation
from kueri.stance.facts import LABELS
from kueri.stance.family import DEFAULT, MODELS, Cascade, StanceClassifier, load_model
from kueri.stance.label import (
    DEFAULT_DEPTH,
    LabelSummary,
    corpus_texts,
    explain_run,
    index_texts,
    label_run,
    needed_ids,
)
from kueri.stance.model import StanceModel

__all__ = [
    "DEFAULT", "DEFAULT_DEPTH", "LABELS", "MODELS", "Cascade", "Explanation", "LabelSummary",
    "StanceClassifier", "StanceModel", "corpus_texts", "explain_run", "index_texts", "label_run", "load_model",
    "needed_ids",
]
