"""BERT's uncased WordPiece tokenizer in plain Python, read from a ``tokenizer.json``.

all-MiniLM-L6-v2 tokenizes as bert-base-uncased: the ``BertNormalizer`` (control characters dropped,
whitespace made a space, CJK ideographs spaced out, accents stripped, lower case), the
``BertPreTokenizer`` (split at whitespace, each punctuation character its own word), greedy
longest-match-first WordPiece with ``##`` continuations (a word longer than 100 characters or with no
match is ``[UNK]``), and ``[CLS] ... [SEP]`` around the pieces. This module does exactly that, so the
neural feature needs no ``tokenizers`` package (and none of the Hugging Face hub client it pulls in);
a test checks that it gives the same ids as ``tokenizers`` on every passage of the shipped sample.
"""

from __future__ import annotations

import json
import unicodedata
from functools import lru_cache
from pathlib import Path

MAX_WORD_CHARS = 100  # WordPiece's max_input_chars_per_word
# CJK ideograph blocks that BERT's normaliser pads with spaces (as in BERT's _is_chinese_char).
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_whitespace(char: str) -> bool:
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_control(char: str) -> bool:
    return char not in "\t\n\r" and unicodedata.category(char).startswith("C")


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True  # ASCII symbols count as punctuation, as in BERT ("$", "^", "`")
    return unicodedata.category(char).startswith("P")


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK)


@lru_cache(maxsize=4096)
def _normalise_char(char: str) -> str:
    """One character through the normaliser: "" (dropped), " " (whitespace), or its folded form."""
    if char in "\x00\ufffd" or _is_control(char):
        return ""
    if _is_whitespace(char):
        return " "
    if _is_cjk(char):
        return f" {char} "
    # Accents stripped (NFD without the non-spacing marks), then lower case, as the normaliser orders it.
    stripped = "".join(c for c in unicodedata.normalize("NFD", char) if unicodedata.category(c) != "Mn")
    return stripped.lower()


# ASCII text only needs its control characters dropped and \t \n \r made spaces (then lower case): a translate.
_ASCII_TABLE = {code: (" " if chr(code) in "\t\n\r" else None) for code in [*range(32), 127]}


def normalise(text: str) -> str:
    if text.isascii():  # the common case, done in C
        return text.translate(_ASCII_TABLE).lower()
    return "".join(map(_normalise_char, text))


def pre_tokenise(text: str) -> list[str]:
    """Words: split at whitespace, and every punctuation character a word of its own."""
    words: list[str] = []
    for chunk in text.split():
        current: list[str] = []
        for char in chunk:
            if _is_punctuation(char):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(char)
            else:
                current.append(char)
        if current:
            words.append("".join(current))
    return words


class WordPieceTokenizer:
    """``encode(text)`` -> the model's input ids, ``[CLS]`` first and ``[SEP]`` last, at most ``max_length``."""

    def __init__(self, tokenizer_json: str | Path, max_length: int = 256) -> None:
        data = json.loads(Path(tokenizer_json).read_text(encoding="utf-8"))
        model = data["model"]
        if model.get("type") != "WordPiece":
            raise ValueError(f"{tokenizer_json}: not a WordPiece tokenizer")
        self.vocab: dict[str, int] = model["vocab"]
        self.prefix = model.get("continuing_subword_prefix", "##")
        self.unk = self.vocab[model.get("unk_token", "[UNK]")]
        self.cls, self.sep = self.vocab["[CLS]"], self.vocab["[SEP]"]
        self.max_length = max_length
        self._pieces = lru_cache(maxsize=200_000)(self._word_pieces)

    def _word_pieces(self, word: str) -> tuple[int, ...]:
        if len(word) > MAX_WORD_CHARS:
            return (self.unk,)
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return (self.unk,)
            pieces.append(found)
            start = end
        return tuple(pieces)

    def pieces(self, text: str, budget: int) -> list[int]:
        """The word pieces of ``text`` (no ``[CLS]``, ``[SEP]``), at most ``budget``."""
        ids: list[int] = []
        for word in pre_tokenise(normalise(text)):
            ids.extend(self._pieces(word))
            if len(ids) >= budget:
                break
        return ids[:budget]

    def encode(self, text: str) -> list[int]:
        return [self.cls, *self.pieces(text, self.max_length - 2), self.sep]  # room for [CLS] and [SEP]

    def encode_pair(self, first: str, second: str) -> list[int]:
        """``[CLS] first [SEP] second [SEP]``, at most ``max_length`` ids: ``second`` is cut, as a cross-encoder's
        tokenizer cuts the longer segment (``first`` is a short hypothesis)."""
        head = self.pieces(first, self.max_length - 3)
        return [self.cls, *head, self.sep, *self.pieces(second, self.max_length - 3 - len(head)), self.sep]
