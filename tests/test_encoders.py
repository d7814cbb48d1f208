"""The encoders package: its registry, and the store of passage embeddings shared by kueri embed, the second stage,
dense retrieval and kueri serve (appends only; killed writers and concurrent writers leave it correct)."""

from __future__ import annotations

import ast
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
    from kueri.encoders import store

    class Slow:
        dimension = 3
        def __init__(self):
            self.count = 0
        def passages(self, texts):
            time.sleep(0.002 * len(texts))
            self.count += len(texts)
            return np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32).reshape(-1, 3)

    store.CHUNK_PASSAGES = 25
    slow = Slow()
    encoder = store.StoredEncoder(slow, store.EmbeddingStore(sys.argv[1], 3))
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
    with cached_index(corpus, get_config("default").analyzer, workdir, progress=False) as index:
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
        stored = engine.queue.submit(engine._stored_encoders).result()
        assert sorted(stored) == sorted(ENCODERS)
        answer = engine.queue.submit(lambda: engine.ask("Is internet dating better than traditional dating?",
                                                        ("internet dating", "traditional dating"))).result()
        assert answer.passages and answer.hits > 10  # the second stage reranked its candidates
        assert {name: encoder.embedded for name, encoder in stored.items()} == dict.fromkeys(ENCODERS, 0)
    finally:
        engine.close()
