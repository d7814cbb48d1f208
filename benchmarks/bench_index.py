#!/usr/bin/env python3
"""Benchmark kueri's indexing and search against Anserini's IndexCollection, in one run.

    .venv/bin/python benchmarks/bench_index.py                      # the full-size synthetic corpus
    .venv/bin/python benchmarks/bench_index.py --passages 100000 --repeat 2
    .venv/bin/python benchmarks/bench_index.py --corpus passages.jsonl.gz --anserini-input file

For each repetition it runs, as separate processes and in alternating order (so slow drifts of a
shared machine hit both):

* **kueri**: ``python -m kueri index --config row-01`` (lucene stoplist; fields id stored,
  contents stored with term vectors, docs+freqs, no positions, docT5Query), on Java threads of one
  JVM (kueri's Java helper); ``kueri-one-writer`` is the same build without the helper
  (``KUERI_JAVA_HELPER=0``: one writer in one thread);
* **Anserini** ``IndexCollection`` from the same fat jar on the same passages, with the options
  closest to that: ``-collection JsonCollection -generator DefaultLuceneDocumentGenerator
  -threads 2 -storeContents -storeDocvectors -stemmer none`` (contents stored, docs+freqs, term
  vectors, its default Lucene stopwords; its term vectors also hold positions and it adds a
  doc-values copy of the id, which kueri does not). Anserini parallelises over input FILES, so on
  the one-file corpus it indexes with one thread; ``split`` gives it the corpus cut into
  ``--split-files`` files (8), its best case (an input kueri is not given);

measuring wall time (process start to exit, JVM start included), CPU time, peak resident memory of
the whole process tree (sampled from /proc every 0.1 s: every process and JVM
included) and index size. After each kueri build, a fresh process times search on it: the 50
topics at depth 1000 with BM25 (row-01), with the objects filter (row-08) and relevance feedback
(:mod:`kueri.lucene.feedback`, ``missing="skip"``; the team's judgments with each judged passage mapped
onto a passage of the corpus when the corpus lacks it, so RF has real work to do).

Prints medians with min-max over the repetitions and writes all measurements as JSON next to the
indexes (``--workdir``, default ``work/bench``, ignored by git).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kueri.cli.script import run_script, script_parser

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_PASSAGES = 868_655
DEFAULT_WORKDIR = ROOT / "work" / "bench"
TOPICS = ROOT / "kueri" / "resources" / "sample" / "topics.xml"
RF_JUDGMENTS = ROOT / "kueri" / "resources" / "qrels" / "kueri-manual-qrels.txt"
ANSERINI_OPTIONS = [
    "-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator",
    "-storeContents", "-storeDocvectors", "-stemmer", "none",
]
PAGE = os.sysconf("SC_PAGE_SIZE")


# --- measuring a process tree -------------------------------------------------------------------


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # the command name (2nd field) may hold spaces and parentheses: split after the last ')'
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def _rss(pid: int) -> tuple[int, int]:
    """(VmRSS, RssAnon) of a process in bytes; (0, 0) once it is gone."""
    rss = anon = 0
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("RssAnon:"):
                    anon = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, anon


class TreeSampler(threading.Thread):
    """Peak of the summed resident memory of a process and all its descendants."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.peak_rss = 0
        self.peak_anon = 0
        self.peak_processes = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            children = _children_map()
            tree, stack = [], [self.pid]
            while stack:
                pid = stack.pop()
                tree.append(pid)
                stack.extend(children.get(pid, []))
            sizes = [_rss(pid) for pid in tree]
            self.peak_rss = max(self.peak_rss, sum(s[0] for s in sizes))
            self.peak_anon = max(self.peak_anon, sum(s[1] for s in sizes))
            self.peak_processes = max(self.peak_processes, sum(1 for s in sizes if s[0]))
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


@dataclass
class Measurement:
    tool: str
    wall_s: float
    cpu_s: float
    peak_rss_bytes: int
    peak_anon_bytes: int
    processes: int
    passages: int
    index_bytes: int
    load_before: float
    load_after: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.passages / self.wall_s


