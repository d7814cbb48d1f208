#!/usr/bin/env python3
"""Compile kueri's Java helper (kueri/lucene/java/*.java) into the classes the package ships.

    python scripts/compile_java_helper.py        # or: make java-helper

Run it after editing a ``.java`` file, and commit the classes with the sources: kueri loads only classes
whose stamp (``kueri/lucene/java/classes/sources.sha256``) matches the sources, so users need no JDK
compiler. Needs a JDK's javac (11 or later; the classes target Java 11) and the Lucene jar.
"""

from __future__ import annotations

from kueri.cli.script import run_script, script_parser, start
from kueri.lucene.javahelper import CLASS_DIR, compile_classes
from kueri.lucene.jvm import check_java, find_jar, find_java_home


def main(argv: list[str] | None = None) -> int:
    start(script_parser(__doc__, quiet=False).parse_args(argv))
    java_home = find_java_home()
    check_java(java_home)
    compile_classes(find_jar(), java_home)
    print(f"compiled kueri's Java helper into {CLASS_DIR}")
    return 0


if __name__ == "__main__":
    run_script(main)
