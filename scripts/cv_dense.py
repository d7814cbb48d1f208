#!/usr/bin/env python3
"""Should the default's first stage be hybrid? The second stage's cross-validation, on other candidates.

The command is ``kueri.train.second_stage.dense``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.second_stage.dense import main

if __name__ == "__main__":
    run_script(main)
