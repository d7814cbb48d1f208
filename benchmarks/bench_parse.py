#!/usr/bin/env python3
"""What reading a corpus costs in Python alone, before any Java call: the floor under indexing.

    .venv/bin/python benchmarks/bench_parse.py [--corpus work/bench/synthetic-868655.jsonl.gz] [--repeat 3]

Three passes over the same file, each timed alone (median and min-max over the repetitions):
gunzip and split lines; that plus ``json.loads`` per line; kueri's :class:`~kueri.parse.PassageReader`
(JSON, field checks, the ``<query>`` split, duplicate-id check), which is what the indexer consumes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kueri.parse import PassageReader  # noqa: E402

DEFAULT_CORPUS = ROOT / "work" / "bench" / "synthetic-868655.jsonl.gz"


def lines_only(path: Path) -> int:
    with gzip.open(path, "rb") as handle:
        return sum(1 for _ in handle)


def lines_and_json(path: Path) -> int:
    count = 0
    with gzip.open(path, "rb") as handle:
        for line in handle:
            json.loads(line)
            count += 1
    return count


def passage_reader(path: Path) -> int:
    return sum(1 for _ in PassageReader(path))


PASSES: dict[str, Callable[[Path], int]] = {
    "gunzip + split lines": lines_only,
    "+ json.loads": lines_and_json,
    "PassageReader (all checks)": passage_reader,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if not args.corpus.is_file():
        print(f"{args.corpus}: not found (make it with scripts/make_corpus.py or benchmarks/bench_index.py)",
              file=sys.stderr)
        return 2
    print(f"corpus: {args.corpus} ({args.corpus.stat().st_size / 1e6:.0f} MB); median (min-max) of {args.repeat}")
    print("| pass | s | passages/s |\n|---|---|---|")
    for name, read in PASSES.items():
        seconds, count = [], 0
        for _ in range(args.repeat):
            started = time.perf_counter()
            count = read(args.corpus)
            seconds.append(time.perf_counter() - started)
        median = statistics.median(seconds)
        print(f"| {name} | {median:.1f} ({min(seconds):.1f}-{max(seconds):.1f}) | {count / median:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
