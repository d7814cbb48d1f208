"""javahelper: kueri's own Java classes, compiled from their sources in the package once and cached.

pyjnius calls Java from one Python thread; these classes let Lucene work on several Java threads:
``java/ShardIndexer.java`` indexes shards on Java threads of this process (:mod:`kueri.lucene.threads`)
instead of worker processes with a JVM each, and ``java/TopicSearches.java`` searches topics side by
side (:meth:`kueri.lucene.search.Searcher.search_queries`). They are compiled with the JDK's ``javac``
the first time a JVM starts (about 1 s) into a cache folder keyed by the sources and the Lucene jar,
and put on the class path. Without a ``javac`` (a JRE only), or with ``KUERI_JAVA_HELPER=0``, nothing
is compiled: indexing uses the worker processes of :mod:`kueri.lucene.workers` and topics are searched
one after the other: the same index and the same rankings, more slowly.

Cache folder: ``KUERI_JAVA_CACHE``, else ``$XDG_CACHE_HOME/kueri/java`` (``~/.cache/kueri/java``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

SOURCES = sorted(Path(__file__).with_name("java").glob("*.java"))
CLASS_FILES = [Path("kueri", "helper", source.stem + ".class") for source in SOURCES]
#: Class files for Java 11, the oldest Java Lucene 9 runs on: any later JVM loads them.
RELEASE = "11"


def cache_root() -> Path:
    configured = os.environ.get("KUERI_JAVA_CACHE")
    if configured:
        return Path(configured)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kueri" / "java"


def compiled_classes(jar: Path, java_home: Path) -> Path | None:
    """The class folder to put on the class path, compiling it first if needed; None: not available."""
    if os.environ.get("KUERI_JAVA_HELPER", "1") == "0":
        return None
    digest = hashlib.sha256(f"{jar.name}\0{RELEASE}".encode())
    try:
        for source in SOURCES:
            digest.update(source.name.encode() + b"\0" + source.read_bytes())
    except OSError as exc:
        log.warning("Java helper source unreadable (%s): indexing uses worker processes", exc)
        return None
    key = digest.hexdigest()[:16]
    folder = cache_root() / key
    if _complete(folder):
        return folder
    javac = java_home / "bin" / "javac"
    if not javac.is_file():
        log.debug("no javac in %s (a JRE): indexing uses worker processes", java_home)
        return None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=folder.parent))
    except OSError as exc:
        log.info("cannot write the Java helper's cache %s (%s): indexing uses worker processes",
                 folder.parent, exc.strerror)
        return None
    try:
        done = subprocess.run([str(javac), "--release", RELEASE, "-nowarn", "-cp", str(jar), "-d", str(scratch),
                               *map(str, SOURCES)], capture_output=True, text=True, timeout=300)
        for path in (scratch, *scratch.rglob("*")):  # readable by all, like a system cache (mkdtemp gives 0700)
            path.chmod(0o755 if path.is_dir() else 0o644)
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["(no message)"])[0]
            log.warning("compiling the Java helper failed (%s): indexing uses worker processes", first)
            return None
        try:
            os.replace(scratch, folder)  # atomic: another process may have put the same classes there first
        except OSError:
            if not _complete(folder):
                raise
        log.debug("compiled the Java helper into %s", folder)
        return folder
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("cannot compile the Java helper (%s): indexing uses worker processes", exc)
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _complete(folder: Path) -> bool:
    try:
        return bool(SOURCES) and all((folder / name).is_file() for name in CLASS_FILES)
    except OSError:  # unreadable: compiling into the same place would fail too
        return False
