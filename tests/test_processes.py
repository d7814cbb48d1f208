"""Worker processes: how many, results in input order; a worker that dies or fails is an error within seconds, never
a hang, and leaves no process behind; workers never run the caller's ``__main__`` (a user's unguarded script, code
read from stdin or ``python -c``), and give the same labels and runs as one process."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from kueri.cli import ended
from kueri.errors import Interrupted, KueriError, SetupError
from kueri.processes import WORKER_NAME, ordered_pool_map, resolve_workers, worker_pool
from kueri.stance.label import POOL_MIN_HITS

from .conftest import DEFAULT_RUN, SAMPLE_CORPUS, SAMPLE_TOPICS, lines_of_topics, run_command, write_topics

_offset = 0


def _set_offset(offset: int) -> None:
    global _offset
    _offset = offset


def _add(item: int, factor: int) -> int:
    return item * factor + _offset


def _die(item: int) -> int:
    if item == 3:
        os._exit(1)  # as if killed: no exception, no result
    return item


def _fail(item: int) -> int:
    if item == 3:
        raise KueriError(f"item {item} is bad")
    return item


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_worker_count(monkeypatch):
    monkeypatch.setenv("KUERI_WORKERS", "3")
    assert resolve_workers() == 3 and resolve_workers(1) == 1
    monkeypatch.setenv("KUERI_WORKERS", "many")
    with pytest.raises(KueriError, match="KUERI_WORKERS"):
        resolve_workers()
    monkeypatch.delenv("KUERI_WORKERS")
    assert resolve_workers() == min(2, os.cpu_count() or 1)
    with pytest.raises(KueriError):
        resolve_workers(0)


def test_results_come_in_input_order_and_the_input_is_read_lazily():
    read = []

    def items():
        for i in range(40):
            read.append(i)
            yield i

    with worker_pool(2, _set_offset, 1000) as pool:
        results = ordered_pool_map(pool, _add, items(), 3, window=4)
        assert next(results) == 1000 and len(read) <= 5  # not the whole input ahead
        assert list(results) == [i * 3 + 1000 for i in range(1, 40)]
        pids = pool.pids
    assert not any(_alive(pid) for pid in pids)  # stopped and reaped on the way out


def test_a_dead_worker_is_an_error_not_a_hang():
    with pytest.raises(KueriError, match=r"worker process \(pid \d+\) died \(exit code 1\)"), \
            worker_pool(2, _set_offset, 0) as pool:
        list(ordered_pool_map(pool, _die, range(8), window=4))


def test_a_worker_killed_mid_task_fails_the_work_and_the_others_are_killed():
    started = time.monotonic()
    with pytest.raises(KueriError, match=r"died \(killed by SIGKILL\)"), worker_pool(2, _set_offset, 0) as pool:
        pids = pool.pids
        pending = [pool.submit(time.sleep, 600), pool.submit(time.sleep, 600)]
        os.kill(pids[0], signal.SIGKILL)
        pending[0].result()
    assert time.monotonic() - started < 30  # not the 600 s the other worker was busy for
    assert not any(_alive(pid) for pid in pids)


def test_a_worker_that_dies_while_starting_is_an_error():
    with pytest.raises(KueriError, match=r"died \(exit code 3\)"), worker_pool(2, os._exit, 3) as pool:
        pids = pool.pids
        list(ordered_pool_map(pool, _add, range(8), 1, window=4))
    assert not any(_alive(pid) for pid in pids)


def test_a_workers_error_reaches_the_caller_as_itself():
    with pytest.raises(KueriError, match="failed on a task: item 3 is bad"), worker_pool(2, _set_offset, 0) as pool:
        list(ordered_pool_map(pool, _fail, range(8), window=4))
    with pytest.raises(KueriError, match="failed on a task: item 3 is bad"), worker_pool(1, _set_offset, 0) as pool:
        pool.submit(_fail, 3)
        (pid,) = pool.pids
        deadline = time.monotonic() + 60
        while _alive(pid) and time.monotonic() < deadline:  # a loaded machine may take seconds to get it there
            time.sleep(0.05)
        pool.submit(_fail, 4)  # it failed and exited: this work finds its pipe closed, and says why all the same
    with pytest.raises(KueriError, match="failed while starting: ValueError: invalid literal"), \
            worker_pool(2, int, "not a number") as pool:
        list(ordered_pool_map(pool, _add, range(8), 1, window=4))


# As a user runs kueri: in a process of their own, whose main module is their script, stdin or -c.

def _user_run(args: list[str], marker: str, timeout: float = 900, stdin: str | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python ARGS`` as a user runs it (2 workers), then a check that nothing it started is still running: every
    process that carries this run's ``marker`` in its environment is gone (workers inherit it)."""
    result = run_command([sys.executable, *args], input=stdin, timeout=timeout,
                         env={"KUERI_WORKERS": "2", "KUERI_TEST_MARKER": marker, **(env or {})})
    left = _processes_carrying(marker)
    assert not left, f"processes left running: {left}"
    return result


