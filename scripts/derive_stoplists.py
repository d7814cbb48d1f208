#!/usr/bin/env python3
"""Derive the kueristop and kueristopv2 stoplists from a corpus and topics, and compare them with the shipped ones.

The command is ``kueri.train.stoplists``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.stoplists import main

if __name__ == "__main__":
    run_script(main)
