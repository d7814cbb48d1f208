"""The work folder as a cache: what is in it, whether each entry is sound, and pruning.

A work folder holds indexes (``index-<key>/``, keyed by the corpus files and the analysis) and
stores of passage embeddings (``embeddings-<store key>/``). Every entry is rebuilt when missing or broken
(:func:`kueri.pipeline.cached_index`, :class:`kueri.encoders.store.EmbeddingStore`),
so deleting any of them only costs time. Besides those, a killed build may leave an unfinished
index (``*.partial``) or a temporary file (``.*.tmp``), and every entry has a lock file
(``*.lock``) that processes take while they build it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kueri.errors import BrokenCache, KueriError
from kueri.files import try_file_lock
from kueri.lucene import AnalyzerConfig


@dataclass
class Entry:
    path: Path
    kind: str  # index | embeddings | unfinished | temporary | other
    size: int
    last_used: float  # seconds since the epoch (the entry's modification time)
    about: str = ""  # what it holds, in words
    problem: str | None = None  # set by verify(): why it is broken

    @property
    def lock(self) -> Path:
        name = self.path.name.removesuffix(".partial")
        return self.path.with_name(name + ".lock")


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _describe_index(path: Path) -> str:
    try:
        manifest = json.loads((path / "kueri-index.json").read_text(encoding="utf-8"))
        corpus = ", ".join(Path(f["path"]).name for f in manifest.get("corpus", [])) or "?"
        lucene = f"; Lucene {manifest['lucene_version']}" if "lucene_version" in manifest else ""  # older: unrecorded
        return (f"{manifest['indexed']} passages of {corpus}; {AnalyzerConfig(**manifest['analyzer_config']).summary()}"
                f"{lucene}")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, KueriError):
        return "no readable manifest"


def entries(workdir: str | Path) -> list[Entry]:
    """Every entry of the work folder (locks left out), in name order."""
    folder = Path(workdir)
    if not folder.is_dir():
        raise KueriError(f"{folder}: no such work folder")
    found = []
    for path in sorted(folder.iterdir()):
        name = path.name
        if name.endswith(".lock"):
            continue
        stat = path.stat()
        if name.endswith(".partial"):
            kind, about = "unfinished", "an index build that did not finish (or is running now)"
        elif name.endswith(".tmp"):
            kind, about = "temporary", "a file being written (or left by a killed process)"
        elif name.startswith("index-") and path.is_dir():
            kind, about = "index", _describe_index(path)
        elif name.startswith("candidates-") and name.endswith(".jsonl.gz"):
            kind, about = "other", "the passages of a re-rank input, written by an older kueri (unused now)"
        elif name.startswith("embeddings-") and path.is_dir():
            kind, about = "embeddings", f"passage embeddings ({name.removeprefix('embeddings-')})"
        elif name.startswith("ray-run-") and path.is_dir():
            kind, about = "unfinished", "the finished batches of a run on Ray (the same command resumes from them)"
        elif name.startswith("embeddings-") and name.endswith(".npz"):
            kind, about = "embeddings", "former passage embeddings file (read into its store by the next run)"
        else:
            kind, about = "other", "not kueri's"
        found.append(Entry(path, kind, _size(path), stat.st_mtime, about))
    return found


def verify(entry: Entry) -> Entry:
    """Check one entry thoroughly (an index: every byte, Lucene's CheckIndex); sets ``entry.problem``."""
    if entry.kind == "index":
        from kueri.lucene import LuceneIndex, check_index
        from kueri.lucene.index import verify_files

        try:
            verify_files(entry.path)
            LuceneIndex(entry.path).close()
            entry.problem = check_index(entry.path)
        except BrokenCache as exc:
            entry.problem = str(exc)
    elif entry.kind == "embeddings":
        from kueri.encoders.store import check_store, read_embeddings

        try:
            if entry.path.is_dir():
                entry.problem = check_store(entry.path)
            else:
                read_embeddings(entry.path)
        except BrokenCache as exc:
            entry.problem = str(exc)
    return entry


def compact(workdir: str | Path) -> list[tuple[Path, tuple[int, int, int] | None]]:
    """Each embeddings store of the work folder compacted (``kueri cache compact``): its chunk files before and
    after, and its passages (None: a store without a whole chunk)."""
    from kueri.encoders.store import compact_store

    return [(entry.path, compact_store(entry.path)) for entry in entries(workdir)
            if entry.kind == "embeddings" and entry.path.is_dir()]


@contextlib.contextmanager
def _unless_busy(entry: Entry) -> Iterator[bool]:
    """Whether no process holds the entry's lock (held for the block), without waiting."""
    if not entry.lock.exists():
        yield True
        return
    with try_file_lock(entry.lock) as free:
        yield free


def prune(workdir: str | Path, older_than_days: float | None = None, check: bool = True) -> list[Entry]:
    """Remove what a run would not use: broken entries (``check``), unfinished builds and temporary files
    no process is working on, and (``older_than_days``) entries not used for that long. Returns them."""
    removed = []
    now = time.time()
    for entry in entries(workdir):
        reason = None
        if entry.kind in ("unfinished", "temporary") and now - entry.last_used > 60:
            reason = entry.kind
        elif entry.kind in ("index", "embeddings"):
            if older_than_days is not None and now - entry.last_used > older_than_days * 86400:
                reason = "old"
            elif check and verify(entry).problem:
                reason = "broken"
        if reason is None:
            continue
        with _unless_busy(entry) as free:
            if not free:
                continue
            if entry.path.is_dir():
                shutil.rmtree(entry.path)
            else:
                entry.path.unlink()
        entry.about = reason
        removed.append(entry)
    return removed
