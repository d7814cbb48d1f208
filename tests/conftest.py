"""Shared fixtures: real Lucene indexes of the shipped real sample, built once per session."""

from __future__ import annotations

import logging
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from kueri import resources

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = resources.sample()
SAMPLE_CORPUS = SAMPLE / "passages.jsonl.gz"
SAMPLE_TOPICS = SAMPLE / "topics.xml"
QRELS = resources.path("qrels", "touche-task2-2022-relevance.qrels")
DATA = Path(__file__).resolve().parent / "data"


#: Fixtures that stand for real indexes of the whole sample or whole runs: a test that uses one is an
#: integration test, left out of the fast loop (``pytest -m "not slow"``).
INTEGRATION_FIXTURES = {"index_factory", "default_tira_run", "workdir"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _fresh_logging():
    """The CLI configures the ``kueri`` logger once per process; a test that calls ``main`` leaves it for none."""
    logger = logging.getLogger("kueri")
    handlers, level = logger.handlers[:], logger.level
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)


@pytest.fixture(scope="session")
def topics():
    from kueri.parse import read_topics

    return read_topics(SAMPLE_TOPICS)


@pytest.fixture(scope="session")
def index_factory(tmp_path_factory):
    """Open (building once) the sample's index for an AnalyzerConfig."""
    from kueri.lucene.index import LuceneIndex
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


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    """One work folder for the session's end-to-end runs: the sample's index and embeddings are built once."""
    return tmp_path_factory.mktemp("work")


@dataclass
class TiraRun:
    out: Path  # the output folder, with run.txt
    stderr: str
    workdir: Path


@pytest.fixture(scope="session")
def default_tira_run(tmp_path_factory, workdir) -> TiraRun:
    """``my-software.sh`` with no options on the shipped sample, from another directory, nothing cached."""
    out = tmp_path_factory.mktemp("default-run")
    result = run_command([str(ROOT / "my-software.sh"), "-i", str(SAMPLE), "-o", str(out), "-w", str(workdir)],
                         cwd=tmp_path_factory.mktemp("elsewhere"))
    assert result.returncode == 0, result.stderr
    return TiraRun(out, result.stderr, workdir)


def run_command(args, **kwargs) -> subprocess.CompletedProcess:
    """A command as a user runs it (from the project unless ``cwd`` says otherwise), its output captured."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **kwargs.pop("env", {})}
    return subprocess.run(args, cwd=kwargs.pop("cwd", ROOT), env=env, capture_output=True, text=True,
                          timeout=kwargs.pop("timeout", 900), **kwargs)
