#!/usr/bin/env python3
"""kueri serve for the long run: many distinct questions on a fresh work folder, and the store's compaction.

    .venv/bin/python benchmarks/bench_soak.py [--questions 1000] [--clients 1 4] [--workdir /tmp/kueri-bench-soak]
    .venv/bin/python benchmarks/bench_soak.py --store-appends 10000
    .venv/bin/python benchmarks/bench_soak.py --warm-first

**The soak** (``--questions N``): for each client level, ``kueri serve --corpus SAMPLE --no-preembed`` on a fresh
work folder (the index hard-linked in, no embeddings), asked N distinct questions (phrasings x object pairs: the
sample's topics' objects and a few more, each pair in both orders) by that many clients at once through
``/api/search``. Per block of 50 answers (in the order they came): p50, p95 and max latency (the client's round
trip), the server's resident
memory (VmRSS) after the block, the chunk files of each encoder's store, and the questions the server ranked as
cold. After the soak: the server is stopped and started again on that work folder (its start time, and the start
on the fresh folder for comparison), every stored vector is read, the store compacted whole (``kueri cache
compact``) and read again: the same bytes.

**The order** (``--warm-first``): on a fresh work folder, eight cold questions at once (one runs, seven wait), then a
warm one; the order of the answers (the warm one should come first or second: the running one may finish before it
is queued).

**The store** (``--store-appends N``): a synthetic store of N appends of 1 to 3 random 384-dimension vectors (what
a question adds), as benchmarks/bench_store.py fills its stores: the chunk files after each append (at most 16
plus one per 4,096 passages), the time of an append (p50, p95 and max: the appends that compact), the bytes
written per byte stored, the time a fresh process takes to open the store, and its vectors before and after.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from bench_serve import Server, fresh_workdir, percentile  # benchmarks/, beside this one

from kueri import resources
from kueri.cli.script import run_script, script_parser

PHRASINGS = [
    "Which is better, {a} or {b}?", "{a} vs {b}", "Is {a} better than {b}?", "Should I choose {a} or {b}?",
    "{a} or {b}: which one should I pick?", "What are the pros and cons of {a} versus {b}?",
    "Which is cheaper, {a} or {b}?", "Is {a} worse than {b}?", "{a} compared to {b}", "Why is {a} better than {b}?",
    "Which do you prefer, {a} or {b}?", "Is {a} healthier than {b}?", "What is the difference between {a} and {b}?",
    "Is {a} safer than {b}?", "{a} or {b} for beginners?", "Which lasts longer, {a} or {b}?",
    "Is {a} faster than {b}?", "Which is more popular, {a} or {b}?", "Would you rather have {a} or {b}?",
    "Is {a} more reliable than {b}?",
]
MORE_PAIRS = [("tea", "coffee"), ("cats", "dogs"), ("Python", "Java"), ("React", "Vue"), ("iPhone", "Android"),
              ("Windows", "Linux"), ("nuclear power", "coal"), ("trains", "planes"), ("books", "movies"),
              ("summer", "winter")]
BLOCK = 50


def pairs() -> list[tuple[str, str]]:
    from kueri.parse import read_topics

    found = [t.objects for t in read_topics(resources.sample() / "topics.xml") if all(t.objects)]
    return list(dict.fromkeys([*found, *MORE_PAIRS]))


def distinct_questions(n: int) -> list[str]:
    """``n`` different questions: each phrasing over every pair (so the objects change from one question to the
    next), then the same with each pair swapped."""
    combos = [(phrasing, pair) for phrasing in PHRASINGS for pair in pairs()]
    combos += [(phrasing, (b, a)) for phrasing, (a, b) in combos]
    asked = list(dict.fromkeys(phrasing.format(a=a, b=b) for phrasing, (a, b) in combos))
    if n > len(asked):
        raise SystemExit(f"--questions takes at most {len(asked)}")
    return asked[:n]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def chunk_files(workdir: Path) -> dict[str, int]:
    return {p.name.removeprefix("embeddings-").split("-")[0]: len(list(p.glob("chunk-*.emb")))
            for p in sorted(workdir.glob("embeddings-*")) if p.is_dir()}


def store_digest(workdir: Path) -> dict[str, tuple[int, str]]:
    """Per store: its passages and the SHA-256 of their vectors in digest order (what compaction must keep)."""
    from kueri.encoders import ENCODERS, EmbeddingStore, store_path

    out = {}
    for name, entry in ENCODERS.items():
        path = store_path(workdir, entry.store_key)
        if not path.is_dir():
            continue
        store = EmbeddingStore(path, entry.dimension)
        digests = sorted(store._rows)
        out[name] = (len(digests), hashlib.sha256(store.vectors(digests).tobytes()).hexdigest()[:16])
    return out


def soak(base: Path, root: Path, corpus: str, n: int, clients: int, k: int, max_wait: float) -> dict[str, object]:
    import http.client

    workdir = root / f"soak-{clients}"
    fresh_workdir(base, workdir)
    command = [sys.executable, "-m", "kueri", "serve", "--corpus", corpus, "--port", "0", "--workdir", str(workdir),
               "--no-preembed", "--max-wait", str(max_wait)]
    paths = [f"/api/search?{urllib.parse.urlencode({'q': q, 'k': k})}" for q in distinct_questions(n)]
    assert len(set(paths)) == n
    blocks: list[dict[str, object]] = []
    latencies: list[float] = [0.0] * n
    finished: list[float] = []  # the latencies in the order the answers came (a block is 50 of them)
    statuses: list[int] = [0] * n
    errors: list[tuple[str, int, str]] = []
    with Server(command) as server:
        fresh_start = server.started_seconds
        assert server.process is not None
        pid = server.process.pid
        rss_start = rss_mb(pid)
        done = itertools.count()
        lock = threading.Lock()
        turn = iter(range(n))

        def client() -> None:
            connection = http.client.HTTPConnection(server.host, server.port, timeout=900)
            while True:
                with lock:
                    i = next(turn, None)
                if i is None:
                    break
                started = time.perf_counter()
                connection.request("GET", paths[i])
                response = connection.getresponse()
                body = response.read()
                latencies[i] = time.perf_counter() - started
                statuses[i] = response.status
                with lock:
                    finished.append(latencies[i])
                if response.status != 200:
                    errors.append((paths[i], response.status, body[:300].decode("utf-8", "replace")))
                count = next(done) + 1
                if count % BLOCK == 0:
                    with lock:
                        record_block(count)
            connection.close()

        def record_block(count: int) -> None:
            block = finished[count - BLOCK:count]
            cold = sum(" (cold)" in line for line in server.log if "ranked in" in line) - 1  # less the warm-up
            row = {"questions": count, "p50": statistics.median(block), "p95": percentile(block, 95),
                   "max": max(block), "failed": len(errors),
                   "rss_mb": rss_mb(pid), "chunk_files": chunk_files(workdir), "cold_so_far": cold,
                   "load": Path("/proc/loadavg").read_text().split()[0]}
            blocks.append(row)
            print(f"{clients} client(s), {count:5d} questions: p50 {row['p50']:.2f} s, p95 {row['p95']:.2f} s, "
                  f"max {row['max']:.2f} s, RSS {row['rss_mb']:.0f} MB, not 200: {row['failed']}, "
                  f"chunk files {row['chunk_files']}, cold so far {cold}, load {row['load']}", file=sys.stderr,
                  flush=True)

        started = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            for future in [pool.submit(client) for _ in range(clients)]:
                future.result()
        wall = time.perf_counter() - started
        time.sleep(0.5)  # the log's last lines
    (root / f"serve-{clients}.log").write_text("".join(server.log))
    with Server(command) as restarted:  # the start after the soak: the stores as the soak left them
        pass
    before = store_digest(workdir)
    import subprocess

    compacted = subprocess.run([sys.executable, "-m", "kueri", "cache", "compact", "--workdir", str(workdir)],
                               capture_output=True, text=True, check=True).stdout.strip()
    after = store_digest(workdir)
    return {"clients": clients, "questions": n, "wall_seconds": wall, "statuses": sorted(set(statuses)),
            "p50": statistics.median(latencies), "p95": percentile(latencies, 95), "max": max(latencies),
            "max_wait": max_wait,
            "failed": errors,
            "rss_start_mb": rss_start, "blocks": blocks, "fresh_start_seconds": fresh_start,
            "start_after_soak_seconds": restarted.started_seconds, "chunk_files_after": chunk_files(workdir),
            "vectors_before_compact": before, "vectors_after_compact": after, "compact": compacted,
            "same_vectors": before == after}


def store_appends(n: int) -> dict[str, object]:
    """A synthetic store of ``n`` appends of 1 to 3 random vectors (see the module)."""
    import subprocess

    from kueri.encoders import EmbeddingStore, text_digest

    dimension = 384
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="kueri-soak-store-") as folder:
        path = Path(folder) / "embeddings-test"
        store = EmbeddingStore(path, dimension)
        seconds, most_files, added, written = [], 0, 0, 0
        expected = hashlib.sha256()
        started = time.perf_counter()
        for i in range(n):
            size = 1 + i % 3
            digests = [text_digest(f"synthetic passage {added + j}") for j in range(size)]
            vectors = rng.standard_normal((size, dimension)).astype(np.float32)
            expected.update(vectors.tobytes())
            names_before = {p.name: p.stat().st_size for p in path.glob("chunk-*.emb")} if path.exists() else {}
            began = time.perf_counter()
            with store.lock():
                store.refresh()
                store.append(digests, vectors)
            seconds.append(time.perf_counter() - began)
            added += size
            files = {p.name: p.stat().st_size for p in path.glob("chunk-*.emb")}
            written += sum(size for name, size in files.items() if name not in names_before)
            most_files = max(most_files, len(files))
            if (i + 1) % 1000 == 0:
                print(f"{i + 1} appends, {added} passages: {len(files)} chunk files (at most {most_files} so far)",
                      file=sys.stderr, flush=True)
        wall = time.perf_counter() - started
        stored = sum(p.stat().st_size for p in path.glob("chunk-*.emb"))
        opened = subprocess.run([sys.executable, "-c", "import sys, time; from kueri.encoders import EmbeddingStore; "
                                 "t = time.perf_counter(); s = EmbeddingStore(sys.argv[1], 384); "
                                 "print(time.perf_counter() - t, len(s))", str(path)],
                                capture_output=True, text=True, check=True).stdout.split()
        fresh = EmbeddingStore(path, dimension)
        got = fresh.vectors([text_digest(f"synthetic passage {j}") for j in range(added)]).tobytes()
        return {"appends": n, "passages": added, "chunk_files": len(list(path.glob("chunk-*.emb"))),
                "most_chunk_files": most_files, "bound": 16 + added // 4096, "wall_seconds": wall,
                "append_p50_ms": 1000 * statistics.median(seconds), "append_p95_ms": 1000 * percentile(seconds, 95),
                "append_max_ms": 1000 * max(seconds), "bytes_stored": stored, "bytes_written": written,
                "open_seconds": float(opened[0]), "same_vectors": hashlib.sha256(got).hexdigest() ==
                expected.hexdigest()}


def warm_first(base: Path, root: Path, corpus: str, k: int) -> dict[str, object]:
    """On a fresh work folder: eight cold questions at once (one runs, seven wait), then a warm one (the start's
    warm-up question with its objects written otherwise: a new ranking of candidates embedded at the start). The
    order the server answered them in, from the clients' clocks."""
    import http.client

    workdir = root / "warm-first"
    fresh_workdir(base, workdir)
    command = [sys.executable, "-m", "kueri", "serve", "--corpus", corpus, "--port", "0", "--workdir", str(workdir),
               "--no-preembed", "--max-wait", "600"]
    cold = [f"/api/search?{urllib.parse.urlencode({'q': q, 'k': k})}" for q in
            ("Which is better, PHP or Python?", "Is tea healthier than coffee?", "Cats vs dogs",
             "Should I choose React or Vue?", "Is nuclear power safer than coal?",
             "Which is better, Xbox or PlayStation?", "Is Canon better than Nikon?", "Should I use Windows or Linux?")]
    warm = "/api/search?" + urllib.parse.urlencode({"q": "Which is better, a laptop or a desktop?", "k": k,
                                                     "objects": "Laptop,Desktop"})
    finished: dict[str, float] = {}

    def ask(name: str, path: str) -> None:
        connection = http.client.HTTPConnection(server.host, server.port, timeout=900)
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        assert response.status == 200, (path, response.status)
        finished[name] = time.perf_counter()
        connection.close()

    def health() -> dict[str, object]:
        connection = http.client.HTTPConnection(server.host, server.port, timeout=60)
        connection.request("GET", "/api/health")
        return json.loads(connection.getresponse().read())

    with Server(command) as server, ThreadPoolExecutor(9) as pool:
        started = time.perf_counter()
        futures = [pool.submit(ask, f"cold {i}", path) for i, path in enumerate(cold)]
        deadline = time.monotonic() + 120
        # one running and seven probed and waiting (a question not yet probed counts as warm)
        while health()["waiting_by_cost"] != {"cached": 0, "warm": 0, "cold": 7} and time.monotonic() < deadline:
            time.sleep(0.05)
        waiting = health()["waiting_by_cost"]
        futures.append(pool.submit(ask, "warm", warm))
        time.sleep(0.5)
        waiting_then = health()["waiting_by_cost"]
        for future in futures:
            future.result()
    order = sorted(finished, key=finished.get)  # type: ignore[arg-type]
    kinds = [line.split("ranked in ", 1)[1].strip() for line in server.log if "ranked in" in line][1:]
    return {"waiting_before_warm": waiting, "waiting_after_warm": waiting_then, "order": order,
            "seconds": {name: round(at - started, 2) for name, at in finished.items()}, "ranked": kinds,
            "warm_before_the_seven": order.index("warm") <= 1}


