"""Readers' judgments of passages ("useful" / "not useful"), kept as future training data, and the answers they judge.

Every answer the server gives (with feedback on) gets an id, ``answer_id``: the first 16 hexadecimal digits of the
SHA-256 of what it showed (the question, objects, configuration, aspect, and each passage's id, rank, stance and
scores), so the same answer shown twice has the same id. What it showed is appended to ``answers.jsonl`` in the work
folder, one JSON line an answer, so an id stays valid across a restart. A judgment names an answer id and a passage
shown in it; anything else is refused (:class:`BadFeedback`, HTTP 400). The server, not the reader, then writes the
judgment's line in ``feedback.jsonl``: the question, objects, configuration and aspect the reader saw, the passage's
rank, stance label and scores, and the judgment.

Both files are bounded (:class:`JsonLines`): when one would pass its size it is renamed ``NAME.1.jsonl`` (an older
``NAME.1`` becomes ``NAME.2``, and so on; the oldest beyond those kept is removed). The answers of the current and
previous file can be judged; older ones cannot. Each line is written whole under the file's lock (several servers may
share a work folder) and flushed to disk (``fsync``) before the reader is answered, so a crash loses at most the line
being written, and never leaves half a line that a later line would run into (a torn last line is completed with a
newline before the next write). docs/serve.md describes the fields.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

from kueri.errors import KueriError
from kueri.files import file_lock
from kueri.serve.answer import Answer

FEEDBACK_FILE = "feedback.jsonl"
ANSWERS_FILE = "answers.jsonl"
#: Bytes a feedback file reaches before it is rotated, and the rotated files kept: about 25,000 judgments a file,
#: 80 MB at most; copy the rotated files away to keep them longer.
FEEDBACK_BYTES, FEEDBACK_KEPT = 16_000_000, 4
#: The same for the answers: a 10-passage answer takes about 1.5 kB, so the two files hold the last 5,000 to 10,000
#: answers (fewer with a larger k); an answer older than those can no longer be judged.
ANSWERS_BYTES, ANSWERS_KEPT = 8_000_000, 1
ANSWER_ID = re.compile(r"[0-9a-f]{16}")
#: The fields a judgment may carry: as JSON, and as the page's form (``id`` is the passage; ``back``: where to return).
FEEDBACK_FIELDS = ("answer", "passage", "useful")
FORM_FIELDS = ("answer", "id", "useful", "back")


class BadFeedback(KueriError):
    """A judgment the server cannot record: the message says why (HTTP 400)."""


def now() -> str:
    """UTC, ISO 8601, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class JsonLines:
    """A JSON-lines file that several processes append to, rotated by size: ``path`` and at most ``kept`` older
    files (``NAME.1.jsonl`` the newest of them)."""

    def __init__(self, path: str | Path, max_bytes: int, kept: int) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.kept = kept

    def rotated(self, number: int) -> Path:
        return self.path.with_name(f"{self.path.stem}.{number}{self.path.suffix}")

    def files(self) -> list[Path]:
        """The current file and the rotated ones, newest first (those that exist)."""
        return [p for p in (self.path, *(self.rotated(n) for n in range(1, self.kept + 1))) if p.exists()]

    def append(self, line: dict[str, Any]) -> None:
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(self.path.with_name(self.path.name + ".lock"), f"the file {self.path.name}", timeout=60):
            size = self.path.stat().st_size if self.path.exists() else 0
            if size and size + len(data) > self.max_bytes:
                self._rotate()
                size = 0
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if size and _last_byte(self.path, size) != b"\n":
                    data = b"\n" + data  # a crash tore the last line: keep it apart from this one
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)

    def _rotate(self) -> None:
        """Under the lock: each file one number older, the oldest beyond ``kept`` gone (renames only: a line is
        never copied, and a reader with a file open keeps reading it)."""
        for number in range(self.kept, 0, -1):
            older = self.rotated(number - 1) if number > 1 else self.path
            if older.exists():
                os.replace(older, self.rotated(number))  # replaces the oldest, which goes


def _last_byte(path: Path, size: int) -> bytes:
    with path.open("rb") as handle:
        handle.seek(size - 1)
        return handle.read(1)


def shown(answer: Answer) -> dict[str, Any]:
    """What an answer showed, as its line in ``answers.jsonl`` records it (without its id and time)."""
    return {"question": answer.question, "objects": list(answer.objects) if answer.objects else None,
            "objects_from": answer.objects_from, "topic": answer.topic, "config": answer.config,
            "aspect": answer.aspect,
            "passages": [{"id": p.id, "rank": p.rank, "stance": p.stance, "relevance": p.relevance,
                          "quality": round(p.quality, 6) if p.quality is not None else None}
                         for p in answer.passages]}


