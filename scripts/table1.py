#!/usr/bin/env python3
"""Reproduce rows of the paper's Table 1, one named configuration each.

The command is ``kueri.devtools.table1``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.devtools.table1 import main

if __name__ == "__main__":
    run_script(main)
