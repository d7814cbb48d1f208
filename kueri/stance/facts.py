"""What every stance model of the family agrees on, written once: the classes and their order, what exchanging the
two objects does to them, where the shipped models are, which one a configuration uses unless told."""

from __future__ import annotations

from kueri import resources
from kueri.records import STANCES

#: A passage's classes, in the order of every model's rows (:data:`kueri.records.STANCES`).
LABELS = STANCES
#: Exchanging the objects exchanges these passage classes (FIRST and SECOND).
PASSAGE_SWAP = [1, 0, 2, 3]
#: A sentence's classes (CompSent-19): BETTER = OBJ1 is better than OBJ2.
SENTENCE_LABELS = ("BETTER", "WORSE", "NONE")
#: Exchanging the objects exchanges these sentence classes (BETTER and WORSE).
SENTENCE_SWAP = [1, 0, 2]
#: Where the shipped models' files are.
MODELS_DIR = resources.path("models")
#: The model a configuration and ``kueri stance`` use unless told otherwise (a name of :data:`kueri.stance.MODELS`).
DEFAULT = "stance-v4"
