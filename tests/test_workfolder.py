"""The work folder is a cache, never the reason a run fails: concurrency, corruption, full disks, paths, signals.

Real Lucene indexes and real files; other kueri processes are real processes. Faults are injected one at a
time into a small real input (400 passages of the sample and the official topics).
"""

from __future__ import annotations

import contextlib
import gzip
import itertools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kueri.config import get_config
from kueri.errors import EnvironmentProblem
from kueri.files import file_lock, writable_file, writable_folder
from kueri.lucene import MANIFEST, AnalyzerConfig
from kueri.parse import PassageReader, read_topics
from kueri.pipeline import cached_index, index_key, search_run
from kueri.runcontext import RunContext
from tests.conftest import ROOT, SAMPLE_CORPUS, SAMPLE_TOPICS

ROW7 = AnalyzerConfig("kueristopv2")


@pytest.fixture(scope="module")
def small_input(tmp_path_factory) -> Path:
    """A TIRA input folder: the official topics and the first 400 passages of the sample."""
    folder = tmp_path_factory.mktemp("in")
    shutil.copy(SAMPLE_TOPICS, folder / "topics.xml")
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as source, \
            open(folder / "passages.jsonl", "w", encoding="utf-8") as target:
        target.writelines(itertools.islice(source, 400))
    return folder


