#!/usr/bin/env python3
"""How close the encoders run to what this CPU's matrix products can do: a roofline in the same run.

    .venv/bin/python benchmarks/bench_roofline.py [--passages 200] [--repeat 3] [--threads N]
        [--encoders minilm e5] [--variant SETTINGS ...]

Per encoder: the passages embedded, their mean word pieces (after the encoder's cut), the work per
passage in GFLOP and what padding adds for the batches as they are run, then passages/s, the GFLOP/s
achieved and their ratio to the limit measured beside each repetition: onnxruntime's float32 ``MatMul`` of the
encoders' own shapes ([B, n, 384] x [384, 384], [B, n, 384] x [384, 1536], [B, n, 1536] x [1536, 384],
a constant right side as in the encoders, run as they run: a call per core at once, one thread each),
weighted as a BERT layer mixes them (four 384 x 384 products, one of each other).

The work of a passage of n pieces, per layer and per piece: 2 (4 h^2 + 2 h i) for the linear layers
(q, k, v, attention output; intermediate and output) and 2 * 2 n h for the attention (Q K^T and the
weights times V), h = 384, i = 1536; summed over the passages, each at its own length. The layer norms,
GELU, the softmax and the embeddings are left out (well under 1 %). Padding: the same sums over the
batches as run, every passage at its batch's longest.

``--variant`` compares settings, A/B alternating (each repetition runs every variant once, in turn),
and says whether each one's embeddings have the same float32 bits as the first variant's. A variant is
comma-separated ``key=value``: ``batch`` (texts per call), ``threads`` (intra-op threads per call),
``spin`` (0/1: ``session.intra_op.allow_spinning``), ``opt`` (disable/basic/extended/all: the graph optimisation
level), ``workers`` (calls of the session run at once from that many Python threads), ``arena`` (0/1:
the CPU memory arena); ``default`` is the encoders' own settings. Example::

    .venv/bin/python benchmarks/bench_roofline.py --variant default batch=4 batch=12 batch=16
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from kueri import resources
from kueri.cli.script import run_script, script_parser
from kueri.encoders.bert_graph import build_graph, cores, embed_in_batches, open_session
from kueri.parse import PassageReader

SAMPLE = resources.sample() / "passages.jsonl.gz"
HIDDEN, INTERMEDIATE = 384, 1536
#: The linear layers' shapes (inputs K, outputs N) and how many of each one BERT layer has.
LINEAR_SHAPES = (((HIDDEN, HIDDEN), 4), ((HIDDEN, INTERMEDIATE), 1), ((INTERMEDIATE, HIDDEN), 1))
LIMIT_WIDTHS = (128, 256)
VARIANT_KEYS = {"batch", "threads", "spin", "opt", "workers", "arena"}


def linear_flops(pieces: int) -> float:
    """FLOP of one layer's linear layers for a passage of ``pieces`` word pieces."""
    return pieces * 2 * sum(k * n * count for (k, n), count in LINEAR_SHAPES)


def attention_flops(pieces: int) -> float:
    """FLOP of one layer's attention products (Q K^T and the weights times V) for ``pieces`` word pieces."""
    return pieces * 2 * 2 * pieces * HIDDEN


@dataclass
class Subject:
    """An encoder as the benchmark drives it: its token ids per passage, how it pads and embeds a batch, its graph."""

    name: str
    layers: int
    max_pieces: int
    default_batch: int
    encoded: list[list[int]]
    pad: int
    embed: Callable[[np.ndarray], np.ndarray]
    graph: Callable[[], bytes]
    session: Any
    workers: int

    @property
    def order(self) -> list[int]:
        return sorted(range(len(self.encoded)), key=lambda i: len(self.encoded[i]))

    def flops(self, batch: int | None = None) -> float:
        """All passages' FLOP, each at its own length, or (``batch``) at its batch's longest as run."""
        lengths = [len(self.encoded[i]) for i in self.order]
        if batch is not None:
            lengths = [max(lengths[s : s + batch]) for s in range(0, len(lengths), batch)
                       for _ in lengths[s : s + batch]]
        return self.layers * sum(linear_flops(n) + attention_flops(n) for n in lengths)


