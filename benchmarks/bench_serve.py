#!/usr/bin/env python3
"""kueri serve under load: p50/p95 latency and throughput at 1, 4 and 16 concurrent clients, cold and warm.

    .venv/bin/python benchmarks/bench_serve.py [--corpus PATH | --index DIR] [--questions 16] [--clients 1 4 16]

The real command (``kueri serve``, a process of its own) on 127.0.0.1, asked through its JSON API
(``/api/search?q=...&k=10``) by that many client threads at once, each question once per phase:

* **cold**: a fresh work folder (the index hard-linked in, no embeddings), the server just started: each
  question embeds the candidates it needs;
* **warm**: the server restarted on that folder: the passages' embeddings are cached, the answers are not
  (what a question costs once its passages were embedded, by an earlier question or up front);
* **repeat**: the same questions again, without a restart: answered from the server's answer cache.

With ``--burst N`` it measures the bounded queue instead: N different cold questions at once (each on its
own connection) to a server just started on a fresh work folder with ``--max-wait`` seconds as its limit;
each is answered (200) or refused (503 with Retry-After), and no request may take longer than the limit:

    .venv/bin/python benchmarks/bench_serve.py --burst 32 --max-wait 60

With ``--in-process ROUNDS`` it measures what a warm question costs kueri itself, without HTTP or the OS's
scheduling of a server: the engine of ``kueri serve`` in this process on a work folder whose passages an unmeasured
first round embedded, ROUNDS fresh engines (their answer caches empty) each asked the questions one after another,
wall and CPU time per question (a median of 16 questions moves by a tenth of a second between runs; of 48, less):

    .venv/bin/python benchmarks/bench_serve.py --in-process 3 --questions 16

The questions are the shipped sample's Touché topics' titles and free questions in other forms, in turn.
Latency is measured at the client (the request's whole round trip); throughput is questions per second of
the phase's wall time. Loops are bounded: each phase asks exactly ``--questions`` questions.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kueri import resources
from kueri.cli.script import run_script, script_parser

READY = re.compile(r"ready at http://([^:/]+):(\d+)/")
FREE_QUESTIONS = [
    "Which is better for a student, a laptop or a desktop?", "Python vs Java for beginners",
    "Should I use React or Vue?", "Is tea better than coffee?", "iPhone versus Android: which should I get?",
    "Windows or Linux for gaming?", "Is nuclear power safer than coal?", "Cats vs dogs",
]


def questions(n: int) -> list[str]:
    from kueri.parse import read_topics

    titles = [t.title for t in read_topics(resources.sample() / "topics.xml")]
    pool = [q for pair in zip(titles, itertools.cycle(FREE_QUESTIONS)) for q in pair]  # topics and free, in turn
    return [pool[i % len(pool)] for i in range(n)]


def distinct(n: int) -> list[str]:
    """``n`` different questions: Touché titles and the free questions in turn, then titles (58 at most)."""
    from kueri.parse import read_topics

    titles = [t.title for t in read_topics(resources.sample() / "topics.xml")]
    pool = [q for pair in zip(titles, FREE_QUESTIONS, strict=False) for q in pair] + titles[len(FREE_QUESTIONS):]
    if n > len(pool):
        raise SystemExit(f"--burst takes at most {len(pool)} questions")
    return pool[:n]


@dataclass
class Server:
    """A ``kueri serve`` (or any command that prints ``ready at http://HOST:PORT/``) in its own process."""

    command: list[str]
    host: str = ""
    port: int = 0
    started_seconds: float = 0.0
    log: list[str] = field(default_factory=list)
    process: subprocess.Popen | None = None

    def __enter__(self) -> Server:
        started = time.perf_counter()
        self.process = subprocess.Popen(self.command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            found = READY.search(line)
            if found:
                self.host, self.port = found.group(1), int(found.group(2))
                break
        if not self.port:
            raise SystemExit("the server did not start:\n" + "".join(self.log[-20:]))
        self.started_seconds = time.perf_counter() - started
        threading.Thread(target=lambda: self.log.extend(self.process.stderr), daemon=True).start()  # type: ignore
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)


def ask_all(server: Server, paths: Sequence[str], clients: int) -> tuple[list[float], float]:
    """Every path asked once, by ``clients`` threads at once (each on its own keep-alive connection); the
    latencies (s) and the wall time. A status other than 200 stops the benchmark."""
    lock = threading.Lock()
    queue = list(paths)
    latencies: list[float] = []

    def client() -> None:
        connection = http.client.HTTPConnection(server.host, server.port, timeout=600)
        while True:
            with lock:
                if not queue:
                    break
                path = queue.pop(0)
            started = time.perf_counter()
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
            took = time.perf_counter() - started
            if response.status != 200:
                raise SystemExit(f"{path}: HTTP {response.status}: {body[:300]!r}")
            with lock:
                latencies.append(took)
        connection.close()

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(client) for _ in range(clients)]:
            future.result()
    return latencies, time.perf_counter() - started


