#!/usr/bin/env python3
"""The stance passage model's cost on each base: cross-encoder inputs per second, MiniLM against e5-small.

    .venv/bin/python benchmarks/bench_stance_base.py --e5 FILE [--passages 200] [--repeat 3]

The inputs are what stance-v3's passage model reads (``scripts/train_stance_passages.py``): the pair ("x is better
than y", a web-passage set passage with its objects masked), both orders of the objects, up to 256 pieces, through
kueri's BERT graph (``CrossEncoder.states``, the graph's default threads). MiniLM's is the shipped sentence encoder
(``stance-encoder-v1.npz``), e5's the file ``scripts/train_stance_encoder.py --base e5 --out FILE`` wrote (the cost
does not depend on the weights, only on the base's twelve layers and its pieces). The runs alternate (MiniLM, e5,
MiniLM, ...), each after one small warm-up call; printed: the median inputs per second of each, the mean pieces per
input, and the machine's 1-minute load beside every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--e5", type=Path, required=True, help="a stance encoder tuned from e5-small")
    parser.add_argument("--passages", type=int, default=200, help="web-set passages, both orders each (%(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each base (%(default)s)")
    args = parser.parse_args()

    from kueri.encoders.cross import CrossEncoder, encode_pairs, pair_tokenizer
    from kueri.stance.encoders import HYPOTHESIS, SENTENCE_MODEL, masked_text
    from kueri.train.stance.passage_data import MAX_TOKENS, web_items

    items = web_items("train")[: args.passages]
    texts = [masked_text(i.passage.tokens) for i in items] + [masked_text(i.passage.swapped().tokens) for i in items]
    pairs = [(HYPOTHESIS, text) for text in texts]
    encoders = {}
    for name, path in (("minilm", SENTENCE_MODEL), ("e5", args.e5)):
        encoder = CrossEncoder(path, "the stance encoder's script")
        encoder.tokenizer = pair_tokenizer(MAX_TOKENS, encoder.base_name)
        assert encoder.base_name == name, f"{path} is tuned from {encoder.base_name}, not {name}"
        encoder.states(pairs[:8])  # opens the session
        pieces = statistics.mean(len(ids) for ids in encode_pairs(encoder.tokenizer, pairs))
        encoders[name] = (encoder, pieces)
    rates: dict[str, list[float]] = {name: [] for name in encoders}
    for run in range(args.repeat):
        for name, (encoder, _) in encoders.items():
            load = os.getloadavg()[0]
            started = time.perf_counter()
            encoder.states(pairs)
            seconds = time.perf_counter() - started
            rates[name].append(len(pairs) / seconds)
            print(f"run {run + 1} {name:6s}: {len(pairs)} inputs in {seconds:.1f} s, {rates[name][-1]:.1f} inputs/s "
                  f"(load {load:.1f})", flush=True)
    summary = {name: {"inputs_per_s": statistics.median(rates[name]), "mean_pieces": encoders[name][1]}
               for name in encoders}
    summary["e5_cost_over_minilm"] = summary["minilm"]["inputs_per_s"] / summary["e5"]["inputs_per_s"]
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
