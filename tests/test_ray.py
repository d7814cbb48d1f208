"""Scale-out on Ray: a local cluster on 127.0.0.1 builds shards, scores passages, labels and runs topics as tasks.

Every result is compared with the local command's: the index (every Table 1 search row's run on it), the quality
score file, the stance labels and whole run files. A worker killed mid-build or mid-run is survived. The cluster is
the module's own, started once (:func:`kueri.scaleout.start_local_cluster`: ``ray start --head`` on loopback in its
own temp folder, ports and Unix session, token authentication off for it), and only its processes are stopped
after: never ``ray stop``, which would stop every Ray cluster of the user on the machine.

What the comparisons need is made once and shared: the sample's indexes are the session's
(:func:`tests.conftest.index_factory`: the local builds the Ray builds must equal, and copied into each work folder
that must start with empty embedding stores), the local reference runs are the module's; the runs use a few topics,
in batches small enough for two tasks at once on the two CPUs.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path

import pytest

pytest.importorskip("ray")

from kueri.config import TABLE1_SEARCH_ROWS, RunConfig, get_config  # noqa: E402
from kueri.lucene import MANIFEST, AnalyzerConfig, LuceneIndex  # noqa: E402
from kueri.parse import read_topics  # noqa: E402
from kueri.pipeline import search_run  # noqa: E402
from kueri.records import Run  # noqa: E402
from kueri.scaleout import (  # noqa: E402
    LocalCluster,
    cluster_processes,
    local_cluster,
    start_local_cluster,
    stop_local_cluster,
)
from tests.conftest import ROOT, SAMPLE_CORPUS, SAMPLE_TOPICS, write_topics  # noqa: E402

pytestmark = pytest.mark.slow

#: Ray on loopback only (its default would advertise the machine's own address), no token for a test cluster.
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}

#: Where ``ray start`` without ``--temp-dir`` would record its cluster: no head of the tests may write it.
DEFAULT_ADDRESS_FILE = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def default_address() -> bytes | None:
    return DEFAULT_ADDRESS_FILE.read_bytes() if DEFAULT_ADDRESS_FILE.exists() else None


@pytest.fixture(scope="module")
def head() -> Iterator[LocalCluster]:
    """The module's one Ray head (2 CPUs): every test's cluster. Stopped after the module, it leaves no process and
    no temp folder, and the default address file as it was."""
    before = default_address()
    with local_cluster(2, env=RAY_ENV) as started:
        yield started
    assert cluster_processes(started) == [] and not started.temp_dir.exists()
    assert default_address() == before


@pytest.fixture(scope="module")
def cluster(head) -> str:
    return head.address


def kueri(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return kueri_at_once([*args], timeout=timeout)[0]


def kueri_at_once(*commands: list[str], timeout: float = 600) -> list[subprocess.CompletedProcess]:
    """Several kueri commands started together (drivers of one cluster side by side, a local command beside its
    Ray twin: their start-up overlaps), each one's result once all have ended."""
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": str(ROOT)}
    started = [subprocess.Popen([sys.executable, "-m", "kueri", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for args in commands]
    deadline = time.monotonic() + timeout
    results = []
    try:
        for process in started:
            out, err = process.communicate(timeout=max(deadline - time.monotonic(), 1))
            results.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()
    return results


def runs_of(index_dir: Path, rows: list) -> dict[str, dict]:
    topics = read_topics(SAMPLE_TOPICS)
    with LuceneIndex(index_dir) as index:
        return {row.name: search_run(index, row, topics) for row in rows}


#: The Table 1 search rows by the analyzer of their index.
ROWS_BY_ANALYZER: dict[AnalyzerConfig, list[RunConfig]] = {}
for _row in TABLE1_SEARCH_ROWS:
    ROWS_BY_ANALYZER.setdefault(_row.analyzer, []).append(_row)


@pytest.fixture(scope="module")
def local_runs(index_factory) -> Callable[[AnalyzerConfig], dict[str, Run]]:
    """The runs of an analyzer's Table 1 search rows on the session's local build of the sample (one writer)."""
    made: dict[AnalyzerConfig, dict[str, Run]] = {}

    def runs(analyzer: AnalyzerConfig) -> dict[str, Run]:
        if analyzer not in made:
            local = index_factory(analyzer)
            assert local.manifest.get("build") is None  # built by one writer, not in shards
            made[analyzer] = runs_of(local.path, ROWS_BY_ANALYZER[analyzer])
        return made[analyzer]

    return runs


#: The sample's passages (the Ray builds' corpus).
SAMPLE_PASSAGES = 2607


def test_ray_builds_equal_local_builds_for_every_table1_search_row(cluster, local_runs, tmp_path):
    """The sample in 4 shards of real text (700 passages, the last 507) on the cluster, every analyzer's build a
    driver of its own, all at once."""
    commands = []
    for number, analyzer in enumerate(ROWS_BY_ANALYZER):
        flags = ["--stoplist", analyzer.stoplist, "--stemmer", analyzer.stemmer or "none"]
        shared = ["--shard-dir", str(tmp_path / f"shared-{number}")] if number % 2 else []  # both ways back
        commands.append(["index", "--corpus", str(SAMPLE_CORPUS), "--index", str(tmp_path / f"ray-{number}"),
                         "--ray", cluster, "--chunk-passages", "700", *flags, *shared, "-q"])
    builds = kueri_at_once(*commands)
    for number, (built, (analyzer, rows)) in enumerate(zip(builds, ROWS_BY_ANALYZER.items(), strict=True)):
        assert built.returncode == 0, built.stderr
        manifest = json.loads((tmp_path / f"ray-{number}" / MANIFEST).read_text())
        assert (manifest["indexed"], manifest["build"]["shards"]) == (SAMPLE_PASSAGES, 4)
        assert runs_of(tmp_path / f"ray-{number}", rows) == local_runs(analyzer), [r.name for r in rows]


#: Passages of the quality test's corpus: three tasks of 500, the last one short.
QUALITY_PASSAGES = 1_100


def test_quality_offline_on_ray_writes_the_local_file(cluster, tmp_path):
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as sample:
        (tmp_path / "passages.jsonl").write_text("".join(islice(sample, QUALITY_PASSAGES)), encoding="utf-8")
    common = ["quality", "offline", "--corpus", str(tmp_path / "passages.jsonl"), "-q"]
    local, remote = kueri_at_once([*common, "--scores", str(tmp_path / "local.tsv")],
                                  [*common, "--scores", str(tmp_path / "ray.tsv"), "--ray", cluster])
    assert local.returncode == 0, local.stderr
    assert remote.returncode == 0, remote.stderr
    assert (tmp_path / "ray.tsv").read_bytes() == (tmp_path / "local.tsv").read_bytes()
    assert len((tmp_path / "ray.tsv").read_text().splitlines()) == QUALITY_PASSAGES


def workers_of(task: str) -> list[int]:
    """The processes running a task of the function ``task`` now."""
    listing = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in listing.splitlines() if f"ray::{task}" in line]


def kill_a_worker_of(task: str, process: subprocess.Popen, pause: float) -> int | None:
    """SIGKILL to the first worker seen running ``task`` while ``process`` runs (within 5 minutes); its pid."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        workers = workers_of(task)
        if workers:
            os.kill(workers[0], signal.SIGKILL)
            return workers[0]
        time.sleep(pause)
    return None


def test_a_killed_worker_is_survived(cluster, local_runs, tmp_path):
    """The sample in 18 shards: a worker killed mid-build, its shard built again."""
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "kueri", "index", "--corpus", str(SAMPLE_CORPUS), "--index",
               str(tmp_path / "ray"), "--ray", cluster, "--chunk-passages", "150", "--config", "row-07", "-q"]
    build = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = kill_a_worker_of("_build_shard_task", build, 0.05)
    _, err = build.communicate(timeout=600)
    assert killed is not None, "no shard task was ever seen running"
    assert build.returncode == 0, err
    row07 = get_config("row-07")
    assert runs_of(tmp_path / "ray", [row07]) == {"row-07": local_runs(row07.analyzer)["row-07"]}


def test_an_unreachable_cluster_is_one_line(tmp_path):
    result = kueri("index", "--corpus", str(SAMPLE_CORPUS), "--index", str(tmp_path / "i"), "--ray",
                   f"127.0.0.1:{free_port()}", timeout=120)
    assert result.returncode == 3, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("kueri: error: cannot reach the Ray cluster at 127.0.0.1:")
    assert not (tmp_path / "i").exists()
    result = kueri("run", "--corpus", str(SAMPLE_CORPUS), "--topics", str(SAMPLE_TOPICS), "--output",
                   str(tmp_path / "run.txt"), "--workdir", str(tmp_path / "work"), "--ray", f"127.0.0.1:{free_port()}",
                   timeout=120)
    assert result.returncode == 3, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("kueri: error: cannot reach the Ray cluster at 127.0.0.1:")
    assert not (tmp_path / "run.txt").exists() and not list((tmp_path / "work").glob("index-*"))


def test_the_test_cluster_stops_without_touching_another_cluster_on_the_machine(head):
    """The module's head stands for someone's Ray cluster running beside the suite: starting and stopping another
    head leaves it running, its processes untouched, its driver able to connect and run a task (the module's head,
    stopped after the module, leaves nothing behind either: :func:`head`)."""
    before = default_address()
    other = head
    theirs = {pid: (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19],
                    Path(f"/proc/{pid}/cmdline").read_bytes()) for pid in cluster_processes(other)}
    # the cluster's daemons (a worker of theirs may come and go as Ray pleases)
    daemons = {pid: seen for pid, seen in theirs.items() if not seen[1].startswith(b"ray::")}
    assert any(b"gcs_server" in cmdline for _, cmdline in daemons.values()), theirs

    ours = start_local_cluster(1, env=RAY_ENV)
    try:
        assert (ours.temp_dir / "ray_current_cluster").read_text().strip() == ours.address
        assert not set(cluster_processes(ours)) & set(theirs)
        assert driver_task(ours.address).returncode == 0  # ours has had a worker too
    finally:
        stopped = stop_local_cluster(ours)
    assert stopped and not set(stopped) & set(theirs)
    assert cluster_processes(ours) == [] and not ours.temp_dir.exists()

    for pid, (started, cmdline) in daemons.items():  # the same processes, not new ones under the same pids
        stat = Path(f"/proc/{pid}/stat")
        assert stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[19] == started, cmdline[:80]
    result = driver_task(other.address)
    assert result.returncode == 0 and result.stdout.strip() == "7", result.stderr[-2000:]
    assert default_address() == before


def driver_task(address: str) -> subprocess.CompletedProcess:
    """A driver in its own process: connects to ``address`` and runs one task."""
    code = "import ray, sys; ray.init(address=sys.argv[1]); print(ray.get(ray.remote(lambda: 7).remote()))"
    return subprocess.run([sys.executable, "-c", code, address], env={**os.environ, **RAY_ENV}, capture_output=True,
                          text=True, timeout=300)


# -- a whole run on Ray ------------------------------------------------------------------------------------------

#: Two of the sample's topics (the sample's shortest run, and one whose top hits are FIRST, SECOND and NO): one a
#: task, both at once on the 2-CPU head.
RUN_TOPICS = ("2", "91")

#: The configurations whose indexes of the sample the runs below search.
RUN_CONFIGS = ("default", "row-07", "row-16")


@pytest.fixture(scope="module")
def few_topics(tmp_path_factory) -> Path:
    return write_topics(RUN_TOPICS, tmp_path_factory.mktemp("topics") / "topics.xml")


@pytest.fixture(scope="module")
def sample_indexes(index_factory) -> list[Path]:
    """The sample's indexes of :data:`RUN_CONFIGS`: the session's (other tests search them too), built once."""
    return [index_factory(get_config(name).analyzer).path for name in RUN_CONFIGS]


def work_folder(path: Path, indexes: list[Path]) -> Path:
    """A work folder at ``path`` with a copy of each of ``indexes`` and nothing else: its embedding stores empty."""
    for index in indexes:
        shutil.copytree(index, path / index.name)
    return path


@pytest.fixture(scope="module")
def local_default(few_topics, sample_indexes, tmp_path_factory) -> tuple[Path, Path]:
    """The local default run of the topics (100 hits), and its work folder (its stores now hold the embeddings)."""
    folder = tmp_path_factory.mktemp("local-default")
    work = work_folder(folder / "work", sample_indexes)
    made = kueri("run", "--corpus", str(SAMPLE_CORPUS), "--topics", str(few_topics), "--hits", "100", "--output",
                 str(folder / "run.txt"), "--workdir", str(work), "-q")
    assert made.returncode == 0, made.stderr
    return folder / "run.txt", work


def stored_passages(workdir: Path) -> dict[str, int]:
    """Passages in each embeddings store of a work folder, counted from its chunks' headers."""
    counts = {}
    for store in sorted(workdir.glob("embeddings-*")):
        if store.is_dir():
            counts[store.name] = sum(int.from_bytes(chunk.read_bytes()[4:8], "little")
                                     for chunk in store.glob("chunk-*.emb"))
    return counts


def test_the_default_on_ray_writes_the_local_run_file_and_fills_the_one_store(cluster, few_topics, local_default,
                                                                              sample_indexes, tmp_path):
    local, local_work = local_default
    # cold stores: the nodes embed every candidate, the driver's one store gets them
    work = work_folder(tmp_path / "work", sample_indexes)
    remote = kueri("run", "--corpus", str(SAMPLE_CORPUS), "--topics", str(few_topics), "--hits", "100", "--output",
                   str(tmp_path / "ray.txt"), "--workdir", str(work), "--ray", cluster, "--ray-batch", "1")
    assert remote.returncode == 0, remote.stderr
    assert (tmp_path / "ray.txt").read_bytes() == local.read_bytes()
    assert {line.split()[1] for line in local.read_text().splitlines()} >= {"FIRST", "SECOND", "NO"}
    summary = next(line for line in remote.stderr.splitlines() if "Ray run:" in line)
    assert "2 topics in 2 tasks" in summary and "at most 2 at once" in summary, summary
    # the nodes' embeddings came back into the driver's stores: the passages the local run embedded, each once
    assert stored_passages(work) == stored_passages(local_work) and all(stored_passages(work).values())
    assert not list(work.glob("ray-run-*"))  # the finished batches are gone once the run file is written


#: Row 16's topics here: the sample's first 16.
ROW16_TOPICS = 16


@pytest.fixture(scope="module")
def local_row16(sample_indexes, tmp_path_factory) -> tuple[list[str], Path]:
    """Row 16's command (:data:`ROW16_TOPICS` topics) without --output, and its local run file."""
    folder = tmp_path_factory.mktemp("row-16")
    numbers = [topic.number for topic in read_topics(SAMPLE_TOPICS)][:ROW16_TOPICS]
    topics = write_topics(numbers, folder / "topics.xml")
    command = ["run", "--config", "row-16", "--corpus", str(SAMPLE_CORPUS), "--topics", str(topics),
               "--workdir", str(work_folder(folder / "work", sample_indexes)), "-q"]
    local = kueri(*command, "--output", str(folder / "local.txt"))
    assert local.returncode == 0, local.stderr
    return command, folder / "local.txt"


#: Topics per task of the row-16 run on Ray: 16 topics make 6 tasks, the last one shorter.
ROW16_BATCH = 3


def test_a_feedback_row_on_ray_stopped_resumes_survives_a_killed_worker_and_writes_the_local_run(cluster, local_row16,
                                                                                                  tmp_path):
    """Row 16 (graded relevance feedback: its run lists the judged topics by number, the batches' runs are sorted
    so; the fusion rows sort alike: row 24, fusion and quality, compared in benchmarks/bench_ray.py). SIGTERM to the
    driver once some batches are back: no run file, the finished batches kept; the same command then runs only the
    others, survives a worker killed mid-task, and writes the local run."""
    command, local = local_row16
    batches = -(-ROW16_TOPICS // ROW16_BATCH)
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": str(ROOT)}
    output = tmp_path / "ray.txt"
    argv = [sys.executable, "-m", "kueri", *command[:-1], "--output", str(output), "--ray", cluster, "--ray-batch",
            str(ROW16_BATCH)]
    journal = Path(command[command.index("--workdir") + 1])
    driver = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while driver.poll() is None and time.monotonic() < deadline and len(list(journal.glob("ray-run-*/batch-*"))) < 3:
        time.sleep(0.05)
    driver.send_signal(signal.SIGTERM)
    _, err = driver.communicate(timeout=120)
    assert driver.returncode not in (0, None), err
    assert "stopped by SIGTERM" in err and not output.exists()
    kept = len(list(journal.glob("ray-run-*/batch-*")))
    assert 3 <= kept < batches

    driver = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = kill_a_worker_of("run_batch", driver, 0.02)
    _, err = driver.communicate(timeout=600)
    assert killed is not None, "no batch task was ever seen running"
    assert driver.returncode == 0, err
    assert f"{kept} of {batches} batches finished before" in err, err[-2000:]
    assert output.read_bytes() == local.read_bytes()
    assert not list(journal.glob("ray-run-*"))


@pytest.fixture(scope="module")
def row07_run(few_topics, local_default) -> Path:
    """Row 07's run of the topics (made here): candidates to re-rank, and the run my-software.sh must write."""
    path = local_default[0].parent / "row-07.txt"
    made = kueri("run", "--config", "row-07", "--corpus", str(SAMPLE_CORPUS), "--topics", str(few_topics), "--output",
                 str(path), "--workdir", str(local_default[1]), "-q")
    assert made.returncode == 0, made.stderr
    return path


def test_stance_on_ray_labels_as_the_local_command(cluster, few_topics, row07_run, tmp_path):
    common = ["stance", str(row07_run), "--corpus", str(SAMPLE_CORPUS), "--topics", str(few_topics), "--depth", "20",
              "-q"]
    # the default model, stance-v4 (its passage model and the sentence encoder it asks for votes opened in the Ray
    # task: their sessions never travel), the stance encoder's votes (stance-v2) and the TF-IDF model alone
    # (stance-v1): locally and on Ray, all at once
    models = {"stance-v4": common, **{model: [*common[:-3], "--depth", "5", "--model", model, "-q"]
                                      for model in ("stance-v2", "stance-v1")}}
    commands = [[*args, "--output", str(tmp_path / f"{where}-{model}.txt"), *extra] for model, args in models.items()
                for where, extra in (("local", []), ("ray", ["--ray", cluster]))]
    for done in kueri_at_once(*commands):
        assert done.returncode == 0, done.stderr
    for model in models:
        assert (tmp_path / f"ray-{model}.txt").read_text() == (tmp_path / f"local-{model}.txt").read_text(), model
    labelled = (tmp_path / "ray-stance-v4.txt").read_text()
    assert {"FIRST", "SECOND", "NO"} <= {line.split()[1] for line in labelled.splitlines()}


def test_a_rerank_of_given_candidates_on_ray_writes_the_local_run_file(cluster, few_topics, local_default, row07_run,
                                                                       tmp_path):
    """The default's later stages over row 07's candidates (a warm work folder: nothing to embed)."""
    common = ["rerank", str(row07_run), "--corpus", str(SAMPLE_CORPUS), "--topics", str(few_topics), "--workdir",
              str(local_default[1]), "-q"]
    local, remote = kueri_at_once([*common, "--output", str(tmp_path / "local.txt")],
                                  [*common, "--output", str(tmp_path / "ray.txt"), "--ray", cluster, "--ray-batch",
                                   "1"])
    assert local.returncode == 0 and remote.returncode == 0, local.stderr + remote.stderr
    assert (tmp_path / "ray.txt").read_bytes() == (tmp_path / "local.txt").read_bytes()
    assert (tmp_path / "ray.txt").read_text() != row07_run.read_text()  # reranked and labelled


def test_my_software_reaches_ray_through_kueri_ray(cluster, few_topics, local_default, row07_run, tmp_path):
    given = tmp_path / "in"
    given.mkdir()
    (given / "topics.xml").write_bytes(few_topics.read_bytes())
    (given / "passages.jsonl.gz").symlink_to(SAMPLE_CORPUS)
    env = {**os.environ, **RAY_ENV, "KUERI_RAY": cluster, "KUERI_PYTHON": sys.executable}
    result = subprocess.run([str(ROOT / "my-software.sh"), "-i", str(given), "-o", str(tmp_path / "out"), "-c",
                             "row-07", "-w", str(local_default[1])], env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert "Ray run: 2 topics in 1 tasks" in result.stderr, result.stderr[-2000:]
    assert (tmp_path / "out" / "run.txt").read_bytes() == row07_run.read_bytes()


def test_the_index_travels_to_nodes_that_do_not_see_the_work_folder(cluster, few_topics, local_default, row07_run,
                                                                    tmp_path):
    """--ray-copy-index: each node unpacks the index once into its temp folder and searches that copy."""
    copies = Path(tempfile.gettempdir()) / "kueri-ray-indexes"
    before = set(copies.iterdir()) if copies.is_dir() else set()
    remote = kueri("run", "--config", "row-07", "--corpus", str(SAMPLE_CORPUS), "--topics", str(few_topics),
                   "--output", str(tmp_path / "ray.txt"), "--workdir", str(local_default[1]), "--ray", cluster,
                   "--ray-batch", "1", "--ray-copy-index", "-q")
    try:
        assert remote.returncode == 0, remote.stderr
        assert (tmp_path / "ray.txt").read_bytes() == row07_run.read_bytes()
        copied = [path.name.rsplit("-", 1)[0] for path in set(copies.iterdir()) - before if path.is_dir()]
        assert len(copied) == 1 and (local_default[1] / copied[0]).is_dir(), copied  # one copy, for both workers
    finally:
        for path in set(copies.iterdir()) - before if copies.is_dir() else ():
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


#: Passages of the dense runs' corpus (the sample's first ones): every one embedded by e5 in seconds.
DENSE_PASSAGES = 60


def test_a_hybrid_run_on_ray_writes_the_local_run_file(cluster, few_topics, tmp_path):
    """hybrid-e5 (dense e5 and row 15 fused): the driver embeds the corpus into its one store and writes the vector
    index (the Ray run comes first, from a cold work folder), the tasks search it; the local run then reuses both."""
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as sample:
        (tmp_path / "passages.jsonl").write_text("".join(next(sample) for _ in range(DENSE_PASSAGES)),
                                                 encoding="utf-8")
    work = tmp_path / "work"
    common = ["run", "--config", "hybrid-e5", "--corpus", str(tmp_path / "passages.jsonl"), "--topics",
              str(few_topics), "--workdir", str(work), "-q"]
    remote = kueri(*common, "--output", str(tmp_path / "ray.txt"), "--ray", cluster, "--ray-batch", "1")
    local = kueri(*common, "--output", str(tmp_path / "local.txt"))
    assert remote.returncode == 0 and local.returncode == 0, remote.stderr + local.stderr
    assert (tmp_path / "ray.txt").read_bytes() == (tmp_path / "local.txt").read_bytes()
    assert len({line.split()[0] for line in (tmp_path / "ray.txt").read_text().splitlines()}) == len(RUN_TOPICS)
    assert list(stored_passages(work).values()) == [DENSE_PASSAGES]  # e5's one store, each passage once
