#!/usr/bin/env python3
"""How far the default's nDCG@5 moves when the encoders' embeddings move by a CPU's rounding.

The command is ``kueri.devtools.kernel_noise``'s ``main``: its docstring and ``--help`` say how to use it.
"""

from kueri.cli.script import run_script
from kueri.devtools.kernel_noise import main

if __name__ == "__main__":
    run_script(main)