def subject(name: str, texts: list[str], threads: int | None) -> Subject:
    if name == "minilm":
        from kueri.encoders import minilm

        encoder = minilm.MiniLMEncoder(threads=threads)
        return Subject("minilm", minilm.LAYERS, minilm.MAX_TOKENS, minilm.BATCH,
                       [encoder.tokenizer.encode(t) for t in texts], 0, encoder.weights.embeddings,
                       lambda: build_graph(encoder.weights.encoder), encoder.session, encoder.workers)
    from kueri.encoders import e5

    encoder = e5.E5Encoder(threads=threads)
    return Subject("e5", encoder.weights.layers, e5.MAX_TOKENS, e5.BATCH,
                   [encoder.tokens(e5.PASSAGE_PREFIX + t) for t in texts], encoder.weights.pad,
                   encoder.weights.input_embeddings, lambda: build_graph(encoder.weights.encoder()), encoder.session,
                   encoder.workers)


def parse_variant(text: str) -> dict[str, str]:
    if text == "default":
        return {}
    settings = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
    unknown = set(settings) - VARIANT_KEYS or ({"x"} if len(settings) != len(text.split(",")) else set())
    if unknown:
        raise SystemExit(f"bench_roofline: error: variant {text!r}: not key=value with keys {sorted(VARIANT_KEYS)}")
    return settings


