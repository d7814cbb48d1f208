#!/usr/bin/env python3
"""Build the web-passage stance set (``kueri/resources/training/web-passages/``) from its writers' and labellers'
files; its README says how the set was made, this script is the mechanical part.

The command is ``kueri.train.web_passages``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.train.web_passages import main

if __name__ == "__main__":
    run_script(main)
