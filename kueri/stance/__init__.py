"""stance: label the hits of a run FIRST / SECOND / NEUTRAL / NO towards the topic's two objects.

:func:`label_run` is the stage (``kueri stance`` its command, :mod:`kueri.stance.cli`);
:class:`StanceModel` the shipped model (``kueri/resources/models/stance-v1.npz``, rebuilt by
``scripts/train_stance.py``); :mod:`kueri.stance.features` the object masking both share.
"""

from kueri.stance.label import DEFAULT_DEPTH, LabelSummary, corpus_texts, index_texts, label_run, needed_ids
from kueri.stance.model import DEFAULT_MODEL, LABELS, StanceModel

__all__ = [
    "DEFAULT_DEPTH", "DEFAULT_MODEL", "LABELS", "LabelSummary", "StanceModel", "corpus_texts", "index_texts",
    "label_run", "needed_ids",
]
