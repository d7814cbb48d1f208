"""The ``kueri`` command line: thin, it parses flags and hands them to a configuration or a stage.

    kueri index    --corpus PATH --index DIR [--config NAME] [--stoplist NAME|FILE] [--stemmer porter|none] ...
    kueri search   --index DIR --topics FILE --output RUN [--config NAME] [--bm25 --k1 --b | --lmd --mu | --tfidf] ...
    kueri run      --corpus PATH --topics FILE --output RUN [--config NAME] [--workdir DIR]
    kueri tira     --input DIR --output DIR [--config NAME]        (what my-software.sh calls)
    kueri feedback --index DIR --judgments QRELS --output RUN [--escape-terms] [--skip-missing]
    kueri fuse     RUN... --output RUN [--k 30] [--depth 1000]
    kueri rerank   RUN --quality SOURCE --output RUN
    kueri quality  debater|offline --corpus PATH --scores FILE
    kueri stance   RUN (--index DIR | --corpus PATH) --topics FILE --output RUN
    kueri evaluate RUN... --qrels QRELS
    kueri configs | kueri resources [NAME]
    kueri env      [--json]                                        (alias doctor: what is here, what is missing)
    kueri serve    (--corpus PATH | --index DIR) [--config NAME] [--host H] [--port P]   (a page and a JSON API)

Every command takes ``-q/--quiet`` (warnings and errors only, no progress bars), ``-v/--verbose``
(debug messages) and ``--debug`` (a traceback with every error). Logging is configured here, once;
the library only logs. An error is one line naming the file and the cause; the exit code says which
kind (1 input, 2 setup or usage, 3 the machine: disk, permissions, paths; 130/143 SIGINT/SIGTERM).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from kueri.errors import Interrupted, KueriError, environment_problem

log = logging.getLogger("kueri.cli")


class _Formatter(logging.Formatter):
    """Plain messages; warnings and errors say so (``warning: ...``), debug lines name their module."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.levelno >= logging.WARNING:
            return f"{record.levelname.lower()}: {message}"
        if record.levelno <= logging.DEBUG:
            return f"{record.name}: {message}"
        return message


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a message comes (it may be replaced after configuration)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure_logging(quiet: bool = False, verbose: bool = False) -> None:
    """kueri's loggers to stderr, at WARNING (quiet), INFO (the default) or DEBUG (verbose).

    Only the ``kueri`` logger gets a handler (an application embedding kueri configures its own);
    records still propagate to the root logger's handlers, if the application has any.
    """
    handler = _StderrHandler()
    handler.setFormatter(_Formatter())
    logger = logging.getLogger("kueri")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)


def _output_flags(parser: argparse.ArgumentParser, suppress: bool) -> None:
    # On the main parser and on every command, so they may stand before or after the command's name;
    # on the commands a flag not given must not reset what the main parser read.
    default = {"default": argparse.SUPPRESS} if suppress else {}
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only, no progress bars",
                        **default)
    parser.add_argument("-v", "--verbose", action="store_true", help="also debug messages", **default)
    parser.add_argument("--debug", action="store_true", help="a traceback with every error", **default)


def build_parser() -> argparse.ArgumentParser:
    from kueri.cli import env, evaluate, quality, retrieval, serve, stance, tira

    parser = argparse.ArgumentParser(prog="kueri", description=__doc__.split("\n\n")[0])
    _output_flags(parser, suppress=False)
    common = argparse.ArgumentParser(add_help=False)
    _output_flags(common, suppress=True)
    sub = parser.add_subparsers(dest="command", required=True)
    retrieval.add_parsers(sub, common)
    tira.add_parsers(sub, common)
    quality.add_parser(sub, common)
    stance.add_parser(sub, common)
    evaluate.add_parser(sub, common)
    env.add_parser(sub, common)
    serve.add_parser(sub, common)
    return parser


def _stop(signal_number: int, frame: object) -> None:
    raise Interrupted(signal_number)


def signal_behind(exc: BaseException) -> BaseException | None:
    """The ^C or SIGTERM behind ``exc``, when a library made it an error of its own on the way up (pybind11 turns
    any exception raised while its module loads, ours included, into ImportError "initialization failed"), found
    through the exception's causes; else None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt | Interrupted):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def ended(exc: BaseException, debug: bool = False) -> int:
    """The exit code of a command that raised ``exc``, its one line said on stderr; ``exc`` raised again when it is
    a bug (a traceback is then what helps)."""
    stopped = signal_behind(exc)
    if isinstance(stopped, KeyboardInterrupt):
        print("kueri: interrupted; nothing half-written was kept", file=sys.stderr)
        return 130
    if isinstance(stopped, Interrupted):
        print("kueri: stopped by SIGTERM; nothing half-written was kept", file=sys.stderr)
        return stopped.exit_code
    if not isinstance(exc, KueriError | OSError):
        raise exc
    if debug:
        traceback.print_exception(exc)
    error = environment_problem(exc) if isinstance(exc, OSError) else exc
    print(f"kueri: error: {error}", file=sys.stderr)
    return error.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit code says how it ended (see :mod:`kueri.errors`)."""
    args = build_parser().parse_args(argv)
    args.progress = not args.quiet
    configure_logging(args.quiet, args.verbose)
    # SIGTERM unwinds like ^C: partial files are removed on the way out (the JVM runs with -Xrs).
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        return int(args.func(args) or 0)
    except (KueriError, OSError, ImportError, KeyboardInterrupt, Interrupted) as exc:
        return ended(exc, args.debug)
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
