#!/usr/bin/env python3
"""The default run end to end at full size: wall time per stage and peak memory of the process tree.

    .venv/bin/python benchmarks/bench_default.py                      # 868,655 synthetic passages
    .venv/bin/python benchmarks/bench_default.py --passages 200000
    .venv/bin/python benchmarks/bench_default.py --input kueri/resources/sample   # the shipped sample

Runs ``./my-software.sh -i IN -o OUT -w WORK`` (the default configuration, nothing cached: a fresh work
folder) on the synthetic corpus of ``scripts/make_corpus.py`` with the official topics, reads its log as
it comes (each line time-stamped) and samples the resident memory of the whole process tree (indexing
workers and JVMs included) every 0.1 s. Prints the stages' wall times and the peak.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench_index import TreeSampler

from kueri.cli.script import run_script, script_parser

ROOT = Path(__file__).resolve().parent.parent

#: A stage starts at the first log line containing its marker (in this order).
STAGES = [
    ("start (Python, JVM, configuration)", "kueri: configuration"),
    ("index", "indexing "),
    ("search (row 15), candidates' texts and quality", "read "),
    ("MiniLM embeddings", "MiniLM:"),
    ("e5 embeddings", "e5:"),
    ("second stage: queries, features, model", "second stage:"),
    ("stance", "stance:"),
    ("write", "wrote "),
]


def main() -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--passages", type=int, default=868_655)
    parser.add_argument("--input", help="a TIRA input folder to run on instead (topics.xml, passages.jsonl.gz)")
    parser.add_argument("--workdir", default=str(ROOT / "work" / "bench-default"))
    args = parser.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    if args.input:
        inputs = Path(args.input).resolve()
        described = f"{inputs}"
    else:
        inputs = work / f"in-{args.passages}"
        inputs.mkdir(parents=True, exist_ok=True)
        corpus = inputs / "passages.jsonl.gz"
        if not corpus.exists():
            subprocess.run([sys.executable, "scripts/make_corpus.py", "--passages", str(args.passages), "--out",
                            str(corpus)], cwd=ROOT, check=True)
        shutil.copy(ROOT / "kueri" / "resources" / "sample" / "topics.xml", inputs / "topics.xml")
        described = f"{args.passages:,} synthetic passages, official topics"
    fresh = work / "work"
    shutil.rmtree(fresh, ignore_errors=True)
    command = [str(ROOT / "my-software.sh"), "-i", str(inputs), "-o", str(work / "out"), "-w", str(fresh)]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    sampler = TreeSampler(process.pid)
    sampler.start()
    seen: dict[str, float] = {}
    assert process.stderr is not None
    with open(work / "default.log", "w", encoding="utf-8") as log:
        for line in process.stderr:
            now = time.perf_counter() - started
            log.write(f"{now:8.1f} {line}")
            for name, marker in STAGES:
                if name not in seen and marker in line:
                    seen[name] = now
    status = process.wait()
    total = time.perf_counter() - started
    sampler.stop()
    if status != 0:
        sys.exit(f"bench_default: the run failed (exit {status}); see {work / 'default.log'}")
    print(f"default run, {described}, nothing cached ({os.cpu_count()} cores)")
    print("| stage | starts at s | wall s |")
    print("|---|---|---|")
    marks = sorted((at, name) for name, at in seen.items())
    marks = [(name, at) for at, name in [(0.0, "process start"), *marks]] + [("end", total)]
    for (name, at), (_, following) in zip(marks, marks[1:], strict=False):
        print(f"| {name} | {at:.1f} | {following - at:.1f} |")
    print(f"| all | | {total:.1f} |")
    print(f"peak RSS of the process tree: {sampler.peak_rss / 2**20:.0f} MB "
          f"(anonymous {sampler.peak_anon / 2**20:.0f} MB, up to {sampler.peak_processes} processes)")
    return 0


if __name__ == "__main__":
    run_script(main)
