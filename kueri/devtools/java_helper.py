"""Compile kueri's Java helper (kueri/lucene/java/*.java) into the classes the package ships.

    python scripts/compile_java_helper.py        # or: make java-helper

Run it after editing a ``.java`` file, and commit the classes with the sources: kueri loads only classes
whose stamp (``kueri/lucene/java/classes/sources.sha256``) matches the sources, so users need no JDK
compiler. Needs a JDK's javac (11 or later; the classes target Java 11) and the Lucene jar.
"""

from __future__ import annotations

from kueri.cli.script import script_parser, start
from kueri.lucene import compile_java_helper


def main(argv: list[str] | None = None) -> int:
    start(script_parser(__doc__, quiet=False).parse_args(argv))
    print(f"compiled kueri's Java helper into {compile_java_helper()}")
    return 0

