"""Package data: the one place that knows where kueri's shipped files are.

Everything kueri reads at run time and does not get from the user is shipped inside the package
(``kueri/resources/``) and found through :mod:`importlib.resources`, so an installed wheel works
from any directory with no checkout around:

* ``stoplists/``: the twelve stoplists of the paper's experiments (``kueristopv2.txt``, ...);
* ``models/``: the offline quality model, the second-stage models and the MiniLM tokenizer, the
  stance model;
* ``sample/``: the real sample (``topics.xml``: the official 50 topics; ``passages.jsonl.gz``: 2,607
  passages of the corpus), a TIRA input folder;
* ``qrels/``: the 2020-2022 judgments (for measuring) and the team's own (for the RF rows);
* ``quality/``: the original team's IBM Debater scores of the sample's passages;
* ``training/``: the stance model's training data;
* ``wordlists/``: the function-word lists of the object matcher and the model features.

Lucene's analyzers read stoplists by file path, so the data must be real files: true for every
normal install (pip unpacks wheels); a zipped install gets a clear error instead.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path

from kueri.errors import SetupError

#: The shipped folders, with what each holds (``kueri resources`` lists them).
FOLDERS = {
    "sample": "the real sample as a TIRA input folder: topics.xml (50 topics), passages.jsonl.gz (2,607 passages)",
    "qrels": "relevance and quality judgments of 2020-2022, and the team's own judgments (RF rows)",
    "models": "the offline quality, second-stage and stance models, the MiniLM tokenizer",
    "stoplists": "the stoplists of the paper's experiments",
    "quality": "the original team's IBM Debater quality scores of the sample's passages",
    "training": "the stance model's training data (CompSent-19, Touché 2022 stance train)",
    "wordlists": "the function-word lists of the object matcher and the quality and second-stage features",
}


def root() -> Path:
    """The folder of the package data, as a real directory."""
    folder = files(__name__)
    if not isinstance(folder, Path):
        raise SetupError(f"kueri's package data is not in a folder ({folder}): install kueri unzipped (pip does)")
    return folder


def path(name: str, *parts: str) -> Path:
    """A shipped folder or file, e.g. ``path("sample")`` or ``path("models", "stance-v1.npz")``."""
    if name not in FOLDERS:
        raise SetupError(f"no shipped resource {name!r}; known: {', '.join(FOLDERS)}")
    return root().joinpath(name, *parts)


def stoplists() -> Path:
    return path("stoplists")


def models() -> Path:
    return path("models")


def qrels() -> Path:
    return path("qrels")


def sample() -> Path:
    return path("sample")


def read_words(file: Path) -> frozenset[str]:
    """The words of a word-per-line file as Lucene's wordset format reads them (trimmed, lower case; empty
    lines and ``#`` comments skipped)."""
    lines = file.read_text(encoding="utf-8-sig").splitlines()
    return frozenset(word.lower() for line in lines if (word := line.strip()) and not word.startswith("#"))


@cache
def word_list(name: str) -> frozenset[str]:
    """A shipped word list, ``wordlists/NAME.txt``."""
    return read_words(path("wordlists", f"{name}.txt"))
