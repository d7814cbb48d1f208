"""second_stage: rerank a lexical run's top passages by a learned combination of lexical, argument-quality and
comparative-question features (see :mod:`kueri.second_stage.features` and ``scripts/train_second_stage.py``).

Public API: :func:`second_stage`, :func:`load_encoders`, :class:`SecondStageModel`,
:data:`FEATURES`, :data:`DEFAULT_MODEL` (MiniLM and e5 features), :data:`MINILM_MODEL` (MiniLM only),
:data:`LEXICAL_MODEL` (no neural feature).
"""

from kueri.second_stage.features import FEATURES
from kueri.second_stage.model import DEFAULT_MODEL, LEXICAL_MODEL, MINILM_MODEL, SecondStageModel
from kueri.second_stage.ranking import load_encoders, reorder_head, second_stage

__all__ = ["DEFAULT_MODEL", "FEATURES", "LEXICAL_MODEL", "MINILM_MODEL", "SecondStageModel", "reorder_head",
           "load_encoders", "second_stage"]
