"""``kueri quality ...``: fill argument-quality score files (``passage_id<TAB>score``).

    kueri quality debater --corpus PATH --scores FILE [--batch 500] [--url URL] [--key-file FILE]
    kueri quality offline --corpus PATH --scores FILE [--workers N] [--model FILE]

The main CLI calls :func:`add_quality_parser`; the heavy modules are imported only when a command runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kueri.errors import KueriError


def add_debater_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``kueri quality debater`` (also used by ``python -m kueri.quality.debater``)."""
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
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _cmd_debater(args: argparse.Namespace) -> int:
    from kueri.quality.debater import cmd_debater

    return cmd_debater(args)


def _cmd_offline(args: argparse.Namespace) -> int:
    from kueri.quality.offline import DEFAULT_MODEL, score_corpus

    if args.workers < 1:
        raise KueriError(f"--workers must be at least 1, not {args.workers}")
    summary = score_corpus(args.corpus, args.scores, args.model or DEFAULT_MODEL, workers=args.workers,
                           progress=not args.quiet, skip_bad=args.skip_bad)
    print(f"offline quality: wrote {summary.scored} scores to {args.scores} in {summary.seconds:.1f} s "
          f"({summary.rate:.0f} passages/s, {args.workers} process(es))", file=sys.stderr)
    return 0


def add_quality_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``quality debater`` and ``quality offline`` to the main CLI's subparsers (``func`` set)."""
    parser = subparsers.add_parser("quality", help="fill an argument-quality score file (IBM Debater or offline)")
    commands = parser.add_subparsers(dest="quality_command", required=True)

    p = commands.add_parser("debater", help="score passages with the IBM Debater service (resumable)",
                            description="Score passages with IBM Project Debater's argument-quality service. "
                            "Appends to the score file and sends only passages without a score, so an "
                            "interrupted run is continued by running the same command again.")
    add_debater_arguments(p)
    p.set_defaults(func=_cmd_debater)

    p = commands.add_parser("offline", help="score passages with the shipped offline model (no network)",
                            description="Score passages with the shipped offline model that imitates the "
                            "Debater scores (held-out Spearman 0.87). Writes the score file atomically.")
    p.add_argument("--corpus", required=True, help=".jsonl/.jsonl.gz file or a folder of them")
    p.add_argument("--scores", required=True, help="score file to write (replaced)")
    p.add_argument("--workers", type=int, default=1, help="processes (%(default)s)")
    p.add_argument("--model", help="model file (default: the shipped resources/models/quality-ridge-v1.npz)")
    p.add_argument("--skip-bad", action="store_true", help="skip and count bad corpus lines instead of stopping")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_offline)
    return parser
