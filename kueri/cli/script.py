"""The command-line boilerplate kueri's scripts and benchmarks share: a parser described by the script's
docstring, logging configured as ``kueri`` configures it, and an error as one line with kueri's exit code.

    from kueri.cli.script import script_parser, run_script

    def main(argv=None) -> int:
        args = script_parser(__doc__).parse_args(argv)   # -q/--quiet included
        ...

    if __name__ == "__main__":
        run_script(main)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from kueri.cli import configure_logging
from kueri.errors import KueriError


def script_parser(doc: str | None, *, whole_doc: bool = False, quiet: bool = True) -> argparse.ArgumentParser:
    """A parser described by ``doc``'s first paragraph (``whole_doc``: all of it, as written), with
    ``-q/--quiet`` (no progress bars, warnings and errors only) unless ``quiet`` is False."""
    doc = doc or ""
    if whole_doc:
        parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    else:
        parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    if quiet:
        parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars; warnings and errors only")
    return parser


def start(args: argparse.Namespace) -> argparse.Namespace:
    """Configure logging for a script's parsed ``args`` (``--quiet``, if it has one); returns ``args``."""
    configure_logging(quiet=bool(getattr(args, "quiet", False)))
    return args


def run_script(main: Callable[[], int | None], name: str | None = None) -> NoReturn:
    """``sys.exit(main())``; a :class:`KueriError` becomes one line (``NAME: error: ...``) and its exit code."""
    name = name or Path(sys.argv[0]).stem
    try:
        code = main()
    except KueriError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    sys.exit(code)
