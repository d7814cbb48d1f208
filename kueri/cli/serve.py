"""``kueri serve``: a page and a JSON API that answer comparative questions (kueri.serve).

    kueri serve (--index DIR | --corpus PATH) [--config NAME ...] [--host 127.0.0.1] [--port 8080] [--workdir DIR]
                [--max-wait SECONDS] [--no-feedback]
"""

from __future__ import annotations

import argparse
from typing import Any

from kueri import resources
from kueri.cli.flags import add_corpus_or_index


def add_parser(subparsers: Any, common: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "serve",
        parents=[common] if common else [],
        help="answer comparative questions in a browser and as JSON (needs kueri[serve])",
        description="Load the index, the models and the JVM once and answer questions: a page at / (the arguments "
        "for each object side by side, with a verdict) and a JSON API at /api/search?q=... . Listens on "
        "localhost unless --host says otherwise.",
    )
    add_corpus_or_index(p, corpus="corpus (.jsonl/.jsonl.gz or a folder of them), indexed into the work folder once",
                        index="an index built by `kueri index` with the configuration's analysis")
    p.add_argument("--config", nargs="+", default=["default"], metavar="NAME",
                   help="configuration(s) offered (see `kueri configs`; automatic ones only); the first is used "
                   "unless a question asks for another (%(default)s)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (%(default)s: this machine only)")
    p.add_argument("--port", type=int, default=8080, help="port (%(default)s; 0: any free one)")
    p.add_argument("--workdir", help="work folder for the index and the passages' embeddings (default: "
                   "KUERI_WORKDIR, else the checkout's work/ or ~/.cache/kueri/work)")
    p.add_argument("--topics", nargs="*", metavar="FILE",
                   help="topics files whose questions are answered with their own <objects> (default: the shipped "
                   "sample's topics.xml, the 50 Touché 2022 topics)")
    embed = p.add_mutually_exclusive_group()
    embed.add_argument("--preembed", dest="preembed", action="store_true", default=None,
                       help="embed every passage in the background from the start (default: when the corpus has "
                       "at most 20,000 passages)")
    embed.add_argument("--no-preembed", dest="preembed", action="store_false",
                       help="embed only the passages questions need")
    p.add_argument("--max-wait", type=float, default=None, metavar="SECONDS",
                   help="longest a question may wait for its answer: a new question that the queue would keep "
                   "longer gets a 503 with Retry-After at once (default 60)")
    p.add_argument("--no-feedback", dest="feedback", action="store_false",
                   help="no 'useful / not useful' buttons, and no feedback.jsonl in the work folder")
    p.set_defaults(func=cmd_serve)
    return p


def cmd_serve(args: argparse.Namespace) -> int:
    from kueri.serve.engine import known_topics
    from kueri.serve.server import serve

    topics_files = args.topics if args.topics is not None else [resources.sample() / "topics.xml"]
    serve(corpus=args.corpus, index=args.index, configs=args.config, host=args.host, port=args.port,
          workdir=args.workdir, topics=known_topics(topics_files), preembed=args.preembed, progress=False,
          max_wait=args.max_wait, feedback=args.feedback)
    return 0
