"""``kueri evaluate``: measures of run files as a table (stdout) or JSON lines."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from kueri.evaluate import (
    DEFAULT_MEASURES,
    evaluate_run,
    format_per_topic,
    format_table,
    parse_measure,
    restrict_qrels,
    restrict_run,
)
from kueri.runfile import read_qrels, read_run, read_stance_qrels

log = logging.getLogger("kueri.cli")


def run_name(path: str) -> str:
    """A run's display name: its file name without ``.gz`` and ``.txt``/``.run``/``.trec``."""
    name = Path(path).name
    for suffix in (".gz", ".txt", ".run", ".trec"):
        name = name.removesuffix(suffix)
    return name or path


def add_parser(subparsers: Any, common: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add ``kueri evaluate`` to an argparse subparsers object; it dispatches to
    :func:`run_evaluate` through ``args.func``."""
    p = subparsers.add_parser(
        "evaluate",
        parents=[common] if common else [],
        help="nDCG@5 & co. (trec_eval semantics) and stance macro-F1 of run files",
        description="Evaluate run files as trec_eval does without -c: the mean is over the "
        "topics in both the run and the qrels.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run files (.gz allowed)")
    judgments = p.add_mutually_exclusive_group(required=True)
    judgments.add_argument("--qrels", help="relevance qrels 'qid 0 doc grade'")
    judgments.add_argument("--dataset", metavar="ID", help="the qrels of an ir_datasets id whose data is on this "
                           "machine: relevance, and quality and stance where it has them (e.g. "
                           "clueweb12/touche-2022-task-2)")
    p.add_argument("--stance-qrels", help="stance qrels 'qid 0 doc LABEL': adds stance macro-F1")
    p.add_argument("--measures", nargs="+", default=list(DEFAULT_MEASURES), metavar="MEASURE",
                   help=f"ir-measures names (default: {' '.join(DEFAULT_MEASURES)})")
    p.add_argument("--per-topic", action="store_true", help="also the value of every topic")
    p.add_argument("--float-scores", action="store_true",
                   help="compare scores at C float precision, exactly as trec_eval does "
                   "(default: full double precision)")
    p.add_argument("--corpus", help="restrict runs and qrels to the passages of this corpus (.jsonl[.gz] or "
                   "folder): what a corpus smaller than the official one can be measured against")
    p.add_argument("--json", action="store_true", help="one JSON object per run and line")
    p.set_defaults(func=run_evaluate)
    return p


def run_evaluate(args: argparse.Namespace) -> int:
    """``kueri evaluate``: print a table (or JSON lines) of the runs' measures; return 0."""
    measures = list(args.measures or DEFAULT_MEASURES)
    for name in measures:  # fail on a bad name before reading anything
        parse_measure(name)
    quality_qrels: dict[str, dict[str, int]] | None = None
    stance_qrels: Any = None
    if getattr(args, "dataset", None):
        from kueri.irds import load_dataset

        qrels, quality_qrels, stance_qrels = load_dataset(args.dataset).judgments()
    else:
        qrels = read_qrels(args.qrels)
    corpus_ids: set[str] | None = None
    if getattr(args, "corpus", None):
        from kueri.parse import PassageReader

        corpus_ids = {passage.id for passage in PassageReader(args.corpus)}
        qrels = restrict_qrels(qrels, corpus_ids)
        quality_qrels = restrict_qrels(quality_qrels, corpus_ids) if quality_qrels is not None else None
    stance_path = getattr(args, "stance_qrels", None)
    if stance_path:
        stance_qrels = read_stance_qrels(stance_path)
    quality_names = [f"quality_{name}" for name in measures] if quality_qrels is not None else []
    per_topic = bool(getattr(args, "per_topic", False))
    float_scores = bool(getattr(args, "float_scores", False))
    as_json = bool(getattr(args, "json", False))
    results: list[dict[str, Any]] = []
    for path in args.runs:
        result: dict[str, Any] = {"run": run_name(path)}
        run = read_run(path)
        if corpus_ids is not None:
            run = restrict_run(run, corpus_ids)
        result.update(evaluate_run(run, qrels, measures, stance_qrels, per_topic, float_scores))
        if quality_qrels is not None:  # the same measures, with the quality grades as the gain
            quality = evaluate_run(run, quality_qrels, measures, float_scores=float_scores)
            result.update({f"quality_{name}": quality[name] for name in measures})
        if result["skipped_topics"]:
            log.info("note: %s: %d topic(s) without qrels are not evaluated (as trec_eval)", path,
                     result["skipped_topics"])
        results.append(result)
        if as_json:  # as soon as it is known: a long list of runs shows progress
            print(json.dumps(result), flush=True)
    if not as_json:
        print(format_table(results, [*measures, *quality_names]))
        if per_topic:
            for result in results:
                print()
                print(format_per_topic(result["run"], result["per_topic"], measures))
    return 0
