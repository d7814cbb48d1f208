#!/usr/bin/env python3
"""Would a question's aspect help the ranking? Cross-validated on the Touché 2020/2021 judgments.

The command is ``kueri.train.aspect``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.aspect import main

if __name__ == "__main__":
    run_script(main)
