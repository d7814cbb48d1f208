"""Files every stage writes the same way: atomically, under a lock when shared, and string arrays for numpy.

A run, a model or a cache is written to a temporary file in the target's folder (so ``os.replace``
is a rename on one filesystem), flushed to disk, and only then put in place: a crash or an
exception leaves the target as it was (absent, or the previous file), never half written.

Work-folder entries are shared by every kueri process on the machine; :func:`file_lock` lets one
build an entry while the others wait for it (the operating system releases the lock of a process
that dies, so a crash leaves no stale lock).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from kueri.errors import EnvironmentProblem

log = logging.getLogger(__name__)

#: How long a process waits for another's lock before giving up (seconds; ``KUERI_LOCK_TIMEOUT``).
DEFAULT_LOCK_TIMEOUT = 4 * 3600.0


def _lock_file(path: str | Path) -> tuple[Path, int]:
    """The lock file ``path`` (made, with its folder, when missing) and an open descriptor of it to lock."""
    lock = Path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    return lock, os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)


@contextlib.contextmanager
def file_lock(path: str | Path, what: str, timeout: float | None = None) -> Iterator[None]:
    """Hold the exclusive lock ``path`` (created if missing) while the block runs.

    When another process holds it, say so once (``waiting for another kueri process building WHAT``)
    and wait, at most ``timeout`` seconds (``KUERI_LOCK_TIMEOUT``, else 4 hours), then fail with one line.
    """
    if timeout is None:
        timeout = float(os.environ.get("KUERI_LOCK_TIMEOUT", DEFAULT_LOCK_TIMEOUT))
    lock, fd = _lock_file(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("waiting for another kueri process building %s (lock %s)", what, lock)
            deadline = time.monotonic() + timeout
            while True:
                time.sleep(0.2)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise EnvironmentProblem(f"{lock}: another kueri process has been building {what} for "
                                                 f"over {timeout:.0f} s; stop it, or set KUERI_LOCK_TIMEOUT") from None
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def try_file_lock(path: str | Path) -> Iterator[bool]:
    """The exclusive lock ``path`` if no other process holds it (True, held for the block), without waiting
    (False): for work that another process holding the lock will do anyway."""
    fd = _lock_file(path)[1]
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def writable_folder(path: str | Path, what: str) -> Path:
    """``path`` as a folder this process can write in, created if missing; else one clear line (exit 3).

    Called before any work starts, so a wrong output or work folder fails at once, not after the run.
    """
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise EnvironmentProblem(f"{folder}: the {what} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentProblem(f"{folder}: cannot create the {what}: {exc.strerror}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise EnvironmentProblem(f"{folder}: the {what} is not writable (permission denied or a read-only filesystem)")
    return folder


def writable_file(path: str | Path, what: str) -> Path:
    """``path`` as a file that can be written (its folder made and writable, the path itself no folder)."""
    target = Path(path)
    if target.is_dir():
        raise EnvironmentProblem(f"{target}: the {what} is a folder, not a file")
    writable_folder(target.parent if str(target.parent) else Path("."), f"folder of the {what}")
    return target


def touch(path: str | Path) -> None:
    """Mark a work-folder entry as used now (its modification time; ``kueri cache`` shows and prunes by it)."""
    with contextlib.suppress(OSError):  # a read-only work folder still serves
        os.utime(path)


@functools.cache
def _umask() -> int:
    # The only way to read the umask is to set it; do that once (it is process-wide state).
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_writer(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file that replaces ``path`` when the block ends without an exception."""
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise EnvironmentProblem(f"{target}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; use the usual mode
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:  # a failed write names no file: name the target
            raise EnvironmentProblem(f"{target}: {exc.strerror or exc}") from exc
        raise


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """``data`` to ``path`` atomically (see :func:`atomic_writer`)."""
    with atomic_writer(path) as out:
        out.write(data)


def pack_strings(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array plus offsets: exact for any character, and no pickle needed."""
    encoded = [s.encode("utf-8") for s in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(b) for b in encoded])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def unpack_strings(data: np.ndarray, offsets: np.ndarray) -> list[str]:
    """The strings :func:`pack_strings` packed."""
    raw = data.tobytes()
    bounds = offsets.tolist()
    return [raw[a:b].decode("utf-8") for a, b in zip(bounds, bounds[1:], strict=False)]


def human_size(size: float) -> str:
    """A size in bytes for people: ``512 B``, ``1.3 MB`` (powers of 1000, as ``du --si``)."""
    for unit in ("B", "KB", "MB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"
