"""TIRA's inputs: which kind a folder holds, and what each kind says (topics, a corpus, a run to re-rank).

TIRA (and its IR platform TIREx) hands a retrieval software one folder. kueri reads three kinds:

* ``task``: the 2022 task's own files, ``topics.xml`` and ``passages.jsonl.gz`` (or ``passages.jsonl``);
* ``full-rank``: what TIRA's loader makes from an ir_datasets id for full ranking, ``queries.jsonl`` (one
  ``{"qid", "query", "original_query": {...}}`` a line) and ``documents.jsonl`` or ``documents.jsonl.gz`` (one
  ``{"docno", "text", "original_document": {...}}`` a line; :class:`~kueri.parse.PassageReader` reads them);
  its ``queries.xml`` and ``metadata.json`` are not needed;
* ``re-rank``: what TIRA's loader makes from an earlier run, ``rerank.jsonl.gz`` (or ``rerank.jsonl``): one
  candidate a line, ``{"qid", "query", "original_query", "docno", "text", "original_document", "rank", "score"}``.

A query's two objects come from its own fields when it has them (``objects``, as ir_datasets' Touché 2022 queries
carry them in ``original_query``), else from its question (:func:`kueri.questions.extract_objects`, as ``kueri
serve``), else none (``("", "")``). An empty query is skipped, saying so; anything else malformed is a
:class:`KueriError` naming ``file:line``.

:func:`write_fullrank_input` and :func:`write_rerank_input` write the two kinds from kueri's records, with the
field names and files of TIRA's loader (for tests, and to try a software on TIRA's inputs locally).
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kueri.errors import KueriError
from kueri.files import atomic_writer
from kueri.parse.passages import JAVA_WHITESPACE, TextCorpus, parse_json_line, split_doct5query
from kueri.parse.topics import parse_objects
from kueri.questions import extract_objects
from kueri.records import Hit, Run, Topic, topic_key

log = logging.getLogger(__name__)

TASK, FULL_RANK, RE_RANK = "task", "full-rank", "re-rank"
TASK_TOPICS, TASK_CORPORA = "topics.xml", ("passages.jsonl.gz", "passages.jsonl")
QUERIES, DOCUMENTS = "queries.jsonl", ("documents.jsonl.gz", "documents.jsonl")
RERANK = ("rerank.jsonl.gz", "rerank.jsonl")
EXPECTED = ("topics.xml + passages.jsonl.gz (the task's), queries.jsonl + documents.jsonl[.gz] (TIRA's full-rank "
            "input) or rerank.jsonl[.gz] (TIRA's re-rank input)")


@dataclass(frozen=True)
class TiraInput:
    """One input folder: its ``kind`` and its files (``corpus`` for ``task`` and ``full-rank``, ``rerank`` for
    ``re-rank``)."""

    kind: str
    folder: Path
    topics: Path | None = None
    corpus: Path | None = None
    rerank: Path | None = None


def _first(folder: Path, names: Iterable[str]) -> Path | None:
    return next((folder / name for name in names if (folder / name).is_file()), None)


def detect_input(folder: str | Path) -> TiraInput:
    """The kind of input ``folder`` holds (or is: a re-rank file itself): the re-rank file first (as TIRA's own
    ir_datasets shim decides), then the task's files, then TIRA's full-rank files; none of them is one line saying
    what is there."""
    folder = Path(folder)
    if folder.is_file() and folder.name.endswith(RERANK):
        return TiraInput(RE_RANK, folder.parent, rerank=folder)
    if not folder.is_dir():
        raise KueriError(f"{folder}: input folder not found")
    rerank = _first(folder, RERANK)
    if rerank is not None:
        return TiraInput(RE_RANK, folder, rerank=rerank)
    topics, corpus = folder / TASK_TOPICS, _first(folder, TASK_CORPORA)
    if topics.is_file() and corpus is not None:
        return TiraInput(TASK, folder, topics=topics, corpus=corpus)
    queries, documents = folder / QUERIES, _first(folder, DOCUMENTS)
    if queries.is_file() and documents is not None:
        return TiraInput(FULL_RANK, folder, topics=queries, corpus=documents)
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    found = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "") if names else "nothing"
    raise KueriError(f"{folder}: found {found}; expected {EXPECTED}")


# -- queries ------------------------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    return value.strip(JAVA_WHITESPACE) if isinstance(value, str) else ""


def _qid(value: Any, where: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip() or value.split() != [value]:
        raise KueriError(f"{where}: missing or bad 'qid' {value!r}")
    return value


def query_objects(record: Mapping[str, Any], title: str, where: str) -> tuple[str, str]:
    """The two objects of a TIRA query record: its own ``objects`` (or its ``original_query``'s: a pair, or
    ``"a, b"``), else the question's (:func:`kueri.questions.extract_objects`), else ``("", "")``."""
    original = record.get("original_query")
    for source in (record, original if isinstance(original, dict) else {}):
        objects = source.get("objects")
        if isinstance(objects, list | tuple) and len(objects) == 2 and all(isinstance(o, str) for o in objects):
            first, second = (o.strip() for o in objects)
            if first and second:
                return first, second
        if isinstance(objects, str) and objects.strip():
            return parse_objects(objects, where)
    found = extract_objects(title)
    return (found.first, found.second) if found is not None else ("", "")


