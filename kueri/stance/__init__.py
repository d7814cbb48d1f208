"""stance: label the hits of a run FIRST / SECOND / NEUTRAL / NO towards the topic's two objects.

:func:`label_run` is the stage (``kueri stance`` its command, :mod:`kueri.stance.cli`);
:class:`StanceModel` the shipped model (``kueri/resources/models/stance-v1.npz``, rebuilt by
``scripts/train_stance.py``), whose :meth:`StanceModel.explain` finds the sentence that decided a label
(:func:`explain_run` for a run); :mod:`kueri.stance.features` the object masking both share.
"""

from kueri.stance.label import (
    DEFAULT_DEPTH,
    LabelSummary,
    corpus_texts,
    explain_run,
    index_texts,
    label_run,
    needed_ids,
)
from kueri.stance.model import DEFAULT_MODEL, LABELS, SHIPPED, Explanation, StanceModel, load_model

__all__ = [
    "DEFAULT_DEPTH", "DEFAULT_MODEL", "LABELS", "SHIPPED", "Explanation", "LabelSummary", "StanceModel",
    "corpus_texts", "explain_run", "index_texts", "label_run", "load_model", "needed_ids",
]
