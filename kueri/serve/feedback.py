"""Readers' judgments of passages ("useful" / "not useful"), kept as future training data.

Each judgment is one JSON line appended to ``feedback.jsonl`` in the work folder: the question, the two
objects, the configuration, the passage's id and rank, and the judgment. A line is written whole under an
exclusive lock (``flock``: several servers may share a work folder) and flushed to disk (``fsync``) before
the reader is thanked, so a crash loses at most the judgment being written, and never leaves half a line
that a later line would run into (a torn last line is completed with a newline before the next write).
Nothing reads the file while serving; docs/serve.md describes its fields.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kueri.errors import KueriError

FEEDBACK_FILE = "feedback.jsonl"


class BadFeedback(KueriError):
    """A judgment the server cannot record: the message says why (HTTP 400)."""


@dataclass(frozen=True)
class Judgment:
    question: str
    objects: list[str] | None
    config: str
    passage: str
    rank: int | None
    useful: bool
    time: str = ""  # UTC, ISO 8601; set when recorded


class FeedbackLog:
    """Appends judgments to ``path`` (``feedback.jsonl`` in the work folder)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def record(self, judgment: Judgment) -> dict[str, object]:
        line = {**asdict(judgment), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        data = (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and _last_byte(self.path, size) != b"\n":
                data = b"\n" + data  # a crash tore the last line: keep it apart from this one
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)  # closing releases the lock
        return line


def _last_byte(path: Path, size: int) -> bytes:
    with path.open("rb") as handle:
        handle.seek(size - 1)
        return handle.read(1)
