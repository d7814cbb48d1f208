#!/usr/bin/env python3
"""The default run end to end at full size: wall time per stage and peak memory of the process tree.

    .venv/bin/python benchmarks/bench_default.py                      # 868,655 synthetic passages
    .venv/bin/python benchmarks/bench_default.py --passages 200000
    .venv/bin/python benchmarks/bench_default.py --input kueri/resources/sample   # the shipped sample
    .venv/bin/python benchmarks/bench_default.py --input kueri/resources/sample --reference OLD --repeat 2

Runs ``./my-software.sh -i IN -o OUT -w WORK`` (the default configuration, nothing cached: a fresh work
folder) on the synthetic corpus of ``scripts/make_corpus.py`` with the official topics, reads its log as
it comes (each line time-stamped) and samples the resident memory of the whole process tree (indexing
workers and JVMs included) every 0.1 s. Prints the stages' wall times and the peak.

``--reference OLD``: also runs the checkout OLD's ``my-software.sh`` (e.g. a ``git worktree`` of an earlier
commit; run with this checkout's Python environment) on the same input, each with nothing cached, alternating
(new, old, new, old, ... ``--repeat`` times), and prints side by side, from each run's own log line
``second stage: ...; N s in all``, the second stage's seconds and each encoder's, with the ratio of the medians.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
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
    # The encoders' share is in the second stage's own log line (printed after the table).
    ("second stage: features, embeddings, models", "second stage:"),
    ("stance", "stance:"),
    ("write", "wrote "),
]


#: The second stage's own summary line: its encoders' seconds and its total.
SECOND_STAGE = re.compile(r"second stage: .*?; ([0-9.]+) s in all")
ENCODER_SECONDS = re.compile(r"(minilm|e5) ([0-9.]+) s")


def second_stage_seconds(log: Path) -> dict[str, float]:
    """The second stage's seconds in all and per encoder, from a run's log (the last summary line)."""
    figures: dict[str, float] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        match = SECOND_STAGE.search(line)
        if match:
            figures = {"second stage": float(match[1])}
            figures.update((name, float(value)) for name, value in ENCODER_SECONDS.findall(line.split("neural", 1)[-1]))
    return figures


def timed_run(checkout: Path, inputs: Path, work: Path, env: dict[str, str]) -> dict[str, float]:
    """One run of ``checkout``'s my-software.sh with nothing cached: its wall seconds and second-stage figures."""
    fresh = work / "work"
    shutil.rmtree(fresh, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    log = work / "run.log"
    started = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        status = subprocess.run([str(checkout / "my-software.sh"), "-i", str(inputs), "-o", str(work / "out"), "-w",
                                 str(fresh)], cwd=checkout, stderr=out, env=env).returncode
    wall = time.perf_counter() - started
    if status != 0:
        sys.exit(f"bench_default: the run of {checkout} failed (exit {status}); see {log}")
    return {"wall": wall, **second_stage_seconds(log)}


def side_by_side(reference: Path, inputs: Path, work: Path, repeat: int) -> int:
    """This checkout against ``reference`` on ``inputs``, alternating, each run cold; prints medians and ratios."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "KUERI_PYTHON": sys.executable}
    figures: dict[str, list[dict[str, float]]] = {"this": [], "reference": []}
    for round_ in range(repeat):
        for name, checkout in (("this", ROOT), ("reference", reference)):
            seen = timed_run(checkout, inputs, work / name, env)
            figures[name].append(seen)
            print(f"round {round_ + 1}, {name}: " + ", ".join(f"{k} {v:.1f} s" for k, v in seen.items()), flush=True)
            shutil.copy(work / name / "out" / "run.txt", work / f"{name}-run.txt")
    print(f"\n{inputs}, nothing cached, {repeat} run(s) each, alternating; medians ({os.cpu_count()} cores)")
    print(f"| seconds | this checkout | {reference.name} | ratio |")
    print("|---|---|---|---|")
    for key in ("second stage", "minilm", "e5", "wall"):
        mine = [f[key] for f in figures["this"] if key in f]
        theirs = [f[key] for f in figures["reference"] if key in f]
        if mine and theirs:
            a, b = statistics.median(mine), statistics.median(theirs)
            print(f"| {key} | {a:.1f} | {b:.1f} | {a / b:.2f} |")
    return 0


def main() -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--passages", type=int, default=868_655)
    parser.add_argument("--input", help="a TIRA input folder to run on instead (topics.xml, passages.jsonl.gz)")
    parser.add_argument("--workdir", default=str(ROOT / "work" / "bench-default"))
    parser.add_argument("--reference", type=Path, help="another checkout to run side by side (e.g. an earlier commit)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, alternating (with --reference)")
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
    if args.reference:
        return side_by_side(args.reference.resolve(), inputs, work, args.repeat)
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
    print("second stage, from its own log: " + ", ".join(f"{k} {v:.1f} s" for k, v in
                                                         second_stage_seconds(work / "default.log").items()))
    print(f"peak RSS of the process tree: {sampler.peak_rss / 2**20:.0f} MB "
          f"(anonymous {sampler.peak_anon / 2**20:.0f} MB, up to {sampler.peak_processes} processes)")
    return 0


if __name__ == "__main__":
    run_script(main)
