"""Stream corpus passages from ``.jsonl`` / ``.jsonl.gz`` files (or a folder of them).

Each line is one JSON object ``{"id", "contents", "chatNoirUrl"}``, or as TIRA's full-rank input writes documents
(``documents.jsonl``), ``{"docno", "text", "original_document": {..., "chatnoir_url"}}``. In the DocT5Query-expanded
corpus ``contents`` ends with one generated query, ``...text.<query> generated query</query>``,
which is split off into :attr:`Passage.doct5query` exactly as the original did.

Deliberate fixes of the original (see README): files are decoded as UTF-8 (the original read
ISO-8859-1, harmless on the ASCII official files); a passage without ``<query>`` gets an empty
expansion (the original crashed on it); folders are read in sorted order (the original walked
the file system in arbitrary order, which changes index order and so search ties).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
from isal import igzip

from kueri.errors import KueriError
from kueri.records import Passage

QUERY_OPEN = "<query>"
QUERY_CLOSE = "</query>"

# Java's String.strip() removes what Character.isWhitespace() accepts: unlike Python's str.strip()
# that excludes the no-break spaces U+00A0, U+2007, U+202F (and U+0085).
JAVA_WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2008\u2009\u200a\u2028\u2029\u205f\u3000"
)

CORPUS_SUFFIXES = (".jsonl", ".jsonl.gz")
#: Bytes read from a file at a time (plain files; ISA-L's reader keeps its own buffer).
READ_BUFFER = 1 << 20


def split_doct5query(contents: str) -> tuple[str, str]:
    """Split ``text<query> q</query>`` into ``(text, q)``, as the original's Java ``split``.

    Text after a second ``<query>`` is dropped (as the original); no ``<query>`` gives ``""``.
    """
    if QUERY_OPEN not in contents:
        return contents.strip(JAVA_WHITESPACE), ""
    pieces = contents.split(QUERY_OPEN)
    while len(pieces) > 1 and pieces[-1] == "":  # Java's split drops trailing empty pieces
        pieces.pop()
    text = pieces[0].strip(JAVA_WHITESPACE)
    query = pieces[1].replace(QUERY_CLOSE, "").strip(JAVA_WHITESPACE) if len(pieces) > 1 else ""
    return text, query


def corpus_files(path: str | Path) -> list[Path]:
    """The corpus files of ``path``: the file itself, or a folder's files in sorted order."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(CORPUS_SUFFIXES))
        if not files:
            raise KueriError(f"{path}: no .jsonl or .jsonl.gz files in this folder")
        return files
    if not path.exists():
        raise KueriError(f"{path}: no such corpus file or folder")
    return [path]


def _open_binary(path: Path) -> IO[bytes]:
    # ISA-L inflates the same bytes as zlib, several times as fast, and reading a gzip corpus is mostly inflating it.
    return igzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb", buffering=READ_BUFFER)


