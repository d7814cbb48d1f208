#!/usr/bin/env python3
"""Compile kueri's Java helper (kueri/lucene/java/*.java) into the classes the package ships.

The command is ``kueri.devtools.java_helper``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.devtools.java_helper import main

if __name__ == "__main__":
    run_script(main)
