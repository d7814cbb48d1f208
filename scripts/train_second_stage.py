#!/usr/bin/env python3
"""Train the second stage (``kueri/resources/models/second-stage-v2.json``) on the earlier years' judgments.

The command is ``kueri.train.second_stage.train``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.second_stage.train import main

if __name__ == "__main__":
    run_script(main)
