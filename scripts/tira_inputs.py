#!/usr/bin/env python3
"""Write TIRA's full-rank or re-rank input from the task's files, as TIRA's loader writes it from ir_datasets.

The command is ``kueri.devtools.tira_inputs``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.devtools.tira_inputs import main

if __name__ == "__main__":
    run_script(main)
