"""``kueri index | search | embed | run | feedback | fuse | configs | cache | resources`` (``kueri tira`` and
``kueri rerank``: :mod:`kueri.cli.tira`)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from kueri.cli.flags import (
    add_analyzer_flags,
    add_config_flag,
    add_first_stage_flags,
    add_ranking_flags,
    add_ray_flags,
    add_stage_flags,
    add_workdir_flag,
    config_from,
    ray_of,
    run_context_of,
    topics_of,
)
from kueri.config import RunConfig
from kueri.errors import EnvironmentProblem, KueriError
from kueri.files import human_size, writable_file, writable_folder
from kueri.records import Run, Topic

log = logging.getLogger("kueri.cli")


def write(run: Run, output: str | Path, tag: str) -> None:
    from kueri.runfile import write_run

    lines = write_run(run, output, tag)
    log.info("wrote %d lines for %d topics to %s (tag %s)", lines, len(run), output, tag)


def cmd_index(args: argparse.Namespace) -> int:
    from kueri.pipeline import index_corpus

    config = config_from(args)
    index_corpus(args.corpus, args.index, config.analyzer, run_context_of(args), ram_buffer_mb=args.ram_buffer,
                 ray_address=args.ray, shard_dir=args.shard_dir,
                 chunk_passages=args.chunk_passages)
    return 0


def cmd_embed(args: argparse.Namespace) -> int:
    from kueri import encoders
    from kueri.dense import embed_index
    from kueri.lucene import LuceneIndex
    from kueri.lucene.index import MANIFEST
    from kueri.pipeline import corpus_fingerprint, default_workdir, index_corpus

    names = list(encoders.names()) if "all" in args.encoder else list(dict.fromkeys(args.encoder))
    for name in names:
        available, why = encoders.get(name).is_available()
        if not available:
            raise EnvironmentProblem(why)
    workdir = writable_folder(args.workdir or default_workdir(), "work folder")
    index_dir = Path(args.index)
    if not (index_dir / MANIFEST).is_file():
        if not args.corpus:
            raise KueriError(f"{index_dir}: no kueri index there; give --corpus to index one first")
        index_corpus(args.corpus, index_dir, config_from(args).analyzer, run_context_of(args)).close()
    with LuceneIndex(index_dir) as index:
        if args.corpus:
            wanted = [f["path"] for f in corpus_fingerprint(args.corpus)]
            indexed = [f.get("path") for f in index.manifest.get("corpus", [])]
            if indexed and indexed != wanted:
                raise KueriError(f"{index_dir}: indexed from {', '.join(indexed)}, not from {args.corpus}")
        for name in names:
            report = embed_index(index, name, workdir, chunk_passages=args.chunk_passages, ray_address=args.ray,
                                 progress=args.progress, vectors=not args.store_only)
            log.info("%s", report.summary())
    return 0


def _configured(args: argparse.Namespace) -> tuple[RunConfig, list[Topic]]:
    """The configuration the flags ask for and the topics, once the output file is known to be writable."""
    from kueri.parse import read_topics

    writable_file(args.output, "output file")  # before any work
    return config_from(args), read_topics(args.topics)


def cmd_search(args: argparse.Namespace) -> int:
    from kueri.lucene import LuceneIndex
    from kueri.pipeline import search_run, validate_run

    config, topics = _configured(args)
    log.info("searching %s: %s", args.index, config.summary())
    with LuceneIndex(args.index) as index:
        run = search_run(index, config, topics)
    validate_run(run, topics, config.hits)
    write(run, args.output, config.run_tag)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from kueri.files import writable_folder
    from kueri.pipeline import default_workdir
    from kueri.session import Session

    writable_file(args.output, "output file")  # before any work
    config = config_from(args)
    corpus = args.corpus
    if args.dataset:
        from kueri.irds import load_dataset

        dataset = load_dataset(args.dataset)
        topics = dataset.topics()
        if not corpus:
            corpus = dataset.corpus(writable_folder(args.workdir or default_workdir(), "work folder"))
        log.info("dataset %s: %d topics, corpus %s", args.dataset, len(topics), corpus)
    else:
        if not corpus:
            raise KueriError("give --corpus (or --dataset, whose documents are the corpus)")
        topics = topics_of(args)
    log.info("configuration %s: %s", config.name, config.summary())
    ray = ray_of(args)
    with Session(corpus, run_context_of(args), elsewhere=ray) as session:
        run = session.run(config, topics)
    write(run, args.output, config.run_tag)
    if ray is not None:
        ray.forget()  # the finished batches, kept until the run file was written
    return 0


def cmd_feedback(args: argparse.Namespace) -> int:
    from kueri.lucene import FeedbackConfig, LuceneIndex, feedback_run
    from kueri.parse import read_topics
    from kueri.pipeline import validate_run

    writable_file(args.output, "output file")  # before any work
    config = FeedbackConfig(judgments=args.judgments, escape_terms=args.escape_terms,
                            missing="skip" if args.skip_missing else "error", hits=args.hits)
    topics = read_topics(args.topics) if args.topics else None
    with LuceneIndex(args.index) as index:
        run = feedback_run(index, config, [t.number for t in topics] if topics else None)
    if topics:
        validate_run(run, topics, args.hits)
    write(run, args.output, args.tag)
    return 0


def cmd_fuse(args: argparse.Namespace) -> int:
    from kueri.fusion import reciprocal_rank_fusion
    from kueri.runfile import read_run_ranked

    writable_file(args.output, "output file")  # before any work
    runs = [read_run_ranked(path) for path in args.runs]
    write(reciprocal_rank_fusion(runs, k=args.k, depth=args.depth, tie_order=args.tie_order), args.output, args.tag)
    return 0


def cmd_configs(args: argparse.Namespace) -> int:
    from kueri.config import CONFIGS

    for name, config in CONFIGS.items():
        paper = f"  (paper nDCG@5 {config.paper_ndcg5:.4f})" if config.paper_ndcg5 else ""
        print(f"{name:14s} {config.description}{paper}")
        if args.verbose:
            print(f"{'':14s} {config.summary()}")
    return 0


def cmd_resources(args: argparse.Namespace) -> int:
    from kueri import resources

    if args.name:
        print(resources.path(args.name, *args.parts))
        return 0
    for name, what in resources.FOLDERS.items():
        print(f"{name:10s} {resources.path(name)}  {what}")
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    import time

    from kueri import workfolder
    from kueri.pipeline import default_workdir

    folder = Path(args.workdir) if args.workdir else default_workdir()
    if args.action == "compact":
        for path, result in workfolder.compact(folder):
            if result is None:
                print(f"{path.name}: no whole chunk, left as it is")
            else:
                print(f"{path.name}: {result[0]} chunk files -> {result[1]} ({result[2]} passages)")
        return 0
    if args.prune:
        removed = workfolder.prune(folder, args.older_than, check=True)
        for entry in removed:
            print(f"removed {entry.path.name} ({entry.about}, {human_size(entry.size)})")
        log.info("%s: removed %d entr%s, %s", folder, len(removed), "y" if len(removed) == 1 else "ies",
                 human_size(sum(e.size for e in removed)))
        return 0
    listed = workfolder.entries(folder)
    broken = 0
    print(f"{folder}")
    for entry in listed:
        status = ""
        if args.verify:
            problem = workfolder.verify(entry).problem
            broken += problem is not None
            status = f"  BROKEN: {problem}" if problem else ("  ok" if entry.kind in ("index", "embeddings") else "")
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.last_used))
        size = human_size(entry.size)
        print(f"  {entry.path.name:40s} {entry.kind:10s} {size:>9s}  used {used}  {entry.about}{status}")
    print(f"  {len(listed)} entries, {human_size(sum(e.size for e in listed))}")
    if broken:
        log.warning("%d broken entr%s: a run rebuilds them; `kueri cache --prune` removes them now", broken,
                    "y" if broken == 1 else "ies")
        return 1
    return 0


def _topics_to_run_parser(sub: Any, common: argparse.ArgumentParser, name: str, summary: str, source: str,
                          source_help: str) -> argparse.ArgumentParser:
    """A command that reads topics from ``source`` (an index or a corpus) and writes a run, with --config."""
    p = sub.add_parser(name, parents=[common], help=summary)
    p.add_argument(source, required=True, help=source_help)
    p.add_argument("--topics", required=True, help="topics XML (Touché's format)")
    p.add_argument("--output", required=True, help="the run file to write")
    add_config_flag(p)
    return p


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    _add_index_parsers(sub, common)
    _add_run_parsers(sub, common)
    _add_other_parsers(sub, common)


def _add_index_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """``kueri index``, ``search`` and ``embed``: what works on one index."""
    p = sub.add_parser("index", parents=[common], help="index a corpus")
    p.add_argument("--corpus", required=True, help=".jsonl/.jsonl.gz file or a folder of them")
    p.add_argument("--index", required=True, help="index folder (replaced)")
    p.add_argument("--skip-bad", action="store_true", help="skip and count bad lines instead of stopping")
    p.add_argument("--ram-buffer", type=float, default=256.0, help="IndexWriter RAM buffer in MB (256)")
    p.add_argument("--chunk-passages", type=int, metavar="N",
                   help="passages per shard of a parallel or Ray build (KUERI_CHUNK_PASSAGES, else 50000)")
    p.add_argument("--ray", metavar="ADDRESS", help="build the shards as tasks of a Ray cluster: auto, or the head's "
                   "host:port (needs kueri[ray] on every node)")
    p.add_argument("--shard-dir", metavar="DIR", help="with --ray: a folder every node and this machine see, for the "
                   "shards (default: they come back through Ray's object store)")
    add_config_flag(p)
    add_analyzer_flags(p)
    p.set_defaults(func=cmd_index)

    p = _topics_to_run_parser(sub, common, "search", "search topics in an index, write a run",
                              "--index", "an index folder (kueri index)")
    add_ranking_flags(p)
    add_first_stage_flags(p)
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("embed", parents=[common], help="embed every passage of an index ahead (store and vectors)",
                       description="Embeds every passage of the index DIR with each encoder into the encoder's store "
                       "in the work folder (what the second stage and kueri serve read: every question on that work "
                       "folder is then warm), then writes DIR/vectors-ENCODER from it (Lucene HNSW, dot product of "
                       "unit vectors) for kueri search --dense and the dense and hybrid configurations. Resumable: a "
                       "killed run keeps its finished chunks and the next run embeds only the rest.")
    p.add_argument("--index", required=True, help="a kueri index (built from --corpus first when DIR has none)")
    p.add_argument("--corpus", help=".jsonl/.jsonl.gz file or a folder of them: indexed into DIR when it has no index "
                   "(with --config's analysis), else checked to be the index's corpus")
    from kueri.encoders import names as encoder_names

    p.add_argument("--encoder", nargs="+", choices=[*encoder_names(), "all"], default=[encoder_names()[0]],
                   metavar="ENCODER", help=f"the encoders: {', '.join(encoder_names())} or all (default "
                   f"{encoder_names()[0]})")
    p.add_argument("--chunk-passages", type=int, metavar="N", help="passages per chunk: what a killed run loses at "
                   "most, and one Ray task (512)")
    p.add_argument("--ray", metavar="ADDRESS", help="embed the chunks as tasks of a Ray cluster: auto, or the head's "
                   "host:port (every node needs kueri and the encoders' packages; the model loads from there)")
    p.add_argument("--workdir", help="the work folder whose embeddings stores get the passages (default: kueri's "
                   "work folder, as for kueri run and kueri serve)")
    p.add_argument("--store-only", action="store_true", help="fill the stores only, without the vector indexes "
                   "(enough for the second stage and kueri serve)")
    add_config_flag(p)
    p.set_defaults(func=cmd_embed)


def _add_run_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """``kueri run``, ``feedback`` and ``fuse``: what makes a run."""
    p = sub.add_parser("run", parents=[common], help="index (cached) + search a configuration end to end")
    p.add_argument("--corpus", help=".jsonl/.jsonl.gz file or a folder of them (with --dataset: default its documents)")
    topic_source = p.add_mutually_exclusive_group(required=True)
    topic_source.add_argument("--topics", help="topics XML (Touché's format)")
    topic_source.add_argument("--dataset", metavar="ID", help="topics (and, without --corpus, documents) of an "
                              "ir_datasets id whose data is on this machine, e.g. clueweb12/touche-2022-task-2")
    p.add_argument("--output", required=True, help="the run file to write")
    add_config_flag(p)
    add_workdir_flag(p)
    p.add_argument("--skip-bad", action="store_true", help="skip and count bad lines instead of stopping")
    add_analyzer_flags(p)
    add_ranking_flags(p)
    add_stage_flags(p)
    add_ray_flags(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("feedback", parents=[common],
                       help="graded relevance feedback from a judgments file (Table 1 rows 16-17)")
    p.add_argument("--index", required=True, help="an index (the paper used a letter-tokenizer one)")
    p.add_argument("--judgments", default="kueri-manual",
                   help="qrels 'topic 0 passage grade' with grades 0-3 (default: the team's own, shipped)")
    p.add_argument("--output", required=True)
    p.add_argument("--topics", help="restrict to (and check against) these topics")
    p.add_argument("--escape-terms", action="store_true",
                   help="escape query terms (the original did not: 'text:text:text' truncated its run)")
    p.add_argument("--skip-missing", action="store_true",
                   help="skip judged passages that are not in the index (the original aborted)")
    p.add_argument("--hits", type=int, default=1000)
    p.add_argument("--tag", default="seupd2122-kueri_RF")
    p.set_defaults(func=cmd_feedback)

    p = sub.add_parser("fuse", parents=[common], help="reciprocal rank fusion of run files (rank column, k=30)")
    p.add_argument("runs", nargs="+", metavar="RUN")
    p.add_argument("--output", required=True)
    p.add_argument("--k", type=float, default=30.0)
    p.add_argument("--depth", type=int, default=1000)
    p.add_argument("--tie-order", choices=["java", "first-seen"], default="java",
                   help="order of exact ties: the original's Java HashMap order, or first seen")
    p.add_argument("--tag", default="seupd2122-kueri_rrf")
    p.set_defaults(func=cmd_fuse)


def _add_other_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """``kueri configs``, ``cache`` and ``resources``: what there is."""
    p = sub.add_parser("configs", parents=[common], help="list the named configurations (-v: what each does)")
    p.set_defaults(func=cmd_configs)

    p = sub.add_parser("cache", parents=[common], help="list, verify or prune the work folder's entries",
                       description="The work folder is a cache: every entry is rebuilt when missing or broken. "
                       "This lists its entries (what, size, last used); --verify checks each thoroughly (Lucene's "
                       "CheckIndex for indexes); --prune removes broken entries, unfinished builds and leftovers; "
                       "`kueri cache compact` merges each embeddings store's small chunk files into large ones "
                       "(safe while servers read and add to it).")
    p.add_argument("action", nargs="?", choices=("compact",), help="compact: merge the embeddings stores' chunks")
    add_workdir_flag(p)
    action = p.add_mutually_exclusive_group()
    action.add_argument("--verify", action="store_true", help="check every entry (exit 1 if one is broken)")
    action.add_argument("--prune", action="store_true", help="remove broken, unfinished and leftover entries")
    p.add_argument("--older-than", type=float, metavar="DAYS", help="with --prune: also entries unused for DAYS")
    p.set_defaults(func=cmd_cache)

    p = sub.add_parser("resources", parents=[common], help="where the shipped data is (e.g. the sample: a TIRA input)",
                       description="Without NAME: every shipped folder with its path. With NAME (and parts): that "
                       "path, e.g. `kueri tira -i \"$(kueri resources sample)\" -o out`.")
    p.add_argument("name", nargs="?", help="sample, qrels, models, stoplists, quality or training")
    p.add_argument("parts", nargs="*", help="a file inside it, e.g. touche-task2-2022-relevance.qrels")
    p.set_defaults(func=cmd_resources)
