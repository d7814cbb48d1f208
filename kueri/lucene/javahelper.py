"""javahelper: kueri's own Java classes, shipped compiled inside the package.

pyjnius calls Java from one Python thread; these classes let Lucene work on several Java threads:
``java/ShardIndexer.java`` builds index shards on Java threads (:mod:`kueri.lucene.threads`) and
``java/TopicSearches.java`` searches topics side by side (:meth:`kueri.lucene.search.Searcher.search_queries`).
They are compiled for Java 11, the oldest Java Lucene 9 runs on, by ``scripts/compile_java_helper.py``
(``make java-helper``) whenever their sources change, and ship in ``java/classes/`` with a stamp of the
sources they came from: no user needs a JDK compiler, a Java runtime is enough.

With ``KUERI_JAVA_HELPER=0``, or classes whose stamp does not match the sources (a checkout whose
``.java`` files were edited and not recompiled), kueri runs without them: one writer indexes and topics
are searched one after the other, giving the same index and rankings, more slowly.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from kueri.errors import SetupError

log = logging.getLogger(__name__)

SOURCE_DIR = Path(__file__).with_name("java")
SOURCES = sorted(SOURCE_DIR.glob("*.java"))
#: The class path entry: ``kueri/helper/*.class`` below it, and the stamp.
CLASS_DIR = SOURCE_DIR / "classes"
STAMP = CLASS_DIR / "sources.sha256"
CLASS_FILES = [Path("kueri", "helper", source.stem + ".class") for source in SOURCES]
#: Class files for Java 11: any later JVM loads them.
RELEASE = "11"


def sources_digest() -> str:
    """What the stamp must say: the SHA-256 of the target release and every source (name and bytes)."""
    digest = hashlib.sha256(f"release {RELEASE}\0".encode())
    for source in SOURCES:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()


@cache
def shipped_classes() -> Path | None:
    """The folder to put on the class path; None: run without the helper (said once, with the reason)."""
    if os.environ.get("KUERI_JAVA_HELPER", "1") == "0":
        return None
    try:
        stamp = STAMP.read_text(encoding="ascii").strip()
        complete = all((CLASS_DIR / name).is_file() for name in CLASS_FILES)
        current = sources_digest()
    except OSError as exc:
        log.warning("kueri's Java helper is unreadable (%s): indexing on one writer, topics one by one", exc)
        return None
    if not complete or stamp != current:
        log.warning("kueri's Java helper classes in %s do not match their sources (run scripts/compile_java_helper.py"
                    "): indexing on one writer, topics one by one", CLASS_DIR)
        return None
    return CLASS_DIR


def compile_classes(jar: Path, java_home: Path, target: Path = CLASS_DIR) -> None:
    """Compile the sources against Lucene's ``jar`` with ``java_home``'s javac into ``target`` and stamp them
    (for ``scripts/compile_java_helper.py``; users never compile)."""
    javac = java_home / "bin" / "javac"
    if not javac.is_file():
        raise SetupError(f"no javac in {java_home} (a Java runtime only): install a JDK to compile kueri's Java helper")
    scratch = Path(tempfile.mkdtemp(prefix="kueri-java-"))
    try:
        done = subprocess.run([str(javac), "--release", RELEASE, "-nowarn", "-cp", str(jar), "-d", str(scratch),
                               *map(str, SOURCES)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["(no message)"])[0]
            raise SetupError(f"javac failed on kueri's Java helper: {first}")
        shutil.rmtree(target / "kueri", ignore_errors=True)
        shutil.copytree(scratch / "kueri", target / "kueri")  # inner classes included
        (target / STAMP.name).write_text(sources_digest() + "\n", encoding="ascii")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