def answer_id(record: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


#: A file of answers as this server knows it: its inode and the digest of its first line (an inode alone may be
#: reused by the next file once a rotated file is removed).
FileKey = tuple[int, bytes]


class AnswerLog:
    """The answers given, by id, in ``answers.jsonl`` (and its rotated file): appended when given, found when
    judged. Only where each line is (its file and offset) is kept in memory; the lines other servers on the work
    folder append are read as they come."""

    def __init__(self, path: str | Path, max_bytes: int = ANSWERS_BYTES, kept: int = ANSWERS_KEPT) -> None:
        self.lines = JsonLines(path, max_bytes, kept)
        self._where: dict[str, tuple[FileKey, int]] = {}  # answer id -> (its file, the offset of its line)
        self._scanned: dict[FileKey, int] = {}  # bytes read of each file
        self._lock = threading.Lock()

    def record(self, answer: Answer) -> str:
        """The answer's id; its line appended unless an answer with that id is recorded already."""
        record = shown(answer)
        found = answer_id(record)
        with self._lock:
            self._sync()
            if found not in self._where:
                self.lines.append({"answer": found, "time": now(), **record})
        return found

    def find(self, wanted: str) -> dict[str, Any] | None:
        """The line of the answer ``wanted`` (None: not one given, or rotated out)."""
        with self._lock:
            self._sync()
            where = self._where.get(wanted)
            if where is None:
                return None
            for path in self.lines.files():
                try:
                    with path.open("rb") as stream:
                        if _file_key(stream) != where[0]:
                            continue
                        stream.seek(where[1])
                        line = json.loads(stream.readline())
                except (OSError, ValueError):
                    return None
                return line if isinstance(line, dict) and line.get("answer") == wanted else None
            return None

    def _sync(self) -> None:
        """Read the lines appended since (by this server or another), and forget the files rotated out."""
        present: set[FileKey] = set()
        for path in self.lines.files():
            try:
                with path.open("rb") as stream:
                    key = _file_key(stream)
                    if key is None:
                        continue
                    present.add(key)
                    stream.seek(self._scanned.get(key, 0))
                    data = stream.read()
            except OSError:
                continue
            offset = self._scanned.get(key, 0)
            for raw in data.splitlines(keepends=True):
                if not raw.endswith(b"\n"):
                    break  # being written: read it next time
                try:
                    line = json.loads(raw)
                except ValueError:
                    line = None  # a line torn by a crash, completed by the next write
                if isinstance(line, dict) and isinstance(line.get("answer"), str):
                    self._where[line["answer"]] = (key, offset)
                offset += len(raw)
            self._scanned[key] = offset
        gone = set(self._scanned) - present
        if gone:  # a file rotated out: its answers can no longer be judged
            for key in gone:
                del self._scanned[key]
            self._where = {answer: at for answer, at in self._where.items() if at[0] in present}


def _file_key(stream: BinaryIO) -> FileKey | None:
    """The key of an open file (None: it has no whole line yet); leaves the stream anywhere."""
    stream.seek(0)
    first = stream.readline()
    if not first.endswith(b"\n"):
        return None
    return os.fstat(stream.fileno()).st_ino, hashlib.sha1(first).digest()


class FeedbackLog:
    """The work folder's answers and judgments: :meth:`answered` gives an answer its id, :meth:`record` checks and
    writes a judgment."""

    def __init__(self, folder: str | Path, feedback_bytes: int = FEEDBACK_BYTES,
                 answers_bytes: int = ANSWERS_BYTES) -> None:
        self.folder = Path(folder)
        self.judgments = JsonLines(self.folder / FEEDBACK_FILE, feedback_bytes, FEEDBACK_KEPT)
        self.answers = AnswerLog(self.folder / ANSWERS_FILE, answers_bytes)

    @property
    def path(self) -> Path:
        return self.judgments.path

    def answered(self, answer: Answer) -> str:
        """The id of an answer about to be shown (recorded, so a judgment of it can be checked)."""
        return self.answers.record(answer)

    def record(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Check a judgment (``answer``, ``passage``, ``useful``) against the answer it names and write its line,
        filled with what the reader saw; :class:`BadFeedback` naming what is wrong."""
        unknown = sorted(set(fields) - set(FEEDBACK_FIELDS))
        if unknown:
            raise BadFeedback(f"unknown field(s) {', '.join(unknown)[:100]}; known: {', '.join(FEEDBACK_FIELDS)}")
        wanted, passage, useful = fields.get("answer"), fields.get("passage"), fields.get("useful")
        if not isinstance(useful, bool):
            raise BadFeedback("useful must be true or false")
        if not isinstance(wanted, str) or not ANSWER_ID.fullmatch(wanted):
            raise BadFeedback("name the answer: the answer_id of the response that showed the passage "
                              "(16 hexadecimal digits)")
        if not isinstance(passage, str) or not passage.strip():
            raise BadFeedback("name the passage: its id, as the answer showed it")
        record = self.answers.find(wanted)
        if record is None:
            raise BadFeedback(f"answer {wanted} is not one this server gave (or is older than the answers it keeps)")
        seen = next((p for p in record.get("passages", []) if p.get("id") == passage), None)
        if seen is None:
            raise BadFeedback(f"passage {passage[:100]!r} was not shown in answer {wanted}")
        line = {"time": now(), "answer": wanted, "answered": record.get("time"),
                **{key: record.get(key) for key in ("question", "objects", "objects_from", "topic", "config",
                                                    "aspect")},
                "shown": len(record["passages"]), "passage": passage, "rank": seen.get("rank"),
                "stance": seen.get("stance"), "relevance": seen.get("relevance"), "quality": seen.get("quality"),
                "useful": useful}
        self.judgments.append(line)
        return line