def session_of(model: bytes, settings: dict[str, str]) -> Any:
    """A CPU session of ``model`` as the encoders open it (one intra-op thread), with the variant's settings."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = int(settings.get("threads", 1))
    options.inter_op_num_threads = 1
    if "spin" in settings:
        options.add_session_config_entry("session.intra_op.allow_spinning", settings["spin"])
    if "opt" in settings:
        level = "DISABLE_ALL" if settings["opt"] == "disable" else f"ENABLE_{settings['opt'].upper()}"
        options.graph_optimization_level = getattr(onnxruntime.GraphOptimizationLevel, f"ORT_{level}")
    if "arena" in settings:
        options.enable_cpu_mem_arena = settings["arena"] == "1"
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def embed_all(subject: Subject, session: Any, batch: int, workers: int) -> np.ndarray:
    return embed_in_batches(session, subject.encoded, subject.order, batch, subject.pad, subject.embed, HIDDEN, "",
                            False, workers)


def matmul_limit(workers: int, batch: int, repeat: int) -> dict[tuple[int, int, int], float]:
    """GFLOP/s of onnxruntime's float32 MatMul, [batch, n, K] x a constant [K, N], per (n, K, N), run as the
    encoders run: ``workers`` calls at once, one intra-op thread each."""
    from onnx import TensorProto, helper, numpy_helper

    from kueri.encoders.bert_graph import serialised

    rates = {}
    rng = np.random.default_rng(0)
    for (k, n), _count in LINEAR_SHAPES:
        weight = numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "w")
        graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "limit",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t", k])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "t", n])], [weight])
        session = open_session(serialised(graph), 1)
        for width in LIMIT_WIDTHS:
            x = rng.standard_normal((batch, width, k)).astype(np.float32)
            rates[(width, k, n)] = _gflops(session, x, 2.0 * batch * width * k * n, workers, repeat)
    return rates


def _gflops(session: Any, x: np.ndarray, flop: float, workers: int, repeat: int) -> float:
    """Median GFLOP/s of ``repeat`` timings of about 0.3 s of calls of ``session`` on ``x``, ``workers`` at once."""

    def seconds(calls: int) -> float:
        started = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            for _ in pool.map(lambda _: session.run(None, {"x": x}), range(calls)):
                pass
        return time.perf_counter() - started

    calls = workers * max(1, int(0.3 / max(seconds(workers), 1e-6)))
    return statistics.median(calls * flop / seconds(calls) / 1e9 for _ in range(repeat))


def mixed_limit(rates: dict[tuple[int, int, int], float], width: int) -> float:
    """GFLOP/s of a BERT layer's linear products at ``width`` pieces, each shape at its measured rate."""
    flop = sum(k * n * count for (k, n), count in LINEAR_SHAPES)
    seconds = sum(k * n * count / rates[(width, k, n)] for (k, n), count in LINEAR_SHAPES)
    return flop / seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = script_parser(__doc__, whole_doc=True, quiet=False)
    parser.add_argument("--passages", type=int, default=200, help="sample passages embedded per repetition (200)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="cores used (default: the encoders')")
    parser.add_argument("--encoders", nargs="+", default=["minilm", "e5"], choices=["minilm", "e5"])
    parser.add_argument("--variant", nargs="+", default=["default"],
                        help="settings to compare, A/B alternating (default: the encoders' own)")
    args = parser.parse_args(argv)
    variants = [(text, parse_variant(text)) for text in args.variant]
    texts = [p.contents for _, p in zip(range(args.passages), PassageReader(SAMPLE), strict=False)]

    print(f"{len(texts)} passages of {SAMPLE.name}, {args.repeat} repetitions")
    limits: list[dict[tuple[int, int, int], float]] = []
    print("| encoder | variant | passages | mean pieces | GFLOP/passage | padding adds | passages/s median (min-max) "
          "| passages per CPU s | GFLOP/s | limit GFLOP/s | achieved/limit | bits as the first variant |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.encoders:
        encoder = subject(name, texts, args.threads)
        sessions = []
        for _text, settings in variants:
            session_settings = {k: v for k, v in settings.items() if k not in ("batch", "workers")}
            sessions.append(session_of(encoder.graph(), session_settings) if session_settings
                            else encoder.session)
        seconds: list[list[float]] = [[] for _ in variants]
        cpu: list[list[float]] = [[] for _ in variants]
        results: list[np.ndarray] = [np.empty(0)] * len(variants)
        first = len(limits)
        for _ in range(args.repeat):
            limits.append(matmul_limit(cores(args.threads), encoder.default_batch, 1))  # at each repetition's load
            for index, (_text, settings) in enumerate(variants):
                batch = int(settings.get("batch", encoder.default_batch))
                workers = int(settings.get("workers", encoder.workers))
                started, cpu_started = time.perf_counter(), time.process_time()
                results[index] = embed_all(encoder, sessions[index], batch, workers)
                seconds[index].append(time.perf_counter() - started)
                cpu[index].append(time.process_time() - cpu_started)
        useful = encoder.flops()
        width = min(LIMIT_WIDTHS, key=lambda w, longest=encoder.max_pieces: abs(w - longest))
        limit = statistics.median(mixed_limit(rates, width) for rates in limits[first:])
        pieces = statistics.mean(len(e) for e in encoder.encoded)
        for index, (text, settings) in enumerate(variants):
            batch = int(settings.get("batch", encoder.default_batch))
            padding = encoder.flops(batch) / useful - 1
            rate, per_cpu = (len(texts) / statistics.median(times) for times in (seconds[index], cpu[index]))
            gflops = useful / statistics.median(seconds[index]) / 1e9
            same = np.array_equal(results[index].view(np.uint32), results[0].view(np.uint32))
            print(f"| {name} | {text} | {len(texts)} | {pieces:.1f} | {useful / len(texts) / 1e9:.3f} | "
                  f"{padding:.1%} | {rate:.1f} ({len(texts) / max(seconds[index]):.1f}-"
                  f"{len(texts) / min(seconds[index]):.1f}) | {per_cpu:.1f} | {gflops:.1f} | {limit:.1f} | "
                  f"{gflops / limit:.2f} | "
                  f"{'yes' if same else 'NO'} |", flush=True)
        del encoder, sessions
    print("\nThe limit: onnxruntime float32 MatMul, [B, n, K] x [K, N] (B the encoders' batch), "
          f"{cores(args.threads)} calls at once of one "
          "thread each (as the encoders), measured at each repetition; median (min-max) GFLOP/s:")
    print("| n | K x N | GFLOP/s |\n|---|---|---|")
    for (width, k, n) in limits[0]:
        rates = [measured[(width, k, n)] for measured in limits]
        print(f"| {width} | {k} x {n} | {statistics.median(rates):.1f} ({min(rates):.1f}-{max(rates):.1f}) |")
    for width in LIMIT_WIDTHS:
        rates = [mixed_limit(measured, width) for measured in limits]
        print(f"| {width} | a layer's mix (4 x 384x384, 384x1536, 1536x384) | {statistics.median(rates):.1f} "
              f"({min(rates):.1f}-{max(rates):.1f}) |")
    return 0


if __name__ == "__main__":
    run_script(main)