def query_topic(record: Any, where: str) -> Topic | None:
    """The topic of one TIRA query record (``qid``, ``query``, ``original_query``); None for an empty query."""
    if not isinstance(record, dict):
        raise KueriError(f"{where}: the line is not a JSON object")
    qid = _qid(record.get("qid"), where)
    original = record.get("original_query") if isinstance(record.get("original_query"), dict) else {}
    title = _text(record.get("query"))  # the query's default text (a Touché topic's title)
    if not title:
        return None
    return Topic(qid, title, query_objects(record, title, where), _text(original.get("description")),
                 _text(original.get("narrative")))


def _json_lines(path: Path) -> Iterator[tuple[str, Any]]:
    """(``path:line``, the parsed object) of every non-blank line of a ``.jsonl`` or ``.jsonl.gz`` file."""
    try:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rb") as lines:
            for number, raw in enumerate(lines, start=1):
                if raw.isspace():
                    continue
                where = f"{path}:{number}"
                try:
                    yield where, parse_json_line(raw)
                except ValueError as exc:  # UnicodeDecodeError included
                    raise KueriError(f"{where}: malformed JSON ({exc})") from None
    except (OSError, EOFError) as exc:
        raise KueriError(f"{path}: cannot read: {exc}") from exc


def _skip_empty(skipped: list[str], path: Path) -> None:
    if skipped:
        log.warning("%s: skipped %d topic(s) with an empty query: %s", path, len(skipped), " ".join(skipped))


def read_queries(path: str | Path) -> list[Topic]:
    """The topics of TIRA's ``queries.jsonl``, in file order (an empty query is skipped, saying so)."""
    path = Path(path)
    topics: list[Topic] = []
    seen: set[str] = set()
    skipped: list[str] = []
    for where, record in _json_lines(path):
        topic = query_topic(record, where)
        qid = topic.number if topic else _qid(record.get("qid"), where)
        if qid in seen:
            raise KueriError(f"{where}: query {qid} listed twice")
        seen.add(qid)
        if topic is None:
            skipped.append(qid)
        else:
            topics.append(topic)
    _skip_empty(skipped, path)
    if not topics:
        raise KueriError(f"{path}: no queries" + (" with a text" if skipped else ""))
    return topics


# -- re-rank input ------------------------------------------------------------------------------------------------


@dataclass
class RerankInput:
    """What a ``rerank.jsonl.gz`` says: the topics, the earlier run (each topic's candidates in rank order, with
    their scores), and every candidate's text (as a corpus would give it)."""

    topics: list[Topic]
    run: Run
    texts: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # topics with an empty query
    path: Path | None = None

    @property
    def corpus(self) -> TextCorpus:
        """The candidates' texts as a corpus of their own (its BM25 statistics are the candidates')."""
        return TextCorpus(self.texts, f"the candidates of {self.path}" if self.path else "the candidates")


