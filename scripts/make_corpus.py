#!/usr/bin/env python3
"""Generate a deterministic synthetic corpus in the official Touché 2022 Task 2 passage format.

The command is ``kueri.devtools.corpus``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.devtools.corpus import main

if __name__ == "__main__":
    run_script(main)