def parse_json_line(raw: bytes) -> Any:
    """``json.loads(raw)``, ~3x as fast: orjson parses, and what it refuses goes to json, which decides.

    Where orjson succeeds both give the same strings; json also takes NaN, lone surrogates and a
    BOM, and its errors (``UnicodeDecodeError``, ``ValueError``) are the ones reported, as before.
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


@dataclass
class ReadStats:
    """What a reader saw: passages read (yielded) and lines skipped, by reason."""

    read: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    files: int = 0

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def summary(self) -> str:
        text = f"read {self.read} passages" + (f" from {self.files} file(s)" if self.files else "")
        if self.skipped:
            reasons = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()))
            text += f"; skipped {self.skipped_total} ({reasons})"
        return text


class PassageReader:
    """Iterate over the passages of corpus files, keeping :attr:`stats`.

    A malformed line, a missing or null ``id``/``contents``, an empty passage or a duplicate id
    raises :class:`KueriError` naming ``file:line``; with ``skip_bad=True`` such lines are counted
    in ``stats.skipped`` (by reason) and the first few are kept in ``problems`` instead.
    """

    def __init__(self, paths: str | Path | Iterable[str | Path], skip_bad: bool = False) -> None:
        if isinstance(paths, str | Path):
            paths = [paths]
        self.files = [f for p in paths for f in corpus_files(p)]
        self.skip_bad = skip_bad
        self.stats = ReadStats()
        self.problems: list[str] = []

    def counts(self) -> dict[str, object]:
        """What an index's manifest records of this reader once it has been read: passages read, lines skipped."""
        return {"read": self.stats.read, "skipped": dict(self.stats.skipped)}

    def __iter__(self) -> Iterator[Passage]:
        seen: set[str] = set()
        for path in self.files:
            self.stats.files += 1
            try:
                with _open_binary(path) as handle:
                    yield from self._read_file(path, handle, seen)
            except (OSError, EOFError) as exc:  # unreadable or truncated gzip
                raise KueriError(f"{path}: cannot read: {exc}") from exc

    def _bad(self, where: str, reason: str, detail: str) -> None:
        if not self.skip_bad:
            raise KueriError(f"{where}: {detail}")
        self.stats.skipped[reason] += 1
        if len(self.problems) < 20:
            self.problems.append(f"{where}: {detail}")

    def _read_file(self, path: Path, handle: IO[bytes], seen: set[str]) -> Iterator[Passage]:
        # The hot loop of indexing (a million lines): the "file:line" of an error is made only when needed.
        name = str(path)
        for number, raw in enumerate(handle, start=1):
            if raw.isspace():  # stops at the first other byte: no copy of the line
                continue
            try:
                obj = parse_json_line(raw)
            except UnicodeDecodeError as exc:
                self._bad(f"{name}:{number}", "not UTF-8", f"not valid UTF-8 ({exc.reason})")
                continue
            except ValueError as exc:
                self._bad(f"{name}:{number}", "malformed JSON", f"malformed JSON ({exc})")
                continue
            if not isinstance(obj, dict):
                self._bad(f"{name}:{number}", "not an object", "the line is not a JSON object")
                continue
            pid, contents = obj.get("id"), obj.get("contents")
            if pid is None and contents is None:  # TIRA's documents.jsonl: "docno" and "text"
                pid, contents = obj.get("docno"), obj.get("text")
                if isinstance(pid, int) and not isinstance(pid, bool):  # ir_datasets ids may be numbers
                    pid = str(pid)
            if not isinstance(pid, str) or not pid:
                self._bad(f"{name}:{number}", "missing id", "missing, null or non-string 'id' (or TIRA's 'docno')")
                continue
            if not isinstance(contents, str):
                self._bad(f"{name}:{number}", "missing contents",
                          f"passage {pid}: missing, null or non-string 'contents'")
                continue
            text, query = split_doct5query(contents)
            if not text:
                self._bad(f"{name}:{number}", "empty passage", f"passage {pid}: empty contents")
                continue
            if pid in seen:
                self._bad(f"{name}:{number}", "duplicate id", f"duplicate passage id {pid}")
                continue
            seen.add(pid)
            url = obj.get("chatNoirUrl")
            if url is None and isinstance(obj.get("original_document"), dict):
                url = obj["original_document"].get("chatnoir_url")
            self.stats.read += 1
            yield Passage(pid, text, query, url if isinstance(url, str) else None)


class TextCorpus:
    """Passages given with their texts instead of in a file (e.g. the candidates of a re-rank input), in their order:
    each read as :class:`PassageReader` reads a corpus line's ``contents`` (a docT5Query expansion split off), so
    its index is the one a corpus file of these lines would give. Named in logs and errors by ``name``; its
    :meth:`fingerprint` (the texts' digest) keys its index in a work folder."""

    def __init__(self, texts: Mapping[str, str], name: str = "the given passages") -> None:
        self.texts = dict(texts)
        self.name = name
        self.stats = ReadStats()
        self.problems: list[str] = []  # as a reader's: a text without words is an error, never skipped
        lines = "".join(json.dumps({"id": pid, "contents": text}) + "\n" for pid, text in self.texts.items())
        self.digest = hashlib.sha256(lines.encode("utf-8")).hexdigest()[:16]

    def __str__(self) -> str:
        return self.name

    def __iter__(self) -> Iterator[Passage]:
        for pid, contents in self.texts.items():
            text, query = split_doct5query(contents)
            if not text:
                raise KueriError(f"{self.name}: passage {pid}: empty contents")
            self.stats.read += 1
            yield Passage(pid, text, query, None)

    def counts(self) -> dict[str, object]:
        return {"read": self.stats.read, "skipped": {}}

    def fingerprint(self) -> list[dict[str, object]]:
        """What its index is keyed by (in place of a corpus file's path, size and time): the texts' digest."""
        return [{"path": f"candidates-{self.digest}", "texts_sha256": self.digest, "passages": len(self.texts)}]


def read_passages(paths: str | Path | Iterable[str | Path], skip_bad: bool = False) -> Iterator[Passage]:
    """Convenience generator over :class:`PassageReader` (when the counts are not needed)."""
    return iter(PassageReader(paths, skip_bad=skip_bad))
