#!/usr/bin/env python3
"""The cost of Ray on one machine: kueri's local commands vs the same commands on a loopback Ray cluster.

    .venv/bin/python benchmarks/bench_ray.py                         # 200,000 synthetic passages
    .venv/bin/python benchmarks/bench_ray.py --passages 868655 --quality-passages 100000

Starts its own Ray head on 127.0.0.1 with as many CPUs as the machine has (and stops only that one after),
then times, as separate processes:
``kueri index`` (2 local worker processes) vs ``kueri index --ray`` (shards through the object store)
and ``kueri quality offline --workers N`` vs ``--ray``, checking that each pair's outputs are the same.
Prints wall times and the per-passage costs the sizing in docs/scale-out.md is computed from.
"""

from __future__ import annotations

import filecmp
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from kueri.cli.script import run_script, script_parser
from kueri.scaleout import start_local_cluster, stop_local_cluster

ROOT = Path(__file__).resolve().parent.parent

RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"bench_ray: {' '.join(command)} failed:\n{result.stderr}")
    return time.perf_counter() - started


def main() -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--passages", type=int, default=200_000)
    parser.add_argument("--quality-passages", type=int, default=50_000)
    parser.add_argument("--workdir", default=str(ROOT / "work" / "bench-ray"))
    args = parser.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    cpus = os.cpu_count() or 1
    corpora = {}
    for n in sorted({args.passages, args.quality_passages}):
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
    try:
        corpus = str(corpora[args.passages])
        index = [python, "-m", "kueri", "index", "--corpus", corpus, "--config", "row-01", "-q"]
        local = timed([*index, "--index", str(work / "index-local")], env)
        remote = timed([*index, "--index", str(work / "index-ray"), "--ray", address], env)
        same = filecmp.cmp(work / "index-local" / "ids.txt", work / "index-ray" / "ids.txt", shallow=False)
        manifest = json.loads((work / "index-ray" / "kueri-index.json").read_text())
        rows.append(("index", args.passages, local, remote, f"ids equal: {same}, {manifest['build']['shards']} shards"))
        corpus = str(corpora[args.quality_passages])
        quality = [python, "-m", "kueri", "quality", "offline", "--corpus", corpus, "-q"]
        local = timed([*quality, "--scores", str(work / "quality-local.tsv"), "--workers", str(cpus)], env)
        remote = timed([*quality, "--scores", str(work / "quality-ray.tsv"), "--ray", address], env)
        same = filecmp.cmp(work / "quality-local.tsv", work / "quality-ray.tsv", shallow=False)
        rows.append(("quality offline", args.quality_passages, local, remote, f"files equal: {same}"))
    finally:
        stop_local_cluster(head)
    print(f"{cpus} CPUs, Ray head on {address}")
    print("| command | passages | local s | Ray s | Ray / local | local passages/s/core | check |")
    print("|---|---|---|---|---|---|---|")
    for name, n, local, remote, check in rows:
        ratio, rate = remote / local, n / local / cpus
        print(f"| {name} | {n:,} | {local:.1f} | {remote:.1f} | {ratio:.2f} | {rate:.0f} | {check} |")
    return 0


if __name__ == "__main__":
    run_script(main)
