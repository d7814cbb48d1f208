#!/usr/bin/env python3
"""Fine-tune the passage stance model's top encoder layer with its head on whole passages (docs/stance.md).

The command is ``kueri.train.stance.tune``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.stance.tune import main

if __name__ == "__main__":
    run_script(main)