def main(argv: Sequence[str] | None = None) -> int:
    parser = script_parser(__doc__)
    parser.add_argument("--corpus", default=str(resources.sample() / "passages.jsonl.gz"))
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--clients", type=int, nargs="+", default=[1])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--max-wait", type=float, default=60.0, help="the server's --max-wait (%(default)s, its own "
                        "default; a 503 counts as a failure)")
    parser.add_argument("--workdir", default="/tmp/kueri-bench-soak", help="where the work folders go")
    parser.add_argument("--store-appends", type=int, help="only the synthetic store: this many appends")
    parser.add_argument("--warm-first", action="store_true",
                        help="only the order: a warm question asked while one cold question runs and seven wait")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    root = Path(args.workdir)
    base = root / "base"
    if not args.store_appends:
        with Server([sys.executable, "-m", "kueri", "serve", "--corpus", args.corpus, "--port", "0", "--workdir",
                     str(base), "--no-preembed"]) as prepared:  # builds (or reuses) the index once
            print(f"prepared {base} in {prepared.started_seconds:.1f} s", file=sys.stderr)
    if args.store_appends:
        figures: object = store_appends(args.store_appends)
        print(json.dumps(figures, indent=1))
    elif args.warm_first:
        figures = warm_first(base, root, args.corpus, args.k)
        print(json.dumps(figures, indent=1))
    else:
        figures = [soak(base, root, args.corpus, args.questions, clients, args.k, args.max_wait)
                   for clients in args.clients]
        for row in figures:
            print(f"| {row['clients']} client(s), --max-wait {row['max_wait']:g}: {row['questions']} questions in "
                  f"{row['wall_seconds']:.0f} s, p50 {row['p50']:.2f} s, p95 {row['p95']:.2f} s, "
                  f"max {row['max']:.2f} s; "
                  f"statuses {row['statuses']}; start {row['fresh_start_seconds']:.1f} s fresh, "
                  f"{row['start_after_soak_seconds']:.1f} s after; chunk files {row['chunk_files_after']}; "
                  f"same vectors after compaction: {row['same_vectors']} ({row['compact']})")
            print("| answers | p50 s | p95 s | max s | RSS MB | chunk files | taken for cold so far | load |")
            print("|---|---|---|---|---|---|---|---|")
            for block in row["blocks"]:
                print(f"| {block['questions']} | {block['p50']:.2f} | {block['p95']:.2f} | {block['max']:.2f} | "
                      f"{block['rss_mb']:.0f} | "
                      f"{', '.join(f'{k} {v}' for k, v in block['chunk_files'].items())} | {block['cold_so_far']} | "
                      f"{block['load']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    run_script(main)