def _number(value: Any, name: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise KueriError(f"{where}: missing or non-numeric '{name}' {value!r}")
    return float(value)


def read_rerank(path: str | Path) -> RerankInput:
    """TIRA's re-rank file: every line a candidate of a topic. Each topic's candidates are ordered by ``rank`` (a
    tie by ``score``, descending); a topic whose query is empty is skipped, saying so. A candidate without its text,
    a (qid, docno) listed twice, a missing ``rank`` or ``score`` or a passage given two different texts: one line
    naming ``file:line``."""
    path = Path(path)
    topics: dict[str, Topic] = {}
    rows: dict[str, list[tuple[float, float, str]]] = {}
    texts: dict[str, str] = {}
    skipped: dict[str, None] = {}
    seen: set[tuple[str, str]] = set()
    for where, record in _json_lines(path):
        if not isinstance(record, dict):
            raise KueriError(f"{where}: the line is not a JSON object")
        qid = _qid(record.get("qid"), where)
        doc = record.get("docno")
        doc = str(doc) if isinstance(doc, int) and not isinstance(doc, bool) else doc
        if not isinstance(doc, str) or not doc or doc.split() != [doc]:
            raise KueriError(f"{where}: missing or bad 'docno' {doc!r}")
        if (qid, doc) in seen:
            raise KueriError(f"{where}: passage {doc} listed twice for topic {qid}")
        seen.add((qid, doc))
        text = record.get("text")
        if not isinstance(text, str) or not split_doct5query(text)[0]:
            raise KueriError(f"{where}: passage {doc} of topic {qid} has no text")
        if texts.setdefault(doc, text) != text:
            raise KueriError(f"{where}: passage {doc} has another text than on an earlier line")
        rank, score = _number(record.get("rank"), "rank", where), _number(record.get("score"), "score", where)
        if qid in skipped:
            continue
        if qid not in topics:
            topic = query_topic(record, where)
            if topic is None:
                skipped[qid] = None
                continue
            topics[qid] = topic
        rows.setdefault(qid, []).append((rank, -score, doc))
    run: Run = {}
    for qid, candidates in rows.items():
        scores = {doc: -negative for _, negative, doc in candidates}
        run[qid] = [Hit(doc, scores[doc]) for _, _, doc in sorted(candidates, key=lambda row: row[:2])]
    _skip_empty(list(skipped), path)
    if not run:
        raise KueriError(f"{path}: no candidates" + (" of a topic with a query" if skipped else ""))
    return RerankInput(list(topics.values()), run, texts, list(skipped), path)


# -- writing TIRA's inputs ----------------------------------------------------------------------------------------


def _query_record(topic: Topic) -> dict[str, Any]:
    # As TIRA's loader maps an ir_datasets query of the Touché 2022 comparative task: the default text (the title)
    # as "query", every field of the query under "original_query".
    original = {"query_id": topic.number, "title": topic.title, "objects": list(topic.objects),
                "description": topic.description, "narrative": topic.narrative}
    return {"qid": topic.number, "query": topic.title, "original_query": original}


def corpus_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """The lines of a corpus file in kueri's (the task's) format as they are: ``{"id", "contents", "chatNoirUrl"}``."""
    for where, record in _json_lines(Path(path)):
        if not isinstance(record, dict) or not isinstance(record.get("id"), str):
            raise KueriError(f"{where}: not a passage {{\"id\", \"contents\", ...}}")
        yield record


def _write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> int:
    count = 0
    with atomic_writer(path) as raw:
        target = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if path.name.endswith(".gz") else raw
        for record in records:
            target.write(json.dumps(record).encode("utf-8") + b"\n")
            count += 1
        if target is not raw:
            target.close()
    return count


def write_fullrank_input(folder: str | Path, topics: Iterable[Topic], passages: Iterable[Mapping[str, Any]],
                         dataset_id: str = "clueweb12/touche-2022-task-2") -> Path:
    """TIRA's full-rank input in ``folder``: ``documents.jsonl``, ``queries.jsonl`` and ``metadata.json``, from the
    ``topics`` and the task's ``passages`` (:func:`corpus_records`) as ir_datasets reads that task's documents."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)

    def documents() -> Iterator[dict[str, Any]]:
        for record in passages:
            original = {"doc_id": record["id"], "text": record["contents"], "chatnoir_url": record.get("chatNoirUrl")}
            yield {"docno": record["id"], "text": record["contents"], "original_document": original}

    _write_jsonl(folder / "documents.jsonl", documents())
    _write_jsonl(folder / QUERIES, (_query_record(t) for t in topics))
    _write_jsonl(folder / "metadata.json", [{"ir_datasets_id": dataset_id}])
    return folder


def write_rerank_input(folder: str | Path, topics: Iterable[Topic], run: Run, texts: Mapping[str, str],
                       depth: int = 1000) -> Path:
    """TIRA's re-rank input in ``folder``: ``rerank.jsonl.gz`` with the top ``depth`` hits of ``run`` a topic (by
    score, then doc id descending, ranks from 1, as TIRA's loader normalises a run) and their ``texts``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    by_number = {t.number: t for t in topics}

    def records() -> Iterator[dict[str, Any]]:
        for qid in sorted(run, key=topic_key):  # TIRA's loader sorts a run by topic
            hits = run[qid]
            query = _query_record(by_number[qid])
            ordered = sorted(sorted(hits, key=lambda h: h.doc, reverse=True), key=lambda h: h.score, reverse=True)
            for rank, hit in enumerate(ordered[:depth], start=1):
                yield {**query, "docno": hit.doc, "text": texts[hit.doc], "original_document": {}, "rank": rank,
                       "score": hit.score}

    _write_jsonl(folder / RERANK[0], records())
    return folder / RERANK[0]