def burst(server: Server, paths: Sequence[str]) -> list[tuple[int, float, str]]:
    """Every path asked at the same moment, each on its own connection: (status, seconds, Retry-After)."""
    barrier = threading.Barrier(len(paths))

    def one(path: str) -> tuple[int, float, str]:
        connection = http.client.HTTPConnection(server.host, server.port, timeout=1200)
        connection.connect()
        barrier.wait()
        started = time.perf_counter()
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        took = time.perf_counter() - started
        connection.close()
        return response.status, took, response.getheader("Retry-After") or ""

    with ThreadPoolExecutor(len(paths)) as pool:
        return list(pool.map(one, paths))


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def summary(values: Sequence[float], wall: float) -> dict[str, float]:
    return {"n": len(values), "p50": statistics.median(values), "p95": percentile(values, 95), "max": max(values),
            "per_second": len(values) / wall}


def fresh_workdir(base: Path, target: Path) -> None:
    """``target``: the indexes of ``base`` hard-linked (Lucene never rewrites a file), and nothing else."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for index in base.glob("index-*"):
        if index.is_dir():
            shutil.copytree(index, target / index.name, copy_function=os.link)


def in_process(source: dict[str, str], workdir: Path, asked: Sequence[str], rounds: int, k: int
               ) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each warm question (``rounds`` fresh engines on ``workdir``, after one unmeasured)."""
    from kueri.serve.engine import Engine

    walls: list[float] = []
    cpus: list[float] = []
    for round_ in range(rounds + 1):
        engine = Engine(**source, workdir=workdir)
        engine.start(preembed=False)
        try:
            for question in asked:
                started, cpu = time.perf_counter(), time.process_time()
                engine.ask(question, k=k)
                if round_:
                    walls.append(time.perf_counter() - started)
                    cpus.append(time.process_time() - cpu)
        finally:
            engine.close()
    return walls, cpus


