#!/usr/bin/env python3
"""Would the stance encoder's "does this text compare the two objects" score help the second stage?

The command is ``kueri.train.second_stage.comparative``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.second_stage.comparative import main

if __name__ == "__main__":
    run_script(main)
