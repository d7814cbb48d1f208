"""writer: build a kueri index with one Lucene IndexWriter in this process.

Documents are added in corpus order by one thread, and the merge policy only merges adjacent
segments, so internal doc ids follow corpus order (:mod:`kueri.lucene.index` says why that
matters). A build writes into ``<dir>.partial`` and renames it to ``<dir>`` only when complete, with
the manifest written last. Segments are not packed into compound files (that copied every flushed
byte once more). This is also how one shard of a parallel build is made (:mod:`kueri.lucene.shards`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kueri import __version__
from kueri.errors import EnvironmentProblem, KueriError
from kueri.lucene.analyze import AnalyzerConfig, build_analyzer
from kueri.lucene.index import (
    CONTENTS_FIELD,
    DOCT5QUERY_FIELD,
    FORMAT_VERSION,
    ID_FIELD,
    IDS_FILE,
    MANIFEST,
    directory_size,
)
from kueri.lucene.jvm import java_error, lucene, lucene_version
from kueri.progress import progress_bar
from kueri.records import Passage

log = logging.getLogger(__name__)

STRING_FIELD_SIGNATURE = "(Ljava/lang/String;Ljava/lang/String;Lorg/apache/lucene/document/Field$Store;)V"
FIELD_SIGNATURE = (
    "(Ljava/lang/String;Ljava/lang/CharSequence;Lorg/apache/lucene/index/IndexableFieldType;)V"
)


@dataclass
class IndexStats:
    indexed: int
    seconds: float
    size_bytes: int
    expanded: int = 0  # passages with a DocT5Query expansion

    @property
    def rate(self) -> float:
        return self.indexed / self.seconds if self.seconds > 0 else 0.0



def _field_type(stored: bool, term_vectors: bool) -> Any:
    L = lucene()
    field_type = L.FieldType()
    field_type.setTokenized(True)
    field_type.setStored(stored)
    field_type.setIndexOptions(L.IndexOptions.DOCS_AND_FREQS)
    field_type.setStoreTermVectors(term_vectors)
    field_type.setOmitNorms(False)
    field_type.freeze()
    return field_type


def indexing_bar(progress: bool) -> Any:
    """The indexing progress bar: passages and passages/s."""
    return progress_bar("indexing", "passages", progress)


def open_writer(
    directory: Path, analyzer_config: AnalyzerConfig | None, ram_buffer_mb: float = 256.0, first_segment: int = 0
) -> Any:
    """A new IndexWriter on ``directory`` (created, replacing any index there).

    ``analyzer_config`` None: a writer that only adds whole indexes (``addIndexes``) and never
    merges, so the segments keep the order they are added in. ``first_segment`` > 0 numbers the
    new segments from there (``_`` + the number in base 36), so that shards built apart have
    distinct segment names and their files can be moved into one index unchanged.
    """
    L = lucene()
    fs_directory = L.FSDirectory.open(L.File(str(directory)).toPath())
    if first_segment > 0:
        # An empty commit whose segment counter starts there; a CREATE writer keeps the counter.
        empty = L.SegmentInfos(L.Version.LATEST.major)
        empty.counter = first_segment
        empty.commit(fs_directory)
    if analyzer_config is None:
        config = L.IndexWriterConfig()
        config.setMergePolicy(L.NoMergePolicy.INSTANCE)
    else:
        config = L.IndexWriterConfig(build_analyzer(analyzer_config))
        config.setRAMBufferSizeMB(ram_buffer_mb)
        config.setMergePolicy(L.LogByteSizeMergePolicy())  # adjacent merges keep corpus order
    config.setOpenMode(L.OpenMode.CREATE)
    # No compound files: packing a flushed segment into one .cfs file copies all its bytes once
    # more (~10% of the build time at 870k passages), and our indexes have few segments.
    config.setUseCompoundFile(False)
    return L.IndexWriter(fs_directory, config)


class DocumentWriter:
    """Adds passages to an IndexWriter through one reused Document and its Fields.

    Reusing the Java objects and only setting the field values is much faster than new objects per
    passage (pyjnius object creation is the cost; docs/benchmarks.md). A passage without a DocT5Query expansion goes
    through a second Document that lacks the ``docT5Query`` field: an empty field adds no term, no
    length and no document to the field's statistics, so scores are the same as with an empty
    field, and the Java call that sets it is saved.
    """

    def __init__(self, writer: Any) -> None:
        L = lucene()
        self.writer = writer
        id_field = L.StringField(ID_FIELD, "", L.FieldStore.YES, signature=STRING_FIELD_SIGNATURE)
        contents_field = L.Field(
            CONTENTS_FIELD, "", _field_type(stored=True, term_vectors=True), signature=FIELD_SIGNATURE
        )
        query_field = L.Field(
            DOCT5QUERY_FIELD, "", _field_type(stored=False, term_vectors=False), signature=FIELD_SIGNATURE
        )
        self.plain = L.Document()
        self.plain.add(id_field)
        self.plain.add(contents_field)
        self.expanded = L.Document()
        for field in (id_field, contents_field, query_field):
            self.expanded.add(field)
        self.id_field, self.contents_field, self.query_field = id_field, contents_field, query_field
        # Java methods are NOT bound once here: a pyjnius method object is shared by the instances
        # of a class and rebinds on every attribute access, so a stored bound method of one Field
        # would set the value of whichever Field was accessed last.

    def add(self, pid: str, contents: str, query: str) -> None:
        self.id_field.setStringValue(pid)
        self.contents_field.setStringValue(contents)
        if query:
            self.query_field.setStringValue(query)
            self.writer.addDocument(self.expanded)
        else:
            self.writer.addDocument(self.plain)


def write_manifest(directory: Path, analyzer_config: AnalyzerConfig, indexed: int, expanded: int, seconds: float,
                   extra: dict[str, Any] | None) -> None:
    """The manifest, last file of a build. Who wrote the index (kueri's and Lucene's versions) and its
    analysis are recorded so that opening it can refuse an index it must not search
    (:func:`kueri.lucene.index.compatibility_problem`)."""
    extra = extra or {}
    manifest = {
        "kueri_version": __version__,
        "lucene_version": lucene_version(),  # this process's Lucene, or the jar's when it runs no JVM
        "format": FORMAT_VERSION,
        "analyzer": analyzer_config.describe(),
        "analyzer_config": analyzer_config.__dict__,
        "analysis": analyzer_config.fingerprint(),
        "fields": {
            ID_FIELD: "string, stored",
            CONTENTS_FIELD: "docs+freqs, term vectors, norms, stored",
            DOCT5QUERY_FIELD: "docs+freqs, norms",
        },
        "indexed": indexed,
        "expanded": expanded,  # passages with a DocT5Query expansion
        "seconds": round(seconds, 3),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **extra,
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def failed_build(exc: BaseException, index_dir: Path, indexed: int,
                 java_exception: type[BaseException] | tuple[()] = ()) -> KueriError | None:
    """What a failed build raises in place of ``exc`` (``from exc``), one line naming the index: Lucene's
    exception, or the machine's refusal of a write (a full disk); None: ``exc`` itself (bad input, ^C)."""
    if isinstance(exc, java_exception):
        return java_error(exc, f"indexing {index_dir} failed after {indexed} passages")
    if isinstance(exc, OSError):
        return EnvironmentProblem(f"{index_dir}: indexing failed after {indexed} passages: {exc.strerror or exc}")
    return None


