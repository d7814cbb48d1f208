"""Shared fixtures: real Lucene indexes of the shipped real sample, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "resources" / "sample"
SAMPLE_CORPUS = SAMPLE / "passages.jsonl.gz"
SAMPLE_TOPICS = SAMPLE / "topics.xml"
QRELS = ROOT / "resources" / "qrels" / "touche-task2-2022-relevance.qrels"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def topics():
    from kueri.parse import read_topics

    return read_topics(SAMPLE_TOPICS)


@pytest.fixture(scope="session")
def index_factory(tmp_path_factory):
    """Open (building once) the sample's index for an AnalyzerConfig."""
    from kueri.index import LuceneIndex
    from kueri.pipeline import cached_index

    workdir = tmp_path_factory.mktemp("indexes")
    opened: dict = {}

    def get(analyzer) -> LuceneIndex:
        if analyzer not in opened:
            opened[analyzer] = cached_index(SAMPLE_CORPUS, analyzer, workdir, progress=False)
        return opened[analyzer]

    yield get
    for index in opened.values():
        index.close()