def measure(command: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[float, float, TreeSampler, int]:
    """Run ``command`` to its end: (wall s, CPU s of it and its waited-for children, sampler, status)."""
    with open(log, "wb") as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        sampler = TreeSampler(process.pid)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        sampler.stop()
        process.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, sampler, process.returncode


def directory_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run_kueri(corpus: Path, index: Path, logs: Path, workers: int | None, rep: int, tool: str = "kueri") -> Measurement:
    if index.exists():
        shutil.rmtree(index)
    env = dict(os.environ)
    if tool == "kueri-one-writer":
        env["KUERI_JAVA_HELPER"] = "0"
    if workers:
        env["KUERI_WORKERS"] = str(workers)
    command = [sys.executable, "-m", "kueri", "index", "--corpus", str(corpus), "--index", str(index),
               "--config", "row-01", "--quiet"]
    load = os.getloadavg()[0]
    wall, cpu, sampler, status = measure(command, logs / f"{tool}-{rep}.log", env)
    if status != 0:
        raise SystemExit(f"kueri failed ({status}): see {logs / f'{tool}-{rep}.log'}")
    manifest = json.loads((index / "kueri-index.json").read_text())
    return Measurement(tool, wall, cpu, sampler.peak_rss, sampler.peak_anon, sampler.peak_processes,
                       int(manifest["indexed"]), directory_size(index), load, os.getloadavg()[0],
                       {"build": manifest.get("build", {"workers": 1}), "seconds_in_build": manifest["seconds"]})


def run_anserini(input_dir: Path, index: Path, logs: Path, threads: int, variant: str, rep: int) -> Measurement:
    from kueri.lucene.jvm import find_jar, find_java_home

    if index.exists():
        shutil.rmtree(index)
    java = str(find_java_home() / "bin" / "java")
    command = [java, "-cp", str(find_jar()), "io.anserini.index.IndexCollection", *ANSERINI_OPTIONS,
               "-threads", str(threads), "-input", str(input_dir), "-index", str(index)]
    log = logs / f"anserini-{variant}-{rep}.log"
    load = os.getloadavg()[0]
    wall, cpu, sampler, status = measure(command, log)
    text = log.read_text(errors="replace")
    if status != 0 or "Indexing Complete" not in text:
        raise SystemExit(f"Anserini failed ({status}): see {log}")
    indexed = int(text.split("Indexing Complete!")[1].split("documents")[0].strip().replace(",", ""))
    return Measurement(f"anserini-{variant}", wall, cpu, sampler.peak_rss, sampler.peak_anon, sampler.peak_processes,
                       indexed, directory_size(index), load, os.getloadavg()[0], {"threads": threads})


# --- inputs ---------------------------------------------------------------------------------------


def ensure_corpus(args: argparse.Namespace) -> Path:
    if args.corpus:
        return Path(args.corpus)
    corpus = Path(args.workdir) / f"synthetic-{args.passages}.jsonl.gz"
    if not corpus.is_file():
        print(f"generating {corpus} ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_corpus.py"), "--passages", str(args.passages),
                        "--out", str(corpus)], check=True)
    return corpus