def _processes_carrying(marker: str, command: bytes = b"") -> list[int]:
    """The running processes with ``KUERI_TEST_MARKER=marker`` in their environment and ``command`` in their
    command line."""
    found = []
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if f"KUERI_TEST_MARKER={marker}".encode() in environ and command in cmdline:
                found.append(pid)
        except OSError:
            pass
    return found


#: The reference run's top hits per topic a script labels: 4,284 hits, enough for workers (POOL_MIN_HITS).
_TOP = 90
_LABEL_SCRIPT = f"""
import sys
from kueri.parse import read_topics
from kueri.runfile import read_run, write_run
from kueri.stance import corpus_texts, label_run

print("the script's top level ran", flush=True)
run = {{qid: hits[:{_TOP}] for qid, hits in read_run({str(DEFAULT_RUN)!r}).items()}}
texts = corpus_texts({str(SAMPLE_CORPUS)!r}, {{hit.doc for hits in run.values() for hit in hits}})
labelled = label_run(run, read_topics({str(SAMPLE_TOPICS)!r}), texts, depth=None, model="stance-v1",
                     workers=int(sys.argv[-2]))
write_run(labelled, sys.argv[-1], "kueri_default")
"""


@pytest.mark.parametrize("how", ["script", pytest.param("stdin", marks=pytest.mark.slow),
                                 pytest.param("-c", marks=pytest.mark.slow)])
def test_a_users_unguarded_code_labels_in_two_workers_as_in_one(how, tmp_path):
    """A script with top-level code (no ``__main__`` guard), the same code read from stdin, and with ``-c``: the
    workers never re-run it, and 2 workers write the labels 1 process writes. The script labels with stance-v1,
    the fast model (what workers do is the point here, not the model): below the top 10, which the default's
    passage model labels, the reference run's stance column is stance-v1's."""
    script = tmp_path / "label.py"
    script.write_text(_LABEL_SCRIPT)
    for workers in (2, 1):
        out = tmp_path / f"{how}-{workers}.txt"
        args = {"script": [str(script)], "stdin": ["-"], "-c": ["-c", _LABEL_SCRIPT]}[how] + [str(workers), str(out)]
        result = _user_run(args, uuid.uuid4().hex, timeout=300, stdin=_LABEL_SCRIPT if how == "stdin" else None)
        assert result.returncode == 0, result.stderr
        assert result.stdout.count("the script's top level ran") == 1, result.stdout
        assert "bootstrapping phase" not in result.stderr
    assert (tmp_path / f"{how}-2.txt").read_bytes() == (tmp_path / f"{how}-1.txt").read_bytes()
    def below_the_top_ten(lines: list[str]) -> list[str]:
        return [line for line in lines if 10 < int(line.split()[3]) <= _TOP]

    reference = gzip.decompress(DEFAULT_RUN.read_bytes()).decode().splitlines(keepends=True)
    labelled = (tmp_path / f"{how}-2.txt").read_text().splitlines(keepends=True)
    assert len(labelled) == sum(1 for line in reference if int(line.split()[3]) <= _TOP)
    assert below_the_top_ten(labelled) == below_the_top_ten(reference)


def test_a_worker_that_cannot_start_is_one_line_within_seconds(tmp_path):
    """A broken Python environment for the workers (here a site customisation that kills them as they start):
    ``kueri stance`` says so in one line and exits, nothing left running, no labelled run written."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"import os, sys\nif {WORKER_NAME!r} in sys.argv:\n    os._exit(7)\n")
    out = tmp_path / "labelled.txt"
    started = time.monotonic()
    result = _user_run(["-m", "kueri", "stance", str(DEFAULT_RUN), "--corpus", str(SAMPLE_CORPUS), "--topics",
                        str(SAMPLE_TOPICS), "--output", str(out), "--depth", "0", "--workers", "2"],
                       uuid.uuid4().hex, timeout=30, env={"PYTHONPATH": str(site)})
    assert time.monotonic() - started < 30
    assert result.returncode == KueriError.exit_code, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("kueri: error:")]
    assert len(errors) == 1 and "worker process" in errors[0] and "exit code 7" in errors[0], result.stderr
    assert "Traceback" not in result.stderr and not out.exists()


_PYTERRIER_SCRIPT = """
import sys
import pyterrier as pt
from kueri import pyterrier as kp, resources

print("the script's top level ran", flush=True)
sample = resources.path("sample")
topics = kp.topics(sys.argv[3])
results = kp.pipeline("default", sample / "passages.jsonl.gz", sys.argv[1])(topics)
kp.write_run(results, sys.argv[2], "kueri_default")
"""

_API_SCRIPT = """
import sys
from kueri import resources
from kueri.config import get_config
from kueri.parse import read_topics
from kueri.pipeline import run_config
from kueri.runcontext import RunContext
from kueri.runfile import write_run

