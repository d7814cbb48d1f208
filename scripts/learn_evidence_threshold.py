#!/usr/bin/env python3
"""Learn the relevance score below which ``kueri serve`` says the corpus holds little on a question.

The command is ``kueri.train.evidence``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.evidence import main

if __name__ == "__main__":
    run_script(main)
