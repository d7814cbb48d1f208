"""Write TIRA's full-rank or re-rank input from the task's files, as TIRA's loader writes it from ir_datasets.

    .venv/bin/python scripts/tira_inputs.py full-rank --topics T.xml --corpus P.jsonl.gz --output DIR
    .venv/bin/python scripts/tira_inputs.py re-rank --topics T.xml --corpus P.jsonl.gz --run RUN --output DIR

full-rank: DIR/documents.jsonl, DIR/queries.jsonl, DIR/metadata.json. re-rank: DIR/rerank.jsonl.gz, the top
--depth hits of each topic of RUN with their texts. --only-topics keeps some topics; with --run, full-rank keeps
only the passages among the run's top --depth of those topics (a small fixture). kueri reads both kinds
(``kueri tira``, ``my-software.sh``, ``kueri rerank``); the field names are those of TIRA's
``IrDatasetsLoader`` for the ir_datasets id clueweb12/touche-2022-task-2.
"""

from __future__ import annotations

from pathlib import Path

from kueri.cli.script import script_parser, start
from kueri.errors import KueriError
from kueri.parse import read_topics
from kueri.parse.tira import corpus_records, write_fullrank_input, write_rerank_input
from kueri.runfile import read_run


def main(argv: list[str] | None = None) -> int:
    parser = script_parser(__doc__, whole_doc=True)
    parser.add_argument("kind", choices=["full-rank", "re-rank"])
    parser.add_argument("--topics", required=True, help="the task's topics.xml")
    parser.add_argument("--corpus", required=True, help="the task's passages (.jsonl or .jsonl.gz)")
    parser.add_argument("--output", required=True, help="the folder to write (made if missing)")
    parser.add_argument("--run", help="a run file: the candidates (re-rank), or the passages to keep (full-rank)")
    parser.add_argument("--depth", type=int, default=1000, help="hits per topic of --run (1000, as TIRA's loader)")
    parser.add_argument("--only-topics", nargs="+", metavar="QID", help="keep only these topics")
    args = start(parser.parse_args(argv))
    topics = read_topics(args.topics)
    if args.only_topics:
        topics = [t for t in topics if t.number in set(args.only_topics)]
    numbers = {t.number for t in topics}
    run = {qid: hits[: args.depth] for qid, hits in read_run(args.run).items() if qid in numbers} if args.run else None
    wanted = {hit.doc for hits in run.values() for hit in hits} if run is not None else None
    output = Path(args.output)
    if args.kind == "full-rank":
        passages = (r for r in corpus_records(args.corpus) if wanted is None or r["id"] in wanted)
        write_fullrank_input(output, topics, passages)
        print(f"wrote TIRA's full-rank input to {output}")
        return 0
    if run is None:
        raise KueriError("re-rank needs --run (the candidates)")
    texts = {r["id"]: r["contents"] for r in corpus_records(args.corpus) if r["id"] in wanted}
    missing = sorted(wanted - set(texts))
    if missing:
        raise KueriError(f"{args.corpus}: {len(missing)} passage(s) of the run are not in it, e.g. {missing[0]}")
    print(f"wrote {write_rerank_input(output, topics, run, texts, args.depth)}")
    return 0