def anserini_inputs(corpus: Path, workdir: Path, variants: list[str], files: int) -> dict[str, Path]:
    """Input folders for Anserini: the corpus file itself, and/or the corpus cut into ``files`` files."""
    inputs: dict[str, Path] = {}
    if "file" in variants:
        folder = workdir / "anserini-input-file"
        folder.mkdir(parents=True, exist_ok=True)
        link = folder / corpus.name
        if not link.exists():
            link.symlink_to(corpus.resolve())
        inputs["file"] = folder
    if "split" in variants:
        folder = workdir / f"anserini-input-split{files}-{corpus.stem}"
        done = folder / ".complete"
        if not done.exists():  # written once, outside any timing
            folder.mkdir(parents=True, exist_ok=True)
            opener = gzip.open if corpus.name.endswith(".gz") else open
            with opener(corpus, "rb") as handle:
                lines = handle.readlines()
            size = -(-len(lines) // files)
            for part, chunk in enumerate(lines[i : i + size] for i in range(0, len(lines), size)):
                with gzip.open(folder / f"part-{part}.jsonl.gz", "wb", compresslevel=6) as out:
                    out.writelines(chunk)
            done.touch()
        inputs["split"] = folder
    return inputs


def rf_judgments(index: Path, target: Path) -> Path:
    """The team's judgments, each passage the corpus lacks mapped onto one of its passages (crc32)."""
    ids = (index / "ids.txt").read_text(encoding="utf-8").split("\n")[:-1]
    present = set(ids)
    lines = []
    for line in RF_JUDGMENTS.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[2] not in present:
            fields[2] = ids[zlib.crc32(fields[2].encode()) % len(ids)]
        lines.append(" ".join(fields))
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


# --- search (in a fresh process) ------------------------------------------------------------------


def search_main(index_dir: str, judgments: str, passes: int) -> None:
    """Time search over ``index_dir`` in this (fresh) process; print JSON on stdout."""
    started = time.perf_counter()
    from kueri.lucene.jvm import lucene

    lucene().IndexSearcher  # noqa: B018 - starts the JVM and looks up a class, like any first use
    jvm = time.perf_counter() - started
    from kueri.config import get_config
    from kueri.lucene.feedback import FeedbackConfig, feedback_run
    from kueri.lucene.index import LuceneIndex
    from kueri.parse import read_topics
    from kueri.pipeline import search_run

    topics = read_topics(TOPICS)
    t0 = time.perf_counter()
    index = LuceneIndex(index_dir)
    result: dict[str, Any] = {"jvm_start_s": jvm, "open_s": time.perf_counter() - t0}
    rf = FeedbackConfig(judgments=judgments, missing="skip")
    numbers = [t.number for t in topics]
    tasks = {
        "bm25": lambda: search_run(index, get_config("row-01"), topics),
        "filter": lambda: search_run(index, get_config("row-08"), topics),
        "rf": lambda: feedback_run(index, rf, numbers),
    }
    for name, task in tasks.items():
        times = []
        for _ in range(passes):
            t0 = time.perf_counter()
            run = task()
            times.append(time.perf_counter() - t0)
        result[name] = {"first_s": times[0], "warm_s": statistics.median(times[1:]) if passes > 1 else times[0],
                        "topics": len(run), "hits": sum(len(h) for h in run.values())}
    result["first_all_s"] = result["open_s"] + sum(result[n]["first_s"] for n in ("bm25", "filter", "rf"))
    index.close()
    print(json.dumps(result))


def run_search(index: Path, judgments: Path, passes: int, logs: Path, rep: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--search-worker", str(index), "--judgments", str(judgments),
               "--passes", str(passes)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    (logs / f"search-{rep}.log").write_text(done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"search failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- report ---------------------------------------------------------------------------------------


def spread(values: list[float], fmt: str = "{:.1f}") -> str:
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def report(results: dict[str, list[Measurement]], searches: list[dict[str, Any]], corpus: Path) -> str:
    lines = [
        f"corpus: {corpus} ({corpus.stat().st_size / 1e6:.0f} MB), {os.cpu_count()} cores; "
        f"median (min–max) of {max(len(v) for v in results.values())} repetition(s)",
        "",
        "| indexer | wall s | passages/s | CPU s | peak RSS (tree) MB | peak anon MB | index MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for tool, runs in results.items():
        lines.append(
            f"| {tool} | {spread([m.wall_s for m in runs])} | {spread([m.rate for m in runs], '{:.0f}')} "
            f"| {spread([m.cpu_s for m in runs])} | {spread([m.peak_rss_bytes / 1e6 for m in runs], '{:.0f}')} "
            f"| {spread([m.peak_anon_bytes / 1e6 for m in runs], '{:.0f}')} "
            f"| {statistics.median(m.index_bytes for m in runs) / 1e6:.0f} |"
        )
    if "kueri" in results:
        kueri_walls = [m.wall_s for m in results["kueri"]]
        for tool, runs in results.items():
            if tool == "kueri" or not runs:
                continue
            ratios = [a.wall_s / k for a, k in zip(runs, kueri_walls, strict=False)]
            lines.append(f"\nspeed ratio {tool} wall / kueri wall: {spread(ratios, '{:.2f}')} "
                         "(>= 1: kueri as fast or faster)")
    if searches:
        lines += ["", "| search (fresh process, 50 topics x 1000) | first pass s | warm s | topics | hits |",
                  "|---|---|---|---|---|"]
        lines.append(f"| JVM start | {spread([s['jvm_start_s'] for s in searches], '{:.2f}')} | | | |")
        lines.append(f"| open index (ids.txt, reader) | {spread([s['open_s'] for s in searches], '{:.2f}')} | | | |")
        for name, label in (("bm25", "BM25 (row-01)"), ("filter", "BM25 + objects filter (row-08)"),
                            ("rf", "relevance feedback, missing=skip")):
            lines.append(
                f"| {label} | {spread([s[name]['first_s'] for s in searches], '{:.2f}')} "
                f"| {spread([s[name]['warm_s'] for s in searches], '{:.2f}')} | {searches[0][name]['topics']} "
                f"| {searches[0][name]['hits']} |"
            )
        lines.append(
            f"| open + all three, first pass (after the JVM started) "
            f"| {spread([s['first_all_s'] for s in searches], '{:.2f}')} | | | |"
        )
    loads = [m.load_before for runs in results.values() for m in runs]
    if loads:
        lines.append(f"\n1-minute load average before the runs: {spread(loads, '{:.2f}')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, quiet=False)
    parser.add_argument("--corpus", help="a corpus file (default: the synthetic corpus, generated if missing)")
    parser.add_argument("--passages", type=int, default=DEFAULT_PASSAGES, help="size of the synthetic corpus")
    parser.add_argument("--workdir", default=str(DEFAULT_WORKDIR))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, help="kueri indexing workers (default: kueri's own default)")
    parser.add_argument("--threads", type=int, default=2, help="Anserini -threads")
    parser.add_argument("--anserini-input", choices=["file", "split", "both", "none"], default="both",
                        help="Anserini reads the corpus file itself, the corpus cut into files, or both")
    parser.add_argument("--split-files", type=int, default=8, help="files the corpus is cut into for Anserini (8)")
    parser.add_argument("--kueri", choices=["threads", "one-writer", "both"], default="both",
                        help="kueri on Java threads (its default), one writer (without the Java helper), both")
    parser.add_argument("--no-search", action="store_true")
    parser.add_argument("--passes", type=int, default=3, help="search passes per process (the first is cold)")
    parser.add_argument("--search-worker", help=argparse.SUPPRESS)
    parser.add_argument("--judgments", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.search_worker:
        search_main(args.search_worker, args.judgments, args.passes)
        return 0

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    logs = workdir / "logs"
    logs.mkdir(exist_ok=True)
    corpus = ensure_corpus(args)
    variants = {"both": ["file", "split"], "none": []}.get(args.anserini_input, [args.anserini_input])
    inputs = anserini_inputs(corpus, workdir, variants, args.split_files)
    kueris = {"threads": ["kueri"], "one-writer": ["kueri-one-writer"]}.get(args.kueri, ["kueri", "kueri-one-writer"])
    results: dict[str, list[Measurement]] = {**{k: [] for k in kueris}, **{f"anserini-{v}": [] for v in inputs}}
    searches: list[dict[str, Any]] = []
    kueri_index = workdir / "index-kueri"
    for rep in range(args.repeat):
        order = [*kueris, *inputs] if rep % 2 == 0 else [*inputs, *reversed(kueris)]
        for what in order:
            if what in kueris:
                m = run_kueri(corpus, kueri_index, logs, args.workers, rep, what)
                results[what].append(m)
                if what == "kueri" and not args.no_search:
                    judgments = rf_judgments(kueri_index, workdir / "rf-judgments.txt")
                    searches.append(run_search(kueri_index, judgments, args.passes, logs, rep))
            else:
                m = run_anserini(inputs[what], workdir / f"index-anserini-{what}", logs, args.threads, what, rep)
                results[f"anserini-{what}"].append(m)
            print(f"rep {rep} {m.tool}: {m.wall_s:.1f} s, {m.rate:.0f} passages/s, CPU {m.cpu_s:.1f} s, "
                  f"peak RSS {m.peak_rss_bytes / 1e6:.0f} MB ({m.processes} processes), "
                  f"index {m.index_bytes / 1e6:.0f} MB, load {m.load_before:.2f}", file=sys.stderr, flush=True)
    text = report(results, searches, corpus)
    print(text)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = workdir / f"results-{stamp}.json"
    out.write_text(json.dumps({"command": sys.argv, "corpus": str(corpus),
                               "results": {k: [asdict(m) for m in v] for k, v in results.items()},
                               "search": searches, "report": text}, indent=2))
    print(f"\n(all measurements: {out})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    run_script(main)
