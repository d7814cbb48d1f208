#!/usr/bin/env python3
"""What reading a corpus costs in Python alone, before any Java call: the floor under indexing.

    .venv/bin/python benchmarks/bench_parse.py [--corpus work/bench/synthetic-868655.jsonl.gz] [--repeat 3]

Passes over the same file, each timed alone (median and min-max over the repetitions): gunzip and
split lines with the standard library's ``gzip`` (the reference) and with ISA-L's ``igzip`` (what kueri
uses); ISA-L plus ``json.loads`` per line (the reference) and plus kueri's ``parse_json_line`` (orjson,
json for what orjson refuses); kueri's :class:`~kueri.parse.PassageReader` (all that, the field
checks, the ``<query>`` split, duplicate-id check), which is what the indexer consumes.
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from isal import igzip

from kueri.cli.script import run_script, script_parser
from kueri.parse import PassageReader
from kueri.parse.passages import parse_json_line

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_CORPUS = ROOT / "work" / "bench" / "synthetic-868655.jsonl.gz"


def stdlib_lines(path: Path) -> int:
    with gzip.open(path, "rb") as handle:
        return sum(1 for _ in handle)


def isal_lines(path: Path) -> int:
    with igzip.open(path, "rb") as handle:
        return sum(1 for _ in handle)


def lines_and(parse: Callable[[bytes], object]) -> Callable[[Path], int]:
    def read(path: Path) -> int:
        count = 0
        with igzip.open(path, "rb") as handle:
            for line in handle:
                parse(line)
                count += 1
        return count
    return read


def passage_reader(path: Path) -> int:
    return sum(1 for _ in PassageReader(path))


PASSES: dict[str, Callable[[Path], int]] = {
    "gzip (stdlib) + split lines": stdlib_lines,
    "igzip (ISA-L) + split lines": isal_lines,
    "igzip + json.loads": lines_and(json.loads),
    "igzip + parse_json_line (orjson)": lines_and(parse_json_line),
    "PassageReader (all checks)": passage_reader,
}


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, quiet=False)
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
    run_script(main)
