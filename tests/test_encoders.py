"""The encoders package: its registry, and the store of passage embeddings shared by kueri embed, the second stage,
dense retrieval and kueri serve (appends only; killed writers and concurrent writers leave it correct)."""

from __future__ import annotations

import ast
import asyncio
import hashlib
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from kueri.encoders import ENCODERS, EmbeddingStore, StoredEncoder, get, names, store_path, text_digest
from kueri.errors import SetupError
from kueri.runcontext import RunContext
from tests.conftest import ROOT


class CountingEncoder:
    """A hand-made TextEncoder: (length, number of a's, 1) per text, remembering what it was asked."""

    dimension = 3

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def passages(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32).reshape(-1, 3)

    def queries(self, texts: list[str]) -> np.ndarray:
        return -self.passages(texts)


def stored(path: Path, encoder: CountingEncoder | None = None) -> tuple[StoredEncoder, CountingEncoder]:
    encoder = encoder or CountingEncoder()
    return StoredEncoder(encoder, EmbeddingStore(path, 3)), encoder


# -- the registry ------------------------------------------------------------------------------------------------


def test_a_cross_encoders_few_texts_keep_every_worker_busy():
    """A question's top 10 in both orders (20 texts) on 2 workers: 4 batches of 5, not 8, 8 and a last 4 alone; as
    few rounds of batches as batches of at most BATCH give."""
    from kueri.encoders.cross import BATCH, even_batch

    assert even_batch(20, 2) == 5 and even_batch(1000, 2) == BATCH and even_batch(1, 2) == 1
    for texts in range(1, 300):
        for workers in (1, 2, 3, 4):
            size = even_batch(texts, workers)
            batches = -(-texts // size)
            assert 1 <= size <= BATCH
            assert -(-batches // workers) == -(-texts // (BATCH * workers)), (texts, workers)


def test_each_encoder_is_one_registry_entry():
    assert names() == ("e5", "minilm")
    for name, entry in ENCODERS.items():
        assert entry.name == name and entry.dimension == 384 and len(entry.model_sha256) == 64
        assert entry.store_key.startswith(("e5-small-int8-blocks", "minilm-")) and "fp32-ones" in entry.store_key
        available, why = entry.is_available()
        assert available == (why == "") and (available or "pip install" in why)
        assert store_path("/w", entry.store_key) == Path("/w") / f"embeddings-{entry.store_key}"
    with pytest.raises(SetupError, match="unknown encoder 'bert': use e5 or minilm"):
        get("bert")


def test_the_installed_model_files_are_the_registered_ones():
    for entry in ENCODERS.values():
        if not entry.is_available()[0]:
            continue
        path = entry.model_file()
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry.model_sha256
        assert entry.key()["model_sha256"] == entry.model_sha256 and entry.key()["cache_name"] == entry.store_key


def test_no_encoder_name_is_matched_as_a_string_outside_the_encoders_package():
    """The registry answers; no ``name == "e5"`` or ``name in ("e5", ...)`` elsewhere in kueri."""
    found = []
    for path in (ROOT / "kueri").rglob("*.py"):
        if "encoders" in path.relative_to(ROOT / "kueri").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            operands: list[ast.AST] = []
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
            elif isinstance(node, ast.match_case):
                operands = [node.pattern]
            constants = [c.value for operand in operands for c in ast.walk(operand) if isinstance(c, ast.Constant)]
            constants += [c.value for operand in operands for c in ast.walk(operand) if isinstance(c, ast.MatchValue)
                          for c in [c.value] if isinstance(c, ast.Constant)]
            found += [f"{path.relative_to(ROOT)}:{node.lineno}" for value in constants if value in ENCODERS]
    assert found == []


# -- the store ---------------------------------------------------------------------------------------------------


def test_the_store_embeds_each_text_once_and_survives_a_restart(tmp_path):
    path = tmp_path / "work" / "embeddings-test"
    encoder, counting = stored(path)
    first = encoder.passages(["laptop", "desktop", "laptop"])
    assert counting.calls == [["laptop", "desktop"]] and first.tolist() == [[6, 1, 1], [7, 0, 1], [6, 1, 1]]
    assert encoder.passages(["desktop"]).tolist() == [[7, 0, 1]] and len(counting.calls) == 1  # nothing new
    assert encoder.passages([]).shape == (0, 3)
    assert encoder.queries(["laptop"]).tolist() == [[-6, -1, -1]]  # queries are the encoder's, not kept
    restarted, again = stored(path)  # a new process reads the chunks
    assert restarted.passages(["desktop", "tablet"]).tolist() == [[7, 0, 1], [6, 1, 1]]
    assert again.calls == [["tablet"]] and restarted.embedded == 1
    assert sorted(p.name for p in path.iterdir()) == ["chunk-00000000.emb", "chunk-00000001.emb"]  # appended


def test_a_text_whose_digest_ends_in_a_zero_byte_is_found_again(tmp_path):
    text = "passage 739"
    assert text_digest(text).endswith(b"\0")
    stored(tmp_path / "s")[0].passages([text])
    encoder, counting = stored(tmp_path / "s")
    assert encoder.passages([text]).tolist() == [[11, 2, 1]] and counting.calls == []


def test_a_former_npz_cache_is_read_once_and_removed(tmp_path, caplog):
    path = tmp_path / "embeddings-test"
    digests = np.array([text_digest("cats"), text_digest("passage 739")], dtype="S20")  # NUL-ended one dropped by S20
    np.savez(path.with_name("embeddings-test.npz"), digests=digests,
             vectors=np.array([[4, 1, 1], [11, 2, 1]], dtype=np.float32))
    with caplog.at_level(logging.WARNING):
        encoder, counting = stored(path)
    assert [r.getMessage() for r in caplog.records] == [
        "work folder: embeddings-test.npz read into the store embeddings-test (2 passages) and removed"]
    assert not path.with_name("embeddings-test.npz").exists()
    assert encoder.passages(["cats", "passage 739"]).tolist() == [[4, 1, 1], [11, 2, 1]] and counting.calls == []


@pytest.mark.parametrize("damage", ["truncated", "garbage", "wrong shape"])
def test_a_damaged_npz_cache_or_chunk_is_one_warning_line_never_an_error(tmp_path, caplog, damage):
    path = tmp_path / "embeddings-test"
    legacy = path.with_name("embeddings-test.npz")
    np.savez(legacy, digests=np.array([text_digest("cats")], dtype="S20"), vectors=np.ones((1, 3), np.float32))
    data = legacy.read_bytes()
    if damage == "truncated":
        legacy.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        legacy.write_bytes(b"not a zip file at all")
    else:
        np.savez(legacy, digests=np.zeros(2, dtype="S20"), vectors=np.zeros((2, 5), dtype=np.float32))
    with caplog.at_level(logging.WARNING):
        encoder, counting = stored(path)
    assert len(caplog.records) == 1 and "is broken, removed" in caplog.text and not legacy.exists()
    assert encoder.passages(["cats", "dogs"]).tolist() == [[4, 1, 1], [4, 0, 1]]
    assert counting.calls == [["cats", "dogs"]]
    chunk = next(path.iterdir())
    chunk.write_bytes(chunk.read_bytes()[:-3])  # a damaged chunk (not written by kueri: renamed only when whole)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        encoder, counting = stored(path)
    assert len(caplog.records) == 1 and "is damaged, its passages are embedded again" in caplog.text
    assert encoder.passages(["cats"]).tolist() == [[4, 1, 1]] and counting.calls == [["cats"]]
    assert not chunk.exists() and len(list(path.iterdir())) == 1  # replaced by the chunk that embedded it again


WRITER = textwrap.dedent("""
    import sys, time
    import numpy as np
    from kueri.encoders import store, stored

    class Slow:
        dimension = 3
        def __init__(self):
            self.count = 0
        def passages(self, texts):
            time.sleep(0.002 * len(texts))
            self.count += len(texts)
            return np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32).reshape(-1, 3)

    stored.CHUNK_PASSAGES = 25
    slow = Slow()
    encoder = stored.StoredEncoder(slow, store.EmbeddingStore(sys.argv[1], 3))
    encoder.passages([f"passage {i} " + "a" * (i % 7) for i in range(int(sys.argv[2]))])
    print(slow.count)
""")


def writer(path: Path, count: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(count)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def expected(count: int) -> list[list[float]]:
    return [[len(t), t.count("a"), 1.0] for t in (f"passage {i} " + "a" * (i % 7) for i in range(count))]


def test_a_writer_killed_during_an_append_loses_at_most_its_open_chunk(tmp_path):
    path = tmp_path / "embeddings-test"
    process = writer(path, 400)
    deadline = time.monotonic() + 60
    while len(list(path.glob("chunk-*.emb"))) < 3 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)  # no chance to clean up
    process.wait()
    kept = len(list(path.glob("chunk-*.emb")))
    assert 3 <= kept < 16, "killed too late to test"
    store = EmbeddingStore(path, 3)
    assert len(store) == 25 * kept  # whole chunks only, each one complete
    again = writer(path, 400)  # the next writer embeds only the rest
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert int(out) == 400 - 25 * kept and err == ""  # no damaged chunk to warn about
    texts = [f"passage {i} " + "a" * (i % 7) for i in range(400)]
    assert EmbeddingStore(path, 3).vectors([text_digest(t) for t in texts]).tolist() == expected(400)


def test_two_writers_on_one_store_embed_each_passage_once(tmp_path):
    path = tmp_path / "embeddings-test"
    processes = [writer(path, 300), writer(path, 300)]
    results = [process.communicate(timeout=120) for process in processes]
    assert [p.returncode for p in processes] == [0, 0], results
    assert sum(int(out) for out, _ in results) == 300  # one embedded while the other waited, then read its chunks
    store = EmbeddingStore(path, 3)
    texts = [f"passage {i} " + "a" * (i % 7) for i in range(300)]
    assert len(store) == 300 and store.vectors([text_digest(t) for t in texts]).tolist() == expected(300)


# -- kueri embed ahead, then kueri serve: the answer path embeds nothing -----------------------------------------


@pytest.mark.slow
def test_after_kueri_embed_a_new_question_to_serve_embeds_no_passage(tmp_path, caplog):
    """40 passages of the sample embedded ahead by ``kueri embed --encoder all``: the server says so at start, and a
    new question (not a topic, not cached) is answered by the default configuration without embedding a passage."""
    import gzip

    from kueri.config import get_config
    from kueri.pipeline import cached_index
    from kueri.serve.engine import Engine
    from tests.conftest import SAMPLE_CORPUS, run_command

    corpus, workdir = tmp_path / "small.jsonl", tmp_path / "work"
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as handle:
        corpus.write_text("".join(line for _, line in zip(range(40), handle, strict=False)), encoding="utf-8")
    with cached_index(corpus, get_config("default").analyzer, RunContext(workdir, progress=False)) as index:
        index_dir = index.path
    embedded = run_command([sys.executable, "-m", "kueri", "-q", "embed", "--index", str(index_dir), "--encoder",
                            "all", "--store-only", "--workdir", str(workdir)], env={"PYTHONPATH": str(ROOT)})
    assert embedded.returncode == 0, embedded.stderr
    for entry in ENCODERS.values():
        assert len(entry.store(workdir)) == 40
    engine = Engine(corpus=corpus, workdir=workdir)
    try:
        with caplog.at_level(logging.INFO):
            engine.start(preembed=False)
        for name in ENCODERS:
            assert f"serve: 40 of the corpus' 40 passages are embedded by {name} (100 %)" in caplog.text
        stored = engine._stores
        assert sorted(stored) == sorted(ENCODERS)
        answer = asyncio.run(engine.answer("Is internet dating better than traditional dating?",
                                           ("internet dating", "traditional dating")))
        assert answer.passages and answer.hits > 10  # the second stage reranked its candidates
        assert {name: encoder.embedded for name, encoder in stored.items()} == dict.fromkeys(ENCODERS, 0)
    finally:
        engine.close()


# -- compaction: a bounded number of chunk files, the same bytes, safe against readers, writers and kills -------

DIMENSION = 8


def vector_of(i: int) -> np.ndarray:
    """Passage i's vector: random-looking bits, the same in every process."""
    return np.random.default_rng(i).standard_normal(DIMENSION).astype(np.float32)


def digest_of(i: int) -> bytes:
    return text_digest(f"passage {i}")


def append_passages(store: EmbeddingStore, numbers: list[int]) -> None:
    with store.lock():
        store.refresh()
        store.append([digest_of(i) for i in numbers], np.array([vector_of(i) for i in numbers]))


def chunk_files(path: Path) -> list[Path]:
    return sorted(path.glob("chunk-*.emb"))


def assert_every_vector(path: Path, count: int) -> EmbeddingStore:
    store = EmbeddingStore(path, DIMENSION)
    assert len(store) == count
    wanted = [digest_of(i) for i in range(count)]
    assert store.vectors(wanted).tobytes() == np.array([vector_of(i) for i in range(count)]).tobytes()
    return store


def test_compaction_bounds_the_chunk_files_and_keeps_every_vector_byte_for_byte(tmp_path, monkeypatch):
    from kueri.encoders import store as module

    monkeypatch.setattr(module, "COMPACT_PASSAGES", 40)  # small, so that merged chunks fill up here
    path = tmp_path / "embeddings-test"
    store = EmbeddingStore(path, DIMENSION)
    added = 0
    for step in range(300):  # a question or two's new passages at a time, as kueri serve appends them
        size = 1 + step % 3
        append_passages(store, list(range(added, added + size)))
        added += size
        assert len(chunk_files(path)) <= module.SMALL_CHUNKS + added // 40, step
        assert store.chunk_files() == len(chunk_files(path)) and len(store) == added
    assert store.vectors([digest_of(i) for i in range(added)]).tobytes() == \
        np.array([vector_of(i) for i in range(added)]).tobytes()
    assert_every_vector(path, added)  # a fresh process reads the same
    assert not list(path.glob(".*.tmp"))


def test_a_store_of_many_small_chunks_is_compacted_when_opened_and_by_kueri_cache_compact(tmp_path, monkeypatch):
    from kueri.encoders import store as module

    path = tmp_path / "embeddings-test"
    monkeypatch.setattr(module, "SMALL_CHUNKS", 1000)  # as an older kueri left it: one chunk per append
    store = EmbeddingStore(path, DIMENSION)
    for i in range(60):
        append_passages(store, [i])
    assert len(chunk_files(path)) == 60
    monkeypatch.undo()
    assert assert_every_vector(path, 60).chunk_files() == 1  # opening it merged them
    assert len(chunk_files(path)) == 1
    for i in range(60, 63):
        append_passages(EmbeddingStore(path, DIMENSION), [i])
    assert len(chunk_files(path)) == 4  # under the threshold: left alone until kueri cache compact
    result = subprocess.run([sys.executable, "-m", "kueri", "cache", "compact", "--workdir", str(tmp_path)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "embeddings-test: 4 chunk files -> 1 (63 passages)" in result.stdout
    assert len(chunk_files(path)) == 1
    assert_every_vector(path, 63)


COMPACT_KILLED = textwrap.dedent("""
    import os, signal, sys
    from kueri.encoders import store

    store.COMPACT_PASSAGES = 256
    steps = [0]
    kill_at = int(sys.argv[2])

    def killing(real):
        def step(*args, **kwargs):
            if steps[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)  # no chance to clean up
            steps[0] += 1
            return real(*args, **kwargs)
        return step

    os.replace, os.unlink = killing(os.replace), killing(os.unlink)  # each rename of a merged chunk, each removal
    store.EmbeddingStore(sys.argv[1], 8)  # 20 small chunks: opening it compacts them
    print(steps[0])
""")


@pytest.mark.parametrize("kill_at", [0, 1, 2, 3, 4, 11, 22, 99])
def test_a_compaction_killed_at_any_step_loses_nothing_and_the_next_one_finishes_it(tmp_path, monkeypatch, kill_at):
    """20 chunks of 30 passages merged into 256, 256 and 88 (3 renames, then 20 removals): killed before each of
    the first renames, between them, among the removals; or not at all (99)."""
    from kueri.encoders import store as module

    path = tmp_path / "embeddings-test"
    monkeypatch.setattr(module, "SMALL_CHUNKS", 1000)
    store = EmbeddingStore(path, DIMENSION)
    for start in range(0, 600, 30):
        append_passages(store, list(range(start, start + 30)))
    monkeypatch.undo()
    result = subprocess.run([sys.executable, "-c", COMPACT_KILLED, str(path), str(kill_at)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert result.returncode == (0 if kill_at == 99 else -signal.SIGKILL), result.stderr
    assert "Traceback" not in result.stderr
    if kill_at == 99:
        assert int(result.stdout) == 23 and len(chunk_files(path)) == 3
    assert len(list(path.glob(".chunk-*.tmp"))) == (kill_at < 3)  # a merged chunk killed before its rename
    monkeypatch.setattr(module, "COMPACT_PASSAGES", 256)
    store = assert_every_vector(path, 600)  # every passage, its own bytes, whatever the kill left
    with store.lock():
        store.refresh()
        store.compact(everything=True)
    assert len(chunk_files(path)) <= 3  # 256, 256 and 88 again (a kill after the renames leaves bigger copies)
    assert not list(path.glob(".chunk-*.tmp"))  # the next compaction removes what the killed one left
    assert_every_vector(path, 600)


CONCURRENT_WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from kueri.encoders import store
    from kueri.encoders.store import text_digest

    store.COMPACT_PASSAGES, store.SMALL_CHUNKS = 20, 4  # compact often
    first, count = int(sys.argv[2]), int(sys.argv[3])
    for i in range(first, first + count):  # one passage per append, each under the lock
        opened = store.EmbeddingStore(sys.argv[1], 8) if i % 25 == 0 else opened
        with opened.lock():
            opened.refresh()
            opened.append([text_digest(f"passage {i}")], np.random.default_rng(i).standard_normal((1, 8)).astype(
                np.float32))
""")


def test_readers_and_writers_stay_right_while_other_processes_compact(tmp_path):
    """Two processes append one passage at a time and compact every few appends; this one reads all the while."""
    path = tmp_path / "embeddings-test"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [subprocess.Popen([sys.executable, "-c", CONCURRENT_WRITER, str(path), str(first), "150"], cwd=ROOT,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for first in (0, 150)]
    reader = EmbeddingStore(path, DIMENSION)
    reads = 0
    while any(writer.poll() is None for writer in writers):
        reader.refresh()
        known = [i for i in range(300) if digest_of(i) in reader]
        got = reader.vectors([digest_of(i) for i in known])  # some chunks may be merged away meanwhile
        assert got.tobytes() == np.array([vector_of(i) for i in known], dtype=np.float32).reshape(-1, 8).tobytes()
        reads += bool(known)
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0 and "Traceback" not in err, err
    assert reads > 5, "the writers finished before the reader read"
    assert_every_vector(path, 300)
    assert len(chunk_files(path)) <= 4 + 1 + 300 // 20
