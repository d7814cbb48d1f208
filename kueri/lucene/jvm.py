"""The bridge to Lucene: the only module that imports ``jnius``, and the only way to a Java class.

JVM options (heap, classpath) can be set only before the first ``import jnius`` and a JVM cannot
be restarted, so this module starts it once, lazily, on the first call of :func:`lucene`, and
hands out Java classes looked up once and cached: every class kueri uses is registered by a
short name in :attr:`_Lucene.CLASSES` (``lucene().IndexWriter``), so one table lists all of them.

Lucene 9.9.1 comes from the Anserini fat jar inside pyserini 0.25.0 (installed ``--no-deps``);
pyserini itself is never imported (it would pull torch). ``KUERI_JAR`` overrides the jar,
``KUERI_HEAP`` the maximum heap (e.g. ``2g``), ``JAVA_HOME`` the Java installation. The Java's version
is checked before the JVM starts (:func:`check_java`): an old one is one line saying what was found and
what is needed, never a class-loading stack trace.

pyjnius is not thread-safe: every Java call must come from the thread that started the JVM.
"""

from __future__ import annotations

import glob
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kueri.errors import BrokenCache, EnvironmentProblem, KueriError, SetupError
from kueri.lucene.javahelper import CLASS_DIR, compile_classes, shipped_classes

log = logging.getLogger(__name__)

#: The longest a call into kueri's Java helper waits before returning, so that Python can handle ^C and
#: SIGTERM (its signal handlers run between Java calls, never during one).
POLL_MS = 200

#: Options of a JVM that will do long bulk work (:func:`prefer_throughput`): C2 only, no tiered
#: compilation. The JIT compiles far less for the same speed once warm: a full-corpus build gains, a short job
#: (the sample) would lose a little (docs/benchmarks.md).
THROUGHPUT_OPTIONS = ("-XX:-TieredCompilation",)

#: Heap default: enough for indexing with a 256 MB RAM buffer and for searching the full corpus,
#: small enough to leave room for Python on a 2 GB share of a small machine.
DEFAULT_HEAP = "1g"

INSTALL_JAR_HINT = "install it with: pip install --no-deps pyserini==0.25.0"
INSTALL_JAVA_HINT = (
    "install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless) or set JAVA_HOME"
)

#: The oldest Java that can run kueri: Lucene 9's classes (and kueri's Java helper, compiled with
#: ``--release 11``) are Java 11 class files, which an older JVM refuses to load.
MIN_JAVA = 11
#: The Java kueri's runs and tests are checked on (Debian 12's OpenJDK 17). Another Java from 11 on runs
#: the same code, but its JIT's floating point is not checked against the shipped runs: a warning, not an error.
TESTED_JAVA = 17


def find_jar() -> Path:
    """Locate the Lucene fat jar shipped in the pyserini 0.25.0 wheel, without importing it."""
    override = os.environ.get("KUERI_JAR")
    if override:
        jar = Path(override)
        if not jar.is_file():
            raise SetupError(f"KUERI_JAR={override} is not a file")
        return jar
    spec = importlib.util.find_spec("pyserini")
    if spec is None or not spec.submodule_search_locations:
        raise SetupError(f"the Lucene jar is missing: pyserini is not installed; {INSTALL_JAR_HINT}")
    package_dir = Path(list(spec.submodule_search_locations)[0])
    jars = sorted(glob.glob(str(package_dir / "resources" / "jars" / "anserini-*-fatjar.jar")))
    if not jars:
        raise SetupError(f"no anserini fat jar under {package_dir}; {INSTALL_JAR_HINT}")
    return Path(jars[-1])