def kueri(*args: str, cwd: Path = ROOT, env_extra: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT), **(env_extra or {})}
    return subprocess.Popen([sys.executable, "-m", "kueri", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def finish(process: subprocess.Popen, timeout: float = 120) -> tuple[int, str]:
    _, err = process.communicate(timeout=timeout)
    return process.returncode, err


def tira(small_input: Path, out: Path, workdir: Path, *extra: str) -> tuple[int, str]:
    return finish(kueri("tira", "-i", str(small_input), "-o", str(out), "--workdir", str(workdir), "--config",
                        "row-07", *extra))


def leftovers(folder: Path) -> list[str]:
    """What a crash must not leave: unfinished builds and temporary files."""
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith((".partial", ".tmp")))


@pytest.fixture(scope="module")
def reference_run(small_input, tmp_path_factory) -> str:
    """row-07 on the small input in a work folder of its own, nothing faulted."""
    out = tmp_path_factory.mktemp("reference")
    code, err = tira(small_input, out, tmp_path_factory.mktemp("work"))
    assert code == 0, err
    return (out / "run.txt").read_text()


# -- concurrency ------------------------------------------------------------------------------------------


def test_a_process_waits_for_another_building_the_same_entry(small_input, reference_run, tmp_path):
    workdir = tmp_path / "work"
    key = index_key(small_input / "passages.jsonl", ROW7)
    lock = workdir / f"index-{key}.lock"
    with file_lock(lock, "a test's pretend build"):
        process = kueri("tira", "-i", str(small_input), "-o", str(tmp_path / "out"), "--workdir", str(workdir),
                        "--config", "row-07")
        deadline = time.monotonic() + 60
        seen = ""
        while "waiting for another kueri process" not in seen and time.monotonic() < deadline:
            seen += process.stderr.readline()
        assert "waiting for another kueri process building the index of" in seen, seen
        assert process.poll() is None  # it waits while the lock is held
    code, err = finish(process)
    assert code == 0, seen + err
    assert (tmp_path / "out" / "run.txt").read_text() == reference_run


def test_two_runs_racing_on_one_fresh_work_folder_both_succeed(small_input, reference_run, tmp_path):
    workdir = tmp_path / "work"
    processes = [kueri("tira", "-i", str(small_input), "-o", str(tmp_path / f"out{i}"), "--workdir", str(workdir),
                       "--config", "row-07") for i in range(2)]
    results = [finish(p) for p in processes]
    assert [code for code, _ in results] == [0, 0], results
    assert (tmp_path / "out0" / "run.txt").read_text() == (tmp_path / "out1" / "run.txt").read_text() == reference_run
    assert len(list(workdir.glob(f"index-*/{MANIFEST}"))) == 1  # built once
    assert leftovers(workdir) == []


# -- self-healing caches ------------------------------------------------------------------------------------


def damage_zero_segment(index: Path) -> None:
    biggest = max((f for f in index.iterdir() if f.suffix in (".doc", ".tim", ".fdt")), key=lambda f: f.stat().st_size)
    biggest.write_bytes(b"\0" * biggest.stat().st_size)


def damage_truncate_segment(index: Path) -> None:
    biggest = max((f for f in index.iterdir() if f.suffix in (".doc", ".tim", ".fdt")), key=lambda f: f.stat().st_size)
    biggest.write_bytes(biggest.read_bytes()[: biggest.stat().st_size // 2])


def damage_delete_segment_file(index: Path) -> None:
    next(f for f in index.iterdir() if f.suffix == ".si").unlink()


def damage_manifest(index: Path) -> None:
    (index / MANIFEST).write_text('{"analyzer_config": {"stopl', encoding="utf-8")


def damage_ids(index: Path) -> None:
    ids = index / "ids.txt"
    ids.write_text("".join(ids.read_text().splitlines(keepends=True)[:10]), encoding="utf-8")


def cache_row7(small_input: Path, workdir: Path, caplog):
    """Row 7's index cached in ``workdir`` and its run (what a damaged cache must give again)."""
    caplog.set_level(logging.INFO, logger="kueri")
    corpus, topics = small_input / "passages.jsonl", read_topics(small_input / "topics.xml")
    config = get_config("row-07")
    with cached_index(corpus, ROW7, RunContext(workdir, progress=False)) as index:
        return corpus, topics, config, index.path, search_run(index, config, topics)


@pytest.mark.parametrize("damage", [damage_zero_segment, damage_truncate_segment, damage_delete_segment_file,
                                    damage_manifest, damage_ids])
def test_a_broken_cached_index_is_reported_and_rebuilt(small_input, tmp_path, caplog, damage):
    corpus, topics, config, path, before = cache_row7(small_input, tmp_path, caplog)
    damage(path)
    caplog.clear()
    with cached_index(corpus, ROW7, RunContext(tmp_path, progress=False)) as index:
        assert search_run(index, config, topics) == before
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"{path} is broken, rebuilding it" in warnings[0]
    assert "reusing index" not in caplog.text
    with cached_index(corpus, ROW7, RunContext(tmp_path, progress=False)) as index:  # and the rebuilt one is reused
        assert index.path == path
    assert "reusing index" in caplog.text


def rewrite_manifest(index: Path, **changes) -> None:
    manifest = json.loads((index / MANIFEST).read_text())
    for key, value in changes.items():
        if value is None:
            manifest.pop(key, None)
        else:
            manifest[key] = value
    (index / MANIFEST).write_text(json.dumps(manifest))


def test_a_cached_index_of_another_lucene_is_rebuilt(small_input, tmp_path, caplog):
    corpus, topics, config, path, before = cache_row7(small_input, tmp_path, caplog)
    rewrite_manifest(path, lucene_version="8.11.2")  # as another kueri on Lucene 8 would have left it
    caplog.clear()
    with cached_index(corpus, ROW7, RunContext(tmp_path, progress=False)) as index:
        assert search_run(index, config, topics) == before
        assert index.manifest["lucene_version"] == "9.9.1"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"work folder: {path} cannot be used here, rebuilding it ({path}: written by Lucene 8.11.2, "
                        "and this kueri runs Lucene 9.9.1: rebuild it with this kueri (kueri index))"]


def test_a_cached_index_with_an_old_manifest_is_reused(small_input, tmp_path, caplog):
    """Manifests from before the Lucene version and the analysis were recorded: the entry is still good."""
    caplog.set_level(logging.INFO, logger="kueri")
    corpus = small_input / "passages.jsonl"
    with cached_index(corpus, ROW7, RunContext(tmp_path, progress=False)) as index:
        path = index.path
    rewrite_manifest(path, lucene_version=None, analysis=None)
    caplog.clear()
    with cached_index(corpus, ROW7, RunContext(tmp_path, progress=False)) as index:
        assert "lucene_version" not in index.manifest
    assert f"reusing index {path}" in caplog.text and "rebuilding" not in caplog.text


# -- environment errors -------------------------------------------------------------------------------------


def test_an_output_path_that_is_a_file_fails_before_any_work(small_input, tmp_path):
    out = tmp_path / "out"
    out.write_text("a file where the output folder should be\n")
    code, err = tira(small_input, out, tmp_path / "work")
    assert code == 3, err
    assert err.strip().splitlines() == [f"kueri: error: {out}: the output folder is a file, not a folder"]
    assert not (tmp_path / "work").exists()  # nothing was done


def test_run_output_problems_are_one_line(small_input, tmp_path):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    code, err = finish(kueri("run", "--corpus", str(small_input / "passages.jsonl"), "--topics",
                             str(small_input / "topics.xml"), "--output", str(folder), "--config", "row-07",
                             "--workdir", str(tmp_path / "w")))
    assert code == 3 and err.strip() == f"kueri: error: {folder}: the output file is a folder, not a file"
    blocked = tmp_path / "file"
    blocked.write_text("x")
    with pytest.raises(EnvironmentProblem, match="is a file, not a folder"):
        writable_file(blocked / "run.txt", "output file")
    with pytest.raises(EnvironmentProblem, match="work folder is a file"):
        writable_folder(blocked, "work folder")


@contextlib.contextmanager
def tmpfs(path: Path, size: str, *options: str):
    """A small tmpfs at ``path`` (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options]), "tmpfs",
                              str(path)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_a_full_disk_under_the_work_folder_is_one_line_and_leaves_nothing(small_input, reference_run, tmp_path):
    with tmpfs(tmp_path / "full", "256k") as workdir:
        code, err = tira(small_input, tmp_path / "out", workdir)
        assert code == 3, err
        assert "No space left on device" in err and "Traceback" not in err
        assert err.strip().splitlines()[-1].startswith(f"kueri: error: {workdir}/index-")  # names the entry
        assert not (tmp_path / "out" / "run.txt").exists()
        assert list(workdir.glob(f"index-*/{MANIFEST}")) == [] and leftovers(workdir) == []
    # the same run with room: it works
    code, err = tira(small_input, tmp_path / "out", tmp_path / "roomy")
    assert code == 0 and (tmp_path / "out" / "run.txt").read_text() == reference_run


def test_a_full_disk_under_the_output_keeps_no_run(small_input, tmp_path):
    with tmpfs(tmp_path / "full-out", "64k") as out:
        (out / "filler").write_bytes(b"x" * 60_000)
        with contextlib.suppress(OSError):
            (out / "filler2").write_bytes(b"x" * 8192)
        code, err = tira(small_input, out, tmp_path / "work")
        assert code == 3 and "Traceback" not in err, err
        assert err.strip().splitlines()[-1] == f"kueri: error: {out / 'run.txt'}: No space left on device"
        assert not (out / "run.txt").exists() and leftovers(out) == []


def test_read_only_output_and_work_folders_fail_before_any_work(small_input, tmp_path):
    with tmpfs(tmp_path / "ro", "1m", "ro") as read_only:
        code, err = tira(small_input, read_only / "out", tmp_path / "work")
        assert code == 3 and "cannot create the output folder" in err and "Read-only file system" in err, err
        code, err = tira(small_input, tmp_path / "out", read_only)
        assert code == 3 and f"{read_only}: the work folder is not writable" in err, err
        assert not (tmp_path / "out" / "run.txt").exists()


# -- signals ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_input(tmp_path_factory) -> Path:
    """A TIRA input whose indexing takes a few seconds on 2 cores: the sample's passages under new ids."""
    folder = tmp_path_factory.mktemp("big")
    shutil.copy(SAMPLE_TOPICS, folder / "topics.xml")
    passages = list(PassageReader(SAMPLE_CORPUS))
    with open(folder / "passages.jsonl", "w", encoding="utf-8") as out:
        for copy in range(22):  # 57,354 passages: two chunks, so two Java threads index them (one writer without)
            for p in passages:
                out.write(json.dumps({"id": f"{p.id}-{copy}", "contents": p.contents}) + "\n")
    return folder


@pytest.mark.slow
@pytest.mark.parametrize(("signal_number", "exit_code", "helper"),
                         [(signal.SIGTERM, 143, "1"), (signal.SIGINT, 130, "1"), (signal.SIGTERM, 143, "0")],
                         ids=["sigterm-java-threads", "sigint-java-threads", "sigterm-one-writer"])
def test_a_signal_mid_run_stops_promptly_and_leaves_nothing(big_input, tmp_path, signal_number, exit_code, helper):
    workdir = tmp_path / "work"
    out = tmp_path / "out"
    # ^C as in a terminal: started in the background (a CI job, nohup), this process may have inherited
    # SIGINT ignored, and the child would too; a handler here leaves the child SIGINT's default instead.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = kueri("tira", "-i", str(big_input), "-o", str(out), "--workdir", str(workdir), "--config",
                        "row-07", env_extra={"KUERI_JAVA_HELPER": helper})
    finally:
        signal.signal(signal.SIGINT, previous)
    seen = ""
    deadline = time.monotonic() + 60
    while "indexing:" not in seen and time.monotonic() < deadline and process.poll() is None:
        seen += process.stderr.readline()
    assert "indexing:" in seen, seen
    time.sleep(1.0)  # Lucene is indexing
    process.send_signal(signal_number)
    started = time.monotonic()
    code, err = finish(process, timeout=30)
    assert code == exit_code, seen + err
    assert time.monotonic() - started < 10
    assert "Traceback" not in err and "nothing half-written was kept" in err
    assert not (out / "run.txt").exists()
    assert list(workdir.glob(f"index-*/{MANIFEST}")) == [] and leftovers(workdir) == []
    # the next run on the same work folder works
    code, err = tira(big_input, out, workdir)
    assert code == 0, err
    assert len((out / "run.txt").read_text().splitlines()) > 1000


# -- kueri cache --------------------------------------------------------------------------------------------


def test_cache_lists_verifies_and_prunes(small_input, tmp_path):
    workdir = tmp_path / "work"
    code, err = tira(small_input, tmp_path / "out", workdir)
    assert code == 0, err
    (workdir / "index-0000.partial").mkdir()  # a killed build's
    (workdir / ".embeddings-x.npz.abc.tmp").write_bytes(b"half")
    for leftover in ("index-0000.partial", ".embeddings-x.npz.abc.tmp"):
        os.utime(workdir / leftover, (time.time() - 3600, time.time() - 3600))
    process = kueri("cache", "--workdir", str(workdir))
    listing, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert "index " in listing and "stoplist kueristopv2, no stemmer" in listing and "unfinished" in listing
    index = next(p for p in workdir.glob("index-*") if p.is_dir() and not p.name.endswith(".partial"))
    damage_zero_segment(index)
    process = kueri("cache", "--workdir", str(workdir), "--verify")
    listing, err = process.communicate(timeout=60)
    assert process.returncode == 1 and "BROKEN" in listing and "1 broken entry" in err
    process = kueri("cache", "--workdir", str(workdir), "--prune")
    pruned, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert f"removed {index.name} (broken" in pruned and "index-0000.partial (unfinished" in pruned
    assert sorted(p.name for p in workdir.iterdir() if not p.name.endswith(".lock")) == []
