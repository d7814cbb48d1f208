#!/usr/bin/env python3
"""Per-topic nDCG@5 of a run against a reference run, as a PNG: where a system wins and loses.

The command is ``kueri.devtools.per_topic_plot``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.devtools.per_topic_plot import main

if __name__ == "__main__":
    run_script(main)