def find_java_home() -> Path:
    """JAVA_HOME if set, else the installation behind ``java`` on PATH (pyjnius needs libjvm)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        home = Path(java_home)
    else:
        java = shutil.which("java")
        if java is None:
            raise SetupError(f"Java was not found (no JAVA_HOME, no java on PATH); {INSTALL_JAVA_HINT}")
        home = Path(java).resolve().parent.parent  # .../bin/java -> the installation
    if not list(home.glob("lib/server/libjvm.so")) + list(home.glob("jre/lib/*/server/libjvm.so")):
        raise SetupError(f"no libjvm.so under {home}: not a JDK/JRE; {INSTALL_JAVA_HINT}")
    return home


@dataclass(frozen=True)
class JavaVersion:
    """A Java installation's version, read without starting it in this process."""

    text: str  # as the installation spells it: 17.0.15, 1.8.0_392
    major: int  # 8 for 1.8.0_392, 17 for 17.0.15
    source: str  # where it was read: the release file, or ``java -version``

    @property
    def supported(self) -> bool:
        return self.major >= MIN_JAVA


def _major(text: str) -> int:
    """The feature release of a Java version string: ``1.8.0_392`` -> 8, ``17.0.15`` -> 17, ``21-ea`` -> 21."""
    parts = re.findall(r"\d+", text)
    if not parts:
        raise ValueError(text)
    return int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(parts[0])


@cache
def java_version(home: Path) -> JavaVersion:
    """The version of the Java installation at ``home``.

    Its ``release`` file first (every JDK and JRE since 9 has one, as has 8: a read of ~1 KB), else the
    output of ``bin/java -version`` in a subprocess (slower: a process). Cached per
    installation. :class:`SetupError` when neither tells.
    """
    release = home / "release"
    try:
        found = re.search(r'^JAVA_VERSION="?([^"\n]+)"?', release.read_text(encoding="utf-8", errors="replace"), re.M)
        if found:
            return JavaVersion(found.group(1), _major(found.group(1)), str(release))
    except (OSError, ValueError):
        pass  # no release file, or an odd one: ask the java binary
    java = home / "bin" / "java"
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60)
        found = re.search(r'version "([^"]+)"', done.stderr + done.stdout)
        if found:
            return JavaVersion(found.group(1), _major(found.group(1)), f"{java} -version")
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[0]
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        why = str(exc)
    raise SetupError(f"cannot tell the version of the Java at {home} (no JAVA_VERSION in {release}; {java} -version: "
                     f"{why}); {INSTALL_JAVA_HINT}")


def check_java(home: Path) -> JavaVersion:
    """The Java at ``home`` if kueri can run on it; one-line :class:`SetupError` naming what was found and
    what is needed if it is too old. A Java other than the tested one is a warning (once)."""
    version = java_version(home)
    if not version.supported:
        raise _too_old(version, home)
    if version.major != TESTED_JAVA:
        _warn_untested(version.text, str(home))
    return version


def _too_old(version: JavaVersion, home: Path) -> SetupError:
    return SetupError(f"Java {version.text} at {home} is too old: Lucene 9 needs Java {MIN_JAVA} or later "
                      f"(kueri is tested on {TESTED_JAVA}); {INSTALL_JAVA_HINT}")


@cache
def _warn_untested(text: str, home: str) -> None:
    log.warning("Java %s at %s: kueri is tested on Java %d; runs should be the same but are not checked on it",
                text, home, TESTED_JAVA)


_LUCENE_CONSTANT = re.compile(rb"LUCENE_(\d+)_(\d+)_(\d+)")


@cache
def jar_lucene_version(jar: Path) -> str:
    """The Lucene version a jar holds, read without a JVM: the newest ``LUCENE_X_Y_Z`` constant its
    ``org.apache.lucene.util.Version`` class declares (``Version.LATEST`` is the newest). Cached."""
    try:
        with zipfile.ZipFile(jar) as archive:
            data = archive.read("org/apache/lucene/util/Version.class")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise SetupError(f"{jar}: no Lucene in it ({exc}); {INSTALL_JAR_HINT}") from None
    versions = sorted({tuple(int(n) for n in m) for m in _LUCENE_CONSTANT.findall(data)})
    if not versions:
        raise SetupError(f"{jar}: its Lucene Version class names no version; {INSTALL_JAR_HINT}")
    return ".".join(map(str, versions[-1]))