print("the script's top level ran", flush=True)
sample = resources.path("sample")
run = run_config(get_config("default"), sample / "passages.jsonl.gz", read_topics(sys.argv[3]),
                 RunContext(sys.argv[1], progress=False))
write_run(run, sys.argv[2], "kueri_default")
"""


@pytest.mark.slow
def test_a_users_pyterrier_script_and_the_python_api_write_the_clis_run(default_tira_run, tmp_path):
    """The issue's user: a plain PyTerrier script with top-level code running the default pipeline with 2 workers
    writes the CLI's run line for line; so does the Python API without PyTerrier, read from stdin.

    On the fewest of the sample's topics with enough hits for the stance workers to start (a run is made topic by
    topic: their lines of the CLI's run are theirs), in half a whole run's time."""
    pytest.importorskip("pyterrier")
    script = tmp_path / "experiment.py"
    script.write_text(_PYTERRIER_SCRIPT)
    whole = (default_tira_run.out / "run.txt").read_text()
    chosen, hits = [], 0
    for qid, count in Counter(line.split(" ", 1)[0] for line in whole.splitlines()).most_common():
        if hits >= POOL_MIN_HITS:
            break
        chosen, hits = [*chosen, qid], hits + count
    assert hits >= POOL_MIN_HITS, hits
    cli_run = lines_of_topics(whole, chosen)
    topics = write_topics(chosen, tmp_path / "topics.xml")
    for name, args, stdin in (("pyterrier", [str(script)], None), ("api", ["-"], _API_SCRIPT)):
        out = tmp_path / f"{name}.txt"
        result = _user_run([*args, str(default_tira_run.workdir), str(out), str(topics)], uuid.uuid4().hex,
                           stdin=stdin)
        assert result.returncode == 0, result.stderr
        assert result.stdout.count("the script's top level ran") == 1, result.stdout
        assert out.read_text() == cli_run, name



def test_a_signal_while_workers_label_stops_them_all(tmp_path):
    """SIGTERM to ``kueri stance`` while its workers label: it exits 143 within seconds, its workers with it, and
    writes nothing."""
    marker, out = uuid.uuid4().hex, tmp_path / "labelled.txt"
    process = subprocess.Popen([sys.executable, "-m", "kueri", "stance", str(DEFAULT_RUN), "--corpus",
                                str(SAMPLE_CORPUS), "--topics", str(SAMPLE_TOPICS), "--output", str(out), "--depth",
                                "all", "--workers", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "KUERI_TEST_MARKER": marker})
    try:
        deadline = time.monotonic() + 60
        workers = []
        while len(workers) < 2 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
            workers = _processes_carrying(marker, WORKER_NAME.encode())
        assert len(workers) == 2, process.stderr.read() if process.poll() is not None else ""
        time.sleep(1.0)  # they are labelling
        process.send_signal(signal.SIGTERM)
        started = time.monotonic()
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 143, err
    assert time.monotonic() - started < 10 and "Traceback" not in err
    assert not _processes_carrying(marker)
    assert not out.exists()


def _raised(make: Callable[[], BaseException]) -> BaseException:
    try:
        raise make()
    except BaseException as exc:  # the exception as the CLI receives it, its causes attached
        return exc


def _import_interrupted_by(signal_exc: BaseException) -> Callable[[], BaseException]:
    """What pybind11 raises when a signal's exception arrives while its module loads, and what kueri makes of it."""
    def make() -> BaseException:
        try:
            try:
                raise signal_exc
            except BaseException as inner:
                raise ImportError("initialization failed") from inner
        except ImportError as exc:
            raise SetupError(f"the second stage's neural features need onnxruntime ({exc})") from None
    return make


def test_a_signal_that_a_library_made_its_own_error_still_ends_as_the_signal(capsys):
    """The race the signal test above once lost: SIGTERM while onnxruntime's module loaded became ImportError
    "initialization failed", then a setup error (exit 2); it is the signal (143), and ^C 130."""
    assert ended(_raised(_import_interrupted_by(Interrupted(signal.SIGTERM)))) == 143
    assert "stopped by SIGTERM" in capsys.readouterr().err
    assert ended(_raised(_import_interrupted_by(KeyboardInterrupt()))) == 130
    assert "interrupted" in capsys.readouterr().err
    # an error with no signal behind it stays itself; an import error that is a bug is raised again
    assert ended(_raised(lambda: SetupError("no index"))) == 2
    assert capsys.readouterr().err == "kueri: error: no index\n"
    with pytest.raises(ImportError):
        ended(_raised(lambda: ImportError("a bug")))

