#!/usr/bin/env python3
"""What dense retrieval costs and finds: embedding per core (here and on Ray), HNSW build, search latency, recall.

    .venv/bin/python benchmarks/bench_dense.py throughput --corpus C.jsonl.gz --passages 1024 [--ray]
    .venv/bin/python benchmarks/bench_dense.py scale --sizes 50000 200000 --workdir /tmp/dense-scale
    .venv/bin/python benchmarks/bench_dense.py recall --workdir WORK

``throughput`` embeds the first ``--passages`` passages of a corpus with e5 (``kueri embed``'s code) and gives
passages per second of wall time and per CPU second: of this process (every thread: onnxruntime's and the
JVM's) here, of the Ray cluster's worker processes with ``--ray`` (a private 2-CPU head on 127.0.0.1).

``scale`` builds, for each size, a synthetic corpus (``scripts/make_corpus.py``), its kueri index, and an e5
vector index from **synthetic vectors** (the sample's real e5 vectors, each copy jittered by Gaussian noise and
renormalised: cosine about 0.9 to its source), since embedding 200,000 passages takes hours on 2 cores. It
times the HNSW build (wall, CPU, peak RSS of a fresh process) and the 50 topics' searches: the dense search
(HNSW k=1000; the titles' e5 embedding timed apart) and the hybrid (BM25 + dense + RRF). Sizes beyond those
built are extrapolated (build ~ n log n, search ~ log n), and said to be.

``recall`` evaluates row 15, dense-e5, hybrid-e5 and hybrid-e5-linear on the sample (the 2022 topics and
judgments restricted to the sample's passages: evaluation only, nothing is chosen by it): recall@100,
recall@1000, nDCG@5.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from kueri import resources
from kueri.cli.script import run_script, script_parser, start
from kueri.runcontext import QUIET, RunContext

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = resources.sample()
QRELS = resources.path("qrels", "touche-task2-2022-relevance.qrels")
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def process_cpu(pids: list[int]) -> float:
    """User + system CPU seconds of these processes so far (from /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return total / ticks


def throughput(args) -> None:
    import gzip

    from kueri.config import get_config
    from kueri.dense import embed_index
    from kueri.pipeline import index_corpus

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"first-{args.passages}.jsonl"
    opener = gzip.open if str(args.corpus).endswith(".gz") else open
    with opener(args.corpus, "rt", encoding="utf-8") as source:
        corpus.write_text("".join(next(source) for _ in range(args.passages)), encoding="utf-8")
    index_dir = work / ("index-ray" if args.ray else "index-local")
    shutil.rmtree(index_dir, ignore_errors=True)
    store_dir = work / ("store-ray" if args.ray else "store-local")  # a fresh store: everything is embedded
    shutil.rmtree(store_dir, ignore_errors=True)
    index = index_corpus(corpus, index_dir, get_config("dense-e5").analyzer, QUIET)
    print(f"load before: {load()}")
    if args.ray:
        from kueri.scaleout import cluster_processes, local_cluster

        os.environ.update(RAY_ENV)
        with local_cluster(2, env=RAY_ENV) as head:
            from kueri.scaleout import connect

            connect(head.address)
            pids = cluster_processes(head)
            cpu = process_cpu(pids)
            report = embed_index(index, "e5", store_dir, chunk_passages=args.chunk, ray_address=head.address,
                                 progress=False)
            pids = cluster_processes(head)
            used = process_cpu(pids) - cpu  # the workers that ran the tasks (Ray keeps them)
    else:
        cpu = time.process_time()
        report = embed_index(index, "e5", store_dir, chunk_passages=args.chunk, progress=False)
        used = time.process_time() - cpu
    index.close()
    where = "Ray, 2 CPUs on 127.0.0.1" if args.ray else "here"
    print(f"{where}: {report.embedded} passages in {report.seconds:.1f} s wall ({report.rate:.1f} passages/s), "
          f"{used:.1f} CPU s ({report.embedded / used:.1f} passages per CPU second); load after: {load()}")
    print(f"vectors_sha256 {report.manifest['vectors_sha256']}")


def jittered_vectors(count: int, seed: int = 0) -> np.ndarray:
    """``count`` unit vectors: the sample's e5 vectors (from an index's vector index) copied and jittered."""
    source = np.load(os.environ["KUERI_BENCH_SAMPLE_VECTORS"])
    rng = np.random.default_rng(seed)
    rows = source[np.arange(count) % len(source)]
    noisy = rows + rng.standard_normal(rows.shape).astype(np.float32) * np.float32(0.5 / np.sqrt(rows.shape[1]))
    return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)


