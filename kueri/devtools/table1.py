"""Reproduce rows of the paper's Table 1, one named configuration each.

    python scripts/table1.py --all --qrels kueri/resources/qrels/touche-task2-2022-relevance.qrels
    python scripts/table1.py --row 7 --row 15 --corpus passages.jsonl.gz --topics topics.xml --out runs/

Writes DIR/row-NN.txt (Touché run format) for each row; indexes are built once per analyzer and
cached in --workdir. With --qrels it prints: row, configuration, topics, nDCG@5 against the qrels
as given, nDCG@5 with the qrels restricted to the passages of the corpus (what a corpus smaller
than the official one can reach: the "subset" figures of the data README), and the paper's
official nDCG@5. Defaults: the shipped real sample, the official topics, the team's judgments
(rows 16, 17 and those built on them) and the team's Debater score file (rows 18-24).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from kueri import resources
from kueri.cli.script import script_parser, start
from kueri.config import TABLE1, RunConfig, get_config
from kueri.evaluate import evaluate_run, restrict_qrels
from kueri.parse import read_topics
from kueri.pipeline import Pipeline
from kueri.runcontext import RunContext
from kueri.runfile import read_qrels, write_run

SAMPLE = resources.sample()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = script_parser(__doc__)
    rows = parser.add_mutually_exclusive_group(required=True)
    rows.add_argument("--row", type=int, action="append", choices=range(1, 25), metavar="N",
                      help="a row number 1-24 (repeatable)")
    rows.add_argument("--all", action="store_true", help="rows 1-24")
    parser.add_argument("--corpus", default=str(SAMPLE / "passages.jsonl.gz"))
    parser.add_argument("--topics", default=str(SAMPLE / "topics.xml"))
    parser.add_argument("--out", default="table1-runs", help="folder for row-NN.txt")
    parser.add_argument("--workdir", help="index cache (default: KUERI_WORKDIR or ./work)")
    parser.add_argument("--rf-qrels", help="judgments for the RF rows (default: the team's, shipped)")
    parser.add_argument("--quality-scores", help="quality score file for rows 18-24 (default: the team's)")
    parser.add_argument("--qrels", help="relevance qrels: print nDCG@5 per row")
    return parser.parse_args(argv)


def adapter(args: argparse.Namespace):
    def adapt(config: RunConfig) -> RunConfig:
        if args.rf_qrels and config.feedback:
            config = replace(config, feedback=replace(config.feedback, judgments=args.rf_qrels))
        if args.quality_scores and config.quality_rerank:
            config = replace(config, quality_rerank=args.quality_scores)
        return config

    return adapt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start(args)
    configs = TABLE1 if args.all else [get_config(str(n)) for n in args.row]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    topics = read_topics(args.topics)
    qrels = read_qrels(args.qrels) if args.qrels else None
    results = []
    corpus_qrels = None
    started = time.perf_counter()
    context = RunContext(args.workdir, progress=not args.quiet)
    with Pipeline(args.corpus, topics, context, adapt=adapter(args)) as pipeline:
        for config in configs:
            run = pipeline.run(config)
            path = out / f"{config.name}.txt"
            lines = write_run(run, path, config.run_tag)
            print(f"{config.name}: {lines} lines, {len(run)} topics -> {path}", file=sys.stderr)
            if qrels is not None:
                corpus_qrels = corpus_qrels or restrict_qrels(qrels, pipeline.corpus_ids())
                results.append((config, len(run), evaluate_run(run, qrels)["nDCG@5"],
                                evaluate_run(run, corpus_qrels)["nDCG@5"]))
        expanded = pipeline.expanded_passages()
    seconds = time.perf_counter() - started
    if results:
        print(f"{'row':7s} {'configuration':78s} {'topics':>6s} {'nDCG@5':>7s} {'corpus':>7s} {'paper':>7s}")
        for config, n_topics, ndcg, corpus_ndcg in results:
            paper = f"{config.paper_ndcg5:.4f}" if config.paper_ndcg5 is not None else ""
            print(f"{config.name:7s} {config.description[:78]:78s} {n_topics:6d} {ndcg:7.4f} "
                  f"{corpus_ndcg:7.4f} {paper:>7s}")
        print("nDCG@5: the qrels as given; corpus: qrels restricted to the corpus' passages; paper: official, "
              "on the full DocT5Query-expanded corpus.")
        if not expanded:
            print("This corpus has no DocT5Query expansion: the docT5Query field is empty (rows 11-14 weight it).")
    print(f"{len(configs)} row(s) in {seconds:.1f} s", file=sys.stderr)
    return 0

