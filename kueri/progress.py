"""Progress bars for every loop a user waits on: tqdm on stderr, one line per update in logs.

The library never prints; a bar is the one thing it draws, and only when the caller asks
(``progress=True``; the CLI's ``-q`` turns them off). On a terminal the bar redraws in place; when
stderr is a file or a pipe (TIRA keeps stderr as a file) each update is a line of its own, at most
one a second, so a log shows progress while it happens.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")


class _LinesToStderr(io.TextIOBase):
    """tqdm's output as one line per update (tqdm redraws with carriage returns: one endless line in a file)."""

    def write(self, text: str) -> int:
        for piece in text.split("\r"):
            piece = piece.rstrip()
            if piece:
                sys.stderr.write(piece + "\n")
        return len(text)

    def flush(self) -> None:
        sys.stderr.flush()


def progress_bar(desc: str, unit: str, enabled: bool = True, total: int | None = None, **options: Any) -> tqdm:
    """A tqdm bar on stderr (redrawn on a terminal, lines otherwise); ``enabled`` False: a silent one."""
    out = sys.stderr if sys.stderr.isatty() else _LinesToStderr()
    return tqdm(desc=desc, unit=f" {unit}", total=total, disable=not enabled, mininterval=1.0, smoothing=0.1,
                file=out, **options)


def progress(items: Iterable[T], desc: str, unit: str, enabled: bool = True, total: int | None = None) -> Iterable[T]:
    """``items`` with a bar (see :func:`progress_bar`) while they are consumed."""
    if not enabled:
        return items
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    return progress_bar(desc, unit, enabled, total, iterable=items)
