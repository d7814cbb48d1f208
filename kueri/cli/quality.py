"""``kueri quality ...``: fill argument-quality score files (``passage_id<TAB>score``).

    kueri quality debater --corpus PATH --scores FILE [--batch 500] [--url URL] [--key-file FILE]
    kueri quality offline --corpus PATH --scores FILE [--workers N] [--model FILE]

The heavy modules (requests, the model) are imported only when a command runs.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from kueri.errors import KueriError

log = logging.getLogger("kueri.cli")


def add_debater_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``kueri quality debater``."""
    parser.add_argument("--corpus", required=True, help=".jsonl/.jsonl.gz file or a folder of them")
    parser.add_argument("--scores", required=True,
                        help="score file 'passage_id<TAB>score' (appended to; passages already in it are skipped)")
    parser.add_argument("--batch", type=int, default=500, help="passages per request (%(default)s)")
    parser.add_argument("--url", help="service URL (default: https://arg-quality.debater.res.ibm.com/score/)")
    parser.add_argument("--key-file", help="file with the API key (default: $DEBATER_API_KEY)")
    # Defaults as RetryPolicy's (a test checks): repeated here so building the parser imports no requests.
    group = parser.add_argument_group("retries (timeouts, connection errors, HTTP 408/429/5xx)")
    group.add_argument("--timeout", type=float, default=120.0, help="seconds per request (%(default)s)")
    group.add_argument("--tries", type=int, default=8, help="tries per batch (%(default)s)")
    group.add_argument("--backoff", type=float, default=2.0,
                       help="first retry delay in seconds, doubled each retry, with jitter (%(default)s)")
    group.add_argument("--max-backoff", type=float, default=120.0, help="cap of that delay (%(default)s)")
    group.add_argument("--max-retry-after", type=float, default=900.0,
                       help="cap of a server's Retry-After in seconds (%(default)s)")
    group.add_argument("--max-failed-batches", type=int, default=3,
                       help="stop after this many failed batches in a row (%(default)s)")
    parser.add_argument("--skip-bad", action="store_true", help="skip and count bad corpus lines instead of stopping")


def cmd_debater(args: argparse.Namespace) -> int:
    from kueri.quality.debater import DEFAULT_URL, DebaterClient, RetryPolicy, read_api_key, score_with_debater

    if args.tries < 1 or args.max_failed_batches < 1:
        raise KueriError("--tries and --max-failed-batches must be at least 1")
    policy = RetryPolicy(tries=args.tries, base_delay=args.backoff, max_delay=args.max_backoff,
                         max_retry_after=args.max_retry_after, timeout=args.timeout,
                         max_failed_batches=args.max_failed_batches)
    client = DebaterClient(read_api_key(args.key_file), url=args.url or DEFAULT_URL, policy=policy)
    summary = score_with_debater(args.corpus, args.scores, client, batch_size=args.batch,
                                 progress=args.progress, skip_bad=args.skip_bad)
    if summary.failed or summary.not_sent:
        log.warning("%d passages have no score yet: run the same command again to send only those",
                    summary.failed + summary.not_sent)
        return 1
    return 0


def cmd_offline(args: argparse.Namespace) -> int:
    from kueri.quality.offline import DEFAULT_MODEL, score_corpus

    if args.workers < 1:
        raise KueriError(f"--workers must be at least 1, not {args.workers}")
    summary = score_corpus(args.corpus, args.scores, args.model or DEFAULT_MODEL, workers=args.workers,
                           ray_address=args.ray,
                           progress=args.progress, skip_bad=args.skip_bad)
    log.info("offline quality: wrote %d scores to %s in %.1f s (%.0f passages/s, %d process(es))", summary.scored,
             args.scores, summary.seconds, summary.rate, args.workers)
    return 0


def add_parser(subparsers: Any, common: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add ``quality debater`` and ``quality offline`` to the main CLI's subparsers (``func`` set)."""
    parents = [common] if common else []
    parser = subparsers.add_parser("quality", parents=parents,
                                   help="fill an argument-quality score file (IBM Debater or offline)")
    commands = parser.add_subparsers(dest="quality_command", required=True)

    p = commands.add_parser("debater", parents=parents, help="score passages with the IBM Debater service (resumable)",
                            description="Score passages with IBM Project Debater's argument-quality service. "
                            "Appends to the score file and sends only passages without a score, so an "
                            "interrupted run is continued by running the same command again.")
    add_debater_arguments(p)
    p.set_defaults(func=cmd_debater)

    p = commands.add_parser("offline", parents=parents,
                            help="score passages with the shipped offline model (no network)",
                            description="Score passages with the shipped offline model that imitates the "
                            "Debater scores (held-out Spearman 0.87). Writes the score file atomically.")
    p.add_argument("--corpus", required=True, help=".jsonl/.jsonl.gz file or a folder of them")
    p.add_argument("--scores", required=True, help="score file to write (replaced)")
    p.add_argument("--workers", type=int, default=1, help="processes (%(default)s)")
    p.add_argument("--ray", metavar="ADDRESS", help="score as tasks of a Ray cluster (auto, or the head's host:port; "
                   "needs kueri[ray] on every node): the same file")
    p.add_argument("--model", help="model file (default: the shipped quality-ridge-v1.npz)")
    p.add_argument("--skip-bad", action="store_true", help="skip and count bad corpus lines instead of stopping")
    p.set_defaults(func=cmd_offline)
    return parser