def lucene_version() -> str:
    """The version of the Lucene kueri runs: the running JVM's ``Version.LATEST`` (the classes actually
    loaded), else the jar's, without starting a JVM for it."""
    if jvm_started():
        return str(lucene().Version.LATEST.toString())
    return jar_lucene_version(find_jar())


def java_status() -> dict[str, Any]:
    """The Java kueri would start, described without starting it (for ``kueri env``): where, which version,
    whether it is enough, whether kueri's Java helper will be on its class path; ``problem`` says what is wrong."""
    status: dict[str, Any] = {"home": None, "version": None, "source": None, "required": f"{MIN_JAVA} or later",
                              "tested": str(TESTED_JAVA), "ok": False, "helper": shipped_classes() is not None,
                              "problem": None}
    try:
        home = find_java_home()
        status.update(home=str(home))
        version = java_version(home)
        status.update(version=version.text, source=version.source, ok=version.supported)
        if not version.supported:
            status["problem"] = str(_too_old(version, home))
    except SetupError as exc:
        status["problem"] = str(exc)
    return status


def lucene_status() -> dict[str, Any]:
    """The Lucene jar kueri would load and its Lucene version, read without a JVM (for ``kueri env``)."""
    status: dict[str, Any] = {"jar": None, "bytes": None, "version": None, "ok": False, "problem": None}
    try:
        jar = find_jar()
        status.update(jar=str(jar), bytes=jar.stat().st_size)
        status.update(version=jar_lucene_version(jar), ok=True)
    except (SetupError, OSError) as exc:
        status["problem"] = str(exc)
    return status


_throughput = False  # set by prefer_throughput() before the JVM starts


def _jnius_config() -> Any:
    try:
        import jnius_config  # only the options; importing it starts nothing
    except ImportError as exc:  # pragma: no cover - a broken install
        raise SetupError("pyjnius is not installed: pip install pyjnius==1.9.0") from exc
    return jnius_config


def jvm_started() -> bool:
    """Whether this process's JVM runs (started by kueri or by another library)."""
    return _jnius.cache_info().currsize > 0 or bool(_jnius_config().vm_running)


def prefer_throughput() -> bool:
    """Start this process's JVM, when it starts, for long bulk work (:data:`THROUGHPUT_OPTIONS`).

    Called by a build of many chunks before its first Java call. True if it takes effect; False if
    the JVM runs already (its options cannot change), which costs only the few seconds it would save.
    """
    global _throughput
    if jvm_started():
        return False
    _throughput = True
    return True


def detach_thread() -> None:
    """Detach the calling thread from the JVM, if it used Java: a thread other than the one that started the JVM
    must do so before it ends (pyjnius attaches it on its first Java call), or the JVM may crash at its end."""
    if jvm_started():
        _jnius().detach()


@cache
def _jnius() -> Any:
    """Start the JVM with our options (once per process) and return the jnius module."""
    jar = find_jar()
    java_home = find_java_home()
    jnius_config = _jnius_config()
    if not jnius_config.vm_running:
        check_java(java_home)  # before the JVM loads: an old one would fail deep in class loading
    os.environ["JAVA_HOME"] = str(java_home)  # pyjnius reads it when it loads libjvm
    if jnius_config.vm_running:
        # Another library (PyTerrier's pt.java.init(), say) started this process's JVM first: a JVM
        # cannot be restarted, and kueri's Lucene must be on the class path it was given.
        import jnius

        class_path = str(jnius.autoclass("java.lang.System").getProperty("java.class.path") or "")
        if str(jar) not in class_path.split(os.pathsep):
            raise SetupError(
                "a JVM was started in this process before kueri's, without kueri's Lucene jar on its class "
                f"path ({jar}). Use kueri before starting another library's Java, or give that library the "
                "jar first (PyTerrier: pt.java.add_jar(kueri.lucene.jvm.find_jar()) before pt.java.init())"
            )
        return jnius
    heap = os.environ.get("KUERI_HEAP", DEFAULT_HEAP)
    # -Xrs: the JVM installs no SIGINT/SIGTERM handlers of its own, so Python's handlers run and a
    # stopped run cleans up its partial files (the JVM's would exit at once).
    options = [f"-Xmx{heap}", "-Xss4m", "-XX:+UseParallelGC", "-Xrs", *(THROUGHPUT_OPTIONS if _throughput else ())]
    jnius_config.add_options(*options)
    helper = shipped_classes()  # kueri's own classes (None: KUERI_JAVA_HELPER=0, or stale)
    jnius_config.set_classpath(str(jar), *([str(helper)] if helper else []))
    log.debug("starting the JVM: %s", " ".join(options))
    import jnius

    return jnius


