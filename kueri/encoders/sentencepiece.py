"""SentencePiece's unigram tokenizer in plain Python, as XLM-RoBERTa (and so multilingual-e5) applies it.

The steps are SentencePiece's for a unigram model: each character goes through the model's
normalisation map (NFKC-like replacements, stored with the vocabulary), runs of spaces collapse to
one, a space is put in front of the text, spaces become the metaspace ``▁`` (U+2581), and the text is
cut into the pieces of highest total log-probability (Viterbi over the pieces of the vocabulary); a
character no piece covers is ``<unk>``. :mod:`kueri.encoders.e5` reads the vocabulary from the
model file; a test checks the ids against the reference engine that ships with the model.

No piece of the vocabulary holds a metaspace after its first character, so no piece crosses a word
boundary and the best cut of a text is the best cuts of its words (``▁word``) one after the other:
words are cut once each (cached), and reading stops once enough pieces are out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from kueri.errors import SetupError

METASPACE = "\u2581"
_SPACES = re.compile(" {2,}")
_WORDS = re.compile(f"{METASPACE}[^{METASPACE}]*")


class UnigramTokenizer:
    """Pieces of a unigram SentencePiece model: ``encode(text)`` gives their ids (no ``<s>``, ``</s>``)."""

    def __init__(self, pieces: Sequence[str], scores: Sequence[float], normalisation: Mapping[str, str],
                 unk: int) -> None:
        if any(METASPACE in piece[1:] for piece in pieces):
            raise SetupError("SentencePiece vocabulary has pieces that span words; this tokenizer cuts word by word")
        self.unk = unk
        self.normalisation = dict(normalisation)
        # The unknown piece is never matched by its text; a character no piece covers costs more than any piece.
        self.pieces = {piece: (i, float(scores[i])) for i, piece in enumerate(pieces) if piece and i != unk}
        self.unk_score = float(min(scores)) - 10.0
        self.longest = max(map(len, self.pieces), default=1)
        self.word_pieces = lru_cache(maxsize=200_000)(self._viterbi)

    def normalise(self, text: str) -> str:
        """The text as the Viterbi pass sees it: normalised, spaces collapsed, metaspaces."""
        mapped = "".join(self.normalisation.get(c, c) for c in text)
        mapped = _SPACES.sub(" ", mapped)
        if not mapped.startswith(" "):
            mapped = " " + mapped
        return mapped.replace(" ", METASPACE)

    def _viterbi(self, word: str) -> tuple[int, ...]:
        """The best cut of one word into pieces (unknown characters one ``<unk>`` each)."""
        n = len(word)
        best = [float("-inf")] * (n + 1)
        best[0] = 0.0
        piece = [self.unk] * (n + 1)
        start = [0] * (n + 1)
        lookup, longest, unk_score = self.pieces.get, self.longest, self.unk_score
        for i in range(n):
            here = best[i]
            for end in range(i + 1, min(n, i + longest) + 1):
                found = lookup(word[i:end])
                if found is not None and here + found[1] > best[end]:
                    best[end] = here + found[1]
                    piece[end] = found[0]
                    start[end] = i
            if here + unk_score > best[i + 1]:
                best[i + 1] = here + unk_score
                piece[i + 1] = self.unk
                start[i + 1] = i
        ids: list[int] = []
        end = n
        while end > 0:
            ids.append(piece[end])
            end = start[end]
        return tuple(reversed(ids))

    def encode(self, text: str, max_pieces: int | None = None) -> list[int]:
        """Piece ids of ``text``, the first ``max_pieces`` of them when given."""
        ids: list[int] = []
        for word in _WORDS.finditer(self.normalise(text)):
            ids.extend(self.word_pieces(word.group()))
            if max_pieces is not None and len(ids) >= max_pieces:
                return ids[:max_pieces]
        return ids
