#!/usr/bin/env python3
"""The cost of Ray on one machine: kueri's local commands vs the same commands on a loopback Ray cluster.

    .venv/bin/python benchmarks/bench_ray.py                         # 200,000 synthetic passages
    .venv/bin/python benchmarks/bench_ray.py --passages 868655 --quality-passages 100000
    .venv/bin/python benchmarks/bench_ray.py --parts runs --run-passages 20000 --run-topics 200

Starts its own Ray head on 127.0.0.1 with as many CPUs as the machine has (and stops only that one after),
then times, as separate processes:
``kueri index`` (2 local worker processes) vs ``kueri index --ray`` (shards through the object store)
and ``kueri quality offline --workers N`` vs ``--ray``, checking that each pair's outputs are the same;
``runs``: ``kueri run`` (the default configuration, each from a cold work folder: index, embeddings, models) vs
``kueri run --ray`` on the sample's 50 topics and on ``--run-topics`` synthetic topics over a synthetic corpus,
checking that the run files are the same bytes, with the Ray run's own summary (tasks, how many at once, the
workers' peak memory).
Prints wall times and the per-passage costs the sizing in docs/scale-out.md is computed from.
"""

from __future__ import annotations

import filecmp
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from xml.sax.saxutils import escape

from kueri.cli.script import run_script, script_parser
from kueri.scaleout import start_local_cluster, stop_local_cluster

ROOT = Path(__file__).resolve().parent.parent

RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def timed(command: list[str], env: dict[str, str]) -> float:
    return timed_run(command, env)[0]


