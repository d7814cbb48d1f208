"""Dense and hybrid first stages: whole-corpus embeddings in Lucene's vector index (issue 32).

Real Lucene, real encoders, real sample passages: an embed killed mid-way (SIGKILL) resumes and gives the
encoder's own vectors bit for bit; a Ray embed (a private head on 127.0.0.1) gives the local vectors and runs;
the dense and hybrid configurations run on the sample's passages the default embeds (through the CLI's stage list
and as PyTerrier transformers); bad states and indexes fail in one line.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from kueri.config import RunConfig, get_config
from kueri.errors import KueriError
from kueri.fusion import linear_fusion
from kueri.records import Hit
from kueri.runcontext import QUIET
from tests.conftest import ROOT, SAMPLE_CORPUS, SAMPLE_TOPICS

#: Passages of the small corpus (the sample's first ones) and per chunk: several chunks, seconds of MiniLM.
SMALL, CHUNK = 96, 16
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def kueri(*args: str, timeout: float = 600, **popen: object) -> subprocess.CompletedProcess:
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "kueri", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, **popen)


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("dense-corpus") / "passages.jsonl"
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as sample:
        lines = [next(sample) for _ in range(SMALL)]
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def small_index(small_corpus, tmp_path_factory) -> Path:
    from kueri.pipeline import index_corpus

    path = tmp_path_factory.mktemp("dense-index") / "index"
    index_corpus(small_corpus, path, get_config("dense-e5").analyzer, QUIET).close()
    return path


def stored_vectors(index_dir: Path, encoder: str) -> np.ndarray:
    from kueri.dense import open_vectors
    from kueri.lucene import LuceneIndex

    with LuceneIndex(index_dir) as index, open_vectors(index, encoder) as vectors:
        return vectors.vectors()


# -- no JVM ---------------------------------------------------------------------------------------------------


def test_configurations_check_their_dense_settings():
    assert get_config("hybrid-e5").stages()[0].name == "hybrid"
    assert get_config("dense-e5").stages()[0].name == "dense"
    assert get_config("default").dense is None  # the default stays lexical (docs/dense.md)
    for bad in ({"hybrid": "rrf"}, {"dense": "bert"}, {"dense": "e5", "hybrid": "sum"},
                {"dense": "e5", "hybrid": "linear", "hybrid_weight": 1.5}):
        with pytest.raises(KueriError):
            RunConfig(name="x", **bad)


def test_linear_fusion_normalises_each_run():
    bm25 = {"1": [Hit("a", 12.0), Hit("b", 8.0), Hit("c", 4.0)]}
    dense = {"1": [Hit("c", 0.9), Hit("d", 0.7), Hit("a", 0.5)]}
    fused = linear_fusion([bm25, dense], [0.5, 0.5])["1"]
    scores = {hit.doc: hit.score for hit in fused}
    assert scores == pytest.approx({"a": 0.5, "b": 0.25, "c": 0.5, "d": 0.25})
    assert [hit.doc for hit in fused] == ["a", "c", "b", "d"]  # ties: first seen (lexical first)


# -- real Lucene, real encoders --------------------------------------------------------------------------------


@dataclass
class Resumed:
    index: Path
    kept: int  # whole chunks the killed run left
    stderr: str  # of the run that resumed


@pytest.fixture(scope="module")
def resumed(small_corpus, small_index, tmp_path_factory) -> Resumed:
    """``kueri embed`` killed (SIGKILL) after its second chunk, its last chunk file then cut short, run again."""
    from kueri.encoders import get, store_path

    folder = tmp_path_factory.mktemp("dense-resumed")
    index, workdir = folder / "index", folder / "work"
    shutil.copytree(small_index, index)
    store = store_path(workdir, get("minilm").store_key)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-m", "kueri", "-q", "embed", "--index", str(index), "--encoder",
                                "minilm", "--chunk-passages", str(CHUNK), "--workdir", str(workdir)], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while len(list(store.glob("chunk-*.emb"))) < 2 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)  # no chance to clean up
    process.wait()
    kept = sorted(store.glob("chunk-*.emb"))
    assert 2 <= len(kept) < SMALL // CHUNK, "killed too late to test a resume"
    assert not (index / "vectors-minilm").exists()  # nothing that looks complete
    kept[-1].write_bytes(kept[-1].read_bytes()[:100])  # as if the disk filled while it was written
    again = kueri("embed", "--index", str(index), "--corpus", str(small_corpus), "--encoder", "minilm",
                  "--chunk-passages", str(CHUNK), "--workdir", str(workdir))
    assert again.returncode == 0, again.stderr
    return Resumed(index, len(kept), again.stderr)


@pytest.mark.slow
def test_a_killed_embed_resumes_with_the_encoders_exact_vectors(resumed):
    index = resumed.index
    assert "is damaged" in resumed.stderr
    assert f"{(resumed.kept - 1) * CHUNK} from the embeddings store" in resumed.stderr

    from kueri.encoders import get
    from kueri.lucene import LuceneIndex

    with LuceneIndex(index) as opened:
        texts = opened.contents(range(len(opened)))
    expected = get("minilm").load().passages(texts)
    stored = stored_vectors(index, "minilm")
    assert stored.tobytes() == expected.tobytes()  # bit for bit, whichever run embedded a chunk
    manifest = json.loads((index / "vectors-minilm" / "kueri-vectors.json").read_text())
    assert manifest["encoder"]["model_sha256"] and manifest["encoder"]["kernels"] and manifest["hnsw"]["segments"] == 1
    assert json.loads((index / "kueri-index.json").read_text())["vectors"]["minilm"]["count"] == SMALL


@pytest.mark.slow
def test_dense_search_fails_clearly_without_vectors_or_with_another_encoder(resumed, tmp_path):
    index = tmp_path / "index"
    shutil.copytree(resumed.index, index)
    run = tmp_path / "run.txt"
    missing = kueri("search", "--index", str(index), "--topics", str(SAMPLE_TOPICS), "--output", str(run),
                    "--config", "dense-e5")
    assert missing.returncode == 2 and not run.exists()
    assert missing.stderr.strip().splitlines()[-1] == (f"kueri: error: {index}: no e5 vectors; make them with: "
                                                       f"kueri embed --index {index} --encoder e5")
    manifest_path = index / "vectors-minilm" / "kueri-vectors.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["encoder"]["model_sha256"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    other = kueri("search", "--index", str(index), "--topics", str(SAMPLE_TOPICS), "--output", str(run),
                  "--config", "row-15", "--dense", "minilm")
    assert other.returncode == 2 and not run.exists()
    last = other.stderr.strip().splitlines()[-1]
    assert last.startswith(f"kueri: error: {index / 'vectors-minilm'}: made by another minilm")
    assert "model_sha256" in last


@pytest.mark.slow
def test_ray_embeds_the_local_vectors_and_runs(resumed, small_index, tmp_path):
    pytest.importorskip("ray")
    from kueri.scaleout import local_cluster

    remote = tmp_path / "ray"
    shutil.copytree(small_index, remote)
    with local_cluster(2, env=RAY_ENV) as head:
        on_ray = kueri("embed", "--index", str(remote), "--encoder", "minilm", "--chunk-passages", str(CHUNK),
                       "--ray", head.address, "--workdir", str(tmp_path / "work"))
    assert on_ray.returncode == 0, on_ray.stderr
    assert f"embedded {SMALL} on Ray" in on_ray.stderr
    manifests = [json.loads((d / "vectors-minilm" / "kueri-vectors.json").read_text()) for d in (resumed.index, remote)]
    assert manifests[0]["vectors_sha256"] == manifests[1]["vectors_sha256"]  # the same float32 bytes
    runs = []
    for index in (resumed.index, remote):
        out = tmp_path / f"{index.parent.name}-{index.name}.txt"
        searched = kueri("-q", "search", "--index", str(index), "--topics", str(SAMPLE_TOPICS), "--output", str(out),
                         "--config", "hybrid-e5", "--dense", "minilm")
        assert searched.returncode == 0, searched.stderr
        runs.append(out.read_bytes())
    assert runs[0] == runs[1] and runs[0]


@pytest.fixture(scope="module")
def embedded_corpus(default_tira_run, tmp_path_factory) -> Path:
    """The sample's passages that the default run embeds with e5 (the top 15 of each topic), in corpus order: a
    corpus whose every e5 vector is in the default run's work folder, so the dense runs below embed no passage."""
    heads = {line.split(" ")[2] for line in (default_tira_run.out / "run.txt").read_text().splitlines()
             if int(line.split(" ")[3]) <= 15}
    path = tmp_path_factory.mktemp("embedded-corpus") / "passages.jsonl"
    with gzip.open(SAMPLE_CORPUS, "rt", encoding="utf-8") as sample:
        path.write_text("".join(line for line in sample if json.loads(line)["id"] in heads), encoding="utf-8")
    return path


