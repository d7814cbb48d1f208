"""The ``kueri`` command line: thin, it turns flags into a RunConfig or a stage call.

    kueri index    --corpus PATH --index DIR [--config NAME] [--stoplist NAME|FILE] [--stemmer porter]
    kueri search   --index DIR --topics FILE --output RUN [--config NAME] [--bm25 --k1 --b | --lmd --mu
                   | --tfidf] [--fields contents=1 docT5Query=1] [--filter-objects [MODE]] [--hits N]
    kueri run      --corpus PATH --topics FILE --output RUN [--config NAME] [--workdir DIR]
    kueri tira     --input DIR --output DIR [--config NAME]        (what my-software.sh calls)
    kueri feedback --index DIR --judgments QRELS --output RUN [--escape-terms] [--skip-missing]
    kueri fuse     RUN... --output RUN [--k 30] [--depth 1000]
    kueri rerank   RUN --scores FILE --output RUN
    kueri evaluate RUN... --qrels QRELS
    kueri configs
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from kueri.errors import KueriError


def _analyzer_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("analysis (override the configuration's analyzer)")
    group.add_argument("--stoplist", help="shipped stoplist name (lucene, smart, terrier, kueristop, "
                       "kueristopv2, ...) or a word-per-line file; 'none' for no stop filter")
    group.add_argument("--stemmer", choices=["porter", "none"], help="stemming after the stop filter")
    group.add_argument("--tokenizer", choices=["standard", "letter"], help="letter: as the paper's RF indexes")
    group.add_argument("--analyzer", choices=["baseline", "main"],
                       help="the original's BaselineAnalyzer or MainAnalyzer (possessive + repeated chars)")
    group.add_argument("--possessive", action="store_true", default=None, help="English possessive filter")
    group.add_argument("--repeated-chars", action="store_true", default=None,
                       help="shrink runs of 3+ identical characters to 2 (the original's MultipleCharsFilter)")
    group.add_argument("--synonyms", choices=["wordnet"], help="WordNet synonyms (needs Debian's wordnet-base)")


def _ranking_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("ranking (override the configuration)")
    sim = group.add_mutually_exclusive_group()
    sim.add_argument("--bm25", action="store_true", help="BM25 (default)")
    sim.add_argument("--lmd", action="store_true", help="LM with Dirichlet smoothing")
    sim.add_argument("--tfidf", action="store_true", help="Lucene's classic TF-IDF")
    group.add_argument("--k1", type=float, help="BM25 k1 (1.2)")
    group.add_argument("--b", type=float, help="BM25 b (0.75)")
    group.add_argument("--mu", type=float, help="LM-Dirichlet mu (2000)")
    group.add_argument("--fields", nargs="+", metavar="FIELD=WEIGHT",
                       help="search fields and weights, e.g. contents=2 docT5Query=1 (one field: no boost)")
    group.add_argument("--filter-objects", nargs="?", const="faithful", choices=["off", "faithful", "fixed"],
                       help="require the objects' words (faithful: a stopword object empties the topic, "
                       "as the original; fixed: stopword object words are dropped)")
    group.add_argument("--hits", type=int, help="hits per topic (1000)")
    group.add_argument("--tag", help="run tag (default: the configuration's)")


def _quality_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quality", help="quality rerank source, overriding the configuration's: offline, debater, "
                        "a 'passage_id<TAB>score' file, or none")
    parser.add_argument("--stance-depth", type=int, help="label the stance of the top N hits per topic (0: none)")
    parser.add_argument("--second-stage", metavar="MODEL",
                        help="learned reranker of the top hits, overriding the configuration's: second-stage-v2, "
                        "second-stage-v1, second-stage-lexical-v1, a model file, or none")
    parser.add_argument("--second-stage-depth", type=int, metavar="N", help="hits per topic the second stage reranks")


def _config_from_args(args: argparse.Namespace):  # -> RunConfig
    from kueri.analyze import MAIN_ANALYZER, AnalyzerConfig
    from kueri.config import get_config
    from kueri.search import Similarity

    config = get_config(args.config)
    changes: dict[str, object] = {}
    analyzer = config.analyzer
    if getattr(args, "analyzer", None) == "baseline":
        analyzer = AnalyzerConfig(stoplist="lucene")
    elif getattr(args, "analyzer", None) == "main":
        analyzer = MAIN_ANALYZER
    overrides = {
        "stoplist": getattr(args, "stoplist", None),
        "tokenizer": getattr(args, "tokenizer", None),
        "possessive": getattr(args, "possessive", None),
        "repeated_chars": getattr(args, "repeated_chars", None),
        "synonyms": getattr(args, "synonyms", None),
    }
    stemmer = getattr(args, "stemmer", None)
    analyzer_changes = {k: v for k, v in overrides.items() if v is not None}
    if stemmer is not None:
        analyzer_changes["stemmer"] = None if stemmer == "none" else stemmer
    if analyzer_changes:
        analyzer = AnalyzerConfig(**{**analyzer.__dict__, **analyzer_changes})
    if analyzer != config.analyzer:
        changes["analyzer"] = analyzer

    if hasattr(args, "bm25"):
        sim = config.similarity
        kind = "bm25" if args.bm25 else "lmd" if args.lmd else "tfidf" if args.tfidf else sim.kind
        params = {"k1": args.k1, "b": args.b, "mu": args.mu}
        sim = Similarity(kind, **{k: v if v is not None else getattr(sim, k) for k, v in params.items()})
        if sim != config.similarity:
            changes["similarity"] = sim
        if args.fields:
            changes["fields"] = tuple(_parse_field(f) for f in args.fields)
        if args.filter_objects:
            changes["filter_objects"] = args.filter_objects
        if args.hits is not None:
            changes["hits"] = args.hits
        if args.tag:
            changes["tag"] = args.tag
    stance_depth = getattr(args, "stance_depth", None)
    if stance_depth is not None:
        changes["stance_depth"] = stance_depth or None
    quality = getattr(args, "quality", None)
    if quality:
        changes["rerank"] = None if quality == "none" else quality
    second = getattr(args, "second_stage", None)
    if second:
        changes["second_stage"] = None if second == "none" else second
    if getattr(args, "second_stage_depth", None) is not None:
        changes["second_stage_depth"] = args.second_stage_depth
    return config.with_changes(**changes) if changes else config


def _parse_field(text: str) -> tuple[str, float]:
    name, _, weight = text.partition("=")
    try:
        return name, float(weight) if weight else 1.0
    except ValueError:
        raise KueriError(f"--fields: bad weight in {text!r} (use FIELD=NUMBER)") from None


def cmd_index(args: argparse.Namespace) -> int:
    from kueri.pipeline import index_corpus

    config = _config_from_args(args)
    index_corpus(args.corpus, args.index, config.analyzer, skip_bad=args.skip_bad,
                 progress=not args.quiet, ram_buffer_mb=args.ram_buffer)
    return 0


def _write(run, output: str, tag: str) -> None:
    from kueri.pipeline import log
    from kueri.runfile import write_run

    lines = write_run(run, output, tag)
    log(f"wrote {lines} lines for {len(run)} topics to {output} (tag {tag})")


def cmd_search(args: argparse.Namespace) -> int:
    from kueri.index import LuceneIndex
    from kueri.parse import read_topics
    from kueri.pipeline import search_run, validate_run

    config = _config_from_args(args)
    topics = read_topics(args.topics)
    with LuceneIndex(args.index) as index:
        run = search_run(index, config, topics)
    validate_run(run, topics, config.hits)
    _write(run, args.output, config.run_tag)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from kueri.parse import read_topics
    from kueri.pipeline import run_config

    config = _config_from_args(args)
    topics = read_topics(args.topics)
    run = run_config(config, args.corpus, topics, args.workdir, skip_bad=args.skip_bad, progress=not args.quiet)
    _write(run, args.output, config.run_tag)
    return 0


def find_tira_inputs(input_dir: Path) -> tuple[Path, Path]:
    """``topics.xml`` and the corpus (``passages.jsonl.gz`` or ``.jsonl``) of a TIRA input folder."""
    if not input_dir.is_dir():
        raise KueriError(f"{input_dir}: input folder not found")
    topics = input_dir / "topics.xml"
    if not topics.is_file():
        raise KueriError(f"{input_dir}: no topics.xml")
    for name in ("passages.jsonl.gz", "passages.jsonl"):
        if (input_dir / name).is_file():
            return topics, input_dir / name
    raise KueriError(f"{input_dir}: no passages.jsonl.gz or passages.jsonl")


def cmd_tira(args: argparse.Namespace) -> int:
    from kueri.parse import read_topics
    from kueri.pipeline import log, run_config

    output_dir = Path(args.output)
    run_file = output_dir / "run.txt"
    if run_file.exists():
        run_file.unlink()  # a failure below must not leave an older run looking like this one's
    topics_file, corpus = find_tira_inputs(Path(args.input))
    config = _config_from_args(args)
    log(f"kueri: configuration {config.name} ({config.description})")
    topics = read_topics(topics_file)
    run = run_config(config, corpus, topics, args.workdir, skip_bad=args.skip_bad, progress=not args.quiet)
    output_dir.mkdir(parents=True, exist_ok=True)
    _write(run, str(run_file), config.run_tag)
    missing = [t.number for t in topics if t.number not in run]
    if missing:
        log(f"note: {len(missing)} topic(s) retrieved nothing: {' '.join(missing)}")
    return 0


def cmd_feedback(args: argparse.Namespace) -> int:
    from kueri.feedback import FeedbackConfig, feedback_run
    from kueri.index import LuceneIndex
    from kueri.parse import read_topics
    from kueri.pipeline import validate_run

    config = FeedbackConfig(judgments=args.judgments, escape_terms=args.escape_terms,
                            missing="skip" if args.skip_missing else "error", hits=args.hits)
    topics = read_topics(args.topics) if args.topics else None
    with LuceneIndex(args.index) as index:
        run = feedback_run(index, config, [t.number for t in topics] if topics else None)
    if topics:
        validate_run(run, topics, args.hits)
    _write(run, args.output, args.tag)
    return 0


def cmd_fuse(args: argparse.Namespace) -> int:
    from kueri.fusion import reciprocal_rank_fusion
    from kueri.runfile import read_run_ranked

    runs = [read_run_ranked(path) for path in args.runs]
    _write(reciprocal_rank_fusion(runs, k=args.k, depth=args.depth, tie_order=args.tie_order), args.output, args.tag)
    return 0


def cmd_rerank(args: argparse.Namespace) -> int:
    from kueri.quality import rerank
    from kueri.quality.offline import quality_scores_for
    from kueri.runfile import read_run_with_tag

    run, tag = read_run_with_tag(args.run)
    ids = {hit.doc for hits in run.values() for hit in hits}
    scores = quality_scores_for(args.quality, args.corpus, ids)
    covered = sum(hit.doc in scores for hits in run.values() for hit in hits)
    total = sum(len(hits) for hits in run.values())
    print(f"quality scores for {covered} of {total} hits (the others keep factor 1.0)", file=sys.stderr)
    _write(rerank(run, scores), args.output, args.tag or f"{tag}_reranked")
    return 0


def cmd_configs(args: argparse.Namespace) -> int:
    from kueri.config import CONFIGS

    for name, config in CONFIGS.items():
        paper = f"  (paper nDCG@5 {config.paper_ndcg5:.4f})" if config.paper_ndcg5 else ""
        print(f"{name:14s} {config.description}{paper}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kueri", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, default_config: str = "default") -> None:
        p.add_argument("--config", default=default_config, help="named configuration (see `kueri configs`)")
        p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser("index", help="index a corpus")
    p.add_argument("--corpus", required=True, help=".jsonl/.jsonl.gz file or a folder of them")
    p.add_argument("--index", required=True, help="index folder (replaced)")
    p.add_argument("--skip-bad", action="store_true", help="skip and count bad lines instead of stopping")
    p.add_argument("--ram-buffer", type=float, default=256.0, help="IndexWriter RAM buffer in MB (256)")
    common(p)
    _analyzer_flags(p)
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("search", help="search topics in an index, write a run")
    p.add_argument("--index", required=True)
    p.add_argument("--topics", required=True)
    p.add_argument("--output", required=True)
    common(p)
    _ranking_flags(p)
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("run", help="index (cached) + search a configuration end to end")
    p.add_argument("--corpus", required=True)
    p.add_argument("--topics", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--workdir", help="where indexes are cached (KUERI_WORKDIR, else ./work)")
    p.add_argument("--skip-bad", action="store_true")
    _quality_flag(p)
    common(p)
    _analyzer_flags(p)
    _ranking_flags(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("tira", help="the TIRA entry: IN/topics.xml + IN/passages.jsonl.gz -> OUT/run.txt")
    p.add_argument("-i", "--input", required=True)
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--workdir")
    p.add_argument("--skip-bad", action="store_true")
    _quality_flag(p)
    common(p)
    p.set_defaults(func=cmd_tira)

    p = sub.add_parser("feedback", help="graded relevance feedback from a judgments file (Table 1 rows 16-17)")
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

    p = sub.add_parser("fuse", help="reciprocal rank fusion of run files (rank column, k=30)")
    p.add_argument("runs", nargs="+", metavar="RUN")
    p.add_argument("--output", required=True)
    p.add_argument("--k", type=float, default=30.0)
    p.add_argument("--depth", type=int, default=1000)
    p.add_argument("--tie-order", choices=["java", "first-seen"], default="java",
                   help="order of exact ties: the original's Java HashMap order, or first seen")
    p.add_argument("--tag", default="seupd2122-kueri_rrf")
    p.set_defaults(func=cmd_fuse)

    p = sub.add_parser("rerank", help="multiply scores by argument quality from a score file")
    p.add_argument("run")
    p.add_argument("--quality", "--scores", default="debater",
                   help="quality source: 'offline' (the local model; needs --corpus), 'debater' (the original "
                   "team's Debater scores, shipped; the default) or a 'passage_id<TAB>score' file")
    p.add_argument("--corpus", help="the passages' corpus (for --quality offline)")
    p.add_argument("--output", required=True)
    p.add_argument("--tag", help="default: the input's tag + _reranked")
    p.set_defaults(func=cmd_rerank)

    p = sub.add_parser("configs", help="list the named configurations")
    p.set_defaults(func=cmd_configs)

    from kueri.evaluate import add_evaluate_parser
    from kueri.quality.cli import add_quality_parser
    from kueri.stance.cli import add_stance_parser

    add_evaluate_parser(sub)
    add_quality_parser(sub)
    add_stance_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KueriError as exc:
        print(f"kueri: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("kueri: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