def build_one(args) -> None:
    """In a fresh process: the synthetic vector index of one kueri index (timed), for ``scale``."""
    from kueri.encoders import get
    from kueri.lucene.vectors import ids_digest, vectors_path, write_vector_index

    index_dir = Path(args.index)
    count = len((index_dir / "ids.txt").read_text().split("\n")) - 1
    vectors = jittered_vectors(count)
    chunks = (vectors[i : i + 50_000] for i in range(0, count, 50_000))
    cpu, wall = time.process_time(), time.perf_counter()
    manifest = write_vector_index(vectors_path(index_dir, "e5"), chunks, count, vectors.shape[1], {
        "encoder": get("e5").key(), "ids_sha256": ids_digest(index_dir),
        "synthetic": "jittered copies of the sample's e5 vectors: for timing only"})
    print(json.dumps({"count": count, "wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "size_mb": manifest["size_bytes"] / 1e6}))


def latency(index_dir: Path, repeat: int = 3) -> dict[str, float]:
    from kueri.config import get_config
    from kueri.dense import hybrid_run, open_vectors
    from kueri.encoders import get
    from kueri.lucene import LuceneIndex
    from kueri.parse import read_topics
    from kueri.pipeline import search_run

    topics = read_topics(SAMPLE / "topics.xml")
    encoder = get("e5").load()
    started = time.perf_counter()
    queries = encoder.queries([t.title for t in topics])
    embed = time.perf_counter() - started
    timings: dict[str, list[float]] = {"dense": [], "bm25": [], "fusion": []}
    with LuceneIndex(index_dir) as index, open_vectors(index, "e5") as vectors:
        for _ in range(repeat):
            started = time.perf_counter()
            found = vectors.search(queries, 1000, k=1000)
            timings["dense"].append(time.perf_counter() - started)
            dense = {t.number: hits for t, hits in zip(topics, found, strict=True)}
            started = time.perf_counter()
            lexical = search_run(index, get_config("row-15"), topics)
            timings["bm25"].append(time.perf_counter() - started)
            started = time.perf_counter()
            hybrid_run(lexical, dense, "rrf")
            timings["fusion"].append(time.perf_counter() - started)
    result = {name: statistics.median(values) for name, values in timings.items()}
    result["embed_titles"] = embed
    return result


def scale(args) -> None:
    from kueri.config import get_config
    from kueri.lucene.vectors import VectorIndex, ids_digest, vectors_path
    from kueri.pipeline import index_corpus

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    sample_index = Path(args.sample_index)  # any index of the sample with e5 vectors (kueri embed)
    from kueri.lucene import LuceneIndex

    source = work / "sample-e5.npy"
    if not source.exists():
        with LuceneIndex(sample_index) as index:
            vectors = VectorIndex(vectors_path(sample_index, "e5"), index.ids, ids_digest(sample_index))
            np.save(source, vectors.vectors())
            vectors.close()
    env = {**os.environ, "KUERI_BENCH_SAMPLE_VECTORS": str(source), "PYTHONPATH": str(ROOT)}
    print(f"load before: {load()}")
    rows = []
    for size in args.sizes:
        corpus = work / f"synthetic-{size}.jsonl.gz"
        if not corpus.exists():
            subprocess.run([sys.executable, str(ROOT / "scripts" / "make_corpus.py"), "--passages", str(size),
                            "--out", str(corpus)], check=True, capture_output=True)
        index_dir = work / f"index-{size}"
        if not (index_dir / "kueri-index.json").exists():
            index_corpus(corpus, index_dir, get_config("dense-e5").analyzer, QUIET).close()
        done = subprocess.run([sys.executable, __file__, "build-one", "--index", str(index_dir)], env=env,
                              check=True, capture_output=True, text=True)
        built = json.loads(done.stdout.strip().splitlines()[-1])
        os.environ["KUERI_BENCH_SAMPLE_VECTORS"] = str(source)
        searched = latency(index_dir)
        rows.append((size, built, searched))
        print(f"{size}: HNSW build {built['wall']:.1f} s wall, {built['cpu']:.1f} CPU s, peak RSS "
              f"{built['peak_rss_mb']:.0f} MB, {built['size_mb']:.0f} MB; 50 topics: titles' e5 "
              f"{searched['embed_titles']:.2f} s, dense {searched['dense'] * 1000:.0f} ms, BM25 "
              f"{searched['bm25'] * 1000:.0f} ms, RRF {searched['fusion'] * 1000:.0f} ms; load {load()}", flush=True)
    if rows:
        n2, b2, s2 = rows[-1]
        target = 868_655
        build = b2["wall"] * (target * np.log(target)) / (n2 * np.log(n2))
        dense = s2["dense"] * np.log(target) / np.log(n2)
        print(f"extrapolated to {target} passages (not measured): HNSW build ~{build / 60:.0f} min (n log n from "
              f"{n2}), dense search of 50 topics ~{dense * 1000:.0f} ms (log n)")


def recall(args) -> None:
    from kueri.config import get_config
    from kueri.evaluate import evaluate_run, restrict_qrels, restrict_run
    from kueri.parse import PassageReader, read_topics
    from kueri.pipeline import Pipeline
    from kueri.runfile import read_qrels

    topics = read_topics(SAMPLE / "topics.xml")
    corpus = SAMPLE / "passages.jsonl.gz"
    ids = {p.id for p in PassageReader(corpus)}
    qrels = restrict_qrels(read_qrels(QRELS), ids)
    measures = ["R@100", "R@1000", "nDCG@5"]
    print(f"{'run':18s} " + " ".join(f"{m:>7s}" for m in measures))
    with Pipeline(corpus, topics, RunContext(args.workdir, progress=False)) as pipeline:
        for name in ("row-15", "dense-e5", "hybrid-e5", "hybrid-e5-linear"):
            run = restrict_run(pipeline.run(get_config(name)), ids)
            values = evaluate_run(run, qrels, measures)
            print(f"{name:18s} " + " ".join(f"{values[m]:7.4f}" for m in measures))


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("throughput")
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--passages", type=int, default=1024)
    p.add_argument("--chunk", type=int, default=128)
    p.add_argument("--ray", action="store_true")
    p.add_argument("--workdir", default="/tmp/dense-bench")
    p = sub.add_parser("scale")
    p.add_argument("--sizes", type=int, nargs="+", default=[50_000, 200_000])
    p.add_argument("--workdir", default="/tmp/dense-scale")
    p.add_argument("--sample-index", required=True, help="an index of the sample with e5 vectors (kueri embed)")
    p = sub.add_parser("build-one")
    p.add_argument("--index", required=True)
    p = sub.add_parser("recall")
    p.add_argument("--workdir", required=True)
    args = start(parser.parse_args(argv))
    {"throughput": throughput, "scale": scale, "build-one": build_one, "recall": recall}[args.what](args)
    return 0


if __name__ == "__main__":
    run_script(main)