def timed_run(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds and stderr of ``command`` (exits the benchmark when it fails)."""
    started = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"bench_ray: {' '.join(command)} failed:\n{result.stderr}")
    return time.perf_counter() - started, result.stderr


def synthetic_topics(count: int, out: Path, seed: int = 0) -> Path:
    """``count`` comparative topics made of the sample topics' objects in new pairs (deterministic): questions the
    synthetic corpus (the sample's sentences) has passages for."""
    from kueri.parse import read_topics
    from kueri.resources import sample

    objects = sorted({name for topic in read_topics(sample() / "topics.xml") for name in topic.objects})
    rng = random.Random(seed)
    lines = ["<topics>"]
    for number in range(1, count + 1):
        first, second = rng.sample(objects, 2)
        lines += ["<topic>", f"<number>{number}</number>",
                  f"<title>Which is better, {escape(first)} or {escape(second)}?</title>",
                  f"<objects>{escape(first)}, {escape(second)}</objects>", "<description>synthetic</description>",
                  "<narrative>synthetic</narrative>", "</topic>"]
    out.write_text("\n".join([*lines, "</topics>", ""]), encoding="utf-8")
    return out


def run_pair(name: str, corpus: Path, topics: Path, work: Path, address: str, env: dict[str, str],
             python: str) -> tuple[str, int, float, float, str]:
    """The default configuration here and on Ray, each from a cold work folder; the row for the table."""
    import shutil

    from kueri.parse import read_topics

    for side in ("local", "ray"):
        shutil.rmtree(work / f"run-{name}-{side}", ignore_errors=True)
    command = [python, "-m", "kueri", "run", "--corpus", str(corpus), "--topics", str(topics)]
    local, _ = timed_run([*command, "--output", str(work / f"run-{name}-local.txt"), "--workdir",
                          str(work / f"run-{name}-local"), "-q"], env)
    remote, err = timed_run([*command, "--output", str(work / f"run-{name}-ray.txt"), "--workdir",
                             str(work / f"run-{name}-ray"), "--ray", address], env)
    same = filecmp.cmp(work / f"run-{name}-local.txt", work / f"run-{name}-ray.txt", shallow=False)
    summary = next((line.split(";", 1)[1].strip() for line in err.splitlines() if "Ray run:" in line), "?")
    tasks = next((line.split(" on ")[0].split(": ", 1)[1] for line in err.splitlines() if "Ray run:" in line), "?")
    print(f"bench_ray: {name}: local {local:.1f} s, Ray {remote:.1f} s, files equal: {same}; {tasks}; {summary}",
          file=sys.stderr, flush=True)
    return name, len(read_topics(topics)), local, remote, f"files equal: {same}; {tasks}; {summary}"


def main() -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--passages", type=int, default=200_000)
    parser.add_argument("--quality-passages", type=int, default=50_000)
    parser.add_argument("--workdir", default=str(ROOT / "work" / "bench-ray"))
    parser.add_argument("--parts", default="index,quality,runs", help="which comparisons: index, quality, runs")
    parser.add_argument("--run-passages", type=int, default=20_000, help="the synthetic corpus of the runs")
    parser.add_argument("--run-topics", type=int, default=200, help="synthetic topics over it")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    cpus = os.cpu_count() or 1
    corpora = {}
    sizes = {args.passages} if "index" in parts else set()
    sizes |= {args.quality_passages} if "quality" in parts else set()
    sizes |= {args.run_passages} if "runs" in parts else set()
    for n in sorted(sizes):
        path = work / f"synthetic-{n}.jsonl.gz"
        if not path.exists():
            subprocess.run([python, "scripts/make_corpus.py", "--passages", str(n), "--out", str(path)], cwd=ROOT,
                           check=True)
        corpora[n] = path
    env = {**os.environ, **RAY_ENV}
    # The benchmark's own head (own temp folder, ports, session): stopping it leaves any other Ray cluster
    # on the machine running, which `ray stop` would not.
    head = start_local_cluster(cpus, env=RAY_ENV)
    address = head.address
    rows = []
    run_rows = []
    try:
        if "runs" in parts:
            from kueri.resources import sample

            run_rows.append(run_pair("sample", sample() / "passages.jsonl.gz", sample() / "topics.xml", work,
                                     address, env, python))
            topics = synthetic_topics(args.run_topics, work / f"topics-{args.run_topics}.xml")
            run_rows.append(run_pair(f"synthetic-{args.run_passages}", corpora[args.run_passages], topics, work,
                                     address, env, python))
        if "index" in parts:
            corpus = str(corpora[args.passages])
            index = [python, "-m", "kueri", "index", "--corpus", corpus, "--config", "row-01", "-q"]
            local = timed([*index, "--index", str(work / "index-local")], env)
            remote = timed([*index, "--index", str(work / "index-ray"), "--ray", address], env)
            same = filecmp.cmp(work / "index-local" / "ids.txt", work / "index-ray" / "ids.txt", shallow=False)
            manifest = json.loads((work / "index-ray" / "kueri-index.json").read_text())
            rows.append(("index", args.passages, local, remote,
                         f"ids equal: {same}, {manifest['build']['shards']} shards"))
        if "quality" in parts:
            corpus = str(corpora[args.quality_passages])
            quality = [python, "-m", "kueri", "quality", "offline", "--corpus", corpus, "-q"]
            local = timed([*quality, "--scores", str(work / "quality-local.tsv"), "--workers", str(cpus)], env)
            remote = timed([*quality, "--scores", str(work / "quality-ray.tsv"), "--ray", address], env)
            same = filecmp.cmp(work / "quality-local.tsv", work / "quality-ray.tsv", shallow=False)
            rows.append(("quality offline", args.quality_passages, local, remote, f"files equal: {same}"))
    finally:
        stop_local_cluster(head)
    print(f"{cpus} CPUs, Ray head on {address}")
    if rows:
        print("| command | passages | local s | Ray s | Ray / local | local passages/s/core | check |")
        print("|---|---|---|---|---|---|---|")
    for name, n, local, remote, check in rows:
        ratio, rate = remote / local, n / local / cpus
        print(f"| {name} | {n:,} | {local:.1f} | {remote:.1f} | {ratio:.2f} | {rate:.0f} | {check} |")
    if run_rows:
        print("| kueri run (default) | topics | local s | Ray s | Ray / local | local s a topic | check |")
        print("|---|---|---|---|---|---|---|")
        for name, n, local, remote, check in run_rows:
            print(f"| {name} | {n} | {local:.1f} | {remote:.1f} | {remote / local:.2f} | {local / n:.2f} | {check} |")
    return 0


if __name__ == "__main__":
    run_script(main)
