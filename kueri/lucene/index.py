"""index: the index format kueri writes, and an open index as Python sees it.

Fields, exactly as the original's ``DirectoryIndexer`` for scoring:

* ``id``: one untokenized term, stored;
* ``contents``: docs + frequencies (no positions), term vectors (terms + frequencies), norms;
  also **stored** here, so quality and stance stages can read the text back;
* ``docT5Query``: docs + frequencies, norms, not stored. A passage without an expansion (every
  passage of a corpus that is not expanded) has no such field rather than an empty one: an empty
  field adds no term, length or document to the statistics, so every score is the same.

Internal doc ids follow corpus order (see :mod:`kueri.lucene.writer`), so Lucene's tie-break by doc
id makes search ties follow the corpus order as in the original. ``ids.txt`` holds the passage ids
in doc id order, so a hit list's ids are a Python list lookup instead of a stored-field read per
hit. ``kueri-index.json`` (the manifest) is written last: a directory without one is never opened.
Besides counts and the corpus, the manifest records who wrote the index (``kueri_version``,
``lucene_version``) and its analysis (``analyzer_config``, and ``analysis``: a hash of what the chain does,
stoplist words included). Opening checks them (:func:`compatibility_problem`): an index of another Lucene
major, or of another analysis than asked for, is refused in one line. Manifests from before these fields
lack ``lucene_version`` and ``analysis``: every such index was written by the Lucene 9.9.1 kueri has always
pinned, so the index's own commit point is asked which Lucene wrote it, and its analysis is taken as it says.

:class:`LuceneIndex` speaks Python to the stages: passage ids, stored texts, term vectors and term
statistics; its ``reader`` is for the rest of the Lucene layer only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Self

from kueri.errors import BrokenCache, IncompatibleIndex, KueriError
from kueri.lucene.analyze import AnalyzerConfig, build_analyzer
from kueri.lucene.jvm import java_error, java_error_message, lucene

MANIFEST = "kueri-index.json"
IDS_FILE = "ids.txt"
FORMAT_VERSION = 1

ID_FIELD = "id"
CONTENTS_FIELD = "contents"
DOCT5QUERY_FIELD = "docT5Query"
SEARCH_FIELDS = (CONTENTS_FIELD, DOCT5QUERY_FIELD)


class TermStatistics(NamedTuple):
    """One term of a field: its text, document frequency and total frequency in the index."""

    term: str
    df: int
    ttf: int


class FieldStatistics(NamedTuple):
    """A field's totals: distinct terms, tokens (sum of term frequencies), documents with the field."""

    terms: int
    tokens: int
    documents: int


def directory_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def read_manifest(index_dir: str | Path) -> dict[str, Any]:
    """The manifest of a complete index; :class:`BrokenCache` when it is missing from a folder or unreadable."""
    path = Path(index_dir) / MANIFEST
    if not path.is_file():
        if Path(index_dir).is_dir():
            raise BrokenCache(f"{index_dir}: not a complete kueri index (no {MANIFEST}; rebuild it)")
        raise KueriError(f"{index_dir}: no such index")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        AnalyzerConfig(**manifest["analyzer_config"])
        int(manifest["indexed"])
    except (ValueError, KeyError, TypeError) as exc:
        raise BrokenCache(f"{path}: not a kueri index manifest ({type(exc).__name__}: {exc})") from None
    return manifest


def _major(version: str) -> int | None:
    head = str(version).split(".")[0]
    return int(head) if head.isdigit() else None


def compatibility_problem(manifest: dict[str, Any], index_dir: str | Path, written_by: str | None,
                          analyzer: AnalyzerConfig | None = None) -> str | None:
    """Why this kueri must not search the index (one line naming it), or None.

    ``written_by``: the Lucene version that wrote it (the manifest's, else its commit point's);
    ``analyzer``: the analysis the caller asks for (None: whatever the index has).
    """
    running = str(lucene().Version.LATEST.toString())
    if written_by is not None and _major(written_by) != _major(running):
        return (f"{index_dir}: written by Lucene {written_by}, and this kueri runs Lucene {running}: "
                f"rebuild it with this kueri (kueri index)")
    config = AnalyzerConfig(**manifest["analyzer_config"])
    if analyzer is not None and config != analyzer:
        return f"{index_dir}: indexed with {config.summary()}, but {analyzer.summary()} was asked for"
    recorded = manifest.get("analysis")
    if recorded is not None and recorded != config.fingerprint():
        return (f"{index_dir}: indexed with another analysis than this kueri's {config.summary()} (the stoplist's "
                f"words differ): rebuild it with this kueri (kueri index)")
    return None


