#!/usr/bin/env python3
"""kueri serve on a big corpus embedded ahead: new questions' p50/p95 at 1, 4 and 16 clients, the embeddings
store's size per passage and the time to open it.

    .venv/bin/python benchmarks/bench_store.py [--passages 200000] [--questions 16] [--clients 1 4 16]
                                               [--workdir /tmp/kueri-bench-store] [--real]

1. A synthetic corpus of ``--passages`` passages (``scripts/make_corpus.py``, deterministic) and its index for the
   default configuration, in the work folder, as ``kueri serve --corpus`` builds it.
2. The stores of both encoders filled for every passage of the corpus, keyed by the digests of the passages' real
   texts, as ``kueri embed --encoder all --store-only`` fills them. Embedding 200,000 passages with both encoders
   takes hours on 2 cores, so by default the vectors are random unit vectors (the store, its size, its opening and
   a question's path do not depend on the values; the rankings do, so they are not looked at). ``--real`` runs
   ``kueri embed --encoder all --store-only`` instead (real vectors; for a corpus small enough).
3. The store's size on disk per passage, and the time a fresh process takes to open it (median of 3).
4. For each client level: ``kueri serve --corpus ... --no-preembed`` started on that work folder (its start line
   says how much of the corpus is embedded), then ``--questions`` questions it has not answered (the answer cache
   starts empty at each start) asked by that many clients at once: p50, p95, max, questions per second.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from bench_serve import Server, ask_all, questions, summary  # benchmarks/, beside this one

from kueri.cli.script import run_script, script_parser
from kueri.runcontext import RunContext

RANKED = re.compile(r"ranked in ([0-9.]+) s")
WARM_UP = "Which is better, a laptop or a desktop?"  # the question a server asks itself at start


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def make_corpus(root: Path, passages: int) -> Path:
    corpus = root / f"synthetic-{passages}.jsonl.gz"
    if not corpus.exists():
        from kueri.devtools.corpus import make_corpus as synthetic

        synthetic(passages, corpus)
    return corpus


def fill_stores(index_dir: Path, workdir: Path) -> dict[str, float]:
    """Every passage of the index into both encoders' stores, with random unit vectors (see the module)."""
    from kueri.encoders import CHUNK_PASSAGES, ENCODERS, text_digest
    from kueri.lucene import LuceneIndex

    seconds = {}
    rng = np.random.default_rng(0)
    with LuceneIndex(index_dir) as index:
        for name, entry in ENCODERS.items():
            store = entry.store(workdir)
            started = time.perf_counter()
            for start in range(0, len(index), CHUNK_PASSAGES):
                digests = [text_digest(t) for t in index.contents(range(start, min(start + CHUNK_PASSAGES,
                                                                                    len(index))))]
                missing = store.missing(digests)
                if not missing:
                    continue
                vectors = rng.standard_normal((len(missing), entry.dimension)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                with store.lock():
                    store.append(missing, vectors)
            seconds[name] = time.perf_counter() - started
    return seconds


OPEN = """
import sys, time
from kueri.encoders import get
started = time.perf_counter()
store = get(sys.argv[1]).store(sys.argv[2])
print(time.perf_counter() - started, len(store))
"""


def store_figures(workdir: Path, passages: int) -> dict[str, dict[str, float]]:
    from kueri.encoders import ENCODERS, store_path

    figures = {}
    for name, entry in ENCODERS.items():
        path = store_path(workdir, entry.store_key)
        size = sum(p.stat().st_size for p in path.iterdir())
        opens = []
        for _ in range(3):
            out = subprocess.run([sys.executable, "-c", OPEN, name, str(workdir)], capture_output=True, text=True,
                                 check=True).stdout.split()
            opens.append(float(out[0]))
        figures[name] = {"passages": int(out[1]), "bytes": size, "bytes_per_passage": size / passages,
                         "chunks": len(list(path.iterdir())), "open_seconds": statistics.median(opens)}
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--passages", type=int, default=200_000)
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--workdir", default="/tmp/kueri-bench-store")
    parser.add_argument("--real", action="store_true", help="real vectors: kueri embed --encoder all --store-only")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--prepare-only", action="store_true", help="make the corpus, index and stores, and stop")
    args = parser.parse_args(argv)
    from kueri.config import get_config
    from kueri.pipeline import cached_index

    root = Path(args.workdir)
    root.mkdir(parents=True, exist_ok=True)
    work = root / "work"
    print(f"load before: {load()}", file=sys.stderr)
    started = time.perf_counter()
    corpus = make_corpus(root, args.passages)
    print(f"corpus {corpus} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    started = time.perf_counter()
    with cached_index(corpus, get_config("default").analyzer, RunContext(work, progress=False)) as index:
        index_dir = index.path
    print(f"index {index_dir} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    if args.real:
        subprocess.run([sys.executable, "-m", "kueri", "embed", "--index", str(index_dir), "--encoder", "all",
                        "--store-only", "--workdir", str(work)], check=True)
    else:
        filled = fill_stores(index_dir, work)
        print("stores filled with random unit vectors: " + ", ".join(f"{n} {s:.1f} s" for n, s in filled.items()),
              file=sys.stderr)
    if args.prepare_only:
        return 0
    stores = store_figures(work, args.passages)
    for name, row in stores.items():
        print(f"store {name}: {row['passages']} passages in {row['chunks']} chunks, {row['bytes'] / 1e6:.1f} MB "
              f"({row['bytes_per_passage']:.0f} bytes a passage); opened in {row['open_seconds']:.2f} s",
              file=sys.stderr, flush=True)
    asked = [q for q in questions(args.questions + 1) if q != WARM_UP][: args.questions]
    paths = [f"/api/search?{urllib.parse.urlencode({'q': q, 'k': args.k})}" for q in asked]
    command = [sys.executable, "-m", "kueri", "serve", "--corpus", str(corpus), "--port", "0", "--workdir", str(work),
               "--no-preembed", "--max-wait", "600"]  # latency, not the queue's refusals (bench_serve.py --burst)
    rows = []
    for clients in args.clients:
        with Server(command) as server:  # a fresh server: no answer cached, every question new to it
            embedded = [line.split("serve: ", 1)[1].strip() for line in server.log if "of the corpus'" in line]
            latencies, wall = ask_all(server, paths, clients)
            time.sleep(0.5)  # the log's last lines
        ranked = [float(m[1]) for line in server.log if (m := RANKED.search(line))][1:]  # the warm-up's left out
        stages = [line.split("second stage: ", 1)[1].strip() for line in server.log if " in all" in line][1:]
        rows.append({"clients": clients, "start_seconds": server.started_seconds, **summary(latencies, wall),
                     "ranked_p50": statistics.median(ranked) if ranked else None})
        if stages:
            print(f"  a question's second stage (the server's log): {stages[len(stages) // 2]}", file=sys.stderr)
        row = rows[-1]
        print(f"clients {clients:2d}: p50 {row['p50']:.2f} s, p95 {row['p95']:.2f} s, max {row['max']:.2f} s, "
              f"{row['per_second']:.2f} questions/s (n {row['n']}); server started in {row['start_seconds']:.1f} s; "
              f"{'; '.join(embedded)}; ranked in {row['ranked_p50']} s (p50, the server's own log); load {load()}",
              file=sys.stderr, flush=True)
    print(f"| clients | questions | p50 s | p95 s | max s | questions/s |  ({args.passages} passages, "
          f"{'real' if args.real else 'random'} vectors)")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['clients']} | {row['n']} | {row['p50']:.2f} | {row['p95']:.2f} | {row['max']:.2f} | "
              f"{row['per_second']:.2f} |")
    print(f"load after: {load()}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({"serve": rows, "stores": stores}, indent=1))
    return 0


if __name__ == "__main__":
    run_script(main)