def source_counts(passages: object) -> dict[str, Any]:
    """What the passages' reader counted (``read``, ``skipped``: :meth:`kueri.parse.PassageReader.counts`), asked
    once it has been read through; nothing for a plain list of passages."""
    counts = getattr(passages, "counts", None)
    return dict(counts()) if callable(counts) else {}


def start_partial(index_dir: Path) -> Path:
    """A fresh ``<dir>.partial`` to build in (a leftover one was never complete: safe to drop)."""
    partial = index_dir.with_name(index_dir.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    return partial


def publish(partial: Path, index_dir: Path) -> None:
    """Replace ``index_dir`` by the complete ``partial`` (its manifest written last)."""
    if index_dir.exists():
        shutil.rmtree(index_dir)
    os.replace(partial, index_dir)


def build_sequential(
    passages: Iterable[Passage],
    index_dir: Path,
    analyzer_config: AnalyzerConfig,
    *,
    ram_buffer_mb: float = 256.0,
    progress: bool = True,
    metadata: dict[str, Any] | None = None,
    first_segment: int = 0,
) -> IndexStats:
    """:func:`kueri.lucene.build.build_index` by one writer in this process (also the build of one shard)."""
    L = lucene()
    partial = start_partial(index_dir)
    try:
        writer = open_writer(partial, analyzer_config, ram_buffer_mb, first_segment)
    except L.JavaException as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise java_error(exc, f"cannot create an index in {partial}") from exc
    documents = DocumentWriter(writer)

    started = time.perf_counter()
    indexed = expanded = 0
    bar = indexing_bar(progress)
    try:
        with open(partial / IDS_FILE, "w", encoding="utf-8") as ids:
            add = documents.add
            write = ids.write
            for passage in passages:
                pid, query = passage[0], passage[2]
                add(pid, passage[1], query)
                write(pid + "\n")
                indexed += 1
                if query:
                    expanded += 1
                if indexed & 1023 == 0:
                    bar.update(1024)
            bar.update(indexed & 1023)
        bar.close()
        log.info("committing %d passages ...", indexed)
        writer.commit()
        writer.close()
        seconds = time.perf_counter() - started
        write_manifest(partial, analyzer_config, indexed, expanded, seconds,
                       {**source_counts(passages), **(metadata or {})})
        publish(partial, index_dir)
    except BaseException as exc:
        # A bad passage, a full disk, ^C or SIGTERM: nothing half-built survives, and its space is freed.
        with contextlib.suppress(Exception):
            writer.rollback()
        shutil.rmtree(partial, ignore_errors=True)
        error = failed_build(exc, index_dir, indexed, L.JavaException)
        if error is None:
            raise
        raise error from exc
    finally:
        bar.close()
    return IndexStats(indexed, seconds, directory_size(index_dir), expanded)