def verify_files(index_dir: str | Path) -> None:
    """A quick check of an index before it is used: its commit point and every file it lists are there,
    whole, and end with Lucene's footer (one small read per file, not a read of every byte: that is
    :func:`check_index`). Raises :class:`BrokenCache` naming what is wrong."""
    L = lucene()
    directory = L.FSDirectory.open(L.File(str(index_dir)).toPath())
    try:
        infos = L.SegmentInfos.readLatestCommit(directory)  # checks the commit point's own checksum
        for name in infos.files(True).toArray():
            stream = directory.openInput(name, L.IOContext.READONCE)
            try:
                L.CodecUtil.retrieveChecksum(stream)  # the footer: its magic, and a file of full length
            finally:
                stream.close()
    except L.JavaException as exc:
        raise BrokenCache(f"{index_dir}: {java_error_message(exc)}") from None
    finally:
        directory.close()


class ReaderHandle:
    """An open Lucene ``reader`` that closes with the object (``with`` or :meth:`close`)."""

    reader: Any

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LuceneIndex(ReaderHandle):
    """An open index: the reader, passage ids by doc id, stored text, and its analyzer config.

    An index that is not whole (no or a bad manifest, a damaged or missing file, a wrong id list) raises
    :class:`~kueri.errors.BrokenCache`; one this kueri must not search (another Lucene major; another
    analysis than ``analyzer``, when given) :class:`~kueri.errors.IncompatibleIndex`; the machine's refusal
    (permissions) an :class:`~kueri.errors.EnvironmentProblem`.
    """

    def __init__(self, index_dir: str | Path, analyzer: AnalyzerConfig | None = None) -> None:
        L = lucene()
        self.path = Path(index_dir)
        self.manifest = read_manifest(self.path)
        self.analyzer_config = AnalyzerConfig(**self.manifest["analyzer_config"])
        directory = L.FSDirectory.open(L.File(str(self.path)).toPath())
        try:
            written_by = self.manifest.get("lucene_version")
            if written_by is None:  # a manifest from before it was recorded: the commit point knows
                committed = L.SegmentInfos.readLatestCommit(directory).getCommitLuceneVersion()
                written_by = str(committed.toString()) if committed is not None else None
            problem = compatibility_problem(self.manifest, self.path, written_by, analyzer)
            if problem:
                raise IncompatibleIndex(problem)  # before Lucene reads it: another major may not even open
            self.reader = L.DirectoryReader.open(directory)
        except L.JavaException as exc:
            directory.close()
            raise java_error(exc, f"cannot open the index {self.path}") from None
        except BaseException:
            directory.close()
            raise
        try:
            self.ids: list[str] = (self.path / IDS_FILE).read_text(encoding="utf-8").split("\n")[:-1]
        except (FileNotFoundError, UnicodeDecodeError) as exc:
            self.reader.close()
            raise BrokenCache(f"{self.path}: unreadable {IDS_FILE} ({exc})") from None
        if len(self.ids) != self.reader.maxDoc():
            self.reader.close()
            raise BrokenCache(
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

    def term_vector(self, docid: int, field: str = CONTENTS_FIELD) -> list[tuple[str, int]]:
        """(term, frequency) of a document's term vector of ``field``, in Lucene's (sorted) term order."""
        terms = self.reader.termVectors().get(docid, field)
        if terms is None:
            return []
        iterator = terms.iterator()
        result = []
        term = iterator.next()
        while term is not None:
            result.append((term.utf8ToString(), iterator.totalTermFreq()))
            term = iterator.next()
        return result

    def term_statistics(self, field: str = CONTENTS_FIELD) -> Iterator[TermStatistics]:
        """Every term of ``field`` with its df and ttf, in Lucene's term order (UTF-8 bytes)."""
        L = lucene()
        terms = L.MultiTerms.getTerms(L.cast(L.IndexReader, self.reader), field)
        if terms is None:
            raise KueriError(f"{self.path}: the index has no terms in the field {field!r}")
        enum = terms.iterator()
        term = enum.next()
        while term is not None:
            yield TermStatistics(term.utf8ToString(), enum.docFreq(), enum.totalTermFreq())
            term = enum.next()

    def field_statistics(self, field: str = CONTENTS_FIELD) -> FieldStatistics:
        L = lucene()
        terms = L.MultiTerms.getTerms(L.cast(L.IndexReader, self.reader), field)
        if terms is None:
            raise KueriError(f"{self.path}: the index has no terms in the field {field!r}")
        return FieldStatistics(int(terms.size()), int(terms.getSumTotalTermFreq()), int(terms.getDocCount()))

    def term_frequencies(self, words: Iterable[str], field: str = CONTENTS_FIELD) -> dict[str, tuple[int, int]]:
        """(df, ttf) of each word (an indexed term, as analysis makes it) in ``field``; (0, 0) when absent."""
        L = lucene()
        result = {}
        for word in words:
            term = L.Term(field, word)
            result[word] = (int(self.reader.docFreq(term)), int(self.reader.totalTermFreq(term)))
        return result

    def segments(self) -> int:
        """How many segments the index has (one per shard of a parallel build)."""
        return int(self.reader.leaves().size())


class ShardedIndex(LuceneIndex):
    """Several shard indexes searched as one (a Lucene ``MultiReader``), in the order given.

    Doc ids, statistics and so scores are those of the joined index :func:`kueri.lucene.shards.merge_indexes` makes.
    """

    def __init__(self, shard_dirs: Sequence[str | Path]) -> None:
        # LuceneIndex.__init__ opens one directory; this sets the same attributes from several
        L = lucene()
        self.shards = [Path(d) for d in shard_dirs]
        if not self.shards:
            raise KueriError("no shards to open")
        parts = [LuceneIndex(d) for d in self.shards]
        configs = {p.analyzer_config for p in parts}
        if len(configs) != 1:
            for p in parts:
                p.close()
            raise KueriError("shards built with different analyzers cannot be searched as one")
        self.path = self.shards[0].parent
        self.analyzer_config = configs.pop()
        self.manifest = {
            **parts[0].manifest,
            "indexed": sum(int(p.manifest["indexed"]) for p in parts),
            "expanded": sum(int(p.manifest.get("expanded", 0)) for p in parts),
            "shards": [str(d) for d in self.shards],
        }
        self.reader = L.MultiReader(
            [p.reader for p in parts], True, signature="([Lorg/apache/lucene/index/IndexReader;Z)V"
        )  # True: closing it closes the shards' readers
        self.ids = [pid for p in parts for pid in p.ids]
        self._docids = None
        self._analyzers = {}


def open_shards(shard_dirs: Sequence[str | Path]) -> LuceneIndex:
    """A list of shards as one searchable index (one shard: that index itself)."""
    return LuceneIndex(shard_dirs[0]) if len(shard_dirs) == 1 else ShardedIndex(shard_dirs)


def check_index(index_dir: str | Path) -> str | None:
    """Lucene's ``CheckIndex`` over a whole index: None when it is clean, else what is wrong (one line)."""
    L = lucene()
    directory = L.FSDirectory.open(L.File(str(index_dir)).toPath())
    try:
        checker = L.CheckIndex(directory)
        try:
            status = checker.checkIndex()
            if status.clean:
                return None
            return f"{index_dir}: Lucene's CheckIndex found {status.numBadSegments} broken segment(s)"
        finally:
            checker.close()
    except L.JavaException as exc:
        return f"{index_dir}: {java_error_message(exc)}"
    finally:
        directory.close()
