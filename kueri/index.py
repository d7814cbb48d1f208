"""index: build a Lucene index of passages, and open one for the later stages.

Fields, exactly as the original's ``DirectoryIndexer`` for scoring:

* ``id``: one untokenized term, stored;
* ``contents``: docs + frequencies (no positions), term vectors (terms + frequencies), norms;
  also **stored** here, so quality and stance stages can read the text back;
* ``docT5Query``: docs + frequencies, norms, not stored ("" when the corpus is not expanded).

Documents are added in corpus order by one thread, and the merge policy only merges adjacent
segments, so internal doc ids follow corpus order: Lucene breaks score ties by doc id, which makes
search ties follow the corpus order as in the original. ``ids.txt`` holds the passage ids in doc id
order, so a hit list's ids are a Python list lookup instead of a stored-field read per hit.

A build writes into ``<dir>.partial`` and renames it to ``<dir>`` only when complete, with
``kueri-index.json`` (the manifest) inside: a directory without a manifest is never opened.
"""

from __future__ import annotations

import json
import os
import shutil
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


def directory_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def build_index(
    passages: Iterable[Passage],
    index_dir: str | Path,
    analyzer_config: AnalyzerConfig,
    *,
    ram_buffer_mb: float = 256.0,
    progress: bool = True,
    metadata: dict[str, Any] | None = None,
) -> IndexStats:
    """Index ``passages`` (in their order) into ``index_dir``, replacing what was there.

    ``metadata`` (corpus paths, read/skip counts, ...) is merged into the manifest; a callable
    value is called once indexing is done, so counts that the reader only knows at the end fit.
    """
    L = lucene()
    index_dir = Path(index_dir)
    partial = index_dir.with_name(index_dir.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)  # left by an interrupted build: never complete, safe to drop
    partial.mkdir(parents=True)

    analyzer = build_analyzer(analyzer_config)
    config = L.IndexWriterConfig(analyzer)
    config.setOpenMode(L.OpenMode.CREATE)
    config.setRAMBufferSizeMB(ram_buffer_mb)
    config.setUseCompoundFile(True)
    config.setMergePolicy(L.LogByteSizeMergePolicy())  # adjacent merges keep corpus order
    writer = L.IndexWriter(L.FSDirectory.open(L.File(str(partial)).toPath()), config)

    # One Document and its Fields, reused for every passage (3x faster than new objects).
    id_field = L.StringField(ID_FIELD, "", L.FieldStore.YES, signature=STRING_FIELD_SIGNATURE)
    contents_field = L.Field(
        CONTENTS_FIELD, "", _field_type(stored=True, term_vectors=True), signature=FIELD_SIGNATURE
    )
    query_field = L.Field(
        DOCT5QUERY_FIELD, "", _field_type(stored=False, term_vectors=False), signature=FIELD_SIGNATURE
    )
    document = L.Document()
    for field in (id_field, contents_field, query_field):
        document.add(field)

    started = time.perf_counter()
    indexed = expanded = 0
    bar = tqdm(desc="indexing", unit=" passages", disable=not progress, mininterval=1.0, smoothing=0.1)
    try:
        with open(partial / IDS_FILE, "w", encoding="utf-8") as ids:
            for passage in passages:
                id_field.setStringValue(passage.id)
                contents_field.setStringValue(passage.contents)
                query_field.setStringValue(passage.doct5query)
                writer.addDocument(document)
                ids.write(passage.id)
                ids.write("\n")
                indexed += 1
                expanded += passage.doct5query != ""
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
    (partial / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if index_dir.exists():
        shutil.rmtree(index_dir)
    os.replace(partial, index_dir)
    return IndexStats(indexed, seconds, directory_size(index_dir))


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

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> LuceneIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