class _Lucene:
    """Attribute access to Java classes by short name, looked up once: ``lucene().IndexWriter``."""

    CLASSES = {
        # analysis
        "CustomAnalyzer": "org.apache.lucene.analysis.custom.CustomAnalyzer",
        "CharTermAttribute": "org.apache.lucene.analysis.tokenattributes.CharTermAttribute",
        "HashMap": "java.util.HashMap",
        "File": "java.io.File",
        "Paths": "java.nio.file.Paths",
        # index
        "FSDirectory": "org.apache.lucene.store.FSDirectory",
        "IndexWriter": "org.apache.lucene.index.IndexWriter",
        "IndexWriterConfig": "org.apache.lucene.index.IndexWriterConfig",
        "OpenMode": "org.apache.lucene.index.IndexWriterConfig$OpenMode",
        "LogByteSizeMergePolicy": "org.apache.lucene.index.LogByteSizeMergePolicy",
        "IndexOptions": "org.apache.lucene.index.IndexOptions",
        "DirectoryReader": "org.apache.lucene.index.DirectoryReader",
        "MultiReader": "org.apache.lucene.index.MultiReader",
        "Term": "org.apache.lucene.index.Term",
        "Document": "org.apache.lucene.document.Document",
        "Field": "org.apache.lucene.document.Field",
        "FieldType": "org.apache.lucene.document.FieldType",
        "StringField": "org.apache.lucene.document.StringField",
        "FieldStore": "org.apache.lucene.document.Field$Store",
        # search
        "IndexSearcher": "org.apache.lucene.search.IndexSearcher",
        "BooleanQuery": "org.apache.lucene.search.BooleanQuery",
        "BooleanQueryBuilder": "org.apache.lucene.search.BooleanQuery$Builder",
        "Occur": "org.apache.lucene.search.BooleanClause$Occur",
        "TermQuery": "org.apache.lucene.search.TermQuery",
        "BM25Similarity": "org.apache.lucene.search.similarities.BM25Similarity",
        "ClassicSimilarity": "org.apache.lucene.search.similarities.ClassicSimilarity",
        "LMDirichletSimilarity": "org.apache.lucene.search.similarities.LMDirichletSimilarity",
        "QueryParser": "org.apache.lucene.queryparser.classic.QueryParser",
        "QueryParserOperator": "org.apache.lucene.queryparser.classic.QueryParser$Operator",
        "MultiFieldQueryParser": "org.apache.lucene.queryparser.classic.MultiFieldQueryParser",
        "Float": "java.lang.Float",
        "LinkedHashMap": "java.util.LinkedHashMap",
        "StandardAnalyzer": "org.apache.lucene.analysis.standard.StandardAnalyzer",
        "TermInSetQuery": "org.apache.lucene.search.TermInSetQuery",
        "BytesRef": "org.apache.lucene.util.BytesRef",
        "ArrayList": "java.util.ArrayList",
        # index internals: shards, joins, statistics, checks
        "SegmentInfos": "org.apache.lucene.index.SegmentInfos",
        "Version": "org.apache.lucene.util.Version",
        "NoMergePolicy": "org.apache.lucene.index.NoMergePolicy",
        "NIOFSDirectory": "org.apache.lucene.store.NIOFSDirectory",
        "MultiTerms": "org.apache.lucene.index.MultiTerms",
        "IndexReader": "org.apache.lucene.index.IndexReader",
        "CheckIndex": "org.apache.lucene.index.CheckIndex",
        "CodecUtil": "org.apache.lucene.codecs.CodecUtil",
        "IOContext": "org.apache.lucene.store.IOContext",
        # vectors (kueri.lucene.vectors)
        "KnnFloatVectorField": "org.apache.lucene.document.KnnFloatVectorField",
        "KnnFloatVectorQuery": "org.apache.lucene.search.KnnFloatVectorQuery",
        "VectorSimilarityFunction": "org.apache.lucene.index.VectorSimilarityFunction",
        "MatchAllDocsQuery": "org.apache.lucene.search.MatchAllDocsQuery",
        "SerialMergeScheduler": "org.apache.lucene.index.SerialMergeScheduler",
        "LogDocMergePolicy": "org.apache.lucene.index.LogDocMergePolicy",
        # kueri's own (kueri/lucene/java, see kueri.lucene.javahelper)
        "ShardIndexer": "kueri.helper.ShardIndexer",
        "TopicSearches": "kueri.helper.TopicSearches",
    }

    def __init__(self) -> None:
        self._jnius = _jnius()
        self.cast = self._jnius.cast
        self.JavaException = self._jnius.JavaException

    def __getattr__(self, name: str) -> Any:
        qualified = self.CLASSES.get(name)
        if qualified is None:
            raise AttributeError(f"no Java class registered as {name!r}")
        cls = self._jnius.autoclass(qualified)
        setattr(self, name, cls)  # cached: later lookups are plain attribute reads
        return cls


