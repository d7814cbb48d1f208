"""ir_datasets ids: a dataset's topics (with their objects), qrels (relevance, and quality and stance where it has
them) and documents, read through the ``ir_datasets`` package (an optional extra: ``pip install
'kueri[ir_datasets]'``) when its data is on this machine.

kueri never lets ir_datasets download: before reading a part of a dataset, the files ir_datasets would read are
checked, and a missing one is one line naming it (ir_datasets looks in ``IR_DATASETS_HOME``, else
``~/.ir_datasets``, as it was when ir_datasets was imported). The 2022 task is ``clueweb12/touche-2022-task-2``:
ir_datasets keeps its files under ``touche/2022/task-2/`` there (``queries.xml``, ``qrels-relevance.qrels``,
``qrels-quality.qrels``, ``qrels-stance.qrels``, and ``passages.jsonl``, the task's passages as kueri reads them).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kueri.errors import KueriError, SetupError
from kueri.files import file_lock
from kueri.parse.tira import query_topic
from kueri.records import STANCES, Topic

log = logging.getLogger(__name__)

#: The 2022 task's id in ir_datasets.
TOUCHE_2022 = "clueweb12/touche-2022-task-2"


def _package() -> Any:
    try:
        import ir_datasets
    except ImportError:
        raise SetupError("--dataset needs the ir_datasets package: pip install 'kueri[ir_datasets]'") from None
    return ir_datasets


def _cached_files(handler: Any) -> Iterator[Path]:
    """The files a handler of ir_datasets reads from its cache (the ones it would download when missing)."""
    from ir_datasets.util import Cache

    for value in vars(handler).values():
        for item in value if isinstance(value, list | tuple) else (value,):
            if isinstance(item, Cache):
                yield Path(item.path(force=False))


@dataclass
class Dataset:
    """One ir_datasets dataset, read only where its files are here."""

    id: str
    irds: Any

    def _require(self, part: str) -> Any:
        has = getattr(self.irds, f"has_{part}", None)
        if has is None or not has():
            raise KueriError(f"{self.id}: ir_datasets gives this dataset no {part}")
        handler = getattr(self.irds, f"{part}_handler")()
        missing = [path for path in _cached_files(handler) if not path.exists()]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise KueriError(f"{self.id}: ir_datasets has not got its {part} on this machine: missing "
                             f"{missing[0]}{more}; ir_datasets keeps its data in IR_DATASETS_HOME (else "
                             "~/.ir_datasets), and kueri lets it download nothing")
        return handler

    def _read(self, part: str, what: str) -> Iterator[Any]:
        handler = self._require(part)
        try:
            yield from getattr(handler, f"{part}_iter")()
        except (OSError, ValueError, KeyError, AssertionError) as exc:
            raise KueriError(f"{self.id}: ir_datasets cannot read its {what}: {exc}") from exc

    def topics(self) -> list[Topic]:
        """The queries as topics: the default text (a Touché topic's title) as the title, the query's own objects
        (else the question's), description and narrative where it has them; an empty query is skipped, saying so."""
        topics: list[Topic] = []
        skipped: list[str] = []
        for query in self._read("queries", "queries"):
            fields = query._asdict()
            record = {"qid": str(query.query_id), "query": query.default_text(), "original_query": fields}
            topic = query_topic(record, f"{self.id} query {query.query_id}")
            if topic is None:
                skipped.append(str(query.query_id))
            else:
                topics.append(topic)
        if skipped:
            log.warning("%s: skipped %d topic(s) with an empty query: %s", self.id, len(skipped), " ".join(skipped))
        if not topics:
            raise KueriError(f"{self.id}: no queries")
        return topics

    def judgments(self) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]] | None,
                                 dict[str, dict[str, str]] | None]:
        """``(relevance, quality, stance)`` qrels (``{qid: {doc: grade or label}}``); quality and stance are None
        where the dataset's qrels have no such field."""
        relevance: dict[str, dict[str, int]] = {}
        quality: dict[str, dict[str, int]] = {}
        stance: dict[str, dict[str, str]] = {}
        has_quality = has_stance = False
        for qrel in self._read("qrels", "qrels"):
            qid, doc = str(qrel.query_id), str(qrel.doc_id)
            relevance.setdefault(qid, {})[doc] = int(qrel.relevance)
            if getattr(qrel, "quality", None) is not None:
                has_quality = True
                quality.setdefault(qid, {})[doc] = int(qrel.quality)
            label = getattr(qrel, "stance", None)
            if label is not None:
                has_stance = True
                label = str(getattr(label, "value", label)).upper()
                stance.setdefault(qid, {})[doc] = label if label in STANCES else "NO"
        if not relevance:
            raise KueriError(f"{self.id}: no qrels")
        return relevance, quality if has_quality else None, stance if has_stance else None

    def corpus(self, workdir: Path) -> Path:
        """A corpus file kueri reads with the dataset's documents: ir_datasets' own file where it is one (the 2022
        task's ``passages.jsonl``), else the documents written once to ``workdir`` as TIRA's ``documents.jsonl``."""
        handler = self._require("docs")
        files = list(_cached_files(handler))
        if len(files) == 1 and files[0].name.endswith(".jsonl") and _kueri_reads(files[0]):
            return files[0]
        path = workdir / f"documents-{re.sub(r'[^A-Za-z0-9.-]+', '_', self.id)}.jsonl.gz"
        with file_lock(path.with_name(path.name + ".lock"), f"the documents of {self.id}"):
            if not path.is_file():
                from kueri.runfile import write_lines_atomic

                log.info("%s: writing its documents to %s", self.id, path)
                write_lines_atomic(path, (json.dumps({"docno": str(d.doc_id), "text": d.default_text()}) + "\n"
                                          for d in self._read("docs", "documents")))
        return path


def _kueri_reads(path: Path) -> bool:
    """Whether the first line of ``path`` is a passage as kueri reads them (``id`` and ``contents``)."""
    with open(path, "rb") as lines:
        first = lines.readline()
    try:
        record = json.loads(first)
    except ValueError:
        return False
    return isinstance(record, dict) and isinstance(record.get("id"), str) and isinstance(record.get("contents"), str)


def load_dataset(dataset_id: str) -> Dataset:
    """The dataset ``dataset_id`` of ir_datasets (its files are checked as each part is read)."""
    ir_datasets = _package()
    try:
        return Dataset(dataset_id, ir_datasets.load(dataset_id))
    except KeyError:
        raise KueriError(f"{dataset_id}: not a dataset id ir_datasets knows (see ir_datasets' catalogue)") from None
