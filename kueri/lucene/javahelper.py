"""javahelper: kueri's own Java class, compiled from its source in the package once and cached.

``java/ShardIndexer.java`` lets Lucene index on Java threads of this process (:mod:`kueri.lucene.threads`)
instead of worker processes with a JVM each. It is compiled with the JDK's ``javac`` the first time a
JVM starts (about 1 s) into a cache folder keyed by the source and the Lucene jar, and put on the class
path. Without a ``javac`` (a JRE only), or with ``KUERI_JAVA_HELPER=0``, nothing is compiled and
indexing uses the worker processes of :mod:`kueri.lucene.shards`: the same index, more slowly.

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

SOURCE = Path(__file__).with_name("java") / "ShardIndexer.java"
CLASS_FILE = Path("kueri", "helper", "ShardIndexer.class")
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
    try:
        source = SOURCE.read_bytes()
    except OSError as exc:
        log.warning("Java helper source %s unreadable (%s): indexing uses worker processes", SOURCE, exc.strerror)
        return None
    key = hashlib.sha256(source + b"\0" + jar.name.encode() + b"\0" + RELEASE.encode()).hexdigest()[:16]
    folder = cache_root() / key
    if (folder / CLASS_FILE).is_file():
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
                               str(SOURCE)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["(no message)"])[0]
            log.warning("compiling the Java helper failed (%s): indexing uses worker processes", first)
            return None
        try:
            os.replace(scratch, folder)  # atomic: another process may have put the same classes there first
        except OSError:
            if not (folder / CLASS_FILE).is_file():
                raise
        log.debug("compiled the Java helper into %s", folder)
        return folder
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("cannot compile the Java helper (%s): indexing uses worker processes", exc)
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
