#!/usr/bin/env python3
"""Rebuild the stance model, ``kueri/resources/models/stance-v1.npz`` (see :mod:`kueri.stance.model`).

The command is ``kueri.train.stance.v1``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.stance.v1 import main

if __name__ == "__main__":
    run_script(main)
