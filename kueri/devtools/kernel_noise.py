"""How far the default's nDCG@5 moves when the encoders' embeddings move by a CPU's rounding.

    .venv/bin/python scripts/kernel_noise.py --workdir work --sigma 1e-7 3e-4 --trials 20

Runs row 15 and the default's second stage on the shipped sample (the embeddings from the work
folder's cache, so run the default there first: ``./my-software.sh -i kueri/resources/sample -o out -w
work``), then again ``--trials`` times with every passage and query embedding moved by Gaussian noise of
standard deviation ``--sigma`` per dimension (and made unit length again): a stand-in for a CPU whose
kernels round differently (scripts/compare_kernels.py measures how much). Prints, per sigma, nDCG@5 on
the 2022 judgments (measuring only) and how much of the ranking moved. docs/reproducibility.md has the
results and why the suite's tolerances follow from them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kueri import resources
from kueri.cli.script import script_parser
from kueri.config import get_config
from kueri.evaluate import evaluate_run
from kueri.parse import read_topics
from kueri.pipeline import cached_index, search_run
from kueri.records import Run
from kueri.runcontext import RunContext
from kueri.runfile import read_qrels
from kueri.second_stage import load_encoders, second_stage
from kueri.second_stage.candidates import TextEncoder

SAMPLE = resources.sample()
QRELS = resources.path("qrels", "touche-task2-2022-relevance.qrels")


class Noisy:
    """An encoder whose embeddings are moved by Gaussian noise and made unit length again."""

    def __init__(self, encoder: TextEncoder, sigma: float, rng: np.random.Generator) -> None:
        self.encoder, self.sigma, self.rng, self.dimension = encoder, sigma, rng, encoder.dimension

    def _moved(self, vectors: np.ndarray) -> np.ndarray:
        moved = vectors + self.rng.normal(0.0, self.sigma, vectors.shape).astype(np.float32)
        return moved / np.sqrt((moved * moved).sum(axis=1, keepdims=True))

    def queries(self, texts: list[str]) -> np.ndarray:
        return self._moved(self.encoder.queries(texts))

    def passages(self, texts: list[str]) -> np.ndarray:
        return self._moved(self.encoder.passages(texts))


def top(run: Run, qid: str, depth: int = 5) -> list[str]:
    return [hit.doc for hit in run[qid][:depth]]


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, whole_doc=True, quiet=False)
    parser.add_argument("--workdir", type=Path, required=True, help="a work folder where the default ran")
    parser.add_argument("--sigma", type=float, nargs="+", default=[1e-7, 3e-4])
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args(argv)
    topics = read_topics(SAMPLE / "topics.xml")
    config = get_config("row-15")
    index = cached_index(SAMPLE / "passages.jsonl.gz", config.analyzer, RunContext(args.workdir, progress=False))
    lexical = search_run(index, config, topics)
    default = get_config("default")
    stage = {"model": default.second_stage, "cascade": default.second_stage_cascade}  # its cascade, as it runs
    encoders = load_encoders({"minilm", "e5"}, cache_dir=args.workdir)
    qrels = read_qrels(QRELS)
    reference = second_stage(lexical, topics, index, encoders=encoders, **stage)
    base = evaluate_run(reference, qrels)["nDCG@5"]
    print(f"no noise: nDCG@5 {base:.4f}")
    print("| sigma | trials | nDCG@5 min / median / max | largest change | topics whose top 5 changed (mean) "
          "| share of the top-5 passages kept (lowest) |")
    print("|---|---|---|---|---|---|")
    for sigma in args.sigma:
        rng = np.random.default_rng(0)
        figures, changed, kept = [], [], []
        for _ in range(args.trials):
            noisy = {name: Noisy(encoder, sigma, rng) for name, encoder in encoders.items()}
            run = second_stage(lexical, topics, index, encoders=noisy, **stage)
            figures.append(evaluate_run(run, qrels)["nDCG@5"])
            changed.append(sum(top(run, qid) != top(reference, qid) for qid in reference))
            kept.append(sum(len(set(top(run, q)) & set(top(reference, q))) for q in reference)
                        / sum(len(top(reference, q)) for q in reference))
        print(f"| {sigma:.0e} | {args.trials} | {min(figures):.4f} / {np.median(figures):.4f} / {max(figures):.4f} "
              f"| {max(abs(f - base) for f in figures):.4f} | {np.mean(changed):.1f} of {len(reference)} "
              f"| {min(kept):.3f} |")
    index.close()
    return 0

