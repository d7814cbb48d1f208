#!/usr/bin/env python3
"""The stance stage alone: a run's hits labelled again, wall time and peak memory of the process tree.

    .venv/bin/python benchmarks/bench_stance.py --run RUN --input IN [--workers 2] [--depth 1000] [--model stance-v4]

``RUN`` is a run file (e.g. ``bench_default.py``'s ``out/run.txt`` of a full-size corpus) whose labels are dropped;
``IN`` the TIRA input folder it was made from (``topics.xml``, ``passages.jsonl.gz``). The texts of the run's hits
are read from the corpus first (not timed); then :func:`kueri.stance.label_run` labels the top ``--depth`` hits of
every topic with ``--workers`` processes, as the default run's stance stage does (its texts there come from the
index). Printed: the wall seconds, the peak RSS of this process and its workers (sampled every 0.1 s), whether the
labels are the run file's own, their SHA-1 and the machine's 1-minute load. To compare two checkouts, run this one's
script with each on ``PYTHONPATH``, alternating.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from bench_index import TreeSampler

from kueri.cli.script import run_script, script_parser
from kueri.parse import read_topics
from kueri.records import Hit
from kueri.runfile import read_run
from kueri.stance import label_run, load_model
from kueri.stance.label import corpus_texts, needed_ids


def main() -> int:
    parser = script_parser(__doc__, whole_doc=True, quiet=False)
    parser.add_argument("--run", type=Path, required=True, help="a run file whose hits are labelled again")
    parser.add_argument("--input", type=Path, required=True, help="the TIRA input folder the run was made from")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (%(default)s)")
    parser.add_argument("--depth", type=int, default=1000, help="hits labelled per topic (%(default)s)")
    parser.add_argument("--model", default=None, help="a stance model's name or file (default: kueri's default)")
    args = parser.parse_args()
    given = read_run(args.run)
    run = {qid: [Hit(hit.doc, hit.score) for hit in hits] for qid, hits in given.items()}
    texts = corpus_texts(args.input / "passages.jsonl.gz", needed_ids(run, args.depth))
    topics = read_topics(args.input / "topics.xml")
    model = load_model() if args.model is None else load_model(args.model)
    sampler = TreeSampler(os.getpid())
    sampler.start()
    started = time.perf_counter()
    labelled = label_run(run, topics, texts, depth=args.depth, model=model, workers=args.workers)
    wall = time.perf_counter() - started
    sampler.stop()
    labels = ",".join(hit.stance for hits in labelled.values() for hit in hits)
    same = labels == ",".join(hit.stance for hits in given.values() for hit in hits)
    print(f"stance of {sum(map(len, run.values())):,} hits ({args.workers} worker(s)): {wall:.1f} s, peak RSS of the "
          f"process tree {sampler.peak_rss / 2**20:.0f} MB (up to {sampler.peak_processes} processes); labels "
          f"{'the run file' if same else 'NOT the run file'}'s, sha1 {hashlib.sha1(labels.encode()).hexdigest()[:12]}; "
          f"load {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    run_script(main)
