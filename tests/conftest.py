"""Shared fixtures: real Lucene indexes of the shipped real sample, built once per session."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

import pytest

from kueri import resources

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = resources.sample()
SAMPLE_CORPUS = SAMPLE / "passages.jsonl.gz"
SAMPLE_TOPICS = SAMPLE / "topics.xml"
QRELS = resources.path("qrels", "touche-task2-2022-relevance.qrels")
DATA = Path(__file__).resolve().parent / "data"
#: The default run on the shipped sample (docs/reproducibility.md), made on an AMD EPYC with AVX2 and FMA (the one
#: before the second stage's cascade on an Intel Xeon with AVX-512 and AMX, byte for byte as on the EPYC); every
#: x86-64 CPU with AVX2 and FMA makes it byte for byte, and its nDCG@5 (official 2022 qrels) with it.
DEFAULT_RUN = DATA / "default-run.txt.gz"
DEFAULT_NDCG5 = 0.6248
#: How far the default's nDCG@5 may move on a CPU without AVX2 and FMA, where onnxruntime's float kernels round
#: differently (8.2e-8 at most in an embedding under an emulated Sandy Bridge): twice the largest change in 10
#: runs with every embedding moved by noise of sd 1e-5 per dimension (scripts/kernel_noise.py,
#: docs/reproducibility.md).
NO_FMA_NDCG5_TOLERANCE = 0.0006
#: The share of the reference run's top-5 passages a CPU without AVX2 and FMA must keep: all of them in those 10
#: runs, less a margin.
NO_FMA_TOP5_OVERLAP = 0.98


def kernels_as_the_reference() -> bool:
    """Whether onnxruntime computes the encoders on this CPU bit for bit as where the reference run was made."""
    from kueri.environment import cpu_flags, same_bits_as_reference

    return same_bits_as_reference(cpu_flags())


def check_default_ndcg5(value: float) -> None:
    """The default's nDCG@5 on the sample: exactly the reference's where the kernels are the reference's, else
    within the measured tolerance."""
    if kernels_as_the_reference():
        assert round(value, 4) == DEFAULT_NDCG5
    else:
        assert abs(value - DEFAULT_NDCG5) <= NO_FMA_NDCG5_TOLERANCE, (value, DEFAULT_NDCG5)


#: Fixtures that stand for real indexes of the whole sample or whole runs: a test that uses one is an
#: integration test, left out of the fast loop (``pytest -m "not slow"``).
INTEGRATION_FIXTURES = {"index_factory", "sample_pipeline", "default_tira_run", "workdir"}


def needs_session_work(item: pytest.Item) -> bool:
    """Whether a test uses the session's work folder (:data:`INTEGRATION_FIXTURES`)."""
    return bool(INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    needs_work = {item: needs_session_work(item) for item in items}
    kinds: dict[Path, set[bool]] = {}
    for item, needs in needs_work.items():
        if needs:
            item.add_marker(pytest.mark.slow)
        kinds.setdefault(item.path, set()).add(needs)
    # What needs nothing of the session's work folder first, so that it runs while the default run, started as the
    # session begins, is made: the files without such tests, then those with some (those tests last in each file,
    # the others in their order), then the rest (one file per worker process: make test).
    group = {path: 0 if True not in needs else 1 if False in needs else 2 for path, needs in kinds.items()}
    place = {path: i for i, path in enumerate(kinds)}
    items.sort(key=lambda item: (group[item.path], place[item.path], needs_work[item]))


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


@dataclass
class TiraRun:
    out: Path  # the output folder, with run.txt
    stderr: str
    workdir: Path


def shared_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """The folder ``name`` that every process of the session sees: in the session's temp folder, or, when
    pytest-xdist runs the tests in worker processes (``make test``), in the one that holds the workers' own."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


class SessionWork:
    """The session's one work folder, where every index of the sample and every passage embedding is made once.

    The default run (``my-software.sh``, :meth:`default_run`) is made first in it, nothing cached: it must build its
    index and embed its candidates itself, as its tests read in what it reports. It starts in the background as the
    session begins (:meth:`start_default_run`), so the tests that do not need it run meanwhile on the other core.
    Anything else that builds the default's index here waits for it (:class:`SampleSession`), and the ``workdir``
    fixture is the folder after it. Worker processes share the folder and the run: the first makes it, under a lock
    the others wait on (as kueri's own processes share a work folder's entries).
    """

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.tmp_path_factory = tmp_path_factory
        self.folder = shared_folder(tmp_path_factory, "work")
        self.made = shared_folder(tmp_path_factory, "default-run")
        self.lock, self.out, self.stderr = self.made / ".lock", self.made / "out", self.made / "stderr.txt"
        self._default_run: TiraRun | None = None
        self._started: subprocess.Popen | None = None
        self.failed = ""  # the stderr of a default run started here that failed

    def _command(self) -> list[str]:
        return [str(ROOT / "my-software.sh"), "-i", str(SAMPLE), "-o", str(self.out), "-w", str(self.folder)]

    def start_default_run(self) -> None:
        """Start the default run in another process unless a process of the session has: its lock is held until the
        run is made (its stderr written last: a run that failed is made again by the next to ask)."""
        fd = os.open(self.lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return
        if self.stderr.exists():
            os.close(fd)
            return
        self._started = subprocess.Popen(self._command(), cwd=self.tmp_path_factory.mktemp("elsewhere"),
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)

        def finish(process: subprocess.Popen) -> None:
            try:
                _, err = process.communicate()
                if process.returncode == 0:
                    self.stderr.write_text(err)
                else:
                    self.failed = err
            finally:
                os.close(fd)  # releases the lock

        threading.Thread(target=finish, args=(self._started,), daemon=True).start()

    def default_run(self) -> TiraRun:
        """``my-software.sh`` with no options on the shipped sample, from another directory, made once."""
        from kueri.files import file_lock

        if self._default_run is None:
            with file_lock(self.lock, "the session's default run"):
                assert not self.failed, self.failed
                if not self.stderr.exists():
                    result = run_command(self._command(), cwd=self.tmp_path_factory.mktemp("elsewhere"))
                    assert result.returncode == 0, result.stderr
                    self.stderr.write_text(result.stderr)
            self._default_run = TiraRun(self.out, self.stderr.read_text(), self.folder)
        return self._default_run

    def close(self) -> None:
        """Stop a default run started in the background that no test waited for."""
        if self._started is not None and self._started.poll() is None:
            self._started.kill()


@pytest.fixture(scope="session")
def session_work(tmp_path_factory) -> Iterator[SessionWork]:
    work = SessionWork(tmp_path_factory)
    yield work
    work.close()


@pytest.fixture(scope="session", autouse=True)
def _default_run_started(request, session_work) -> None:
    """The default run started as the session begins when a selected test may need it."""
    if any(needs_session_work(item) for item in request.session.items):
        session_work.start_default_run()


@pytest.fixture(scope="session")
def default_tira_run(session_work) -> TiraRun:
    """``my-software.sh`` with no options on the shipped sample, from another directory, nothing cached."""
    return session_work.default_run()


@pytest.fixture(scope="session")
def workdir(default_tira_run) -> Path:
    """The session's work folder after the default run: the sample's index and the embeddings of the default's
    candidates are there, and whatever else a test builds there is built once."""
    return default_tira_run.workdir


@pytest.fixture(scope="session")
def row15_cli_run(workdir, tmp_path_factory) -> Path:
    """The run file ``kueri run --config row-15`` writes for the sample, in the session's work folder (the
    candidates of TIRA's re-rank input and of ``kueri rerank``, the run an ir_datasets id must give)."""
    path = tmp_path_factory.mktemp("row-15") / "row-15.txt"
    made = run_command([sys.executable, "-m", "kueri", "run", "--config", "row-15", "--corpus", str(SAMPLE_CORPUS),
                        "--topics", str(SAMPLE_TOPICS), "--workdir", str(workdir), "--output", str(path)])
    assert made.returncode == 0, made.stderr
    return path


class SampleSession:
    """The sample's :class:`~kueri.session.Session` in the session's work folder, over every topic: the default's
    index is the default run's (a run or an index that reads it waits for that run first)."""

    def __init__(self, work: SessionWork, topics: list) -> None:
        from kueri.config import get_config
        from kueri.runcontext import RunContext
        from kueri.session import Session

        self.session = Session(SAMPLE_CORPUS, RunContext(work.folder, progress=False))
        self.work, self.topics, self.workdir = work, topics, self.session.workdir
        self.default_analyzer = get_config("default").analyzer

    def _after_default_run(self, analyzers) -> None:  # noqa: ANN001 - the analyses a call reads
        if self.default_analyzer in analyzers:
            self.work.default_run()

    def index(self, analyzer):  # noqa: ANN001, ANN201 - Session.index's
        self._after_default_run([analyzer])
        return self.session.index(analyzer)

    def run(self, config):  # noqa: ANN001, ANN201 - Session.run's, over every topic
        self._after_default_run(config.plan().indexes())
        return self.session.run(config, self.topics)


@pytest.fixture(scope="session")
def sample_pipeline(session_work, topics):
    """The sample's session over the session's work folder and every topic: each index is built once, each
    configuration's run computed once (Table 1, row 15, the dense runs...) for every module that asks."""
    sample = SampleSession(session_work, topics)
    with sample.session:
        yield sample


@pytest.fixture(scope="session")
def index_factory(sample_pipeline):
    """Open (building once, in the session's work folder) the sample's index for an AnalyzerConfig."""
    return sample_pipeline.index


#: A few of the sample's topics, for tests of how a whole run is made (an entry point, an input format, a package)
#: rather than of its figures: a run is made topic by topic, so theirs is the whole run's lines for them
#: (:func:`lines_of_topics`), in a fraction of its time. Between them they label all of FIRST, SECOND, NEUTRAL, NO.
FEW_TOPICS = ("2", "34", "91")


def write_topics(numbers: Collection[str], path: Path) -> Path:
    """The sample's topics.xml keeping only the topics numbered ``numbers``, written to ``path``."""
    tree = ElementTree.parse(SAMPLE_TOPICS)
    root = tree.getroot()
    for topic in list(root):
        if (topic.findtext("number") or "").strip() not in numbers:
            root.remove(topic)
    assert len(root) == len(set(numbers)), f"not all of {sorted(numbers)} are the sample's topics"
    tree.write(path, encoding="utf-8", xml_declaration=True)
    return path


def lines_of_topics(run_text: str, numbers: Collection[str]) -> str:
    """The lines of a run file's text whose topic is one of ``numbers``, in their order (each topic has some)."""
    lines = [line for line in run_text.splitlines(keepends=True) if line.split(" ", 1)[0] in numbers]
    assert {line.split(" ", 1)[0] for line in lines} == set(numbers), "a topic without lines compares nothing"
    return "".join(lines)


def run_command(args, **kwargs) -> subprocess.CompletedProcess:
    """A command as a user runs it (from the project unless ``cwd`` says otherwise), its output captured."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **kwargs.pop("env", {})}
    return subprocess.run(args, cwd=kwargs.pop("cwd", ROOT), env=env, capture_output=True, text=True,
                          timeout=kwargs.pop("timeout", 900), **kwargs)


#: Tests that compare with an emulated AVX2-only CPU need Debian's qemu-user.
needs_qemu = pytest.mark.skipif(
    shutil.which("qemu-x86_64") is None,
    reason="qemu-x86_64 not installed (Debian's qemu-user): no emulated AVX2-only CPU to compare with")


@pytest.fixture(scope="session")
def emulated_haswell(request, tmp_path_factory) -> dict:
    """Each selected test module's ``emulated_case()`` computed here and on an emulated Haswell, all in one emulated
    process (tests/emulated.py) for the session's processes: {module name: (here, emulated)}."""
    from kueri.files import file_lock
    from tests.emulated import on_emulated_haswell

    modules = {item.module.__name__ for item in request.session.items
               if "emulated_haswell" in getattr(item, "fixturenames", ())}
    folder = shared_folder(tmp_path_factory, "emulated")  # worker processes emulate once for all
    with file_lock(folder / ".lock", "the emulated CPU's outputs"):
        return on_emulated_haswell(modules, folder)
