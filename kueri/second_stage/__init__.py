"""second_stage: rerank a lexical run's top passages by a learned combination of lexical, argument-quality and
comparative-question features (see :mod:`kueri.second_stage.features` and ``scripts/train_second_stage.py``).

Public API: :func:`second_stage`, :class:`SecondStageModel`, :data:`FEATURES`, :data:`DEFAULT_MODEL` (with
the neural feature), :data:`LEXICAL_MODEL` (without).
"""

from kueri.second_stage.features import FEATURES
from kueri.second_stage.model import DEFAULT_MODEL, LEXICAL_MODEL, SecondStageModel
from kueri.second_stage.rerank import fuse, second_stage

__all__ = ["DEFAULT_MODEL", "FEATURES", "LEXICAL_MODEL", "SecondStageModel", "fuse", "second_stage"]