@pytest.mark.slow
def test_dense_and_hybrid_configurations_on_the_sample(embedded_corpus, default_tira_run, topics):
    """On the sample's passages the default embeds with e5, in its work folder: its e5 embeddings cache serves them
    (the same vectors); the whole sample's 2,607 would take most of this test's time to embed."""
    from kueri.lucene.vectors import vectors_path
    from kueri.pipeline import Pipeline
    from kueri.runcontext import RunContext

    passages = sum(1 for _ in embedded_corpus.open(encoding="utf-8"))
    with Pipeline(embedded_corpus, topics, RunContext(default_tira_run.workdir, progress=False)) as pipeline:
        dense = pipeline.run(get_config("dense-e5"))
        hybrid = pipeline.run(get_config("hybrid-e5"))
        linear = pipeline.run(get_config("hybrid-e5-linear"))
        row15 = pipeline.run(get_config("row-15"))
        exact = pipeline.run(get_config("dense-e5").with_changes(dense_exact=True))
        index = pipeline.index(get_config("dense-e5").analyzer)
        assert vectors_path(index.path, "e5").is_dir()
    assert 500 < passages < 1000
    assert set(dense) == {t.number for t in topics} and all(len(hits) == passages for hits in dense.values())
    # HNSW against every vector: the same top 10 for every topic, 99% of the top 100s
    assert all([h.doc for h in dense[q][:10]] == [h.doc for h in exact[q][:10]] for q in dense)
    found = sum(len({h.doc for h in dense[q][:100]} & {h.doc for h in exact[q][:100]}) for q in dense)
    assert found >= 0.99 * sum(len(exact[q][:100]) for q in dense)
    for qid in row15:  # RRF: a passage first in both runs is first in the fusion
        if row15[qid][0].doc == dense[qid][0].doc:
            assert hybrid[qid][0].doc == row15[qid][0].doc
    assert linear != hybrid

    kp = pytest.importorskip("kueri.pyterrier")
    # the transformer on the one topic compared (a run is made topic by topic)
    frames = kp.topics(SAMPLE_TOPICS)
    frame = kp.Retriever(kp.index(embedded_corpus, "hybrid-e5", default_tira_run.workdir), config="hybrid-e5")(
        frames[frames["qid"] == "2"])
    first = frame[frame["qid"] == "2"].sort_values("rank")
    assert first["docno"].tolist()[:10] == [h.doc for h in hybrid["2"][:10]]
