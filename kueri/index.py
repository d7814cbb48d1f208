"""index: build a Lucene index of passages, and open one for the later stages.

Fields, exactly as the original's ``DirectoryIndexer`` for scoring:

* ``id``: one untokenized term, stored;
* ``contents``: docs + frequencies (no positions), term vectors (terms + frequencies), norms;
  also **stored** here, so quality and stance stages can read the text back;
* ``docT5Query``: docs + frequencies, norms, not stored. A passage without an expansion (every
  passage of a corpus that is not expanded) has no such field rather than an empty one: an empty
  field adds no term, length or document to the statistics, so every score is the same.

Documents are added in corpus order by one thread per writer, and the merge policy only merges
adjacent segments, so internal doc ids follow corpus order: Lucene breaks score ties by doc id,
which makes search ties follow the corpus order as in the original. A corpus larger than one chunk
is indexed by several worker processes as contiguous shards joined in corpus order
(:mod:`kueri.shards`): the same doc ids, scores and ties. ``ids.txt`` holds the passage ids in doc
id order, so a hit list's ids are a Python list lookup instead of a stored-field read per hit.

A build writes into ``<dir>.partial`` and renames it to ``<dir>`` only when complete, with
``kueri-index.json`` (the manifest) inside: a directory without a manifest is never opened.
Segments are not packed into compound files (that copied every flushed byte once more).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from kueri import __version__
from kueri.analyze import AnalyzerConfig, build_analyzer
from kueri.errors import KueriError
from kueri.jvm import java_error_message, lucene
from kueri.records import Passage

MANIFEST = "kueri-index.json"
IDS_FILE = "ids.txt"
FORMAT_VERSION = 1

ID_FIELD = "id"
CONTENTS_FIELD = "contents"
DOCT5QUERY_FIELD = "docT5Query"
SEARCH_FIELDS = (CONTENTS_FIELD, DOCT5QUERY_FIELD)

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


class _LinesToStderr(io.TextIOBase):
    """tqdm's output as one line per update, for logs (TIRA keeps stderr as a file).

    tqdm redraws a bar in place with carriage returns; when stderr is not a terminal that makes
    one endless line, and a reader of the log (or a test waiting for "passages/s") sees nothing
    until the bar closes. Updates come at most once a second (``mininterval``).
    """

    def write(self, text: str) -> int:
        for piece in text.split("\r"):
            piece = piece.rstrip()
            if piece:
                sys.stderr.write(piece + "\n")
        return len(text)

    def flush(self) -> None:
        sys.stderr.flush()


def progress_bar(progress: bool) -> tqdm:
    """The indexing progress bar: passages and passages/s, redrawn on a terminal, lines otherwise."""
    out = sys.stderr if sys.stderr.isatty() else _LinesToStderr()
    return tqdm(desc="indexing", unit=" passages", disable=not progress, mininterval=1.0, smoothing=0.1, file=out)


def directory_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


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
        segment_infos = L.autoclass("org.apache.lucene.index.SegmentInfos")
        version = L.autoclass("org.apache.lucene.util.Version")
        empty = segment_infos(version.LATEST.major)
        empty.counter = first_segment
        empty.commit(fs_directory)
    if analyzer_config is None:
        config = L.IndexWriterConfig()
        config.setMergePolicy(L.autoclass("org.apache.lucene.index.NoMergePolicy").INSTANCE)
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

    Reusing the Java objects and only setting the field values is ~3x faster than new objects per
    passage (pyjnius object creation is the cost). A passage without a DocT5Query expansion goes
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
                   extra: dict[str, Any]) -> None:
    manifest = {
        "kueri_version": __version__,
        "format": FORMAT_VERSION,
        "analyzer": analyzer_config.describe(),
        "analyzer_config": analyzer_config.__dict__,
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


def build_index(
    passages: Iterable[Passage],
    index_dir: str | Path,
    analyzer_config: AnalyzerConfig,
    *,
    ram_buffer_mb: float = 256.0,
    progress: bool = True,
    metadata: dict[str, Any] | None = None,
    workers: int | None = None,
    chunk_passages: int | None = None,
) -> IndexStats:
    """Index ``passages`` (in their order) into ``index_dir``, replacing what was there.

    ``metadata`` (corpus paths, read/skip counts, ...) is merged into the manifest; a callable
    value is called once indexing is done, so counts that the reader only knows at the end fit.

    ``workers`` > 1 (default: ``KUERI_WORKERS``, else 2 where there are 2+ cores) builds
    contiguous chunks of ``chunk_passages`` passages in that many worker processes and joins them
    in corpus order (:mod:`kueri.shards`): the same documents, doc ids, scores and ties as one
    writer. A corpus that fits in one chunk is indexed here, in this process.
    """
    from kueri import shards  # shards imports this module

    workers = shards.resolve_workers(workers)
    if workers > 1:
        return shards.build_parallel(
            passages, Path(index_dir), analyzer_config, workers=workers, chunk_passages=chunk_passages,
            ram_buffer_mb=ram_buffer_mb, progress=progress, metadata=metadata,
        )
    return build_sequential(passages, Path(index_dir), analyzer_config, ram_buffer_mb=ram_buffer_mb,
                            progress=progress, metadata=metadata)


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
    """:func:`build_index` by one writer in this process (also the build of one shard)."""
    L = lucene()
    partial = start_partial(index_dir)
    writer = open_writer(partial, analyzer_config, ram_buffer_mb, first_segment)
    documents = DocumentWriter(writer)

    started = time.perf_counter()
    indexed = expanded = 0
    bar = progress_bar(progress)
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
        if progress:
            print(f"committing {indexed} passages ...", flush=True)
        writer.commit()
        writer.close()
    except L.JavaException as exc:
        writer.rollback()
        raise KueriError(f"indexing failed after {indexed} passages: {java_error_message(exc)}") from exc
    except BaseException:
        writer.rollback()  # a KueriError from the reader, or ^C: nothing half-built survives
        raise
    finally:
        bar.close()

    seconds = time.perf_counter() - started
    extra = {k: (v() if callable(v) else v) for k, v in (metadata or {}).items()}
    write_manifest(partial, analyzer_config, indexed, expanded, seconds, extra)
    publish(partial, index_dir)
    return IndexStats(indexed, seconds, directory_size(index_dir), expanded)


def read_manifest(index_dir: str | Path) -> dict[str, Any]:
    path = Path(index_dir) / MANIFEST
    if not path.is_file():
        if Path(index_dir).is_dir():
            raise KueriError(f"{index_dir}: not a complete kueri index (no {MANIFEST}; rebuild it)")
        raise KueriError(f"{index_dir}: no such index")
    return json.loads(path.read_text(encoding="utf-8"))


class LuceneIndex:
    """An open index: the reader, passage ids by doc id, stored text, and its analyzer config."""

    def __init__(self, index_dir: str | Path) -> None:
        L = lucene()
        self.path = Path(index_dir)
        self.manifest = read_manifest(self.path)
        self.analyzer_config = AnalyzerConfig(**self.manifest["analyzer_config"])
        directory = L.FSDirectory.open(L.File(str(self.path)).toPath())
        self.reader = L.DirectoryReader.open(directory)
        self.ids: list[str] = (self.path / IDS_FILE).read_text(encoding="utf-8").split("\n")[:-1]
        if len(self.ids) != self.reader.maxDoc():
            raise KueriError(
                f"{self.path}: {IDS_FILE} has {len(self.ids)} ids for {self.reader.maxDoc()} documents"
            )
        self._docids: dict[str, int] | None = None
        self._analyzers: dict[bool, Any] = {}

    def analyzer(self, for_query: bool = True) -> Any:
        if for_query not in self._analyzers:
            self._analyzers[for_query] = build_analyzer(self.analyzer_config, for_query=for_query)
        return self._analyzers[for_query]

    def __len__(self) -> int:
        return len(self.ids)

    def docid(self, passage_id: str) -> int | None:
        """The internal doc id of a passage id (built once on first use), None if absent."""
        if self._docids is None:
            self._docids = {pid: i for i, pid in enumerate(self.ids)}
        return self._docids.get(passage_id)

    def contents(self, docids: Iterable[int]) -> list[str]:
        """The stored ``contents`` of several docs with one StoredFields (one pass per hit list)."""
        stored = self.reader.storedFields()
        return [stored.document(docid).get(CONTENTS_FIELD) for docid in docids]

    def contents_of(self, passage_ids: Iterable[str], stage: str) -> list[str]:
        """The stored ``contents`` of passages by id; a passage not in the index is an error naming ``stage``."""
        docids = []
        for pid in passage_ids:
            docid = self.docid(pid)
            if docid is None:
                raise KueriError(f"{stage}: passage {pid} is not in the index {self.path} (is the run from another "
                                 "corpus?)")
            docids.append(docid)
        return self.contents(docids)

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> LuceneIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
