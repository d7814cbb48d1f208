"""``kueri tira`` (what ``my-software.sh`` runs: any of TIRA's three inputs) and ``kueri rerank`` (given candidates:
TIRA's re-rank input or a run file). Each makes one :class:`~kueri.session.Session` and asks it for the run; given
candidates take one way, :meth:`Session.run_given <kueri.session.Session.run_given>`."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any

from kueri.cli import flags
from kueri.cli.retrieval import write
from kueri.errors import EnvironmentProblem, KueriError
from kueri.files import writable_file, writable_folder

log = logging.getLogger("kueri.cli")


def cmd_tira(args: argparse.Namespace) -> int:
    from kueri.parse import read_topics
    from kueri.parse.tira import FULL_RANK, RE_RANK, detect_input, read_queries, read_rerank
    from kueri.session import Session

    config = flags.config_from(args)
    output_dir = writable_folder(args.output, "output folder")  # before any work: a wrong -o fails at once
    run_file = output_dir / "run.txt"
    if run_file.is_dir():
        raise EnvironmentProblem(f"{run_file}: a folder is in the way of the run file")
    run_file.unlink(missing_ok=True)  # a failure below must not leave an older run looking like this one's
    found = detect_input(Path(args.input))
    ray = flags.ray_of(args)
    log.info("kueri: configuration %s (%s)", config.name, config.description)
    log.info("kueri: %s", config.summary())
    if found.kind == RE_RANK:
        assert found.rerank is not None
        given = read_rerank(found.rerank)
        topics = given.topics
        log.info("kueri: TIRA's re-rank input %s: %d candidates of %d topics", found.rerank,
                 sum(len(hits) for hits in given.run.values()), len(given.run))
        with Session(given.corpus, flags.run_context_of(args), elsewhere=ray) as session:
            run = session.run_given(config, given.run, topics, source=str(found.rerank))
    else:
        assert found.topics is not None and found.corpus is not None
        if found.kind == FULL_RANK:
            log.info("kueri: TIRA's full-rank input: %s and %s", found.topics.name, found.corpus.name)
            topics = read_queries(found.topics)
        else:
            topics = read_topics(found.topics)
        with Session(found.corpus, flags.run_context_of(args), elsewhere=ray) as session:
            run = session.run(config, topics)
    write(run, run_file, config.run_tag)
    if ray is not None:
        ray.forget()  # the finished batches, kept until the run file was written
    missing = [t.number for t in topics if t.number not in run]
    if missing:
        log.info("note: %d topic(s) retrieved nothing: %s", len(missing), " ".join(missing))
    return 0


def cmd_rerank(args: argparse.Namespace) -> int:
    from kueri.parse.tira import RE_RANK, RERANK, detect_input, read_rerank
    from kueri.runfile import read_run
    from kueri.session import Session

    writable_file(args.output, "output file")  # before any work
    source = Path(args.run)
    config = flags.config_from(args)
    log.info("configuration %s: %s", config.name, config.summary())
    if source.is_dir() or source.name.endswith(RERANK):
        found = detect_input(source)
        if found.kind != RE_RANK or found.rerank is None:
            raise KueriError(f"{source}: a folder without {' or '.join(RERANK)}")
        given = read_rerank(found.rerank)
        topics = flags.topics_of(args) if args.topics or args.dataset else given.topics
        run, corpus = given.run, args.corpus or given.corpus
    else:
        if not args.corpus:
            raise KueriError(f"{source}: a run file has no passage texts: give --corpus (or rerank a TIRA "
                             "rerank.jsonl.gz, which has them); kueri rerank runs the later stages of --config over "
                             "its candidates (its scores times argument quality alone: --config row-20)")
        if not (args.topics or args.dataset):
            raise KueriError(f"{source}: a run file has no queries: give --topics or --dataset")
        topics, run, corpus = flags.topics_of(args), read_run(source), args.corpus
    ray = flags.ray_of(args)
    with Session(corpus, flags.run_context_of(args), elsewhere=ray) as session:
        reranked = session.run_given(config, run, topics, source=str(source))
    write(reranked, args.output, config.run_tag)
    if ray is not None:
        ray.forget()  # the finished batches, kept until the run file was written
    return 0


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    add_tira_parser(sub, common)
    add_rerank_parser(sub, common)


def add_tira_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("tira", parents=[common],
                       help="the TIRA entry: the task's files, TIRA's full-rank or re-rank input in IN -> OUT/run.txt")
    # TIRA sets these two variables in its sandbox; -i / -o win over them
    tira_input, tira_output = os.environ.get("TIRA_INPUT_DATASET") or None, os.environ.get("TIRA_OUTPUT_DIR") or None
    p.add_argument("-i", "--input", default=tira_input, required=not tira_input, help="default: $TIRA_INPUT_DATASET")
    p.add_argument("-o", "--output", default=tira_output, required=not tira_output, help="default: $TIRA_OUTPUT_DIR")
    flags.add_workdir_flag(p)
    p.add_argument("--skip-bad", action="store_true", help="skip and count bad lines instead of stopping")
    flags.add_config_flag(p)
    flags.add_stage_flags(p)
    flags.add_ray_flags(p)
    p.set_defaults(func=cmd_tira)


def add_rerank_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("rerank", parents=[common], help="rerank any first stage's candidates (a TIRA rerank.jsonl.gz "
                       "or a run file)",
                       description="INPUT is TIRA's re-rank input (rerank.jsonl[.gz], or a folder holding it: the "
                       "candidates with their texts and queries) or a run file. Its candidates go through the "
                       "configuration's stages after its first: the second stage, quality, stance (--config, default "
                       "the default configuration). The second stage's BM25 features are scored over the index of "
                       "--corpus when given, else over an index of the candidates alone. A run's scores times "
                       "argument quality alone (what this command did without --config before) is --config row-20 "
                       "(Debater quality; --quality for another source) with --corpus and --topics.")
    p.add_argument("run", metavar="INPUT", help="rerank.jsonl[.gz] (or its folder), or a run file")
    p.add_argument("--output", required=True)
    flags.add_config_flag(p)
    p.add_argument("--corpus", help="the passages' corpus: its index gives the texts and the BM25 statistics (a "
                   "run file needs it)")
    topic_source = p.add_mutually_exclusive_group()
    topic_source.add_argument("--topics", help="topics XML (a run file needs them, or --dataset)")
    topic_source.add_argument("--dataset", metavar="ID", help="the topics of an ir_datasets id, e.g. "
                              "clueweb12/touche-2022-task-2")
    p.add_argument("--tag", help="run tag (default: the configuration's)")
    p.add_argument("--skip-bad", action="store_true", help="skip and count bad corpus lines instead of stopping")
    flags.add_workdir_flag(p)
    flags.add_later_stage_flags(p)
    flags.add_ray_flags(p)
    p.add_argument("--scores", dest="quality_rerank", help=argparse.SUPPRESS)  # deprecated: the old name of --quality
    p.set_defaults(func=cmd_rerank)
