"""``kueri stance``: fill the stance column of a run file with the shipped stance model.

    kueri stance RUN (--index DIR | --corpus PATH) --topics FILE --output RUN [--depth N|all] [--model MODEL]
                 [--tag TAG] [--priors F S N NO] [--neutral-gate X] [--explain FILE]

The model is loaded only when the command runs.
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from kueri.cli.flags import add_corpus_or_index
from kueri.errors import deprecated
from kueri.stages import ALL, depth_flag
from kueri.stance.family import DEFAULT, MODELS
from kueri.stance.label import DEFAULT_DEPTH

log = logging.getLogger("kueri.cli")


def add_parser(subparsers: Any, common: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add ``kueri stance`` to the main CLI's subparsers; it dispatches to :func:`cmd_stance` (``func``)."""
    p = subparsers.add_parser(
        "stance",
        parents=[common] if common else [],
        help="label the top hits of a run FIRST / SECOND / NEUTRAL / NO (offline model)",
        description="Fill the stance column of a run: the top --depth hits of every topic get FIRST (pro the "
        "first object of the topic's <objects>), SECOND, NEUTRAL or NO; ranking and scores are unchanged, "
        "deeper hits keep their stance (Q0 in a fresh run, evaluated as NO).",
    )
    p.add_argument("run", metavar="RUN", help="run file to label (.gz allowed)")
    add_corpus_or_index(p, corpus="the run's corpus, .jsonl/.jsonl.gz file or a folder of them",
                        index="index of the run's corpus (passage texts are read from it)")
    p.add_argument("--topics", required=True, help="topics file (the objects of each topic)")
    p.add_argument("--output", required=True, help="labelled run file to write")
    p.add_argument("--depth", type=depth_flag, default=DEFAULT_DEPTH,
                   help=f"hits labelled per topic: N or {ALL} (every hit) (%(default)s)")
    p.add_argument("--model", default=DEFAULT, help="stance model: "
                   + "; ".join(f"{name}: {model.summary}" for name, model in MODELS.items())
                   + "; or a model file (default %(default)s)")
    p.add_argument("--tag", help="run tag (default: the input's)")
    p.add_argument("--priors", type=float, nargs=4, metavar=("FIRST", "SECOND", "NEUTRAL", "NO"),
                   help="target class priors of the decision (default: the model's)")
    p.add_argument("--neutral-gate", type=float, metavar="X",
                   help="NEUTRAL needs a sentence comparing the objects with probability >= X, else NO; "
                   "0 turns the gate off (default: the model's, 0.5)")
    p.add_argument("--explain", metavar="FILE",
                   help="also write, as JSON lines, each labelled hit's label and the sentence that decided it "
                   "(topic, rank, doc, stance, sentence; several times slower than labelling)")
    p.add_argument("--skip-bad", action="store_true", help="skip bad corpus lines instead of stopping (--corpus)")
    p.add_argument("--workers", type=int, help="processes labelling topics side by side (default: KUERI_WORKERS, "
                   "else 2 on 2+ cores): the same labels")
    p.add_argument("--ray", metavar="ADDRESS", help="label the topics as tasks of a Ray cluster (auto, or the head's "
                   "host:port; needs kueri[ray] on every node): the same labels")
    p.set_defaults(func=cmd_stance)
    return p


def cmd_stance(args: argparse.Namespace) -> int:
    from kueri.parse import read_topics
    from kueri.processes import resolve_workers
    from kueri.runfile import read_run_with_tag, write_lines_atomic, write_run
    from kueri.stance.family import load_model
    from kueri.stance.label import (
        LabelSummary,
        corpus_texts,
        explain_run,
        index_texts,
        label_run,
        label_run_on_ray,
        needed_ids,
    )

    if args.depth == 0:
        deprecated("--depth 0", f"--depth {ALL}")
    depth = None if args.depth in (ALL, 0) else args.depth
    workers = resolve_workers(args.workers)
    model = load_model(args.model)  # fail before reading anything large
    if args.priors is not None or args.neutral_gate is not None:
        model = model.with_decision(args.priors, args.neutral_gate)
    run, tag = read_run_with_tag(args.run)
    topics = read_topics(args.topics)
    summary = LabelSummary()

    def label_with(texts: Any) -> Any:
        if args.explain:  # before the run file: an explanation that fails leaves no half of the output
            explained = (json.dumps(line, ensure_ascii=False) + "\n"
                         for line in explain_run(run, topics, texts, depth, model))
            log.info("stance: wrote %d explanations to %s", write_lines_atomic(args.explain, explained), args.explain)
        if args.ray:  # the same labels, each topic a task of the cluster
            return label_run_on_ray(run, topics, texts, depth, model, args.ray, summary)
        return label_run(run, topics, texts, depth, model, summary, workers=workers)

    if args.index:
        from kueri.lucene import LuceneIndex

        with LuceneIndex(args.index) as index:
            labelled = label_with(index_texts(index))
    else:
        labelled = label_with(corpus_texts(args.corpus, needed_ids(run, depth), skip_bad=args.skip_bad))
    lines = write_run(labelled, args.output, args.tag or tag or "kueri_stance")
    counts = " ".join(f"{label} {n}" for label, n in (summary.counts or {}).items())
    log.info("stance: labelled %d hits in %.1f s (%.0f passages/s): %s; wrote %d lines to %s", summary.labelled,
             summary.seconds, summary.rate, counts, lines, args.output)
    return 0
