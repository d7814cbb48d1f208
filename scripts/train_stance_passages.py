#!/usr/bin/env python3
"""Cross-validate and train kueri's passage-level stance model on the web-passage set (docs/stance.md).

The command is ``kueri.train.stance.passages``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.stance.passages import main

if __name__ == "__main__":
    run_script(main)
