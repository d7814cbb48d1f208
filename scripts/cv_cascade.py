#!/usr/bin/env python3
"""Cross-validate cascades: the encoders score only a cheaper model's top candidates (half the encoders' cost).

The command is ``kueri.train.second_stage.cascade``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.second_stage.cascade import main

if __name__ == "__main__":
    run_script(main)
