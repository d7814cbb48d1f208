#!/usr/bin/env python3
"""Rebuild the offline argument-quality model, ``kueri/resources/models/quality-ridge-v1.npz``.

The command is ``kueri.train.quality``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.quality import main

if __name__ == "__main__":
    run_script(main)