@cache
def lucene() -> _Lucene:
    """The started JVM's Lucene classes; starts the JVM on the first call."""
    return _Lucene()


def has_java_helper() -> bool:
    """Whether kueri's Java helper classes are on this JVM's class path (shipped, and the JVM started by kueri).

    Before the JVM starts: whether they will be, without starting it.
    """
    if not jvm_started():
        return shipped_classes() is not None
    return _helper_loads()


@cache
def _helper_loads() -> bool:
    L = lucene()
    try:
        L.ShardIndexer, L.TopicSearches  # noqa: B018 - loads the classes
    except L.JavaException:
        return False
    return True


def java_hashmap_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a Java ``HashMap`` into which ``keys`` were put in this order.

    The original iterated ``HashMap``s (search fields, feedback terms, fused documents), and that
    order decides float sums and ties; a real ``HashMap`` reproduces it exactly. Putting a key again
    does not move it, so repeated keys may be passed.
    """
    table = lucene().HashMap()
    for key in keys:
        table.put(key, None)
    return [str(key) for key in table.keySet().toArray()]


def java_error(exc: BaseException, doing: str) -> KueriError:
    """A Java exception as kueri's error: a damaged index, the machine's refusal (disk full,
    permissions: :class:`EnvironmentProblem`), or else a plain :class:`KueriError`; one line each."""
    classname = str(getattr(exc, "classname", "") or "")
    message = f"{doing}: {java_error_message(exc)}"
    if classname.endswith(("CorruptIndexException", "IndexFormatTooOldException", "IndexFormatTooNewException",
                           "NoSuchFileException", "FileNotFoundException", "EOFException")):
        return BrokenCache(message)  # files missing, cut short or damaged
    if classname.startswith(("java.io.", "java.nio.file.")) or classname.endswith("IOException"):
        return EnvironmentProblem(message)
    return KueriError(message)


def java_error_message(exc: BaseException) -> str:
    """A one-line message for a Java exception surfacing through pyjnius."""
    classname = getattr(exc, "classname", None)
    inner = getattr(exc, "innermessage", None)
    if classname:
        return f"{classname}: {inner}" if inner else str(classname)
    return str(exc)


def compile_java_helper() -> Path:
    """Compile kueri's Java helper into the classes the package ships (:data:`kueri.lucene.javahelper.CLASS_DIR`),
    with the JDK and the Lucene jar kueri finds: what ``scripts/compile_java_helper.py`` runs."""
    java_home = find_java_home()
    check_java(java_home)
    compile_classes(find_jar(), java_home)
    return CLASS_DIR