def main(argv: Sequence[str] | None = None) -> int:
    parser = script_parser(__doc__)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--corpus", default=str(resources.sample() / "passages.jsonl.gz"))
    source.add_argument("--index")
    parser.add_argument("--questions", type=int, default=16, help="questions asked per phase (%(default)s)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--phases", nargs="+", choices=["cold", "warm", "repeat"], default=["cold", "warm", "repeat"],
                        help="without cold, every level shares one work folder warmed by an unmeasured pass")
    parser.add_argument("--workdir", default="/tmp/kueri-bench-serve", help="where the work folders go")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--burst", type=int, help="measure the bounded queue: this many cold questions at once")
    parser.add_argument("--max-wait", type=float, default=60.0,
                        help="the server's --max-wait for --burst (%(default)s)")
    parser.add_argument("--in-process", type=int, metavar="ROUNDS",
                        help="measure warm questions in this process instead, ROUNDS fresh engines (see above)")
    args = parser.parse_args(argv)
    root = Path(args.workdir)
    base = root / "base"
    source = ["--index", args.index] if args.index else ["--corpus", args.corpus]

    def command(workdir: Path) -> list[str]:
        return [sys.executable, "-m", "kueri", "serve", *source, "--port", "0", "--workdir", str(workdir),
                "--no-preembed"]

    with Server(command(base)) as prepared:  # builds (or reuses) the index once
        print(f"prepared {base} in {prepared.started_seconds:.1f} s", file=sys.stderr)
    if args.burst:
        workdir = root / "burst"
        fresh_workdir(base, workdir)
        paths = [f"/api/search?{urllib.parse.urlencode({'q': q, 'k': args.k})}" for q in distinct(args.burst)]
        assert len(set(paths)) == len(paths), "the burst's questions must differ"
        with Server([*command(workdir), "--max-wait", str(args.max_wait)]) as server:
            started = time.perf_counter()
            results = burst(server, paths)
            wall = time.perf_counter() - started
        answered = [took for status, took, _ in results if status == 200]
        refused = [took for status, took, _ in results if status == 503]
        others = [status for status, _, _ in results if status not in (200, 503)]
        waits = sorted({int(r) for status, _, r in results if status == 503 and r})
        print("| questions at once | limit s | answered | refused (503) | other | longest answered s | "
              "longest refused s | longest of all s | Retry-After s | wall s |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        print(f"| {len(results)} | {args.max_wait:g} | {len(answered)} | {len(refused)} | {len(others)} | "
              f"{max(answered, default=0):.2f} | {max(refused, default=0):.2f} | "
              f"{max(took for _, took, _ in results):.2f} | {', '.join(map(str, waits)) or '-'} | {wall:.1f} |")
        if args.json:
            Path(args.json).write_text(json.dumps([{"status": s_, "seconds": t, "retry_after": r}
                                                   for s_, t, r in results], indent=1))
        return 1 if others or max(took for _, took, _ in results) > args.max_wait + 1 else 0
    asked = questions(args.questions)
    if args.in_process:
        workdir = root / "in-process"
        fresh_workdir(base, workdir)
        walls, cpus = in_process({"index": args.index} if args.index else {"corpus": args.corpus}, workdir, asked,
                                 args.in_process, args.k)
        print(f"in process, warm: {len(walls)} questions, p50 {statistics.median(walls):.2f} s (CPU "
              f"{statistics.median(cpus):.2f} s), mean {statistics.mean(walls):.2f} s, max {max(walls):.2f} s")
        return 0
    paths = [f"/api/search?{urllib.parse.urlencode({'q': q, 'k': args.k})}" for q in asked]
    rows = []

    def record(clients: int, phase: str, values: list[float], wall: float) -> None:
        rows.append({"clients": clients, "phase": phase, **summary(values, wall)})
        row = rows[-1]
        print(f"clients {clients:2d} {phase:6s}: p50 {row['p50']:.2f} s, p95 {row['p95']:.2f} s, "
              f"max {row['max']:.2f} s, {row['per_second']:.2f} questions/s (n {row['n']})",
              file=sys.stderr, flush=True)

    if "cold" not in args.phases:  # one work folder for every level, its embeddings made by one unmeasured pass
        workdir = root / "warm"
        fresh_workdir(base, workdir)
        with Server(command(workdir)) as server:
            ask_all(server, paths, 2)
    for clients in args.clients:
        if "cold" in args.phases:
            workdir = root / f"clients-{clients}"
            fresh_workdir(base, workdir)
            with Server(command(workdir)) as server:
                record(clients, "cold", *ask_all(server, paths, clients))
        with Server(command(workdir)) as server:
            if "warm" in args.phases:
                record(clients, "warm", *ask_all(server, paths, clients))
            if "repeat" in args.phases:
                if "warm" not in args.phases:
                    ask_all(server, paths, clients)
                record(clients, "repeat", *ask_all(server, paths, clients))
    print("| clients | phase | questions | p50 s | p95 s | max s | questions/s |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['clients']} | {row['phase']} | {row['n']} | {row['p50']:.2f} | {row['p95']:.2f} | "
              f"{row['max']:.2f} | {row['per_second']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    run_script(main)
